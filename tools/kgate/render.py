"""Render LAVA jobs and local device configurations from templates/."""
import functools
import importlib
import os
import re

import jinja2
import yaml

from . import suite, workspace
from .common import (ALL_VARIANTS, KNOWN_BAD, TOP, KgateError, atomic_write, check_variant,
                     is_debug, target)

TEMPLATES = os.path.join(TOP, "templates")
PROMPT = "kgate# "

DEFAULTS = {
    "device_type": "qemu",
    "job_prefix": "kgate ",
    "priority": "medium",
    "visibility": "public",
    "tags": [],
    "timeouts": {"job": 15, "action": 3, "deploy": 2, "boot": 2, "test": 3, "bench": 6},
    # Arguments of a suite's program, by name ('kgate.py fuzz': the
    # fuzz's seed and count).
    "program_args": {},
}
# The benchmark measures kernels meant to ship, not the known-bad control.
NO_BENCH_VARIANTS = (KNOWN_BAD,)
# A debug kernel (KASAN, lockdep, SLUB poisoning) runs the same job 2.5
# to 5 times slower under TCG (x86_64 111-136 s, arm64 141 s, ppc 174 s,
# arm 332 s, against 35-92 s plain): its timeouts, already generous for
# the plain kernels, are this many times theirs.
DEBUG_TIMEOUT_FACTOR = 3


def has_bench(variant, bench=True):
    """Whether the jobs of this variant run the benchmark; bench=False:
    no job does (the mutation check)."""
    return bench and variant not in NO_BENCH_VARIANTS and bool(suite.current().role("bench"))


def _env():
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)


def qemu_extra(tgt):
    """QEMU options beyond machine/cpu/memory, for the job and the device."""
    opts = [f"-smp {tgt.get('smp', 1)}", "-no-reboot", "-nic none"]
    opts += tgt.get("qemu_extra", [])
    return opts


def kernel_cmdline(tgt):
    # Full boot messages: LAVA waits for "Linux version" (a KERN_NOTICE
    # line) to know the kernel started. The guest's rcS then lowers the
    # console log level, since printk lines during the tests can break
    # LAVA's test signals. No panic=: with -no-reboot a panic stops the
    # guest and LAVA ends the job on the panic text, where panic=-1
    # would make it wait out the boot timeout in a reboot loop. RCU's
    # stall report after 60 s, not 21: a TCG guest sharing two host
    # cores with another can be starved that long, and the report
    # fails the kernel-log case; a real stall lasts.
    return f"console={tgt['console']} rdinit=/init rcupdate.rcu_cpu_stall_timeout=60"


def timeouts(variant):
    """The job's timeouts in minutes: the defaults, longer for a debug
    kernel."""
    factor = DEBUG_TIMEOUT_FACTOR if is_debug(variant) else 1
    return {k: v * factor for k, v in DEFAULTS["timeouts"].items()}


# What a user may give for the lab's own fields of a job. Every string
# reaches the YAML quoted by the template; these say what is allowed
# at all, so that no value can end its line and add keys of its own
# (a newline in --job-prefix once added a 'notify:' callback that
# LAVA's schema accepted).
_TOKEN = r"[A-Za-z0-9][A-Za-z0-9_.+-]*"
_PRINTABLE = r"[^\x00-\x1f\x7f\\\"]*"
USER_FIELDS = {
    "device_type": _TOKEN,
    "priority": r"high|medium|low|100|[1-9]?[0-9]",
    "visibility": r"public|personal",
    "job_prefix": _PRINTABLE,
    "tags": _TOKEN,
}


# A program's arguments reach a job's step as they are: words of these
# characters only, nothing a shell or YAML reads as its own.
_ARGS = r"[A-Za-z0-9=,._:/+-]+(?: [A-Za-z0-9=,._:/+-]+)*"


def check_user_fields(overrides):
    """Refuse a lab field a user gave that the job cannot carry as it is
    (a KgateError naming the flag)."""
    for key, pattern in USER_FIELDS.items():
        value = overrides.get(key)
        if value is None:
            continue
        for v in value if key == "tags" else [value]:
            if key == "priority" and isinstance(v, int) and not isinstance(v, bool):
                v = str(v)  # LAVA's 0-100, given as a number
            if not isinstance(v, str) or not re.fullmatch(pattern, v):
                flag = "--tag" if key == "tags" else "--" + key.replace("_", "-")
                raise KgateError(f"{flag} {v!r}: not allowed in a LAVA job (wants "
                                 + ("a name of letters, digits and _.+-" if pattern == _TOKEN
                                    else "printable text without quotes or backslashes"
                                    if pattern == _PRINTABLE else pattern.replace("|", ", "))
                                 + ")")
    for prog, args in (overrides.get("program_args") or {}).items():
        if not isinstance(args, str) or not re.fullmatch(_ARGS, args):
            raise KgateError(f"arguments of {prog} {args!r}: words of letters, digits and "
                             "=,._:/+- only")
    timeouts_given = overrides.get("timeouts") or {}
    for k, v in timeouts_given.items():
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 24 * 60:
            raise KgateError(f"the {k} timeout wants 1-1440 minutes, not {v!r}")


def job_values(tgt, variant, kernel, rootfs, bench=True, **overrides):
    check_user_fields(overrides)
    vals = dict(DEFAULTS, timeouts=timeouts(variant))
    vals.update({k: v for k, v in overrides.items() if v is not None and k != "timeouts"})
    # Overridden timeouts replace only the ones they name.
    vals["timeouts"].update(overrides.get("timeouts") or {})
    # The gate's suites (suites/gate.yaml): each one's programs become
    # the steps of its test definition, each benchmark its own.
    gate = suite.current()
    vals.update({
        "target": tgt,
        "variant": variant,
        "kernel": kernel,
        "rootfs": rootfs,
        # Overridable for the tests of bad days (a guest that panics).
        "kernel_cmdline": overrides.get("kernel_cmdline") or kernel_cmdline(tgt),
        "prompt": PROMPT,
        "suites": gate.suites,
        "title": " + ".join(s.title for s in gate.suites),
        "benches": gate.role("bench") if has_bench(variant, bench) else [],
        "qemu_extra": qemu_extra(tgt),
    })
    return vals


def render_job(tgt, variant, kernel, rootfs, bench=True, **overrides):
    """Return the job text; kernel and rootfs are {'url', 'sha256'};
    bench=False leaves the benchmark out."""
    check_variant(variant)
    try:
        return _env().get_template("job.yaml.j2").render(**job_values(tgt, variant, kernel, rootfs,
                                                                        bench=bench, **overrides))
    except jinja2.UndefinedError as e:
        raise KgateError(f"templates/job.yaml.j2: {e}") from e


def render_device(tgt):
    try:
        return _env().get_template("device.yaml.j2").render(target=tgt, qemu_extra=qemu_extra(tgt))
    except jinja2.UndefinedError as e:
        raise KgateError(f"templates/device.yaml.j2: {e}") from e


def _load(text):
    # libyaml's safe loader when python3-yaml has it: the same document,
    # five times quicker (golden renders 88 jobs).
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506


@functools.lru_cache(maxsize=1024)
def _schema_valid(text):
    """LAVA's strict schema on a job's text; raises when it is refused.
    Only texts it accepted are remembered (an exception is not)."""
    from lava_common.schemas import validate
    validate(_load(text), strict=True)
    return True


def validate_job(text, where="job"):
    """Validate a job against LAVA's own schema (strict); raise KgateError."""
    try:
        importlib.import_module("lava_common.schemas")
    except ImportError as e:
        raise KgateError("lava_common not importable: run with /usr/bin/python3 "
                         "after 'make deps' (package lava-dispatcher)") from e
    try:
        data = _load(text)
    except yaml.YAMLError as e:
        raise KgateError(f"{where}: not YAML: {e}") from e
    try:
        _schema_valid(text)
    except Exception as e:  # voluptuous.Invalid and friends
        raise KgateError(f"{where}: rejected by LAVA's schema: {e}") from e
    return data


def job_path(tgt_name, variant):
    return os.path.join(workspace.current().jobs, f"{tgt_name}-{variant}.yaml")


def device_path(tgt_name):
    return os.path.join(workspace.current().jobs, "devices", f"{tgt_name}.yaml")


def write_local(tgt_name, artifacts, bench=True, **overrides):
    """Render, validate and write the local jobs and device of a target.

    artifacts: {variant: {'kernel': {'url','sha256'}, 'rootfs': {...}}};
    bench=False: no job runs the benchmark; overrides as render_job's.
    """
    tgt = target(tgt_name)
    out = {}
    for variant in ALL_VARIANTS:
        if variant not in artifacts:
            continue
        a = artifacts[variant]
        text = render_job(tgt, variant, a["kernel"], a["rootfs"], bench=bench, **overrides)
        path = job_path(tgt_name, variant)
        validate_job(text, os.path.relpath(path, TOP))
        atomic_write(path, text)
        out[variant] = path
    dev = render_device(tgt)
    yaml.safe_load(dev)
    atomic_write(device_path(tgt_name), dev)
    return out
