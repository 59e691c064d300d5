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
    rc, res, out = play(progs["fuzz"], ["--count", "60", "--seed", "7"])
    assert rc == 0 and res == {"fuzz.ipv4.random": ("pass", ""),
                               "fuzz.ipv6.random": ("pass", "")}, out
    merged = [int(m) for m in re.findall(r"^# merging on: (\d+) segments merged", out, re.M)]
    assert len(merged) == 2 and min(merged) > 0, out


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
    (["--count", "0"], "--count wants 1..10000"),
    (["--max-segs", "17"], "--max-segs wants 2..16"),
    (["--max-len", "75"], "--max-len wants 76..1000"),
    (["--seed", "-1"], "--seed wants 0.."),
    (["--seed"], "--seed wants a value"),
])
def test_bad_numbers_are_usage_errors(progs, args, says):
    r = run(progs["fuzz"], ["--list"] + args)
    assert r.returncode == 2 and r.stdout == "" and says in r.stderr, (r.returncode, r.stderr)
