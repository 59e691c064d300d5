"""Bad days, end to end: each must end quickly with the right verdict and
exit code, never as a pass. These boot real guests with lava-run (x86_64,
whose kernel and initramfs make check has built by then); they run when
KGATE_E2E=1 (make check sets it) and as root."""
import os
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from kgate import cli, common, render, results, workspace  # noqa: E402
from kgate import run as runner  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("KGATE_E2E") != "1" or os.geteuid() != 0,
                                reason="end to end: KGATE_E2E=1 and root (make check)")
PY = "/usr/bin/python3"
KGATE = os.path.join(common.TOP, "tools", "kgate.py")


def one_job(tmp_path, variant="fixed", **overrides):
    """Render an x86_64 job with overrides, run it with lava-run; return
    (verdict, reason, parsed log, seconds)."""
    tgt = common.target("x86_64")
    arts = runner.artifacts("x86_64", [variant])[variant]
    kernel_art, rootfs_art = dict(arts["kernel"]), dict(arts["rootfs"])
    kernel_art.update(overrides.pop("kernel_art", {}))
    text = render.render_job(tgt, variant, kernel_art, rootfs_art, **overrides)
    render.validate_job(text)
    job = tmp_path / "job.yaml"
    job.write_text(text)
    dev = tmp_path / "device.yaml"
    dev.write_text(render.render_device(tgt))
    parsed, secs = runner.run_job(str(job), str(dev), str(tmp_path), timeout=300)
    verdict, reason = results.job_verdict(variant, parsed["health"], parsed["cases"],
                                          bench=render.has_bench(variant))
    return verdict, reason, parsed, secs


def leftovers(kgate_pid):
    """lava-run or QEMU processes of a kgate process's jobs (job ids are
    its pid and three digits; QEMU runs from the job's tmp folder)."""
    time.sleep(1)
    pat = f"(lava-run --job-id |/dispatcher/tmp/){kgate_pid}[0-9]{{3}}"
    r = subprocess.run(["pgrep", "-af", pat], capture_output=True, text=True)
    return r.stdout.strip()


def test_a_guest_that_panics_is_infrastructure_within_seconds(tmp_path):
    verdict, reason, parsed, secs = one_job(
        tmp_path, kernel_cmdline="console=ttyS0 rdinit=/no/such/init init=/no/such/init")
    assert verdict == results.INFRA, reason
    assert parsed["health"] == "incomplete" and not parsed["cases"]
    assert secs < 60, f"a panic took {secs:.0f}s to end the job"
    assert "panic" in (tmp_path / "lava.log").read_text().lower()


def test_a_corrupt_artifact_is_refused(tmp_path):
    verdict, reason, parsed, secs = one_job(tmp_path, kernel_art={"sha256": "0" * 64})
    assert verdict == results.INFRA and parsed["health"] == "incomplete"
    assert any("sha256" in e.lower() for e in parsed["errors"]), parsed["errors"]
    assert secs < 60


def test_a_missing_artifact_is_refused(tmp_path):
    verdict, reason, parsed, secs = one_job(
        tmp_path, kernel_art={"url": "file:///nonexistent/kgate/image"})
    assert verdict == results.INFRA and parsed["health"] == "incomplete"
    assert parsed["errors"] and secs < 60


def test_a_guest_that_hangs_is_bounded_by_the_boot_timeout(tmp_path):
    # /bin/cat as init: the guest lives, prints no prompt, never answers.
    timeouts = dict(render.DEFAULTS["timeouts"], boot=1)
    verdict, reason, parsed, secs = one_job(
        tmp_path, kernel_cmdline="console=ttyS0 rdinit=/bin/cat", timeouts=timeouts)
    assert verdict == results.INFRA and parsed["health"] == "incomplete"
    assert secs < 150, f"a hung guest held the job {secs:.0f}s"


def test_a_second_run_waits_for_nobody(capsys):
    with runner.RunLock():
        assert cli.main(["run", "--variant", "fixed", "x86_64"]) == 2
    err = capsys.readouterr().err
    assert "another kgate run is in progress" in err and str(os.getpid()) in err


def test_an_interrupted_run_leaves_nothing_that_looks_complete():
    before = os.path.realpath(os.path.join(workspace.current().runs, "latest"))
    existing = set(os.listdir(workspace.current().runs))
    # A shell's background job inherits SIGINT ignored; a terminal's
    # Ctrl-C reaches a process that has it at its default.
    p = subprocess.Popen([PY, KGATE, "run", "--variant", "fixed", "x86_64"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    for line in p.stdout:
        lines.append(line)
        if "[run] start" in line:
            break
    time.sleep(3)
    os.killpg(p.pid, signal.SIGINT)    # what Ctrl-C sends to the terminal's group
    rest, _ = p.communicate(timeout=120)
    assert p.returncode == 130, "".join(lines) + rest
    new = set(os.listdir(workspace.current().runs)) - existing
    assert len(new) == 1, new
    run_dir = os.path.join(workspace.current().runs, new.pop())
    assert not os.path.exists(os.path.join(run_dir, "results.json"))
    assert not os.path.exists(os.path.join(run_dir, "report.html"))
    assert os.path.realpath(os.path.join(workspace.current().runs, "latest")) == before
    assert not leftovers(p.pid)



def test_a_terminated_run_stops_its_guests_and_writes_nothing():
    """SIGTERM to kgate alone (a CI runner's timeout): its lava-run and
    QEMU stop too, and no results are written."""
    existing = set(os.listdir(workspace.current().runs))
    p = subprocess.Popen([PY, KGATE, "run", "--variant", "fixed", "x86_64"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if "[run] start" in line:
            break
    time.sleep(3)
    p.terminate()
    p.communicate(timeout=120)
    assert p.returncode == 130
    run_dir = os.path.join(workspace.current().runs, (set(os.listdir(workspace.current().runs)) - existing).pop())
    assert not os.path.exists(os.path.join(run_dir, "results.json"))
    assert not leftovers(p.pid)
