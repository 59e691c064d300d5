"""Reports of a run for other tools: JUnit XML (one testsuite per target
and variant), read by CI systems (GitLab, Jenkins, ...)."""
import xml.etree.ElementTree as ET

from . import results
from .common import KNOWN_BAD, format_table


def _case_outcome(job, case):
    """(kind, message) of one case in JUnit terms: kind is None (passed),
    'failure' or 'skipped'. On the known-bad control the cases it must
    fail are expected failures: passed when they fail, a failure (the
    gate is blind) when they pass."""
    res = case["result"]
    runs = job.get("flaky_cases", {}).get(case["case"])
    must = results.gate().control_must_fail
    if runs and (job["variant"] != KNOWN_BAD or case["case"] in must):
        return "failure", "flaky: its runs gave " + " ".join(runs)
    if job["variant"] == KNOWN_BAD and case["case"] in must:
        if res == "fail":
            return None, "expected failure: the known-bad control was caught"
        if res == "pass":
            return "failure", "the known-bad control passed this case: the gate is blind here"
    if res == "fail":
        if job["variant"] == KNOWN_BAD:
            return None, "failed on the known-bad control (not required)"
        return "failure", "failed"
    if res == "skip":
        return "skipped", "inconclusive or not applicable"
    return None, ""


def junit(doc):
    """Return the JUnit XML text of a results document."""
    top = ET.Element("testsuites", name=f"kgate {doc.get('run', '')}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for job in doc["jobs"]:
        name = f"{job['target']}.{job['variant']}"
        suite = ET.SubElement(top, "testsuite", name=name)
        props = ET.SubElement(suite, "properties")
        for key in ("verdict", "reason", "health", "kernel_sha256", "rootfs_sha256", "log"):
            if job.get(key) is not None:
                ET.SubElement(props, "property", name=key, value=str(job[key]))
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        if job["verdict"] in (results.INFRA, results.ERROR):
            tc = ET.SubElement(suite, "testcase", classname=name, name="job")
            err = ET.SubElement(tc, "error", message=str(job.get("reason", "")))
            err.text = "\n".join(str(e) for e in job.get("errors", []))
            counts["tests"] += 1
            counts["errors"] += 1
        for case in job.get("cases", []):
            definition = case.get("definition", "") or "tests"
            definition = definition.split("_", 1)[1] if definition[:1].isdigit() else definition
            tc = ET.SubElement(suite, "testcase", classname=f"{name}.{definition}", name=case["case"])
            counts["tests"] += 1
            if case.get("measurement") is not None:
                out = ET.SubElement(tc, "system-out")
                out.text = f"{case['measurement']} {case.get('units', '')}".strip()
                continue
            kind, msg = _case_outcome(job, case)
            if kind == "failure":
                ET.SubElement(tc, "failure", message=msg)
                counts["failures"] += 1
            elif kind == "skipped":
                ET.SubElement(tc, "skipped", message=msg)
                counts["skipped"] += 1
            elif msg:
                ET.SubElement(tc, "system-out").text = msg
        seconds = job.get("seconds")
        suite.set("time", f"{seconds:.1f}" if isinstance(seconds, (int, float)) else "0")
        for k, v in counts.items():
            suite.set(k, str(v))
            totals[k] += v
    for k, v in totals.items():
        top.set(k, str(v))
    ET.indent(top)
    return ET.tostring(top, encoding="unicode", xml_declaration=True) + "\n"


_CSS = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
.verdict { font-weight: bold; padding: 0.2em 0.5em; border-radius: 3px; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; }
th.job { writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap; }
td.pass { background: #d4edda; } td.fail { background: #f8d7da; font-weight: bold; }
td.skip { background: #fff3cd; } td.xfail { background: #e2e3f3; } td.none { color: #999; }
.v-pass, .v-caught { background: #d4edda; } .v-regression, .v-missed { background: #f8d7da; }
.v-flaky { background: #e0c8f0; } td.flaky { background: #e0c8f0; font-weight: bold; }
.v-infrastructure { background: #f5c6cb; } .v-error { background: #f1b0b7; } .v-inconclusive { background: #fff3cd; }
pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; }
"""


def _cell(job, case_name, result):
    """(css class, text) of one matrix cell."""
    if result is None:
        return "none", "-"
    if case_name in job.get("flaky_cases", {}):
        return "flaky", "FLAKY: " + " ".join(job["flaky_cases"][case_name])
    if job["variant"] == KNOWN_BAD and case_name in results.gate().control_must_fail:
        return ("xfail", "fail (expected)") if result == "fail" else ("fail", f"{result}: BLIND")
    return {"pass": ("pass", "pass"), "fail": ("fail", "FAIL"), "skip": ("skip", "skip")}.get(
        result, ("none", result))


def fmt_seconds(v, unit="s"):
    if v is None:
        return "-"
    if unit == "s" and v >= 600:
        return f"{int(v) // 60} min {int(v) % 60:02d} s"
    return f"{v:.0f}{unit}" if v >= 10 else f"{v:.1f}{unit}"


def phases_table(doc):
    """Where each job of a run spent its time (job['timing'])."""
    f = fmt_seconds
    g = results.gate()
    progs = [p.name for p in g.programs]
    benches = {p.name for p in g.role("bench")}
    heads = (["job", "queued", "kernel build", "deploy", "boot"] +
             ["bench" if n in benches and len(benches) == 1 else n for n in progs] +
             ["kernel log", "finalize", "lava-run other", "total"])
    rows = []
    for j in doc.get("jobs", []):
        t = j.get("timing") or {}
        p = t.get("programs", {})
        b = t.get("build", {})
        built = "cached" if b.get("cached") else f(b.get("kernel"))
        rows.append([f"{j['target']}/{j['variant']}", f(t.get("queued")), built,
                     f(t.get("deploy")), f(t.get("boot"))] + [f(p.get(n)) for n in progs] +
                    [f(p.get("kgate-kernel-log")), f(t.get("finalize")),
                     f(t.get("lava_overhead")), f(j.get("seconds"))])
    return format_table(heads, rows)


def html(doc, plot_svg=None, figures_text=None):
    """A self-contained HTML page of a run: the verdict, one row per job,
    the matrix of every case against every job (colour and text), the
    figures and their plot, links to the job logs."""
    from html import escape as e
    jobs = doc["jobs"]
    names = [f"{j['target']}/{j['variant']}" for j in jobs]
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>kgate run {e(str(doc.get('run', '')))}</title>", f"<style>{_CSS}</style>",
           "</head><body>",
           f"<h1>kgate run {e(str(doc.get('run', '')))}</h1>",
           f'<p>Gate: <span class="verdict v-{e(doc["verdict"])}" id="gate">{e(doc["verdict"].upper())}'
           f"</span> {e(doc.get('summary', ''))} (exit {doc.get('exit_code')}); "
           f"{e(str(doc.get('started', '')))} to {e(str(doc.get('finished', '')))}</p>",
           "<h2>Jobs</h2>", '<table id="jobs"><tr><th>target</th><th>variant</th><th>verdict</th>'
           "<th>reason</th><th>seconds</th><th>log</th></tr>"]
    for j in jobs:
        log = j.get("log")
        link = f'<a href="{e(log)}">lava.log</a>' if log else "-"
        out.append(f"<tr><td>{e(j['target'])}</td><td>{e(j['variant'])}</td>"
                   f'<td class="verdict v-{e(j["verdict"])}">{e(j["verdict"])}</td>'
                   f"<td>{e(str(j.get('reason', '')))}</td><td>{e(str(j.get('seconds', '')))}</td>"
                   f"<td>{link}</td></tr>")
    out.append("</table>")
    # The matrix: every verdict case of any job, in first-seen order.
    order = []
    for j in jobs:
        for c in j.get("cases", []):
            if c.get("measurement") is None and c["case"] not in order:
                order.append(c["case"])
    out.append("<h2>Matrix</h2>")
    out.append('<table id="matrix"><tr><th>case</th>' +
               "".join(f'<th class="job">{e(n)}</th>' for n in names) + "</tr>")
    by_job = [{c["case"]: c["result"] for c in j.get("cases", []) if c.get("measurement") is None}
              for j in jobs]
    for case in order:
        row = [f"<td>{e(case)}</td>"]
        for j, res in zip(jobs, by_job):
            cls, text = _cell(j, case, res.get(case))
            row.append(f'<td class="{cls}" data-job="{e(j["target"])}/{e(j["variant"])}">{e(text)}</td>')
        out.append(f'<tr data-case="{e(case)}">' + "".join(row) + "</tr>")
    out.append("</table>")
    splats = [(j, c["splat"]) for j in jobs for c in j.get("cases", []) if c.get("splat")]
    if splats:
        # Each kernel's first failure report, whole (KASAN's with its
        # allocation and free stacks).
        out.append('<h2>Kernel log</h2>')
        for j, splat in splats:
            where = f"{j['target']}/{j['variant']}"
            out.append(f"<h3>{e(where)}: first splat</h3>")
            out.append(f'<pre class="splat" data-job="{e(where)}">{e(chr(10).join(splat))}</pre>')
    out.append("<h2>Where the time went</h2>")
    out.append(f'<pre id="timing">{e(phases_table(doc))}</pre>')
    if figures_text:
        out.append("<h2>Throughput and backlog drain</h2>")
        if plot_svg:
            out.append(plot_svg)
        out.append(f'<pre id="figures">{e(figures_text)}</pre>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"
