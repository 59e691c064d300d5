"""The backlog test in upstream form.

patch(): a 'git format-patch' patch, generated from guest/, that adds
the selftest to the kernel's tools/testing/selftests/net/: the test and
its helpers (SHIPPED, copied under their own names), the Makefile
lines that build it and the config options it needs.

check(): apply that patch to a fresh copy of the extracted kernel tree,
build the test with the kernel's own net/Makefile and lib.mk, run it
once on this machine, and run scripts/checkpatch.pl --strict on the
patch.
"""
import email.parser
import email.utils
import os
import re
import shutil
import subprocess
import tempfile
import textwrap
import time

from . import kernel
from . import suite, workspace
from .common import TOP, KgateError, atomic_write, clean_env, log, need_tools, read_text

NET = "tools/testing/selftests/net"
PATCH_NAME = "0001-selftests-net-add-tcp-backlog-coalescing-test.patch"
PROGRAM = "backlog_coalesce"

# The guest/ files that go to selftests/net/, under the same names.
# net/ is one flat folder shared by some 150 tests: bare peer.h and
# pkt.h would read as a library of net/ itself and could collide with a
# later one, so the helpers carry the test's prefix, as psock_lib.h or
# ipv6_flowlabel_mgr.c do there. guest/ksft_cli.h and
# guest/backlog_coalesce_main.c (kgate's command line), the benchmark
# and test_pkt stay behind.
GUEST = suite.GUEST
SHIPPED = ["backlog_coalesce.c", "backlog_peer.c", "backlog_peer.h", "backlog_pkt.c",
           "backlog_pkt.h"]
# What the shipped files may include with quotes besides each other.
HARNESS_INCLUDES = {"../kselftest_harness.h", "../kselftest.h"}
# The test's options; those net/config already has are not repeated.
CONFIG = ["CONFIG_NET_NS=y", "CONFIG_IPV6=y", "CONFIG_TUN=y", "CONFIG_USERFAULTFD=y"]
# net/Makefile: the new lines go after these (6.1's file).
MAKEFILE_PROG_AFTER = "TEST_PROGS += ipv6_route_update_soft_lockup.sh\n"
MAKEFILE_RULE_AFTER = "$(OUTPUT)/bind_bhash: LDLIBS += -lpthread\n"
# Used when the repository has no history to date the patch by.
FALLBACK_DATE = "2026-01-01T00:00:00Z"

SUBJECT = "selftests: net: add tcp backlog coalescing test"
BODY = """\
Since commit 4f693b55c3d2 ("tcp: implement coalescing on backlog
queue"), tcp_add_backlog() merges a segment that arrives while the
socket is owned by user context into the last skb of the socket
backlog. Which segments may be merged is decided by a handful of rules,
and a wrong one is silent: commit ca2fe2956ace ("tcp: add sanity tests
in tcp_add_backlog()") had to stop a FIN from being lost in a merged
skb, and RST, SYN and ACK-less segments from being merged at all. No
selftest covers these rules.

Add backlog_coalesce, a kselftest harness test with one case per merge
rule of tcp_add_backlog(). Each case sends two segments that differ
only in what the rule looks at: PSH, FIN, RST, SYN, a missing ACK, URG,
ECE, CWR, the TCP options and their length, the DS field, a sequence
gap, a bad checksum, the acknowledgment, the window and the receive
timestamp; a last case floods the backlog with small segments. A case
checks both what the kernel decided, from TCPBacklogCoalesce read while
the socket is still owned, and what the application sees: the bytes in
order, EOF, ECONNRESET, urgent data, the ACK and window kept.

The test plays the remote TCP peer itself: each test creates its own
network namespace with a tun device and writes crafted IPv4 or IPv6
segments into it. To put segments into the backlog deterministically,
a receiver thread calls recv() for one byte into a page registered with
userfaultfd. The kernel faults while copying with the socket owned, so
the thread sleeps holding the socket lock, and the userfaultfd event
tells the test when to write the segments. Resolving the fault lets
release_sock() process the backlog.

Every case runs for IPv4 and IPv6 in three variants: socket held with
merging on; socket held with net.ipv4.tcp_backlog_coalesce=0, where
nothing may merge; and a control without the hold. The off variants
SKIP on kernels without the net.ipv4.tcp_backlog_coalesce sysctl. A
case that could not observe what it depends on (the hold, a required
merge, the fast path) SKIPs as inconclusive instead of passing.
"""

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def out_dir():
    return workspace.current().path("selftest")


def default_out():
    """Where the patch is written: build/selftest/<PATCH_NAME>."""
    return os.path.join(out_dir(), PATCH_NAME)


class CheckFailed(Exception):
    """A step of check() failed: the message says which and why."""


def _git(args, cwd, env=None, check=True):
    return subprocess.run(["git"] + args, cwd=cwd, env=env, capture_output=True,
                          text=True, check=check)


def identity():
    """(name, email) of the patch's author: the repository's git
    identity, else the author of kernel/patches/0001-*.patch."""
    try:
        name = _git(["config", "user.name"], TOP).stdout.strip()
        mail = _git(["config", "user.email"], TOP).stdout.strip()
        if name and mail:
            return name, mail
    except (OSError, subprocess.CalledProcessError):
        pass
    pdir = os.path.join(TOP, "kernel", "patches")
    for fname in sorted(os.listdir(pdir)):
        if fname.startswith("0001") and fname.endswith(".patch"):
            with open(os.path.join(pdir, fname), encoding="utf-8") as f:
                hdr = email.parser.Parser().parse(f, headersonly=True)
            name, mail = email.utils.parseaddr(str(hdr["From"]).replace("\n", ""))
            if name and mail:
                return name, mail
    raise KgateError("no author for the patch: set git config user.name and user.email")


def patch_date():
    """The author date: when the shipped guest/ files last changed in
    git (the same patch for the same history), else FALLBACK_DATE."""
    try:
        out = _git(["log", "-1", "--format=%cI", "--"]
                   + [os.path.join("guest", f) for f in SHIPPED], TOP).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out = ""
    return out or FALLBACK_DATE


def shipped_files():
    """{upstream name: text} of the test's files as they go upstream."""
    out = {}
    for name in SHIPPED:
        text = read_text(os.path.join(GUEST, name))
        if text is None:
            raise KgateError(f"guest/{name} is missing")
        # Copied as it is: kgate's fault hooks live in a file of their
        # own (the suite's faults), linked in by ld --wrap.
        out[name] = text
        left = re.search(r".*kgate.*", text, re.I)
        if left:
            raise KgateError(f"guest/{name}: kgate's own name would go upstream: {left.group(0).strip()!r}"
                             " (test-the-test hooks belong in the suite's faults sources)")
    for name, text in out.items():
        for inc in _INCLUDE.findall(text):
            if inc not in out and inc not in HARNESS_INCLUDES:
                raise KgateError(f"guest/{name}: includes \"{inc}\", which does not go upstream "
                                 f"(only {', '.join(sorted(out))} and the harness do)")
    if "TEST_HARNESS_MAIN" not in out["backlog_coalesce.c"]:
        raise KgateError("guest/backlog_coalesce.c: no TEST_HARNESS_MAIN: not a selftest")
    return out


def _insert_after(text, anchor, new, what):
    if text.count(anchor) != 1:
        raise KgateError(f"{NET}/{what}: expected one line {anchor.strip()!r} to add after")
    return text.replace(anchor, anchor + new)


def edit_makefile(text):
    helpers = " ".join(n for n in SHIPPED if n.endswith(".c") and n != PROGRAM + ".c")
    text = _insert_after(text, MAKEFILE_PROG_AFTER, f"TEST_GEN_PROGS += {PROGRAM}\n", "Makefile")
    return _insert_after(text, MAKEFILE_RULE_AFTER,
                         f"$(OUTPUT)/{PROGRAM}: {helpers}\n"
                         f"$(OUTPUT)/{PROGRAM}: LDLIBS += -lpthread\n", "Makefile")


def edit_config(text):
    """net/config with the options it lacks appended; and those."""
    have = {line.split("=", 1)[0] for line in text.splitlines() if "=" in line}
    added = [opt for opt in CONFIG if opt.split("=", 1)[0] not in have]
    if added and not text.endswith("\n"):
        text += "\n"
    return text + "".join(opt + "\n" for opt in added), added


def commit_message(added, name, mail):
    opts = [a.split("=", 1)[0] for a in added]
    if not opts:
        note = "The test needs root."
    elif len(opts) == 1:
        note = f"The test needs root and {opts[0]}; add it to the net config."
    else:
        note = (f"The test needs root, {', '.join(opts[:-1])} and {opts[-1]}; add them "
                "to the net config.")
    return (f"{SUBJECT}\n\n{BODY}\n{textwrap.fill(note, 72)}\n\n"
            f"Signed-off-by: {name} <{mail}>\n")


def patch(source=None):
    """The patch's text, made with git in a scratch repository that holds
    the two net/ files it changes, as they are in the kernel tree."""
    need_tools(["git"])
    source = source or kernel.pristine()
    net = os.path.join(source, NET)
    name, mail = identity()
    date = patch_date()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LC_ALL": "C",
        "TZ": "UTC",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": mail, "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": mail, "GIT_COMMITTER_DATE": date,
    }
    files = shipped_files()
    makefile = read_text(os.path.join(net, "Makefile"))
    config = read_text(os.path.join(net, "config"))
    if makefile is None or config is None:
        raise KgateError(f"{net}: no Makefile or config: not a kernel tree")
    new_config, added = edit_config(config)
    with tempfile.TemporaryDirectory(prefix="kgate-selftest-") as tmp:
        env["HOME"] = tmp

        def git(*args):
            try:
                return _git(list(args), tmp, env).stdout
            except subprocess.CalledProcessError as e:
                raise KgateError(f"git {' '.join(args)}: {e.stderr.strip()}") from e

        def put(rel, text):
            path = os.path.join(tmp, NET, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)

        git("-c", "init.defaultBranch=master", "init", "-q")
        put("Makefile", makefile)
        put("config", config)
        git("add", "-A")
        git("commit", "-q", "--no-verify", "-m", "net selftests as in the kernel tree")
        for rel, text in files.items():
            put(rel, text)
        put("Makefile", edit_makefile(makefile))
        put("config", new_config)
        msg = os.path.join(tmp, ".git", "KGATE_MSG")
        with open(msg, "w", encoding="utf-8") as f:
            f.write(commit_message(added, name, mail))
        git("add", "-A")
        git("commit", "-q", "--no-verify", "--cleanup=verbatim", "-F", msg)
        return git("format-patch", "-1", "--stdout", "--no-numbered", "--stat=72")


def write_patch(out=None, source=None):
    out = os.path.abspath(out or default_out())
    atomic_write(out, patch(source))
    return out


# --- the check -----------------------------------------------------------

def _step(logf, label, cmd, cwd=None, timeout=600, stdin=None):
    """Run cmd with its output in logf; return (exit status, output)."""
    logf.write(f"$ {' '.join(cmd)}\n")
    logf.flush()
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=clean_env(), stdin=stdin, timeout=timeout,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace")
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        logf.write(out + f"[timed out after {timeout}s]\n")
        raise CheckFailed(f"{label}: timed out after {timeout}s") from e
    logf.write(proc.stdout)
    logf.write(f"[exit {proc.returncode}]\n")
    logf.flush()
    return proc.returncode, proc.stdout


def _tail(text, n=30):
    return "\n".join(text.rstrip("\n").splitlines()[-n:])


def check(patch_out=None, run=True, keep=False, headers=False):
    """Apply the patch to a copy of the kernel tree, build the test there
    with net/Makefile and lib.mk, run it (root), run checkpatch --strict
    on the patch. With headers, the tree's own UAPI headers ('make
    headers', about a minute) instead of the system's linux-libc-dev.
    Return 0 when all passed, 1 with the reason on stderr."""
    need_tools(["git", "patch", "make", "gcc", "perl", "cp"])
    source = kernel.pristine()
    os.makedirs(out_dir(), exist_ok=True)
    logpath = os.path.join(out_dir(), "check.log")
    work = tempfile.mkdtemp(prefix="check-", dir=out_dir())
    tree = os.path.join(work, "linux")
    out = os.path.join(work, "out")
    times = []
    ok = False
    with open(logpath, "w", encoding="utf-8") as logf:
        def timed(label, fn):
            start = time.monotonic()
            result = fn()
            times.append((label, time.monotonic() - start))
            log(f"[selftest] {label}: {times[-1][1]:.1f}s")
            return result

        try:
            path = timed("patch generated", lambda: write_patch(patch_out, source))
            log(f"[selftest] {os.path.relpath(path, TOP)}")

            def copy():
                # Hard links: GNU patch writes a new file and renames it
                # over the old one, so the pristine tree is never touched.
                rc, text = _step(logf, "copy", ["cp", "-al", source, tree])
                if rc:
                    raise CheckFailed(f"cp -al {source} {tree} failed:\n{_tail(text)}")
            timed("tree copied", copy)

            def apply():
                cmd = ["patch", "-p1", "-F0", "-N", "--no-backup-if-mismatch", "-d", tree,
                       "-i", path]
                rc, text = _step(logf, "patch", cmd)
                if rc:
                    raise CheckFailed(f"the patch does not apply to {source}:\n{_tail(text)}")
                if re.search(r"offset|fuzz", text, re.I):
                    raise CheckFailed(f"the patch applies only with offset or fuzz:\n{text}")
                for rel in ("Makefile", "config"):
                    if os.path.samefile(os.path.join(tree, NET, rel),
                                        os.path.join(source, NET, rel)):
                        raise CheckFailed(f"{NET}/{rel} is still linked to the pristine tree "
                                          "after patching")
                for rel in SHIPPED:
                    if not os.path.isfile(os.path.join(tree, NET, rel)):
                        raise CheckFailed(f"{NET}/{rel} missing after applying the patch")
            timed("patch applied", apply)

            binary = os.path.join(out, PROGRAM)
            khdr = []
            if headers:
                def install_headers():
                    # Into an output folder: the copy stays as patched.
                    hdr = os.path.join(work, "hdr")
                    rc, text = _step(logf, "headers", ["make", "-C", tree, f"O={hdr}",
                                                       "headers"])
                    if rc:
                        raise CheckFailed(f"make headers failed:\n{_tail(text)}")
                    khdr.append(f"KHDR_INCLUDES=-isystem {hdr}/usr/include")
                timed("make headers", install_headers)

            def build():
                # The narrowest build through net/Makefile and lib.mk: the
                # one program, by the path lib.mk's rules name it.
                # -Werror on top of the Makefile's own -Wall.
                os.makedirs(out)
                cmd = ["make", "-C", os.path.join(tree, NET), f"OUTPUT={out}",
                       "USERCFLAGS=-Werror"] + khdr + [binary]
                rc, text = _step(logf, "build", cmd)
                if rc:
                    raise CheckFailed(f"building {PROGRAM} with {NET}/Makefile failed:\n"
                                      f"{_tail(text)}")
                if not os.access(binary, os.X_OK):
                    raise CheckFailed(f"make succeeded but built no {binary}")
                for helper in SHIPPED:
                    if helper.endswith(".c") and helper not in text:
                        raise CheckFailed(f"{helper} was not in the link command:\n{text}")
                if "-lpthread" not in text:
                    raise CheckFailed(f"no -lpthread in the link command:\n{text}")
            timed("built with net/Makefile", build)

            if run:
                def execute():
                    if os.geteuid() != 0:
                        raise CheckFailed(f"running {PROGRAM} needs root (each test creates a "
                                          "network namespace and a tun device); use --no-run "
                                          "to only build it")
                    rc, text = _step(logf, "run", [binary], cwd=out, timeout=600,
                                     stdin=subprocess.DEVNULL)
                    totals = re.search(r"^# Totals: (.*)$", text, re.M)
                    summary = totals.group(1) if totals else "no totals line"
                    if rc:
                        bad = [ln for ln in text.splitlines() if ln.startswith("not ok")]
                        raise CheckFailed(f"{PROGRAM} exited {rc} ({summary}):\n"
                                          + "\n".join(bad[:20] or [_tail(text)]))
                    plan = re.search(r"^1\.\.(\d+)$", text, re.M)
                    results = re.findall(r"^(?:not )?ok \d+ ", text, re.M)
                    if not plan or int(plan.group(1)) != len(results) or not results:
                        raise CheckFailed(f"{PROGRAM}: {len(results)} results for plan "
                                          f"{plan.group(0) if plan else '(none)'}")
                    log(f"[selftest] {PROGRAM}: exit 0, {summary}")
                timed(f"{PROGRAM} ran", execute)

            def checkpatch():
                script = os.path.join(source, "scripts", "checkpatch.pl")
                # Every new file draws "does MAINTAINERS need updating?";
                # it does not when MAINTAINERS already covers net/.
                ignore = ["UNKNOWN_COMMIT_ID"]
                if re.search(r"^F:\s+" + re.escape(NET) + r"/$",
                             read_text(os.path.join(source, "MAINTAINERS"), ""), re.M):
                    ignore.append("FILE_PATH_CHANGES")
                # From stdin: checkpatch.pl takes a patch inside a git
                # work tree (build/ is in kgate's) for a source file.
                with open(path, encoding="utf-8") as stdin:
                    rc, text = _step(logf, "checkpatch",
                                     ["perl", script, "--strict", "--no-tree", "--ignore",
                                      ",".join(ignore), "-"], stdin=stdin)
                if rc:
                    raise CheckFailed(f"checkpatch.pl --strict on the patch:\n{text.rstrip()}")
                total = re.search(r"^total: .*$", text, re.M)
                log(f"[selftest] checkpatch --strict: {total.group(0) if total else 'clean'}")
            timed("checkpatch --strict", checkpatch)
            ok = True
        except CheckFailed as e:
            log(f"selftest-check: FAILED: {e}")
            log(f"selftest-check: log in {os.path.relpath(logpath, TOP)}; "
                f"tree left in {os.path.relpath(work, TOP)}")
        finally:
            if ok and not keep:
                shutil.rmtree(work, ignore_errors=True)
    total = sum(t for _, t in times)
    if ok:
        log(f"selftest-check: passed in {total:.0f}s; log in {os.path.relpath(logpath, TOP)}"
            + (f"; tree kept in {os.path.relpath(work, TOP)}" if keep else ""))
    return 0 if ok else 1
