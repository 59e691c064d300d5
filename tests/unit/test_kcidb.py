"""The KCIDB export (kgate.py export kcidb): a stored run exported and
compared with its golden copy, validated against KCIDB's schema, and
the schema shown to reject what KCIDB would."""
import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

from kgate import cli, common, kcidb, kernel, results  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "kcidb")
# A real run of x86_64 and mips, fixed and known-bad, its cases cut to a
# few of each program (every figure and failure kept), with its patches.
RUN = os.path.join(DATA, "run")
GOLDEN = os.path.join(DATA, "kcidb.json")
BASE = "https://ci.example.org/kgate/run/"


def stored_run():
    return results.load(os.path.join(RUN, "results.json"))


def export(doc=None, **kw):
    return kcidb.validate(kcidb.export(doc or stored_run(), RUN, **dict({"base_url": BASE}, **kw)))


def by_path(data, build_suffix, path):
    return next(t for t in data["tests"] if t["path"] == path and
                t["build_id"].endswith(build_suffix))


def test_the_stored_run_exports_as_its_golden_copy():
    """A change to the export is a reviewed diff of tests/data/kcidb/
    kcidb.json (write it again with: kgate.py export kcidb
    tests/data/kcidb/run --with-control --base-url <BASE above> -o
    tests/data/kcidb/kcidb.json)."""
    with open(GOLDEN, encoding="utf-8") as f:
        assert export(with_control=True) == json.load(f)


def test_the_stored_run_is_a_whole_one():
    """The fixture has what a run records now, so the golden copy covers
    every field the export fills."""
    doc = stored_run()
    assert set(doc["trees"]) == {"fixed", "known-bad"}
    for j in doc["jobs"]:
        for key in ("kernel_build", "kernel_config", "guest", "started"):
            assert j.get(key), (j["target"], j["variant"], key)
    data = export(with_control=True)
    for c in data["checkouts"]:
        assert c["patchset_files"] and len(c["patchset_hash"]) == 64
    for b in data["builds"]:
        assert b["compiler"] and b["command"] and b["config_url"].startswith(BASE)
        assert b["config_name"] == f"tinyconfig+base+{b['misc']['kgate_target']}"


def test_every_job_case_and_figure_is_there():
    doc = stored_run()
    data = export(with_control=True)
    assert data["version"] == {"major": 5, "minor": 3}
    assert len(data["builds"]) == len(doc["jobs"])
    assert {b["checkout_id"] for b in data["builds"]} == {c["id"] for c in data["checkouts"]}
    assert len(data["tests"]) == sum(len(j["cases"]) + 1 for j in doc["jobs"])
    assert len({t["id"] for t in data["tests"]}) == len(data["tests"])
    builds = {b["id"] for b in data["builds"]}
    assert all(t["build_id"] in builds and t["log_url"].startswith(BASE) for t in data["tests"])
    figures = [t for t in data["tests"] if "number" in t]
    measured = [c for j in doc["jobs"] for c in j["cases"] if c.get("measurement") is not None]
    assert len(figures) == len(measured) > 0
    assert {t["status"] for t in figures} == {"DONE"}
    assert {t["path"].split(".")[1] for t in figures} == {"bench"}


def test_case_paths_keep_their_dotted_parts():
    assert kcidb.case_path("0_kgate-backlog", "backlog.ipv4.data_fin") == \
        "kgate.backlog.ipv4.data_fin"
    assert kcidb.case_path("0_kgate-backlog", "csum_rfc1071") == "kgate.backlog.csum_rfc1071"
    assert kcidb.case_path("1_kgate-bench", "bench.bulk") == "kgate.bench.bulk"
    assert kcidb.case_path("kgate", "kernel-log") == "kgate.log.kernel-log"
    assert kcidb.case_path("0_kgate-backlog", "odd name/x") == "kgate.backlog.odd_name_x"


def test_the_control_is_left_out_unless_asked_and_then_says_what_it_did():
    plain = export()
    assert {c["id"].rsplit(":", 1)[1] for c in plain["checkouts"]} == {"fixed"}
    assert not any(b["misc"]["kgate_variant"] == "known-bad" for b in plain["builds"])
    data = export(with_control=True)
    node = by_path(data, ":x86_64:known-bad", "kgate")
    # caught: that kernel failed, as it must; a PASS would say it is correct
    assert node["status"] == "FAIL" and node["misc"]["kgate_verdict"] == results.CAUGHT
    assert node["misc"]["kgate_control"] is True and node["misc"]["kgate_expected"] == "FAIL"
    failed = [t for t in data["tests"] if t["build_id"].endswith(":known-bad") and
              t["status"] == "FAIL" and t["path"] != "kgate"]
    assert failed and all(t["misc"]["kgate_control"] for t in failed)
    assert by_path(data, ":x86_64:fixed", "kgate")["status"] == "PASS"
    assert not any(t["status"] == "FAIL" for t in data["tests"] if t["build_id"].endswith(":fixed"))


def test_job_verdicts_map_to_what_the_kernel_did():
    verdicts = {results.PASS, results.CAUGHT, results.REGRESSION, results.MISSED,
                results.FLAKY, results.ERROR, results.INFRA, results.INCONCLUSIVE}
    assert set(kcidb.JOB_STATUS) == verdicts == set(results.SEVERITY) | {results.CAUGHT}
    doc = stored_run()
    job = next(j for j in doc["jobs"] if j["variant"] == "fixed")
    for verdict, status in ((results.REGRESSION, "FAIL"), (results.INFRA, "MISS"),
                            (results.ERROR, "ERROR"), (results.INCONCLUSIVE, "MISS")):
        job["verdict"] = verdict
        node = by_path(export(doc), f":{job['target']}:fixed", "kgate")
        assert node["status"] == status


def test_an_error_job_keeps_the_guests_last_lines_and_a_splat():
    doc = stored_run()
    job = next(j for j in doc["jobs"] if j["variant"] == "fixed")
    job.update(verdict=results.ERROR, reason="backlog_coalesce bailed out",
               tail=["# bail out\0", "not ok 3 backlog"])
    job["cases"].append({"definition": "kgate", "case": "kernel-log", "result": "fail",
                         "splat": ["------------[ cut here ]------------", "WARNING: x"]})
    data = export(doc)
    node = by_path(data, f":{job['target']}:fixed", "kgate")
    assert node["log_excerpt"] == "# bail out\nnot ok 3 backlog"
    log = [t for t in data["tests"] if t["path"] == "kgate.log.kernel-log" and
           t["build_id"].endswith(f":{job['target']}:fixed")]
    assert log[-1]["status"] == "FAIL" and "WARNING: x" in log[-1]["log_excerpt"]
    assert log[-1]["id"].endswith(":2")  # the same path twice: ids stay unique


def test_an_unknown_case_result_is_an_error_not_a_status():
    doc = stored_run()
    doc["jobs"][0]["cases"][0]["result"] = "weird"
    with pytest.raises(common.KgateError, match="no status for: 'weird'"):
        kcidb.export(doc, RUN)


def test_candidates_and_old_runs():
    doc = stored_run()
    for j in doc["jobs"]:
        j["variant"] = {"fixed": "candidate"}.get(j["variant"], j["variant"])
    doc["candidate"] = {"source": "/home/me/linux"}
    c = export(doc)["checkouts"][0]
    assert c["patchset_hash"] == "" and "/home/me/linux" in c["comment"]
    doc["candidate"] = {"images": {"x86_64": "/tmp/bzImage"}}
    data = export(doc)
    assert "prebuilt" in data["checkouts"][0]["comment"]
    assert all("status" not in b and b["misc"]["prebuilt"] for b in data["builds"])
    old = stored_run()
    for j in old["jobs"]:
        for key in ("guest", "kernel_build", "kernel_config", "started"):
            j.pop(key)
    del old["trees"]
    data = export(old)
    assert data["checkouts"][0]["valid"] is True
    assert {b["architecture"] for b in data["builds"]} == {"x86_64", "mips"}
    old["jobs"][0]["target"] = "vax"
    with pytest.raises(common.KgateError, match="vax is neither recorded"):
        kcidb.export(old, RUN)


def test_checkout_patchset_hash_is_kcidbs():
    """The same as KCIDB's own recipe: sha256sum *.patch | cut -c-64 |
    sha256sum."""
    patches = kernel.variant_patches("known-bad")
    out = subprocess.run(["sh", "-c", 'sha256sum "$@" | cut -c-64 | sha256sum | cut -c-64',
                          "sh"] + patches, check=True, capture_output=True, text=True).stdout
    assert kcidb.patchset_hash([common.sha256_file(p) for p in patches]) == out.strip()
    assert kcidb.patchset_hash([]) == ""


@pytest.mark.parametrize("where, value", [
    (("builds", 0, "status"), "OK"),
    (("tests", 1, "path"), "kgate.bad path"),
    (("checkouts", 0, "origin"), "Kgate"),
    (("tests", 1, "number"), {"value": "fast"}),
    (("tests", 0, "log_url"), "not a url"),
    (("tests", 0, "start_time"), "yesterday"),
    (("checkouts", 0, "start_time"), "2026-12-07T01:37:42"),
])
def test_the_schema_rejects_what_kcidb_would(where, value):
    data = export()
    bad = copy.deepcopy(data)
    obj = bad
    for k in where[:-1]:
        obj = obj[k]
    obj[where[-1]] = value
    with pytest.raises(common.KgateError, match="does not validate"):
        kcidb.validate(bad)


def test_urls_are_quoted(tmp_path):
    run = tmp_path / "a run"
    shutil.copytree(RUN, run)
    data = kcidb.validate(kcidb.export(stored_run(), str(run)))
    assert data["tests"][0]["log_url"].startswith("file://" + str(tmp_path) + "/a%20run/")


def test_export_command(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    assert cli.main(["export", "kcidb", str(run)]) == 0
    with open(run / "kcidb.json", encoding="utf-8") as f:
        assert json.load(f)["builds"]
    assert cli.main(["export", "kcidb", str(run / "results.json"), "-o", "-",
                     "--origin", "my_lab", "--base-url", BASE, "--with-control"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert all(b["id"].startswith("my_lab:") for b in out["builds"])
    assert cli.main(["export", "kcidb", str(run), "--origin", "My-Lab"]) == 2
    assert cli.main(["export", "kcidb", str(tmp_path / "nothing")]) == 2


def test_a_run_records_its_trees(tmp_path):
    from kgate import run as runner
    trees = runner.record_trees(str(tmp_path), ["fixed", "known-bad", "fixed-debug"],
                                kernel.NO_CANDIDATE)
    assert list(trees) == ["fixed", "known-bad"]
    for v, tree in trees.items():
        want = kernel.variant_patches(v)
        assert [p["sha256"] for p in tree["patches"]] == [common.sha256_file(p) for p in want]
        for p in tree["patches"]:
            with open(tmp_path / p["file"], "rb") as f:
                assert hashlib.sha256(f.read()).hexdigest() == p["sha256"]
    assert len(trees["known-bad"]["patches"]) > len(trees["fixed"]["patches"])


def test_patches_of_two_series_with_one_name_are_both_kept(tmp_path):
    from kgate import run as runner
    mine = tmp_path / "mine"
    mine.mkdir()
    fixed = kernel.series("patches")[0]
    with open(fixed, encoding="utf-8") as f:
        (mine / os.path.basename(fixed)).write_text(f.read() + "\n")
    run = tmp_path / "run"
    trees = runner.record_trees(str(run), ["candidate"], kernel.Candidate(patches=str(mine)))
    names = [p["name"] for p in trees["candidate"]["patches"]]
    assert len(set(names)) == len(names) == len(kernel.series("patches")) + 1
    assert names[0] == os.path.basename(fixed)
    assert all(os.path.isfile(run / p["file"]) for p in trees["candidate"]["patches"])
