"""Read what lava-run wrote: its log is YAML lines on stderr, one dict per
line ('{"dt": ..., "lvl": ..., "msg": ...}'); test results appear only
in 'lvl: results' lines."""
import datetime

import yaml

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _Loader


def parse_lines(text):
    """Yield the log entries (dicts); lines that are not entries are skipped.

    lava-run writes '{...}' lines; a server's job log has '- {...}'.
    """
    for line in text.splitlines():
        if line.startswith("- {"):
            line = line[2:]
        elif not line.startswith("{"):
            continue
        try:
            entry = yaml.load(line, Loader=_Loader)
        except yaml.YAMLError:
            continue  # a truncated last line, for example
        if isinstance(entry, dict):
            yield entry


def parse(text):
    """Return {'cases': [...], 'health': ..., 'errors': [...], 'job': result}.

    cases: dicts with definition, case, result and, where given,
    measurement and units, in log order (test definitions only: LAVA's
    own 'lava' definition is reported separately as job/errors).
    """
    cases, errors = [], []
    job_result = None
    health = None
    boot_at = first_at = last_at = None
    for e in parse_lines(text):
        lvl = e.get("lvl")
        msg = e.get("msg")
        at = _time(e.get("dt"))
        last_at = at or last_at
        if boot_at is None and isinstance(msg, str) and msg.startswith("Boot command:"):
            boot_at = at
        if lvl == "results" and isinstance(msg, dict):
            definition = str(msg.get("definition", ""))
            case = str(msg.get("case", ""))
            if definition == "lava":
                if case == "job":
                    job_result = msg.get("result")
                if msg.get("result") == "fail" and msg.get("error_msg"):
                    errors.append(f"{case}: {msg.get('error_msg')}")
                continue
            if first_at is None:
                first_at = at
            item = {"definition": definition, "case": case, "result": str(msg.get("result"))}
            if msg.get("measurement") not in (None, ""):
                item["measurement"] = msg.get("measurement")
                item["units"] = msg.get("units", "")
            cases.append(item)
        elif lvl == "error" and msg:
            errors.append(str(msg))
        elif lvl == "info" and isinstance(msg, str) and msg.startswith("Job finished correctly"):
            health = "complete"
    if health is None:
        health = "complete" if job_result == "pass" else "incomplete"
    timing = {}
    if boot_at and first_at:
        timing["boot_to_first_result"] = round((first_at - boot_at).total_seconds(), 2)
    if boot_at and last_at:
        timing["boot_to_end"] = round((last_at - boot_at).total_seconds(), 2)
    return {"cases": cases, "health": health, "job": job_result, "errors": errors,
            "timing": timing}


def _time(dt):
    if not isinstance(dt, str):
        return None
    try:
        return datetime.datetime.fromisoformat(dt)
    except ValueError:
        return None
