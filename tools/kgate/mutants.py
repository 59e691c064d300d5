"""The mutation check: every patch in kernel/mutants/series breaks one
rule of tcp_add_backlog() on top of kernel/patches. Each one alone is
run as the candidate kernel (no benchmark, no known-bad control) and
must make the gate fail; a mutant that passes is a rule the gate cannot
see.

A mutant's message names the cases that must catch it
('Kgate-expect: backlog.ipv4.data_csum backlog.ipv6.data_csum') and
whether inconclusive cases are all it may produce ('Kgate-inconclusive:
allowed', for the mutants that hide or stop merging: those only take
away the tests' evidence that they exercised the merging path). A
mutant only a debug kernel can see ('Kgate-kernel: debug', a
use-after-free for KASAN) runs as the debug candidate, on the targets
that have a debug kernel.
"""
import datetime
import json
import os
import re
import time

from . import kernel, results
from . import run as runner
from .run import preflight
from . import workspace
from .workspace import new_out_dir
from .common import (CANDIDATE, TOP, KgateError, atomic_copy, atomic_write, debug_twin,
                     format_table, log)

KIND = "mutants"  # the series' mutants (kernel/series.yaml), kernel/mutants/series
DEFAULT_TARGETS = ["x86_64"]
SCHEMA_VERSION = 1

# What a mutant's run came to, from best to worst.
CAUGHT = "caught"          # a case failed: the gate saw the broken rule
ALLOWED = "allowed"        # only inconclusive cases, which its patch allows
NOT_CAUGHT = "not-caught"  # only inconclusive cases where a failure is required
UNDECIDED = "undecided"    # infrastructure: nothing could be judged
PASSED = "passed"          # every case passed: the gate is blind to it
OUTCOMES = [CAUGHT, ALLOWED, NOT_CAUGHT, UNDECIDED, PASSED]
LABELS = {CAUGHT: "caught", ALLOWED: "inconclusive (allowed)",
          NOT_CAUGHT: "NOT CAUGHT (inconclusive)", UNDECIDED: "UNDECIDED",
          PASSED: "PASSED: gate blind"}
# A mutant's combined verdict over its targets, from caught to blind.
VERDICTS = [results.REGRESSION, results.ERROR, results.INCONCLUSIVE, results.INFRA, results.PASS]


def parse_patch(text):
    """Return (expected cases, inconclusive allowed, files touched, debug)
    of a mutant patch: the Kgate- lines of its message and its diff's
    files."""
    message = text.split("\n---\n", 1)[0]
    expect = []
    for m in re.finditer(r"^Kgate-expect:[ \t]*(.*)$", message, re.M):
        expect += m.group(1).split()
    allowed = bool(re.search(r"^Kgate-inconclusive:[ \t]*allowed[ \t]*$", message, re.M))
    debug = bool(re.search(r"^Kgate-kernel:[ \t]*debug[ \t]*$", message, re.M))
    files = []
    for m in re.finditer(r"^\+\+\+ (?:b/)?(\S+)", text, re.M):
        if m.group(1) not in files:
            files.append(m.group(1))
    return expect, allowed, files, debug


def load():
    """The mutants of kernel/mutants/series, in order."""
    out = []
    for path in kernel.series(KIND):
        with open(path, encoding="utf-8") as f:
            expect, allowed, files, debug = parse_patch(f.read())
        name = os.path.basename(path)
        out.append({"name": name[:-len(".patch")] if name.endswith(".patch") else name,
                    "path": path, "expect": expect, "inconclusive_allowed": allowed,
                    "files": files, "debug": debug})
    return out


def select(mutants, wanted):
    """The mutants named in wanted (file name, name or number), in
    series order; all of them when wanted is empty."""
    if not wanted:
        return mutants
    picked = set()
    for w in wanted:
        hits = [m["name"] for m in mutants
                if w in (m["name"], os.path.basename(m["path"]), m["name"].split("-", 1)[0])]
        if not hits:
            raise KgateError(f"no mutant '{w}' in kernel/{KIND}/series; there are: "
                             f"{', '.join(m['name'] for m in mutants)}")
        picked.update(hits)
    return [m for m in mutants if m["name"] in picked]


def outcome(verdict, inconclusive_allowed):
    """What one job's verdict says about a mutant."""
    # A kernel that crashes the test program fails the gate as well.
    if verdict in (results.REGRESSION, results.ERROR):
        return CAUGHT
    if verdict == results.INCONCLUSIVE:
        return ALLOWED if inconclusive_allowed else NOT_CAUGHT
    if verdict == results.PASS:
        return PASSED
    return UNDECIDED


def short(case):
    return results.short_case(case)


def job_entry(mutant, job):
    """One target's part of a mutant's result."""
    by_name = {c["case"]: c["result"] for c in job.get("cases", [])}
    failed = [c for c, r in by_name.items() if r == "fail"]
    skipped = [c for c in results.gate().cases if by_name.get(c) == "skip"]
    return {
        "target": job["target"], "verdict": job["verdict"], "reason": job.get("reason", ""),
        "outcome": outcome(job["verdict"], mutant["inconclusive_allowed"]),
        "failed": failed, "inconclusive": skipped,
        "expected_not_failed": [c for c in mutant["expect"] if by_name.get(c) != "fail"],
        "seconds": job.get("seconds"),
    }


def variant(mutant):
    """The kernel a mutant is built as: the candidate, or its debug twin."""
    return debug_twin(CANDIDATE) if mutant.get("debug") else CANDIDATE


def judge(mutant, target_names, doc, run_dir, seconds, error=None):
    """A mutant's result from its run's results document (or from the
    error that stopped the run)."""
    found = {j["target"]: j for j in (doc or {}).get("jobs", [])
             if j["variant"] == variant(mutant)}
    jobs = []
    for name in target_names:
        job = found.get(name) or {
            "target": name, "verdict": results.INFRA,
            "reason": error or "no job for this target in the run"}
        jobs.append(job_entry(mutant, job))
    verdict = max((j["verdict"] for j in jobs),
                  key=lambda v: VERDICTS.index(v) if v in VERDICTS else len(VERDICTS))
    union = []
    for key in ("failed", "inconclusive", "expected_not_failed"):
        union.append(sorted({c for j in jobs for c in j[key]}, key=_case_order))
    return {
        "mutant": mutant["name"],
        "patch": os.path.relpath(mutant["path"], TOP),
        "variant": variant(mutant),
        "verdict": verdict,
        "outcome": max((j["outcome"] for j in jobs), key=OUTCOMES.index),
        "failed": union[0], "inconclusive": union[1],
        "expected": mutant["expect"], "expected_not_failed": union[2],
        "inconclusive_allowed": mutant["inconclusive_allowed"],
        "seconds": round(seconds, 1),
        "run": os.path.relpath(run_dir, TOP) if run_dir else None,
        "error": error,
        "jobs": jobs,
    }


def _case_order(case):
    order = results.gate().cases
    return (order.index(case) if case in order else len(order), case)


def exit_code(entries):
    """0 when every mutant was caught (or only inconclusive where its
    patch allows it), else 1."""
    return 0 if entries and all(e["outcome"] in (CAUGHT, ALLOWED) for e in entries) else 1


def duration(seconds):
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def report(entries, total_seconds, targets):
    """The table (a row per mutant and target) and what it adds up to."""
    heads = ["mutant", "target", "verdict", "result", "time", "failed", "inconclusive"]
    rows, notes = [], []
    for e in entries:
        for i, j in enumerate(e["jobs"]):
            name = e["mutant"] + (" (debug kernel)" if e.get("variant", CANDIDATE) != CANDIDATE
                                  else "")
            rows.append([name if i == 0 else "", j["target"], j["verdict"],
                         LABELS[j["outcome"]], duration(e["seconds"]) if i == 0 else "",
                         " ".join(short(c) for c in j["failed"]) or "-",
                         str(len(j["inconclusive"])) if j["inconclusive"] else "-"])
            where = f"{e['mutant']} on {j['target']}"
            if j["inconclusive"]:
                notes.append(f"{where} inconclusive: "
                             f"{', '.join(short(c) for c in j['inconclusive'])}")
            if j["outcome"] == UNDECIDED:
                reason = (j["reason"] or "").strip().splitlines() or [""]
                notes.append(f"{where} undecided ({j['verdict']}): {reason[0]}")
            if j["outcome"] in (CAUGHT, ALLOWED) and j["expected_not_failed"]:
                notes.append(f"{where} {LABELS[j['outcome']]}, but these expected cases did "
                             f"not fail: {', '.join(short(c) for c in j['expected_not_failed'])}")
    counts = {o: sum(e["outcome"] == o for e in entries) for o in OUTCOMES}
    summary = (f"Mutants: {len(entries)} on {', '.join(targets)} in {duration(total_seconds)}: "
               + ", ".join(f"{counts[o]} {LABELS[o].split(':')[0].lower()}" for o in OUTCOMES))
    code = exit_code(entries)
    if code == 0:
        verdict = "PASS: every mutant was caught"
        if counts[ALLOWED]:
            verdict += " or, where allowed, only inconclusive"
    elif counts[PASSED]:
        verdict = "FAIL: the gate is blind to " + ", ".join(
            e["mutant"] for e in entries if e["outcome"] == PASSED)
    else:
        verdict = "FAIL: not every mutant was caught"
    return "\n".join([format_table(heads, rows, rule=True)] + notes +
                     ["", summary, f"Mutation check: {verdict}"])


def stage(mutant, out=None):
    """A folder holding just this mutant, for the candidate's --patches.
    Its path is stable, so an unchanged mutant keeps its kernel's key."""
    folder = os.path.join(out or workspace.current().path("mutants"), "patches", mutant["name"])
    atomic_copy(mutant["path"], os.path.join(folder, os.path.basename(mutant["path"])))
    return folder


def run_one(mutant, target_names, parallel=2, jobs=None):
    """Build and run one mutant as the candidate kernel (a debug mutant:
    its debug kernel, on the targets that have one); return its result."""
    start = time.monotonic()
    doc = run_dir = error = None
    if mutant.get("debug"):
        target_names = [t for t in target_names if kernel.has_debug(t)] or target_names
    try:
        cand = kernel.Candidate(patches=stage(mutant))
        doc, run_dir = runner.run(target_names, [variant(mutant)], parallel=parallel, jobs=jobs,
                                  bench=False, latest=False, cand=cand)
    except KgateError as e:
        # A mutant that does not apply or build, or a run that broke:
        # this mutant is undecided; the others still run.
        error = str(e)
        log(f"[mutants] {mutant['name']}: {error}")
    return judge(mutant, target_names, doc, run_dir, time.monotonic() - start, error)


def _write(out_dir, doc, text=None):
    atomic_write(os.path.join(out_dir, "mutants.json"), json.dumps(doc, indent=2) + "\n")
    if text is not None:
        atomic_write(os.path.join(out_dir, "mutants.txt"), text + "\n")


def check(target_names=None, wanted=None, parallel=2, jobs=None):
    """Run the mutation check; return (text, exit code, summary folder)."""
    target_names = list(target_names or DEFAULT_TARGETS)
    todo = select(load(), wanted)
    preflight(target_names)
    stamp = datetime.datetime.now(datetime.timezone.utc)
    out_dir = new_out_dir(workspace.current().path("mutants"))
    doc = {"schema": SCHEMA_VERSION, "started": stamp.isoformat(timespec="seconds"),
           "finished": None, "targets": target_names, "exit_code": None, "seconds": None,
           "mutants": []}
    start = time.monotonic()
    for i, m in enumerate(todo, 1):
        log(f"[mutants] {i}/{len(todo)} {m['name']} on {', '.join(target_names)}")
        e = run_one(m, target_names, parallel=parallel, jobs=jobs)
        log(f"[mutants] {m['name']}: {e['verdict']}: {LABELS[e['outcome']]} in "
            f"{duration(e['seconds'])}")
        doc["mutants"].append(e)
        _write(out_dir, doc)  # an interrupted check keeps what it did
    total = time.monotonic() - start
    text = report(doc["mutants"], total, target_names)
    doc.update(finished=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               exit_code=exit_code(doc["mutants"]), seconds=round(total, 1))
    _write(out_dir, doc, text)
    return text, doc["exit_code"], out_dir
