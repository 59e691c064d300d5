"""The gate fails closed: no input turns a regression into PASS, no crash
of kgate's own reads as a regression, and nothing it writes can be
turned against its user. One test (or a few) per way it once went
wrong, each driven as a user would: the command line, a results file,
a candidate folder, a scripted or unreachable lab."""
import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
import yaml

from test_tooling import ALL_BAD, cases
from kgate import cli, common, kernel, lab, render, results, workspace
from kgate import run as runner

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
KGATE = [sys.executable, os.path.join(TOP, "tools", "kgate.py")]
CODES = dict(results.EXIT_CODES)


@pytest.fixture
def gate(scripted_jobs, monkeypatch, capsys):
    _, script = scripted_jobs
    monkeypatch.setattr(render, "has_bench", lambda variant, bench=True: False)

    def main(argv, jobs=None):
        script.update(jobs or {})
        code = cli.main(argv)
        return code, capsys.readouterr()
    return main, script


def _job(variant, cs, verdict=None, health="complete"):
    return {"target": "x86_64", "variant": variant, "health": health, "cases": cs,
            "verdict": verdict or results.job_verdict(variant, health, cs)[0], "reason": "",
            "kernel_sha256": "k", "rootfs_sha256": "r"}


@pytest.fixture(autouse=True)
def _crash_folder(tmp_path, use_workspace):
    """An internal error's traceback goes under the test's own folder."""
    use_workspace(tmp_path / "build")


def _results_file(tmp_path, jobs, **extra):
    doc = dict({"schema": results.SCHEMA_VERSION, "run": "r",
                "started": "2026-01-01T00:00:00+00:00", "verdict": "pass",
                "exit_code": 0, "summary": "", "jobs": jobs}, **extra)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    return str(path)


# --- a job named twice ---------------------------------------------------

def test_a_variant_named_twice_runs_once(gate):
    main, script = gate
    code, out = main(["run", "x86_64", "--variant", "fixed", "--variant", "fixed"],
                     {"x86_64": [("complete", cases(ipv4_data_fin="fail"))]})
    # one job, its failure kept: no second job to hide it, no crash
    assert code == CODES[results.REGRESSION], out.err
    assert not script["x86_64"]


def test_the_run_refuses_a_job_twice_before_building(monkeypatch):
    monkeypatch.setattr(runner, "artifacts", lambda *a, **k: pytest.fail("built"))
    for tgts, vs in ((["x86_64"], ["fixed", "fixed"]), (["x86_64", "x86_64"], ["fixed"])):
        with pytest.raises(common.KgateError, match="named twice"):
            runner.run(tgts, vs)


def test_submit_sends_a_variant_named_twice_once(fake_lab, capsys):
    _, fake = fake_lab([("Complete", cases(ipv4_data_fin="fail"))])
    code = cli.main(["submit", "--base-url", "http://lab/", "-i", "me", "x86_64",
                     "--variant", "fixed", "--variant", "fixed"])
    assert code == CODES[results.REGRESSION] and len(fake.submitted) == 1


def _submitted_with_a_second_attempt(fake_lab, **second):
    """A submitted fixed job that fails a case, and in its record a second
    entry (a job that passed) with the fields given; return the run."""
    _, fake = fake_lab([("Complete", cases(ipv4_data_fin="fail")), ("Complete", cases())])
    assert cli.main(["submit", "--base-url", "http://lab/", "-i", "me", "x86_64", "--variant",
                     "fixed", "--no-wait"]) == 0
    run_dir = lab.newest_submitted(workspace.current().runs)
    path = os.path.join(run_dir, lab.SUBMITTED)
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    entry = dict(record["jobs"][0], id=record["jobs"][0]["id"] + 1, **second)
    fake.jobs[str(entry["id"])] = fake.outcomes.pop(0)
    record["jobs"].append(entry)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f)
    return run_dir


def test_collect_refuses_a_record_that_lists_a_job_twice(fake_lab, capsys):
    # the same name twice: once collected as a retry of the first, PASS
    run_dir = _submitted_with_a_second_attempt(fake_lab)
    code = cli.main(["collect"])
    assert code == results.EXIT_USAGE
    assert "twice" in capsys.readouterr().err
    assert not os.path.exists(os.path.join(run_dir, "results.json"))


# --- collect asks the lab that submitted ----------------------------------

def test_make_collect_passes_an_identity_only_when_given():
    env = {k: v for k, v in os.environ.items() if k not in ("LAB", "MAKEFLAGS", "MAKELEVEL")}

    def dry(*args):
        return subprocess.run(["make", "-s", "-n", "-C", TOP, "collect", *args],
                              capture_output=True, text=True, check=True, env=env).stdout
    assert "-i" not in dry().split()
    assert "-i mylab" in dry("LAB=mylab")


def test_collect_asks_the_identity_recorded_at_submit(fake_lab, capsys, monkeypatch):
    _, fake = fake_lab([("Complete", cases())])
    asked = []
    real = lab.lavacli

    def spy(identity, *args, **kw):
        asked.append(identity)
        return real(identity, *args, **kw)
    assert cli.main(["submit", "--base-url", "http://lab/", "-i", "mylab", "x86_64",
                     "--variant", "fixed", "--no-wait"]) == 0
    monkeypatch.setattr(lab, "lavacli", spy)
    assert cli.main(["collect"]) == 0
    assert set(asked) == {"mylab"}


# --- statuses the verdict does not know ------------------------------------

@pytest.mark.parametrize("status", ["unknown", "FAIL", "Pass", "", None, 1])
def test_a_result_that_is_not_pass_skip_or_fail_never_passes(status):
    cs = cases()
    cs[0]["result"] = status
    verdict, why = results.job_verdict("fixed", "complete", cs)
    assert verdict == results.ERROR and "unknown results" in why
    # on the control it is not a catch either
    bad = cases(**ALL_BAD)
    bad[0]["result"] = status
    assert results.job_verdict("known-bad", "complete", bad)[0] == results.INFRA


def test_a_case_reported_twice_is_judged_by_its_worst_report():
    cs = cases()
    fin = next(c for c in cs if c["case"] == "backlog.ipv4.data_fin")
    for first, then in (("fail", "pass"), ("pass", "fail"), ("skip", "pass")):
        twice = [c for c in cs if c is not fin] + [dict(fin, result=first),
                                                   dict(fin, result=then)]
        expect = results.INCONCLUSIVE if "skip" in (first, then) else results.REGRESSION
        assert results.job_verdict("fixed", "complete", twice)[0] == expect


def test_a_case_that_is_not_even_a_record_never_passes():
    assert results.job_verdict("fixed", "complete", cases() + ["junk"])[0] == results.ERROR
    assert results.job_verdict("fixed", "complete", cases() + [{"case": "x"}])[0] == \
        results.ERROR


# --- a results file says what it says; the verdict comes from its cases ----

def test_matrix_judges_the_cases_not_the_stored_verdict(tmp_path, capsys):
    failed = cases(ipv4_data_fin="fail")
    path = _results_file(tmp_path, [_job("fixed", failed, verdict=results.PASS)])
    assert cli.main(["matrix", path]) == CODES[results.REGRESSION]
    assert "Gate: REGRESSION" in capsys.readouterr().out


def test_a_run_without_jobs_is_not_a_pass(tmp_path, capsys):
    assert cli.main(["matrix", _results_file(tmp_path, [])]) == CODES[results.INFRA]


def test_a_stored_verdict_only_makes_a_job_worse(tmp_path, capsys):
    path = _results_file(tmp_path, [_job("fixed", cases(), verdict=results.REGRESSION)])
    assert cli.main(["matrix", path]) == CODES[results.REGRESSION]
    path = _results_file(tmp_path, [_job("fixed", cases(), verdict="splendid")])
    assert cli.main(["matrix", path]) == CODES[results.INFRA]


def test_a_job_listed_twice_is_not_a_pass(tmp_path, capsys):
    ok = _job("fixed", cases())
    path = _results_file(tmp_path, [ok, ok])
    assert cli.main(["matrix", path]) == CODES[results.INFRA]
    assert "listed twice: x86_64/fixed" in capsys.readouterr().out


@pytest.mark.parametrize("doc", [[], {"jobs": "x"}, {"schema": 1, "jobs": [1]},
                                 {"schema": 1, "jobs": [{"target": "x86_64"}]},
                                 {"schema": 1, "jobs": [dict(_job("fixed", []),
                                                             variant="nightly")]}])
def test_a_malformed_results_file_is_a_usage_error(tmp_path, capsys, doc):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    assert cli.main(["matrix", str(path)]) == results.EXIT_USAGE
    assert cli.main(["compare", str(path), str(path)]) == results.EXIT_USAGE
    assert cli.main(["export", "kcidb", str(path), "-o", "-"]) == results.EXIT_USAGE
    assert "Traceback" not in capsys.readouterr().err


def test_compare_and_export_see_the_judged_verdict(tmp_path, capsys):
    good = tmp_path / "good"
    good.mkdir()
    base = _results_file(good, [_job("fixed", cases())])
    bad = tmp_path / "bad"
    bad.mkdir()
    new = _results_file(bad, [_job("fixed", cases(ipv4_data_fin="fail"), verdict="pass")])
    assert cli.main(["compare", base, new]) == 1
    assert "verdict WORSE: pass -> regression" in capsys.readouterr().out
    assert cli.main(["export", "kcidb", new, "-o", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    node = next(t for t in data["tests"] if t["path"] == "kgate")
    assert node["status"] == "FAIL" and node["misc"]["kgate_verdict"] == results.REGRESSION


def test_export_of_a_job_without_cases(tmp_path, capsys):
    path = _results_file(tmp_path, [_job("fixed", [], health="incomplete")])
    assert cli.main(["export", "kcidb", path, "-o", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [t["status"] for t in data["tests"]] == ["MISS"]


# --- candidates that are not one -----------------------------------------

NOOP = ("--- a/net/ipv4/tcp_ipv4.c\n+++ b/net/ipv4/tcp_ipv4.c\n"
        "@@ -1,2 +1,2 @@\n ctx\n-same line\n+same line\n")
REAL = ("--- a/net/ipv4/tcp_ipv4.c\n+++ b/net/ipv4/tcp_ipv4.c\n"
        "@@ -1,2 +1,2 @@\n ctx\n-old line\n+new line\n")


@pytest.mark.parametrize("text", ["", "Subject: [PATCH] words only\n\nno diff\n", NOOP])
def test_a_candidate_that_changes_nothing_is_refused(tmp_path, capsys, monkeypatch, text):
    monkeypatch.setattr(runner, "artifacts", lambda *a, **k: pytest.fail("built"))
    (tmp_path / "0001-x.patch").write_text(text)
    assert cli.main(["run", "x86_64", "--patches", str(tmp_path)]) == results.EXIT_USAGE
    assert "the candidate changes nothing" in capsys.readouterr().err


def test_what_counts_as_a_change(tmp_path):
    p = tmp_path / "p.patch"
    for text, changes in ((REAL, True), (NOOP, False), ("", False),
                          (NOOP + "-- \n2.39.5\n", False),
                          ("diff --git a/x b/x\nnew file mode 100644\n", True),
                          ("diff --git a/x b/x\nold mode 100644\nnew mode 100755\n", True),
                          (NOOP + REAL.split("\n", 2)[2], True)):
        p.write_text(text)
        assert kernel.patch_changes(str(p)) is changes, text


@pytest.mark.parametrize("series,why", [("sub\n", "'series' is not a file"),
                                        ("../x.patch\n", "outside the folder"),
                                        ("/etc/passwd\n", "outside the folder"),
                                        ("a.patch\na.patch\n", "twice")])
def test_a_bad_series_is_a_usage_error(tmp_path, capsys, series, why):
    (tmp_path / "a.patch").write_text(REAL)
    (tmp_path / "x.patch").write_text(REAL)
    d = tmp_path / "cand"
    d.mkdir()
    (d / "a.patch").write_text(REAL)
    if series == "sub\n":
        (d / "series").mkdir()
    else:
        (d / "series").write_text(series)
    assert cli.main(["run", "x86_64", "--patches", str(d)]) == results.EXIT_USAGE
    assert why in capsys.readouterr().err


def test_a_users_patch_in_a_subfolder_that_does_not_apply_is_the_candidates(tmp_path,
                                                                            monkeypatch,
                                                                            use_workspace):
    pristine = tmp_path / "pristine"
    (pristine / "net").mkdir(parents=True)
    (pristine / "net" / "a.c").write_text("a\n")
    use_workspace(tmp_path / "build")
    monkeypatch.setattr(kernel, "pristine", lambda: str(pristine))
    monkeypatch.setattr(kernel, "source_id", lambda: "fake-1")
    monkeypatch.setattr(kernel, "series", lambda kind: [])
    d = tmp_path / "cand" / "sub"
    d.mkdir(parents=True)
    (d / "x.patch").write_text("--- a/net/a.c\n+++ b/net/a.c\n@@ -1 +1 @@\n-zzz\n+b\n")
    (tmp_path / "cand" / "series").write_text("sub/x.patch\n")
    cand = kernel.Candidate(patches=str(tmp_path / "cand"))
    with pytest.raises(common.CandidateError, match="sub/x.patch does not apply"):
        kernel.prepare_tree("candidate", cand)


# --- a crash of kgate's own is never a verdict ------------------------------

def test_a_bug_of_kgate_is_an_internal_error_with_its_traceback_saved(monkeypatch, tmp_path,
                                                                      capsys, use_workspace):
    use_workspace(tmp_path)
    monkeypatch.setattr(cli, "cmd_list", lambda args: {}["boom"])
    assert cli.main(["list"]) == results.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "internal error: KeyError" in err
    saved = err.rsplit("traceback in ", 1)[1].split(")")[0]
    assert saved.startswith(str(tmp_path)) and "cmd_list" not in err
    assert "Traceback" in open(saved, encoding="utf-8").read()


def test_compare_of_a_list_is_a_usage_error(tmp_path, capsys):
    p = tmp_path / "r.json"
    p.write_text("[]")
    assert cli.main(["compare", str(p), str(p)]) == results.EXIT_USAGE


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_serve_on_a_port_that_does_not_exist_is_a_usage_error(port, monkeypatch, capsys):
    monkeypatch.setattr(lab, "stage", lambda *a, **k: pytest.fail("built"))
    assert cli.main(["serve", "--port", port, "x86_64"]) == results.EXIT_USAGE
    assert "--port wants 0-65535" in capsys.readouterr().err


def test_python_without_jinja2_is_a_usage_error():
    # -S: no site-packages, so neither jinja2 nor yaml
    r = subprocess.run(["/usr/bin/python3", "-S", KGATE[1], "list"], capture_output=True,
                       text=True)
    assert r.returncode == results.EXIT_USAGE and "make deps" in r.stderr


# --- the lab: faults are infrastructure, with what the lab said -------------

def test_a_lab_that_answers_an_html_page_is_infrastructure(fake_lab, capsys, monkeypatch):
    _, fake = fake_lab([("Complete", cases())])
    assert cli.main(["submit", "--base-url", "http://lab/", "-i", "me", "x86_64", "--variant",
                     "fixed", "--no-wait"]) == 0

    def html(identity, *args, **kw):
        if args[:2] == ("jobs", "show"):
            return "<html><body><h1>502 Bad Gateway</h1></body></html>\n"
        return fake(identity, *args, **kw)
    monkeypatch.setattr(lab, "lavacli", html)
    assert cli.main(["collect"]) == CODES[results.INFRA]
    assert "502 Bad Gateway" in capsys.readouterr().err


def _lavacli_home(tmp_path, uri):
    conf = tmp_path / "xdg"
    conf.mkdir()
    (conf / "lavacli.yaml").write_text(yaml.safe_dump({"me": {"uri": uri, "timeout": 5}}))
    return {"XDG_CONFIG_HOME": str(conf)}


def _submitted_run(tmp_path):
    runs = tmp_path / "build" / "runs" / "20260101T000000Z"
    runs.mkdir(parents=True)
    (runs / lab.SUBMITTED).write_text(json.dumps({
        "identity": "me", "submitted": "2026-01-01T00:00:00+00:00", "jobs": [
            {"target": "x86_64", "variant": "fixed", "id": 7, "run": 0, "retry": 0,
             "kernel_sha256": "k", "rootfs_sha256": "r"}]}))
    return str(runs)


@pytest.mark.skipif(not os.path.exists("/usr/bin/lavacli"), reason="lavacli not installed")
def test_an_unreachable_lab_is_infrastructure(tmp_path):
    """The real lavacli, pointed at a port where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run_dir = _submitted_run(tmp_path)
    env = dict(os.environ, KGATE_BUILD=str(tmp_path / "build"),
               **_lavacli_home(tmp_path, f"http://127.0.0.1:{port}/RPC2"))
    r = subprocess.run(KGATE + ["collect", run_dir], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == CODES[results.INFRA], r.stderr
    assert "infrastructure" in r.stderr and "Traceback" not in r.stderr
    # and an identity that does not exist is the user's to fix
    r = subprocess.run(KGATE + ["collect", run_dir, "-i", "nobody"], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == results.EXIT_USAGE and "identities add" in r.stderr


def test_sigterm_during_collect_stops_lavacli_and_exits_130(tmp_path):
    """A stand-in lavacli that hangs in 'jobs wait': SIGTERM to kgate
    must end both, with the documented 130."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    pidfile = tmp_path / "lavacli.pid"
    fake = bindir / "lavacli"
    fake.write_text(f"""#!/bin/sh
case "$3 $4" in
"identities show") echo "uri: http://lab/RPC2"; exit 0 ;;
"system version") echo 2023.01; exit 0 ;;
"jobs wait") echo $$ > {pidfile}; exec sleep 600 ;;
esac
exit 1
""")
    fake.chmod(0o755)
    run_dir = _submitted_run(tmp_path)
    env = dict(os.environ, KGATE_BUILD=str(tmp_path / "build"),
               PATH=f"{bindir}:{os.environ['PATH']}")
    p = subprocess.Popen(KGATE + ["collect", run_dir], stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline and p.poll() is None, p.stderr.read()
        time.sleep(0.1)
    child = int(pidfile.read_text())
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=60) == results.EXIT_INTERRUPTED, p.stderr.read()
    deadline = time.monotonic() + 10
    while _alive(child):
        assert time.monotonic() < deadline, f"lavacli (pid {child}) outlived kgate"
        time.sleep(0.1)


def _alive(pid):
    """Whether pid runs (a zombie waiting to be reaped does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# --- what kgate writes --------------------------------------------------

@pytest.fixture
def stored_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    _results_file(run, [_job("fixed", cases())])
    return str(run)


def test_export_writes_through_a_symlink_and_keeps_it(tmp_path, stored_run, capsys):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert cli.main(["export", "kcidb", stored_run, "-o", str(link)]) == 0
    assert link.is_symlink() and json.loads(target.read_text())["version"]


def test_export_writes_into_a_fifo_and_keeps_it(tmp_path, stored_run, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = {}

    def read():
        with open(fifo, encoding="utf-8") as f:
            got["text"] = f.read()
    t = threading.Thread(target=read, daemon=True)
    t.start()
    try:
        assert cli.main(["export", "kcidb", stored_run, "-o", str(fifo)]) == 0
    finally:
        # the reader is never left waiting for a writer (ENXIO: it is
        # gone already)
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        t.join(10)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and json.loads(got["text"])["version"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_export_to_a_full_device_is_an_error_and_leaves_it_alone(stored_run, capsys):
    before = os.stat("/dev/full")
    assert cli.main(["export", "kcidb", stored_run, "-o", "/dev/full"]) == results.EXIT_USAGE
    assert "No space left" in capsys.readouterr().err
    after = os.stat("/dev/full")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_a_planted_symlink_at_the_old_temporary_name_is_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "out.json"
    (tmp_path / f"out.json.tmp.{os.getpid()}").symlink_to(victim)
    common.atomic_write(str(out), "new")
    assert victim.read_text() == "precious" and out.read_text() == "new"
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".out.json")]


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    with pytest.raises((TypeError, AttributeError)):
        common.atomic_write(str(tmp_path / "x"), None)
    assert os.listdir(tmp_path) == []


@pytest.fixture
def served(tmp_path, monkeypatch):
    root = tmp_path / "serve"
    (root / "sha256" / "ab").mkdir(parents=True)
    (root / "sha256" / "ab" / "zImage").write_text("kernel")
    (tmp_path / "secret").write_text("secret")
    (root / "sha256" / "ab" / "leak").symlink_to(tmp_path / "secret")
    monkeypatch.setattr(lab.ServeHandler, "timeout", 1)
    monkeypatch.setattr(lab.ServeHandler, "TIMEOUT", 1)
    monkeypatch.setattr(lab.BoundedServer, "MAX_THREADS", 2)
    httpd = lab.make_server("127.0.0.1", 0, str(root))
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


def test_serve_gives_up_on_a_request_that_trickles_in(served):
    """A byte now and then keeps each read under the timeout; the whole
    request line and headers must still come within it."""
    host, port = served[len("http://"):].split(":")
    s = socket.create_connection((host, int(port)))
    s.settimeout(15)
    start = time.monotonic()
    got = None
    with contextlib.suppress(OSError):
        for ch in b"GET /sha256/ab/zImage HTTP/1.1\r\n\r\n":
            s.send(bytes([ch]))
            time.sleep(0.3)   # under the 1 s read timeout every time
        got = s.recv(100)
    s.close()
    # cut off after the 1 s the whole request had, long before its 11 s
    assert got in (None, b""), got
    assert time.monotonic() - start < 11


def test_serve_answers_a_nul_in_the_path_with_400(served):
    assert _get(served + "/sha256/ab/%00zImage")[0] == 400


def test_serve_serves_files_only_from_its_folder(served):
    assert _get(served + "/sha256/ab/zImage") == (200, b"kernel")
    assert _get(served + "/sha256/ab/")[0] == 404       # no listing
    assert _get(served + "/")[0] == 404
    assert _get(served + "/sha256/ab/leak")[0] == 404   # symlink out of the folder
    assert _get(served + "/../secret")[0] == 404
    assert _get(served + "/sha256/ab/%2e%2e/%2e%2e/%2e%2e/secret")[0] == 404


def test_serve_times_out_idle_connections_and_bounds_its_threads(served):
    host, port = served[len("http://"):].split(":")
    def handlers():
        return sum("process_request_thread" in t.name for t in threading.enumerate())
    idle = [socket.create_connection((host, int(port))) for _ in range(6)]
    time.sleep(0.5)
    assert handlers() == 2
    # the idle ones are closed by the server, then a request gets through
    for s in idle:
        s.settimeout(15)
        assert s.recv(1) == b""
        s.close()
    assert _get(served + "/sha256/ab/zImage")[0] == 200


# --- user strings in lab jobs -------------------------------------------

@pytest.mark.parametrize("flag,value", [("--job-prefix", "x\nnotify: {callbacks: []}\n"),
                                        ("--job-prefix", 'a" b'), ("--tag", "a\nb"),
                                        ("--tag", 'x"'), ("--priority", "medium\nx: 1"),
                                        ("--visibility", "group"),
                                        ("--device-type", "qemu\nnotify: 1")])
def test_user_strings_cannot_reach_the_job_yaml_unescaped(monkeypatch, capsys, flag, value):
    monkeypatch.setattr(lab, "write_lab_jobs", lambda *a, **k: pytest.fail("built"))
    monkeypatch.setattr(lab, "check_identity", lambda i: "2023.01")
    argv = ["submit", "--base-url", "http://lab/", "-i", "me", "x86_64", flag, value]
    assert cli.main(argv) == results.EXIT_USAGE
    assert "not allowed in a LAVA job" in capsys.readouterr().err


def test_allowed_user_strings_render_as_given():
    tgt = common.target("x86_64")
    art = {"url": "http://lab/k", "sha256": "0" * 64}
    text = render.render_job(tgt, "fixed", art, art, job_prefix="nightly #7 (mine): ",
                             tags=["kvm-less", "big.mem"], priority="42", visibility="personal")
    data = yaml.safe_load(text)
    assert data["job_name"].startswith("nightly #7 (mine): x86_64 fixed")
    assert data["tags"] == ["kvm-less", "big.mem"] and data["priority"] == 42
    assert "notify" not in data


# --- a second review's findings ---------------------------------------------

def test_a_listed_retry_never_replaces_an_attempt_that_failed_a_case(fake_lab, capsys):
    _submitted_with_a_second_attempt(fake_lab, retry=1)
    assert cli.main(["collect"]) == CODES[results.REGRESSION]


def test_a_stored_attempt_that_was_judged_and_then_retried_still_counts():
    job = dict(_job("fixed", cases()), attempts=[
        {"verdict": results.REGRESSION, "reason": "failed: x", "log": "a", "run": 1},
        {"verdict": results.PASS, "reason": "", "log": "b", "run": 1}])
    assert results.judge({"jobs": [job]})["exit_code"] == CODES[results.REGRESSION]


def test_a_planned_job_that_never_came_is_not_a_pass(tmp_path, fake_lab, capsys):
    path = _results_file(tmp_path, [_job("fixed", cases())], planned=[
        {"target": "x86_64", "variant": "fixed"}, {"target": "x86_64", "variant": "known-bad"}])
    assert cli.main(["matrix", path]) == CODES[results.INFRA]
    assert "planned but missing: x86_64/known-bad" in capsys.readouterr().out
    # the lab: the second submission failed, the first job passed
    _, fake = fake_lab([("Complete", cases())])
    real = fake.__call__

    def second_fails(identity, *args, **kw):
        if args[:2] == ("jobs", "submit") and fake.submitted:
            raise lab.LabError("lavacli jobs submit failed: 'Internal Server Error'")
        return real(identity, *args, **kw)
    lab.lavacli = second_fails
    assert cli.main(["submit", "--base-url", "http://lab/", "-i", "me", "x86_64",
                     "--no-wait"]) == CODES[results.INFRA]
    lab.lavacli = fake
    assert cli.main(["collect"]) == CODES[results.INFRA]


def test_a_failed_case_in_any_definition_decides():
    for definition in (results.gate().bench_definitions[0], "1_kgate-bench", "other"):
        cs = cases() + [{"definition": definition, "case": "backlog.ipv4.data_fin",
                         "result": "fail"}]
        assert results.job_verdict("fixed", "complete", cs)[0] == results.REGRESSION


@pytest.mark.parametrize("text", [
    '{"schema": 1, "jobs": [], "jobs": []}',
    '{"schema": 1, "jobs": [{"target": "x86_64", "variant": "fixed", "health": "complete", '
    '"verdict": "pass", "cases": [{"case": "backlog.ipv4.data_fin", "result": "fail", '
    '"result": "pass"}]}]}'])
def test_a_results_file_naming_a_key_twice_is_refused(tmp_path, capsys, text):
    path = tmp_path / "results.json"
    path.write_text(text)
    assert cli.main(["matrix", str(path)]) == results.EXIT_USAGE
    assert "given twice" in capsys.readouterr().err


def test_a_lab_answer_naming_a_key_twice_is_infrastructure():
    with pytest.raises(lab.LabError, match="not YAML"):
        lab.parse_results("- {suite: 0_kgate, name: backlog.ipv4.data_fin, result: fail, "
                          "result: pass}\n")
    with pytest.raises(lab.LabError, match="not a JSON object"):
        lab.lab_json('{"health": "Incomplete", "health": "Complete"}', "jobs show")
    with pytest.raises(lab.LabError):
        lab.lab_json("[" * 100000 + "]" * 100000, "jobs show")


def test_a_lab_device_that_is_not_a_name_is_no_worker():
    assert lab.device_worker("me", ["a"], {}) is None
    assert lab.device_worker("me", {"a": 1}, {}) is None


def test_compare_counts_a_new_job_that_fails(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    base = _results_file(tmp_path / "a", [_job("fixed", cases())])
    arm = dict(_job("fixed", cases(ipv4_data_fin="fail")), target="arm64")
    new = _results_file(tmp_path / "b", [_job("fixed", cases()), arm])
    assert cli.main(["compare", base, new]) == 1
    assert "arm64/fixed: new in this run (REGRESSION)" in capsys.readouterr().out


def test_git_headers_count_only_inside_a_diff(tmp_path):
    p = tmp_path / "p.patch"
    for text, changes in (("Subject: x\n\nrename from x\n" + NOOP, False),
                          ("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n b\n+a\n", True),
                          ("diff --git a/x b/y\nsimilarity index 100%\ncopy from x\ncopy to y\n",
                           True)):
        p.write_text(text)
        assert kernel.patch_changes(str(p)) is changes, text


def test_a_benchmark_cut_off_after_a_median_is_its_kernels_error(tmp_path, capsys):
    cs = cases() + [
        {"definition": results.gate().bench_definitions[0], "case": c, "result": "pass"}
        for c in results.gate().bench_cases] + [
        {"definition": results.gate().bench_definitions[0], "case": results.gate().bench_run_cases[0],
         "result": "fail"},
        {"definition": results.gate().bench_definitions[0], "case": "bulk_ratio", "result": "pass",
         "measurement": 1.3, "units": "x"}]
    path = _results_file(tmp_path, [_job("fixed", cs)])
    assert cli.main(["matrix", path]) == CODES[results.ERROR]


@pytest.mark.parametrize("bad", [
    {"cases": ["fail"]}, {"cases": [{"case": "x", "result": "pass", "definition": 5}]},
    {"cases": [{"case": None, "result": "pass"}]}, {"attempts": [{}]}, {"attempts": "xy"},
    {"flaky_cases": []}, {"tail": 5}, {"target": "x86_64\nGate: PASS"},
    {"cases": [{"case": "kernel-log", "result": "fail", "splat": 5}]},
    {"cases": [{"case": "bulk_ratio", "result": "pass", "measurement": "1.3"}]}])
def test_a_malformed_job_is_refused_with_one_line(tmp_path, capsys, bad):
    path = _results_file(tmp_path, [dict(_job("fixed", cases()), **bad)])
    for argv in (["matrix", path], ["compare", path, path], ["export", "kcidb", path, "-o", "-"]):
        assert cli.main(argv) == results.EXIT_USAGE, argv
    assert "internal error" not in capsys.readouterr().err


def test_json_nested_too_deep_is_refused(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text('{"schema": 1, "jobs": ' + "[" * 200000 + "]" * 200000 + "}")
    assert cli.main(["matrix", str(path)]) == results.EXIT_USAGE


def test_a_patch_named_twice_however_spelt_is_refused(tmp_path, capsys):
    d = tmp_path / "cand"
    d.mkdir()
    (d / "a.patch").write_text(REAL)
    (d / "series").write_text("a.patch\n./a.patch\n")
    assert cli.main(["run", "x86_64", "--patches", str(d)]) == results.EXIT_USAGE
    (d / "b.patch").symlink_to(d / "a.patch")
    (d / "series").write_text("a.patch\nb.patch\n")
    assert cli.main(["run", "x86_64", "--patches", str(d)]) == results.EXIT_USAGE
    assert "twice" in capsys.readouterr().err


def test_a_series_linking_out_of_its_folder_is_refused(tmp_path, capsys):
    (tmp_path / "elsewhere.patch").write_text(REAL)
    d = tmp_path / "cand"
    d.mkdir()
    (d / "a.patch").symlink_to(tmp_path / "elsewhere.patch")
    assert cli.main(["run", "x86_64", "--patches", str(d)]) == results.EXIT_USAGE
    assert "links out of it" in capsys.readouterr().err


@pytest.mark.parametrize("argv,says", [
    (["run", "x86_64", "--image", "x86_64=/nonexistent"], "no such file"),
    (["run", "x86_64", "arm64", "--image", "x86_64=" + KGATE[1]], "no --image for arm64"),
    (["run", "-j", "-2", "x86_64"], "wants a whole number"),
    (["run", "-p", "0", "x86_64"], "wants a whole number"),
    (["submit", "--base-url", "http://lab/", "-i", "me", "--job-timeout", "0"],
     "wants a whole number"),
    (["submit", "--base-url", 'http://lab/x"\nnotify: {}', "-i", "me"], "--base-url"),
    (["lab-jobs", "--base-url", "http://lab/ x"], "--base-url")])
def test_bad_input_is_refused_before_anything_is_built(monkeypatch, capsys, argv, says):
    for mod, name in ((runner, "artifacts"), (lab, "write_lab_jobs"), (lab, "stage"),
                      (lab, "check_identity")):
        monkeypatch.setattr(mod, name, lambda *a, **k: pytest.fail("went on"))
    assert cli.main(argv) == results.EXIT_USAGE
    assert says in capsys.readouterr().err


def test_a_closed_standard_output_is_no_internal_error(tmp_path):
    path = _results_file(tmp_path, [_job("fixed", cases())])
    p = subprocess.Popen(KGATE + ["matrix", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, KGATE_BUILD=str(tmp_path / "build")))
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == results.EXIT_USAGE, err
    assert "internal error" not in err and not (tmp_path / "build" / "crash").exists()


def test_export_refuses_another_users_symlink_and_block_devices(tmp_path, stored_run, capsys):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a link owned by another user")
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "out.json"
    link.symlink_to(victim)
    os.lchown(link, 65534, 65534)
    assert cli.main(["export", "kcidb", stored_run, "-o", str(link)]) == results.EXIT_USAGE
    assert victim.read_text() == "precious"
    assert "made by another user" in capsys.readouterr().err
    blk = tmp_path / "blk"
    os.mknod(blk, 0o600 | stat.S_IFBLK, os.makedev(7, 200))
    assert cli.main(["export", "kcidb", stored_run, "-o", str(blk)]) == results.EXIT_USAGE
    assert cli.main(["export", "kcidb", stored_run, "-o", str(tmp_path / "no" / "x.json")]) \
        == results.EXIT_USAGE
    assert not (tmp_path / "no").exists()
