"""Unit tests of the kgate tooling (run with /usr/bin/python3 -m pytest)."""
import copy
import json
import re
import os
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

from kgate import cli, common, figures, golden, kernel, lavalog, render, results  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
ART = {"kernel": {"url": "file:///k/image", "sha256": "a" * 64},
       "rootfs": {"url": "file:///r/rootfs.cpio.gz", "sha256": "b" * 64},
       "build": {"cached": True, "kernel": 0.0, "rootfs": 0.0}}


def read(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return f.read()


# --- targets and templates -------------------------------------------------

@pytest.mark.parametrize("name", sorted(common.load_targets()))
@pytest.mark.parametrize("variant", common.VARIANTS)
def test_every_job_validates_against_lava_schema(name, variant):
    tgt = common.target(name)
    text = render.render_job(tgt, variant, ART["kernel"], ART["rootfs"])
    data = render.validate_job(text)
    deploy = data["actions"][0]["deploy"]
    assert deploy["images"]["kernel"]["sha256sum"] == "a" * 64
    assert deploy["images"]["ramdisk"]["sha256sum"] == "b" * 64
    assert deploy["images"]["ramdisk"]["overlays"] == {"lava": True}
    assert data["context"]["no_kvm"] is True
    assert data["metadata"]["kgate.variant"] == variant
    append = deploy["images"]["kernel"]["image_arg"]
    assert "panic=-1" not in append and f"console={tgt['console']}" in append


@pytest.mark.parametrize("name", sorted(common.load_targets()))
def test_device_config_has_the_target_qemu(name):
    tgt = common.target(name)
    dev = yaml.safe_load(render.render_device(tgt))
    params = dev["actions"]["boot"]["methods"]["qemu"]["parameters"]
    assert params["command"] == tgt["qemu"]
    assert "-no-reboot" in params["options"]
    assert not any("enable-kvm" in o for o in params["options"])
    assert dev["actions"]["deploy"]["methods"]["image"]["parameters"]["guest"]["size"] > 0


def test_missing_template_variable_is_an_error():
    tgt = dict(common.target("x86_64"))
    del tgt["lava_arch"]
    with pytest.raises(common.KgateError, match="lava_arch"):
        render.render_job(tgt, "fixed", ART["kernel"], ART["rootfs"])


def test_schema_rejects_a_bad_job():
    text = render.render_job(common.target("x86_64"), "fixed", ART["kernel"], ART["rootfs"])
    data = yaml.safe_load(text)
    data["context"]["no_network"] = True  # not a 2023.01 context key
    with pytest.raises(common.KgateError, match="schema"):
        render.validate_job(yaml.safe_dump(data))


def test_unknown_target_and_variant():
    with pytest.raises(common.KgateError, match="unknown target 'sparc'"):
        common.target("sparc")
    with pytest.raises(common.KgateError, match="unknown variant"):
        common.check_variant("broken")


# --- golden rendered jobs ----------------------------------------------------

def test_rendered_jobs_match_the_golden_files():
    """Every job and device as rendered now is the stored one: a change
    to a template, a target or a default must come with its diff under
    tests/data/golden ('kgate.py golden --update')."""
    diff = golden.compare()
    assert not diff, "rendered jobs changed; review and run 'kgate.py golden --update':\n" + \
        "".join(diff[:60])


def test_golden_covers_every_target_variant_and_device():
    names = golden.stored()
    for name in common.load_targets():
        assert f"devices/{name}.yaml" in names
        for flavour in ("local", "lab"):
            for v in common.VARIANTS + (common.CANDIDATE,):
                assert f"{flavour}/{name}-{v}.yaml" in names
            assert (f"{flavour}/{name}-fixed-debug.yaml" in names) == kernel.has_debug(name)


def test_golden_sees_a_changed_default_and_a_missing_file(tmp_path, monkeypatch):
    root = str(tmp_path)
    written, removed = golden.update(root)
    assert written == len(golden.stored()) and removed == 0
    assert golden.compare(root) == []
    os.unlink(os.path.join(root, "devices", "mips.yaml"))
    with open(os.path.join(root, "lab", "stale-fixed.yaml"), "w", encoding="utf-8") as f:
        f.write("job_name: gone\n")
    monkeypatch.setitem(render.DEFAULTS, "priority", "high")
    diff = "".join(golden.compare(root))
    assert "+++ b/tests/data/golden/devices/mips.yaml" in diff
    assert "--- a/tests/data/golden/lab/stale-fixed.yaml" in diff and "+++ /dev/null" in diff
    assert "-priority: medium\n+priority: high\n" in diff
    assert golden.update(root)[1] == 1
    assert golden.compare(root) == []


def test_golden_command_exit_codes(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(golden, "GOLDEN", str(tmp_path))
    assert cli.main(["golden", "--update"]) == 0
    assert cli.main(["golden"]) == 0
    monkeypatch.setitem(render.DEFAULTS, "visibility", "personal")
    assert cli.main(["golden"]) == 1
    assert "golden --update" in capsys.readouterr().out


# --- lava-run logs ---------------------------------------------------------

def test_parse_recorded_fixed_log():
    r = lavalog.parse(read("lava-run-x86_64-fixed.log"))
    assert r["health"] == "complete"
    by = {c["case"]: c["result"] for c in r["cases"]}
    assert set(list(results.gate().cases) + list(results.gate().run_cases + results.gate().unit_run_cases)) <= set(by)
    assert set(by.values()) == {"pass"}
    assert results.job_verdict("fixed", r["health"], r["cases"])[0] == results.PASS


def test_parse_recorded_known_bad_log():
    r = lavalog.parse(read("lava-run-x86_64-known-bad.log"))
    by = {c["case"]: c["result"] for c in r["cases"]}
    for case in results.gate().control_must_fail:
        assert by[case] == "fail", case
    assert by["backlog.ipv4.data_data"] == "pass" and by["backlog.ipv6_off.data_fin"] == "pass"
    assert results.job_verdict("known-bad", r["health"], r["cases"])[0] == results.CAUGHT


def test_parse_truncated_log_is_incomplete():
    text = read("lava-run-x86_64-fixed.log")
    cut = text[: text.index('"case": "backlog.ipv4.data_fin"')]
    r = lavalog.parse(cut)
    assert r["health"] == "incomplete"
    verdict, _ = results.job_verdict("fixed", r["health"], r["cases"])
    assert verdict == results.INFRA


def test_parse_ignores_garbage_lines():
    r = lavalog.parse("not yaml {\n{\"lvl\": \"results\", \"msg\": {\"case\": \"x\", "
                      "\"definition\": \"0_t\", \"result\": \"pass\", \"measurement\": 3.5, "
                      "\"units\": \"MB/s\"}}\n{broken\n")
    assert r["cases"] == [{"definition": "0_t", "case": "x", "result": "pass",
                           "measurement": 3.5, "units": "MB/s"}]


# --- verdicts --------------------------------------------------------------

def full(name):
    """ipv4_ctl_data_urg -> backlog.ipv4_ctl.data_urg: short names for
    keyword arguments."""
    m = re.match(r"^(ipv[46])(_off|_ctl)?_(.+)$", name)
    return f"{results.gate().fixtures[0]}.{m.group(1)}{m.group(2) or ''}.{m.group(3)}" if m else name


def cases(**res):
    g = results.gate()
    base = {c: "pass" for c in list(g.cases + g.run_cases + g.unit_run_cases)
            + ["csum_rfc1071", lavalog.KERNEL_LOG_CASE]}
    base.update({full(k): v for k, v in res.items()})
    return [{"case": k, "result": v} for k, v in base.items()]


# The control's must-fail cases: backlog's by short name, the others'
# (a fixture full() does not add) by their full name.
ALL_BAD = {c.replace(f"{results.gate().fixtures[0]}.", "").replace(".", "_")
           if c.startswith(results.gate().fixtures[0] + ".") else c: "fail"
           for c in results.gate().control_must_fail}


@pytest.mark.parametrize("variant,health,res,expect", [
    ("fixed", "complete", {}, results.PASS),
    ("fixed", "complete", {"backlog.ipv6.data_fin": "fail"}, results.REGRESSION),
    ("fixed", "complete", {"backlog.ipv4_ctl.data_urg": "fail"}, results.REGRESSION),
    ("fixed", "complete", {"backlog.ipv4.data_data": "skip"}, results.INCONCLUSIVE),
    ("fixed", "incomplete", {}, results.INFRA),
    # the test program crashed or bailed out on the kernel under test
    ("fixed", "complete", {results.gate().run_cases[0]: "fail"}, results.ERROR),
    ("candidate", "complete", {results.gate().run_cases[0]: "fail"}, results.ERROR),
    # ... on the control: not the kernel under test
    ("known-bad", "complete", dict(ALL_BAD, **{results.gate().run_cases[0]: "fail"}), results.INFRA),
    # a failed case decides, whatever happened after it
    ("fixed", "complete", {"backlog.ipv4.data_fin": "fail", results.gate().run_cases[0]: "fail"},
     results.REGRESSION),
    ("fixed", "incomplete", {"backlog.ipv4.data_fin": "fail"}, results.REGRESSION),
    # test_pkt barely touches the kernel: its crash is ours
    ("fixed", "complete", {results.gate().unit_run_cases[0]: "fail"}, results.INFRA),
    ("fixed", "complete", {"csum_rfc1071": "fail"}, results.REGRESSION),
    ("known-bad", "complete", dict(ALL_BAD, csum_rfc1071="fail"), results.INFRA),
    ("known-bad", "complete", ALL_BAD, results.CAUGHT),
    ("known-bad", "complete", dict(ALL_BAD, ipv4_data_synack="fail"), results.CAUGHT),
    ("known-bad", "complete", {}, results.MISSED),
    ("known-bad", "complete", dict(ALL_BAD, ipv6_data_noack="pass"), results.MISSED),
    ("known-bad", "complete", dict(ALL_BAD, ipv4_data_rst="skip"), results.INCONCLUSIVE),
    ("known-bad", "incomplete", ALL_BAD, results.INFRA),
])
def test_job_verdict(variant, health, res, expect):
    assert results.job_verdict(variant, health, cases(**res))[0] == expect


def test_missing_case_is_infrastructure():
    c = [x for x in cases() if x["case"] != "backlog.ipv6.data_rst"]
    assert results.job_verdict("fixed", "complete", c) == (results.INFRA,
                                                           "results missing: backlog.ipv6.data_rst")


def test_run_verdict_and_json(tmp_path):
    jobs = [
        {"target": "x86_64", "variant": "fixed", "verdict": results.PASS, "cases": cases(),
         "health": "complete", "kernel_sha256": "k", "rootfs_sha256": "r"},
        {"target": "x86_64", "variant": "known-bad", "verdict": results.CAUGHT,
         "cases": cases(**ALL_BAD), "health": "complete", "kernel_sha256": "k2",
         "rootfs_sha256": "r"},
    ]
    doc = results.write_json(str(tmp_path / "results.json"), "run1", "t0", "t1", jobs)
    assert doc["verdict"] == results.PASS and doc["exit_code"] == 0
    loaded = json.loads((tmp_path / "results.json").read_text())
    g = results.gate()
    # the cases, the programs' run cases, the unit case, kernel-log
    assert len(loaded["results"]) == 2 * (len(g.cases + g.run_cases + g.unit_run_cases) + 2)
    row = [r for r in loaded["results"]
           if r["variant"] == "known-bad" and r["case"] == "backlog.ipv4.data_fin"][0]
    assert row == {"arch": "x86_64", "variant": "known-bad", "case": "backlog.ipv4.data_fin", "result": "fail",
                   "measurement": None, "units": None, "kernel_sha256": "k2", "rootfs_sha256": "r"}
    text = results.matrix(jobs)
    assert "FAIL" in text and "caught" in text
    broken = copy.deepcopy(jobs)
    broken[1]["verdict"] = results.MISSED
    assert results.run_verdict(broken)[1] == 1
    broken[0]["verdict"] = results.INFRA
    assert results.run_verdict(broken)[0] == results.MISSED


# --- the benchmark ---------------------------------------------------------

BENCH = "1_kgate-bench"


def bench_cases(res=None, figs=None):
    """The benchmark's cases as LAVA reports them: verdicts and figures."""
    out = []
    base = {c: "pass" for c in list(results.gate().bench_cases) + [results.gate().bench_run_cases[0]]}
    base.update(res or {})
    for name, r in base.items():
        out.append({"definition": BENCH, "case": name, "result": r})
    for name, (v, units) in (figs or {}).items():
        out.append({"definition": BENCH, "case": name, "result": "pass",
                    "measurement": v, "units": units})
    return out


@pytest.mark.parametrize("res,expect", [
    ({}, results.PASS),
    ({"bench.bulk": "skip"}, results.PASS),          # one CPU: reported, not gating
    ({"bench.bulk": "fail"}, results.REGRESSION),    # a broken stream
    ({"bench.drain": "fail"}, results.REGRESSION),   # merged with the sysctl at 0
    ({results.gate().bench_run_cases[0]: "fail"}, results.ERROR),   # crashed on the kernel under test
])
def test_bench_part_of_the_verdict(res, expect):
    assert results.job_verdict("fixed", "complete", cases() + bench_cases(res),
                               bench=True)[0] == expect


def test_a_failed_case_outranks_a_broken_benchmark():
    c = cases(**{"backlog.ipv4.data_fin": "fail"})
    for bench in ({results.gate().bench_run_cases[0]: "fail"}, {}):
        v = results.job_verdict("fixed", "complete", c + bench_cases(bench) if bench else c,
                                bench=True)
        assert v[0] == results.REGRESSION, v


TIMEOUT = ["lava-test-shell: lava-test-shell timed out after 180 seconds"]


def test_a_program_that_hangs_on_the_kernel_under_test_is_its_error():
    # unit tests done, backlog_coalesce reported 17 results, then LAVA's
    # test shell ran out of time: the program hung on this kernel
    c = [x for x in cases() if x["case"] != results.gate().run_cases[0]][:17] + \
        [{"case": results.gate().unit_run_cases[0], "result": "pass"}]
    v, why = results.job_verdict("candidate", "incomplete", c, errors=TIMEOUT)
    assert v == results.ERROR and "stopped after 17 of 132" in why, why
    # the control, or no timeout of the test shell (a log that broke off,
    # the lab): infrastructure
    assert results.job_verdict("known-bad", "incomplete", c, errors=TIMEOUT)[0] == results.INFRA
    assert results.job_verdict("candidate", "incomplete", c)[0] == results.INFRA
    assert results.job_verdict("candidate", "incomplete", c, errors=[
        "auto-login-action: auto-login-action timed out after 120 seconds"])[0] == results.INFRA
    # test_pkt never finished: nothing says the kernel did it
    c2 = [x for x in c if x["case"] != results.gate().unit_run_cases[0]]
    assert results.job_verdict("candidate", "incomplete", c2, errors=TIMEOUT)[0] == results.INFRA


def test_a_real_test_shell_timeout_reads_as_the_kernels_error():
    """lava-run-x86_64-hang.log: a real lava-run of an x86_64 job whose
    test action had 1 minute and whose backlog step was
    'sh -c "backlog_coalesce --case backlog.ipv4_ctl.data_data; sleep 300"':
    LAVA's own words for a program that never finished."""
    r = lavalog.parse(read("lava-run-x86_64-hang.log"))
    assert r["health"] == "incomplete"
    v, why = results.job_verdict("candidate", r["health"], r["cases"], errors=r["errors"])
    assert v == results.ERROR and "stopped after 1 of 132" in why and "timed out" in why, why
    assert results.job_verdict("known-bad", r["health"], r["cases"],
                               errors=r["errors"])[0] == results.INFRA
    # the program's last lines, for the matrix: its output, not LAVA's
    # signals or the echo of the poweroff LAVA sent after giving up
    assert r["tail"][-1].startswith("# Totals: pass:1") and "poweroff" not in r["tail"]
    assert not any(line.startswith("<LAVA_SIGNAL") for line in r["tail"])
    job = {"target": "x86_64", "variant": "candidate", "verdict": v, "reason": why,
           "cases": r["cases"], "tail": r["tail"], "log": "x86_64-candidate/lava.log"}
    text = results.matrix([job])
    assert "its last lines (x86_64-candidate/lava.log):" in text
    assert "    ok 1 backlog.ipv4_ctl.data_data" in text


def test_a_benchmark_that_hangs_on_the_kernel_under_test_is_its_error():
    c = cases() + [{"definition": BENCH, "case": "bench.bulk", "result": "pass"}]
    v, why = results.job_verdict("fixed", "incomplete", c, bench=True, errors=TIMEOUT)
    assert v == results.ERROR and "backlog_bench" in why, why


def test_run_verdict_ranks_error_between_infrastructure_and_regression():
    def job(v):
        return {"target": "x86_64", "variant": "fixed", "verdict": v}
    assert results.run_verdict([job(results.INFRA), job(results.ERROR)])[:2] == (results.ERROR, 5)
    assert results.run_verdict([job(results.ERROR), job(results.REGRESSION)])[0] == results.REGRESSION


def test_bench_missing_is_infrastructure_only_where_expected():
    assert results.job_verdict("fixed", "complete", cases(), bench=True)[0] == results.INFRA
    assert results.job_verdict("fixed", "complete", cases(), bench=False)[0] == results.PASS
    # A benchmark case never counts as a failed packet unit test (that
    # would make the known-bad job infrastructure); the control stays
    # judged by its own cases.
    v = results.job_verdict("known-bad", "complete", cases(**ALL_BAD) +
                            bench_cases({"bench.bulk": "fail"}))
    assert v[0] == results.CAUGHT


def test_bench_runs_only_for_kernels_meant_to_ship():
    tgt = common.target("x86_64")
    art = {"url": "file:///k", "sha256": "0" * 64}
    assert "backlog_bench" in render.render_job(tgt, "fixed", art, art)
    assert "backlog_bench" not in render.render_job(tgt, "known-bad", art, art)
    assert render.has_bench("fixed") and not render.has_bench("known-bad")


FIGS = {
    "bulk_on_goodput": (50.0, "MB/s"), "bulk_off_goodput": (40.0, "MB/s"),
    "bulk_ratio": (1.25, "x"), "bulk_ratio_min": (1.1, "x"), "bulk_ratio_max": (1.4, "x"),
    "bulk_ratio_q1": (1.2, "x"), "bulk_ratio_q3": (1.3, "x"), "bulk_pairs": (9.0, "pairs"),
    "bulk_on_receiver_busy": (97.0, "%"), "bulk_off_receiver_busy": (100.0, "%"),
    "bulk_on_receiver_cpu": (21.5, "ms/MB"), "bulk_off_receiver_cpu": (26.0, "ms/MB"),
    "bulk_on_sender_idle": (35.0, "%"), "bulk_off_sender_idle": (48.0, "%"),
    "bulk_on_merges": (120.0, "segments"), "bulk_on_backlog_drops": (0.0, "segments"),
    "bulk_off_backlog_drops": (3.0, "segments"),
    "drain_0_on_time": (150.0, "us"), "drain_0_segments": (0.0, "segments"),
    "drain_0_ratio": (1.0, "x"), "drain_0_ratio_min": (0.8, "x"), "drain_0_ratio_max": (1.2, "x"),
    "drain_1000_segments": (1000.0, "segments"),
    "drain_1000_on_time": (400.0, "us"), "drain_1000_off_time": (2600.0, "us"),
    "drain_1000_ratio": (6.5, "x"), "drain_1000_ratio_min": (4.0, "x"),
    "drain_1000_ratio_max": (9.5, "x"), "drain_1000_on_merges": (944.0, "segments"),
    "drain_1000_on_backlog_drops": (0.0, "segments"),
    "drain_1000_off_backlog_drops": (0.0, "segments"),
}


def test_figures_table_and_plot():
    jobs = [{"target": "x86_64", "variant": "fixed", "cases": cases() + bench_cases(figs=FIGS)},
            {"target": "mips", "variant": "fixed",
             "cases": cases() + bench_cases(figs={"drain_0_on_time": (1.0, "us")})},
            {"target": "x86_64", "variant": "known-bad", "cases": cases(**ALL_BAD)}]
    rows = figures.summary(jobs)
    assert [r["target"] for r in rows] == ["x86_64", "mips"]
    assert rows[0]["drain_n"] == 1000 and rows[0]["bulk_ratio"] == (1.25, 1.1, 1.4)
    assert rows[1]["drain_n"] is None and rows[1]["bulk_ratio"] == (None, None, None)
    text = figures.table(jobs)
    bulk, drain = [x for x in text.splitlines() if x.startswith("x86_64")]
    for cell in ("50.0", "40.0", "1.25x [1.20-1.30] 9", "(1.10-1.40)", "0/3", "97/100",
                 "21.5/26.0", "35/48"):
        assert cell in bulk
    for cell in ("6.50x (4.00-9.50)", "944", "2600.0"):
        assert cell in drain
    plot = figures.svg(jobs)
    import xml.etree.ElementTree as ET
    root = ET.fromstring(plot)
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "x86_64" in texts and "mips" in texts
    assert "1.25x" in texts and "6.50x (1000 segs)" in texts and "not measured" in texts
    assert figures.table([jobs[2]]) == "" and figures.svg([jobs[2]]) is None


def test_bench_cases_match_the_program():
    prog = os.environ.get("KGATE_NATIVE_BENCH")
    if not prog:
        pytest.skip("KGATE_NATIVE_BENCH not set (make check sets it)")
    out = subprocess.run([prog, "--reps", "1", "--bulk-bytes", "64K", "--drain", "0,10"],
                         capture_output=True, text=True, timeout=120).stdout
    names = [line.split()[2] for line in out.splitlines()
             if line.startswith(("ok ", "not ok ")) and not line.startswith("not")] + \
            [line.split()[3] for line in out.splitlines() if line.startswith("not ok ")]
    assert sorted(names) == sorted(results.gate().bench_cases), out
    figs = [line.split()[2] for line in out.splitlines() if line.startswith("# kgate-measure ")]
    assert "bulk_on_goodput" in figs and "drain_10_on_time" in figs, out


def test_a_bulk_run_too_slow_to_finish_is_inconclusive_not_failed():
    # Two benchmarks at once on this 2-core machine once made bulk
    # transfers 300 times slower and bench.bulk ran into the harness's
    # deadline: a failure, read as the fixed kernel's regression. Now
    # the runs that do not fit are not taken; budget 0 fits none.
    prog = os.environ.get("KGATE_NATIVE_BENCH")
    if not prog:
        pytest.skip("KGATE_NATIVE_BENCH not set (make check sets it)")
    r = subprocess.run([prog, "--reps", "3", "--bulk-bytes", "64K", "--bulk-budget", "0",
                        "--no-drain"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 4, r.stdout
    assert "ok 1 bench.bulk # SKIP inconclusive: too slow to measure here: 0 of 3 runs" \
        in r.stdout


def test_bulk_on_one_cpu_is_inconclusive():
    # Nothing to steer the receive path to: the sender's CPU would carry
    # it, and the receiver would rarely be the bottleneck.
    prog = os.environ.get("KGATE_NATIVE_BENCH")
    if not prog:
        pytest.skip("KGATE_NATIVE_BENCH not set (make check sets it)")
    r = subprocess.run(["taskset", "-c", "0", prog, "--reps", "1", "--bulk-bytes", "64K",
                        "--no-drain"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 4, r.stdout
    assert "ok 1 bench.bulk # SKIP inconclusive: one CPU: the receive path cannot be " \
        "steered away from the sender" in r.stdout


@pytest.mark.parametrize("env,name", [("KGATE_NATIVE_TEST", "backlog"),
                                      ("KGATE_NATIVE_FUZZ", "fuzz")])
def test_guest_cases_match_the_program(env, name):
    """Each suite's test program lists the cases its suite file says."""
    prog = os.environ.get(env)
    if not prog:
        pytest.skip(f"{env} not set (make check sets it)")
    out = subprocess.run([prog, "--list"], capture_output=True, text=True, check=True).stdout
    assert out.split() == list(next(s for s in results.gate().suites if s.name == name).cases)


# --- kernel configuration --------------------------------------------------

def test_fragment_verification(tmp_path):
    frag = tmp_path / "f.config"
    frag.write_text("CONFIG_SLUB=y\n# CONFIG_SLOB is not set\nCONFIG_TUN=y\n")
    good = "CONFIG_SLUB=y\nCONFIG_TUN=y\n# CONFIG_SLOB is not set\n"
    assert kernel.verify_config(good, [str(frag)]) == []
    bad = "CONFIG_SLOB=y\nCONFIG_TUN=y\n"
    misses = kernel.verify_config(bad, [str(frag)])
    assert any("CONFIG_SLUB=y, got n" in m for m in misses)
    assert any("CONFIG_SLOB=n, got y" in m for m in misses)


def test_base_fragment_keeps_the_two_traps_out():
    want = kernel.parse_fragment(os.path.join(common.TOP, "kernel", "configs", "base.config"))
    assert want["CONFIG_SLUB"] == "y" and want["CONFIG_SLOB"] is None
    assert want["CONFIG_COMPAT_32BIT_TIME"] == "y"
    for sym in ("CONFIG_USERFAULTFD", "CONFIG_TUN", "CONFIG_NET_NS", "CONFIG_IPV6"):
        assert want[sym] == "y"


def test_series_and_cache_keys():
    fixed = kernel.variant_patches("fixed")
    bad = kernel.variant_patches("known-bad")
    assert fixed and bad[: len(fixed)] == fixed and len(bad) > len(fixed)
    if os.path.exists(kernel.kernel_series().tarball):
        assert kernel.tree_key("fixed") != kernel.tree_key("known-bad")


def _diff(rel, old, new):
    return (f"--- a/{rel}\n+++ b/{rel}\n@@ -1 +1 @@\n-{old}\n+{new}\n")


@pytest.fixture
def fake_source(tmp_path, monkeypatch, use_workspace):
    """A two-file pristine tree and a variant whose patches the test sets."""
    pristine = tmp_path / "pristine"
    (pristine / "net").mkdir(parents=True)
    (pristine / "net" / "a.c").write_text("a\n")
    (pristine / "net" / "b.c").write_text("b\n")
    for f in (pristine / "net").iterdir():
        os.utime(f, (1000, 1000))
    patches = {"list": []}
    use_workspace(tmp_path / "build")
    monkeypatch.setattr(kernel, "pristine", lambda: str(pristine))
    monkeypatch.setattr(kernel, "source_id", lambda: "fake-1")
    monkeypatch.setattr(kernel, "variant_patches", lambda v, cand=None: patches["list"])

    def use(*diffs):
        paths = []
        for i, text in enumerate(diffs):
            p = tmp_path / f"{len(list(tmp_path.glob('*.patch')))}-{i}.patch"
            p.write_text(text)
            paths.append(str(p))
        patches["list"] = paths
    return pristine, use


def test_new_patches_update_the_tree_in_place(fake_source):
    pristine, use = fake_source
    use(_diff("net/a.c", "a", "a mutant"))
    tree = kernel.prepare_tree("candidate")
    assert open(os.path.join(tree, "net", "a.c")).read() == "a mutant\n"
    obj = os.path.join(tree, "o-x86_64", "net", "a.o")
    os.makedirs(os.path.dirname(obj))
    with open(obj, "w") as f:
        f.write("object")
    os.utime(obj, (2000, 2000))
    # Another mutant: a.c goes back to the pristine text, b.c changes.
    use(_diff("net/b.c", "b", "b mutant"))
    assert kernel.prepare_tree("candidate") == tree
    assert os.path.isfile(obj), "the object folder must survive"
    a = os.stat(os.path.join(tree, "net", "a.c"))
    assert open(os.path.join(tree, "net", "a.c")).read() == "a\n"
    assert a.st_ino != os.stat(pristine / "net" / "a.c").st_ino
    assert a.st_mtime > 2000, "a reverted file must be newer than its object"
    assert open(os.path.join(tree, "net", "b.c")).read() == "b mutant\n"
    # The pristine tree is never written through a hard link.
    assert (pristine / "net" / "a.c").read_text() == "a\n"
    assert (pristine / "net" / "b.c").read_text() == "b\n"
    # An unchanged series changes nothing.
    b = os.stat(os.path.join(tree, "net", "b.c"))
    assert kernel.prepare_tree("candidate") == tree
    assert os.stat(os.path.join(tree, "net", "b.c")).st_ino == b.st_ino


def test_variants_share_one_tree_and_its_objects(fake_source, tmp_path, monkeypatch):
    """fixed -> known-bad -> fixed rewrites only what the regression
    patch touches: the objects of every file it leaves alone stay
    newer than their sources, so make recompiles one file."""
    pristine, _ = fake_source
    fix = tmp_path / "fix.patch"
    fix.write_text(_diff("net/a.c", "a", "a fixed"))
    bad = tmp_path / "bad.patch"
    bad.write_text(_diff("net/b.c", "b", "b bad"))
    series = {"fixed": [str(fix)], "known-bad": [str(fix), str(bad)]}
    monkeypatch.setattr(kernel, "variant_patches", lambda v, cand=None: series[v])
    tree = kernel.prepare_tree("fixed")
    objs = os.path.join(tree, "o-x86_64", "net")
    os.makedirs(objs)
    for name in ("a.o", "b.o"):
        with open(os.path.join(objs, name), "w") as f:
            f.write("object")
        os.utime(os.path.join(objs, name), (2000, 2000))
    for f in ("a.c", "b.c"):
        os.utime(os.path.join(tree, "net", f), (1500, 1500))
    assert kernel.prepare_tree("known-bad") == tree
    assert open(os.path.join(tree, "net", "b.c")).read() == "b bad\n"
    assert os.stat(os.path.join(tree, "net", "b.c")).st_mtime > 2000
    assert os.stat(os.path.join(tree, "net", "a.c")).st_mtime == 1500, "a.c was rewritten"
    assert os.path.isfile(os.path.join(objs, "a.o"))
    os.utime(os.path.join(objs, "b.o"), None)
    os.utime(os.path.join(tree, "net", "b.c"), (1500, 1500))
    assert kernel.prepare_tree("fixed") == tree
    assert open(os.path.join(tree, "net", "b.c")).read() == "b\n"
    assert os.stat(os.path.join(tree, "net", "b.c")).st_mtime > os.stat(
        os.path.join(objs, "b.o")).st_mtime
    assert os.stat(os.path.join(tree, "net", "a.c")).st_mtime == 1500
    assert (pristine / "net" / "b.c").read_text() == "b\n"


def test_a_switch_patches_only_the_files_named(fake_source, tmp_path, monkeypatch):
    """After the first tree, a switch applies the patches to the files
    they name alone (no copy of the whole tree): created and deleted
    files included."""
    pristine, _ = fake_source
    fix = tmp_path / "fix.patch"
    fix.write_text(_diff("net/a.c", "a", "a fixed"))
    new = tmp_path / "new.patch"
    new.write_text("--- /dev/null\n+++ b/net/c.c\n@@ -0,0 +1 @@\n+c\n"
                   "--- a/net/b.c\n+++ /dev/null\n@@ -1 +0,0 @@\n-b\n")
    series = {"fixed": [str(fix)], "known-bad": [str(fix), str(new)]}
    monkeypatch.setattr(kernel, "variant_patches", lambda v, cand=None: series[v])
    tree = kernel.prepare_tree("fixed")
    assert kernel.patched_paths([str(fix), str(new)]) == {"net/a.c", "net/b.c", "net/c.c"}

    def whole_tree(*a):
        raise AssertionError("a switch walked the whole tree")
    monkeypatch.setattr(kernel, "_tree_changes", whole_tree)
    assert kernel.prepare_tree("known-bad") == tree
    assert open(os.path.join(tree, "net", "c.c")).read() == "c\n"
    assert not os.path.exists(os.path.join(tree, "net", "b.c"))
    assert open(os.path.join(tree, "net", "a.c")).read() == "a fixed\n"
    assert kernel.prepare_tree("fixed") == tree
    assert not os.path.exists(os.path.join(tree, "net", "c.c"))
    assert open(os.path.join(tree, "net", "b.c")).read() == "b\n"
    assert not os.path.exists(tree + ".tmp")
    assert sorted(os.listdir(pristine / "net")) == ["a.c", "b.c"]


def test_tree_is_made_anew_when_an_update_cannot_be_trusted(fake_source, monkeypatch):
    pristine, use = fake_source
    use(_diff("net/a.c", "a", "a mutant"))
    tree = kernel.prepare_tree("candidate")
    os.makedirs(os.path.join(tree, "o-arm"))
    # A patch that does not apply leaves the tree as it was.
    use(_diff("net/b.c", "not b", "b mutant"))
    with pytest.raises(common.KgateError, match="does not apply"):
        kernel.prepare_tree("candidate")
    assert open(os.path.join(tree, "net", "a.c")).read() == "a mutant\n"
    assert os.path.isdir(os.path.join(tree, "o-arm"))
    assert not os.path.exists(tree + ".tmp")
    # Another kernel source: the old tree's changes mean nothing there.
    monkeypatch.setattr(kernel, "source_id", lambda: "fake-2")
    use(_diff("net/b.c", "b", "b mutant"))
    kernel.prepare_tree("candidate")
    assert not os.path.exists(os.path.join(tree, "o-arm"))
    assert open(os.path.join(tree, "net", "a.c")).read() == "a\n"
    # So is a tree left half updated (no stamp).
    os.makedirs(os.path.join(tree, "o-arm"))
    os.unlink(os.path.join(tree, kernel.TREE_STAMP))
    kernel.prepare_tree("candidate")
    assert not os.path.exists(os.path.join(tree, "o-arm"))


def test_timing_from_recorded_log():
    t = lavalog.parse(read("lava-run-x86_64-fixed.log"))["timing"]
    assert 0 < t["boot_to_first_result"] <= t["boot_to_end"] < 60


def test_timing_splits_a_job_into_phases_and_programs():
    t = lavalog.parse(read("lava-run-x86_64-fixed.log"))["timing"]
    assert set(t["programs"]) == {"test_pkt", "backlog_coalesce", "backlog_fuzz", "backlog_bench",
                                  "kgate-kernel-log"}
    assert all(v > 0 for v in t["programs"].values())
    # the programs are the test phase, less LAVA's own steps
    assert sum(t["programs"].values()) <= t["tests"] < 60
    for phase in ("deploy", "boot", "finalize"):
        assert 0 < t[phase] < 10
    # the known-bad kernel's results are logged late, its console lines
    # are not: each program is timed from the guest's own output
    bad = lavalog.parse(read("lava-run-x86_64-known-bad.log"))["timing"]["programs"]
    assert bad["backlog_coalesce"] > 10
    # a program that never ended has no time
    hang = lavalog.parse(read("lava-run-x86_64-hang.log"))["timing"]
    assert "backlog_coalesce" not in hang["programs"] and "finalize" not in hang


def test_bench_table_reads_what_was_recorded(tmp_path, monkeypatch):
    from kgate import bench
    monkeypatch.setattr(kernel, "out_dir", lambda name, v: str(tmp_path / name / v))
    (tmp_path / "t1" / "fixed").mkdir(parents=True)
    (tmp_path / "t1" / "fixed" / "cold-build.json").write_text(
        '{"seconds": 201.4, "compiled": 1092}\n')
    # a later rebuild is not the cold figure
    (tmp_path / "t1" / "fixed" / "last-build.json").write_text('{"seconds": 12.0}\n')
    doc = {"jobs": [{"target": "t1", "variant": "fixed", "seconds": 5.04,
                     "timing": {"boot": 2.25, "programs": {"backlog_coalesce": 3.5}}}]}
    text = bench.targets_table(["t1"], doc)
    row = text.splitlines()[1].split()
    assert row[:3] == ["t1", "201s", "1092"] and "2.2s" in row and "3.5s" in row
    assert "5.0s" in row


def _timed_job(t, v, cached, cases=(), build_s=0.0):
    return {"target": t, "variant": v, "seconds": 30.0, "cases": list(cases),
            "timing": {"build": {"cached": cached, "kernel": build_s}}}


def test_bench_goals_pick_the_runs_that_measure_them(tmp_path, monkeypatch, use_workspace):
    from kgate import bench
    monkeypatch.setattr(kernel, "out_dir", lambda name, v: str(tmp_path / name / v))
    use_workspace(tmp_path / "build")
    fig = [{"case": "bulk", "measurement": 1.0, "units": "MB/s"}]
    warm = {"run": "w", "seconds": 170.0,
            "jobs": [_timed_job(t, v, True, fig) for t in ("a", "b") for v in ("fixed", "known-bad")]}
    built = dict(warm, run="cold", seconds=3000.0,
                 jobs=[_timed_job("a", "fixed", False, fig)] + warm["jobs"][1:])
    cand = {"run": "c", "seconds": 400.0, "candidate": {"patches": "/p"},
            "jobs": [_timed_job(t, v, v == "known-bad", build_s=9.0)
                     for t in ("a", "b") for v in ("candidate", "known-bad")]}
    one = dict(cand, run="c1", jobs=cand["jobs"][:2])   # one target only
    for name, v, secs, objects in (("a", "known-bad", 9.5, "kept"),
                                   ("b", "known-bad", 300.0, "new"),
                                   ("b", "candidate", 14.0, "kept")):
        (tmp_path / name / v).mkdir(parents=True)
        (tmp_path / name / v / "last-build.json").write_text(json.dumps(
            {"seconds": secs, "objects": objects, "compiled": 1}))
    got = {g[0]: g[1:] for g in bench.goals(["a", "b"], [one, built, cand, warm])}
    assert got["warm"][0] == 170.0 and "run w" in got["warm"][1]
    assert got["candidate"][0] == 400.0 and "run c," in got["candidate"][1]
    # a build from new objects is not incremental
    assert got["incremental"][0] == 14.0 and "b/candidate" in got["incremental"][1]
    assert got["cold"] == (None, None)
    text = bench.goals_text(["a", "b"], [warm])
    assert "not measured yet" in text and "yes" in text


# --- the LAVA lab path -------------------------------------------------------

LAVACLI_RESULTS = """
- {id: '1', job: '7', name: validate, result: pass, suite: lava, measurement: None,
   unit: '', metadata: {case: validate, definition: lava, result: pass}}
- {id: '2', job: '7', name: job, result: fail, suite: lava, measurement: None, unit: '',
   metadata: {case: job, definition: lava, result: fail, error_msg: 'bootloader timed out'}}
- {id: '3', job: '7', name: backlog.ipv4.data_fin, result: fail, suite: 0_kgate-backlog,
   measurement: None, unit: '', metadata: {}}
- {id: '4', job: '7', name: bulk_on_goodput, result: pass, suite: 1_kgate-bench,
   measurement: '98.400', unit: MB/s, metadata: {}}
"""


def test_lab_results_parse_like_a_local_log():
    from kgate import lab
    cases, errors = lab.parse_results(LAVACLI_RESULTS)
    assert cases == [
        {"definition": "0_kgate-backlog", "case": "backlog.ipv4.data_fin", "result": "fail"},
        {"definition": "1_kgate-bench", "case": "bulk_on_goodput", "result": "pass",
         "measurement": 98.4, "units": "MB/s"},
    ]
    assert errors == ["job: bootloader timed out"]
    assert results.figures(cases) == {"bulk_on_goodput": (98.4, "MB/s")}
    with pytest.raises(common.KgateError):
        lab.parse_results("{not: a list}")


@pytest.mark.parametrize("url,ok", [
    ("http://lab.example:8011", True), ("https://a/b/", True),
    ("file:///tmp", False), ("127.0.0.1:8011", False), ("", False),
])
def test_lab_base_url(url, ok):
    from kgate import lab
    if ok:
        assert lab.check_base_url(url).endswith("/")
    else:
        with pytest.raises(common.KgateError):
            lab.check_base_url(url)


def test_lab_job_takes_the_labs_parameters():
    tgt = common.target("mips64el")
    art = {"url": "http://lab:8011/sha256/" + "a" * 64 + "/image", "sha256": "a" * 64}
    text = render.render_job(tgt, "fixed", art, art, device_type="kgate-qemu",
                             tags=["qemu-fast"], priority=80, visibility="personal",
                             job_prefix="nightly ")
    job = render.validate_job(text)
    assert job["device_type"] == "kgate-qemu" and job["tags"] == ["qemu-fast"]
    assert job["priority"] == 80 and job["visibility"] == "personal"
    assert job["job_name"].startswith("nightly mips64el fixed")
    images = job["actions"][0]["deploy"]["images"]
    assert images["kernel"]["sha256sum"] == "a" * 64
    # Nothing the 2023.01 schema rejects, nothing newer servers need.
    assert "no_network" not in text and "expected:" not in text


def test_lab_device_type_boots_every_target():
    base = "/usr/share/lava-server/device-types"
    if not os.path.isfile(os.path.join(base, "base.jinja2")):
        pytest.skip("lava-server not installed")
    import jinja2
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(
        [os.path.join(common.TOP, "templates", "lab"), base]), trim_blocks=True)
    for name, tgt in common.load_targets().items():
        ctx = {"arch": tgt["lava_arch"], "machine": tgt["machine"], "cpu": tgt["cpu"],
               "memory": tgt["memory"], "extra_options": render.qemu_extra(tgt)}
        dev = yaml.safe_load(env.from_string("{% extends 'kgate-qemu.jinja2' %}").render(**ctx))
        assert tgt["lava_arch"] in dev["available_architectures"], name
        q = dev["actions"]["boot"]["methods"]["qemu"]["parameters"]
        assert q["command"] == tgt["qemu"], name
        assert f"-machine {tgt['machine']}" in q["options"] and q["extra"] == ctx["extra_options"]


def test_verdict_differences():
    a = {"jobs": [{"target": "x86_64", "variant": "fixed", "verdict": "pass"},
                  {"target": "mips", "variant": "fixed", "verdict": "pass"}]}
    b = {"jobs": [{"target": "x86_64", "variant": "fixed", "verdict": "regression"},
                  {"target": "arm", "variant": "fixed", "verdict": "pass"}]}
    assert results.verdict_differences(a, b) == ["x86_64/fixed: pass -> regression",
                                                 "arm/fixed: absent -> pass"]
    assert results.verdict_differences(a, a) == []


def test_lab_command_line_becomes_job_fields():
    from kgate import cli
    args = cli.parser().parse_args(["lab-jobs", "--base-url", "http://lab/", "--tag", "fast",
                                    "--job-timeout", "30", "--priority", "high", "x86_64"])
    over = cli.lab_overrides(args)
    assert over["tags"] == ["fast"] and over["priority"] == "high"
    art = {"url": "http://lab/k", "sha256": "b" * 64}
    job = render.validate_job(render.render_job(common.target("x86_64"), "fixed", art, art, **over))
    assert job["timeouts"]["job"] == {"minutes": 30} and job["tags"] == ["fast"]
    assert job["timeouts"]["action"] == {"minutes": render.DEFAULTS["timeouts"]["action"]}


# --- reports -------------------------------------------------------------------

def test_junit_one_suite_per_job():
    import xml.etree.ElementTree as ET
    from kgate import reports
    jobs = [
        {"target": "x86_64", "variant": "fixed", "verdict": results.REGRESSION, "seconds": 20.5,
         "cases": [dict(c, definition="0_kgate-backlog")
                   for c in cases(ipv4_data_fin="fail", ipv4_data_data="skip")]
         + bench_cases(figs={"bulk_ratio": (1.02, "x")})},
        {"target": "x86_64", "variant": "known-bad", "verdict": results.MISSED,
         "cases": cases(**dict(ALL_BAD, ipv6_data_rst="pass"))},
        {"target": "mips", "variant": "fixed", "verdict": results.INFRA, "reason": "job incomplete",
         "errors": ["boot: timed out"], "cases": []},
    ]
    root = ET.fromstring(reports.junit({"run": "r1", "jobs": jobs}))
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == ["x86_64.fixed", "x86_64.known-bad", "mips.fixed"]
    fixed = suites["x86_64.fixed"]
    assert fixed.get("failures") == "1" and fixed.get("skipped") == "1" and fixed.get("time") == "20.5"
    failed = [t.get("name") for t in fixed.iter("testcase") if t.find("failure") is not None]
    assert failed == ["backlog.ipv4.data_fin"]
    ratio = [t for t in fixed.iter("testcase") if t.get("name") == "bulk_ratio"][0]
    assert ratio.get("classname") == "x86_64.fixed.kgate-bench" and ratio.find("system-out").text == "1.02 x"
    # The control's expected failures pass; the one it passed is the failure.
    bad = suites["x86_64.known-bad"]
    assert [t.get("name") for t in bad.iter("testcase") if t.find("failure") is not None] == \
        ["backlog.ipv6.data_rst"]
    infra = suites["mips.fixed"]
    assert infra.get("errors") == "1" and infra.find("testcase/error").get("message") == "job incomplete"
    assert root.get("failures") == "2" and root.get("errors") == "1"


# --- compare -------------------------------------------------------------------

def _doc(jobs):
    return {"schema": results.SCHEMA_VERSION, "run": "r", "jobs": jobs}


def _job(target, variant, verdict, cs):
    return {"target": target, "variant": variant, "verdict": verdict, "cases": cs}


def test_compare_finds_what_got_worse_and_better():
    from kgate import compare
    base = _doc([_job("x86_64", "fixed", results.REGRESSION, cases(ipv4_data_urg="fail")),
                 _job("x86_64", "known-bad", results.CAUGHT, cases(**ALL_BAD)),
                 _job("mips", "fixed", results.PASS, cases())])
    same, failed = compare.compare(base, base)
    assert same == [] and not failed
    new_cases = [c for c in cases(ipv4_data_fin="fail", ipv6_data_data="skip")
                 if c["case"] != "backlog.ipv6.flood"]
    new = _doc([_job("x86_64", "fixed", results.REGRESSION, new_cases),
                _job("x86_64", "known-bad", results.MISSED,
                     cases(**dict(ALL_BAD, ipv4_data_rst="pass"))),
                _job("arm", "fixed", results.PASS, cases())])
    lines, failed = compare.compare(base, new)
    text = "\n".join(lines)
    assert failed
    assert "x86_64/fixed: NEW FAILURES: backlog.ipv4.data_fin" in text
    assert "x86_64/fixed: fixed: backlog.ipv4.data_urg" in text
    assert "x86_64/fixed: newly inconclusive: backlog.ipv6.data_data" in text
    assert "x86_64/fixed: MISSING cases: backlog.ipv6.flood" in text
    assert "x86_64/known-bad: verdict WORSE: caught -> missed" in text
    assert "backlog.ipv4.data_rst (the control no longer fails it)" in text
    assert "mips/fixed: MISSING from the new run" in text
    assert "arm/fixed: new in this run (pass)" in text


def test_compare_figures_beyond_the_spread_only():
    from kgate import compare

    def run(med, lo, hi):
        figs = {"bulk_ratio": (med, "x"), "bulk_ratio_min": (lo, "x"), "bulk_ratio_max": (hi, "x")}
        return _doc([_job("x86_64", "fixed", results.PASS, cases() + bench_cases(figs=figs))])
    base = run(1.0, 0.9, 1.1)
    assert compare.compare(base, run(0.95, 0.7, 1.2))[0] == []        # within the spread
    lines, failed = compare.compare(base, run(0.6, 0.5, 0.7))
    assert len(lines) == 1 and "figure worse: bulk_ratio 1 -> 0.6 x" in lines[0] and not failed
    assert compare.figures_worse(lines)


def test_compare_command_and_baseline(tmp_path, monkeypatch, capsys, use_workspace):
    from kgate import cli
    base = tmp_path / "base"
    new = tmp_path / "new"
    for d, doc in ((base, _doc([_job("x86_64", "fixed", results.PASS, cases())])),
                   (new, _doc([_job("x86_64", "fixed", results.REGRESSION,
                                    cases(ipv4_data_fin="fail"))]))):
        d.mkdir()
        (d / "results.json").write_text(json.dumps(doc))
    use_workspace(tmp_path)
    assert cli.main(["baseline", str(base)]) == 0
    assert cli.main(["compare", "--", str(tmp_path / "baseline" / "results.json"), str(new)]) == 1
    assert "NEW FAILURES: backlog.ipv4.data_fin" in capsys.readouterr().out
    assert cli.main(["compare", str(base), str(base)]) == 0
    (tmp_path / "bad.json").write_text("{}")
    assert cli.main(["compare", str(tmp_path / "bad.json"), str(base)]) == 2
    assert cli.main(["compare", str(tmp_path / "nowhere"), str(base)]) == 2


# --- the kernel you want to ship (candidate) -----------------------------------

def _setup(argv):
    from kgate import cli
    return cli.candidate_setup(cli.parser().parse_args(["run"] + argv))


def test_candidate_from_the_command_line(tmp_path):
    names, variants, cand = _setup([])
    assert (names, variants) == (common.default_targets(), ["fixed", "known-bad"])
    assert not cand and cand.describe() == {}
    img = tmp_path / "bzImage"
    img.write_bytes(b"x")
    names, variants, cand = _setup(["--image", f"x86_64={img}", "--image", f"arm={img}"])
    assert names == ["arm", "x86_64"] and variants == ["candidate", "known-bad"]
    assert cand.images == {"x86_64": str(img), "arm": str(img)}
    for bad in (["--image", "sparc=/x"], ["--image", "x86_64"], ["--variant", "candidate"],
                ["--image", f"x86_64={img}", "--patches", str(tmp_path)],
                ["--patches", str(tmp_path / "none")], ["--patches", str(tmp_path)],
                ["--source", str(tmp_path)]):
        with pytest.raises(common.KgateError):
            _setup(bad)


def test_candidate_patches_go_on_top_of_the_fixed_series(tmp_path):
    (tmp_path / "0002-b.patch").write_text(_diff("net/b.c", "b", "b1"))
    (tmp_path / "0001-a.patch").write_text(_diff("net/a.c", "a", "a1"))
    (tmp_path / "notes.txt").write_text("not a patch")
    cand = kernel.Candidate(patches=str(tmp_path))
    fixed = kernel.variant_patches("fixed")
    got = kernel.variant_patches("candidate", cand)
    assert got == fixed + [str(tmp_path / "0001-a.patch"), str(tmp_path / "0002-b.patch")]
    key = kernel.tree_key("candidate", cand)
    (tmp_path / "0002-b.patch").write_text(_diff("net/b.c", "b", "b2"))
    assert kernel.tree_key("candidate", cand) != key    # a changed patch is a new tree
    (tmp_path / "series").write_text("0002-b.patch\n# 0001-a.patch\n")
    assert kernel.variant_patches("candidate", cand) == fixed + [str(tmp_path / "0002-b.patch")]
    (tmp_path / "series").write_text("0003-missing.patch\n")
    with pytest.raises(common.KgateError):
        kernel.variant_patches("candidate", cand)
    # without a candidate, there is no candidate kernel
    with pytest.raises(common.KgateError, match="needs --patches"):
        kernel.variant_patches("candidate")


def test_debug_variants_follow_their_kernel_under_test(monkeypatch):
    from kgate import run as runner
    assert common.with_debug(["fixed", "known-bad"]) == ["fixed", "fixed-debug", "known-bad"]
    assert common.with_debug(["candidate", "known-bad"]) == \
        ["candidate", "candidate-debug", "known-bad"]
    assert [common.base_variant(v) for v in common.DEBUG_VARIANTS] == ["fixed", "candidate"]
    assert kernel.variant_patches("fixed-debug") == kernel.variant_patches("fixed")
    x86 = common.target("x86_64")
    plain, debug = kernel.fragments(x86), kernel.fragments(x86, "fixed-debug")
    assert debug[:len(plain)] == plain and len(debug) == len(plain) + 2
    if os.path.exists(kernel.kernel_series().tarball):
        assert kernel.tree_key("fixed-debug") == kernel.tree_key("fixed")
        assert kernel.cache_key(x86, "fixed-debug") != kernel.cache_key(x86, "fixed")
    monkeypatch.setattr(kernel, "has_debug", lambda t: t == "x86_64")
    with pytest.raises(common.KgateError):
        kernel.fragments(common.target("arm"), "fixed-debug")
    assert runner.target_variants("arm", ["fixed", "fixed-debug"]) == ["fixed"]
    assert runner.target_variants("x86_64", ["fixed", "fixed-debug"]) == ["fixed", "fixed-debug"]


def test_a_debug_job_has_longer_timeouts():
    tgt = common.target("x86_64")
    plain = render.validate_job(render.render_job(tgt, "fixed", ART["kernel"], ART["rootfs"]))
    debug = render.validate_job(render.render_job(tgt, "fixed-debug", ART["kernel"],
                                                  ART["rootfs"]))
    factor = render.DEBUG_TIMEOUT_FACTOR
    assert debug["timeouts"]["job"]["minutes"] == plain["timeouts"]["job"]["minutes"] * factor
    assert debug["metadata"]["kgate.variant"] == "fixed-debug"
    lab = render.validate_job(render.render_job(tgt, "fixed-debug", ART["kernel"], ART["rootfs"],
                                                timeouts={"job": 99}))
    assert lab["timeouts"]["job"] == {"minutes": 99}
    assert lab["timeouts"]["action"] == debug["timeouts"]["action"]


def test_builds_never_see_the_calling_makes_variables(monkeypatch):
    # 'make run ARCH="x86_64 arm64"' exports ARCH and MAKEFLAGS; busybox's
    # Makefile took them for its own and failed to configure.
    monkeypatch.setenv("ARCH", "x86_64 arm64")
    monkeypatch.setenv("MAKEFLAGS", " -- ARCH=x86_64\\ arm64")
    env = kernel.make_env()
    assert "ARCH" not in env and "MAKEFLAGS" not in env and env["LC_ALL"] == "C"
    assert common.clean_env(X="1")["X"] == "1"


def test_debug_from_the_command_line(tmp_path):
    assert _setup(["--debug", "x86_64"])[:2] == (["x86_64"], ["fixed", "fixed-debug", "known-bad"])
    (tmp_path / "a.patch").write_text(_diff("net/a.c", "a", "a1"))
    assert _setup(["--debug", "--patches", str(tmp_path)])[1] == \
        ["candidate", "candidate-debug", "known-bad"]
    img = tmp_path / "bzImage"
    img.write_bytes(b"x")
    for bad in (["--debug", "--image", f"x86_64={img}"], ["--variant", "candidate-debug"]):
        with pytest.raises(common.KgateError):
            _setup(bad)


def test_debug_kernels_are_judged_like_their_plain_twins():
    for v in common.DEBUG_VARIANTS:
        assert results.job_verdict(v, "complete", cases(**{"kernel-log": "fail"}))[0] == \
            results.REGRESSION
    jobs = [{"target": "x86_64", "variant": "fixed", "verdict": results.PASS},
            {"target": "x86_64", "variant": "fixed-debug", "verdict": results.REGRESSION}]
    verdict, code, summary = results.run_verdict(jobs)
    assert verdict == results.REGRESSION and "fixed-debug kernel passed on 0/1" in summary


def test_candidate_judged_like_fixed():
    assert results.job_verdict("candidate", "complete", cases(ipv4_data_fin="fail"))[0] == \
        results.REGRESSION
    assert results.job_verdict("candidate", "complete", cases(csum_rfc1071="fail"))[0] == \
        results.REGRESSION
    jobs = [{"target": "x86_64", "variant": "candidate", "verdict": results.PASS},
            {"target": "x86_64", "variant": "known-bad", "verdict": results.CAUGHT}]
    assert results.run_verdict(jobs) == (results.PASS, 0, "candidate kernel passed on 1/1 targets; "
                                         "known-bad control caught on 1/1 targets")
    assert render.has_bench("candidate")


def test_the_html_report_shows_each_kernels_first_splat_whole():
    from kgate import reports
    splat = ["BUG: KASAN: use-after-free in tcp_add_backlog+0x1/0x2",
             "Read of size 4 at addr ffff8880 by task <idle>/0"] + [f"line {i}" for i in range(40)]
    log_cases = cases(**{"kernel-log": "fail"})
    for c in log_cases:
        if c["case"] == "kernel-log":
            c["splat"] = splat
    jobs = [{"target": "x86_64", "variant": "fixed-debug", "verdict": results.REGRESSION,
             "reason": "failed: kernel-log", "cases": log_cases},
            {"target": "x86_64", "variant": "fixed", "verdict": results.PASS, "cases": cases()}]
    page = reports.html({"run": "r", "verdict": "regression", "jobs": jobs})
    assert page.count('<pre class="splat"') == 1
    assert 'data-job="x86_64/fixed-debug">BUG: KASAN: use-after-free in tcp_add_backlog' in page
    assert "line 39</pre>" in page and "&lt;idle&gt;" in page
    assert "Kernel log" not in reports.html({"run": "r", "verdict": "pass", "jobs": jobs[1:]})


def test_html_report_in_headless_chromium(tmp_path):
    """The page renders in a real browser and its matrix holds the right
    cells (read back from the DOM chromium built)."""
    import shutil
    import html.parser
    from kgate import reports
    chromium = shutil.which("chromium")
    if not chromium:
        pytest.skip("chromium not installed (make deps installs it)")
    jobs = [
        {"target": "x86_64", "variant": "fixed", "verdict": results.REGRESSION,
         "reason": "failed: backlog.ipv4.data_fin", "seconds": 20.0, "log": "x86_64-fixed/lava.log",
         "cases": cases(ipv4_data_fin="fail", ipv6_data_data="skip")},
        {"target": "x86_64", "variant": "known-bad", "verdict": results.CAUGHT, "reason": "",
         "seconds": 30.0, "log": "x86_64-known-bad/lava.log", "cases": cases(**ALL_BAD)},
    ]
    doc = {"run": "r<1>", "verdict": results.REGRESSION, "exit_code": 1, "summary": "s",
           "started": "t0", "finished": "t1", "jobs": jobs}
    page = tmp_path / "report.html"
    page.write_text(reports.html(doc, figures.svg(jobs), None))
    shot = tmp_path / "shot.png"
    base = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(base + ["--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    subprocess.run(base + ["--window-size=1200,900", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120)
    assert shot.stat().st_size > 10000

    class Cells(html.parser.HTMLParser):
        def __init__(self):
            super().__init__()
            self.cells, self.case, self.cur, self.gate = {}, None, None, None

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "tr" and "data-case" in a:
                self.case = a["data-case"]
            if tag == "td" and "data-job" in a:
                self.cur = (self.case, a["data-job"], a.get("class"))
            if tag == "span" and a.get("id") == "gate":
                self.cur = ("gate",)

        def handle_data(self, data):
            if self.cur == ("gate",):
                self.gate = data
            elif self.cur:
                self.cells[self.cur[:2]] = (self.cur[2], data)
            self.cur = None

    p = Cells()
    p.feed(dom)
    assert p.gate == "REGRESSION"
    assert p.cells[("backlog.ipv4.data_fin", "x86_64/fixed")] == ("fail", "FAIL")
    assert p.cells[("backlog.ipv4.data_fin", "x86_64/known-bad")] == ("xfail", "fail (expected)")
    assert p.cells[("backlog.ipv6.data_data", "x86_64/fixed")] == ("skip", "skip")
    assert p.cells[("backlog.ipv4.data_data", "x86_64/known-bad")] == ("pass", "pass")
    g = results.gate()
    assert len(p.cells) == 2 * (len(g.cases + g.run_cases + g.unit_run_cases) + 2)
    assert "<h1>kgate run r&lt;1&gt;</h1>" in dom      # text is escaped


def test_soak_reports_what_changed():
    from kgate import soak
    a = {"jobs": [_job("x86_64", "fixed", results.PASS, cases())]}
    b = {"jobs": [_job("x86_64", "fixed", results.INCONCLUSIVE, cases(ipv4_data_data="skip"))]}
    lines, counts = soak.flips([a, a, a])
    assert lines == [] and counts["changed"] == 0 and counts["runs"] == 3
    lines, counts = soak.flips([a, b, a])
    assert lines == ["x86_64/fixed backlog.ipv4.data_data: pass skip pass",
                     "x86_64/fixed verdict: pass inconclusive pass"]
    assert counts["changed"] == 2
    with pytest.raises(common.KgateError):
        soak.soak(1, ["x86_64"], ["fixed"])


def test_collect_finds_the_newest_submitted_run(tmp_path):
    from kgate import lab
    with pytest.raises(common.KgateError):
        lab.newest_submitted(str(tmp_path))
    for name, submitted in (("20261201T000000Z", True), ("20261202T000000Z", True),
                            ("20261203T000000Z", False)):
        (tmp_path / name).mkdir()
        if submitted:
            (tmp_path / name / lab.SUBMITTED).write_text("{}")
    assert lab.newest_submitted(str(tmp_path)) == str(tmp_path / "20261202T000000Z")


def test_a_candidate_patch_that_does_not_apply_fails_the_candidate(fake_source, tmp_path,
                                                                     monkeypatch):
    pristine, use = fake_source
    # the user's patch (in the --patches folder) does not apply
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.patch").write_text(_diff("net/b.c", "b", "b1"))
    use(_diff("net/a.c", "not a", "a mutant"))
    with pytest.raises(common.CandidateError, match="does not apply"):
        kernel.prepare_tree("candidate", kernel.Candidate(patches=str(tmp_path)))
    # one of our own series does not apply to Debian's source: ours
    with pytest.raises(common.InfraError, match="does not apply"):
        kernel.prepare_tree("candidate", kernel.Candidate(patches=str(tmp_path / "elsewhere")))


@pytest.mark.parametrize("error,code,says", [
    (common.CandidateError, 1, "the candidate failed"),
    (common.InfraError, 3, "infrastructure"),
    (common.KgateError, 2, "error"),
])
def test_exit_code_of_each_kind_of_error(monkeypatch, capsys, error, code, says):
    def boom(args):
        raise error("what happened")
    monkeypatch.setattr(cli, "cmd_list", boom)
    assert cli.main(["list"]) == code
    err = capsys.readouterr().err
    assert f"kgate: {says}: what happened" in err
    assert ("gate FAILED" in err) == (error is common.CandidateError)


def test_a_failed_build_shows_the_compilers_lines(tmp_path):
    log = tmp_path / "build.log"
    script = tmp_path / "cc.sh"
    script.write_text("""echo '  CC      lib/error-inject.o'
echo "net/ipv4/tcp_ipv4.c: In function 'tcp_add_backlog':"
echo "net/ipv4/tcp_ipv4.c:1852:9: error: 'foo' undeclared"
echo ' 1852 |         foo = 1;'
echo '      |         ^~~'
echo '  CC      net/ipv4/tcp.o'
echo 'make[3]: *** [scripts/Makefile.build:250: net/ipv4/tcp_ipv4.o] Error 1'
exit 2
""")
    with pytest.raises(common.CandidateError) as e:
        common.run_logged(["sh", str(script)], str(log), "kernel x86_64/candidate",
                          error=common.CandidateError)
    lines = str(e.value).splitlines()[1:]
    assert lines == ["net/ipv4/tcp_ipv4.c: In function 'tcp_add_backlog':",
                     "net/ipv4/tcp_ipv4.c:1852:9: error: 'foo' undeclared",
                     " 1852 |         foo = 1;", "      |         ^~~",
                     "make[3]: *** [scripts/Makefile.build:250: net/ipv4/tcp_ipv4.o] Error 1"]


def test_infrastructure_is_retried_and_every_attempt_kept(scripted_jobs):
    runner, script = scripted_jobs
    script["x86_64"] = [("incomplete", []), ("complete", cases())]
    script["mips"] = [("incomplete", []), ("incomplete", [])]
    doc, run_dir = runner.run(["x86_64", "mips"], ["fixed"], retry_infra=1, latest=False,
                              bench=False)
    by = {j["target"]: j for j in doc["jobs"]}
    assert by["x86_64"]["verdict"] == results.PASS
    assert [a["verdict"] for a in by["x86_64"]["attempts"]] == [results.INFRA, results.PASS]
    assert by["x86_64"]["log"] == "x86_64-fixed.retry1/lava.log"
    assert os.path.isdir(os.path.join(run_dir, "x86_64-fixed"))
    assert by["mips"]["verdict"] == results.INFRA and len(by["mips"]["attempts"]) == 2
    assert "x86_64/fixed ran 2 times: infrastructure" in results.matrix(doc["jobs"])


def test_a_failed_case_is_never_retried(scripted_jobs):
    runner, script = scripted_jobs
    # the job broke off after a case failed: a regression, not retried
    script["x86_64"] = [("incomplete", cases(**{"backlog.ipv4.data_fin": "fail"})),
                        ("complete", cases())]
    doc, _ = runner.run(["x86_64"], ["fixed"], retry_infra=3, latest=False, bench=False)
    job = doc["jobs"][0]
    assert job["verdict"] == results.REGRESSION and "attempts" not in job
    assert len(script["x86_64"]) == 1


def test_no_retry_when_told(scripted_jobs):
    runner, script = scripted_jobs
    script["x86_64"] = [("incomplete", []), ("complete", cases())]
    doc, _ = runner.run(["x86_64"], ["fixed"], retry_infra=0, latest=False, bench=False)
    assert doc["jobs"][0]["verdict"] == results.INFRA and "attempts" not in doc["jobs"][0]


# --- --repeat: runs of a job that disagree are flaky ----------------------

def _try(verdict, cs, log="x/lava.log", reason="why"):
    return {"target": "x86_64", "variant": "fixed", "verdict": verdict, "reason": reason,
            "seconds": 1.0, "log": log, "cases": cs}


FIN = "backlog.ipv4.data_fin"


@pytest.mark.parametrize("verdicts,expect", [
    ([results.PASS, results.REGRESSION, results.PASS], results.FLAKY),
    ([results.PASS, results.ERROR], results.FLAKY),
    ([results.CAUGHT, results.MISSED], results.FLAKY),
    # no run passed: an inconclusive run is no evidence against a failure
    ([results.INCONCLUSIVE, results.REGRESSION], results.REGRESSION),
    ([results.INCONCLUSIVE, results.MISSED], results.MISSED),
    ([results.PASS, results.PASS], results.PASS),
    ([results.PASS, results.INCONCLUSIVE], results.INCONCLUSIVE),
    ([results.REGRESSION, results.REGRESSION], results.REGRESSION),
    # a run that never got judged adds no evidence either way
    ([results.PASS, results.INFRA], results.INFRA),
    ([results.REGRESSION, results.INFRA], results.REGRESSION),
])
def test_runs_that_disagree_make_a_job_flaky(verdicts, expect):
    tries = [[_try(v, cases(**({"ipv4_data_fin": "fail"} if v in (results.REGRESSION,)
                              else {})), log=f"r{i}/lava.log")]
             for i, v in enumerate(verdicts)]
    job = results.combine_runs(tries)
    assert job["verdict"] == expect
    assert job["runs"] == len(verdicts)
    if expect == results.FLAKY:
        assert job["reason"].startswith("the runs disagree: ")
        # the log shown is that of the run that failed
        failed = next(i for i, v in enumerate(verdicts)
                      if v in (results.REGRESSION, results.ERROR, results.MISSED))
        assert job["log"] == f"r{failed}/lava.log"
    assert results.EXIT_CODES[results.run_verdict([job])[0]] == results.EXIT_CODES[expect]


def test_flaky_cases_are_named_and_fail_the_merged_result():
    tries = [[_try(results.REGRESSION, cases(ipv4_data_fin="fail"))],
             [_try(results.REGRESSION, cases(ipv4_data_rst="fail"))],
             [_try(results.REGRESSION, cases(ipv4_data_fin="fail"))]]
    job = results.combine_runs(tries)
    # every run failed a case: a regression, with the cases that came and went named
    assert job["verdict"] == results.REGRESSION
    assert job["flaky_cases"] == {FIN: ["fail", "pass", "fail"],
                                  "backlog.ipv4.data_rst": ["pass", "fail", "pass"]}
    by = {c["case"]: c["result"] for c in job["cases"]}
    assert by[FIN] == "fail" and by["backlog.ipv4.data_rst"] == "fail"
    assert f"x86_64/fixed FLAKY {FIN}: fail pass fail" in results.matrix([job])


def test_a_figure_of_several_runs_is_their_median():
    def bench(v):
        return [{"definition": "1_kgate-bench", "case": "bulk_ratio", "result": "pass",
                 "measurement": v, "units": "x"}]
    job = results.combine_runs([[_try(results.PASS, bench(v))] for v in (3.0, 1.0, 2.0)])
    assert job["cases"][0]["measurement"] == 2.0
    job = results.combine_runs([[_try(results.PASS, bench(v))] for v in (3.0, 1.0)])
    assert job["cases"][0]["measurement"] == 2.0


def test_repeat_runs_each_job_n_times(scripted_jobs):
    runner, script = scripted_jobs
    # run 2 fails a case, runs 1 and 3 pass; run 3 needed a retry
    script["x86_64"] = [("complete", cases()), ("complete", cases(ipv4_data_fin="fail")),
                        ("incomplete", []), ("complete", cases())]
    doc, run_dir = runner.run(["x86_64"], ["fixed"], repeat=3, latest=False, bench=False)
    job = doc["jobs"][0]
    assert job["verdict"] == results.FLAKY and doc["exit_code"] == 6
    assert job["flaky_cases"] == {FIN: ["pass", "fail", "pass"]}
    assert job["log"] == "x86_64-fixed.run2/lava.log"
    assert [(a["run"], a["verdict"], a["log"]) for a in job["attempts"]] == [
        (1, results.PASS, "x86_64-fixed/lava.log"),
        (2, results.REGRESSION, "x86_64-fixed.run2/lava.log"),
        (3, results.INFRA, "x86_64-fixed.run3/lava.log"),
        (3, results.PASS, "x86_64-fixed.run3.retry1/lava.log")]
    for folder in ("x86_64-fixed", "x86_64-fixed.run2", "x86_64-fixed.run3",
                   "x86_64-fixed.run3.retry1"):
        assert os.path.isdir(os.path.join(run_dir, folder))
    page = open(os.path.join(run_dir, "report.html"), encoding="utf-8").read()
    assert 'class="verdict v-flaky"' in page and "FLAKY: pass fail pass" in page
    junit = open(os.path.join(run_dir, "junit.xml"), encoding="utf-8").read()
    assert "flaky: its runs gave pass fail pass" in junit


def test_repeat_must_be_at_least_one(capsys):
    with pytest.raises(SystemExit) as e:
        cli.parser().parse_args(["run", "--repeat", "0", "x86_64"])
    assert e.value.code == 2
    assert "wants a whole number, 1 or more" in capsys.readouterr().err


# --- the lab path: retries and repeats through lavacli ---------------------

def test_lab_retries_an_infrastructure_job(fake_lab):
    lab, fake = fake_lab([("Incomplete", []), ("Complete", cases())])
    run_dir = lab.submit("me", ["x86_64"], ["fixed"], "http://lab/")
    doc = lab.collect(run_dir, retry_infra=1)
    job = doc["jobs"][0]
    assert job["verdict"] == results.PASS and doc["exit_code"] == 0
    assert [(a["verdict"], a["log"]) for a in job["attempts"]] == [
        (results.INFRA, "x86_64-fixed/lava.log"), (results.PASS, "x86_64-fixed.retry1/lava.log")]
    # the retry submitted the definition kept in the run folder, and is on record
    kept = os.path.join(run_dir, "x86_64-fixed.job.yaml")
    assert fake.submitted == [kept, kept]
    record = json.load(open(os.path.join(run_dir, lab.SUBMITTED)))
    assert [(j["id"], j["retry"]) for j in record["jobs"]] == [(100, 0), (101, 1)]
    # collecting again reads the retry on record; it submits nothing
    doc = lab.collect(run_dir, retry_infra=1)
    assert doc["jobs"][0]["verdict"] == results.PASS and len(fake.submitted) == 2


def test_lab_never_retries_a_failed_case_and_stops_at_the_limit(fake_lab):
    lab, fake = fake_lab([("Complete", cases(ipv4_data_fin="fail")),
                          ("Incomplete", []), ("Incomplete", []), ("Incomplete", [])])
    run_dir = lab.submit("me", ["x86_64", "mips"], ["fixed"], "http://lab/")
    doc = lab.collect(run_dir, retry_infra=2)
    by = {j["target"]: j for j in doc["jobs"]}
    assert by["x86_64"]["verdict"] == results.REGRESSION and "attempts" not in by["x86_64"]
    assert by["mips"]["verdict"] == results.INFRA and len(by["mips"]["attempts"]) == 3
    assert len(fake.submitted) == 4 and doc["exit_code"] == 1


def test_lab_repeat_submits_each_job_n_times(fake_lab):
    lab, fake = fake_lab([("Complete", cases()), ("Complete", cases(ipv4_data_fin="fail"))])
    run_dir = lab.submit("me", ["x86_64"], ["fixed"], "http://lab/", repeat=2)
    doc = lab.collect(run_dir, retry_infra=0)
    job = doc["jobs"][0]
    assert job["verdict"] == results.FLAKY and doc["exit_code"] == 6
    assert job["log"] == "x86_64-fixed.run2/lava.log" and job["lava_job"] == 101


def test_lab_records_where_and_when_each_job_ran(fake_lab):
    lab, fake = fake_lab([("Complete", cases()), ("Complete", cases())])
    run_dir = lab.submit("me", ["x86_64"], ["fixed", "known-bad"], "http://lab/")
    doc = lab.collect(run_dir, retry_infra=0)
    where = [(j["lava_job"], j["lava_device"], j["lava_worker"], j["lava_start"]) for j in doc["jobs"]]
    assert where == [(100, "qemu-0", "worker-0", "20261206T10:00:00"),
                     (101, "qemu-1", "worker-1", "20261206T10:00:00")]
    pairs = lab.side_by_side(doc["jobs"])
    assert [(a["lava_job"], b["lava_job"]) for a, b in pairs] == [(100, 101)]


def test_side_by_side_wants_other_workers_and_overlapping_times():
    from kgate import lab

    def ran(job, worker, start, end):
        return {"lava_job": job, "lava_worker": worker,
                "lava_start": f"20261206T10:{start}", "lava_end": f"20261206T10:{end}"}
    # one after the other on two workers; at once on one worker
    assert lab.side_by_side([ran(1, "w1", "00:00", "00:30"), ran(2, "w2", "00:30", "01:00")]) == []
    assert lab.side_by_side([ran(1, "w1", "00:00", "00:30"), ran(2, "w1", "00:10", "00:40")]) == []
    # a job still running or never placed on a worker counts for nothing
    assert lab.side_by_side([ran(1, "w1", "00:00", "00:30"), ran(2, "w2", "00:10", None),
                             dict(ran(3, None, "00:00", "00:30"))]) == []
    # at once on two workers, the attempts of a retried job included
    retried = {"lava_job": 3, "attempts": [ran(3, "w1", "00:00", "00:05"), ran(4, "w1", "00:06", "00:40")]}
    pairs = lab.side_by_side([retried, ran(2, "w2", "00:20", "00:50")])
    assert [(a["lava_job"], b["lava_job"]) for a, b in pairs] == [(4, 2)]


def test_the_runs_of_a_job_never_run_beside_each_other(scripted_jobs, monkeypatch):
    import threading
    import time
    runner, _ = scripted_jobs
    running, seen, lock = set(), [], threading.Lock()

    def run_job(job_path, dev, outdir, timeout):
        job = os.path.basename(outdir).split(".")[0]
        with lock:
            seen.append(job in running)
            running.add(job)
        # the fixed kernel's runs are slower: a free worker would
        # start the next fixed run beside this one, were it not in rounds
        time.sleep(0.1 if job.endswith("fixed") else 0.02)
        with lock:
            running.discard(job)
        return {"health": "complete", "cases": cases(), "errors": [], "timing": {},
                "tail": []}, 0.05
    monkeypatch.setattr(runner, "run_job", run_job)
    doc, _ = runner.run(["x86_64"], ["fixed", "candidate"], parallel=2, repeat=3, latest=False,
                        bench=False)
    assert len(seen) == 6 and not any(seen)


def test_lab_does_not_resubmit_a_job_still_running_or_without_its_kept_definition(fake_lab):
    lab, fake = fake_lab([("Unknown", [])])
    run_dir = lab.submit("me", ["x86_64"], ["fixed"], "http://lab/")
    doc = lab.collect(run_dir, retry_infra=2)
    assert doc["jobs"][0]["verdict"] == results.INFRA and len(fake.submitted) == 1
    # a run submitted before definitions were kept in its folder
    lab, fake = fake_lab([("Incomplete", [])])
    run_dir = lab.submit("me", ["x86_64"], ["fixed"], "http://lab/")
    os.unlink(os.path.join(run_dir, "x86_64-fixed.job.yaml"))
    doc = lab.collect(run_dir, retry_infra=2)
    assert doc["jobs"][0]["verdict"] == results.INFRA and len(fake.submitted) == 1


# --- the kernel-log case ----------------------------------------------------

def _entries(*lines, results_first=True):
    out = []
    if results_first:
        out.append({"lvl": "results", "msg": {"definition": "0_kgate-backlog",
                                              "case": "csum_rfc1071", "result": "pass"}})
    out += [{"lvl": "target", "msg": m} for m in lines]
    return "\n".join(json.dumps(e) for e in out) + "\n"


WARN = ["[   12.345678] ------------[ cut here ]------------",
        "[   12.345679] WARNING: CPU: 1 PID: 7 at net/ipv4/tcp_ipv4.c:1900 tcp_add_backlog+0x1/0x2",
        "[   12.345680] Call Trace:", "[   12.345681]  <IRQ>",
        "[   12.345682] ---[ end trace 0000000000000000 ]---", "[   12.345683] after"]


def test_a_clean_dump_passes_the_kernel_log_case():
    log = _entries("kgate-kernel-log: begin", "kgate-dmesg: [    0.000000] Linux version 6.1",
                   "kgate-kernel-log: end, 1 lines")
    klog = lavalog.parse(log)["cases"][-1]
    assert klog == {"definition": "kgate", "case": "kernel-log", "result": "pass"}


def test_a_splat_in_the_dump_or_on_the_console_fails_it_with_its_lines():
    dumped = lavalog.parse(_entries("kgate-kernel-log: begin",
                                    *[f"kgate-dmesg: {ln}" for ln in WARN],
                                    "kgate-kernel-log: end, 6 lines"))
    klog = dumped["cases"][-1]
    # from the cut-here line to the end of the trace
    assert klog["result"] == "fail" and klog["splat"] == WARN[:5]
    # the dump's lines are not the program's last lines
    assert not any("cut here" in ln for ln in dumped["tail"])
    # a splat on the console counts even when the dump never came
    console = lavalog.parse(_entries(*WARN))
    assert console["cases"][-1]["result"] == "fail"
    # a line of test output is not a kernel line
    assert [c["case"] for c in lavalog.parse(_entries("# WARNING: from a test"))["cases"]] == \
        ["csum_rfc1071"]


KASAN = ["[    5.0] ==================================================================",
         "[    5.0] BUG: KASAN: slab-use-after-free in tcp_add_backlog+0x1/0x2",
         "[    5.0] Read of size 4 at addr ffff888000a1b2c4 by task x/7"] + \
        [f"[    5.0]  frame {i}" for i in range(40)] + \
        ["[    5.0] ==================================================================",
         "[    5.1] later"]


@pytest.mark.parametrize("lines,first,last", [
    (KASAN, 0, len(KASAN) - 2),                       # banner to banner, whole
    (["[ 1.0] fine", "[ 1.1] BUG kmalloc-64 (Not tainted): Poison overwritten", "[ 1.2] x"],
     1, 2),
    (["[ 1.0] Internal error: Oops: 96000005 [#1] PREEMPT SMP", "[ 1.1] Call trace:"], 0, 1),
])
def test_splats_are_found_whole(lines, first, last):
    assert lavalog._splat(lines) == lines[first:last + 1]


@pytest.mark.parametrize("line", [
    "[    0.1] Spectre V2 : WARNING: Unprivileged eBPF is enabled with eIBRS on",
    "[   12.3] traps: backlog_bench[77] general protection fault ip:401000 sp:7ffe error:0",
    "[    0.2] Linux version 6.1.192 (kgate@kgate) #1",
])
def test_notices_and_user_crashes_are_no_splat(line):
    assert lavalog._splat([line]) == []


def test_a_wrapped_log_buffer_shows_the_first_whole_splat():
    # A warning storm overwrote the boot and the first report's head:
    # the dump starts in a stack dump; the next whole report is shown.
    cut_head = ["[   30.1] CPU: 1 PID: 7 Comm: x Tainted: G        W", "[   30.1] Call Trace:",
                "[   30.1] ---[ end trace 0000000000000000 ]---"]
    klog = lavalog.kernel_log_case([], cut_head + WARN, True)
    assert klog["result"] == "fail" and klog["splat"] == WARN[:5]
    # only a headless one: it is still a failure, shown as it is
    assert lavalog.kernel_log_case([], cut_head, True)["splat"] == cut_head
    # a dump that starts at boot is taken as it is
    boot = ["[    0.000000] Linux version 6.1"] + cut_head[1:] + WARN
    assert lavalog.kernel_log_case([], boot, True)["splat"] == cut_head[1:]


def test_no_kernel_log_case_before_the_tests_ran_or_without_the_whole_dump():
    assert lavalog.parse(_entries(*WARN, results_first=False))["cases"] == []
    cut = _entries("kgate-kernel-log: begin", "kgate-dmesg: [    0.1] fine")
    assert [c["case"] for c in lavalog.parse(cut)["cases"]] == ["csum_rfc1071"]


def test_the_kernel_log_decides_the_kernel_under_test_not_the_control():
    bad_log = [dict(c, splat=WARN[1:2]) if c["case"] == "kernel-log" else c
               for c in cases(**{"kernel-log": "fail"})]
    v, reason = results.job_verdict("fixed", "complete", bad_log)
    assert v == results.REGRESSION and "kernel-log" in reason
    assert "WARNING: CPU: 1" in results.matrix([{"target": "x86_64", "variant": "fixed",
                                                 "verdict": v, "cases": bad_log}])
    control = [dict(c, result="fail") if c["case"] == "kernel-log" else c
               for c in cases(**ALL_BAD)]
    assert results.job_verdict("known-bad", "complete", control)[0] == results.CAUGHT
    # a job that ended without the dump: the case is missing
    no_dump = [c for c in cases() if c["case"] != "kernel-log"]
    v, reason = results.job_verdict("fixed", "complete", no_dump)
    assert v == results.INFRA and "kernel-log" in reason


@pytest.mark.parametrize("overlap", [True, False])
def test_a_targets_jobs_start_while_the_next_target_builds(scripted_jobs, monkeypatch, overlap):
    import threading
    runner, _ = scripted_jobs
    events, lock = [], threading.Lock()
    first_job = threading.Event()
    art = {"kernel": {"sha256": "k"}, "rootfs": {"sha256": "r"}}

    def artifacts(t, vs, jobs=None, cand=None):
        if t == "arm64" and overlap:
            # the second target builds while the first one's jobs run
            assert first_job.wait(5), "no job started while the next target built"
        with lock:
            events.append(f"built {t}")
        return {v: art for v in vs}

    def run_job(job_path, dev, outdir, timeout):
        with lock:
            events.append(f"job {os.path.basename(outdir)}")
        first_job.set()
        return {"health": "complete", "cases": cases(), "errors": [], "timing": {},
                "tail": []}, 0.05
    monkeypatch.setattr(runner, "artifacts", artifacts)
    monkeypatch.setattr(runner, "run_job", run_job)
    doc, _ = runner.run(["x86_64", "arm64"], ["fixed"], parallel=2, latest=False, bench=False,
                        overlap=overlap)
    assert [j["target"] for j in doc["jobs"]] == ["x86_64", "arm64"]
    assert events.index("job x86_64-fixed") < events.index("built arm64") if overlap else \
        events[:2] == ["built x86_64", "built arm64"]
    assert all(j["timing"]["queued"] >= 0 for j in doc["jobs"])


# --- target groups ---------------------------------------------------------

def test_groups_name_their_targets_in_order_each_once(capsys):
    rows = {"a": {}, "b": {"group": "extra"}, "c": {"disabled": "broken"},
            "d": {"group": "extra"}}
    assert common.default_targets(rows) == ["a"]
    assert "skipping c: broken" in capsys.readouterr().err
    assert common.expand_targets(["extra"], rows) == ["b", "d"]
    assert common.expand_targets(["d", "all"], rows) == ["d", "a", "b"]
    # named alone, a disabled target runs
    assert common.expand_targets(["c", "a", "a"], rows) == ["c", "a"]
    with pytest.raises(common.KgateError, match="groups: all, default, extra"):
        common.expand_targets(["e"], rows)


def test_the_default_group_is_the_design_cards_eight():
    rows = common.load_targets()
    assert common.default_targets(rows) == ["arm", "arm64", "mips", "mips64el", "ppc", "ppc64le",
                                            "i386", "x86_64"]
    assert len(common.expand_targets([common.ALL], rows)) == 12
    # the extra four complete the grid: 64-bit big-endian is among them
    grid = {(r["bits"], r["endian"]) for r in rows.values()}
    assert grid == {(32, "little"), (32, "big"), (64, "little"), (64, "big")}


def test_the_command_line_expands_groups(monkeypatch):
    seen = []
    monkeypatch.setattr(cli, "cmd_run", lambda args: seen.append(args.target) or 0)
    assert cli.main(["run", "extra", "x86_64"]) == 0
    assert cli.main(["run"]) == 0
    assert seen == [["riscv64", "s390x", "ppc64", "mips64", "x86_64"], []]
    assert cli.main(["run", "nosuch"]) == results.EXIT_USAGE


def test_the_control_is_named_in_one_place():
    """The known-bad control's name is common.KNOWN_BAD, nowhere else a
    literal in the tools."""
    tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "kgate")
    found = []
    for name in sorted(os.listdir(tools)):
        if name.endswith(".py"):
            with open(os.path.join(tools, name), encoding="utf-8") as f:
                found += [f"{name}:{i}" for i, line in enumerate(f, 1)
                          if '"known-bad"' in line or "'known-bad'" in line]
    assert len(found) == 1 and found[0].startswith("common.py:"), found
