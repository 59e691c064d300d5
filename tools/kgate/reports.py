"""Reports of a run for other tools: JUnit XML (one testsuite per target
and variant), read by CI systems (GitLab, Jenkins, ...)."""
import xml.etree.ElementTree as ET

from . import results


def _case_outcome(job, case):
    """(kind, message) of one case in JUnit terms: kind is None (passed),
    'failure' or 'skipped'. On the known-bad control the cases it must
    fail are expected failures: passed when they fail, a failure (the
    gate is blind) when they pass."""
    res = case["result"]
    if job["variant"] == "known-bad" and case["case"] in results.KNOWN_BAD_MUST_FAIL:
        if res == "fail":
            return None, "expected failure: the known-bad control was caught"
        if res == "pass":
            return "failure", "the known-bad control passed this case: the gate is blind here"
    if res == "fail":
        if job["variant"] == "known-bad":
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
        if job["verdict"] == results.INFRA:
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
