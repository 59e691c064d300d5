"""The LAVA lab path: render the jobs for a lab, serve their artifacts
over http, submit them with lavacli and collect the results back into
the same per-run folder, results.json and matrix as a local run.

lavacli's own configuration (~/.config/lavacli.yaml, an identity made
with 'lavacli identities add') holds the server and the token; kgate
only ever passes the identity's name.
"""
import contextlib
import datetime
import functools
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import urllib.parse

import yaml

from . import kernel, lavalog, render, results
from . import run as runner
from . import workspace
from .job import Job, retry_infra as retry_attempts
from .common import (TOP, InfraError, KgateError, StrictYamlLoader, atomic_copy,
                     atomic_write, check_variant, loads_json, log, need_tools, target)

SUBMITTED = "submitted.json"


# What a URL may hold (RFC 3986's unreserved, reserved and %): no
# quote, backslash, blank or control character can reach a job.
_URL_CHARS = re.compile(r"[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+")


def check_base_url(url):
    """The artifact base URL a lab's workers download from."""
    if not isinstance(url, str) or not _URL_CHARS.fullmatch(url):
        raise KgateError(f"--base-url must be an http(s) URL a lab worker can reach, not {url!r}")
    p = urllib.parse.urlparse(url)
    if p.scheme not in ("http", "https") or not p.netloc:
        raise KgateError(f"--base-url must be an http(s) URL a lab worker can reach, not {url!r}")
    return url.rstrip("/") + "/"


def served_path(sha256, path):
    """Where an artifact is served, relative to build/serve:
    content-addressed, so a URL never changes what it names."""
    return os.path.join("sha256", sha256, os.path.basename(path))


def _link_or_copy(src, dst):
    """dst as a hard link to src (a copy where it cannot be), made under a
    new temporary name beside dst, then renamed: never written through a
    name someone else planted."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    tmp = os.path.join(os.path.dirname(dst), f".{os.path.basename(dst)}.{os.getpid()}."
                       f"{threading.get_ident()}.link")
    try:
        os.link(src, tmp)  # fails if tmp exists: it never follows it
    except FileExistsError:
        raise KgateError(f"{tmp} exists: remove it and try again") from None
    except OSError:
        atomic_copy(src, dst)
        return
    os.replace(tmp, dst)


def stage(tgt_name, variants, jobs=None, cand=kernel.NO_CANDIDATE):
    """Build what is missing and link the artifacts under build/serve,
    content-addressed (sha256/<hash>/<name>): a URL never changes what
    it names, so a lab cannot test the wrong kernel. Returns
    {variant: {'kernel': {'path', 'sha256'}, 'rootfs': {...}}} with path
    relative to build/serve."""
    out = {}
    for v, arts in runner.artifacts(tgt_name, variants, jobs=jobs, cand=cand).items():
        out[v] = {}
        for kind in ("kernel", "rootfs"):
            a = arts[kind]
            rel = served_path(a["sha256"], a["path"])
            dst = os.path.join(workspace.current().serve, rel)
            if not os.path.exists(dst):
                _link_or_copy(a["path"], dst)
            out[v][kind] = {"path": rel, "sha256": a["sha256"]}
    return out


def write_lab_jobs(tgt_names, variants, base_url, jobs=None, cand=kernel.NO_CANDIDATE,
                   **overrides):
    """Render, validate and write the lab jobs; return a list of
    {'target', 'variant', 'file', 'kernel_sha256', 'rootfs_sha256'}."""
    base = check_base_url(base_url)
    out = []
    for name in tgt_names:
        tgt = target(name)
        for v in variants:
            check_variant(v)
        tvariants = runner.target_variants(name, variants)
        staged = stage(name, tvariants, jobs=jobs, cand=cand)
        for v in tvariants:
            k, r = staged[v]["kernel"], staged[v]["rootfs"]
            text = render.render_job(tgt, v, {"url": base + k["path"], "sha256": k["sha256"]},
                                     {"url": base + r["path"], "sha256": r["sha256"]}, **overrides)
            path = os.path.join(workspace.current().lab_jobs, f"{name}-{v}.yaml")
            render.validate_job(text, os.path.relpath(path, TOP))
            atomic_write(path, text)
            out.append({"target": name, "variant": v, "file": path,
                        "kernel_sha256": k["sha256"], "rootfs_sha256": r["sha256"]})
    return out


class ServeHandler(http.server.SimpleHTTPRequestHandler):
    """GET and HEAD of the files under one folder, nothing else: no
    folder listing, nothing whose real path leaves the folder (a symlink
    out of it is 404), and a connection idle for TIMEOUT seconds is
    closed."""
    TIMEOUT = 30
    timeout = TIMEOUT

    def handle_one_request(self):
        # The request line and headers must come within TIMEOUT in all:
        # a client that sends a byte now and then holds no slot longer.
        self._timer = threading.Timer(self.TIMEOUT, self._give_up)
        self._timer.daemon = True
        self._timer.start()
        try:
            super().handle_one_request()
        finally:
            self._timer.cancel()

    def _give_up(self):
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def parse_request(self):
        ok = super().parse_request()
        self._timer.cancel()  # the answer itself may take its time
        return ok

    def send_head(self):
        try:
            real = os.path.realpath(self.translate_path(self.path))
        except ValueError:  # a NUL byte
            self.send_error(400, "Bad path")
            return None
        root = os.path.realpath(self.directory)
        if not real.startswith(root + os.sep) or not os.path.isfile(real):
            # a folder (no listing), or outside the served one
            self.send_error(404, "File not found")
            return None
        return super().send_head()

    def log_message(self, fmt, *args):
        log(f"[serve] {self.address_string()} {fmt % args}")


class BoundedServer(http.server.ThreadingHTTPServer):
    """A threading server with at most MAX_THREADS connections handled
    at once: the next ones wait in the listen queue."""
    MAX_THREADS = 16
    daemon_threads = True

    def __init__(self, *args, **kwargs):
        self._slots = threading.BoundedSemaphore(self.MAX_THREADS)
        super().__init__(*args, **kwargs)

    def process_request(self, request, client_address):
        self._slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def check_port(port):
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise KgateError(f"--port wants 0-65535, not {port!r}")
    return port


def make_server(bind, port, folder=None):
    """The server of folder (default build/serve), not yet serving."""
    check_port(port)
    folder = folder or workspace.current().serve
    os.makedirs(folder, exist_ok=True)
    handler = functools.partial(ServeHandler, directory=folder)
    try:
        return BoundedServer((bind, port), handler)
    except (OSError, OverflowError, UnicodeError) as e:
        raise KgateError(f"cannot serve on {bind}:{port}: {getattr(e, 'strerror', None) or e}") \
            from None


def serve(bind, port):
    """Serve build/serve over http until interrupted."""
    httpd = make_server(bind, port)
    log(f"[serve] {os.path.relpath(workspace.current().serve, TOP)} on http://{bind}:{port}/ "
        "(Ctrl-C stops)")
    with httpd:
        httpd.serve_forever()


class LabError(InfraError):
    """The lab (or the network to it) did not answer, or answered what
    kgate cannot read: infrastructure, with the lab's answer quoted."""


def quoted(text, limit=200):
    """A lab's answer, on one line and cut short, for an error message."""
    text = " ".join(str(text).split())
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def lavacli(identity, *args, timeout=120):
    """Run lavacli with an identity; return its stdout or raise LabError
    (an interrupt stops lavacli too: subprocess.run kills its child)."""
    cmd = ["lavacli", "-i", identity] + list(args)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                           errors="replace")
    except subprocess.TimeoutExpired as e:
        raise LabError(f"{' '.join(cmd)}: no answer in {timeout}s") from e
    except OSError as e:
        raise LabError(f"{' '.join(cmd)}: {e.strerror}") from e
    if r.returncode:
        msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
        raise LabError(f"{' '.join(cmd)} failed: "
                       f"{quoted(msg[-1]) if msg else 'exit %d' % r.returncode}")
    return r.stdout


def lab_json(text, what):
    """A JSON object lavacli printed, or LabError quoting what came."""
    try:
        data = loads_json(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise LabError(f"{what}: the lab's answer is not a JSON object: {quoted(text)}")
    return data


def check_identity(identity):
    """The identity must exist in lavacli's own configuration (else a
    usage error) and its lab must answer (else infrastructure)."""
    need_tools(["lavacli"], "install lavacli: 'make deps'")
    if not isinstance(identity, str) or not identity or identity.startswith("-"):
        raise KgateError(f"not a lavacli identity: {identity!r}")
    try:
        lavacli(identity, "identities", "show", identity, timeout=30)
    except LabError as e:
        raise KgateError(f"{e}\n  (is the identity set up? lavacli identities add --uri "
                         f"https://LAB/RPC2 --username USER --token TOKEN {identity})") from None
    return lavacli(identity, "system", "version", timeout=30).strip()


def submit_one(identity, job_file):
    """Submit one job definition; return its LAVA job id."""
    text = lavacli(identity, "jobs", "submit", job_file)
    out = text.split()
    if len(out) != 1 or not out[0].isdigit():
        raise LabError(f"lavacli jobs submit {os.path.relpath(job_file, TOP)}: no job id in "
                       f"{quoted(text)}")
    return int(out[0])


def write_record(run_dir, record):
    atomic_write(os.path.join(run_dir, SUBMITTED), json.dumps(record, indent=2) + "\n")


def submit(identity, tgt_names, variants, base_url, jobs=None, repeat=1,
           cand=kernel.NO_CANDIDATE, **overrides):
    """Submit the lab jobs, each `repeat` times; return the run folder
    with submitted.json. The job definitions are kept in the run folder
    (<target>-<variant>.job.yaml), so that a retry submits what was
    submitted first."""
    if repeat < 1:
        raise KgateError(f"--repeat wants 1 or more, not {repeat}")
    runner.check_unique(tgt_names, variants)
    version = check_identity(identity)
    items = write_lab_jobs(tgt_names, variants, base_url, jobs=jobs, cand=cand, **overrides)
    run_dir = runner.new_run_dir()
    record = {"identity": identity, "server_version": version, "base_url": base_url,
              "submitted": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              # what was meant, so that a job whose submission failed is
              # missing from the results, not forgotten
              "planned": results.planned_jobs((it["target"], it["variant"]) for it in items),
              "jobs": []}
    try:
        for it in items:
            kept = os.path.join(run_dir, f"{it['target']}-{it['variant']}.job.yaml")
            shutil.copyfile(it["file"], kept)
            for r in range(repeat):
                entry = dict(it, id=submit_one(identity, kept), file=os.path.relpath(kept, TOP),
                             run=r, retry=0)
                record["jobs"].append(entry)
                log(f"[submit] {it['target']}/{it['variant']}"
                    + (f" run {r + 1} of {repeat}" if repeat > 1 else "") + f": job {entry['id']}")
    finally:
        # Whatever was submitted is on record, to collect or cancel.
        write_record(run_dir, record)
    return run_dir


def newest_submitted(runs_dir):
    """The newest run folder that holds a submitted.json."""
    names = sorted((n for n in os.listdir(runs_dir) if n != "latest" and
                    os.path.isfile(os.path.join(runs_dir, n, SUBMITTED))), reverse=True) \
        if os.path.isdir(runs_dir) else []
    if not names:
        raise KgateError(f"no submitted run under {runs_dir}: 'kgate.py submit' first")
    return os.path.join(runs_dir, names[0])


def parse_results(text):
    """lavacli results ID --yaml -> (cases, errors) in lavalog's shape."""
    try:
        rows = yaml.load(text, Loader=StrictYamlLoader)  # noqa: S506 - a SafeLoader
    except (yaml.YAMLError, RecursionError):
        raise LabError(f"lavacli results: not YAML kgate can read: {quoted(text)}") from None
    rows = [] if rows is None else rows
    if not isinstance(rows, list):
        raise LabError(f"lavacli results: not a list of results: {quoted(text)}")
    cases, errors = [], []
    for r in rows:
        if not isinstance(r, dict):
            # what cannot be read cannot pass
            cases.append({"definition": "?", "case": f"unreadable result {quoted(r, 60)}",
                          "result": results.UNKNOWN})
            continue
        suite, name, res = str(r.get("suite", "")), str(r.get("name", "")), str(r.get("result", ""))
        if suite == "lava":
            meta = r.get("metadata") or {}
            if res == "fail" and isinstance(meta, dict) and meta.get("error_msg"):
                errors.append(f"{name}: {meta['error_msg']}")
            continue
        item = {"definition": suite, "case": name, "result": res}
        m = r.get("measurement")
        if m not in (None, "", "None"):
            try:
                item["measurement"] = float(m)
                item["units"] = str(r.get("unit") or "")
            except (TypeError, ValueError):
                pass
        cases.append(item)
    return cases, errors


def _lava_time(text):
    """LAVA's '20261206T10:00:00' (UTC) as a datetime, or None."""
    try:
        return datetime.datetime.strptime(str(text), "%Y%m%dT%H:%M:%S")
    except (TypeError, ValueError):
        return None


def _seconds(show):
    a, b = _lava_time(show.get("start_time")), _lava_time(show.get("end_time"))
    return (b - a).total_seconds() if a and b else None


def device_worker(identity, device, workers):
    """The worker a device belongs to (lavacli devices show), looked up
    once per device (workers: a dict kept across jobs); None if unknown."""
    if not isinstance(device, str) or not device or device.startswith("-"):
        return None
    if device not in workers:
        try:
            workers[device] = lab_json(lavacli(identity, "devices", "show", device, "--json"),
                                       f"lavacli devices show {device}").get("worker")
        except KgateError:
            workers[device] = None
    return workers[device]


def side_by_side(jobs):
    """The pairs of jobs (results.json entries, or their attempts) that
    ran at once on different workers: [(a, b), ...], each pair once."""
    ran = []
    for job in jobs:
        for j in job.get("attempts") or [job]:
            start, end = _lava_time(j.get("lava_start")), _lava_time(j.get("lava_end"))
            if j.get("lava_worker") and start and end:
                ran.append((j, start, end))
    return [(a, b) for i, (a, sa, ea) in enumerate(ran) for b, sb, eb in ran[i + 1:]
            if a["lava_worker"] != b["lava_worker"] and sa < eb and sb < ea]


def collect_job(identity, it, run_dir, timeout, workers=None):
    """Wait for one job and read its health, results and log into its
    attempt's folder; workers: device_worker()'s lookups."""
    this = Job.of(it)
    outdir = os.path.join(run_dir, this.folder)
    os.makedirs(outdir, exist_ok=True)
    job_id = str(it["id"])
    # 'jobs wait' exits 0 whatever the job's health: it is read below.
    try:
        lavacli(identity, "jobs", "wait", job_id, "--polling", "5", timeout=timeout)
    except KgateError as e:
        log(f"[collect] job {job_id}: {e}")
    show = lab_json(lavacli(identity, "jobs", "show", job_id, "--json"),
                    f"lavacli jobs show {job_id}")
    state, health = show.get("state"), show.get("health")
    device = show.get("device") if isinstance(show.get("device"), str) else None
    cases, errors, tail = [], [], []
    if state == "Finished":
        cases, errors = parse_results(lavacli(identity, "results", job_id, "--yaml"))
        try:
            log_text = lavacli(identity, "jobs", "logs", job_id, "--raw", timeout=300)
            atomic_write(os.path.join(outdir, "lava.log"), log_text)
            parsed = lavalog.parse(log_text)
            tail = parsed["tail"]
            # The kernel-log case is ours: read from the job's log.
            klog = lavalog.kernel_log_case(parsed["console"], parsed["dmesg"], bool(cases))
            if klog:
                cases.append(klog)
        except KgateError as e:
            errors.append(f"log not fetched: {e}")
    else:
        errors.append(f"job {job_id} still {state} after {timeout}s")
    if show.get("failure_comment"):
        errors.append(str(show["failure_comment"]))
    ok = state == "Finished" and health == "Complete"
    job = this.record(
        "complete" if ok else "incomplete", cases, errors, _seconds(show),
        bench=render.has_bench(it["variant"]), tail=tail,
        lava_job=int(job_id), lava_state=state, lava_health=health,
        # Where and when it ran, to show jobs spread over workers.
        lava_device=device,
        lava_worker=device_worker(identity, device, {} if workers is None else workers),
        lava_start=show.get("start_time"), lava_end=show.get("end_time"))
    if not ok:
        job["reason"] = (f"LAVA job {job_id} {state}/{health}" if job["verdict"] == results.INFRA
                         else f"{job['reason']} (LAVA job {job_id} {state}/{health})")
    return job


def resubmit(identity, run_dir, it, job, retry):
    """Submit a job again after an infrastructure verdict; return its
    record entry, or None (said why) when it must not or cannot be."""
    what = f"{it['target']}/{it['variant']}"
    if job.get("lava_state") != "Finished":
        # Still queued or running: a second copy would only wait too.
        log(f"[collect] {what}: job {it['id']} not finished; not submitted again "
            f"(collect again later)")
        return None
    kept = os.path.join(run_dir, f"{it['target']}-{it['variant']}.job.yaml")
    if not os.path.isfile(kept):
        # Runs submitted before definitions were kept: jobs/lab/ may
        # hold another kernel's job by now.
        log(f"[collect] {what}: no {os.path.basename(kept)} in the run folder; not submitted again")
        return None
    try:
        return dict(it, id=submit_one(identity, kept), retry=retry)
    except KgateError as e:
        log(f"[collect] {what}: could not submit again: {e}")
        return None


_RECORD_JOB = {"target": str, "variant": str, "id": int, "run": int, "retry": int,
               "kernel_sha256": str, "rootfs_sha256": str}


def read_record(path):
    """submitted.json, checked: every job once (target, variant, run,
    retry), each run's attempts numbered 0, 1, ... in order. A record
    that says otherwise is refused, never read as retries of each
    other."""
    try:
        with open(path, encoding="utf-8") as f:
            record = loads_json(f.read())
    except (OSError, ValueError) as e:
        raise KgateError(f"{path}: not a submitted run: {e}") from None
    if not isinstance(record, dict) or not isinstance(record.get("identity"), str) or \
            not isinstance(record.get("jobs"), list) or \
            not isinstance(record.get("submitted"), str):
        raise KgateError(f"{path}: not a submitted run (identity, submitted, jobs)")
    attempts = {}
    for it in record["jobs"]:
        if not isinstance(it, dict):
            raise KgateError(f"{path}: a job is not an object: {it!r:.60}")
        it.setdefault("run", 0)
        it.setdefault("retry", 0)
        bad = [k for k, kind in _RECORD_JOB.items()
               if not isinstance(it.get(k), kind) or isinstance(it.get(k), bool)]
        if bad:
            raise KgateError(f"{path}: job {it.get('id')!r}: {', '.join(bad)} missing or wrong")
        check_variant(it["variant"])
        what = f"{it['target']}/{it['variant']} run {it['run'] + 1}"
        tried = attempts.setdefault((it["target"], it["variant"], it["run"]), [])
        if it["retry"] != len(tried):
            raise KgateError(f"{path}: {what} lists attempt {it['retry']} "
                             f"{'twice' if it['retry'] < len(tried) else 'out of order'}: "
                             "a job is never collected as another's retry")
        tried.append(it["id"])
    ids = [it["id"] for it in record["jobs"]]
    if len(set(ids)) != len(ids):
        raise KgateError(f"{path}: a LAVA job id is listed twice")
    return record


def collect(run_dir, identity=None, timeout=1800, retry_infra=1):
    """Collect every job of a submitted run into its folder; return the
    doc. A job whose verdict is infrastructure is submitted again (its
    kept definition), up to retry_infra times per run of it; retries
    submitted by an earlier collect are collected, not submitted again."""
    path = os.path.join(run_dir, SUBMITTED)
    if not os.path.isfile(path):
        raise KgateError(f"no {SUBMITTED} in {run_dir}: not a submitted run")
    record = read_record(path)
    if identity and identity != record["identity"]:
        log(f"[collect] asking lavacli identity {identity!r}, not {record['identity']!r} "
            f"that submitted the run")
    identity = identity or record["identity"]
    check_identity(identity)
    # The attempts of each job, per run of it, in submission order.
    groups = {}
    for it in record["jobs"]:
        groups.setdefault((it["target"], it["variant"]), {}).setdefault(it["run"], []).append(it)
    done = []
    workers = {}
    for (name, v), runs in groups.items():
        tries = []
        for r, entries in sorted(runs.items()):
            what = f"{name}/{v}" + (f" run {r + 1}" if len(runs) > 1 else "")
            tried = []

            def attempt(n, entries=entries, what=what, tried=tried):
                if n == len(entries):
                    # the record's attempts are used up: submit again
                    again = resubmit(identity, run_dir, entries[-1], tried[-1], n)
                    if not again:
                        return None
                    log(f"[collect] {what}: infrastructure, submitted again as job {again['id']}")
                    record["jobs"].append(again)
                    write_record(run_dir, record)
                    entries.append(again)
                it = entries[n]
                said = what + (f" retry {n}" if n else "")
                log(f"[collect] waiting for {said} (job {it['id']})")
                job = collect_job(identity, it, run_dir, timeout, workers)
                log(f"[collect] {said}: {job['verdict']} ({job['reason']})"
                    + (f" on {job['lava_device']}" if job["lava_device"] else "")
                    + (f" ({job['lava_worker']})" if job["lava_worker"] else ""))
                tried.append(job)
                return job

            # The attempts an earlier collect submitted are collected
            # whatever retry_infra says now.
            retry_attempts(attempt, max(retry_infra, len(entries) - 1))
            if len(tried) < len(entries):
                # only infrastructure is retried: an attempt that was
                # judged decides, whatever the record lists after it
                log(f"[collect] {what}: {tried[-1]['verdict']}, yet the record lists "
                    f"{len(entries) - len(tried)} more attempt(s): not collected")
            tries.append(tried)
        done.append(results.combine_runs(tries))
    finished = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    doc = results.write_json(os.path.join(run_dir, "results.json"), os.path.basename(run_dir),
                             record["submitted"], finished, done, planned=record.get("planned"))
    runner.write_reports(run_dir, doc)
    runner.point_latest(run_dir)
    return doc
