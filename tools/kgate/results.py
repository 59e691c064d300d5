"""Verdicts, results.json and the matrix printed on the terminal."""
import json
import os
import re
import statistics

from . import suite
from .common import (ALL_VARIANTS, DEBUG_VARIANTS, KNOWN_BAD, KgateError, atomic_write,
                     format_table)
from .lavalog import KERNEL_LOG_CASE

# What the guest reports for each job and how it is judged come from the
# gate's suites (suites/gate.yaml, suite.current()): each test program's
# cases (--list: the harness's fixture.variant.test names), each
# program's own '<program>-run' case, each unit program's cases, the
# benchmarks' cases (in test definitions of their own, with figures),
# and the cases the known-bad control must fail. Every job also has the
# kernel-log case (lavalog.py): a splat in the kernel's log fails the
# kernel under test like a guest case.


def gate():
    """The suites the jobs run (read when a verdict is made)."""
    return suite.current()


def judged_cases():
    """The cases that judge the kernel under test."""
    return gate().cases + (KERNEL_LOG_CASE,)


def short_case(case):
    """A case's name in tables: the first suite's without its fixture,
    the others' whole."""
    first = gate().fixtures[0]
    return case[len(first) + 1:] if case.startswith(first + ".") else case


SCHEMA_VERSION = 1

# Job verdicts
PASS = "pass"                  # fixed kernel: every case passed
REGRESSION = "regression"      # fixed kernel: a case failed
INCONCLUSIVE = "inconclusive"  # a case could not prove it ran the path
INFRA = "infrastructure"       # build, boot, lab or artifacts failed; results missing
ERROR = "error"                # kernel under test: a test program crashed, bailed
                               # out or hung there (KCIDB's name for it)
CAUGHT = "caught"              # known-bad kernel: the regression was caught
MISSED = "missed"              # known-bad kernel passed: the gate is blind
FLAKY = "flaky"                # a job run several times (--repeat) passed in
                               # some runs and failed in others

EXIT_CODES = {PASS: 0, REGRESSION: 1, MISSED: 1, INFRA: 3, INCONCLUSIVE: 4, ERROR: 5, FLAKY: 6}
# The command line's other exits: a usage error (argparse's own code)
# and an interrupted run.
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
# A bug of kgate itself (an exception it did not expect): never a
# verdict; the traceback is saved and named.
EXIT_INTERNAL = 7
# A run's verdict is its jobs' worst, in this order.
SEVERITY = [PASS, INCONCLUSIVE, INFRA, FLAKY, ERROR, REGRESSION, MISSED]
# Between the runs of one job, a verdict of each kind is a contradiction
# (an inconclusive run is neither: it saw no evidence either way).
_GOOD = (PASS, CAUGHT)
_BAD = (REGRESSION, ERROR, MISSED)


def is_bench(case):
    """Whether a case comes from a benchmark's test definition
    (LAVA prefixes definitions with their index: '1_kgate-bench')."""
    d = case.get("definition", "")
    return any(d == b or d.endswith("_" + b) for b in gate().bench_definitions)


def figures(cases):
    """The benchmark's figures: {name: (value, units)}."""
    out = {}
    for c in cases:
        if is_bench(c) and c.get("measurement") is not None:
            try:
                out[c["case"]] = (float(c["measurement"]), c.get("units") or "")
            except (TypeError, ValueError):
                continue
    return out


def bench_verdict(cases, expected, judged=True):
    """Return (verdict or None, reason) for the benchmark's part of a job.

    Only what can be wrong with the kernel or the guest counts: a
    broken stream or merges with coalescing off is a regression; a
    benchmark that crashed or bailed out is the error of the kernel
    under test (infrastructure on the known-bad control); results that
    never came are infrastructure. Inconclusive benchmark cases (the
    backlog never used, as on one CPU) are reported but do not decide
    the gate.
    """
    g = gate()
    by_name = by_result(c for c in cases if is_bench(c))
    if not by_name:
        return (INFRA, "benchmark results missing") if expected else (None, "")
    failed = [c for c in g.bench_cases if by_name.get(c) == "fail"]
    if failed:
        return REGRESSION, f"benchmark failed: {', '.join(failed)}"
    crashed = [p.name for p in g.role("bench") if by_name.get(p.run_case) == "fail"]
    if crashed:
        return (ERROR if judged else INFRA,
                f"{', '.join(crashed)} crashed, bailed out or reported fewer cases than planned")
    missing = [c for c in g.bench_cases + g.bench_run_cases if c not in by_name]
    if missing:
        return INFRA, f"benchmark results missing: {', '.join(missing)}"
    skipped = [c for c in g.bench_cases if by_name[c] == "skip"]
    return None, f"benchmark inconclusive: {', '.join(skipped)}" if skipped else ""


def under_test(variant):
    """Whether a variant's kernel is the one being judged (fixed,
    candidate); the known-bad kernel is the control."""
    return variant != KNOWN_BAD


# How LAVA says a test action ran out of time (lava_common/timeout.py:
# "<action> timed out after N seconds"; the test shell or its retry).
SHELL_TIMEOUT = re.compile(r"lava-test-(?:shell|retry) timed out")


def _stopped_program(all_cases, errors):
    """The reason a job broke off because a guest test program never
    finished, or None when it broke off for another reason: LAVA's test
    shell ran out of time while that program was running (it had
    started: what ran before it reported its end)."""
    g = gate()
    by_name = by_result(all_cases)
    benched = any(is_bench(c) for c in all_cases)
    # a program that reported its own failure before the job broke off
    for p in g.role("test"):
        if by_name.get(p.run_case) == "fail":
            return f"{p.name} crashed, bailed out or reported fewer cases than planned"
    if benched:
        for p in g.role("bench"):
            if by_name.get(p.run_case) == "fail":
                return f"{p.name} crashed, bailed out or reported fewer cases than planned"
    timeout = next((e for e in errors if SHELL_TIMEOUT.search(e)), None)
    if not timeout:
        return None
    # The program that was running: the first, in the job's order, that
    # never reported its end (a unit program's hang is not the kernel's).
    for p in g.programs:
        if p.run_case in by_name:
            continue
        if p.role == "test":
            s = next(s for s in g.suites if p in s.programs)
            seen = sum(c in by_name for c in s.cases)
            return (f"{p.name} stopped after {seen} of {len(s.cases)} results on this "
                    f"kernel ({timeout})")
        if p.role == "bench" and benched:
            return f"{p.name} never finished on this kernel ({timeout})"
        return None
    return None


# The results a case may have, best first. A case reported more than
# once is judged by its worst report; any other status (LAVA's
# 'unknown', a 'FAIL' in capitals, a missing one) is worse than all of
# them: it decides the job as an error (see job_verdict).
RESULTS = ("pass", "skip", "fail")
UNKNOWN = "unknown"


def _rank(result):
    return RESULTS.index(result) if result in RESULTS else len(RESULTS)


def _normal(case):
    """A case as the verdict reads it: a dict with a 'case' and a
    'result' (UNKNOWN when it has none, or is not a dict at all)."""
    if not isinstance(case, dict):
        return {"case": "?", "result": UNKNOWN}
    name, result = case.get("case"), case.get("result")
    if isinstance(name, str) and isinstance(result, str) and "definition" in case:
        return case
    return dict(case, case=str(name) if name is not None else "?",
                result=result if isinstance(result, str) else UNKNOWN,
                definition=str(case.get("definition", "")))


def by_result(cases):
    """{case: result} with each case's worst report (pass < skip < fail
    < anything else)."""
    out = {}
    for c in cases:
        c = _normal(c)
        if c["case"] not in out or _rank(c["result"]) > _rank(out[c["case"]]):
            out[c["case"]] = c["result"]
    return out


def _worse(a, b):
    """The worse of two verdicts (a on a tie); an unknown verdict is
    the worst of all."""
    def sev(v):
        return _severity(v) if v in SEVERITY or v == CAUGHT else len(SEVERITY)
    return b if sev(b) > sev(a) else a


def job_verdict(variant, health, all_cases, bench=False, errors=()):
    """Return (verdict, reason) for one job from its health and cases.

    bench: the job was meant to run the benchmark too. errors: LAVA's
    error lines (lavalog.parse, lab.parse_results). A case whose result
    is none of pass, skip and fail makes the job an error at least (on
    the known-bad control, infrastructure: it is not judged): what the
    guest said cannot be read, so it cannot pass.
    """
    all_cases = [_normal(c) for c in all_cases]
    verdict, reason = _job_verdict(variant, health, all_cases, bench, errors)
    by_name = by_result(all_cases)
    if under_test(variant) and verdict != REGRESSION:
        # Any case that failed on the kernel under test decides, in
        # whichever test definition it was reported (the programs' own
        # run cases say they crashed: an error, judged above).
        own = {p.run_case for p in gate().programs}
        failed = [c for c, r in by_name.items() if r == "fail" and c not in own]
        if failed:
            return REGRESSION, f"failed: {', '.join(failed)}" + \
                ("" if verdict == PASS else f"; {reason}")
    odd = {c: r for c, r in by_name.items() if r not in RESULTS}
    if odd:
        why = "unknown results: " + ", ".join(f"{c}={r!r}" for c, r in odd.items())
        worse = _worse(verdict, ERROR if under_test(variant) else INFRA)
        if worse != verdict:
            return worse, why if verdict in (PASS, CAUGHT) else f"{why}; {reason}"
    return verdict, reason


def _job_verdict(variant, health, all_cases, bench, errors):
    verdict, reason = _gate_verdict(variant, health, [c for c in all_cases if not is_bench(c)])
    if verdict == INFRA and health != "complete" and under_test(variant):
        stopped = _stopped_program(all_cases, errors)
        if stopped:
            return ERROR, stopped
    if verdict == MISSED or health != "complete":
        return verdict, reason
    bv, breason = bench_verdict(all_cases, bench, under_test(variant))
    # A failed benchmark case is a failed case of the kernel under test:
    # it decides whatever else went wrong.
    if bv == REGRESSION and under_test(variant) and verdict != REGRESSION:
        return bv, breason if verdict == PASS else f"{breason}; {reason}"
    if verdict in (INFRA, ERROR):
        return verdict, reason
    # A failed case still decides; the control stays judged by its own
    # cases unless its benchmark broke.
    if (bv in (INFRA, ERROR) and verdict != REGRESSION) or \
            (bv == REGRESSION and verdict in (PASS, INCONCLUSIVE)):
        return bv, breason if verdict == PASS else f"{breason}; {reason}"
    return verdict, reason


def _gate_verdict(variant, health, cases):
    g = gate()
    by_name = by_result(cases)
    missing = [c for c in g.cases + g.run_cases + g.unit_run_cases + (KERNEL_LOG_CASE,)
               if c not in by_name]
    judged = under_test(variant)
    # A splat in the kernel under test's log fails it like a case; the
    # known-bad control is caught by its cases alone.
    failed = [c for c in (judged_cases() if judged else g.cases) if by_name.get(c) == "fail"]
    crashed = [p.name for p in g.role("test") if by_name.get(p.run_case) == "fail"]
    units_crashed = [p.name for p in g.role("unit") if by_name.get(p.run_case) == "fail"]
    trouble = ("job incomplete" if health != "complete" else
               f"{', '.join(crashed)} crashed, bailed out or reported fewer cases than planned"
               if crashed else "")
    # A case that failed on the kernel under test decides, whatever
    # happened after it (or before: more failures never make a better
    # verdict).
    if judged and failed:
        also = trouble or (f"{', '.join(units_crashed)} crashed or reported fewer cases than planned"
                           if units_crashed else "")
        return REGRESSION, f"failed: {', '.join(failed)}" + (f"; then {also}" if also else "")
    if health != "complete":
        # job_verdict() tells a program that hung on this kernel (an
        # error) from a lab or a log that broke off.
        return INFRA, "job incomplete"
    if crashed:
        return (ERROR if judged else INFRA), trouble
    if units_crashed:
        # Our packet code's unit tests barely touch the kernel.
        return INFRA, f"{', '.join(units_crashed)} crashed or reported fewer cases than planned"
    if missing:
        return INFRA, f"results missing: {', '.join(missing)}"
    guest = set(g.cases) | set(g.run_cases) | set(g.unit_run_cases) | {KERNEL_LOG_CASE}
    unit_failed = [c for c, r in by_name.items() if r == "fail" and c not in guest]
    if unit_failed:
        # The packet code itself is wrong on this target: nothing the
        # backlog test says there can be trusted.
        verdict = REGRESSION if judged else INFRA
        return verdict, f"packet unit tests failed: {', '.join(unit_failed)}"
    skipped = [c for c in g.cases if by_name[c] == "skip"]
    if variant == KNOWN_BAD:
        must = [c for c in g.control_must_fail if by_name[c] != "fail"]
        if not must:
            return CAUGHT, f"failed as expected: {', '.join(failed)}"
        if any(by_name[c] == "skip" for c in must):
            return INCONCLUSIVE, f"inconclusive: {', '.join(c for c in must if by_name[c] == 'skip')}"
        return MISSED, f"known-bad kernel passed {', '.join(must)}: the gate did not see the bug"
    if failed:
        return REGRESSION, f"failed: {', '.join(failed)}"
    if skipped:
        return INCONCLUSIVE, f"inconclusive: {', '.join(skipped)}"
    return PASS, "all cases passed"


def _severity(verdict):
    return SEVERITY.index(PASS if verdict == CAUGHT else verdict)


def _merge_cases(finals):
    """The cases of a job's runs as one list: a case failed if it failed
    in any run, else inconclusive if it was in any; a figure is the
    median of its runs. Return (cases, {case: [result per run]} for the
    cases that passed in one run and failed in another)."""
    order, seen = [], {}
    for i, job in enumerate(finals):
        for c in job["cases"]:
            if c["case"] not in seen:
                order.append(c["case"])
                seen[c["case"]] = [None] * len(finals)
            seen[c["case"]][i] = c
    merged, flaky = [], {}
    for name in order:
        runs = [c for c in seen[name] if c is not None]
        got = [c["result"] for c in runs]
        case = dict(runs[0])
        case["result"] = max(got, key=_rank)
        values = [c["measurement"] for c in runs if c.get("measurement") is not None]
        if values:
            case["measurement"] = statistics.median(values)
        if "pass" in got and "fail" in got:
            flaky[name] = [c["result"] if c else "-" for c in seen[name]]
        merged.append(case)
    return merged, flaky


# What 'attempts' keeps of each attempt at a job: the lab's where and
# when only from a lab run.
ATTEMPT_KEYS = ("verdict", "reason", "seconds", "log",
                "lava_job", "lava_device", "lava_worker", "lava_start", "lava_end")


def combine_runs(tries):
    """One job from every attempt at it. tries holds, per run of the job
    (--repeat), its attempts in order (infrastructure retries after the
    first); the last attempt of each run is that run's result.

    Runs that disagree (one passed or was caught, another failed, was an
    error or missed the bug) make the job flaky; otherwise the worst run
    decides (so a run left infrastructure after its retries makes the
    job infrastructure: the N runs asked for were not all seen). The
    cases merged are those of the judged runs only, unless no run got
    that far. Every attempt is listed in 'attempts' when there was more
    than one."""
    finals = [t[-1] for t in tries]
    worst = max(finals, key=lambda j: _severity(j["verdict"]))
    job = dict(worst)
    flat = [(r, a) for r, t in enumerate(tries) for a in t]
    if len(flat) > 1:
        job["attempts"] = [dict({k: a[k] for k in ATTEMPT_KEYS if k in a}, run=r + 1)
                           for r, a in flat]
    if len(tries) == 1:
        return job
    judged = [j for j in finals if j["verdict"] != INFRA] or finals
    job["runs"] = len(tries)
    job["cases"], flaky = _merge_cases(judged)
    verdicts = [j["verdict"] for j in finals]
    if any(v in _GOOD for v in verdicts) and any(v in _BAD for v in verdicts):
        job["verdict"] = FLAKY
        tally = ", ".join(f"{v} in {verdicts.count(v)} of {len(verdicts)}"
                          for v in dict.fromkeys(verdicts))
        job["reason"] = f"the runs disagree: {tally} (worst: {worst['reason']})"
    if flaky:
        job["flaky_cases"] = flaky
    return job


def run_verdict(jobs):
    """Return (verdict, exit code, summary) for a whole run."""
    if not jobs:
        return INFRA, EXIT_CODES[INFRA], "no jobs ran"
    worst = PASS
    for j in jobs:
        # a verdict kgate does not know cannot pass
        v = j.get("verdict")
        v = PASS if v == CAUGHT else v if v in SEVERITY else INFRA
        if _severity(v) > _severity(worst):
            worst = v
    parts = []
    for name in ("fixed", "candidate") + DEBUG_VARIANTS:
        under = [j for j in jobs if j["variant"] == name]
        if under:
            parts.append(f"{name} kernel passed on {sum(j['verdict'] == PASS for j in under)}/"
                         f"{len(under)} targets")
    bad = [j for j in jobs if j["variant"] == KNOWN_BAD]
    if bad:
        parts.append(f"known-bad control caught on {sum(j['verdict'] == CAUGHT for j in bad)}/{len(bad)} targets")
    return worst, EXIT_CODES[worst], "; ".join(parts)


VERDICTS = SEVERITY + [CAUGHT]


def _check_job(j, where):
    """A job of a results.json, checked for the fields the verdict reads."""
    if not isinstance(j, dict):
        raise KgateError(f"{where}: a job is not an object: {j!r:.60}")
    for key, kind in (("target", str), ("variant", str), ("cases", list)):
        if not isinstance(j.get(key), kind):
            raise KgateError(f"{where}: job {j.get('target')}/{j.get('variant')}: "
                             f"'{key}' missing or not a {kind.__name__}")
    if j["variant"] not in ALL_VARIANTS:
        raise KgateError(f"{where}: job {j['target']!r}/{j['variant']!r}: unknown variant "
                         f"(known: {', '.join(ALL_VARIANTS)})")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", j["target"]):
        raise KgateError(f"{where}: not a target name: {j['target']!r:.60}")
    what = f"{where}: job {j['target']}/{j['variant']}"
    for c in j["cases"]:
        if not isinstance(c, dict) or not isinstance(c.get("case"), str):
            raise KgateError(f"{what}: a case is not an object with a name: {c!r:.60}")
        if not isinstance(c.get("definition", ""), str):
            raise KgateError(f"{what}: case {c['case']!r:.60}: 'definition' not a string")
        m = c.get("measurement")
        if m is not None and (isinstance(m, bool) or not isinstance(m, (int, float))):
            raise KgateError(f"{what}: case {c['case']!r:.60}: 'measurement' not a number")
        if not isinstance(c.get("units") or "", str):
            raise KgateError(f"{what}: case {c['case']!r:.60}: 'units' not a string")
        if "splat" in c and not _lines(c["splat"]):
            raise KgateError(f"{what}: case {c['case']!r:.60}: 'splat' not a list of lines")
    for key, kind in (("attempts", list), ("flaky_cases", dict), ("tail", list),
                      ("errors", list), ("reason", str), ("log", str)):
        if key in j and not isinstance(j[key], kind):
            raise KgateError(f"{what}: '{key}' not a {kind.__name__}")
    if "tail" in j and not _lines(j["tail"]):
        raise KgateError(f"{what}: 'tail' not a list of lines")
    for a in j.get("attempts", []):
        if not isinstance(a, dict) or not isinstance(a.get("verdict"), str) or \
                not isinstance(a.get("log", ""), str) or \
                not isinstance(a.get("run", 1), int):
            raise KgateError(f"{what}: an attempt is not a record of one: {a!r:.60}")
    for case, got in j.get("flaky_cases", {}).items():
        if not _lines(got):
            raise KgateError(f"{what}: flaky case {case!r:.60}: not a list of results")


def _lines(value):
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def judge_job(job):
    """A stored job with its verdict decided again from its evidence: its
    health, cases and errors. The stored verdict can only make it worse
    (it knew whether the benchmark was due, and a --repeat job's runs),
    never better; an unknown stored verdict is infrastructure. A
    --repeat job stored as flaky stays flaky when its merged cases
    fail."""
    stored = job.get("verdict")
    health = job.get("health") if job.get("health") in ("complete", "incomplete") else "incomplete"
    errors = [str(e) for e in job.get("errors") or [] if e is not None] \
        if isinstance(job.get("errors"), list) else []
    verdict, reason = job_verdict(job["variant"], health, job["cases"], errors=errors)
    # Only an infrastructure attempt may be followed by another of the
    # same run: one that was judged and then "retried" still counts.
    runs = {}
    for a in job.get("attempts") or []:
        runs.setdefault(a.get("run", 1), []).append(a)
    for tried in runs.values():
        for a in tried[:-1]:
            v = a["verdict"] if a["verdict"] in VERDICTS else ERROR
            if v != INFRA and _worse(verdict, v) == v and v != verdict:
                verdict, reason = v, f"an attempt followed by a retry was {a['verdict']}: " \
                    f"{a.get('reason', '')}"
    if stored not in VERDICTS:
        verdict, reason = _worse(verdict, INFRA), f"stored verdict {stored!r} unknown; {reason}"
    elif stored == FLAKY and verdict in _BAD and isinstance(job.get("runs"), int) \
            and job["runs"] > 1:
        verdict, reason = FLAKY, job.get("reason", reason)
    elif _worse(verdict, stored) == stored:
        verdict, reason = stored, job.get("reason", reason)
    if verdict == stored and reason == job.get("reason"):
        return job
    return dict(job, verdict=verdict, reason=reason)


def judge(doc, where="results"):
    """A run's document with every job judged again (judge_job) and the
    run's verdict, exit code and summary recomputed from them: what
    matrix, compare, collect and export say, whatever the file says. A
    run with no job is not a pass; a target/variant listed twice is
    infrastructure at least."""
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise KgateError(f"{where}: not a kgate results document (no list of jobs)")
    for j in doc["jobs"]:
        _check_job(j, where)
    jobs = [judge_job(j) for j in doc["jobs"]]
    seen, twice = set(), []
    for j in jobs:
        key = (j["target"], j["variant"])
        if key in seen:
            twice.append("/".join(key))
        seen.add(key)
    planned = doc.get("planned")
    if planned is not None and (not isinstance(planned, list) or not all(
            isinstance(p, dict) and isinstance(p.get("target"), str) and
            isinstance(p.get("variant"), str) for p in planned)):
        raise KgateError(f"{where}: 'planned' is not a list of target/variant records")
    missing = [f"{p['target']}/{p['variant']}" for p in planned or []
               if (p["target"], p["variant"]) not in seen]
    verdict, code, summary = run_verdict(jobs)
    for what, names in (("listed twice", twice), ("planned but missing", missing)):
        if names:
            verdict = _worse(verdict, INFRA)
            code = EXIT_CODES[verdict]
            summary = f"{summary}; {what}: {', '.join(names)}"
    return dict(doc, jobs=jobs, verdict=verdict, exit_code=code, summary=summary)


def flat_results(jobs):
    rows = []
    for j in jobs:
        for c in j["cases"]:
            rows.append({
                "arch": j["target"], "variant": j["variant"], "case": c["case"],
                "result": c["result"], "measurement": c.get("measurement"),
                "units": c.get("units"), "kernel_sha256": j["kernel_sha256"],
                "rootfs_sha256": j["rootfs_sha256"],
            })
    return rows


def planned_jobs(pairs):
    """What a run meant to run, for results.json 'planned': a job of it
    that never came is infrastructure (judge)."""
    return [{"target": t, "variant": v} for t, v in pairs]


def write_json(path, run_id, started, finished, jobs, candidate=None, seconds=None, trees=None,
               planned=None):
    """candidate: what the candidate kernel was ({'patches': DIR} or
    {'source': DIR}), when the run had one; seconds: the run's wall
    time, builds included; trees: what each variant's kernel was built
    from (run.record_trees)."""
    doc = judge({"jobs": jobs, "planned": planned} if planned is not None else {"jobs": jobs})
    jobs, verdict, code, summary = doc["jobs"], doc["verdict"], doc["exit_code"], doc["summary"]
    doc = {
        "schema": SCHEMA_VERSION,
        "run": run_id,
        "started": started,
        "finished": finished,
        "seconds": seconds,
        "verdict": verdict,
        "exit_code": code,
        "summary": summary,
        "jobs": jobs,
        "results": flat_results(jobs),
    }
    if planned is not None:
        doc["planned"] = planned
    if candidate:
        doc["candidate"] = candidate
    if trees:
        doc["trees"] = trees
    atomic_write(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")
    return doc


def _counts(by_name):
    vals = [by_name[c] for c in gate().cases if c in by_name]
    return len(vals), vals.count("pass"), vals.count("fail"), vals.count("skip")


# A splat's first lines under the matrix; results.json has it whole.
SPLAT_SHOWN = 20


def matrix(jobs):
    """Return the matrix as text: one row per job with its counts and the
    cases the known-bad control must fail, then the cases that failed
    where no failure was expected."""
    key_cols = gate().control_must_fail
    short = [short_case(c).replace("data_", "").replace("ipv", "v").replace(".", "_")
             for c in key_cols]
    heads = ["target", "variant", "cases", "pass", "fail", "skip"] + short + ["verdict"]
    rows, notes = [], []
    for j in jobs:
        by_name = by_result(j["cases"])
        n, p, f, s = _counts(by_name)
        cells = []
        for c in key_cols:
            r = by_name.get(c, "-")
            cells.append(r.upper() if r == "fail" else r)
        verdict = j["verdict"]
        if verdict == CAUGHT:
            verdict = "caught (expected failures)"
        elif verdict != PASS:
            verdict = verdict.upper()
        rows.append([j["target"], j["variant"], str(n), str(p), str(f), str(s)] + cells + [verdict])
        failed = [c for c, r in by_name.items() if r == "fail"]
        skipped = [c for c in gate().cases if by_name.get(c) == "skip"]
        if j["variant"] == KNOWN_BAD:
            extra = [c for c in failed if c not in key_cols]
            if extra:
                notes.append(f"{j['target']}/known-bad also failed: {', '.join(extra)}")
        elif failed:
            notes.append(f"{j['target']}/{j['variant']} FAILED: {', '.join(failed)}")
        if skipped:
            notes.append(f"{j['target']}/{j['variant']} inconclusive: {', '.join(skipped)}")
        bv, breason = bench_verdict(j["cases"], False)
        if bv is None and breason:
            notes.append(f"{j['target']}/{j['variant']} {breason}")
        if j["verdict"] in (INFRA, ERROR):
            notes.append(f"{j['target']}/{j['variant']}: {j.get('reason', '')}")
        if len(j.get("attempts", [])) > 1:
            notes.append(f"{j['target']}/{j['variant']} ran {len(j['attempts'])} times: " +
                         ", ".join(f"{a['verdict']} ({a['log']})" for a in j["attempts"]))
        for case, got in j.get("flaky_cases", {}).items():
            notes.append(f"{j['target']}/{j['variant']} FLAKY {case}: {' '.join(got)}")
        splat = next((c.get("splat") for c in j["cases"]
                      if c["case"] == KERNEL_LOG_CASE and c["result"] == "fail"), None)
        if splat:
            notes.append(f"  {j['target']}/{j['variant']} kernel log, first splat "
                         f"({j.get('log', 'lava.log')}):")
            notes.extend(f"    {line}" for line in splat[:SPLAT_SHOWN])
            if len(splat) > SPLAT_SHOWN:
                notes.append(f"    ... {len(splat) - SPLAT_SHOWN} more lines in results.json")
        if j["verdict"] in (ERROR, FLAKY) and j.get("tail"):
            notes.append(f"  its last lines ({j.get('log', 'lava.log')}):")
            notes.extend(f"    {line}" for line in j["tail"])
    return "\n".join([format_table(heads, rows, rule=True)] + notes)


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def latest_dir(runs_dir):
    link = os.path.join(runs_dir, "latest")
    return os.path.realpath(link) if os.path.exists(link) else None


def verdict_differences(doc_a, doc_b):
    """Jobs of doc_b whose verdict differs from the same target and
    variant in doc_a (or that doc_a lacks), as text lines."""
    a = {(j["target"], j["variant"]): j["verdict"] for j in doc_a["jobs"]}
    out = []
    for j in doc_b["jobs"]:
        key = (j["target"], j["variant"])
        if a.get(key) != j["verdict"]:
            out.append(f"{key[0]}/{key[1]}: {a.get(key, 'absent')} -> {j['verdict']}")
    return out
