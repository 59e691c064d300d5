"""The guest programs fail closed on what they are given (issue 32).

Every number an option of backlog_bench or backlog_coalesce takes is
range-checked before it is narrowed to its field: overflow (also in a K
or M multiplier), a sign, trailing characters and values past the range
are refused with one line naming the option and the value, exit status
2 (usage), on 64- and 32-bit targets alike; valid values still go
through (--list: parsed, nothing run). Two guards of kselftest's kind
need the peer's test-the-test hooks (KGATE_FAULT, guest/backlog_peer.h) and
root, each test in its own network namespace: a write the device keeps
refusing with EAGAIN ends its case inconclusive after PEER_RETRY_MS
instead of spinning forever, and a held receiver that never returns is
given up on after RELEASE_MS, the case failed, instead of a join that
hangs until the harness kills it.

The programs: KGATE_NATIVE_TEST, KGATE_NATIVE_BENCH and
KGATE_NATIVE_FAULTS when set (make check sets them), else built here by
'kgate.py native' (skipped without gcc or the kernel source, whose
kselftest harness they include)."""
import os
import subprocess
import time

import pytest

from test_evidence import tap_results

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The programs: the 'progs' fixture (conftest.py).


def run(prog, args, env=None, timeout=60):
    return subprocess.run([prog] + args, capture_output=True, text=True, timeout=timeout,
                          env=env, stdin=subprocess.DEVNULL)


def assert_refused(r, option, value):
    """Exit 2, nothing listed or run, one line naming option and value."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "", r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert f"{option} wants " in lines[0] and f"'{value}'" in lines[0], r.stderr


# backlog_bench's own options, then ksft_cli.h's (both programs).
BENCH_BAD = [
    # 17592186044417 MiB is 2^64 + 1 MiB: it used to wrap to 1 MiB
    ("--bulk-bytes", "17592186044417M"),
    # wraps to 1 MiB in a 32-bit long (i386, arm, mips, ppc)
    ("--bulk-bytes", "4097M"),
    ("--bulk-bytes", "18446744073709551617"),
    ("--bulk-bytes", "1025M"),
    ("--bulk-bytes", "0"),
    ("--bulk-bytes", "1G"),
    ("--bulk-bytes", "-1M"),
    ("--bulk-bytes", "1MB"),
    ("--bulk-bytes", ""),
    ("--rcvbuf", "4398046511105K"),
    ("--rcvbuf", "-0"),
    ("--rcvbuf", " 4M"),
    ("--read-size", "65537"),
    ("--read-size", "64Kx"),
    ("--reps", "4294967297"),
    ("--reps", "18446744073709551617"),
    ("--reps", "3x"),
    ("--reps", "-1"),
    ("--reps", "+3"),
    ("--reps", "102"),
    ("--flight", "4294967297"),
    ("--bulk-budget", "4294967297"),
    ("--bulk-budget", "161"),
    ("--drain", "0,4294967297"),
    ("--drain", "10,x"),
    ("--drain", "1,2,3,4,5,6,7,8,9"),
    ("--drain", ","),
]
CLI_BAD = [
    # 2^32 + 1 and 2^32 + 100: (int) made them 1 and 100
    ("--repeat", "4294967297"),
    ("--timeout", "4294967396"),
    ("--repeat", "2x"),
    ("--repeat", "0"),
    ("--timeout", "-100"),
    ("--timeout", "99"),
    ("--timeout", ""),
]


@pytest.mark.parametrize("option,value", BENCH_BAD + CLI_BAD)
def test_bench_refuses_a_bad_number(progs, option, value):
    assert_refused(run(progs["bench"], [option, value, "--list"]), option, value)


@pytest.mark.parametrize("option,value", [("--reps", "4294967297"), ("--bulk-bytes", "17592186044417M"),
                                          ("--timeout", "4294967396")])
def test_bench_refuses_an_inline_bad_number(progs, option, value):
    assert_refused(run(progs["bench"], [f"{option}={value}", "--list"]), option, value)


@pytest.mark.parametrize("option,value", CLI_BAD)
def test_coalesce_refuses_a_bad_number(progs, option, value):
    assert_refused(run(progs["test"], [option, value, "--list"]), option, value)


@pytest.mark.parametrize("args", [
    # the greatest of each
    ["--reps", "101", "--bulk-bytes", "1024M", "--drain", "0,100,1000,100000,1,2,3,4",
     "--rcvbuf", "1048576K", "--read-size", "64K", "--flight", "100000", "--bulk-budget", "160",
     "--repeat", "100000", "--timeout", "600000"],
    # the least
    ["--reps", "1", "--bulk-bytes", "1", "--drain", "0", "--rcvbuf", "0", "--read-size", "1",
     "--flight", "1", "--bulk-budget", "0", "--repeat", "1", "--timeout", "100"],
    # as the guests run it, with the suffixes' other case and short forms
    ["--reps", "11", "--bulk-bytes", "16M", "--drain", "0,100,1000"],
    ["-r3", "-b4m", "-d", "0,10", "-s", "4096k", "--read-size=1k", "-n", "2", "-t", "10000"],
])
def test_bench_takes_valid_numbers(progs, args):
    r = run(progs["bench"], args + ["--list"])
    assert r.returncode == 0 and r.stderr == "", (r.returncode, r.stderr)
    assert r.stdout.split() == ["bench.bulk", "bench.drain"], r.stdout


def test_coalesce_takes_valid_numbers(progs):
    for args in (["--repeat", "100000", "--timeout", "600000"], ["--repeat", "1", "--timeout", "100"]):
        r = run(progs["test"], args + ["--list", "--case", "data_data"])
        assert r.returncode == 0 and r.stderr == "", (args, r.returncode, r.stderr)
        assert "backlog.ipv4.data_data" in r.stdout.split(), r.stdout


@pytest.mark.parametrize("fault", ["write:4294967297", "write:0", "write:x", "nstat:", "eagain:-1",
                                   "hold:1", "nonsense"])
def test_a_bad_fault_is_a_usage_error(progs, fault):
    # write:4294967297 was atoi()'s 1: the handshake's SYN cut short
    r = run(progs["faults"], ["--list"], env=dict(os.environ, KGATE_FAULT=fault))
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.splitlines()) == 1 and f"'{fault}'" in r.stderr, r.stderr


# --- deadlines, with the peer's hooks: root, a network namespace each ----

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace per test)")


def run_case(progs, case, fault):
    start = time.monotonic()
    r = run(progs["faults"], ["--case", case], env=dict(os.environ, KGATE_FAULT=fault), timeout=120)
    out = r.stdout + r.stderr
    assert "terminated by timeout" not in out, out
    return r.returncode, tap_results(r.stdout), out, time.monotonic() - start


@needs_root
def test_a_write_refused_for_ever_is_inconclusive_not_a_hang(progs):
    # Write 4 is the twin pair's A, written while the socket is held:
    # every try says EAGAIN. The peer gives up after PEER_RETRY_MS (5 s).
    rc, res, out, secs = run_case(progs, "backlog.ipv4.data_data", "eagain:4")
    verdict, why = res.get("backlog.ipv4.data_data", ("none", ""))
    assert verdict == "skip" and why.startswith("inconclusive:"), out
    assert "writing to tun" in why and "timed out" in why, out
    assert rc == 4, out
    assert 4.5 < secs < 25, (secs, out)


@needs_root
def test_a_receiver_never_released_fails_the_case_not_a_hang(progs):
    # The fault is never resolved: the receiver stays in recv(). It is
    # given up on after RELEASE_MS (5 s), let go by closing the
    # userfaultfd, and the case fails well before the harness's kill.
    rc, res, out, secs = run_case(progs, "backlog.ipv4.data_data", "release")
    assert res.get("backlog.ipv4.data_data", ("none",))[0] == "fail", out
    assert "the held recv() did not return within 5000 ms of its release" in out, out
    assert rc == 1, out
    assert 4.5 < secs < 25, (secs, out)


@needs_root
def test_the_hooks_change_nothing_else(progs):
    # A hook whose write or fault never comes leaves the case passing.
    rc, res, out, _ = run_case(progs, "backlog.ipv4.data_data", "eagain:1000")
    assert rc == 0 and res == {"backlog.ipv4.data_data": ("pass", "")}, out
