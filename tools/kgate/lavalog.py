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


# The guest's last lines kept for a report (a program that crashed or hung).
TAIL_LINES = 12


def parse(text):
    """Return {'cases': [...], 'health': ..., 'errors': [...], 'job': result,
    'timing': {...}, 'tail': [...]}.

    cases: dicts with definition, case, result and, where given,
    measurement and units, in log order (test definitions only: LAVA's
    own 'lava' definition is reported separately as job/errors). tail:
    the guest's last lines of output before LAVA gave up on it (or the
    job ended), without LAVA's signals and the echo of its own commands.
    """
    cases, errors, tail = [], [], []
    sent = set()
    given_up = False
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
            given_up = True
        elif lvl == "exception":
            given_up = True
        elif lvl == "input" and isinstance(msg, str):
            sent.add(msg.strip())
        elif lvl == "target" and isinstance(msg, str) and not given_up:
            if not msg.startswith("<LAVA_SIGNAL") and msg.strip() not in sent:
                tail = (tail + [msg])[-TAIL_LINES:]
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
            "timing": timing, "tail": tail}


def _time(dt):
    if not isinstance(dt, str):
        return None
    try:
        return datetime.datetime.fromisoformat(dt)
    except ValueError:
        return None
