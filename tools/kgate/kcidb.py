"""A run as KCIDB v5 JSON (kgate.py export kcidb [RUN]): what KernelCI's
common report database takes, validated against KCIDB's own schema
(tools/schemas/kcidb.v5.3.json, from the kcidb-io project).

  checkouts  one per kernel tree of the run: Debian's source plus a
             variant's series (fixed, candidate; known-bad with
             --with-control), with the patch files the run kept and
             KCIDB's patchset_hash
  builds     one per target and variant: architecture, compiler, make
             command, configuration, the .config, kernel sha256
  tests      per job the node 'kgate' (its status rolls the job up),
             and every case as 'kgate.<definition>.<case>' (backlog,
             bench, log), the benchmark's figures as DONE with 'number'

Every status says what the kernel did, as KCIDB defines them: the
known-bad control is left out unless asked for, and then its failures
stay FAIL, marked as the control's (misc kgate_control, kgate_expected).
URLs point into the run folder: file:// by default, or under --base-url
where the folder is served. IDs are '<origin>:<run>:...', so a run
exported twice is the same data; the origin must be the name the CI
system has agreed with KCIDB's maintainers.
"""
import datetime
import hashlib
import json
import os
import re
import urllib.parse

from . import results
from .common import CANDIDATE, KNOWN_BAD, TOP, KgateError, base_variant, guest_of, load_targets

SCHEMA = os.path.join(TOP, "tools", "schemas", "kcidb.v5.3.json")
VERSION = {"major": 5, "minor": 3}
ORIGIN = "kgate"
CONTROL = KNOWN_BAD
# Test paths: '<ROOT>.<definition>.<case>', each part [a-zA-Z0-9_-].
ROOT = "kgate"
# A case's LAVA result; 'skip' is kgate's inconclusive (the evidence
# was not seen: the tested code's status is unknown).
CASE_STATUS = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP", "unknown": "ERROR"}
# A job's verdict as the status of its node: what the kernel did. The
# known-bad control that was caught failed, as it must (kgate_expected).
JOB_STATUS = {
    results.PASS: "PASS", results.REGRESSION: "FAIL", results.FLAKY: "FAIL",
    results.CAUGHT: "FAIL", results.MISSED: "PASS",
    results.ERROR: "ERROR", results.INFRA: "MISS", results.INCONCLUSIVE: "MISS",
}
# Units that are not units: a ratio is a plain number.
NO_UNIT = ("x", "")
_BAD_PART = re.compile(r"[^a-zA-Z0-9_-]+")


def check_origin(origin):
    if not re.fullmatch(r"[a-z0-9_]+", origin or ""):
        raise KgateError(f"--origin must be lower-case letters, digits and '_' (KCIDB's rule), "
                         f"not {origin!r}")
    return origin


def patchset_hash(sha256s):
    """KCIDB's patchset hash: sha256 over each patch's newline-ended
    sha256, in order; '' for no patches."""
    if not sha256s:
        return ""
    return hashlib.sha256("".join(h + "\n" for h in sha256s).encode()).hexdigest()


def _part(text):
    return _BAD_PART.sub("_", text).strip("_") or "_"


def _definition(name):
    """'0_kgate-backlog' -> 'backlog'; 'kgate' (the kernel log) -> 'log'."""
    name = name.split("_", 1)[1] if name[:1].isdigit() and "_" in name else name
    if name.startswith("kgate-"):
        name = name[len("kgate-"):]
    return _part(name if name != "kgate" else "log")


def case_path(definition, case):
    """'kgate.<definition>.<case>', each dotted part of the case kept
    ('backlog.ipv4.data_fin' -> 'kgate.backlog.ipv4.data_fin')."""
    d = _definition(definition or "tests")
    parts = [_part(p) for p in case.split(".")]
    if parts[0] == d:
        parts = parts[1:] or parts
    return ".".join([ROOT, d] + parts)


def _clean(text):
    return text.replace("\0", "")


class _Ids:
    def __init__(self, origin, run):
        self.origin = origin
        self.prefix = f"{origin}:{run}"

    def checkout(self, variant):
        return f"{self.prefix}:{base_variant(variant)}"

    def build(self, job):
        return f"{self.prefix}:{job['target']}:{job['variant']}"

    def test(self, job, path, n=1):
        return f"{self.build(job)}:{path}" + (f":{n}" if n > 1 else "")


class _Urls:
    def __init__(self, run_dir, base_url):
        self.base = base_url.rstrip("/") + "/" if base_url else \
            "file://" + urllib.parse.quote(os.path.abspath(run_dir)) + "/"

    def __call__(self, rel):
        return self.base + "/".join(urllib.parse.quote(p) for p in rel.split(os.sep))


def _control(variant):
    return {"kgate_control": True, "kgate_expected": "FAIL"} if variant == CONTROL else {}


def _checkout(doc, variant, ids, url):
    c = {"id": ids.checkout(variant), "origin": ids.origin,
         "start_time": doc["started"], "valid": True}
    tree = (doc.get("trees") or {}).get(variant)
    cand = doc.get("candidate") or {}
    if variant == CANDIDATE and cand.get("images"):
        c["comment"] = "kgate candidate: prebuilt kernel images (no tree)"
    elif variant == CANDIDATE and cand.get("source"):
        c.update(comment=f"kgate candidate: the user's tree {cand['source']}", patchset_hash="")
    elif tree is None:
        c["comment"] = f"kgate {variant} kernel (its tree was not recorded by this run)"
    else:
        source = tree.get("source")
        what = f"Debian's {source.split(':')[0]}" if source else "an unrecorded source"
        series = "kgate's fixed series and the user's patches" if variant == CANDIDATE else \
            f"kgate's {variant} series"
        c.update(comment=f"{what} with {series} ({len(tree['patches'])} patches)",
                 patchset_files=[{"name": p["name"], "url": url(p["file"])}
                                 for p in tree["patches"]],
                 patchset_hash=patchset_hash([p["sha256"] for p in tree["patches"]]))
        if source:
            c["misc"] = {"source": source}
    misc = dict(c.get("misc", {}), **_control(variant))
    if misc:
        c["misc"] = misc
    return c


def _build(job, doc, ids, url, arch):
    v = job["variant"]
    made = job.get("kernel_build") or {}
    prebuilt = base_variant(v) == CANDIDATE and bool((doc.get("candidate") or {}).get("images"))
    b = {"id": ids.build(job), "origin": ids.origin,
         "checkout_id": ids.checkout(v), "architecture": arch,
         "comment": f"kgate {job['target']} {v} kernel" + (" (prebuilt)" if prebuilt else ""),
         "misc": dict({"kgate_target": job["target"], "kgate_variant": v,
                       "kernel_sha256": job["kernel_sha256"]}, **_control(v))}
    if prebuilt:
        b["misc"]["prebuilt"] = True
    else:
        # kgate built it, or reused what it built: the kernel booted
        b["status"] = "PASS"
    for key, field in (("compiler", "compiler"), ("command", "command"),
                       ("config_name", "config_name")):
        if made.get(key):
            b[field] = made[key]
    if made.get("fragments"):
        b["misc"]["config_fragments"] = made["fragments"]
    if job.get("kernel_config"):
        b["config_url"] = url(job["kernel_config"])
    return b


def _environment(guest):
    if not guest:
        return None
    return {"comment": f"QEMU {guest['qemu']} -M {guest['machine']} -cpu {guest['cpu']}, "
                       f"{guest['smp']} CPU, {guest['memory']} MiB, TCG (no KVM)",
            "misc": {k: guest[k] for k in ("endian", "bits") if k in guest}}


def _node(job, ids, log_url, env):
    t = {"id": ids.test(job, ROOT), "origin": ids.origin,
         "build_id": ids.build(job), "path": ROOT, "status": JOB_STATUS[job["verdict"]],
         "comment": _clean(f"{job['verdict']}: {job['reason']}"),
         "misc": dict({"kgate_verdict": job["verdict"]}, **_control(job["variant"]))}
    if isinstance(job.get("seconds"), (int, float)) and not isinstance(job["seconds"], bool):
        t["duration"] = job["seconds"]
    for key in ("health", "runs", "flaky_cases", "attempts"):
        if job.get(key):
            t["misc"][key] = job[key]
    if job.get("started"):
        t["start_time"] = job["started"]
    if env:
        t["environment"] = env
    if log_url:
        t["log_url"] = log_url
    if job.get("tail"):
        t["log_excerpt"] = _clean("\n".join(job["tail"]))[-16384:]
    return t


def _case(job, case, path, n, ids, log_url, env):
    if case.get("result") not in CASE_STATUS:
        raise KgateError(f"{job['target']}/{job['variant']}: case {case['case']} has a result "
                         f"KCIDB has no status for: {case.get('result')!r}")
    status = CASE_STATUS[case["result"]]
    figure = case.get("measurement") is not None
    if figure and status == "PASS":
        status = "DONE"  # a measurement, not a judgement of the kernel
    t = {"id": ids.test(job, path, n), "origin": ids.origin,
         "build_id": ids.build(job), "path": path, "status": status}
    if figure and status in ("DONE", "FAIL", "ERROR"):
        t["number"] = {"value": case["measurement"]}
        if case.get("units") not in NO_UNIT + (None,):
            t["number"]["unit"] = case["units"]
    if case.get("splat"):
        t["log_excerpt"] = _clean("\n".join(case["splat"]))[-16384:]
    if env:
        t["environment"] = env
    if log_url:
        t["log_url"] = log_url
    t["misc"] = dict({"case": case["case"]}, **_control(job["variant"]))
    return t


def _tests(job, ids, url, guest):
    env = _environment(guest)
    log_url = url(job["log"]) if job.get("log") else None
    out = [_node(job, ids, log_url, env)]
    seen = {}
    for case in job.get("cases", []):
        path = case_path(case.get("definition"), case["case"])
        seen[path] = seen.get(path, 0) + 1
        out.append(_case(job, case, path, seen[path], ids, log_url, env))
    return out


def _guest(job, tgts):
    """The guest a job ran in: as the run recorded it, else the target's
    row today (runs before kgate recorded it)."""
    if job.get("guest"):
        return job["guest"]
    tgt = tgts.get(job["target"])
    return guest_of(tgt) if tgt else None


def export(doc, run_dir, origin=ORIGIN, base_url=None, with_control=False):
    """The KCIDB document of a run (doc: its results.json); the known-bad
    control only with with_control."""
    # what the export reads: a results.json that lacks it is refused
    # with the field named (results.judge checked each job's own)
    for key in ("run", "started"):
        if not isinstance(doc.get(key), str):
            raise KgateError(f"the run has no '{key}': not a whole results.json")
    for j in doc["jobs"]:
        for key in ("kernel_sha256", "verdict", "reason"):
            if not isinstance(j.get(key), str):
                raise KgateError(f"run {doc['run']}: job {j['target']}/{j['variant']} has no "
                                 f"'{key}'")
    ids = _Ids(check_origin(origin), doc["run"])
    url = _Urls(run_dir, base_url)
    tgts = load_targets()
    jobs = [j for j in doc["jobs"] if with_control or j["variant"] != CONTROL]
    builds, tests = [], []
    for j in jobs:
        guest = _guest(j, tgts)
        if not guest:
            raise KgateError(f"run {doc['run']}: {j['target']} is neither recorded in the run "
                             "nor a target in targets.yaml: its architecture is unknown")
        builds.append(_build(j, doc, ids, url, guest["kernel_arch"]))
        tests += _tests(j, ids, url, guest)
    variants = dict.fromkeys(base_variant(j["variant"]) for j in jobs)
    return {"version": dict(VERSION),
            "checkouts": [_checkout(doc, v, ids, url) for v in variants],
            "builds": builds, "tests": tests}


def _times(data):
    """Every start_time an RFC 3339 date-time with its zone (the schema's
    format, which python3-jsonschema cannot check without a package
    Debian lacks)."""
    bad = []
    for kind in ("checkouts", "builds", "tests"):
        for obj in data.get(kind, []):
            when = obj.get("start_time")
            if when is None:
                continue
            try:
                ok = datetime.datetime.fromisoformat(when).tzinfo is not None
            except (TypeError, ValueError):
                ok = False
            if not ok:
                bad.append(f"  {kind}/{obj.get('id')}/start_time: {when!r} is not a date-time "
                           "with a zone")
    return bad


def validate(data):
    """Raise KgateError listing what KCIDB's schema rejects."""
    try:
        import jsonschema
    except ImportError as e:
        raise KgateError("python3-jsonschema is missing: 'make deps'") from e
    with open(SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    validator = jsonschema.Draft7Validator(schema,
                                           format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    lines = [f"  {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
             for e in errors] + _times(data)
    if lines:
        more = f"\n  ... and {len(lines) - 20} more" if len(lines) > 20 else ""
        raise KgateError(f"the KCIDB export does not validate against "
                         f"{os.path.relpath(SCHEMA, TOP)}:\n" + "\n".join(lines[:20]) + more)
    return data
