"""Build the initramfs of a target: static busybox from Debian's source
package, the guest test programs, and rootfs/files/.

Layout under build/:
  src/busybox/               'apt-get source busybox' (once)
  busybox/<target>/          busybox build directory
  tests/<target>/            the static test programs
  rootfs/<target>/           rootfs.cpio.gz and its cache key
"""
import glob
import hashlib
import os
import shutil
import subprocess
import tempfile
import time

from . import kernel, suite
from . import workspace
from .common import (TOP, InfraError, KgateError, atomic_copy, atomic_write, clean_env, log,
                     need_tools, read_text, run_logged, target, tool_version)

GUEST = suite.GUEST
RECIPE = "2"


def busybox_source():
    """Return the extracted Debian busybox source, fetching it once."""
    base = workspace.current().path("src", "busybox")
    found = sorted(glob.glob(os.path.join(base, "busybox-*", "debian", "config", "pkg", "static")))
    if found:
        return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(found[-1]))))
    need_tools(["apt-get", "dpkg-source"])
    tmp = base + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    log("[busybox] apt-get source busybox")
    r = subprocess.run(["apt-get", "source", "-qq", "busybox"], cwd=tmp,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise KgateError("'apt-get source busybox' failed (needs deb-src entries: run 'make deps'):\n"
                         + r.stderr[-2000:])
    shutil.rmtree(base, ignore_errors=True)
    os.replace(tmp, base)
    return busybox_source()


def _hash(h, *parts):
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")


def _hash_tree(h, root):
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            _hash(h, os.path.relpath(path, root), oct(st.st_mode))
            with open(path, "rb") as f:
                h.update(f.read())


def build_busybox(tgt, jobs):
    src = busybox_source()
    cross = tgt["cross_compile"]
    h = hashlib.sha256()
    _hash(h, RECIPE, os.path.basename(src), tool_version(cross + "gcc"))
    for cfg in ("debian/config/os/linux", "debian/config/pkg/static"):
        with open(os.path.join(src, cfg), "rb") as f:
            h.update(f.read())
    key = h.hexdigest()
    d = workspace.current().path("busybox", tgt["name"])
    binary = os.path.join(d, "busybox")
    if read_text(os.path.join(d, ".kgate-key")) == key and os.path.isfile(binary):
        return d
    label = f"busybox {tgt['name']}"
    logpath = workspace.current().path("logs", f"busybox-{tgt['name']}.log")
    os.makedirs(os.path.dirname(logpath), exist_ok=True)
    if os.path.exists(logpath):
        os.unlink(logpath)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    # As debian/rules does for its static flavour.
    with open(os.path.join(d, ".config"), "wb") as out:
        for cfg in ("debian/config/os/linux", "debian/config/pkg/static"):
            with open(os.path.join(src, cfg), "rb") as f:
                out.write(f.read())
    env = clean_env(KCONFIG_NOTIMESTAMP="1")
    # Without ccache: busybox is always built from nothing, and a ccache
    # miss costs here nearly as much again as the compile (fork and
    # exec are slow on this kind of machine; see kernel.build).
    mk = ["make", "-C", d, "-f", os.path.join(src, "Makefile"), f"KBUILD_SRC={src}",
          f"CROSS_COMPILE={cross}", f"CC={cross}gcc", "HOSTCC=gcc"]
    log(f"[{label}] building (log: {os.path.relpath(logpath, TOP)})")
    yes = subprocess.Popen(["yes", ""], stdout=subprocess.PIPE)
    try:
        r = subprocess.run(mk + ["silentoldconfig"], stdin=yes.stdout, env=env,
                           capture_output=True, text=True)
    finally:
        yes.kill()
        yes.wait()
    with open(logpath, "a", encoding="utf-8") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        raise InfraError(f"[{label}] configuring failed; see {logpath}")
    secs = run_logged(mk + [f"-j{jobs}", "all", "SKIP_STRIP=y"], logpath, label, env=env,
                      count_prefix="  CC", error=InfraError)
    run_logged(mk + ["busybox.links"], logpath, label, env=env, error=InfraError)
    atomic_write(os.path.join(d, ".kgate-key"), key)
    log(f"[{label}] done in {secs:.0f}s")
    return d


def selftests_dir():
    """The kernel tree's tools/testing/selftests: the guest programs use
    its kselftest_harness.h as it is, included from there."""
    return os.path.join(kernel.pristine(), "tools", "testing", "selftests")


def test_cflags(cc):
    """The compiler command line of a guest (or native) test program,
    without sources and output. '-I .../net' lets the selftests include
    "../kselftest_harness.h" as they do in the kernel tree."""
    return [cc, "-O2", "-g0", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror", "-pthread",
            "-I", os.path.join(selftests_dir(), "net")]


def _compile(cmd_head, prog, sources, dst, where):
    srcs = [os.path.join(GUEST, s) for s in sources]
    tmp = dst + ".tmp"
    r = subprocess.run(cmd_head + ["-o", tmp] + srcs, capture_output=True, text=True)
    if r.returncode != 0:
        raise InfraError(f"building {prog} for {where} failed:\n{r.stderr}")
    os.replace(tmp, dst)
    return dst


def test_programs():
    """{program: its sources under guest/}: every program of the gate's
    suites (suites/gate.yaml)."""
    return {p.name: list(p.sources) for p in suite.current().programs}


def test_headers():
    """What the programs include, not compiled on their own."""
    return sorted({h for s in suite.current().suites for h in s.headers})


def test_data():
    """{folder under guest/: where the initramfs has it}: the data
    folders of the gate's suites."""
    return {d: suite.DATA_DIR + "/" + d for s in suite.current().suites for d in s.data}


def faults_program(prog):
    """The name of the native copy of a test program linked with its
    test-the-test hooks."""
    return prog.name + "_faults"


def build_tests(tgt):
    """Cross-build the static guest test programs; return {name: path}."""
    d = workspace.current().path("tests", tgt["name"])
    os.makedirs(d, exist_ok=True)
    head = test_cflags(tgt["cross_compile"] + "gcc") + ["-static"]
    return {prog: _compile(head, prog, sources, os.path.join(d, prog), tgt["name"])
            for prog, sources in test_programs().items()}


def build_native(outdir):
    """Build the test programs for this machine into outdir (make check
    runs them in their own network namespaces); return {name: path}.
    Each test program with faults gets a copy linked with its
    test-the-test hooks (KGATE_FAULT=...; never in a guest)."""
    need_tools(["gcc"])
    os.makedirs(outdir, exist_ok=True)
    head = test_cflags("gcc")
    out = {prog: _compile(head, prog, sources, os.path.join(outdir, prog), "this machine")
           for prog, sources in test_programs().items()}
    for test in suite.current().role("test"):
        if test.faults:
            name = faults_program(test)
            out[name] = _compile(head + [f"-Wl,--wrap={w}" for w in test.wrap], name,
                                 list(test.sources) + list(test.faults),
                                 os.path.join(outdir, name), "this machine")
    return out


def rootfs_key(tgt, bb_dir):
    h = hashlib.sha256()
    _hash(h, RECIPE, read_text(os.path.join(bb_dir, ".kgate-key")), tool_version(tgt["cross_compile"] + "gcc"),
          kernel.source_id())  # the harness headers come from the kernel tree
    for s in sorted({s for v in test_programs().values() for s in v} | set(test_headers())):
        with open(os.path.join(GUEST, s), "rb") as f:
            _hash(h, s, f.read())
    _hash_tree(h, os.path.join(TOP, "rootfs", "files"))
    for d, where in sorted(test_data().items()):
        _hash(h, where)
        _hash_tree(h, os.path.join(GUEST, d))
    return h.hexdigest()


def rootfs_path(tgt_name):
    return workspace.current().path("rootfs", tgt_name, "rootfs.cpio.gz")


def _assemble(stage, bb_dir, progs):
    for sub in ("bin", "sbin", "usr/bin", "usr/sbin", "dev", "proc", "sys", "tmp", "run", "root", "etc"):
        os.makedirs(os.path.join(stage, sub), exist_ok=True)
    shutil.copy2(os.path.join(bb_dir, "busybox"), os.path.join(stage, "bin", "busybox"))
    for link in read_text(os.path.join(bb_dir, "busybox.links")).split():
        path = os.path.join(stage, link.lstrip("/"))
        if os.path.lexists(path) or link == "/bin/busybox":
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink(os.path.relpath(os.path.join(stage, "bin", "busybox"), os.path.dirname(path)), path)
    os.symlink("bin/busybox", os.path.join(stage, "init"))
    shutil.copytree(os.path.join(TOP, "rootfs", "files"), stage, symlinks=True, dirs_exist_ok=True)
    for prog, path in progs.items():
        shutil.copy2(path, os.path.join(stage, "usr", "bin", prog))
    for d, where in test_data().items():
        shutil.copytree(os.path.join(GUEST, d), os.path.join(stage, where.lstrip("/")),
                        symlinks=False)


def build(tgt_name, jobs=None, force=False):
    """Build (or reuse) the initramfs of tgt_name; return its path."""
    tgt = target(tgt_name)
    cross = tgt["cross_compile"]
    need_tools(["make", "ccache", "cpio", "gzip", cross + "gcc"])
    jobs = jobs or (os.cpu_count() or 1) + 1
    start = time.monotonic()
    bb_dir = build_busybox(tgt, jobs)
    key = rootfs_key(tgt, bb_dir)
    dst = rootfs_path(tgt_name)
    keyfile = os.path.join(os.path.dirname(dst), "key")
    if not force and read_text(keyfile) == key and os.path.isfile(dst):
        log(f"[rootfs {tgt_name}] up to date ({key[:12]})")
        return dst
    progs = build_tests(tgt)
    with tempfile.TemporaryDirectory(dir=workspace.current().build) as tmp:
        stage = os.path.join(tmp, "root")
        _assemble(stage, bb_dir, progs)
        cpio = os.path.join(tmp, "rootfs.cpio.gz")
        files = subprocess.run("find . -print0 | LC_ALL=C sort -z", shell=True, cwd=stage,
                               capture_output=True, check=True).stdout
        with open(cpio, "wb") as out:
            c = subprocess.Popen(["cpio", "--null", "-o", "-H", "newc", "--owner=0:0", "--quiet",
                                  "--reproducible"], cwd=stage, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE)
            g = subprocess.Popen(["gzip", "-9n"], stdin=c.stdout, stdout=out)
            c.stdout.close()
            c.communicate(files)
            if c.returncode != 0 or g.wait() != 0:
                raise InfraError(f"[rootfs {tgt_name}] cpio/gzip failed")
        if os.path.exists(keyfile):
            os.unlink(keyfile)
        atomic_copy(cpio, dst)
    atomic_write(os.path.join(os.path.dirname(dst), "build-seconds"), f"{time.monotonic() - start:.1f}\n")
    atomic_write(keyfile, key)
    log(f"[rootfs {tgt_name}] {os.path.relpath(dst, TOP)} ({os.path.getsize(dst) // 1024} KiB)")
    return dst
