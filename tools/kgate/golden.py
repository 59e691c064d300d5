"""Golden rendered jobs: every job kgate renders (local and lab, each
target and variant) and every local device, stored under tests/data/golden/
so that a change to a template, a target's row or a default shows up as
a reviewed diff.

The artifacts are stand-ins (their paths as kgate lays them out, under
/kgate/ instead of the clone's own folder; a hash of that path instead
of the file's), so the stored jobs do not depend on a build or on where
the clone lives. 'kgate.py golden' compares, 'kgate.py golden --update'
writes them again on purpose.
"""
import difflib
import hashlib
import os

from . import kernel, render, rootfs
from . import run as runner
from .lab import served_path
from .common import ALL_VARIANTS, TOP, atomic_write, load_targets, target

GOLDEN = os.path.join(TOP, "tests", "data", "golden")
# Where the stand-in artifacts live: a local job's file:// root, a lab's
# artifact server (example.org: reserved for documentation).
LOCAL_ROOT = "/kgate"
LAB_BASE_URL = "https://lab.example.org/kgate/"
# The lab jobs are rendered for the device type kgate ships for labs
# (templates/lab/kgate-qemu.jinja2).
LAB_OVERRIDES = {"device_type": "kgate-qemu"}


def _stand_in(path, lab):
    """{'url', 'sha256'} for the artifact kgate keeps at path."""
    rel = os.path.relpath(path, TOP)
    digest = hashlib.sha256(rel.encode()).hexdigest()
    if lab:
        return {"url": LAB_BASE_URL + served_path(digest, path), "sha256": digest}
    return {"url": "file://" + os.path.join(LOCAL_ROOT, rel), "sha256": digest}


def render_all():
    """{path relative to tests/data/golden: text} of every job and device."""
    out = {}
    for name in load_targets():
        tgt = target(name)
        for flavour, lab in (("local", False), ("lab", True)):
            over = LAB_OVERRIDES if lab else {}
            for v in runner.target_variants(name, ALL_VARIANTS, quiet=True):
                k = _stand_in(kernel.image_path(name, v), lab)
                r = _stand_in(rootfs.rootfs_path(name), lab)
                text = render.render_job(tgt, v, k, r, **over)
                rel = os.path.join(flavour, f"{name}-{v}.yaml")
                render.validate_job(text, f"golden {rel}")
                out[rel] = text
        out[os.path.join("devices", f"{name}.yaml")] = render.render_device(tgt)
    return out


def stored(root=None):
    """{path relative to root: text} of the stored golden files."""
    root = root or GOLDEN
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".yaml"):
                path = os.path.join(d, f)
                with open(path, encoding="utf-8") as fh:
                    out[os.path.relpath(path, root)] = fh.read()
    return out


def compare(root=None):
    """The differences between what kgate renders now and the stored
    files (root: default tests/data/golden), as unified diff lines (empty:
    none)."""
    want, have = render_all(), stored(root)
    lines = []
    for rel in sorted(set(want) | set(have)):
        old, new = have.get(rel), want.get(rel)
        if old == new:
            continue
        lines += difflib.unified_diff(
            (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
            "a/tests/data/golden/" + rel if old is not None else "/dev/null",
            "b/tests/data/golden/" + rel if new is not None else "/dev/null")
    return lines


def update(root=None):
    """Write every golden file again and remove those no longer
    rendered; return (written, removed) counts of changed files."""
    root = root or GOLDEN
    want, have = render_all(), stored(root)
    written = removed = 0
    for rel, text in want.items():
        if have.get(rel) != text:
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            atomic_write(path, text)
            written += 1
    for rel in set(have) - set(want):
        os.unlink(os.path.join(root, rel))
        removed += 1
    return written, removed
