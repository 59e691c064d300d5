"""A test suite is data (suites/<name>.yaml): its programs, cases, the
control's must-fail set and its test definitions come from there."""
import os
import shutil
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

from kgate import common, render, results, rootfs, suite  # noqa: E402


def test_the_backlog_suite_is_what_the_judge_and_the_build_use():
    s = suite.load("backlog")
    assert [p.name for p in s.programs] == ["test_pkt", "backlog_coalesce", "backlog_bench"]
    assert [p.role for p in s.programs] == ["unit", "test", "bench"]
    assert len(s.cases) == 6 * 22 and s.cases[0] == "backlog.ipv4.data_data"
    g = results.gate()
    assert [x.name for x in g.suites] == ["backlog", "fuzz"] and g.suites[0] == s
    assert g.cases[:len(s.cases)] == s.cases
    assert g.run_cases == ("backlog_coalesce-run", "backlog_fuzz-run")
    assert g.unit_run_cases == ("test_pkt-run",)
    assert g.bench_run_cases == ("backlog_bench-run",) and g.bench_definitions == ("kgate-bench",)
    assert list(g.control_must_fail) == [f"backlog.ipv{v}.data_{c}" for v in (4, 6)
                                         for c in ("fin", "rst", "noack")] + \
        ["fuzz.ipv4.random", "fuzz.ipv4.regressions", "fuzz.ipv6.random", "fuzz.ipv6.regressions",
         "fuzz.ipv4_tap.random", "fuzz.ipv4_tap.regressions"]
    assert rootfs.test_programs() == {p.name: list(p.sources) for x in g.suites for p in x.programs}
    # the fuzz suite's replay files of past failures, in every initramfs
    assert rootfs.test_data() == {"fuzz-regressions": "/usr/share/kgate/fuzz-regressions"}
    assert any(f.endswith(".seq") for f in os.listdir(os.path.join(suite.GUEST, "fuzz-regressions")))
    for src in s.sources:
        assert os.path.isfile(os.path.join(suite.GUEST, src)), src


def _write(tmp_path, change):
    with open(os.path.join(suite.SUITES, "backlog.yaml"), encoding="utf-8") as f:
        data = yaml.safe_load(f)
    data["name"] = "other"
    change(data)
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def _other(data):
    """A second suite beside backlog: its own programs, definitions,
    fixture and must-fail cases."""
    data["definition"] = "kgate-other"
    data["title"] = "other suite"
    data["programs"] = {"unit_a": data["programs"]["test_pkt"],
                        "prog_b": data["programs"]["backlog_coalesce"],
                        "bench_c": dict(data["programs"]["backlog_bench"],
                                        definition="kgate-c", args="--fast",
                                        cases=["c.one"])}
    data["cases"] = {"fixture": "other", "variants": ["v4"], "tests": ["t1", "t2"]}
    data["control_must_fail"] = ["other.v4.t2"]


def _gate(tmp_path, *names, change=_other):
    """A folder of suites: backlog's file, 'other' made by change, and
    a gate.yaml listing names."""
    shutil.copy(os.path.join(suite.SUITES, "backlog.yaml"), tmp_path / "backlog.yaml")
    _write(tmp_path, change)
    (tmp_path / "gate.yaml").write_text(yaml.safe_dump({"suites": list(names)}))
    return str(tmp_path)


def _steps(job):
    return [(a["test"]["definitions"][0]["name"], a["test"]["definitions"][0]["repository"]["run"]["steps"])
            for a in job["actions"] if "test" in a]


def test_the_jobs_steps_come_from_the_suite(tmp_path, use_workspace):
    use_workspace(tmp_path / "b", suites=_gate(tmp_path, "other"))
    art = {"url": "http://x/k", "sha256": "0" * 64}
    job = yaml.safe_load(render.render_job(common.target("x86_64"), "fixed", art, art))
    assert job["job_name"].endswith(": other suite")
    assert _steps(job) == [
        ("kgate-other", ["kgate-lava /usr/bin/unit_a", "kgate-lava /usr/bin/prog_b"]),
        ("kgate-c", ["kgate-lava /usr/bin/bench_c --fast", "kgate-kernel-log"])]


def test_a_second_suite_is_one_file_and_one_line(tmp_path, use_workspace):
    """Two suites in suites/gate.yaml: the job runs both (benchmarks
    last, the kernel log at the very end), the initramfs has both's
    programs, and the verdict judges both's cases; no module names
    either."""
    use_workspace(tmp_path / "b", suites=_gate(tmp_path, "backlog", "other"))
    art = {"url": "http://x/k", "sha256": "0" * 64}
    fixed = yaml.safe_load(render.render_job(common.target("x86_64"), "fixed", art, art))
    assert fixed["job_name"].endswith(": backlog coalescing + other suite")
    assert _steps(fixed) == [
        ("kgate-backlog", ["kgate-lava /usr/bin/test_pkt", "kgate-lava /usr/bin/backlog_coalesce"]),
        ("kgate-other", ["kgate-lava /usr/bin/unit_a", "kgate-lava /usr/bin/prog_b"]),
        ("kgate-bench", ["kgate-lava /usr/bin/backlog_bench --reps 11 --bulk-bytes 16M "
                         "--drain 0,100,1000"]),
        ("kgate-c", ["kgate-lava /usr/bin/bench_c --fast", "kgate-kernel-log"])]
    bad = yaml.safe_load(render.render_job(common.target("x86_64"), common.KNOWN_BAD, art, art))
    assert [s for _, s in _steps(bad)][-1][-1] == "kgate-kernel-log" and len(_steps(bad)) == 2
    assert set(rootfs.test_programs()) == {"test_pkt", "backlog_coalesce", "backlog_bench",
                                           "unit_a", "prog_b", "bench_c"}

    g = results.gate()
    assert g.cases[-2:] == ("other.v4.t1", "other.v4.t2") and len(g.cases) == 6 * 22 + 2

    def job(variant, **res):
        by = {c: "pass" for c in g.cases + g.run_cases + g.unit_run_cases + ("kernel-log",)}
        by.update(res)
        cases = [{"definition": "1_kgate-backlog", "case": c, "result": r} for c, r in by.items()
                 if r is not None]
        cases += [{"definition": f"{2 + i}_{d}", "case": c, "result": "pass"}
                  for i, (d, cs) in enumerate((("kgate-bench", g.role("bench")[0].cases),
                                               ("kgate-c", ["c.one"])))
                  for c in list(cs) + [g.bench_run_cases[i]]] if variant == "fixed" else []
        return results.job_verdict(variant, "complete", cases, bench=variant == "fixed")

    assert job("fixed") == (results.PASS, "all cases passed")
    assert job("fixed", **{"other.v4.t2": "fail"})[0] == results.REGRESSION
    assert job("fixed", **{"other.v4.t1": "skip"}) == (results.INCONCLUSIVE,
                                                       "inconclusive: other.v4.t1")
    verdict, why = job("fixed", **{"prog_b-run": None})
    assert verdict == results.INFRA and "prog_b-run" in why
    assert job("fixed", **{"prog_b-run": "fail"})[0] == results.ERROR
    assert job("fixed", **{"unit_a-run": "fail"})[0] == results.INFRA
    must = {c: "fail" for c in g.control_must_fail}
    assert job(common.KNOWN_BAD, **must)[0] == results.CAUGHT
    # backlog's control caught, other's passed: the gate is blind there
    verdict, why = job(common.KNOWN_BAD, **dict(must, **{"other.v4.t2": "pass"}))
    assert verdict == results.MISSED and "other.v4.t2" in why


@pytest.mark.parametrize("names,change,what", [
    (["backlog", "backlog"], _other, "distinct"),
    (["backlog", "nope"], _other, "suite 'nope'"),
    (["backlog", "other"], lambda d: (_other(d), d["programs"].update(
        test_pkt=d["programs"].pop("unit_a"))), "program test_pkt"),
    (["backlog", "other"], lambda d: (_other(d), d["cases"].update(fixture="backlog"),
                                      d.update(control_must_fail=["backlog.v4.t2"])), "fixture"),
    (["backlog", "other"], lambda d: (_other(d), d["programs"]["bench_c"].update(
        definition="kgate-bench")), "definitions must differ"),
], ids=["twice", "unknown", "program", "fixture", "definition"])
def test_a_gate_whose_suites_clash_is_refused(tmp_path, names, change, what):
    with pytest.raises(common.KgateError, match=what):
        suite.gate(_gate(tmp_path, *names, change=change))


@pytest.mark.parametrize("change", [
    lambda d: d.pop("cases"),
    lambda d: d.update(extra=1),
    lambda d: d.update(name="backlog"),
    lambda d: d["programs"]["test_pkt"].update(role="other"),
    lambda d: d["programs"]["backlog_coalesce"].update(role="unit"),
    lambda d: d["programs"]["backlog_bench"].pop("cases"),
    lambda d: d["programs"]["test_pkt"].update(sources=[]),
    lambda d: d["programs"]["test_pkt"].update(sources=["../x.c"]),
    lambda d: d.update(control_must_fail=["backlog.ipv4.nope"]),
    lambda d: d["cases"].update(tests=["a", "a"]),
    lambda d: d.update(title=""),
    lambda d: d["programs"].pop("backlog_coalesce"),
    lambda d: d["programs"].update(bench_2=dict(d["programs"]["backlog_bench"], definition="k2")),
    lambda d: d["programs"]["backlog_bench"].update(definition="kgate-backlog"),
    lambda d: d["programs"]["backlog_bench"].update(definition="x_kgate-backlog"),
    lambda d: d["programs"].update({"../x y": d["programs"].pop("test_pkt")}),
    lambda d: d["cases"].update(fixture=""),
    lambda d: d.update(definition="a b"),
    lambda d: d["programs"]["backlog_coalesce"]["faults"].update(wrap=["write; rm"]),
    lambda d: d["programs"]["backlog_coalesce"]["faults"].pop("wrap"),
    lambda d: d["programs"]["backlog_coalesce"]["faults"].update(sources=["../f.c"]),
    lambda d: d["programs"]["test_pkt"].update(faults=d["programs"]["backlog_coalesce"]["faults"]),
    lambda d: d.update(data=["../guest"]),
    lambda d: d.update(data=["no-such-folder"]),
    lambda d: d.update(data="fuzz-regressions"),
    lambda d: d.update(data=["backlog_pkt.c"]),
    lambda d: d.update(extra=1),
], ids=range(27))
def test_a_malformed_suite_is_refused(tmp_path, change):
    _write(tmp_path, change)
    with pytest.raises(common.KgateError):
        suite.load("other", str(tmp_path))


def test_an_unknown_suite_is_refused(tmp_path):
    with pytest.raises(common.KgateError, match="suite 'nope'"):
        suite.load("nope", str(tmp_path))


def test_a_broken_suite_file_stops_kgate_with_a_usage_error(tmp_path):
    """The suite is read when kgate starts: a file that cannot be used
    is exit 2, never 1 (a regression's code) from a traceback."""
    top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    for d in ("tools", "suites", "templates", "kernel", "guest"):
        shutil.copytree(os.path.join(top, d), tmp_path / d,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(top, "targets.yaml"), tmp_path)
    ok = subprocess.run([sys.executable, str(tmp_path / "tools" / "kgate.py"), "list"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    path = tmp_path / "suites" / "backlog.yaml"
    path.write_text(path.read_text().replace("title: backlog coalescing", "title: 5"))
    bad = subprocess.run([sys.executable, str(tmp_path / "tools" / "kgate.py"), "list"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "title wants text" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr


def test_one_suite_of_the_gate_alone(tmp_path, use_workspace):
    """run --suite fuzz: the jobs run that suite alone (the kernel log at
    its end), the initramfs has its program alone, and the verdict needs
    its cases alone; the control must fail its must-fail cases."""
    use_workspace(tmp_path, only=("fuzz",))
    g = suite.current()
    assert [s.name for s in g.suites] == ["fuzz"]
    art = {"url": "http://x/k", "sha256": "0" * 64}
    job = yaml.safe_load(render.render_job(common.target("x86_64"), "fixed", art, art))
    assert _steps(job) == [("kgate-fuzz", ["kgate-lava /usr/bin/backlog_fuzz", "kgate-kernel-log"])]
    assert set(rootfs.test_programs()) == {"backlog_fuzz"}
    by = {c: "pass" for c in g.cases + g.run_cases + ("kernel-log",)}
    cases = [{"definition": "1_kgate-fuzz", "case": c, "result": r} for c, r in by.items()]
    assert results.job_verdict("fixed", "complete", cases) == (results.PASS, "all cases passed")
    bad = [dict(c, result="fail") if c["case"] in g.control_must_fail else c for c in cases]
    assert results.job_verdict(common.KNOWN_BAD, "complete", bad)[0] == results.CAUGHT
    assert results.job_verdict(common.KNOWN_BAD, "complete", cases)[0] == results.MISSED


def test_a_suite_the_gate_lacks_is_a_usage_error(tmp_path, use_workspace):
    use_workspace(tmp_path, only=("nope",))
    with pytest.raises(common.KgateError, match="no suite 'nope' in the gate"):
        suite.current()


@pytest.mark.parametrize("argv,says", [
    (["run", "--suite", "nope", "x86_64"], "no suite 'nope'"),
    (["run", "--args", "nope=--x", "x86_64"], "no program 'nope'"),
    (["run", "--args", "backlog_fuzz=--seed 1;reboot", "x86_64"], "letters, digits"),
    (["run", "--args", "backlog_fuzz", "x86_64"], "PROGRAM=ARGS"),
    (["run", "--suite", "fuzz", "--args", "backlog_coalesce=--repeat 2", "x86_64"],
     "no program 'backlog_coalesce'"),
    (["mutants", "--suite", "nope"], "no suite 'nope'"),
])
def test_bad_suite_and_args_are_refused_before_anything_is_built(argv, says, capsys):
    from kgate import cli
    try:
        code = cli.main(argv)
    except SystemExit as e:  # argparse's own
        code = e.code
    assert code == 2 and says in capsys.readouterr().err


def test_args_and_test_timeout_reach_the_job(tmp_path, use_workspace):
    from kgate import cli
    use_workspace(tmp_path)
    args = cli.parser().parse_args(["run", "--args", "backlog_fuzz=--seed 9 --count 5000",
                                    "--test-timeout", "40", "x86_64"])
    over = cli.job_overrides(args)
    assert over == {"program_args": {"backlog_fuzz": "--seed 9 --count 5000"},
                    "timeouts": {"test": 40, "job": 55}}
    art = {"url": "http://x/k", "sha256": "0" * 64}
    job = yaml.safe_load(render.render_job(common.target("x86_64"), "fixed", art, art, **over))
    assert ("kgate-fuzz", ["kgate-lava /usr/bin/backlog_fuzz --seed 9 --count 5000"]) in _steps(job)
    assert job["timeouts"]["job"] == {"minutes": 55}
    assert {a["test"]["timeout"]["minutes"] for a in job["actions"] if "test" in a
            and a["test"]["definitions"][0]["name"] != "kgate-bench"} == {40}


def test_a_suites_data_folder_is_in_the_initramfs(tmp_path):
    """The fuzz suite's regressions reach the guest: rootfs puts its
    data folder under /usr/share/kgate/, every file of it."""
    bb = tmp_path / "bb"
    bb.mkdir()
    (bb / "busybox").write_text("")
    (bb / "busybox.links").write_text("/bin/sh\n")
    stage = tmp_path / "root"
    stage.mkdir()
    rootfs._assemble(str(stage), str(bb), {})
    src = os.path.join(suite.GUEST, "fuzz-regressions")
    got = stage / "usr" / "share" / "kgate" / "fuzz-regressions"
    assert sorted(os.listdir(got)) == sorted(os.listdir(src))
    for name in os.listdir(src):
        with open(os.path.join(src, name), encoding="utf-8") as f:
            assert (got / name).read_text() == f.read()
