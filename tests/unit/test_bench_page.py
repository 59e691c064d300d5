"""docs/measurements.md is written by 'kgate.py bench --markdown' from
what the builds, runs and mutation checks recorded."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

from kgate import cli, results  # noqa: E402


def _run(build, name, jobs):
    run = build / "runs" / name
    run.mkdir(parents=True)
    doc = {"schema": results.SCHEMA_VERSION, "run": name, "started": "s", "finished": "f",
           "verdict": "pass", "seconds": 42.0, "jobs": jobs}
    (run / "results.json").write_text(json.dumps(doc))
    latest = build / "runs" / "latest"
    if latest.is_symlink():
        latest.unlink()
    latest.symlink_to(name)


def test_the_measurements_page_is_the_tools_output(tmp_path, use_workspace, capsys):
    build = tmp_path / "build"
    use_workspace(build)
    fig = [{"definition": "1_kgate-bench", "case": "bench.bulk_on_goodput", "result": "pass",
            "measurement": 80.0, "units": "MB/s"}]
    _run(build, "20261207T000000Z", [
        {"target": "x86_64", "variant": "fixed", "verdict": "pass", "seconds": 30.0,
         "cases": fig, "timing": {"boot": 2.0, "programs": {"backlog_coalesce": 13.0}}}])
    m = build / "mutants" / "20261207T010000Z"
    m.mkdir(parents=True)
    (m / "mutants.txt").write_text("01-csum-check  caught  data_csum\nMutants: 1 of 1 caught\n")
    page = tmp_path / "measurements.md"
    assert cli.main(["bench", "--markdown", str(page), "x86_64"]) == 0
    assert capsys.readouterr().out.strip() == str(page)
    text = page.read_text()
    assert text.startswith("# Measurements\n") and "not edited by hand" in text
    assert "## Targets, jobs and goals (x86_64)" in text
    assert "Jobs of run 20261207T000000Z" in text
    assert "## Mutation check (build/mutants/20261207T010000Z)" in text
    assert "Mutants: 1 of 1 caught" in text
    assert text.count("```") % 2 == 0


def test_a_page_in_a_folder_that_does_not_exist_is_refused_first(tmp_path, use_workspace,
                                                                 monkeypatch, capsys):
    use_workspace(tmp_path / "build")
    from kgate import bench
    monkeypatch.setattr(bench, "bench", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    assert cli.main(["bench", "--cold", "--markdown", str(tmp_path / "no" / "m.md")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_a_page_that_is_a_folder_is_refused_first(tmp_path, use_workspace, monkeypatch, capsys):
    use_workspace(tmp_path / "build")
    from kgate import bench
    monkeypatch.setattr(bench, "bench", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    assert cli.main(["bench", "--cold", "--markdown", str(tmp_path)]) == 2
    assert "a folder, not a file" in capsys.readouterr().err
