"""Paths, target data and small helpers shared by the kgate tools."""
import hashlib
import os
import shutil
import subprocess
import sys
import time

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("KGATE_BUILD", os.path.join(TOP, "build"))
VARIANTS = ("fixed", "known-bad")
# The user's kernel under test (kgate.py run --patches/--source/--image):
# judged like the fixed kernel, next to the known-bad control.
CANDIDATE = "candidate"
ALL_VARIANTS = VARIANTS + (CANDIDATE,)


class KgateError(Exception):
    """An error the user can act on; printed without a traceback."""


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
        raise KgateError(f"unknown target '{name}'; known targets: {', '.join(sorted(targets))}")
    return targets[name]


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


def atomic_copy(src, dst):
    """Copy src to dst so that dst is either absent, old, or complete."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    tmp = f"{dst}.tmp.{os.getpid()}"
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def atomic_write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


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


def run_logged(cmd, logpath, label, cwd=None, env=None, count_prefix=None, every=20.0):
    """Run cmd with its output in logpath; print a progress line now and then.

    On failure the tail of the log is printed and KgateError raised.
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
    if rc != 0:
        tail = read_text(logpath, "").splitlines()[-25:]
        raise KgateError(f"{label}: '{' '.join(cmd[:3])} ...' failed (exit {rc}); "
                         f"last lines of {logpath}:\n" + "\n".join(tail))
    return time.monotonic() - start
