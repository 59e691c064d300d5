"""Properties of the verdict and of the command line, for any input
Hypothesis makes up (Debian's python3-hypothesis): the verdict is
decided from evidence only and never gets better with more failures,
and no argument list ends in a traceback.

- a failed case never makes the verdict of a kernel under test better;
- a case whose status is not pass, skip or fail never gives pass;
- a job without cases is never pass;
- a run's exit code is the one recomputed from its cases, whatever
  verdicts and exit code its file stores (they can only make it worse);
- argument lists end in a documented exit code, never in an internal
  error (the heavy work below the argument checks is stubbed out).
"""
import json
import os
import string

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# make check draws the same examples every time (a gate's own tests do
# not flake); KGATE_HYPOTHESIS=explore draws new ones, for longer hunts;
# quick (make test) the same as make check, a tenth as many.
PROFILE = os.environ.get("KGATE_HYPOTHESIS", "kgate")
settings.register_profile("kgate", derandomize=True, database=None)
settings.register_profile("quick", derandomize=True, database=None)
settings.register_profile("explore", database=None)
settings.load_profile(PROFILE)


def examples(n):
    """How many examples a property draws in this profile."""
    return max(10, n // 10) if PROFILE == "quick" else n


from test_tooling import cases  # noqa: E402
from kgate import (bench, bisect, cli, common, golden, kernel, lab, lavalog,  # noqa: E402
                   mutants, results, rootfs, selftest, soak, workspace)
from kgate import run as runner  # noqa: E402

UNDER_TEST = [v for v in common.ALL_VARIANTS if results.under_test(v)]
GATE = results.gate()
NAMES = (list(GATE.cases + GATE.run_cases + GATE.unit_run_cases)
         + ["csum_rfc1071", lavalog.KERNEL_LOG_CASE])
STATUSES = ["pass", "skip", "fail", "unknown", "FAIL", "", None]
BENCH = [{"definition": results.gate().bench_definitions[0], "case": c, "result": "pass"}
         for c in list(results.gate().bench_cases) + [results.gate().bench_run_cases[0]]]
TIMEOUT = ["lava-test-shell timed out after 180 seconds"]


def _case(name, status):
    if name in list(results.gate().bench_cases) + [results.gate().bench_run_cases[0]]:
        return {"definition": results.gate().bench_definitions[0], "case": name, "result": status}
    return {"case": name, "result": status}


# The cases whose results change a verdict the most, drawn as often as
# all the others together.
SPECIAL = (list(GATE.run_cases + GATE.unit_run_cases) + ["csum_rfc1071", lavalog.KERNEL_LOG_CASE]
           + list(GATE.bench_run_cases + GATE.bench_cases + GATE.control_must_fail))
any_case = st.one_of(st.sampled_from(SPECIAL), st.sampled_from(NAMES))
reports = st.lists(st.tuples(any_case, st.sampled_from(["fail", "pass", "skip"] + STATUSES)),
                   max_size=6)


@st.composite
def jobs(draw, variants=common.ALL_VARIANTS):
    """A job's inputs: variant, health, cases (a whole set, some of them
    changed, dropped or reported again), bench, errors."""
    base = cases() + (BENCH if draw(st.booleans()) else [])
    drop = draw(st.sets(st.one_of(st.sampled_from([i for i, c in enumerate(base)
                                                   if c["case"] in SPECIAL]),
                                  st.integers(0, len(base) - 1)), max_size=3))
    cs = [c for i, c in enumerate(base) if i not in drop]
    for name, status in draw(reports):
        cs.append(_case(name, status))
    if draw(st.booleans()):
        cs = draw(st.permutations(cs))
    return (draw(st.sampled_from(variants)), draw(st.sampled_from(["complete", "incomplete"])),
            cs, draw(st.booleans()), draw(st.sampled_from([[], TIMEOUT])))


def _sev(verdict):
    return results.SEVERITY.index(results.PASS if verdict == results.CAUGHT else verdict)


@settings(max_examples=examples(1500), deadline=None)
@given(jobs(UNDER_TEST), any_case)
def test_a_failed_case_never_makes_a_kernel_under_test_better(job, name):
    variant, health, cs, bench_, errors = job
    before = results.job_verdict(variant, health, cs, bench_, errors)[0]
    after = results.job_verdict(variant, health, cs + [_case(name, "fail")], bench_, errors)[0]
    assert _sev(after) >= _sev(before), (before, after)


@settings(max_examples=examples(400), deadline=None)
@given(jobs(), any_case, st.sampled_from(
    ["unknown", "FAIL", "PASS", "", None, 0, "pass "]))
def test_an_unknown_status_never_passes(job, name, status):
    variant, health, cs, bench_, errors = job
    verdict = results.job_verdict(variant, health, cs + [_case(name, status)], bench_, errors)[0]
    assert verdict not in (results.PASS, results.CAUGHT)


@settings(max_examples=examples(100), deadline=None)
@given(st.sampled_from(common.ALL_VARIANTS), st.sampled_from(["complete", "incomplete"]),
       st.booleans(), st.sampled_from([[], TIMEOUT]))
def test_a_job_without_cases_never_passes(variant, health, bench_, errors):
    assert results.job_verdict(variant, health, [], bench_, errors)[0] not in \
        (results.PASS, results.CAUGHT)
    doc = results.judge({"jobs": [{"target": "x86_64", "variant": variant, "cases": [],
                                   "health": health, "verdict": results.PASS}]})
    assert doc["exit_code"] != 0


@settings(max_examples=examples(300), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["x86_64", "mips", "arm64"]), jobs(),
                          st.sampled_from(results.VERDICTS + ["splendid", None]),
                          st.booleans()), max_size=4),
       st.sampled_from([0, 1, 3, 99, None]))
def test_the_exit_code_is_the_one_recomputed_from_the_cases(stored_jobs, stored_code):
    """Whatever a results file stores as verdicts and exit code, what is
    printed is never better than the verdict of its cases; stored
    verdicts equal to the recomputed ones change nothing."""
    docs = []
    honest = []
    for tgt, (variant, health, cs, _bench, errors), stored, keep in stored_jobs:
        fresh = results.job_verdict(variant, health, cs, errors=errors)[0]
        job = {"target": tgt, "variant": variant, "health": health, "cases": cs,
               "errors": errors, "verdict": fresh if keep else stored, "reason": ""}
        docs.append(job)
        honest.append(dict(job, verdict=fresh))
    doc = {"jobs": docs, "exit_code": stored_code, "verdict": "pass"}
    judged = results.judge(doc)
    truth = results.judge({"jobs": honest})
    assert _sev_code(judged["exit_code"]) >= _sev_code(truth["exit_code"])
    if not docs:
        assert judged["exit_code"] == results.EXIT_CODES[results.INFRA]
    if all(keep for *_, keep in stored_jobs):
        assert judged["exit_code"] == truth["exit_code"]
    keys = [(j["target"], j["variant"]) for j in docs]
    if len(set(keys)) == len(keys) and docs:
        worst = max((_sev(j["verdict"]) for j in truth["jobs"]), default=0)
        assert truth["exit_code"] == results.EXIT_CODES[results.SEVERITY[worst]]


def _sev_code(code):
    """An exit code's place in the order of verdicts."""
    return max(_sev(v) for v, c in results.EXIT_CODES.items() if c == code)


# --- the command line -----------------------------------------------------

class Stubbed(common.KgateError):
    """Raised where real work would start: the arguments got through."""


HEAVY = [(runner, "artifacts"), (runner, "run"), (runner, "preflight"), (lab, "submit"),
         (lab, "collect"), (lab, "serve"), (lab, "stage"), (lab, "write_lab_jobs"),
         (kernel, "build"), (kernel, "pristine"), (rootfs, "build"), (rootfs, "build_native"),
         (mutants, "check"), (bisect, "bisect"), (bisect, "bisect_source"),
         (bisect, "step_main"), (bench, "bench"), (selftest, "write_patch"),
         (selftest, "check"), (golden, "update"), (golden, "compare"), (soak, "soak")]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    (root / "empty").mkdir()
    (root / "junk.json").write_text("{not json")
    (root / "list.json").write_text("[]")
    (root / "run").mkdir()
    (root / "run" / "results.json").write_text(json.dumps({
        "schema": 1, "run": "r", "started": "2026-01-01T00:00:00+00:00", "jobs": [
            {"target": "x86_64", "variant": "fixed", "cases": cases(), "health": "complete",
             "verdict": "pass", "reason": "", "kernel_sha256": "k", "rootfs_sha256": "r"}]}))
    (root / "patches").mkdir()
    (root / "patches" / "a.patch").write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    return root


def _vocabulary(root):
    r = str(root)
    words = [c for c in cli.parser()._subparsers._group_actions[0].choices]
    words += list(common.load_targets()) + ["all", "extra", "default", "sparc", ""]
    words += list(common.ALL_VARIANTS) + ["nightly"]
    words += ["--variant", "--patches", "--source", "--image", "--debug", "-p", "-j",
              "--parallel", "--jobs", "--repeat", "--retry-infra", "--overlap", "--port",
              "--bind", "--base-url", "--device-type", "--tag", "--priority", "--visibility",
              "--job-prefix", "--job-timeout", "-i", "--identity", "--no-wait", "--timeout",
              "-o", "--output", "--origin", "--with-control", "--figures", "--mutant",
              "--good", "--bad", "--tree", "--out", "--cold", "--update", "--no-build",
              "--help", "--no-run", "--keep", "--headers", "-h", "--", "-"]
    words += ["0", "1", "-1", "2", "99999", "65536", "4294967297", "abc", "1e3", "medium",
              "personal", "http://lab/", "ftp://x", "x86_64=/nonexistent", "x86_64=",
              "=x", "a\nb", 'a"b', "kcidb", "json", "04", "99", "HEAD", "/dev/full",
              "/nonexistent", r + "/empty", r + "/junk.json", r + "/list.json", r + "/run",
              r + "/run/results.json", r + "/patches", "\x00", "é"]
    return words


@settings(max_examples=examples(600), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_no_argument_list_ends_in_a_traceback(data, sandbox, monkeypatch, capsys):
    for mod, name in HEAVY:
        monkeypatch.setattr(mod, name, _stub(name))
    monkeypatch.setattr(workspace, "_current", workspace.Workspace.under(sandbox))
    words = _vocabulary(sandbox)
    argv = data.draw(st.lists(st.one_of(st.sampled_from(words),
                                        st.text(string.printable, max_size=6)),
                              min_size=1, max_size=7))
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code in DOCUMENTED, (argv, code, err)
    assert code != results.EXIT_INTERNAL, (argv, err)
    assert "Traceback" not in err, (argv, err)


DOCUMENTED = set(results.EXIT_CODES.values()) | {results.EXIT_USAGE, results.EXIT_INTERRUPTED,
                                                 results.EXIT_INTERNAL, 0}


def _stub(name):
    def stub(*args, **kwargs):
        raise Stubbed(f"{name}: arguments accepted")
    return stub
