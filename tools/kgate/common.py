"""Paths, target data and small helpers shared by the kgate tools."""
import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import yaml

from .workspace import TOP  # noqa: F401 - the checkout, a constant

# The known-bad control: Debian's kernel with the Linux 5.0 merging
# rules put back (kernel/regressions), which every run must catch.
KNOWN_BAD = "known-bad"
VARIANTS = ("fixed", KNOWN_BAD)
# The user's kernel under test (kgate.py run --patches/--source/--image):
# judged like the fixed kernel, next to the known-bad control.
CANDIDATE = "candidate"
# The debug kernels (kgate.py run --debug): a kernel under test built
# again with kernel/configs/debug.config (KASAN, lockdep, ...), judged
# like it, its kernel-log case reading what the checkers report.
DEBUG_SUFFIX = "-debug"
DEBUG_VARIANTS = ("fixed" + DEBUG_SUFFIX, CANDIDATE + DEBUG_SUFFIX)
ALL_VARIANTS = VARIANTS + (CANDIDATE,) + DEBUG_VARIANTS


def base_variant(variant):
    """The variant whose patches a kernel has: fixed-debug -> fixed."""
    return variant[:-len(DEBUG_SUFFIX)] if variant in DEBUG_VARIANTS else variant


def is_debug(variant):
    return variant in DEBUG_VARIANTS


def debug_twin(variant):
    """The debug variant of a kernel under test (fixed -> fixed-debug);
    None for the others."""
    twin = variant + DEBUG_SUFFIX
    return twin if twin in DEBUG_VARIANTS else None


def with_debug(variants):
    """variants, each kernel under test followed by its debug twin."""
    out = []
    for v in variants:
        out.append(v)
        if debug_twin(v) and debug_twin(v) not in variants:
            out.append(debug_twin(v))
    return out


class KgateError(Exception):
    """An error the user can act on; printed without a traceback. As
    such, a usage error (exit 2); the subclasses say otherwise."""


class InfraError(KgateError):
    """Our own machinery failed (our patches, a build of our parts, the
    tools): the run could not judge anything. Infrastructure, exit 3."""


class CandidateError(KgateError):
    """The candidate failed before any test ran: its patches do not
    apply or its kernel does not build. The gate fails (exit 1)."""


# What a compiler, linker or make says when a build fails.
_BUILD_ERROR = re.compile(r"(: (fatal )?error:|\bError \d|undefined reference|\*\*\*)")


def build_error_lines(text, limit=30):
    """The lines of a build log that say what failed (gcc's 'error:'
    lines with the two lines after each: the source line and the caret),
    at most limit of them; the last 25 lines when none match."""
    lines = text.splitlines()
    keep = []
    for i, line in enumerate(lines):
        if _BUILD_ERROR.search(line):
            first = i - 1 if i and "In function" in lines[i - 1] else i
            for j in range(first, min(i + 3, len(lines))):
                if j not in keep:
                    keep.append(j)
    if not keep:
        return lines[-25:]
    return [lines[j] for j in keep][:limit]


class DuplicateKey(ValueError):
    """A JSON object or YAML mapping that names a key twice: which one a
    reader takes is an accident, so kgate takes neither."""


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKey(f"the key {k!r:.60} is given twice")
        out[k] = v
    return out


def loads_json(text):
    """json.loads that refuses an object naming a key twice
    (DuplicateKey, a ValueError) and nesting too deep (ValueError)."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except RecursionError:
        raise ValueError("nested too deep") from None


class StrictYamlLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a mapping naming a key twice."""

    def construct_mapping(self, node, deep=False):
        keys = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                seen = key in keys
            except TypeError:
                seen = False
            if seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r:.60} is given twice", key_node.start_mark)
            try:
                keys.add(key)
            except TypeError:
                pass
        return super().construct_mapping(node, deep)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def load_targets(path=None):
    path = path or os.path.join(TOP, "targets.yaml")
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict) or not data:
        raise KgateError(f"{path}: no targets defined")
    for name, row in data.items():
        row["name"] = name
    return data


def target(name, targets=None):
    targets = targets or load_targets()
    if name not in targets:
        raise KgateError(f"unknown target '{name}'; known targets: {', '.join(targets)}")
    return targets[name]


# A row's 'group' (none: DEFAULT_GROUP) says whether 'make run' takes it
# when no target is named; ALL names every target.
DEFAULT_GROUP = "default"
ALL = "all"


def group_of(row):
    return row.get("group", DEFAULT_GROUP)


def default_targets(targets=None):
    """The targets run when none is named: the default group's, less the
    disabled ones (named on stderr)."""
    return expand_targets([DEFAULT_GROUP], targets)


def expand_targets(names, targets=None):
    """Target names, group names and 'all' as the target names they
    stand for, in the order given (a group's in targets.yaml's), each
    once. A group leaves out its disabled targets (named on stderr);
    named alone, one runs."""
    targets = targets or load_targets()
    groups = sorted({group_of(r) for r in targets.values()} | {ALL})
    chosen = []
    for name in names:
        if name in targets:
            members = [name]
        elif name in groups:
            members = []
            for t, row in targets.items():
                if name != ALL and group_of(row) != name:
                    continue
                if row.get("disabled"):
                    log(f"kgate: skipping {t}: {row['disabled']} (name it to run it anyway)")
                else:
                    members.append(t)
        else:
            raise KgateError(f"unknown target '{name}'; known targets: {', '.join(targets)}; "
                             f"groups: {', '.join(groups)}")
        chosen += [t for t in members if t not in chosen]
    return chosen


def guest_of(tgt):
    """What a run keeps of a target's guest with each job (results.json
    'guest'): the QEMU machine it ran in and the kernel's architecture."""
    return {"qemu": tgt["qemu"], "machine": tgt["machine"], "cpu": tgt["cpu"],
            "smp": tgt.get("smp", 1), "memory": tgt["memory"], "endian": tgt["endian"],
            "bits": tgt["bits"], "kernel_arch": tgt["kernel_arch"]}


def check_variant(variant):
    if variant not in ALL_VARIANTS:
        raise KgateError(f"unknown variant '{variant}'; known variants: {', '.join(ALL_VARIANTS)}")


def format_table(heads, rows, rule=False):
    """Left-aligned columns two spaces apart; a dashed rule under the
    heads if rule; no trailing blanks."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in [heads] + rows) for i in range(len(heads))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths))]
    if rule:
        lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def need_tools(tools, hint="run 'make deps' first"):
    missing = [t for t in tools if not (shutil.which(t) or os.path.exists(t))]
    if missing:
        raise KgateError(f"missing: {', '.join(missing)} ({hint})")


def _temp_beside(path):
    """A new, empty temporary file in path's folder (mkstemp: created
    with O_EXCL, never through a symlink planted there), as (fd, name)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    return tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)


def _replace_with(path, fill):
    """Write a temporary file beside path with fill(fileobj), then rename
    it over path: path is either absent, old, or complete. Nothing is
    left behind when fill fails."""
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_copy(src, dst):
    """Copy src to dst so that dst is either absent, old, or complete."""
    with open(src, "rb") as s:
        _replace_with(dst, lambda f: shutil.copyfileobj(s, f))


def atomic_write(path, text):
    """Write text to path so that it is either absent, old, or complete."""
    _replace_with(path, lambda f: f.write(text.encode("utf-8")))


def write_output(path, text):
    """Write text where the user asked (a command's -o): a regular file
    (or a symlink to one that the user's own uid made) is replaced
    atomically at the path the link names; a FIFO or a character device
    (/dev/stdout) is written through, never replaced by a file. Refused,
    as KgateError naming the path: a symlink another user made (root
    must not follow it, as fs.protected_symlinks would not in a sticky
    folder), a block device, a folder, a folder that does not exist,
    and any error writing."""
    try:
        if os.path.islink(path) and os.lstat(path).st_uid != os.geteuid():
            raise KgateError(f"cannot write {path}: a symbolic link made by another user "
                             f"(uid {os.lstat(path).st_uid}); name its target instead")
        real = os.path.realpath(path)
        if not os.path.isdir(os.path.dirname(real)):
            raise KgateError(f"cannot write {path}: no folder {os.path.dirname(real)}")
        if os.path.exists(real) and not os.path.isfile(real):
            mode = os.stat(real).st_mode
            if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
                raise KgateError(f"cannot write {path}: not a file, a FIFO or a character "
                                 "device")
            with open(real, "w", encoding="utf-8") as f:
                f.write(text)
        else:
            atomic_write(real, text)
    except OSError as e:
        raise KgateError(f"cannot write {path}: {e.strerror or e}") from None
    return real


def read_text(path, default=None):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return default


def tool_version(cmd):
    try:
        out = subprocess.run([cmd, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise KgateError(f"cannot run '{cmd} --version': {e} (run 'make deps' first)") from e
    return out.splitlines()[0] if out else ""


def clean_env(**extra):
    """The environment for a make kgate runs: without the variables and
    flags of a make that called kgate ('make run ARCH="x86_64 arm64"'
    exports ARCH and passes it on in MAKEFLAGS, which busybox's and the
    kernel's Makefiles would take as their own), plus extra."""
    env = dict(os.environ)
    for var in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "CFLAGS", "LDFLAGS",
                "LDLIBS", "OUTPUT", "ARCH", "CROSS_COMPILE", "O", "KBUILD_OUTPUT"):
        env.pop(var, None)
    env["LC_ALL"] = "C"
    env.update(extra)
    return env


def run_logged(cmd, logpath, label, cwd=None, env=None, count_prefix=None, every=20.0,
               error=KgateError, counted=None):
    """Run cmd with its output in logpath; print a progress line now and then.
    Return its seconds; with counted (a dict), counted["lines"] is the
    number of output lines that start with count_prefix.

    On failure error (a KgateError class) is raised with the lines of
    the log that say what failed.
    """
    os.makedirs(os.path.dirname(logpath), exist_ok=True)
    start = time.monotonic()
    last = start
    count = 0
    with open(logpath, "a", encoding="utf-8") as logf:
        logf.write(f"$ {' '.join(cmd)}\n")
        logf.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
        try:
            for line in proc.stdout:
                logf.write(line)
                if count_prefix and line.startswith(count_prefix):
                    count += 1
                now = time.monotonic()
                if now - last >= every:
                    last = now
                    extra = f", {count} compiled" if count_prefix else ""
                    log(f"[{label}] {int(now - start)}s{extra}")
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if counted is not None:
        counted["lines"] = count
    if rc != 0:
        text = read_text(logpath, "")
        raise error(f"{label}: '{' '.join(cmd[:3])} ...' failed (exit {rc}); "
                    f"from {logpath}:\n" + "\n".join(build_error_lines(text)))
    return time.monotonic() - start
