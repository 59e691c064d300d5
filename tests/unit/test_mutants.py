"""The mutation check: the mutants themselves and the verdict logic
(run with /usr/bin/python3 -m pytest -q tests/unit/test_mutants.py)."""
import difflib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

from kgate import common, kernel, mutants, render, results  # noqa: E402
from kgate import run as runner  # noqa: E402

TCP_IPV4 = "net/ipv4/tcp_ipv4.c"
MUTANTS = mutants.load()


# --- the mutants -----------------------------------------------------------

def test_series_lists_every_mutant_file():
    folder = kernel.kernel_series().mutants
    on_disk = sorted(f for f in os.listdir(folder) if f.endswith(".patch"))
    assert [os.path.basename(m["path"]) for m in MUTANTS] == on_disk
    assert len(MUTANTS) >= 20
    for m in MUTANTS:
        assert re.match(r"^\d\d-[a-z0-9-]+$", m["name"]), m["name"]
    assert len({m["name"].split("-")[0] for m in MUTANTS}) == len(MUTANTS)


@pytest.mark.parametrize("m", MUTANTS, ids=[m["name"] for m in MUTANTS])
def test_mutant_touches_only_tcp_ipv4_and_names_its_catch(m):
    with open(m["path"], encoding="utf-8") as f:
        text = f.read()
    assert m["files"] == [TCP_IPV4]
    assert re.search(r"^Subject: \[PATCH\] MUTANT: tcp: ", text, re.M)
    assert re.search(r"^Signed-off-by: ", text, re.M)
    # The cases that must catch it exist; only the mutants that hide or
    # stop merging may come out merely inconclusive.
    assert set(m["expect"]) <= set(results.judged_cases()), m["expect"]
    assert m["expect"] or m["inconclusive_allowed"]
    assert m["inconclusive_allowed"] == (m["name"] in ("20-no-count", "21-no-merge"))


def _patch(args, cwd):
    return subprocess.run(["patch", "-p1", "--forward", "--no-backup-if-mismatch", "-s"] + args,
                          cwd=cwd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def fixed_tree(tmp_path_factory):
    """The files kernel/patches touches, from the pristine tree, with
    kernel/patches applied: the base every mutant goes on."""
    if not os.path.isfile(kernel.kernel_series().tarball):
        pytest.skip(f"{kernel.kernel_series().tarball} missing (make deps)")
    src = kernel.pristine()
    root = tmp_path_factory.mktemp("fixed")
    series = kernel.series("patches")
    for p in series:
        with open(p, encoding="utf-8") as f:
            for rel in mutants.parse_patch(f.read())[2]:
                os.makedirs(root / os.path.dirname(rel), exist_ok=True)
                shutil.copyfile(os.path.join(src, rel), root / rel)
    for p in series:
        r = _patch(["-i", p], root)
        assert r.returncode == 0, r.stdout + r.stderr
    return root


@pytest.mark.parametrize("m", MUTANTS, ids=[m["name"] for m in MUTANTS])
def test_mutant_applies_on_top_of_the_fixed_series(m, fixed_tree, tmp_path):
    r = _patch(["--dry-run", "-i", m["path"]], fixed_tree)
    assert r.returncode == 0, r.stdout + r.stderr
    # Applied to a copy: the change lies inside tcp_add_backlog().
    (tmp_path / "net" / "ipv4").mkdir(parents=True)
    shutil.copyfile(fixed_tree / TCP_IPV4, tmp_path / TCP_IPV4)
    r = _patch(["-i", m["path"]], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    before = (fixed_tree / TCP_IPV4).read_text().splitlines()
    after = (tmp_path / TCP_IPV4).read_text().splitlines()
    start = before.index("bool tcp_add_backlog(struct sock *sk, struct sk_buff *skb,")
    end = before.index("EXPORT_SYMBOL(tcp_add_backlog);")
    ops = [op for op in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    assert ops and all(start < i1 and i2 <= end for _, i1, i2, _, _ in ops)


def test_mutants_are_all_different(fixed_tree, tmp_path):
    seen = {}
    for m in MUTANTS:
        d = tmp_path / m["name"]
        (d / "net" / "ipv4").mkdir(parents=True)
        shutil.copyfile(fixed_tree / TCP_IPV4, d / TCP_IPV4)
        assert _patch(["-i", m["path"]], d).returncode == 0
        seen.setdefault((d / TCP_IPV4).read_text(), []).append(m["name"])
    assert [names for names in seen.values() if len(names) > 1] == []


def test_parse_patch():
    text = ("Subject: [PATCH] x\n\nKgate-expect: a b\nKgate-expect: c\nKgate-inconclusive: allowed\n"
            "---\n x | 1 +\n\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+Kgate-expect: z\n")
    assert mutants.parse_patch(text) == (["a", "b", "c"], True, ["x"], False)
    assert mutants.parse_patch("msg\n---\n+++ b/y\n") == ([], False, ["y"], False)
    assert mutants.parse_patch("m\n\nKgate-kernel: debug\n---\n+++ b/y\n")[3] is True


def test_a_debug_mutant_is_judged_by_its_debug_kernel():
    m = {"name": "24-x", "path": "/x/24-x.patch", "expect": ["kernel-log"],
         "inconclusive_allowed": False, "debug": True}
    doc = {"jobs": [{"target": "x86_64", "variant": "candidate", "verdict": "pass"},
                    {"target": "x86_64", "variant": "candidate-debug", "verdict": "regression",
                     "cases": [{"case": "kernel-log", "result": "fail"}]}]}
    e = mutants.judge(m, ["x86_64"], doc, None, 1.0)
    assert e["variant"] == "candidate-debug" and e["outcome"] == mutants.CAUGHT
    plain = mutants.judge(dict(m, debug=False), ["x86_64"], doc, None, 1.0)
    assert plain["outcome"] == mutants.PASSED


def test_select():
    names = [m["name"] for m in mutants.select(MUTANTS, ["17", "04-syn-merge",
                                                         "01-csum-check.patch"])]
    assert names == ["01-csum-check", "04-syn-merge", "17-header-fin"]
    assert mutants.select(MUTANTS, None) == MUTANTS
    with pytest.raises(common.KgateError, match="no mutant '99'"):
        mutants.select(MUTANTS, ["99"])


# --- the check, with fake runs ---------------------------------------------

def guest_cases(**res):
    """Every case a job reports, passed unless named: ipv4.data_csum='fail'."""
    base = {c: "pass" for c in list(results.judged_cases()) + list(results.gate().run_cases + results.gate().unit_run_cases)}
    base.update({f"{results.gate().fixtures[0]}.{k}": v for k, v in res.items()})
    return [{"case": k, "result": v} for k, v in base.items()]


def merge_required_skipped(fam="ipv4"):
    return {f"{fam}.{c}": "skip" for c in ("data_data", "data_psh", "data_fin", "opts_opts",
                                           "end_seq", "ack_new", "ack_old", "window",
                                           "rx_tstamp")}


def caught_as_expected(m):
    """What a gate that sees every rule reports for mutant m."""
    res = {c[len(results.gate().fixtures[0]) + 1:]: "fail" for c in m["expect"]}
    if m["inconclusive_allowed"]:
        res.update(merge_required_skipped("ipv4"), **merge_required_skipped("ipv6"))
    return guest_cases(**res)


class FakeRuns:
    """runner.run for the check: judges the cases given per mutant with
    results.job_verdict, as the real run does; records its arguments."""

    def __init__(self, tmp_path, per_mutant):
        self.tmp = tmp_path
        self.per_mutant = per_mutant
        self.calls = []

    def __call__(self, target_names, variants, parallel=1, jobs=None, bench=True, latest=True,
                 cand=kernel.NO_CANDIDATE):
        patches = kernel.variant_patches(common.CANDIDATE, cand)
        name = os.path.basename(patches[-1])[:-len(".patch")]
        assert patches[:-1] == kernel.series("patches")
        self.calls.append({"mutant": name, "targets": target_names, "variants": variants,
                           "bench": bench, "latest": latest})
        got = self.per_mutant[name]
        if isinstance(got, Exception):
            raise got
        run_dir = self.tmp / "runs" / name
        run_dir.mkdir(parents=True)
        jobs_ = []
        for t in target_names:
            cs = got[t] if isinstance(got, dict) else got
            verdict, reason = results.job_verdict(variants[0], "complete", cs, bench=bench)
            jobs_.append({"target": t, "variant": variants[0], "verdict": verdict,
                          "reason": reason, "cases": cs, "seconds": 61.0})
        return {"jobs": jobs_}, str(run_dir)


@pytest.fixture
def fake(tmp_path, monkeypatch, use_workspace):
    use_workspace(tmp_path / "build")
    monkeypatch.setattr(mutants, "preflight", lambda names: [common.target(n) for n in names])

    def install(per_mutant):
        f = FakeRuns(tmp_path, per_mutant)
        monkeypatch.setattr(runner, "run", f)
        return f
    return install


def test_every_mutant_caught(fake):
    f = fake({m["name"]: caught_as_expected(m) for m in MUTANTS})
    text, code, out_dir = mutants.check()
    assert code == 0, text
    assert "Mutation check: PASS" in text
    # One run per mutant: candidate only (no known-bad control), no
    # benchmark, build/runs/latest left alone, x86_64 by default.
    assert [c["mutant"] for c in f.calls] == [m["name"] for m in MUTANTS]
    # A mutant only KASAN can see runs as the debug candidate.
    assert all(c["variants"] == [mutants.variant(m)] for c, m in zip(f.calls, MUTANTS))
    assert [m["name"] for m in MUTANTS if m["debug"]] == ["24-free-before-read"]
    assert all(c["bench"] is False and
               c["latest"] is False and c["targets"] == ["x86_64"] for c in f.calls)
    doc = json.loads(open(os.path.join(out_dir, "mutants.json")).read())
    assert doc["exit_code"] == 0 and doc["targets"] == ["x86_64"] and doc["seconds"] is not None
    by = {e["mutant"]: e for e in doc["mutants"]}
    assert list(by) == [m["name"] for m in MUTANTS]
    e = by["01-csum-check"]
    assert e["verdict"] == results.REGRESSION and e["outcome"] == mutants.CAUGHT
    assert e["failed"] == ["backlog.ipv4.data_csum", "backlog.ipv6.data_csum"]
    assert e["run"].endswith("01-csum-check") and e["seconds"] >= 0
    assert e["expected_not_failed"] == []
    # no-merge: caught by flood, its merge-required cases inconclusive.
    e = by["21-no-merge"]
    assert e["outcome"] == mutants.CAUGHT and len(e["inconclusive"]) == 18
    assert "21-no-merge on x86_64 inconclusive: ipv4.data_data, ipv4.data_psh" in text
    row = [ln for ln in text.splitlines() if ln.startswith("01-csum-check")][0]
    assert re.search(r"x86_64\s+regression\s+caught\s+\S+\s+ipv4.data_csum ipv6.data_csum", row)
    assert os.path.isfile(os.path.join(out_dir, "mutants.txt"))


def test_passed_mutant_fails_the_check(fake):
    per = {m["name"]: caught_as_expected(m) for m in MUTANTS}
    per["04-syn-merge"] = guest_cases()
    fake(per)
    text, code, _ = mutants.check(wanted=["01", "04"])
    assert code == 1
    assert "PASSED: gate blind" in text
    assert "Mutation check: FAIL: the gate is blind to 04-syn-merge" in text


def test_inconclusive_only_where_allowed(fake):
    skips = guest_cases(**merge_required_skipped())
    f = fake({"20-no-count": skips, "05-rst-merge": skips})
    text, code, out_dir = mutants.check(wanted=["20"])
    assert code == 0 and "inconclusive (allowed)" in text
    assert "20-no-count on x86_64 inconclusive: ipv4.data_data" in text
    assert ("20-no-count on x86_64 inconclusive (allowed), but these expected cases did not "
            "fail: ipv4.flood, ipv6.flood") in text
    text, code, _ = mutants.check(wanted=["05"])
    assert code == 1 and "NOT CAUGHT (inconclusive)" in text
    assert "FAIL: not every mutant was caught" in text
    assert len(f.calls) == 2


def test_infrastructure_leaves_a_mutant_undecided(fake):
    per = {m["name"]: caught_as_expected(m) for m in MUTANTS}
    per["02-seq-continuity"] = common.KgateError("kernel x86_64/candidate: build failed\n"
                                                 "net/ipv4/tcp_ipv4.c:1: error")
    per["03-dsfield"] = guest_cases()[:-5]  # results missing, none failed
    f = fake(per)
    text, code, out_dir = mutants.check(wanted=["01", "02", "03"])
    assert code == 1
    assert [c["mutant"] for c in f.calls] == ["01-csum-check", "02-seq-continuity", "03-dsfield"]
    doc = json.loads(open(os.path.join(out_dir, "mutants.json")).read())
    by = {e["mutant"]: e for e in doc["mutants"]}
    assert by["01-csum-check"]["outcome"] == mutants.CAUGHT
    assert by["02-seq-continuity"]["outcome"] == mutants.UNDECIDED
    assert by["02-seq-continuity"]["error"].startswith("kernel x86_64/candidate: build failed\n")
    assert by["02-seq-continuity"]["run"] is None
    assert by["03-dsfield"]["verdict"] == results.INFRA
    assert ("02-seq-continuity on x86_64 undecided (infrastructure): kernel x86_64/candidate: "
            "build failed\n") in text


def test_expected_cases_not_failing_are_reported(fake):
    fake({"13-end-seq": guest_cases(**{"ipv4.data_data": "fail"})})
    text, code, _ = mutants.check(wanted=["13"])
    assert code == 0  # caught: a case failed
    assert ("13-end-seq on x86_64 caught, but these expected cases did not fail: "
            "ipv4.end_seq, ipv6.end_seq") in text


def test_every_target_must_catch(fake):
    m = [m for m in MUTANTS if m["name"] == "17-header-fin"][0]
    fake({"17-header-fin": {"x86_64": caught_as_expected(m), "arm": guest_cases()}})
    text, code, out_dir = mutants.check(["x86_64", "arm"], ["17"])
    assert code == 1
    e = json.loads(open(os.path.join(out_dir, "mutants.json")).read())["mutants"][0]
    assert e["verdict"] == results.PASS and e["outcome"] == mutants.PASSED
    assert [(j["target"], j["outcome"]) for j in e["jobs"]] == [("x86_64", mutants.CAUGHT),
                                                                 ("arm", mutants.PASSED)]


def test_command_line(fake, capsys):
    from kgate import cli
    fake({m["name"]: caught_as_expected(m) for m in MUTANTS})
    assert cli.main(["mutants", "--mutant", "99"]) == 2
    assert cli.main(["mutants", "sparc"]) == 2
    assert cli.main(["mutants", "--mutant", "22"]) == 0
    out = capsys.readouterr().out
    assert "22-no-limit" in out and "ipv4_off.flood ipv6_off.flood" in out
    assert re.search(r"^Mutants: .*mutants\.json$", out, re.M)


def test_no_benchmark_is_passed_down():
    tgt = common.target("x86_64")
    art = {"url": "file:///k", "sha256": "0" * 64}
    assert "backlog_bench" in render.render_job(tgt, "candidate", art, art)
    assert "backlog_bench" not in render.render_job(tgt, "candidate", art, art, bench=False)
    assert render.has_bench("candidate") and not render.has_bench("candidate", False)
    render.validate_job(render.render_job(tgt, "candidate", art, art, bench=False))
    # A job without the benchmark is not infrastructure for lacking it.
    assert results.job_verdict("candidate", "complete", guest_cases(),
                               bench=render.has_bench("candidate", False))[0] == results.PASS
