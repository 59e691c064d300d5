"""Name the patch of a candidate series after which the gate fails.

The series (its folder's 'series' file, else its patches in name order)
is applied step by step on top of kernel/patches: step k is the fixed
base plus the first k patches (step 0 is the fixed kernel itself). The
ends are checked first (step 0 must pass, step n must fail); then the
range is halved until one patch separates a passing step from a failing
one. A step that cannot be judged (its patches do not apply, its kernel
does not build, its verdict is inconclusive or infrastructure) is
skipped, as 'git bisect skip' does, and the next step nearest the middle
is tried. The answer is verified as KernelCI's bisection did: the
culprit's step must fail twice more and the step before it pass twice
more, else it is called unreliable.

Each step runs only what decides the verdict: the candidate kernel on
the named targets, without the benchmark and the known-bad control.
"""
import datetime
import json
import os
import re
import shutil
import time

from . import kernel, results
from . import run as runner
from .common import (BUILD, CANDIDATE, TOP, CandidateError, KgateError, atomic_write,
                     format_table, log, read_text, target)

OUT = os.path.join(BUILD, "bisect")
DEFAULT_TARGETS = ["x86_64"]
SCHEMA_VERSION = 1
VERIFY_RUNS = 2

# What one step came to.
GOOD = "good"    # the gate passed
BAD = "bad"      # a case failed, or a test program broke on the kernel
SKIP = "skip"    # not judged: no kernel, inconclusive or infrastructure


def _show(path):
    """A path as a reader wants it: relative inside the checkout."""
    path = os.path.abspath(path)
    return os.path.relpath(path, TOP) if path.startswith(TOP + os.sep) else path


def status_of(verdict):
    """A run verdict's meaning for the bisection."""
    if verdict == results.PASS:
        return GOOD
    if verdict in (results.REGRESSION, results.ERROR):
        return BAD
    return SKIP


def search(n, test):
    """Find the first bad step in 1..n, given step 0 good and step n bad.

    test(k) judges step k (GOOD, BAD or SKIP; the caller caches). Return
    (good, bad): the last good and first bad step found. bad == good + 1
    names the culprit; a wider gap means every step between was skipped.
    """
    good, bad = 0, n
    skipped = set()
    while bad - good > 1:
        todo = [k for k in range(good + 1, bad) if k not in skipped]
        if not todo:
            break
        mid = (good + bad) // 2
        k = min(todo, key=lambda x: (abs(x - mid), x))
        st = test(k)
        if st == GOOD:
            good = k
        elif st == BAD:
            bad = k
        else:
            skipped.add(k)
    return good, bad


def patch_info(path):
    """(subject, author) of a patch in git format-patch form, as far as
    its headers say."""
    text = read_text(path, "") or ""
    head = text.split("\n\n", 1)[0]
    subject = re.search(r"^Subject: *(?:\[[^\]]*\] *)?(.*(?:\n[ \t].*)*)", head, re.M)
    author = re.search(r"^From: *(.*(?:\n[ \t].*)*)", head, re.M)
    clean = (lambda m: " ".join(m.group(1).split()) if m else "")
    return clean(subject) or os.path.basename(path), clean(author) or "unknown"


def series_of(folder):
    """The candidate series in order (kernel's rules for --patches)."""
    kernel.set_candidate(patches=folder)
    return kernel.candidate_patches()


def stage(patches, k, out_dir):
    """A folder with the first k patches and a series file naming them."""
    folder = os.path.join(out_dir, "steps", f"{k:03d}")
    if os.path.isdir(folder):
        return folder
    tmp = folder + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    names = []
    for i, p in enumerate(patches[:k], 1):
        # Numbered: two patches of the same name from different folders
        # stay apart, and the order is the series' order.
        name = f"{i:04d}-{os.path.basename(p)}"
        shutil.copy(p, os.path.join(tmp, name))
        names.append(name)
    atomic_write(os.path.join(tmp, "series"), "".join(f"{n}\n" for n in names))
    os.rename(tmp, folder)
    return folder


def default_targets(folder):
    """The targets where the latest run of this series failed, else x86_64."""
    doc = None
    path = os.path.join(runner.RUNS, "latest", "results.json")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        pass
    cand = (doc or {}).get("candidate") or {}
    if cand.get("patches") and os.path.abspath(cand["patches"]) == os.path.abspath(folder):
        failed = [j["target"] for j in doc.get("jobs", [])
                  if j.get("variant") == CANDIDATE and status_of(j.get("verdict")) == BAD]
        if failed:
            return failed
    return list(DEFAULT_TARGETS)


def _failed_cases(doc):
    return sorted({f"{j['target']}:{c['case']}" for j in (doc or {}).get("jobs", [])
                   for c in j.get("cases", []) if c.get("result") == "fail"})


class Runner:
    """Runs steps: builds and runs step k's kernel, keeps every attempt."""

    def __init__(self, patches, target_names, out_dir, parallel=2, jobs=None):
        self.patches = patches
        self.targets = target_names
        self.out_dir = out_dir
        self.parallel = parallel
        self.jobs = jobs
        self.steps = []       # every attempt, in order
        self.first = {}       # k -> its first attempt

    def attempt(self, k, why):
        n = sum(s["k"] == k for s in self.steps) + 1
        label = (f"step {k}/{len(self.patches)} "
                 f"({'the fixed base' if k == 0 else os.path.basename(self.patches[k - 1])})")
        log(f"[bisect] {label}: {why}")
        start = time.monotonic()
        doc = run_dir = None
        verdict, reason = None, ""
        try:
            if k == 0:
                doc, run_dir = runner.run(self.targets, ["fixed"], parallel=self.parallel,
                                          jobs=self.jobs, bench=False, latest=False)
            else:
                kernel.set_candidate(patches=stage(self.patches, k, self.out_dir))
                doc, run_dir = runner.run(self.targets, [CANDIDATE], parallel=self.parallel,
                                          jobs=self.jobs, bench=False, latest=False)
            verdict, reason = doc["verdict"], doc.get("summary", "")
        except CandidateError as e:
            # What failed, and the compiler's first word on it.
            lines = str(e).splitlines()
            first_error = next((ln.strip() for ln in lines if "error:" in ln), "")
            verdict, reason = "no kernel", "; ".join(x for x in (lines[0], first_error) if x)
        except KgateError as e:
            verdict, reason = results.INFRA, str(e).splitlines()[0]
        step = {"k": k, "attempt": n, "why": why,
                "patch": None if k == 0 else _show(self.patches[k - 1]),
                "verdict": verdict, "status": status_of(verdict), "reason": reason,
                "seconds": round(time.monotonic() - start, 1),
                "run": os.path.relpath(run_dir, TOP) if run_dir else None,
                "failed": _failed_cases(doc)}
        if doc is not None:
            dst = os.path.join(self.out_dir, "steps", f"{k:03d}-results-{n}.json")
            atomic_write(dst, json.dumps(doc, indent=2) + "\n")
            step["results"] = os.path.relpath(dst, TOP)
        self.steps.append(step)
        self.first.setdefault(k, step)
        log(f"[bisect] {label}: {verdict} ({step['status']}) in {step['seconds']:.0f}s")
        return step

    def test(self, k, why="halving"):
        if k not in self.first:
            self.attempt(k, why)
        return self.first[k]["status"]


def bisect(folder, target_names=None, parallel=2, jobs=None, step_runner=None):
    """Bisect the series in folder; return (report text, exit code, out dir)."""
    patches = series_of(folder)
    target_names = list(target_names or default_targets(folder))
    if step_runner is None:
        runner.preflight(target_names)
    else:
        for name in target_names:
            target(name)
    stamp = datetime.datetime.now(datetime.timezone.utc)
    out_dir = os.path.join(OUT, stamp.strftime("%Y%m%dT%H%M%SZ"))
    os.makedirs(out_dir, exist_ok=True)
    r = step_runner or Runner(patches, target_names, out_dir, parallel, jobs)
    start = time.monotonic()
    n = len(patches)
    doc = {"schema": SCHEMA_VERSION, "started": stamp.isoformat(timespec="seconds"),
           "series": os.path.abspath(folder), "patches": [_show(p) for p in patches],
           "targets": target_names, "culprit": None, "verified": False, "why": None}
    culprit = None
    if r.test(0, "the base must pass") != GOOD:
        why = f"the fixed base does not pass ({r.first[0]['verdict']}): nothing to bisect"
    elif r.test(n, "the whole series must fail") != BAD:
        why = f"the whole series does not fail ({r.first[n]['verdict']}): nothing to bisect"
    else:
        good, bad = search(n, r.test)
        if bad - good > 1:
            why = (f"the first failing step is one of {good + 1}..{bad}: every step between "
                   "was skipped")
        else:
            culprit = bad
            again_bad = [r.attempt(bad, "verify: the culprit fails again")["status"]
                         for _ in range(VERIFY_RUNS)]
            again_good = [r.attempt(good, "verify: the step before passes again")["status"]
                          for _ in range(VERIFY_RUNS)]
            doc["verified"] = all(s == BAD for s in again_bad) and all(s == GOOD for s in again_good)
            why = None if doc["verified"] else (
                f"unreliable: step {bad} again: {', '.join(again_bad)}; "
                f"step {good} again: {', '.join(again_good)}")
    doc["why"] = why
    if culprit:
        subject, author = patch_info(patches[culprit - 1])
        before = set(r.first[culprit - 1]["failed"])
        doc["culprit"] = {"index": culprit, "patch": _show(patches[culprit - 1]),
                          "subject": subject, "author": author,
                          "turned": [c for c in r.first[culprit]["failed"] if c not in before]}
    doc["steps"] = r.steps
    doc["seconds"] = round(time.monotonic() - start, 1)
    doc["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    code = 0 if culprit and doc["verified"] else 1
    doc["exit_code"] = code
    text = report(doc)
    atomic_write(os.path.join(out_dir, "bisect.json"), json.dumps(doc, indent=2) + "\n")
    atomic_write(os.path.join(out_dir, "report.txt"), text + "\n")
    return text, code, out_dir


def report(doc):
    """A short report an engineer can paste into a mail."""
    lines = [f"kgate bisect of {len(doc['patches'])} patches ({doc['series']}) "
             f"on {', '.join(doc['targets'])}"]
    c = doc["culprit"]
    if c and doc["verified"]:
        lines += ["", f"First failing patch ({c['index']}/{len(doc['patches'])}): {c['patch']}",
                  f"  Subject: {c['subject']}", f"  Author:  {c['author']}"]
        if c["turned"]:
            lines.append("  Cases that turned: " + ", ".join(c["turned"]))
        lines.append(f"Verified: the culprit failed {VERIFY_RUNS} more times, the patch "
                     f"before it passed {VERIFY_RUNS} more times.")
    else:
        if c:
            lines += ["", f"Candidate culprit ({c['index']}/{len(doc['patches'])}): {c['patch']}",
                      f"  Subject: {c['subject']}"]
        lines += ["", f"No culprit named: {doc['why']}"]
    rows = [[str(s["k"]), os.path.basename(s["patch"] or "") or "(fixed base)", s["why"],
             s["verdict"], s["status"],
             f"{s['seconds']:.0f}s"] for s in doc["steps"]]
    skipped = sorted({s["k"] for s in doc["steps"] if s["status"] == SKIP})
    lines += ["", format_table(["step", "last patch applied", "why", "verdict", "as", "time"],
                               rows, rule=True)]
    if skipped:
        lines.append("Skipped steps (not judged): " + ", ".join(
            f"{k} ({next(s['reason'] for s in doc['steps'] if s['k'] == k)})" for k in skipped))
    lines.append(f"{len(doc['steps'])} steps in {doc['seconds']:.0f}s")
    return "\n".join(lines)
