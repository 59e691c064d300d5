"""No pass without evidence: the backlog test, built with the peer's
test-the-test hooks (KGATE_FAULT, guest/backlog_peer.h), must turn every missing
piece of evidence into a skip "inconclusive: ..." or a failure, never a
pass. Runs natively as root (each test in its own network namespace);
KGATE_NATIVE_FAULTS names the binary ('kgate.py native' builds it)."""
import os
import re
import subprocess

import pytest

BIN = os.environ.get("KGATE_NATIVE_FAULTS")
pytestmark = pytest.mark.skipif(not BIN or os.geteuid() != 0,
                                reason="needs root and KGATE_NATIVE_FAULTS (make check sets it)")

LINE = re.compile(r"^(not ok|ok) \d+ (\S+)(?: # SKIP (.*))?$")


def tap_results(stdout):
    """{case: (pass|fail|skip, the skip's reason)} from the harness's
    TAP lines (test_guest_input.py reads them too)."""
    results = {}
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m:
            results[m.group(2)] = ("fail" if m.group(1) == "not ok" else
                                   "skip" if m.group(3) is not None else "pass", m.group(3) or "")
    return results


def run(case, fault):
    env = dict(os.environ, KGATE_FAULT=fault) if fault else dict(os.environ)
    env.pop("KGATE_FAULT", None) if not fault else None
    p = subprocess.run([BIN, "--case", case], env=env, capture_output=True, text=True,
                       timeout=120)
    return p.returncode, tap_results(p.stdout), p.stdout


def test_baseline_passes():
    """Without a fault the same case passes: the faults below decide."""
    rc, res, out = run("backlog.ipv4.data_data", None)
    assert rc == 0 and res == {"backlog.ipv4.data_data": ("pass", "")}, out


@pytest.mark.parametrize("case,fault,why", [
    # the receiver's fault never seen: the socket was not held
    ("backlog.ipv4.data_data", "hold", "never faulted"),
    # a short write of segment A, of segment B (1 SYN, 2 ACK, 3 prime)
    ("backlog.ipv4.data_data", "write:4", "writing to tun"),
    ("backlog.ipv4.data_data", "write:5", "writing to tun"),
    ("backlog.ipv4_ctl.data_data", "write:5", "writing to tun"),
    ("backlog.ipv4.data_rst", "write:5", "writing to tun"),
    # a counter read that failed: before, during, after the hold
    ("backlog.ipv4.data_data", "nstat:1", "counter read failed"),
    ("backlog.ipv4.data_data", "nstat:2", "counter read failed"),
    ("backlog.ipv4.data_data", "nstat:3", "counter read failed"),
    ("backlog.ipv4.data_rst", "nstat:2", "counter read failed"),
    # a required merge not seen
    ("backlog.ipv4.data_data", "coalesce", "plain data pair was not merged"),
    ("backlog.ipv6.window", "coalesce", "plain data pair was not merged"),
    ("backlog.ipv4.data_tos", "coalesce", "plain data pair was not merged"),
    ("backlog.ipv4.flood", "hold", "never faulted"),
    # the fast path not seen where the rule depends on it
    ("backlog.ipv4.data_data", "hphits", "missed the fast path"),
    ("backlog.ipv4.data_fin", "hphits", "missed the fast path"),
    ("backlog.ipv4.data_fin", "coalesce", "plain data pair was not merged"),
])
def test_missing_evidence_is_inconclusive(case, fault, why):
    rc, res, out = run(case, fault)
    assert res.get(case, ("none",))[0] == "skip", out
    assert res[case][1].startswith("inconclusive:") and why in res[case][1], out
    assert rc == 4, out


def test_flood_without_merges_or_drops_fails():
    """1000 segments held: not one merged, not one dropped is impossible
    with a working limit: a failure, not a pass."""
    rc, res, out = run("backlog.ipv4.flood", "coalesce")
    assert res["backlog.ipv4.flood"][0] == "fail" and rc == 1, out


def test_unreadable_bytes_before_the_hold_fail():
    """In-order bytes the kernel never makes readable are its failure:
    the receiver cannot fault on them, and waiting out the deadline as
    "never faulted" would hide it (a kernel that lost where a merged
    pair ended did exactly that). gap:3: the prime, the third device
    write (1 SYN, 2 ACK), one sequence number on, past a hole."""
    rc, res, out = run("backlog.ipv4.data_data", "gap:3")
    assert res["backlog.ipv4.data_data"][0] == "fail" and rc == 1, out
    assert "never became readable" in out, out


def test_setup_write_failure_fails():
    """The handshake's SYN not written whole: the case fails."""
    rc, res, out = run("backlog.ipv4.data_data", "write:1")
    assert res["backlog.ipv4.data_data"][0] == "fail" and rc == 1, out
