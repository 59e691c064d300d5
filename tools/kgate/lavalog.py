"""Read what lava-run wrote: its log is YAML lines on stderr, one dict per
line ('{"dt": ..., "lvl": ..., "msg": ...}'); test results appear only
in 'lvl: results' lines."""
import datetime
import os
import re

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

# The kernel-log case (every job; rootfs/files/usr/bin/kgate-kernel-log).
KERNEL_LOG_CASE = "kernel-log"
KERNEL_LOG_DEFINITION = "kgate"
DMESG_PREFIX = "kgate-dmesg: "
DMESG_BEGIN = "kgate-kernel-log: begin"
DMESG_END = "kgate-kernel-log: end"
# LAVA's top-level actions ("start: 2 boot-image-retry ..."), by the
# phase of a job each one is.
PHASES = {"deployimages": "deploy", "boot-image-retry": "boot", "lava-test-retry": "tests",
          "finalize": "finalize"}
ACTION = re.compile(r"^(start|end): (\d+) ([\w-]+)")
# A step of the test run, echoed by its shell: its program is the
# argument of kgate-lava or a kgate- command (None for "+ set +x").
STEP = re.compile(r"^\+ (?:kgate-lava (\S+)|(kgate-\S+))?")
# What a kernel says when something went wrong inside it (6.1's texts):
# die() headers on every arch ("Oops", "[#1]": x86's invalid opcode and
# GP faults, arm's "Internal error", mips' "Kernel bug detected"),
# BUG:s (soft lockups, sleeping in atomic context, bad page state, ...),
# SLUB's "BUG <cache> (Not tainted): ", WARN()s (lockdep's reports are
# WARNING:s; x86's mitigation notices, which are not, left out), the
# sanitizers, refcount and list debugging, RCU stalls, hard lockups,
# hung tasks, lockdep's non-static key, kmemleak, a bad hardware
# checksum, an IRQ nobody cared for, and any stack dump ("Call Trace:",
# arm64's "Call trace:", dump_stack()'s "CPU: N PID: N Comm: ").
SPLAT = re.compile(
    r"\bOops\b|\[#\d+\]|kernel BUG at |\bBUG: |Kernel panic|Unable to handle kernel"
    r"|\bBUG \S+ \((?:Not tainted|Tainted:[^)]*)\): "
    r"|WARNING: (?!Spectre|BTB |LFENCE |Unprivileged eBPF|IBRS |See https"
    r"|kernel not compiled|CPU does not support|ITS |polling idle)"
    r"|KASAN: |UBSAN: |KFENCE: |refcount_t: |list_(?:add|del) corruption|list_add double add"
    r"|rcu: INFO: |rcu_\w+ detected (?:expedited )?stalls|self-detected stall|hard LOCKUP"
    r"|INFO: task \S+ blocked for more than|INFO: trying to register non-static key"
    r"|kmemleak: (?:\d+ new suspected|.*unknown object)|hw csum failure|nobody cared"
    r"|scheduling from the idle thread|Call [Tt]race:|CPU: \d+ PID: \d+ Comm: ")
# A kernel line on the console: CONFIG_PRINTK_TIME's "[    1.234567] ".
KERNEL_LINE = re.compile(r"^\[\s*\d+\.\d+\]")
# Where a report starts just before its matching line: WARN()'s cut
# line (its message comes before "WARNING: CPU:"), a KASAN banner.
_REPORT_START = re.compile(r"cut here|={20,}")
_RULE = re.compile(r"^(?:\[\s*\d+\.\d+\]\s*)?={20,}\s*$")
SPLAT_LINES = 150


def _splat(lines):
    """The first splat in kernel lines, whole: from its cut-here line or
    banner (up to 3 lines before the match) to its end-of-trace line,
    or to the closing banner of a report that opened with one; at most
    SPLAT_LINES."""
    for i, line in enumerate(lines):
        if not SPLAT.search(line):
            continue
        start = next((k for k in range(max(0, i - 3), i) if _REPORT_START.search(lines[k])), i)
        banner = bool(_RULE.match(lines[start]))
        out = []
        for k in range(start, min(len(lines), start + SPLAT_LINES)):
            out.append(lines[k])
            if "---[ end " in lines[k] or (banner and k > start and _RULE.match(lines[k])):
                break
        return out
    return []


# The dump's first line when the log buffer still holds the boot.
_BOOT_LINE = re.compile(r"^\[\s*0\.0+\]")
# Stack dump lines: the middle of a report, not its start.
_STACK_ONLY = re.compile(r"Call [Tt]race:|CPU: \d+ PID: \d+ Comm: ")


def _first_whole_splat(dumped):
    """The dump's first splat. When the kernel's log buffer wrapped (a
    storm of warnings: the dump no longer starts at boot), its oldest
    report lost its head: the first one that begins with its own header
    is shown instead, if there is one."""
    if dumped and not _BOOT_LINE.match(dumped[0]):
        for i, line in enumerate(dumped):
            if _REPORT_START.search(line) or (SPLAT.search(line) and
                                              not _STACK_ONLY.search(line)):
                whole = _splat(dumped[i:])
                if whole:
                    return whole
                break
    return _splat(dumped)


def kernel_log_case(console, dumped, tests_ran):
    """The kernel-log case from the console's kernel lines and the
    dmesg dump (None when it never ended): fail with the first splat,
    pass when the whole dump came and neither has one. None (no case)
    before the tests ran: a kernel that did not boot is judged by the
    boot, not by this case."""
    if not tests_ran:
        return None
    splat = _first_whole_splat(dumped or []) or _splat(console)
    if splat:
        return {"definition": KERNEL_LOG_DEFINITION, "case": KERNEL_LOG_CASE, "result": "fail",
                "splat": splat}
    if dumped is None:
        return None
    return {"definition": KERNEL_LOG_DEFINITION, "case": KERNEL_LOG_CASE, "result": "pass"}


def parse(text):
    """Return {'cases': [...], 'health': ..., 'errors': [...], 'job': result,
    'timing': {...}, 'tail': [...]}.

    The kernel-log case (kernel_log_case()) is added to the cases once
    the guest reported any: it is ours, not LAVA's. console: the
    console's kernel lines; dmesg: the dump's lines, None if it never
    ended.
    cases: dicts with definition, case, result and, where given,
    measurement and units, in log order (test definitions only: LAVA's
    own 'lava' definition is reported separately as job/errors). tail:
    the guest's last lines of output before LAVA gave up on it (or the
    job ended), without LAVA's signals and the echo of its own commands.
    """
    cases, errors, tail = [], [], []
    console, dump, dumped = [], [], None
    sent = set()
    given_up = False
    job_result = None
    health = None
    boot_at = first_at = last_at = None
    phases, started, programs = {}, {}, {}
    program, in_run = None, False
    for e in parse_lines(text):
        lvl = e.get("lvl")
        msg = e.get("msg")
        at = _time(e.get("dt"))
        last_at = at or last_at
        if boot_at is None and isinstance(msg, str) and msg.startswith("Boot command:"):
            boot_at = at
        m = ACTION.match(msg) if lvl == "info" and isinstance(msg, str) and at else None
        if m and m.group(3) in PHASES:
            if m.group(1) == "start":
                started[m.group(2)] = at
            elif m.group(2) in started:
                phase = PHASES[m.group(3)]
                secs = (at - started.pop(m.group(2))).total_seconds()
                phases[phase] = round(phases.get(phase, 0) + secs, 2)
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
        elif lvl == "target" and isinstance(msg, str):
            # Each step of the test run is echoed ("+ kgate-lava
            # /usr/bin/backlog_coalesce"): a program runs until the
            # next step or the end of the run.
            step = STEP.match(msg) if in_run else None
            if (step or msg.startswith("<LAVA_SIGNAL_ENDRUN")) and program and at:
                programs[program[0]] = round((at - program[1]).total_seconds(), 2)
                program = None
            if step and at and (step.group(1) or step.group(2)):
                program = (os.path.basename(step.group(1) or step.group(2)), at)
            if msg.startswith("<LAVA_SIGNAL_STARTRUN"):
                in_run = True
            elif msg.startswith("<LAVA_SIGNAL_ENDRUN"):
                in_run = False
            if msg.startswith(DMESG_PREFIX):
                dump.append(msg[len(DMESG_PREFIX):])
                continue
            if msg.startswith(DMESG_BEGIN):
                dump = []
                continue
            if msg.startswith(DMESG_END):
                dumped = list(dump)
                continue
            if KERNEL_LINE.match(msg):
                console.append(msg)
            if not given_up and not msg.startswith("<LAVA_SIGNAL") and msg.strip() not in sent:
                tail = (tail + [msg])[-TAIL_LINES:]
        elif lvl == "info" and isinstance(msg, str) and msg.startswith("Job finished correctly"):
            health = "complete"
    if health is None:
        health = "complete" if job_result == "pass" else "incomplete"
    klog = kernel_log_case(console, dumped, bool(cases))
    if klog:
        cases.append(klog)
    timing = {}
    if boot_at and first_at:
        timing["boot_to_first_result"] = round((first_at - boot_at).total_seconds(), 2)
    if boot_at and last_at:
        timing["boot_to_end"] = round((last_at - boot_at).total_seconds(), 2)
    timing.update(phases)
    if programs:
        timing["programs"] = programs
    return {"cases": cases, "health": health, "job": job_result, "errors": errors,
            "timing": timing, "tail": tail, "console": console, "dmesg": dumped}


def _time(dt):
    if not isinstance(dt, str):
        return None
    try:
        return datetime.datetime.fromisoformat(dt)
    except ValueError:
        return None
