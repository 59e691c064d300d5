"""The selftest in upstream form: kgate.py selftest-patch (run with
/usr/bin/python3 -m pytest). The build and run in a patched kernel tree
is kgate.py selftest-check."""
import os
import re
import shutil
import subprocess
import sys

import pytest

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(TOP, "tools"))

from kgate import common, kernel, selftest, suite  # noqa: E402

NET = "tools/testing/selftests/net"
NEW = {f"{NET}/{n}" for n in ("backlog_coalesce.c", "backlog_peer.c", "backlog_peer.h",
                              "backlog_pkt.c", "backlog_pkt.h")}
CHANGED = {f"{NET}/Makefile", f"{NET}/config"}


@pytest.fixture(scope="module")
def source():
    try:
        return kernel.pristine()
    except common.KgateError as e:
        pytest.skip(f"no kernel tree: {e}")


def generate(out):
    subprocess.run([sys.executable, os.path.join(TOP, "tools", "kgate.py"), "selftest-patch",
                    "-o", str(out)], check=True, capture_output=True)
    with open(out, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def patch_bytes(source, tmp_path_factory):
    return generate(tmp_path_factory.mktemp("selftest") / selftest.PATCH_NAME)


def message(text):
    """The commit message: after the headers, before the '---'."""
    head, sep, _ = text.partition("\n---\n")
    assert sep, "no '---' after the commit message"
    return head.split("\n\n", 1)[1]


def test_patch_is_reproducible(patch_bytes, tmp_path):
    assert generate(tmp_path / "again.patch") == patch_bytes


def test_patch_names_only_the_expected_paths(patch_bytes):
    text = patch_bytes.decode()
    diffs = re.findall(r"^diff --git a/(\S+) b/(\S+)$", text, re.M)
    assert all(a == b for a, b in diffs)
    assert {a for a, _ in diffs} == NEW | CHANGED
    assert len(diffs) == len(NEW | CHANGED)
    created = re.findall(r"^diff --git a/(\S+) .*\nnew file mode 100644$", text, re.M)
    assert set(created) == NEW
    assert "deleted file mode" not in text and "rename from" not in text
    # kgate's command line stays behind.
    assert "ksft_cli" not in text and "backlog_coalesce_main" not in text


def test_patch_commit_message(patch_bytes):
    text = patch_bytes.decode()
    assert text.startswith("From ")
    assert "\nSubject: [PATCH] selftests: net: add tcp backlog coalescing test\n" in text
    name, mail = selftest.identity()
    msg = message(text)
    assert re.search(rf"^Signed-off-by: {re.escape(name)} <{re.escape(mail)}>$", msg, re.M)
    assert re.search(r'commit ca2fe2956ace \("tcp: add sanity tests\s+in tcp_add_backlog\(\)"\)',
                     msg)
    for word in ("userfaultfd", "net.ipv4.tcp_backlog_coalesce", "SKIP"):
        assert word in msg
    assert all(len(line) <= 75 for line in msg.splitlines() if not line.startswith("Signed-off"))


def test_patch_build_rules_and_config(patch_bytes):
    text = patch_bytes.decode()
    mk = text.split(f"diff --git a/{NET}/Makefile", 1)[1].split("\ndiff --git", 1)[0]
    added = [ln[1:] for ln in mk.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert added == ["TEST_GEN_PROGS += backlog_coalesce",
                     "$(OUTPUT)/backlog_coalesce: backlog_peer.c backlog_pkt.c",
                     "$(OUTPUT)/backlog_coalesce: LDLIBS += -lpthread"]
    cfg = text.split(f"diff --git a/{NET}/config", 1)[1]
    added = {ln[1:] for ln in cfg.splitlines() if ln.startswith("+") and not ln.startswith("+++")}
    assert added == {"CONFIG_TUN=y", "CONFIG_USERFAULTFD=y"}  # NET_NS, IPV6: already there
    # The helpers are included by their upstream names.
    assert '+#include "backlog_peer.h"' in text and '+#include "backlog_pkt.h"' in text
    assert not re.search(r'^\+#include "(peer|pkt)\.h"', text, re.M)


def test_patch_applies_to_the_tree(patch_bytes, source, tmp_path):
    path = tmp_path / "p.patch"
    path.write_bytes(patch_bytes)
    out = subprocess.run(["patch", "-p1", "-F0", "--dry-run", "-d", source, "-i", str(path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert not re.search(r"offset|fuzz", out.stdout, re.I), out.stdout


def shipped_copy(tmp_path, monkeypatch):
    """A copy of the shipped guest/ files that selftest reads instead."""
    guest = tmp_path / "guest"
    guest.mkdir()
    for name in selftest.SHIPPED:
        shutil.copy(os.path.join(TOP, "guest", name), guest / name)
    monkeypatch.setattr(selftest, "GUEST", str(guest))
    return guest


def test_kgate_only_include_is_refused(tmp_path, monkeypatch):
    tests = shipped_copy(tmp_path, monkeypatch)
    src = (tests / "backlog_coalesce.c").read_text()
    src = src.replace('#include "backlog_pkt.h"', '#include "backlog_pkt.h"\n#include "ksft_cli.h"')
    (tests / "backlog_coalesce.c").write_text(src)
    with pytest.raises(common.KgateError, match="ksft_cli.h"):
        selftest.shipped_files()


def test_patch_carries_no_kgate_names_or_fault_hooks(patch_bytes):
    text = patch_bytes.decode()
    added = "\n".join(ln for ln in text.splitlines() if ln.startswith("+"))
    assert "__wrap_" not in added and "KGATE" not in added
    assert not re.search(r"kgate", added, re.I)
    for name in suite.load().test.faults:
        assert name not in text


def test_shipped_files_are_plain_copies():
    """The patch copies guest/ as it is: no block is cut out by regex."""
    for name, text in selftest.shipped_files().items():
        with open(os.path.join(TOP, "guest", name), encoding="utf-8") as f:
            assert text == f.read(), name


def test_kgate_name_in_a_shipped_file_is_refused(tmp_path, monkeypatch):
    tests = shipped_copy(tmp_path, monkeypatch)
    src = (tests / "backlog_peer.c").read_text()
    # A fault hook written into the shipped peer would ship.
    (tests / "backlog_peer.c").write_text(src + "\n#ifdef KGATE_FAULTS\nint hook;\n#endif\n")
    with pytest.raises(common.KgateError, match="kgate's own name"):
        selftest.shipped_files()
