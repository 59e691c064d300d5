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
    assert results.GUEST_CASES == list(s.cases)
    assert results.RUN_CASE == "backlog_coalesce-run" and results.UNIT_RUN_CASE == "test_pkt-run"
    assert results.BENCH_RUN_CASE == "backlog_bench-run"
    assert results.BENCH_DEFINITION == "kgate-bench"
    assert results.KNOWN_BAD_MUST_FAIL == [f"backlog.ipv{v}.data_{c}" for v in (4, 6)
                                           for c in ("fin", "rst", "noack")]
    assert rootfs.TEST_PROGRAMS == {p.name: list(p.sources) for p in s.programs}
    for src in s.sources:
        assert os.path.isfile(os.path.join(suite.GUEST, src)), src


def _write(tmp_path, change):
    with open(os.path.join(suite.SUITES, "backlog.yaml"), encoding="utf-8") as f:
        data = yaml.safe_load(f)
    data["name"] = "other"
    change(data)
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def test_the_jobs_steps_come_from_the_suite(tmp_path, monkeypatch):
    def rename(data):
        data["definition"] = "kgate-other"
        data["title"] = "other suite"
        data["programs"] = {"unit_a": data["programs"]["test_pkt"],
                            "prog_b": data["programs"]["backlog_coalesce"],
                            "bench_c": dict(data["programs"]["backlog_bench"],
                                            definition="kgate-c", args="--fast")}
    _write(tmp_path, rename)
    other = suite.load("other", str(tmp_path))
    monkeypatch.setattr(render, "SUITE", other)
    monkeypatch.setitem(render.DEFAULTS, "bench_args", other.bench.args)
    art = {"url": "http://x/k", "sha256": "0" * 64}
    text = render.render_job(common.target("x86_64"), "fixed", art, art)
    job = yaml.safe_load(text)
    assert job["job_name"].endswith(": other suite")
    tests = [a["test"]["definitions"][0] for a in job["actions"] if "test" in a]
    assert [t["name"] for t in tests] == ["kgate-other", "kgate-c"]
    assert tests[0]["repository"]["run"]["steps"] == ["kgate-lava /usr/bin/unit_a",
                                                      "kgate-lava /usr/bin/prog_b"]
    assert tests[1]["repository"]["run"]["steps"][0] == "kgate-lava /usr/bin/bench_c --fast"


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
    lambda d: d["programs"].pop("backlog_bench"),
    lambda d: d["programs"]["backlog_bench"].update(definition="kgate-backlog"),
    lambda d: d["programs"]["backlog_bench"].update(definition="x_kgate-backlog"),
    lambda d: d["programs"].update({"../x y": d["programs"].pop("test_pkt")}),
    lambda d: d["cases"].update(fixture=""),
    lambda d: d.update(definition="a b"),
    lambda d: d["programs"]["backlog_coalesce"]["faults"].update(wrap=["write; rm"]),
    lambda d: d["programs"]["backlog_coalesce"]["faults"].pop("wrap"),
    lambda d: d["programs"]["backlog_coalesce"]["faults"].update(sources=["../f.c"]),
    lambda d: d["programs"]["test_pkt"].update(faults=d["programs"]["backlog_coalesce"]["faults"]),
], ids=range(21))
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
    for d in ("tools", "suites", "templates", "kernel"):
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
