"""Build and boot figures per target (a benchmark: it prints, it never fails
on a number). Without --cold it reports what the last builds and the
latest run recorded; with --cold it removes every build output and the
ccache, runs the matrix from nothing, then again with everything cached."""
import os
import shutil
import time

from . import kernel, results, rootfs
from . import run as runner
from .common import BUILD, VARIANTS, format_table, load_targets, log, read_text


def _secs(path):
    text = read_text(path)
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _fmt(v, unit="s"):
    return "-" if v is None else f"{v:.0f}{unit}" if v >= 10 else f"{v:.1f}{unit}"


def table(names, doc):
    jobs = {(j["target"], j["variant"]): j for j in (doc or {}).get("jobs", [])}
    heads = ["target", "kernel cold", "known-bad extra", "initramfs", "boot->1st result",
             "job fixed", "job known-bad"]
    rows = []
    for name in names:
        fixed = jobs.get((name, "fixed"), {})
        bad = jobs.get((name, "known-bad"), {})
        rows.append([
            name,
            _fmt(_secs(os.path.join(kernel.out_dir(name, "fixed"), "build-seconds"))),
            _fmt(_secs(os.path.join(kernel.out_dir(name, "known-bad"), "build-seconds"))),
            _fmt(_secs(os.path.join(os.path.dirname(rootfs.rootfs_path(name)), "build-seconds"))),
            _fmt(fixed.get("timing", {}).get("boot_to_first_result")),
            _fmt(fixed.get("seconds")),
            _fmt(bad.get("seconds")),
        ])
    return format_table(heads, rows)


def wipe():
    """Remove everything built (kernel trees, ccache, outputs), keep runs."""
    for sub in ("src", "ccache", "kernels", "rootfs", "busybox", "tests", "native", "logs"):
        shutil.rmtree(os.path.join(BUILD, sub), ignore_errors=True)


def bench(names=None, cold=False, parallel=2):
    names = names or list(load_targets())
    out = []
    if cold:
        log("[bench] removing every build output and the ccache")
        wipe()
        t0 = time.monotonic()
        doc, _ = runner.run(names, VARIANTS, parallel=parallel)
        cold_s = time.monotonic() - t0
        cold_table = table(names, doc)
        t0 = time.monotonic()
        doc, _ = runner.run(names, VARIANTS, parallel=parallel)
        warm_s = time.monotonic() - t0
        out.append(cold_table)
        out.append("")
        out.append(f"matrix of {len(names)} targets x {len(VARIANTS)} variants: "
                   f"cold {cold_s / 60:.1f} min, warm {warm_s / 60:.1f} min "
                   f"(verdict {doc['verdict']})")
    else:
        latest = os.path.join(runner.RUNS, "latest", "results.json")
        doc = results.load(latest) if os.path.isfile(latest) else None
        out.append(table(names, doc))
        if doc:
            out.append("")
            out.append(f"jobs from run {doc['run']}; builds as last recorded under build/")
    return "\n".join(out)
