"""The random-sequence test (guest/backlog_fuzz.c) judged natively: on
this machine's kernel (no kgate sysctl) each sequence is played held
and unheld. Its oracles must see what they claim to see: a sequence
perturbed in one play only (the peer's hooks, KGATE_FAULT=gap:N) is a
differential failure, made smaller and printed as lines --replay reads
back; a play without its evidence (no hold, no merge seen) is
inconclusive, never a pass; a bad replay file is a usage error.

Programs: KGATE_NATIVE_FUZZ and KGATE_NATIVE_FUZZ_FAULTS (make check),
else built by test_guest_input's fixture. Root: each test runs in a
network namespace of its own."""
import os
import re

import pytest

from test_evidence import tap_results
from test_guest_input import run

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace per test)")

# Two plain data segments in a row, then a third: merging on, the second
# merges into the first.
PAIR = """seq kdata=0
seg off=8 len=100 flags=PA tos=0 win=64000 urg=0 ack=0 csum=ok opt=-
seg off=108 len=100 flags=PA tos=0 win=64000 urg=0 ack=0 csum=ok opt=-
seg off=208 len=50 flags=A tos=0 win=64000 urg=0 ack=0 csum=ok opt=-
end
"""


def play(prog, args, fault=None, timeout=300):
    env = dict(os.environ)
    env.pop("KGATE_FAULT", None)
    if fault:
        env["KGATE_FAULT"] = fault
    r = run(prog, args, env=env, timeout=timeout)
    return r.returncode, tap_results(r.stdout), r.stdout + r.stderr


@needs_root
def test_random_sequences_agree_on_this_kernel(progs):
    rc, res, out = play(progs["fuzz"], ["--count", "60", "--seed", "7", "--case", "random"])
    assert rc == 0 and res == {"fuzz.ipv4.random": ("pass", ""),
                               "fuzz.ipv6.random": ("pass", ""),
                               "fuzz.ipv4_tap.random": ("pass", "")}, out
    merged = [int(m) for m in re.findall(r"^# merging on: (\d+) segments merged", out, re.M)]
    assert len(merged) == 3 and min(merged) > 0, out


@needs_root
def test_a_burst_beyond_the_limit_is_partly_dropped(progs):
    """The held burst: dropped in part, read intact up to what the
    kernel acknowledges; over tap some of it merges, stolen heads the
    backlog is charged for."""
    rc, res, out = play(progs["fuzz"], ["--case", "burst", "--seed", "3"])
    assert rc == 0 and set(res.values()) == {("pass", "")} and len(res) == 3, out
    tap = out[out.index("RUN           fuzz.ipv4_tap.burst"):]
    m = re.search(r"TCPBacklogCoalesce \+(\d+), TCPBacklogDrop \+(\d+)", tap)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0, out


@needs_root
def test_a_replayed_pair_merges_and_agrees(progs, tmp_path):
    f = tmp_path / "pair.seq"
    f.write_text(PAIR)
    rc, res, out = play(progs["fuzz"], ["--replay", str(f), "--case", "fuzz.ipv4.random"])
    assert rc == 0 and res == {"fuzz.ipv4.random": ("pass", "")}, out
    assert "# merging on: 1 segments merged, in 1 of the judged sequences" in out, out


@needs_root
def test_one_play_perturbed_is_a_differential_failure(progs, tmp_path):
    """Write 4 of the process is the first segment of the first play
    (1 SYN, 2 ACK, 3 prime), merging on: moved one sequence number on,
    it leaves a hole, and that play reads less than the other."""
    f = tmp_path / "pair.seq"
    f.write_text(PAIR)
    rc, res, out = play(progs["fuzz_faults"], ["--replay", str(f), "--case", "fuzz.ipv4.random"],
                        fault="gap:4")
    assert rc == 1 and res["fuzz.ipv4.random"][0] == "fail", out
    assert "FAILED: differential: got 7 merging on, 257 in the other play" in out, out
    # the failing sequence, then the smaller one, as replay lines
    assert out.count("# fuzz: seq kdata=0") == 2 and "made smaller" in out, out
    printed = "\n".join(ln[len("# fuzz: "):] for ln in out.splitlines()
                        if ln.startswith("# fuzz: "))
    again = tmp_path / "again.seq"
    again.write_text(printed + "\n")
    rc2, res2, out2 = play(progs["fuzz"], ["--replay", str(again), "--case", "fuzz.ipv4.random"])
    assert rc2 == 0 and res2["fuzz.ipv4.random"][0] == "pass", out2


@needs_root
@pytest.mark.parametrize("fault,why", [
    # the receiver's fault never arrives: no play held
    ("hold", "inconclusive: 1 of 1 sequences could not be judged"),
    # TCPBacklogCoalesce always reads 0: agreement that proves nothing
    ("coalesce", "inconclusive: no segment was merged in any sequence"),
])
def test_missing_evidence_is_inconclusive(progs, tmp_path, fault, why):
    f = tmp_path / "pair.seq"
    f.write_text(PAIR)
    rc, res, out = play(progs["fuzz_faults"], ["--replay", str(f), "--case", "fuzz.ipv4.random"],
                        fault=fault)
    assert res.get("fuzz.ipv4.random") == ("skip", why) and rc == 4, out


def test_every_regression_file_is_a_replay_file(progs):
    """A broken file in the suite's regression folder is found here, in
    make check, not first as a failing case in a lab's job."""
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "guest",
                     "fuzz-regressions")
    files = sorted(f for f in os.listdir(d) if f.endswith(".seq"))
    assert files
    for name in files:
        r = run(progs["fuzz"], ["--replay", os.path.join(d, name), "--list"])
        assert r.returncode == 0 and r.stderr == "", (name, r.stderr)


@needs_root
def test_regressions_play_every_file_of_the_folder(progs, tmp_path):
    (tmp_path / "a.seq").write_text(PAIR)
    (tmp_path / "b.seq").write_text(PAIR + PAIR)
    (tmp_path / "notes.txt").write_text("not a replay file\n")
    rc, res, out = play(progs["fuzz"], ["--regressions", str(tmp_path), "--case",
                                        "fuzz.ipv4.regressions"])
    assert rc == 0 and res == {"fuzz.ipv4.regressions": ("pass", "")}, out
    assert f"# 3 regression sequences in 2 files of {tmp_path}: 0 failed, 0 not judged" in out


@needs_root
@pytest.mark.parametrize("files", [{}, {"a.txt": PAIR}, None], ids=["empty", "no-seq", "missing"])
def test_no_regression_to_play_is_a_failure(progs, tmp_path, files):
    """A folder without replay files (or none) means the regressions
    were not played: the case fails, it never passes on nothing."""
    d = tmp_path / "reg"
    if files is not None:
        d.mkdir()
        for name, text in files.items():
            (d / name).write_text(text)
    rc, res, out = play(progs["fuzz"], ["--regressions", str(d), "--case", "fuzz.ipv6.regressions"])
    assert rc == 1 and res["fuzz.ipv6.regressions"][0] == "fail", out


@needs_root
def test_a_regression_that_fails_again_is_printed(progs, tmp_path):
    (tmp_path / "pair.seq").write_text(PAIR)
    rc, res, out = play(progs["fuzz_faults"], ["--regressions", str(tmp_path), "--case",
                                               "fuzz.ipv4.regressions"], fault="gap:4")
    assert rc == 1 and res["fuzz.ipv4.regressions"][0] == "fail", out
    assert "pair.seq, sequence 0 FAILED: differential" in out and "# fuzz: seq kdata=0" in out, out


@needs_root
def test_a_regression_not_judged_is_inconclusive(progs, tmp_path):
    (tmp_path / "pair.seq").write_text(PAIR)
    rc, res, out = play(progs["fuzz_faults"], ["--regressions", str(tmp_path), "--case",
                                               "fuzz.ipv4.regressions"], fault="hold")
    assert rc == 4 and res["fuzz.ipv4.regressions"] == (
        "skip", "inconclusive: 1 of 1 regression sequences could not be judged"), out


@needs_root
def test_a_spent_budget_ends_random_early(progs):
    """--budget 1 with more sequences than a second plays: random stops,
    says how far it came, and judges what it played."""
    rc, res, out = play(progs["fuzz"], ["--count", "100000", "--budget", "1", "--case",
                                        "fuzz.ipv4.random"])
    m = re.search(r"^# time budget of 1 s spent after (\d+) of 100000 sequences", out, re.M)
    assert m and rc == 0 and res == {"fuzz.ipv4.random": ("pass", "")}, out
    assert f"# {m.group(1)} sequences from seed 1: {m.group(1)} judged" in out, out


@pytest.mark.parametrize("text,says", [
    ("seq kdata=0\nseg off=8 len=5 flags=Z tos=0 win=1 urg=0 ack=0 csum=ok opt=-\nend\n", ":2:"),
    ("seq kdata=0\nseg off=8 len=0 flags=A tos=0 win=1 urg=0 ack=0 csum=bad opt=-\nend\n", ":2:"),
    ("seq kdata=0\nseg off=8 len=5 flags=A tos=0 win=1 urg=0 ack=0 csum=ok opt=010101\nend\n",
     ":2:"),
    ("seq kdata=0\nseg off=8 len=5 flags=A tos=0 win=1 urg=0 ack=0 csum=ok opt=-\n",
     "without its end line"),
    ("nothing here\n", "no sequence"),
], ids=["flag", "csum-without-bytes", "options-not-words", "no-end", "empty"])
def test_a_bad_replay_file_is_a_usage_error(progs, tmp_path, text, says):
    f = tmp_path / "bad.seq"
    f.write_text(text)
    r = run(progs["fuzz"], ["--replay", str(f), "--list"])
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.splitlines()) == 1 and says in r.stderr, r.stderr


@pytest.mark.parametrize("args,says", [
    (["--count", "0"], "--count wants 1..1000000"),
    (["--budget", "0"], "--budget wants 1..86400"),
    (["--regressions", ""], "--regressions wants a path"),
    (["--max-segs", "17"], "--max-segs wants 2..16"),
    (["--max-len", "75"], "--max-len wants 76..1000"),
    (["--seed", "-1"], "--seed wants 0.."),
    (["--seed"], "--seed wants a value"),
])
def test_bad_numbers_are_usage_errors(progs, args, says):
    r = run(progs["fuzz"], ["--list"] + args)
    assert r.returncode == 2 and r.stdout == "" and says in r.stderr, (r.returncode, r.stderr)
