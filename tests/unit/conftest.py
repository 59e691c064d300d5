"""Fixtures shared by the tooling's tests: lava-run and lavacli
replaced by scripts, everything between them and the verdict real."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tools"))

from kgate import render  # noqa: E402


@pytest.fixture
def use_workspace(monkeypatch):
    """use_workspace(build, jobs=None, ...): kgate's paths under build
    (jobs: build/jobs) for this test, as cli.main would install them."""
    from kgate import workspace

    def use(build, jobs=None, **kw):
        ws = workspace.Workspace(build=str(build), jobs=str(jobs or os.path.join(str(build), "jobs")),
                                 **kw)
        monkeypatch.setattr(workspace, "_current", ws)
        return ws
    return use


@pytest.fixture
def scripted_jobs(tmp_path, monkeypatch, use_workspace):
    """runner.run with lava-run replaced: each job's attempts come from a
    list of (health, cases) the test gives per target, or per
    <target>-<variant> (jobs may run two at a time)."""
    from kgate import run as runner
    use_workspace(tmp_path)
    monkeypatch.setattr(runner, "check_runnable", lambda: None)
    art = {"kernel": {"sha256": "k"}, "rootfs": {"sha256": "r"}}
    monkeypatch.setattr(runner, "artifacts", lambda t, vs, jobs=None, cand=None: {v: art for v in vs})
    job = tmp_path / "job.yaml"
    job.write_text("job\n")
    monkeypatch.setattr(render, "write_local", lambda t, a, bench=True, **kw: {v: str(job) for v in a})
    script = {}

    def run_job(job_path, dev, outdir, timeout):
        job = os.path.basename(outdir).split(".")[0]      # <target>-<variant>
        health, cs = script[job if job in script else job.split("-")[0]].pop(0)
        return {"health": health, "cases": cs, "errors": [], "timing": {}, "tail": []}, 1.0
    monkeypatch.setattr(runner, "run_job", run_job)
    return runner, script


class FakeLab:
    """lavacli, scripted: each submitted job ends as the next of
    `outcomes` says: (LAVA health, cases); health Unknown is a job still
    running when collect stops waiting."""

    def __init__(self, outcomes):
        self.outcomes = list(outcomes)
        self.jobs = {}
        self.submitted = []

    def __call__(self, identity, *args, timeout=120):
        if args[:2] == ("identities", "show"):
            return f"uri: http://lab/RPC2\nusername: {identity}\n"
        if args[:2] == ("system", "version"):
            return "2023.01\n"
        if args[:2] == ("jobs", "submit"):
            job_id = 100 + len(self.submitted)
            self.submitted.append(args[2])
            self.jobs[str(job_id)] = self.outcomes.pop(0)
            return f"{job_id}\n"
        if args[:2] == ("jobs", "wait"):
            return ""
        if args[:2] == ("devices", "show"):
            # device qemu-<n> is worker-<n>'s
            return json.dumps({"hostname": args[2], "worker": "worker-" + args[2].split("-")[-1]})
        health, cs = self.jobs[args[1] if args[0] == "results" else args[2]]
        if args[:2] == ("jobs", "show"):
            state = "Running" if health == "Unknown" else "Finished"
            # jobs alternate between two devices, all at the same time
            return json.dumps({"state": state, "health": health, "device": f"qemu-{int(args[2]) % 2}",
                               "start_time": "20261206T10:00:00", "end_time": "20261206T10:00:30"})
        if args[0] == "results":
            return yaml.safe_dump([{"suite": "0_kgate", "name": c["case"], "result": c["result"]}
                                   for c in cs])
        if args[:2] == ("jobs", "logs"):
            return ""
        raise AssertionError(args)


@pytest.fixture
def fake_lab(tmp_path, monkeypatch, use_workspace):
    from kgate import lab
    use_workspace(tmp_path)
    monkeypatch.setattr(lab, "need_tools", lambda *a: None)
    # these jobs run the test only (the benchmark's verdict has its own tests)
    monkeypatch.setattr(render, "has_bench", lambda variant, bench=True: False)
    job = tmp_path / "x86_64-fixed.yaml"
    job.write_text("job\n")
    monkeypatch.setattr(lab, "write_lab_jobs", lambda names, vs, url, jobs=None, **o: [
        {"target": n, "variant": v, "file": str(job), "kernel_sha256": "k", "rootfs_sha256": "r"}
        for n in names for v in vs])

    def use(outcomes):
        fake = FakeLab(outcomes)
        monkeypatch.setattr(lab, "lavacli", fake)
        return lab, fake
    return use


# --- the guest programs built for this machine (test_guest_input, test_fuzz)

ENV = {"test": "KGATE_NATIVE_TEST", "bench": "KGATE_NATIVE_BENCH",
       "faults": "KGATE_NATIVE_FAULTS", "fuzz": "KGATE_NATIVE_FUZZ",
       "fuzz_faults": "KGATE_NATIVE_FUZZ_FAULTS"}
NATIVE = {"test": "backlog_coalesce", "bench": "backlog_bench",
          "faults": "backlog_coalesce_faults", "fuzz": "backlog_fuzz",
          "fuzz_faults": "backlog_fuzz_faults"}


@pytest.fixture(scope="session")
def progs(tmp_path_factory):
    given = {k: os.environ.get(v) for k, v in ENV.items()}
    if all(given.values()):
        return given
    if os.environ.get("KGATE_SKIP_NATIVE"):
        pytest.skip("KGATE_SKIP_NATIVE: no native build of the guest programs (make test)")
    if not shutil.which("gcc"):
        pytest.skip("no gcc: the guest programs cannot be built natively")
    out = tmp_path_factory.mktemp("native")
    r = subprocess.run([sys.executable, os.path.join(TOP, "tools", "kgate.py"), "native", str(out)],
                       cwd=TOP, capture_output=True, text=True, timeout=900)
    if r.returncode:
        if "linux-source" in r.stdout + r.stderr and "not found" in r.stdout + r.stderr:
            pytest.skip("no kernel source for the kselftest harness: " + r.stderr.strip())
        pytest.fail(f"kgate.py native failed:\n{r.stdout}{r.stderr}")
    return {k: str(out / name) for k, name in NATIVE.items()}
