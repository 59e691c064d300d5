"""tools/lab-local.sh: its secrets are never on a command line and are
written 0600, 'down' signals only the processes 'up' started, and the
host files 'up' changes are saved first and put back by 'down'.

Nothing here needs a LAVA server: every run of the script has its state
(KGATE_LAB_DIR) and LAVA's dispatcher-config (KGATE_LAB_DEVCONF) in a
temporary folder, so no real lab or /etc file is touched."""
import os
import re
import signal
import stat
import subprocess
import time

import pytest
import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# KGATE_LAB_LOCAL_SH: another copy of the script to test (e.g. an older one).
SCRIPT = os.environ.get("KGATE_LAB_LOCAL_SH", os.path.join(TOP, "tools", "lab-local.sh"))

SECRET_VAR = re.compile(r"\$\{?[A-Za-z_]*(token|secret|passw|passwd|password)[A-Za-z_0-9]*\}?", re.I)
# An option that takes a secret as its value (--token-file names a file).
SECRET_OPT = re.compile(r"--(token|secret|password|passwd)(?![-\w])", re.I)
COMMANDS = re.compile(r"(^|[\s;|&(`])(lava-server|lava-worker|lavacli|curl|manage|start)(\s|$)")


@pytest.fixture
def lab(tmp_path):
    d = tmp_path / "lab"
    devconf = tmp_path / "dispatcher-config"
    (devconf / "devices").mkdir(parents=True)
    (devconf / "device-types").mkdir()
    env = dict(os.environ, KGATE_LAB_DIR=str(d), KGATE_LAB_DEVCONF=str(devconf))

    def run(*args, stdin=None, check=True):
        p = subprocess.run(["sh", SCRIPT, *args], env=env, input=stdin, text=True,
                           capture_output=True, timeout=120)
        if check:
            assert p.returncode == 0, p.stdout + p.stderr
        return p
    run.dir = d
    run.devconf = devconf
    d.mkdir()
    return run


def logical_lines(text):
    """The script's lines with continuations joined, comments dropped."""
    out, cur = [], ""
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append(cur + line)
        cur = ""
    return out


def test_no_secret_on_a_command_line():
    with open(SCRIPT, encoding="utf-8") as f:
        lines = logical_lines(f.read())
    bad = [ln.strip() for ln in lines if SECRET_OPT.search(ln)]
    assert not bad, f"a secret passed as an option (visible in /proc/PID/cmdline): {bad}"
    bad = [ln.strip() for ln in lines if COMMANDS.search(ln) and SECRET_VAR.search(ln)]
    assert not bad, f"a secret expanded into a command's arguments: {bad}"
    # Nor held in a shell variable, from where it ends up in some argv.
    bad = [ln.strip() for ln in lines if SECRET_VAR.search(ln)]
    assert not bad, f"a secret in a shell variable: {bad}"


def test_secrets_go_through_pipes_into_files():
    with open(SCRIPT, encoding="utf-8") as f:
        text = " ".join(logical_lines(f.read()))
    assert re.search(r"manage tokens add [^|]*\| *write_config", text)
    assert re.search(r"manage workers details [^|]*\|[^|]*\| *write_secret", text)
    assert "--token-file" in text


def test_write_config_is_0600(lab):
    cfg = lab.dir / "config" / "lavacli.yaml"
    # An identity of the user's, in a file an older script left 0644.
    cfg.parent.mkdir()
    cfg.write_text(yaml.safe_dump({"mine": {"uri": "http://lab.example/RPC2"}}))
    cfg.chmod(0o644)
    lab("write-config", stdin="0123456789abcdef\n")
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600
    assert stat.S_IMODE(cfg.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(lab.dir.stat().st_mode) == 0o700
    conf = yaml.safe_load(cfg.read_text())
    assert conf["kgate-local"] == {"uri": "http://127.0.0.1:8010/RPC2", "username": "kgate",
                                   "token": "0123456789abcdef"}
    assert conf["mine"] == {"uri": "http://lab.example/RPC2"}
    assert [p.name for p in cfg.parent.iterdir()] == ["lavacli.yaml"]


def test_write_config_refuses_no_token(lab):
    p = lab("write-config", stdin="", check=False)
    assert p.returncode != 0
    assert not (lab.dir / "config" / "lavacli.yaml").exists()


def ident(pid):
    """What the script records of a process: boot id and start time."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    return boot, int(fields[19])


@pytest.fixture
def sleeper():
    p = subprocess.Popen(["sleep", "1000"])
    yield p
    if p.poll() is None:
        p.kill()
        p.wait()


def alive(p):
    time.sleep(0.2)
    return p.poll() is None


def test_down_leaves_an_unrelated_pid_alone(lab, sleeper):
    """A PID file naming a process 'up' did not start (here, only a PID:
    no start time recorded) must not get it killed."""
    (lab.dir / "serve.pid").write_text(f"{sleeper.pid}\n")
    p = lab("down")
    assert alive(sleeper)
    assert "not the process 'up' started" in p.stdout
    assert not (lab.dir / "serve.pid").exists()


def test_down_leaves_a_reused_pid_alone(lab, sleeper):
    """The PID is right, the start time is not: the PID was reused."""
    boot, start = ident(sleeper.pid)
    for name in ("gunicorn", "worker-1"):
        (lab.dir / f"{name}.pid").write_text(f"{sleeper.pid}\n{boot} {start + 1}\nsleep 1000\n")
    p = lab("down")
    assert alive(sleeper)
    assert p.stdout.count("not the process 'up' started") == 2
    assert not list(lab.dir.glob("*.pid"))


def test_down_stops_its_own_process_with_sigterm(lab, sleeper):
    boot, start = ident(sleeper.pid)
    (lab.dir / "scheduler.pid").write_text(f"{sleeper.pid}\n{boot} {start}\nsleep 1000\n")
    p = lab("down")
    assert sleeper.wait(timeout=10) == -signal.SIGTERM
    assert f"stopped scheduler ({sleeper.pid})" in p.stdout
    assert not (lab.dir / "scheduler.pid").exists()


def test_devconf_saves_the_originals_and_down_puts_them_back(lab):
    dev = lab.devconf / "devices" / "kgate-local-1-qemu.jinja2"
    dev.write_text("the lab admin's own\n")
    dev.chmod(0o640)
    other = lab.devconf / "devices" / "someone-else.jinja2"
    other.write_text("not kgate's\n")
    p = lab("devconf", "2")
    assert f"replacing {dev}" in p.stdout
    assert "extends 'qemu.jinja2'" in dev.read_text()
    made = sorted(str(f.relative_to(lab.devconf)) for f in lab.devconf.rglob("*.jinja2"))
    assert made == ["device-types/kgate-qemu.jinja2",
                    "devices/kgate-local-1-kgate-qemu.jinja2", "devices/kgate-local-1-qemu.jinja2",
                    "devices/kgate-local-2-kgate-qemu.jinja2", "devices/kgate-local-2-qemu.jinja2",
                    "devices/someone-else.jinja2"]
    for f in lab.devconf.rglob("kgate*.jinja2"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o644
    assert stat.S_IMODE((lab.dir / "host-backup").stat().st_mode) == 0o700
    # A second up does not save its own files as the originals.
    p = lab("devconf", "1")
    assert "replacing" not in p.stdout and "creating" not in p.stdout
    # A manifest line naming a file up never writes is not acted upon.
    victim = lab.devconf.parent / "victim"
    victim.write_text("keep\n")
    with open(lab.dir / "host-backup" / "manifest", "a") as f:
        f.write(f"absent {victim}\n")
    p = lab("down")
    assert dev.read_text() == "the lab admin's own\n"
    assert stat.S_IMODE(dev.stat().st_mode) == 0o640
    assert f"restored {dev}" in p.stdout
    assert sorted(str(f.relative_to(lab.devconf)) for f in lab.devconf.rglob("*")) == [
        "device-types", "devices", "devices/kgate-local-1-qemu.jinja2", "devices/someone-else.jinja2"]
    assert victim.read_text() == "keep\n"
    assert f"not touching {victim}" in p.stdout
    # Put back once: a second down changes nothing more.
    dev.write_text("changed since\n")
    lab("down")
    assert dev.read_text() == "changed since\n"


def test_down_without_a_lab_does_nothing(lab):
    p = lab("down")
    assert p.stdout == ""
