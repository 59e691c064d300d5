"""Where the time goes, and the speed goals (a benchmark: it prints, it
never fails on a number).

Without --cold it reads what was recorded: each kernel's first cold
build and its last build (build/kernels/<target>/<variant>/*-build.json),
the initramfs, and the runs under build/runs (each job's phases and
programs, each run's wall time). With --cold it removes every build
output and the ccache, runs the matrix from nothing, then again warm,
and records both in build/bench/cold.json.
"""
import datetime
import json
import os
import shutil
import time

from . import figures, kernel, results, rootfs
from .reports import fmt_seconds as _fmt, phases_table
from . import run as runner
from . import workspace
from .common import (CANDIDATE, KNOWN_BAD, VARIANTS, KgateError, atomic_write, default_targets,
                     format_table, log, read_text, tool_version)


def cold_record():
    """Where bench --cold records its figures: build/bench/cold.json."""
    return workspace.current().path("bench", "cold.json")


# The speed goals of issue 16, each in seconds: what the figure is.
GOALS = [
    ("warm", 180, "warm `make run`: every target, fixed and known-bad, all cached"),
    ("candidate", 360, "one-patch candidate on every target (`run --patches`), "
                       "fixed trees built"),
    ("incremental", 15, "known-bad or candidate kernel on top of the fixed one, "
                        "slowest target"),
    ("cold", 45 * 60, "the matrix from nothing (`bench --cold`; `make deps` apart)"),
]


def _secs(path):
    text = read_text(path)
    try:
        return float(text) if text else None
    except ValueError:
        return None


def load_runs(limit=200):
    """The newest runs' results.json documents, newest first."""
    runs = workspace.current().runs
    if not os.path.isdir(runs):
        return []
    docs = []
    for name in sorted(os.listdir(runs), reverse=True)[:limit]:
        path = os.path.join(runs, name, "results.json")
        if name != "latest" and os.path.isfile(path):
            try:
                docs.append(results.load(path))
            except (OSError, ValueError):
                continue
    return docs


def _all_cached(doc):
    return all((j.get("timing") or {}).get("build", {}).get("cached") for j in doc["jobs"])


def _variants(doc):
    return {j["variant"] for j in doc["jobs"]}


def _targets(doc):
    return {j["target"] for j in doc["jobs"]}


def warm_run(docs, names):
    """The newest run of fixed and known-bad on every target with every
    kernel and initramfs cached, benchmark on."""
    for doc in docs:
        if (doc.get("seconds") and _variants(doc) == set(VARIANTS) and
                _targets(doc) >= set(names) and _all_cached(doc) and
                any(c.get("units") for j in doc["jobs"] for c in j.get("cases", []))):
            return doc
    return None


def candidate_run(docs, names):
    """The newest run of a --patches candidate on every target whose
    candidate kernels were built in it."""
    for doc in docs:
        if not (doc.get("seconds") and (doc.get("candidate") or {}).get("patches")):
            continue
        cand = [j for j in doc["jobs"] if j["variant"] == CANDIDATE]
        if ({j["target"] for j in cand} >= set(names) and
                not any((j.get("timing") or {}).get("build", {}).get("cached", True)
                        for j in cand)):
            return doc
    return None


def incremental(names):
    """{target: (seconds, variant, files compiled)}: the quicker of the
    last known-bad and candidate builds that kept the fixed objects (a
    build beside running guests, run --overlap, is slower than the
    build itself)."""
    out = {}
    for name in names:
        for v in (KNOWN_BAD, CANDIDATE):
            rec = kernel.build_record(name, v)
            if rec and rec.get("objects") == "kept" and \
                    rec["seconds"] < out.get(name, (float("inf"),))[0]:
                out[name] = (rec["seconds"], v, rec.get("compiled"))
    return out


def targets_table(names, doc):
    """Per target: builds as recorded, and the jobs of run doc."""
    jobs = {(j["target"], j["variant"]): j for j in (doc or {}).get("jobs", [])}
    g = results.gate()
    tests, benches = g.role("test"), g.role("bench")
    heads = (["target", "kernel cold", "files", "known-bad on top", "files", "initramfs", "boot"]
             + [p.name for p in tests] + ["bench", "job fixed", "job known-bad"])
    rows = []
    for name in names:
        cold = kernel.build_record(name, "fixed", "cold") or {}
        bad = kernel.build_record(name, KNOWN_BAD) or {}
        fixed = jobs.get((name, "fixed"), {})
        progs = (fixed.get("timing") or {}).get("programs", {})
        rows.append([
            name, _fmt(cold.get("seconds")), str(cold.get("compiled", "-")),
            _fmt(bad.get("seconds")), str(bad.get("compiled", "-")),
            _fmt(_secs(os.path.join(os.path.dirname(rootfs.rootfs_path(name)),
                                    "build-seconds"))),
            _fmt((fixed.get("timing") or {}).get("boot")),
        ] + [_fmt(progs.get(p.name)) for p in tests] + [
            _fmt(sum(progs[p.name] for p in benches) if benches and
                 all(isinstance(progs.get(p.name), (int, float)) for p in benches) else None),
            _fmt(fixed.get("seconds")), _fmt(jobs.get((name, KNOWN_BAD), {}).get("seconds")),
        ])
    return format_table(heads, rows)


def goals(names, docs):
    """Each goal: (name, goal seconds, figure seconds or None, where from)."""
    out = []
    warm = warm_run(docs, names)
    out.append(("warm", warm and warm["seconds"],
                warm and f"run {warm['run']}, {len(_targets(warm))} targets, "
                f"{len(warm['jobs'])} jobs"))
    cand = candidate_run(docs, names)
    out.append(("candidate", cand and cand["seconds"],
                cand and f"run {cand['run']}, {len(_targets(cand))} targets, "
                f"{len(cand['jobs'])} jobs"))
    inc = incremental(names)
    if inc:
        slow = max(inc, key=lambda n: inc[n][0])
        s, v, files = inc[slow]
        out.append(("incremental", s, f"{slow}/{v}, {files} files compiled; "
                    f"{len(inc)} of {len(names)} targets recorded"))
    else:
        out.append(("incremental", None, None))
    cold = json.loads(read_text(cold_record()) or "null")
    out.append(("cold", cold and cold["cold_seconds"],
                cold and f"bench --cold of {cold['finished']}, {len(cold['targets'])} targets"))
    return out


def goals_text(names, docs):
    heads = ["goal", "figure", "target", "met", "from"]
    rows = []
    what = {g[0]: (g[1], g[2]) for g in GOALS}
    for name, figure, source in goals(names, docs):
        limit, label = what[name]
        met = "-" if figure is None else ("yes" if figure <= limit else "NO")
        rows.append([label, _fmt(figure), "<= " + _fmt(limit), met, source or "not measured yet"])
    return format_table(heads, rows)


def wipe():
    """Remove everything built (kernel trees, ccache, outputs), keep runs."""
    for sub in ("src", "ccache", "kernels", "rootfs", "busybox", "tests", "native", "logs", "obj"):
        shutil.rmtree(workspace.current().path(sub), ignore_errors=True)


def cold_bench(names, parallel):
    """The matrix from nothing, then warm; recorded in cold_record()."""
    log("[bench] removing every build output and the ccache")
    wipe()
    t0 = time.monotonic()
    cold_doc, _ = runner.run(names, VARIANTS, parallel=parallel)
    cold_s = time.monotonic() - t0
    t0 = time.monotonic()
    warm_doc, _ = runner.run(names, VARIANTS, parallel=parallel)
    warm_s = time.monotonic() - t0
    rec = {"targets": names, "cold_seconds": round(cold_s, 1), "warm_seconds": round(warm_s, 1),
           "cold_run": cold_doc["run"], "warm_run": warm_doc["run"],
           "cold_verdict": cold_doc["verdict"], "warm_verdict": warm_doc["verdict"],
           "finished": warm_doc["finished"]}
    os.makedirs(os.path.dirname(cold_record()), exist_ok=True)
    atomic_write(cold_record(), json.dumps(rec, indent=1) + "\n")
    return rec


def bench(names=None, cold=False, parallel=2):
    names = names or default_targets()
    out = []
    if cold:
        rec = cold_bench(names, parallel)
        out += [f"matrix of {len(names)} targets x {len(VARIANTS)} variants from nothing: "
                f"{_fmt(rec['cold_seconds'])} (run {rec['cold_run']}, {rec['cold_verdict']}); "
                f"again warm: {_fmt(rec['warm_seconds'])} ({rec['warm_run']}, "
                f"{rec['warm_verdict']})", ""]
    docs = load_runs()
    doc = latest_doc()
    out.append(targets_table(names, doc))
    out.append("")
    out.append("kernel cold: the first build from an empty object folder; known-bad: its last "
               "build, on the fixed objects when 'files' is small")
    if doc:
        out += ["", f"Jobs of run {doc['run']} ({_fmt(doc.get('seconds'))} in all):",
                phases_table(doc)]
    out += ["", "Goals:", goals_text(names, docs)]
    return "\n".join(out)


def latest_doc():
    """The latest run's results.json document, or None."""
    path = os.path.join(workspace.current().latest, "results.json")
    return results.load(path) if os.path.isfile(path) else None


def _host():
    """What the figures were measured on: cores, memory, QEMU."""
    mem = next((ln.split()[1] for ln in (read_text("/proc/meminfo") or "").splitlines()
                if ln.startswith("MemTotal:")), None)
    try:
        qemu = tool_version("qemu-system-x86_64")
    except KgateError:
        qemu = "QEMU not found"
    # the jobs ask for no KVM (templates/job.yaml.j2: no_kvm), so
    # every guest is emulated
    return f"{os.cpu_count()} cores, {int(mem) // (1 << 20) if mem else '?'} GiB, {qemu}, TCG"


def latest_mutants():
    """The newest mutation check's summary (build/mutants/<time>/
    mutants.txt) and its folder name, or (None, None)."""
    root = workspace.current().path("mutants")
    names = sorted((n for n in os.listdir(root) if n[:1].isdigit()), reverse=True) \
        if os.path.isdir(root) else []
    for n in names:
        text = read_text(os.path.join(root, n, "mutants.txt"))
        if text:
            return text.rstrip("\n"), n
    return None, None


def markdown(names, text):
    """docs/measurements.md: bench's output, the latest run's benchmark
    figures and the newest mutation check, as one page written by the
    tool (never edited by hand)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    doc = latest_doc()
    page = ["# Measurements", "",
            f"Written by `kgate.py bench --markdown` on {stamp} from the builds and runs",
            f"recorded under `build/` on this machine ({_host()});",
            "not edited by hand: run it again to bring the page up to date. Compare",
            "timings as ratios measured in one session: this kind of machine's speed",
            "changes about 2x from day to day. [The benchmark](benchmark.md) says what",
            "its figures mean; commit messages carry the history.", "",
            f"## Targets, jobs and goals ({', '.join(names)})", "", "```text", text, "```"]
    figs = figures.table(doc["jobs"]) if doc else ""
    if figs:
        page += ["", f"## Benchmark figures (run {doc['run']})", "", "```text", figs, "```"]
    mtext, mrun = latest_mutants()
    if mtext:
        page += ["", f"## Mutation check (build/mutants/{mrun})", "", "```text", mtext, "```"]
    return "\n".join(page) + "\n"
