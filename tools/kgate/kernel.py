"""Build a kernel per (target, variant) from a kernel series
(kernel/series.yaml: Debian's linux-source-6.1 and our patches).

Layout under build/:
  src/pristine/              the extracted Debian tree (never modified)
  src/tree/                  hard-linked copy of it holding one variant's
                             patches at a time (fixed, known-bad or the
                             candidate): switching variants rewrites only
                             the files their patches touch
  src/tree/o-<target>/       out-of-tree build directory (a direct child
                             of the source tree, so kbuild uses relative
                             paths and ccache hits); shared by every
                             variant, so a variant's build recompiles the
                             files its patches touch and relinks
  src/tree/o-<target>-debug/ the same for the debug kernels
  kernels/<target>/<variant>/ image, config, the cache key and the build's
                             timing
"""
import dataclasses
import datetime
import fcntl
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import time

import yaml

from . import workspace
from .common import (CANDIDATE, DEBUG_SUFFIX, KNOWN_BAD, TOP, CandidateError, InfraError,
                     KgateError, StrictYamlLoader, atomic_copy, atomic_write, base_variant,
                     check_variant, clean_env, is_debug, log, need_tools, read_text, run_logged,
                     target, tool_version)

KERNEL_DIR = os.path.join(TOP, "kernel")
SERIES_FILE = os.path.join(KERNEL_DIR, "series.yaml")
# Bump when the way kernels are built changes, so cached images are redone.
BUILD_RECIPE = "2"
# What kernel/series.yaml says of each series: the Debian package and
# its tarball, and the folders under kernel/ (see that file).
SERIES_KEYS = ("package", "tarball", "patches", "control", "mutants", "configs")
SERIES_FOLDERS = ("patches", "control", "mutants", "configs")


@dataclasses.dataclass(frozen=True)
class KernelSeries:
    name: str
    package: str
    tarball: str
    patches: str   # folders, absolute
    control: str
    mutants: str
    configs: str


def load_series(path=None):
    """kernel/series.yaml, checked: (default name, {name: KernelSeries})."""
    path = path or SERIES_FILE
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.load(f, Loader=StrictYamlLoader)  # noqa: S506 - a SafeLoader
    except (OSError, yaml.YAMLError) as e:
        raise KgateError(f"{path}: {e}") from None
    rows = data.get("series") if isinstance(data, dict) else None
    if not isinstance(rows, dict) or not rows or set(data) != {"default", "series"} or \
            not all(isinstance(n, str) for n in rows) or \
            not isinstance(data["default"], str) or data["default"] not in rows:
        raise KgateError(f"{path}: wants 'series' (name: fields) and a 'default' among them")
    out = {}
    for name, row in rows.items():
        if not isinstance(row, dict) or not all(isinstance(k, str) for k in row) or \
                sorted(row) != sorted(SERIES_KEYS) or \
                not all(isinstance(row[k], str) and row[k] for k in SERIES_KEYS):
            raise KgateError(f"{path}: series {name!r} wants exactly {', '.join(SERIES_KEYS)}")
        if not os.path.isabs(row["tarball"]):
            raise KgateError(f"{path}: series {name!r}: tarball wants an absolute path")
        folders = {k: os.path.normpath(os.path.join(os.path.dirname(path), row[k]))
                   for k in SERIES_FOLDERS}
        if len(set(folders.values())) != len(folders):
            raise KgateError(f"{path}: series {name!r}: {', '.join(SERIES_FOLDERS)} must be "
                             "different folders")
        out[name] = KernelSeries(name=name, package=row["package"], tarball=row["tarball"],
                                 **folders)
    return data["default"], out


@functools.lru_cache(maxsize=None)
def _series_of(path, mtime_ns):
    return load_series(path)


def kernel_series():
    """The series in use: the workspace's (KGATE_SERIES), else the
    default; its tarball replaced by KGATE_KERNEL_TARBALL if given."""
    ws = workspace.current()
    # read once (and again only if the file changed), not at every call
    try:
        mtime = os.stat(SERIES_FILE).st_mtime_ns
    except OSError as e:
        raise KgateError(f"{SERIES_FILE}: {e.strerror}") from None
    default, known = _series_of(SERIES_FILE, mtime)
    name = ws.series or default
    if name not in known:
        raise KgateError(f"unknown kernel series {name!r} (KGATE_SERIES); kernel/series.yaml "
                         f"has: {', '.join(known)}")
    s = known[name]
    return dataclasses.replace(s, tarball=ws.tarball) if ws.tarball else s


def series(kind):
    """Return the patch files of the series in use: kind 'patches' (the
    fixed kernel), 'control' (the known-bad twin's on top) or 'mutants',
    as its folder's 'series' file lists them, in order."""
    base = getattr(kernel_series(), kind)
    text = read_text(os.path.join(base, "series"))
    if text is None:
        raise KgateError(f"missing {base}/series")
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        path = os.path.join(base, line)
        if not os.path.isfile(path):
            raise KgateError(f"{base}/series names {line}, which does not exist")
        out.append(path)
    return out


class Candidate:
    """The candidate kernel, as the command line describes it: the fixed
    series plus the user's patches (patches: a folder), the user's own
    source tree (source), or prebuilt images ({target: path}). A value,
    handed to whatever builds or runs it; Candidate() is no candidate.
    Bad input fails here, before anything is built."""

    def __init__(self, patches=None, source=None, images=None):
        images = dict(images or {})
        if sum(map(bool, (patches, source, images))) > 1:
            raise KgateError("--patches, --source and --image exclude each other")
        self.patches = os.path.abspath(patches) if patches else None
        self.source = os.path.abspath(source) if source else None
        self.images = {t: os.path.abspath(p) for t, p in images.items()}
        if self.patches:
            self.patch_files()
        if self.source and not (os.path.isfile(os.path.join(self.source, "Kconfig")) and
                                os.path.isfile(os.path.join(self.source, "Makefile"))):
            raise KgateError(f"--source {self.source}: not a kernel source tree "
                             "(no Kconfig/Makefile)")

    def __bool__(self):
        return bool(self.patches or self.source or self.images)

    def __repr__(self):
        return f"Candidate({self.describe()})"

    def describe(self):
        """What the candidate kernel is, for results.json: {'patches': DIR},
        {'source': DIR} or {'images': {...}}; {} when none was given."""
        return {k: v for k, v in (("patches", self.patches), ("source", self.source),
                                  ("images", self.images)) if v}

    def patch_files(self):
        """The user's patches: their folder's 'series' file, else every
        *.patch and *.diff in name order."""
        d = self.patches
        if not os.path.isdir(d):
            raise KgateError(f"--patches {d}: not a folder")
        series_file = os.path.join(d, "series")
        if os.path.lexists(series_file) and not os.path.isfile(series_file):
            raise KgateError(f"--patches {d}: 'series' is not a file")
        try:
            listed = read_text(series_file)
        except (OSError, UnicodeDecodeError) as e:
            raise KgateError(f"--patches {d}: cannot read its series: {e}") from None
        if listed is not None:
            names = [ln.split("#", 1)[0].strip() for ln in listed.splitlines()]
            names = [n for n in names if n]
        else:
            names = sorted(n for n in os.listdir(d) if n.endswith((".patch", ".diff")))
        real = os.path.realpath(d)
        outside = [n for n in names if os.path.isabs(n) or
                   os.path.normpath(n).split(os.sep)[0] == ".." or
                   not os.path.realpath(os.path.join(d, n)).startswith(real + os.sep)]
        if outside:
            raise KgateError(f"--patches {d}: series names files outside the folder "
                             "(or links out of it): "
                             f"{', '.join(outside)}")
        paths = [os.path.join(d, n) for n in names]
        missing = [n for n, p in zip(names, paths) if not os.path.isfile(p)]
        if missing:
            raise KgateError(f"--patches {d}: series names missing files: {', '.join(missing)}")
        if not paths:
            raise KgateError(f"--patches {d}: no series file and no *.patch or *.diff")
        reals = [os.path.realpath(p) for p in paths]
        twice = sorted({n for n, r in zip(names, reals) if reals.count(r) > 1})
        if twice:
            raise KgateError(f"--patches {d}: series names a patch twice: {', '.join(twice)}")
        empty = [n for n, p in zip(names, paths) if not patch_changes(p)]
        if empty:
            raise KgateError(f"--patches {d}: the candidate changes nothing: "
                             f"{', '.join(empty)} {'has' if len(empty) == 1 else 'have'} no "
                             "hunk that changes a line (an empty file, or a message without a "
                             "diff?)")
        return paths


NO_CANDIDATE = Candidate()


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
# A line of a file's git header that changes it without a hunk.
_GIT_CHANGE = re.compile(r"(?:new file mode|deleted file mode|rename from|copy from|old mode"
                         r"|GIT binary patch|Binary files )")


def patch_changes(path):
    """Whether a patch file changes anything: a hunk whose old text (its
    context and removed lines, in order) differs from its new text, or,
    in a file's git header (after its 'diff --git' line), a new or
    deleted file, a rename, a copy, a mode change or binary content."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        raise KgateError(f"{path}: {e.strerror}") from None
    lines = text.splitlines()
    i = 0
    in_header = False
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("diff --git "):
            in_header = True
            continue
        if in_header and _GIT_CHANGE.match(line):
            return True
        m = _HUNK.match(line)
        if not m:
            continue
        in_header = False
        # the hunk's old and new line counts say where it ends
        old_n = int(m.group(1)) if m.group(1) is not None else 1
        new_n = int(m.group(2)) if m.group(2) is not None else 1
        old, new = [], []
        while (old_n > 0 or new_n > 0) and i < len(lines):
            line = lines[i]
            i += 1
            if line.startswith("\\"):
                continue  # "\ No newline at end of file"
            if line.startswith("-"):
                old.append(line[1:])
                old_n -= 1
            elif line.startswith("+"):
                new.append(line[1:])
                new_n -= 1
            else:
                old.append(line[1:])
                new.append(line[1:])
                old_n -= 1
                new_n -= 1
        if old != new:
            return True
    return False


def variant_patches(variant, cand=NO_CANDIDATE):
    check_variant(variant)
    variant = base_variant(variant)
    if variant == CANDIDATE:
        if cand.source:
            return []  # the user's tree, as it is
        if not cand.patches:
            raise KgateError("the candidate kernel needs --patches DIR, --source DIR or --image")
        return series("patches") + cand.patch_files()
    patches = series("patches")
    if variant == KNOWN_BAD:
        patches += series("control")
    return patches


def _tree_fingerprint(root):
    """Cheap identity of a source tree: every file's path, size and mtime
    (without .git)."""
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != ".git")
        for f in sorted(files):
            try:
                st = os.lstat(os.path.join(d, f))
            except OSError:
                continue
            h.update(f"{os.path.relpath(os.path.join(d, f), root)}\0{st.st_size}\0"
                     f"{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def debug_fragment(tgt_name):
    """A target's own debug lines (KASAN where the arch has it under
    TCG); a target without this file has no debug kernel."""
    return os.path.join(kernel_series().configs, f"{tgt_name}.debug.config")


def has_debug(tgt_name):
    return os.path.isfile(debug_fragment(tgt_name))


def fragments(tgt, variant="fixed"):
    configs = kernel_series().configs
    paths = [os.path.join(configs, "base.config"), os.path.join(configs, f"{tgt['name']}.config")]
    if is_debug(variant):
        if not has_debug(tgt["name"]):
            raise KgateError(f"{tgt['name']} has no debug kernel: no "
                             f"{os.path.relpath(debug_fragment(tgt['name']), TOP)}")
        paths += [os.path.join(configs, "debug.config"), debug_fragment(tgt["name"])]
    for p in paths:
        if not os.path.isfile(p):
            raise KgateError(f"missing config fragment {p}")
    return paths


def _hash_files(h, paths):
    for p in paths:
        h.update(os.path.relpath(p, TOP).encode() + b"\0")
        with open(p, "rb") as f:
            h.update(f.read())
        h.update(b"\0")


def source_id():
    tarball = kernel_series().tarball
    st = os.stat(tarball)
    return f"{os.path.basename(tarball)}:{st.st_size}:{int(st.st_mtime)}"


def tree_key(variant, cand=NO_CANDIDATE):
    variant = base_variant(variant)
    h = hashlib.sha256()
    if variant == CANDIDATE and cand.source:
        h.update(f"source {cand.source} {_tree_fingerprint(cand.source)}".encode())
        return h.hexdigest()
    h.update(source_id().encode())
    _hash_files(h, variant_patches(variant, cand))
    return h.hexdigest()


def cache_key(tgt, variant, cand=NO_CANDIDATE):
    h = hashlib.sha256()
    h.update(f"recipe {BUILD_RECIPE}\n".encode())
    h.update(tree_key(variant, cand).encode())
    _hash_files(h, fragments(tgt, variant))
    h.update(tool_version(tgt["cross_compile"] + "gcc").encode())
    h.update(tgt["name"].encode())
    return h.hexdigest()


def out_dir(tgt_name, variant):
    return workspace.current().path("kernels", tgt_name, variant)


def image_path(tgt_name, variant):
    return os.path.join(out_dir(tgt_name, variant), "image")


def pristine():
    dst = workspace.current().path("src", "pristine")
    stamp = os.path.join(dst, ".kgate-source")
    if read_text(stamp) == source_id():
        return dst
    s = kernel_series()
    tarball = s.tarball
    if not os.path.isfile(tarball):
        raise KgateError(f"{tarball} not found (install {s.package}: 'make deps')")
    tmp = dst + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(tmp)
    log(f"[kernel] extracting {tarball}")
    subprocess.run(["tar", "-xf", tarball, "-C", tmp, "--strip-components=1"], check=True)
    atomic_write(os.path.join(tmp, ".kgate-source"), source_id())
    os.replace(tmp, dst)
    return dst


TREE_STAMP = ".kgate-tree"


def _tree_changes(tree, base):
    """Relative paths where tree, made as a hard-linked copy of base,
    no longer shares base's file: written by patch, added or removed.
    Object folders (top-level o-*) and the stamp are not the tree's."""
    changed = set()
    for top, other, removed in ((tree, base, False), (base, tree, True)):
        for d, dirs, files in os.walk(top):
            if d == top:
                dirs[:] = [x for x in dirs if not x.startswith("o-")]
            rel = os.path.relpath(d, top)
            for f in files:
                r = os.path.normpath(os.path.join(rel, f))
                if r == TREE_STAMP or r in changed:
                    continue
                try:
                    theirs = os.lstat(os.path.join(other, r))
                except FileNotFoundError:
                    changed.add(r)
                    continue
                if not removed and os.lstat(os.path.join(d, f)).st_ino != theirs.st_ino:
                    changed.add(r)
    return changed


def _read_stamp(tree):
    """(tree key, source id or None, changed paths) of a whole tree, else
    None. Stamps from before the changes were listed hold the key alone."""
    lines = (read_text(os.path.join(tree, TREE_STAMP)) or "").splitlines()
    if not lines:
        return None
    if len(lines) < 2 or not lines[1].startswith("source "):
        return lines[0], None, set()
    return lines[0], lines[1][len("source "):], set(filter(None, lines[2:]))


def _write_stamp(tree, key, changed):
    atomic_write(os.path.join(tree, TREE_STAMP),
                 "\n".join([key, "source " + source_id()] + sorted(changed)) + "\n")


def _same_file(a, b):
    try:
        sa, sb = os.lstat(a), os.lstat(b)
    except FileNotFoundError:
        return False
    if sa.st_ino == sb.st_ino:
        return True
    if sa.st_size != sb.st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def _update_in_place(dst, want_of, paths):
    """Make dst's paths what they are in the new tree (want_of(path):
    where the new text is). A file that changes is written anew (never
    through a hard link into the pristine tree) and so is newer than
    every object built from its old text: make rebuilds what depends on
    it and nothing else. Return the count."""
    n = 0
    for r in sorted(paths):
        want, have = want_of(r), os.path.join(dst, r)
        if os.path.lexists(want) and _same_file(want, have):
            continue
        n += 1
        if os.path.lexists(have):
            os.unlink(have)
        if os.path.lexists(want):
            os.makedirs(os.path.dirname(have), exist_ok=True)
            shutil.copyfile(want, have)
            shutil.copymode(want, have)
    return n


def tree_dir():
    return workspace.current().path("src", "tree")


def patched_paths(patch_files):
    """Every path the patches name (-p1), or None when one cannot be
    read plainly (quoted names)."""
    paths = set()
    for p in patch_files:
        for line in (read_text(p, "") or "").splitlines():
            m = re.match(r"^(?:--- |\+\+\+ )(\S+)", line)
            if m:
                if m.group(1) == "/dev/null":
                    continue
                if "/" not in m.group(1) or '"' in line:
                    return None
                paths.add(os.path.normpath(m.group(1).split("/", 1)[1]))
                continue
            m = re.match(r"^(?:rename|copy) (?:from|to) (.+)$", line)
            if m:
                if '"' in line:
                    return None
                paths.add(os.path.normpath(m.group(1)))
    return paths


def _apply(patch, tree):
    """GNU patch -p1 of one patch file in tree (it writes a new file for
    each file it changes, never through a hard link)."""
    return subprocess.run(["patch", "-p1", "--forward", "--no-backup-if-mismatch", "-s", "-i",
                           patch], cwd=tree, capture_output=True, text=True)


def _sparse_patch(tmp, base, patch_files):
    """Apply the patches to a tree holding only the files they name
    (hard links into base): the new text of a tree update without
    copying the whole tree. Return the paths that differ from base, or
    None when the patches do not apply there (the caller then uses a
    whole tree, which also says why)."""
    paths = patched_paths(patch_files)
    if paths is None or any(r.startswith("..") or os.path.isabs(r) for r in paths):
        return None
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for r in paths:
        src = os.path.join(base, r)
        if os.path.isfile(src) and not os.path.islink(src):
            os.makedirs(os.path.dirname(os.path.join(tmp, r)), exist_ok=True)
            os.link(src, os.path.join(tmp, r))
    for p in patch_files:
        if _apply(p, tmp).returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            return None
    for d, _, files in os.walk(tmp):
        for f in files:
            r = os.path.relpath(os.path.join(d, f), tmp)
            if r not in paths:  # a file patch made that no header named
                shutil.rmtree(tmp, ignore_errors=True)
                return None
    changed = set()
    for r in paths:
        mine, theirs = os.path.join(tmp, r), os.path.join(base, r)
        if os.path.lexists(mine) != os.path.lexists(theirs) or (
                os.path.lexists(mine) and os.lstat(mine).st_ino != os.lstat(theirs).st_ino):
            changed.add(r)
    return changed


def prepare_tree(variant, cand=NO_CANDIDATE):
    """Return a source tree with the variant's patches applied (the
    user's own tree itself for --source: it is only read).

    Every patch-series variant shares one tree. Switching it to another
    variant (fixed to known-bad, one mutant to the next) updates it in
    place, file by file, and keeps its object folders: only what the old
    and new patches touch is rebuilt. Objects are never copied between
    trees: kbuild and tools/objtool record absolute paths, so a copied
    object folder rebuilds everything. A debug variant has the tree of
    its plain one."""
    variant = base_variant(variant)
    if variant == CANDIDATE and cand.source:
        return cand.source
    key = tree_key(variant, cand)
    dst = tree_dir()
    old = _read_stamp(dst)
    if old and old[0] == key:
        return dst
    from_dir = pristine()
    tmp = dst + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    patch_files = variant_patches(variant, cand)
    user_patches = set(cand.patch_files()) if variant == CANDIDATE and cand.patches else set()
    if old and old[1] == source_id():
        changed = _sparse_patch(tmp, from_dir, patch_files)
        if changed is not None:
            def want_of(r):
                return os.path.join(tmp if r in changed else from_dir, r)
            return _switch(dst, variant, key, want_of, old[2] | changed, changed, tmp)
    # Hard links cost no space; GNU patch writes a new file for each file
    # it changes, so the pristine tree is never modified.
    subprocess.run(["cp", "-al", from_dir, tmp], check=True)
    for p in patch_files:
        log(f"[kernel] {variant}: applying {os.path.relpath(p, TOP)}")
        r = _apply(p, tmp)
        if r.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            # The user's patch failing is the candidate's failure, from
            # wherever in its folder the series takes it; ours, our own
            # (the series under kernel/ against Debian's source).
            mine = p not in user_patches
            raise (InfraError if mine else CandidateError)(
                f"{os.path.relpath(p, TOP)} does not apply to {source_id()}:\n{r.stdout}{r.stderr}")
    changed = _tree_changes(tmp, from_dir)
    if old and old[1] == source_id():
        return _switch(dst, variant, key, lambda r: os.path.join(tmp, r), old[2] | changed,
                       changed, tmp)
    _write_stamp(tmp, key, changed)
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(tmp, dst)
    return dst


def _switch(dst, variant, key, want_of, paths, changed, tmp):
    """Update the tree dst in place to the variant whose text of paths
    want_of() gives; changed: what its patches changed."""
    # No stamp while dst is half updated: an interrupted update is
    # started over from scratch next time.
    os.unlink(os.path.join(dst, TREE_STAMP))
    n = _update_in_place(dst, want_of, paths)
    _write_stamp(dst, key, changed)
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"[kernel] {variant}: tree updated in place ({n} file(s) changed), objects kept")
    return dst


def parse_fragment(path):
    """Return {CONFIG_X: value or None for 'is not set'}."""
    want = {}
    for line in read_text(path).splitlines():
        line = line.strip()
        m = re.match(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$", line)
        if m:
            want[m.group(1)] = m.group(2)
            continue
        m = re.match(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$", line)
        if m:
            want[m.group(1)] = None
    return want


def parse_config(text):
    have = {}
    for line in text.splitlines():
        m = re.match(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$", line)
        if m:
            have[m.group(1)] = m.group(2)
    return have


def verify_config(config_text, fragment_paths):
    """Every fragment line must be in the final config; return the misses."""
    have = parse_config(config_text)
    misses = []
    for frag in fragment_paths:
        for sym, val in parse_fragment(frag).items():
            got = have.get(sym)
            if got != val:
                misses.append(f"{os.path.basename(frag)}: {sym}="
                              f"{'n' if val is None else val}, got {'n' if got is None else got}")
    return misses


# What the configuration of an object folder was made from.
CONFIG_STAMP = ".kgate-config"
# Files a patch may change without changing any configuration.
NOT_KCONFIG = (".c", ".h", ".S", ".rst", ".txt")


def config_key(tgt, variant, src, frags):
    """The inputs of a target's .config in the shared tree: the source,
    the fragments, the compiler, and every file the variant's patches
    changed that could be Kconfig's (not C, headers, assembler or
    documentation). None for the user's own tree: always configured."""
    stamp = _read_stamp(src)
    if stamp is None or stamp[1] is None:
        return None
    h = hashlib.sha256()
    h.update(f"{source_id()}\0{tgt['kernel_arch']}\0{is_debug(variant)}\0".encode())
    h.update(tool_version(tgt["cross_compile"] + "gcc").encode())
    _hash_files(h, frags)
    for r in sorted(stamp[2]):
        if not r.endswith(NOT_KCONFIG):
            path = os.path.join(src, r)
            h.update(f"{r}\0".encode())
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def make_env():
    env = clean_env()
    env.setdefault("CCACHE_DIR", workspace.current().path("ccache"))
    env.setdefault("CCACHE_MAXSIZE", "5G")
    env["CCACHE_NOHASHDIR"] = "1"
    # Reproducible banners: the same inputs give the same objects.
    env["KBUILD_BUILD_TIMESTAMP"] = "Thu Jan  1 00:00:00 UTC 1970"
    env["KBUILD_BUILD_USER"] = "kgate"
    env["KBUILD_BUILD_HOST"] = "kgate"
    env["KBUILD_BUILD_VERSION"] = "1"
    return env


class BuildLock:
    """One kernel build at a time on this build/: the variants share one
    source tree, so a second build waits for the first."""

    def __enter__(self):
        build = workspace.current().build
        os.makedirs(build, exist_ok=True)
        self.f = open(os.path.join(build, "build.lock"), "a")
        try:
            fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("[kernel] waiting for another kernel build on this build/ to end")
            fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        self.f.close()


def compiler_version(cc):
    """The first line of cc --version ('aarch64-linux-gnu-gcc (Debian
    12.2.0-14) 12.2.0'), or None."""
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.splitlines()[0].strip() if out.strip() else None


# kbuild's configuration the fragments go on top of.
BASE_CONFIG = "tinyconfig"


def config_name(frags):
    """How the configuration is named for others (KCIDB's config_name):
    'tinyconfig+base+x86_64', '+debug+x86_64.debug' for a debug kernel."""
    return "+".join([BASE_CONFIG] + [os.path.basename(f)[:-len(".config")] for f in frags])


def config_path(tgt_name, variant):
    """The .config the kernel of image_path() was built with."""
    return os.path.join(out_dir(tgt_name, variant), "config")


def build_record(tgt_name, variant, which="last"):
    """What a build recorded, or None: which="last" is the last build
    (last-build.json), "cold" the first one from an empty object folder
    (cold-build.json, kept until build/ is wiped)."""
    text = read_text(os.path.join(out_dir(tgt_name, variant), f"{which}-build.json"))
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def build(tgt_name, variant, jobs=None, force=False, record=None, cand=NO_CANDIDATE):
    """Build (or reuse) the kernel for tgt_name/variant (the candidate
    variants: of cand); return its image path. With record (a dict),
    record["cached"] says whether the image was reused."""
    tgt = target(tgt_name)
    check_variant(variant)
    cross = tgt["cross_compile"]
    need_tools(["make", "ccache", "flex", "bison", "bc", "patch", cross + "gcc"])
    key = cache_key(tgt, variant, cand)
    out = out_dir(tgt_name, variant)
    if not force and read_text(os.path.join(out, "key")) == key and os.path.isfile(image_path(tgt_name, variant)):
        log(f"[kernel {tgt_name}/{variant}] up to date ({key[:12]})")
        if record is not None:
            record["cached"] = True
        return image_path(tgt_name, variant)
    if record is not None:
        record["cached"] = False
    with BuildLock():
        return _build(tgt, variant, key, jobs, cand)


def _build(tgt, variant, key, jobs, cand):
    tgt_name, cross = tgt["name"], tgt["cross_compile"]
    out = out_dir(tgt_name, variant)
    start = time.monotonic()
    src = prepare_tree(variant, cand)
    tree_s = time.monotonic() - start
    plain = base_variant(variant)
    objname = f"o-{tgt_name}" + (DEBUG_SUFFIX if is_debug(variant) else "")
    if plain == CANDIDATE and cand.source:
        # Nothing is written into the user's tree: objects go to build/.
        obj = objname = workspace.current().path("obj", "candidate", objname)
    else:
        obj = os.path.join(src, objname)
    new_objects = not os.path.isfile(os.path.join(obj, ".config"))
    os.makedirs(obj, exist_ok=True)
    jobs = jobs or (os.cpu_count() or 1) + 1
    label = f"kernel {tgt_name}/{variant}"
    # The candidate not building is the candidate's failure; the fixed
    # or known-bad kernel not building is ours.
    failed = CandidateError if plain == CANDIDATE else InfraError
    logpath = workspace.current().path("logs", f"kernel-{tgt_name}-{variant}.log")
    if os.path.exists(logpath):
        os.unlink(logpath)
    env = make_env()
    if new_objects:
        # A cold build misses ccache on every file, and a miss costs
        # here nearly as much again as the compile (79 files of
        # net/ipv4: 38 s plain, 70 s through ccache, 43 s with ccache
        # disabled): fill it only from incremental builds, whose files
        # come back as variants switch. The command line stays the same
        # (CC=ccache ...), so kbuild does not rebuild for it later.
        env["CCACHE_DISABLE"] = "1"
    mk = ["make", f"O={objname}", f"ARCH={tgt['kernel_arch']}", f"CROSS_COMPILE={cross}",
          f"CC=ccache {cross}gcc", "HOSTCC=ccache gcc"]
    frags = fragments(tgt, variant)
    ckey = config_key(tgt, variant, src, frags)
    cstamp = os.path.join(obj, CONFIG_STAMP)
    config_s = 0.0
    if ckey and read_text(cstamp) == ckey and os.path.isfile(os.path.join(obj, ".config")):
        log(f"[{label}] configuration unchanged (log: {os.path.relpath(logpath, TOP)})")
    else:
        if os.path.exists(cstamp):
            os.unlink(cstamp)
        log(f"[{label}] configuring (log: {os.path.relpath(logpath, TOP)})")
        config_s += run_logged(mk + [BASE_CONFIG], logpath, label, cwd=src, env=env,
                               error=failed)
        config_s += run_logged([os.path.join(src, "scripts/kconfig/merge_config.sh"), "-m", "-O",
                                obj, os.path.join(obj, ".config")] + frags, logpath, label,
                               cwd=src, env=env, error=failed)
        config_s += run_logged(mk + ["olddefconfig"], logpath, label, cwd=src, env=env,
                               error=failed)
    config_text = read_text(os.path.join(obj, ".config"))
    misses = verify_config(config_text, frags)
    if misses:
        raise failed(f"[{label}] config fragment lines that did not stick:\n  " + "\n  ".join(misses))
    if ckey:
        atomic_write(cstamp, ckey)
    log(f"[{label}] building with -j{jobs}" + ("" if new_objects else ", objects kept"))
    counted = {}
    make_s = run_logged(mk + [f"-j{jobs}", os.path.basename(tgt["image"])], logpath, label,
                        cwd=src, env=env, count_prefix="  CC", error=failed, counted=counted)
    built = os.path.join(obj, tgt["image"])
    if not os.path.isfile(built):
        raise failed(f"[{label}] build finished but {built} is missing")
    # Image and config first, key last: a present key means a whole output.
    keyfile = os.path.join(out, "key")
    if os.path.exists(keyfile):
        os.unlink(keyfile)
    atomic_copy(built, image_path(tgt_name, variant))
    atomic_copy(os.path.join(obj, ".config"), config_path(tgt_name, variant))
    secs = time.monotonic() - start
    record = {"seconds": round(secs, 1), "tree": round(tree_s, 1), "config": round(config_s, 1),
              "make": round(make_s, 1), "compiled": counted.get("lines", 0),
              "objects": "new" if new_objects else "kept", "jobs": jobs,
              "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              # What the kernel was built with, for whoever reads a
              # run's results (and its KCIDB export).
              "compiler": compiler_version(cross + "gcc"),
              "fragments": [os.path.relpath(f, TOP) for f in frags],
              "config_name": config_name(frags),
              "command": shlex.join(mk + [f"-j{jobs}", os.path.basename(tgt["image"])])}
    text = json.dumps(record, indent=1) + "\n"
    atomic_write(os.path.join(out, "last-build.json"), text)
    if new_objects and build_record(tgt_name, variant, "cold") is None:
        atomic_write(os.path.join(out, "cold-build.json"), text)
    atomic_write(keyfile, key)
    log(f"[{label}] done in {secs:.0f}s ({record['compiled']} files compiled"
        + ("" if new_objects else ", objects kept") + ")")
    return image_path(tgt_name, variant)
