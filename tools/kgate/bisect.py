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
import contextlib
import datetime
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from . import kernel, results
from . import run as runner
from . import workspace
from .workspace import new_out_dir
from .common import (CANDIDATE, TOP, CandidateError, KgateError, atomic_write,
                     format_table, log, need_tools, read_text, target)

DEFAULT_TARGETS = ["x86_64"]


def out_root():
    """build/bisect: one folder per bisection, and the source clone."""
    return workspace.current().path("bisect")

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
    return kernel.Candidate(patches=folder).patch_files()


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
    path = os.path.join(workspace.current().latest, "results.json")
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


def judge(target_names, candidate, parallel, jobs):
    """Run one step: the fixed kernel (candidate None) or a candidate
    ({'patches': DIR} or {'source': TREE}) on the targets, without the
    benchmark and the control. Return (doc or None, run folder or None,
    verdict, reason); a candidate that does not build is 'no kernel'."""
    doc = run_dir = None
    try:
        if candidate is None:
            doc, run_dir = runner.run(target_names, ["fixed"], parallel=parallel, jobs=jobs,
                                      bench=False, latest=False)
        else:
            doc, run_dir = runner.run(target_names, [CANDIDATE], parallel=parallel, jobs=jobs,
                                      bench=False, latest=False,
                                      cand=kernel.Candidate(**candidate))
        return doc, run_dir, doc["verdict"], doc.get("summary", "")
    except CandidateError as e:
        # What failed, and the compiler's first word on it.
        lines = str(e).splitlines()
        first_error = next((ln.strip() for ln in lines if "error:" in ln), "")
        return None, None, "no kernel", "; ".join(x for x in (lines[0], first_error) if x)
    except KgateError as e:
        return None, None, results.INFRA, str(e).splitlines()[0]


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
        if k == 0:
            doc, run_dir, verdict, reason = judge(self.targets, None, self.parallel, self.jobs)
        else:
            doc, run_dir, verdict, reason = judge(
                self.targets, {"patches": stage(self.patches, k, self.out_dir)}, self.parallel,
                self.jobs)
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
    out_dir = new_out_dir(out_root())
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


# --- a git tree: 'git bisect run' halves, kgate judges each commit -------

STEPS_FILE = "steps.jsonl"
# What 'git bisect run' makes of a test's exit status; above 127 stops it.
EXIT_FOR = {GOOD: 0, BAD: 1, SKIP: 125}
EXIT_ABORT = 128
KGATE = os.path.join(TOP, "tools", "kgate.py")


def git(cwd, *args, check=True):
    """git's output, stripped; a failure is a KgateError with its message."""
    r = subprocess.run(["git", "-C", cwd] + list(args), capture_output=True, text=True,
                       check=False)
    if check and r.returncode:
        said = (r.stderr.strip() or r.stdout.strip()).splitlines()
        raise KgateError(f"git -C {cwd} {' '.join(args)}: {said[-1] if said else r.returncode}")
    return r.stdout.strip()


def load_steps(out_dir):
    """Every step of a source bisection so far (each process that judged
    one appended it to steps.jsonl)."""
    path = os.path.join(out_dir, STEPS_FILE)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class SourceSteps:
    """Judges commits of a git tree: checks each out in the bisection's
    own clone and runs it as the candidate kernel (as 'run --source')."""

    def __init__(self, tree, target_names, out_dir, parallel=2, jobs=None):
        self.tree = tree
        self.targets = target_names
        self.out_dir = out_dir
        self.parallel = parallel
        self.jobs = jobs

    def attempt(self, rev, why):
        commit = git(self.tree, "rev-parse", "--verify", f"{rev}^{{commit}}")
        subject = git(self.tree, "log", "-1", "--format=%s", commit)
        n = sum(s["commit"] == commit for s in load_steps(self.out_dir)) + 1
        label = f"{commit[:12]} ({subject})"
        log(f"[bisect] {label}: {why}")
        start = time.monotonic()
        git(self.tree, "checkout", "-q", "--detach", commit)
        doc, run_dir, verdict, reason = self.judge_checkout()
        step = {"commit": commit, "subject": subject, "attempt": n, "why": why,
                "verdict": verdict, "status": status_of(verdict), "reason": reason,
                "seconds": round(time.monotonic() - start, 1),
                "run": os.path.relpath(run_dir, TOP) if run_dir else None,
                "failed": _failed_cases(doc)}
        if doc is not None:
            dst = os.path.join(self.out_dir, "steps", f"{commit[:12]}-results-{n}.json")
            atomic_write(dst, json.dumps(doc, indent=2) + "\n")
            step["results"] = os.path.relpath(dst, TOP)
        with open(os.path.join(self.out_dir, STEPS_FILE), "a", encoding="utf-8") as f:
            f.write(json.dumps(step) + "\n")
        log(f"[bisect] {label}: {verdict} ({step['status']}) in {step['seconds']:.0f}s")
        return step

    def judge_checkout(self):
        """judge()'s answer for what is checked out."""
        return judge(self.targets, {"source": self.tree}, self.parallel, self.jobs)

    def test(self, rev, why):
        commit = git(self.tree, "rev-parse", "--verify", f"{rev}^{{commit}}")
        first = next((s for s in load_steps(self.out_dir) if s["commit"] == commit), None)
        return (first or self.attempt(commit, why))["status"]


def step_command(clone, out_dir, target_names, parallel, jobs):
    """What 'git bisect run' runs at each commit: 'kgate.py bisect-step'."""
    cmd = [sys.executable, KGATE, "bisect-step", "--tree", clone, "--out", out_dir,
           "-p", str(parallel)]
    return cmd + (["-j", str(jobs)] if jobs else []) + list(target_names)


def git_bisect_run(clone, cmd):
    """Run 'git bisect run cmd' in the clone; return (exit status, what
    it and the steps said, also shown as it comes). Interrupted, its
    whole process group (git, the step, its guests) is stopped before
    this returns."""
    p = subprocess.Popen(["git", "-C", clone, "bisect", "run"] + cmd, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    said = []
    try:
        for line in p.stdout:
            said.append(line)
            sys.stderr.write(line)
            sys.stderr.flush()
        p.wait()
    except BaseException:
        # The step's kgate turns SIGTERM into stopping its guests.
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        raise
    return p.returncode, "".join(said)


def resolve(tree, rev, flag):
    try:
        return git(tree, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except KgateError:
        raise KgateError(f"{flag} {rev}: not a commit of {tree}") from None


def bisect_source(tree, good, bad, target_names=None, parallel=2, jobs=None,
                  steps_class=SourceSteps, step_cmd=None):
    """Bisect the commits good..bad of a git tree; return (report text,
    exit code, out dir). The user's tree is only read: the commits are
    checked out in a shared clone under the bisection's folder, which
    is removed at the end. steps_class and step_cmd replace the judge of
    the ends and the verification, and the command git runs (tests)."""
    need_tools(["git"], "install git: 'make deps'")
    tree = os.path.abspath(tree)
    if git(tree, "rev-parse", "--show-toplevel", check=False) != os.path.realpath(tree):
        raise KgateError(f"--source {tree}: not the top of a git tree")
    good_c, bad_c = resolve(tree, good, "--good"), resolve(tree, bad, "--bad")
    if good_c == bad_c or subprocess.run(["git", "-C", tree, "merge-base", "--is-ancestor",
                                          good_c, bad_c]).returncode:
        raise KgateError(f"--good {good} must be an ancestor of --bad {bad}")
    target_names = list(target_names or DEFAULT_TARGETS)
    if steps_class is SourceSteps:
        runner.preflight(target_names)
    else:
        for name in target_names:
            target(name)
    stamp = datetime.datetime.now(datetime.timezone.utc)
    out_dir = new_out_dir(out_root())
    # One place for the clone, whichever the bisection: kbuild's paths
    # and so ccache's hits stay the same from one bisection to the next.
    clone = os.path.join(out_root(), "clone")
    # SIGTERM arrives as KeyboardInterrupt (cli.main): git_bisect_run
    # stops its process group.
    with _clone_lock():
        return _bisect_in(clone, tree, good, bad, good_c, bad_c, target_names, parallel,
                          jobs, steps_class, step_cmd, stamp, out_dir)


@contextlib.contextmanager
def _clone_lock():
    """One source bisection at a time (they share the clone)."""
    with open(os.path.join(out_root(), "clone.lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise KgateError("another 'bisect --source' is in progress") from None
        yield


def _bisect_in(clone, tree, good, bad, good_c, bad_c, target_names, parallel, jobs,
               steps_class, step_cmd, stamp, out_dir):
    """bisect_source() once its arguments are checked, in the clone."""
    shutil.rmtree(clone, ignore_errors=True)
    log(f"[bisect] checking out in {_show(clone)} (a shared clone: {tree} is only read)")
    git(out_root(), "clone", "-q", "--shared", "--no-checkout", tree, clone)
    s = steps_class(clone, target_names, out_dir, parallel, jobs)
    start = time.monotonic()
    count = int(git(tree, "rev-list", "--count", f"{good_c}..{bad_c}"))
    doc = {"schema": SCHEMA_VERSION, "started": stamp.isoformat(timespec="seconds"),
           "source": tree, "good": good_c, "bad": bad_c, "commits": count,
           "targets": target_names, "culprit": None, "verified": False, "why": None}
    culprit = parent = None
    try:
        if s.test(good_c, "the good end must pass") != GOOD:
            why = f"--good {good} does not pass: nothing to bisect"
        elif s.test(bad_c, "the bad end must fail") != BAD:
            why = f"--bad {bad} does not fail: nothing to bisect"
        else:
            git(clone, "bisect", "start", bad_c, good_c)
            cmd = ([a.format(clone=clone, out=out_dir) for a in step_cmd] if step_cmd else
                   step_command(clone, out_dir, target_names, parallel, jobs))
            log(f"[bisect] git bisect run: {count} commits in {good_c[:12]}..{bad_c[:12]}")
            code, said = git_bisect_run(clone, cmd)
            atomic_write(os.path.join(out_dir, "git-bisect-run.txt"), said)
            found = re.search(r"^([0-9a-f]{40,64}) is the first bad commit", said, re.M)
            if code or not found:
                last = [ln for ln in said.splitlines() if ln.strip()][-3:]
                why = ("git bisect named no single commit: " if "'skip'ped" in said else
                       f"git bisect run stopped (exit {code}): ") + " ".join(last)
            else:
                culprit = found.group(1)
                parent = git(clone, "rev-parse", f"{culprit}^")
                again_bad = [s.attempt(culprit, "verify: the culprit fails again")["status"]
                             for _ in range(VERIFY_RUNS)]
                again_good = [s.attempt(parent, "verify: its parent passes again")["status"]
                              for _ in range(VERIFY_RUNS)]
                doc["verified"] = (all(x == BAD for x in again_bad) and
                                   all(x == GOOD for x in again_good))
                why = None if doc["verified"] else (
                    f"unreliable: {culprit[:12]} again: {', '.join(again_bad)}; "
                    f"its parent again: {', '.join(again_good)}")
    finally:
        shutil.rmtree(clone, ignore_errors=True)
    doc["why"] = why
    all_steps = load_steps(out_dir)
    if culprit:
        first = {}
        for st in all_steps:
            first.setdefault(st["commit"], st)
        before = set(first.get(parent, {}).get("failed", []))
        doc["culprit"] = {"commit": culprit, "subject": first[culprit]["subject"]
                          if culprit in first else "",
                          "author": git(tree, "log", "-1", "--format=%an <%ae>", culprit),
                          "turned": [c for c in first.get(culprit, {}).get("failed", [])
                                     if c not in before]}
    doc["steps"] = all_steps
    doc["seconds"] = round(time.monotonic() - start, 1)
    doc["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    code = 0 if culprit and doc["verified"] else 1
    doc["exit_code"] = code
    text = report_source(doc)
    atomic_write(os.path.join(out_dir, "bisect.json"), json.dumps(doc, indent=2) + "\n")
    atomic_write(os.path.join(out_dir, "report.txt"), text + "\n")
    return text, code, out_dir


def step_main(clone, out_dir, target_names, parallel=2, jobs=None):
    """One commit, as 'git bisect run' asks: judge HEAD; return the exit
    status git reads (0 good, 1 bad, 125 skip)."""
    st = SourceSteps(clone, target_names, out_dir, parallel, jobs).attempt("HEAD", "git bisect run")
    return EXIT_FOR[st["status"]]


def report_source(doc):
    """The report of a git bisection, as report() for a series."""
    lines = [f"kgate bisect of {doc['commits']} commits ({doc['source']} "
             f"{doc['good'][:12]}..{doc['bad'][:12]}) on {', '.join(doc['targets'])}"]
    c = doc["culprit"]
    if c and doc["verified"]:
        lines += ["", f"First failing commit: {c['commit']}", f"  Subject: {c['subject']}",
                  f"  Author:  {c['author']}"]
        if c["turned"]:
            lines.append("  Cases that turned: " + ", ".join(c["turned"]))
        lines.append(f"Verified: the culprit failed {VERIFY_RUNS} more times, its parent "
                     f"passed {VERIFY_RUNS} more times.")
    else:
        if c:
            lines += ["", f"Candidate culprit: {c['commit']}", f"  Subject: {c['subject']}"]
        lines += ["", f"No culprit named: {doc['why']}"]
    rows = [[s["commit"][:12], s["subject"][:50], s["why"], s["verdict"], s["status"],
             f"{s['seconds']:.0f}s"] for s in doc["steps"]]
    lines += ["", format_table(["commit", "subject", "why", "verdict", "as", "time"], rows,
                               rule=True)]
    skipped = {s["commit"]: s["reason"] for s in doc["steps"] if s["status"] == SKIP}
    if skipped:
        lines.append("Skipped commits (not judged): " + ", ".join(
            f"{k[:12]} ({why})" for k, why in skipped.items()))
    lines.append(f"{len(doc['steps'])} steps in {doc['seconds']:.0f}s")
    return "\n".join(lines)
