"""kgate bisect: the search, the ends, skips, verification and the
report, with the steps' verdicts scripted (no kernel is built here; the
README's demo runs the real thing)."""
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from kgate import bisect, results  # noqa: E402

G, B, S = bisect.GOOD, bisect.BAD, bisect.SKIP


def probe(statuses):
    tested = []

    def test(k):
        tested.append(k)
        return statuses[k]
    return test, tested


@pytest.mark.parametrize("statuses,culprit", [
    ([G, B], 1),
    ([G, G, G, G, B], 4),
    ([G, B, B, B, B], 1),
    ([G, G, G, B, B, B, B, B, B], 3),
])
def test_search_names_the_first_bad_step(statuses, culprit):
    test, tested = probe(statuses)
    good, bad = bisect.search(len(statuses) - 1, test)
    assert (good, bad) == (culprit - 1, culprit)
    assert len(tested) <= (len(statuses) - 1).bit_length()


def test_search_steps_around_a_skipped_step():
    # step 2 does not build: 1 good, 3 bad, so the culprit is 2 or 3
    test, tested = probe([G, G, S, B, B])
    assert bisect.search(4, test) == (1, 3)
    assert 2 in tested
    # step 3 skipped, 2 good, 4 bad: one of 3..4
    test, _ = probe([G, G, G, S, B])
    assert bisect.search(4, test) == (2, 4)


def _patch(folder, name, subject, author="A Developer <dev@example.org>"):
    path = folder / name
    path.write_text(f"From 1234 Mon Sep 17 00:00:00 2001\nFrom: {author}\n"
                    f"Date: Fri, 4 Dec 2026 19:00:00 +0000\nSubject: [PATCH] {subject}\n\n"
                    f"Why.\n---\n--- a/net/{name}.c\n+++ b/net/{name}.c\n@@ -1 +1 @@\n"
                    f"-old\n+{subject}\n")
    return path


class Scripted(bisect.Runner):
    """Runner whose steps come from a script: k -> statuses of its attempts."""

    def __init__(self, patches, script, failed=None):
        super().__init__(patches, ["x86_64"], "/nonexistent")
        self.script = {k: list(v) for k, v in script.items()}
        self.failed_at = failed or {}

    def attempt(self, k, why):
        st = self.script[k].pop(0) if len(self.script[k]) > 1 else self.script[k][0]
        verdict = {G: results.PASS, B: results.REGRESSION, S: results.INFRA}[st]
        step = {"k": k, "attempt": sum(s["k"] == k for s in self.steps) + 1, "why": why,
                "patch": None if k == 0 else os.path.basename(self.patches[k - 1]),
                "verdict": verdict, "status": st, "reason": "scripted", "seconds": 1.0,
                "run": None, "failed": self.failed_at.get(k, [])}
        self.steps.append(step)
        self.first.setdefault(k, step)
        return step


@pytest.fixture
def series(tmp_path, monkeypatch, use_workspace):
    folder = tmp_path / "series"
    folder.mkdir()
    names = []
    for i, subject in enumerate(["tcp: tidy a comment", "tcp: rename a local",
                                 "tcp: merge RST segments in the backlog", "tcp: add a counter"], 1):
        names.append(_patch(folder, f"{i:04d}-p{i}.patch", subject).name)
    (folder / "series").write_text("".join(f"{n}\n" for n in names))
    use_workspace(tmp_path / "build")
    return folder


def run(folder, script, failed=None):
    patches = bisect.series_of(str(folder))
    steps = Scripted(patches, script, failed)
    text, code, out = bisect.bisect(str(folder), ["x86_64"], step_runner=steps)
    with open(os.path.join(out, "bisect.json")) as f:
        doc = json.load(f)
    return text, code, doc


def test_a_verified_culprit_is_named_with_its_subject_author_and_cases(series):
    text, code, doc = run(series, {0: [G], 1: [G], 2: [G], 3: [B], 4: [B]},
                          failed={3: ["x86_64:backlog.ipv4.data_rst"],
                                  4: ["x86_64:backlog.ipv4.data_rst"]})
    assert code == 0 and doc["verified"]
    c = doc["culprit"]
    assert c["index"] == 3 and c["subject"] == "tcp: merge RST segments in the backlog"
    assert c["author"] == "A Developer <dev@example.org>"
    assert c["turned"] == ["x86_64:backlog.ipv4.data_rst"]
    assert "First failing patch (3/4)" in text and "Cases that turned" in text
    # ends first, then halving, then 2 + 2 verification runs
    assert [s["k"] for s in doc["steps"]][:2] == [0, 4]
    assert sum(s["why"].startswith("verify") for s in doc["steps"]) == 4


@pytest.mark.parametrize("script,why", [
    ({0: [B], 4: [B]}, "the fixed base does not pass"),
    ({0: [G], 4: [G]}, "the whole series does not fail"),
    ({0: [G], 1: [G], 2: [S], 3: [S], 4: [B]}, "every step between was skipped"),
    # the culprit passes when run again: flaky, not a culprit
    ({0: [G], 1: [G], 2: [G], 3: [B, G, B], 4: [B]}, "unreliable"),
])
def test_no_culprit_is_named_when_the_evidence_does_not_hold(series, script, why):
    text, code, doc = run(series, script)
    assert code == 1 and why in doc["why"] and why in text
    assert not doc["verified"]


def test_each_step_stages_exactly_its_patches(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    ps = [str(_patch(folder, f"x{i}.patch", f"p{i}")) for i in range(3)]
    step = bisect.stage(ps, 2, str(tmp_path / "out"))
    assert open(os.path.join(step, "series")).read() == "0001-x0.patch\n0002-x1.patch\n"
    assert sorted(os.listdir(step)) == ["0001-x0.patch", "0002-x1.patch", "series"]


# --- bisect --source: git bisect run over the commits of a git tree ------

TESTS = os.path.dirname(os.path.abspath(__file__))
STATUS_OF_STATE = {"good": results.PASS, "bad": results.REGRESSION, "skip": "no kernel"}


class StateSteps(bisect.SourceSteps):
    """Judges a commit by its file 'state' (good, bad or skip): the real
    checkout and step records, a scripted verdict."""

    def judge_checkout(self):
        with open(os.path.join(self.tree, "state")) as f:
            return None, None, STATUS_OF_STATE[f.readline().strip()], "scripted"


def state_step(clone, out_dir):
    """What the test's 'git bisect run' runs (in its own process)."""
    st = StateSteps(clone, ["x86_64"], out_dir).attempt("HEAD", "git bisect run")
    return bisect.EXIT_FOR[st["status"]]


STEP_CMD = [sys.executable, "-c",
            f"import sys; sys.path[:0] = [{TESTS!r}, {os.path.join(TESTS, '..', 'tools')!r}]; "
            "import test_bisect; sys.exit(test_bisect.state_step(*sys.argv[1:]))"]


def _git(cwd, *args):
    return subprocess.run(["git", "-C", str(cwd)] + list(args), check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch, use_workspace):
    """A git tree whose commits say what they are: c0 good ... c8."""
    use_workspace(tmp_path / "build")
    tree = tmp_path / "tree"
    tree.mkdir()
    _git(tree, "init", "-q")
    _git(tree, "config", "user.email", "dev@example.org")
    _git(tree, "config", "user.name", "A Developer")

    def commits(states):
        shas = []
        for i, state in enumerate(states):
            (tree / "state").write_text(f"{state}\ncommit {i}\n")
            _git(tree, "add", "state")
            _git(tree, "commit", "-q", "-m", f"c{i}: {state}")
            shas.append(_git(tree, "rev-parse", "HEAD"))
        return shas
    return tree, commits


def source_run(tree, good, bad):
    text, code, out = bisect.bisect_source(str(tree), good, bad, ["x86_64"],
                                           steps_class=StateSteps,
                                           step_cmd=STEP_CMD + ["{clone}", "{out}"])
    with open(os.path.join(out, "bisect.json")) as f:
        return text, code, json.load(f), out


def test_git_bisect_names_the_first_bad_commit_and_verifies_it(repo):
    tree, commits = repo
    shas = commits(["good", "good", "good", "skip", "good", "bad", "bad", "bad"])
    head = _git(tree, "rev-parse", "HEAD")
    text, code, doc, out = source_run(tree, shas[0], "HEAD")
    assert code == 0 and doc["verified"], text
    # c3, git's first pick, does not build: skipped, c5 still named
    assert doc["culprit"]["commit"] == shas[5]
    assert doc["culprit"]["subject"] == "c5: bad"
    assert doc["culprit"]["author"] == "A Developer <dev@example.org>"
    assert f"First failing commit: {shas[5]}" in text
    whys = [s["why"] for s in doc["steps"]]
    assert whys[:2] == ["the good end must pass", "the bad end must fail"]
    assert "git bisect run" in whys and whys.count("verify: the culprit fails again") == 2
    assert [s["commit"] for s in doc["steps"] if s["status"] == bisect.SKIP] == [shas[3]]
    assert "Skipped commits (not judged): " + shas[3][:12] in text
    # the user's tree: same HEAD, clean, never bisected; the clone is gone
    assert _git(tree, "rev-parse", "HEAD") == head
    assert _git(tree, "status", "--porcelain") == ""
    assert _git(tree, "for-each-ref", "refs/bisect") == ""
    assert not os.path.exists(os.path.join(bisect.out_root(), "clone"))


@pytest.mark.parametrize("states,why", [
    (["bad", "bad"], "does not pass"),
    (["good", "good"], "does not fail"),
    (["good", "skip", "bad"], "git bisect named no single commit"),
])
def test_git_bisect_names_nothing_when_the_evidence_does_not_hold(repo, states, why):
    tree, commits = repo
    shas = commits(states)
    text, code, doc, _ = source_run(tree, shas[0], shas[-1])
    assert code == 1 and why in doc["why"], text


def test_git_bisect_usage_errors(repo):
    tree, commits = repo
    shas = commits(["good", "bad"])
    for good, bad, says in ((shas[1], shas[0], "must be an ancestor"),
                            ("nope", shas[1], "--good nope: not a commit")):
        with pytest.raises(bisect.KgateError, match=says):
            source_run(tree, good, bad)


def test_a_step_that_stops_git_bisect_is_reported_as_such(repo):
    tree, commits = repo
    shas = commits(["good", "good", "good", "bad"])
    text, code, doc = bisect.bisect_source(
        str(tree), shas[0], shas[-1], ["x86_64"], steps_class=StateSteps,
        step_cmd=[sys.executable, "-c", f"import sys; sys.exit({bisect.EXIT_ABORT})"])[:2] + (None,)
    assert code == 1 and "git bisect run stopped" in text, text


def test_the_step_command_line_parses(monkeypatch):
    from kgate import cli
    seen = {}

    def step_main(tree, out, targets, parallel=2, jobs=None):
        seen.update(tree=tree, out=out, targets=targets, parallel=parallel, jobs=jobs)
        raise RuntimeError("boom")
    monkeypatch.setattr(bisect, "step_main", step_main)
    cmd = bisect.step_command("/c", "/o", ["x86_64", "mips"], 2, 3)
    assert cmd[:2] == [sys.executable, bisect.KGATE]
    # any failure of the step stops git, never marks the commit bad
    assert cli.main(cmd[2:]) == bisect.EXIT_ABORT
    assert seen == {"tree": "/c", "out": "/o", "targets": ["x86_64", "mips"], "parallel": 2,
                    "jobs": 3}
