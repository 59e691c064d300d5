"""Every row of the README's exit-code table, reached through the
command line (cli.main) as a user would: lava-run and lavacli are
scripted, everything between them and the exit status is the real code.
"""
import os
import re

import pytest

from test_tooling import cases
from kgate import cli, common, kernel, render, results, workspace
from kgate import run as runner

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")


def readme_table():
    """{exit code: verdict text} from the README's exit-code table."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    start = text.index("| exit | verdict | when |")
    rows = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        code, verdict = [c.strip() for c in line.strip("|").split("|")][:2]
        rows[int(code)] = verdict
    return rows


def test_the_readme_table_is_the_codes_table():
    rows = readme_table()
    codes = dict(results.EXIT_CODES, usage=results.EXIT_USAGE,
                 interrupted=results.EXIT_INTERRUPTED, internal=results.EXIT_INTERNAL)
    assert sorted(rows) == sorted(set(codes.values()))
    for verdict, code in codes.items():
        assert verdict in re.split(r",\s*", rows[code]), (verdict, code)
    # and every row has its scenarios below
    assert sorted(rows) == sorted({code for code, *_ in SCENARIOS})


@pytest.fixture
def gate(scripted_jobs, monkeypatch, capsys):
    """Run kgate's command line over scripted jobs; return (exit, stderr)."""
    _, script = scripted_jobs
    monkeypatch.setattr(render, "has_bench", lambda variant, bench=True: False)
    monkeypatch.setattr(cli, "default_targets", lambda: ["x86_64"])

    def main(argv, jobs=None):
        script.update(jobs or {})
        code = cli.main(argv)
        return code, capsys.readouterr().err
    return main


BAD = {c: "fail" for c in results.gate().control_must_fail}


def _raise(error):
    def boom(*args, **kwargs):
        raise error
    return boom


# (exit, what, argv, scripted jobs {target: [(health, cases)...]} or a
# callable given monkeypatch that sets the scene, what stderr says)
SCENARIOS = [
    (0, "pass", ["run", "x86_64"],
     {"x86_64-fixed": [("complete", cases())], "x86_64-known-bad": [("complete", cases(**BAD))]},
     None),
    (1, "regression", ["run", "x86_64", "--variant", "fixed"],
     {"x86_64": [("complete", cases(ipv4_data_fin="fail"))]}, None),
    (1, "missed", ["run", "x86_64", "--variant", "known-bad"],
     {"x86_64": [("complete", cases())]}, None),
    (1, "the candidate does not build", ["run", "x86_64", "--patches", "p"],
     lambda mp: mp.setattr(runner, "artifacts", _raise(common.CandidateError("cc: error"))),
     "gate FAILED"),
    (2, "unknown target", ["run", "sparc"], {}, "unknown target 'sparc'"),
    (2, "bad flag", ["run", "--retry-infra", "-1"], {}, "wants a whole number"),
    (2, "a second run while one runs", ["run", "x86_64"],
     lambda mp: mp.setattr(runner, "RunLock", lambda: _Held()), "another kgate run"),
    (3, "job incomplete, retried, incomplete again", ["run", "x86_64", "--variant", "fixed"],
     {"x86_64": [("incomplete", []), ("incomplete", [])]}, None),
    (3, "our own build failed", ["run", "x86_64"],
     lambda mp: mp.setattr(runner, "artifacts", _raise(common.InfraError("busybox"))),
     "infrastructure: busybox"),
    (4, "inconclusive", ["run", "x86_64", "--variant", "fixed"],
     {"x86_64": [("complete", cases(ipv4_data_fin="skip"))]}, None),
    (5, "error", ["run", "x86_64", "--variant", "fixed"],
     {"x86_64": [("complete", cases(**{results.gate().run_cases[0]: "fail"}))]}, None),
    (6, "flaky", ["run", "x86_64", "--variant", "fixed", "--repeat", "2"],
     {"x86_64": [("complete", cases()), ("complete", cases(ipv4_data_fin="fail"))]}, None),
    (7, "a bug of kgate's own", ["run", "x86_64", "--variant", "fixed"],
     lambda mp: mp.setattr(runner, "run_job", _raise(ZeroDivisionError("bug"))),
     "internal error: ZeroDivisionError: bug"),
    (130, "interrupted", ["run", "x86_64", "--variant", "fixed"],
     lambda mp: mp.setattr(runner, "run_job", _raise(KeyboardInterrupt())), "interrupted"),
]


class _Held:
    def __enter__(self):
        raise common.KgateError("another kgate run is in progress (pid 1); wait for it")

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("code,what,argv,scene,says", SCENARIOS,
                         ids=[f"{s[0]}-{s[1]}" for s in SCENARIOS])
def test_each_row_of_the_exit_code_table(gate, monkeypatch, capsys, code, what, argv, scene,
                                         says):
    monkeypatch.setattr(kernel.Candidate, "patch_files", lambda self: [])
    jobs = None
    if callable(scene):
        scene(monkeypatch)
    else:
        jobs = scene
    try:
        got, err = gate(argv, jobs)
    except SystemExit as e:  # argparse's own usage errors
        got, err = e.code, capsys.readouterr().err
    assert got == code, err
    # every scripted attempt was used: the retry did happen
    assert not any(jobs.values()) if jobs else True
    if says:
        assert says in err
    if code == results.EXIT_INTERRUPTED:
        # no half run looks whole
        assert not any(os.path.exists(os.path.join(workspace.current().runs, d, "results.json"))
                       for d in os.listdir(workspace.current().runs))


def test_the_lab_path_exits_as_the_local_one(fake_lab, monkeypatch, capsys):
    lab, fake = fake_lab([("Incomplete", []), ("Incomplete", []),
                          ("Complete", cases(ipv4_data_fin="fail"))])
    code = cli.main(["submit", "--base-url", "http://lab/", "-i", "me", "x86_64",
                     "--variant", "fixed"])
    assert code == results.EXIT_CODES[results.INFRA]
    # collect again, one more retry allowed: the third attempt fails a case
    code = cli.main(["collect", "--retry-infra", "2"])
    assert code == results.EXIT_CODES[results.REGRESSION]
