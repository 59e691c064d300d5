"""Build what is missing, run the jobs locally with lava-run, collect the
results into a per-run folder and print the matrix."""
import concurrent.futures
import dataclasses
import datetime
import fcntl
import os
import shutil
import subprocess
import threading
import time

from . import figures, kernel, lavalog, render, reports, results, rootfs
from . import workspace
from .job import Job, retry_infra as retry_attempts
from .workspace import new_out_dir
from .common import (CANDIDATE, TOP, VARIANTS, KgateError, atomic_copy, atomic_write,
                     base_variant, check_variant, is_debug, log, need_tools, sha256_file,
                     target)

DISPATCHER = os.path.join(TOP, "templates", "dispatcher.yaml")
# lava-run keeps a job's files in /var/lib/lava/dispatcher/tmp/<job id>,
# shared by every kgate checkout on the machine: ids start from the pid.
_job_ids = iter(range(os.getpid() * 1000 + 1, 1 << 62))
_job_id_lock = threading.Lock()


class RunLock:
    """One run at a time: a second one fails at once with a clear error."""

    def __init__(self):
        self.build = workspace.current().build
        self.path = os.path.join(self.build, "run.lock")
        self.f = None

    def __enter__(self):
        os.makedirs(self.build, exist_ok=True)
        self.f = open(self.path, "a+")
        try:
            fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.f.seek(0)
            holder = self.f.read().strip() or "?"
            self.f.close()
            raise KgateError(f"another kgate run is in progress (pid {holder}); "
                             f"wait for it or stop it") from None
        self.f.seek(0)
        self.f.truncate()
        self.f.write(f"{os.getpid()}\n")
        self.f.flush()
        return self

    def __exit__(self, *exc):
        self.f.close()


def candidate_image(tgt_name, cand):
    """The user's prebuilt image (kgate.py run --image T=PATH), copied
    next to the built ones (so a run and a lab fetch one fixed file)."""
    src = cand.images[tgt_name]
    if not os.path.isfile(src):
        raise KgateError(f"--image {tgt_name}={src}: no such file")
    dst = kernel.image_path(tgt_name, CANDIDATE)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    atomic_copy(src, dst)
    atomic_write(os.path.join(kernel.out_dir(tgt_name, CANDIDATE), "key"), f"prebuilt {src}\n")
    log(f"[kernel {tgt_name}/{CANDIDATE}] prebuilt image {src}")
    return dst


def target_variants(tgt_name, variants, quiet=False):
    """The variants a target runs: the debug ones only where the target
    has a debug kernel (kernel/configs/<target>.debug.config); the
    others are named on stderr unless quiet."""
    out = [v for v in variants if not is_debug(v) or kernel.has_debug(tgt_name)]
    if len(out) < len(variants) and not quiet:
        log(f"kgate: {tgt_name} has no debug kernel "
            f"({os.path.relpath(kernel.debug_fragment(tgt_name), TOP)}): "
            f"no {', '.join(v for v in variants if v not in out)} job")
    return out


def artifacts(tgt_name, variants, jobs=None, cand=kernel.NO_CANDIDATE):
    """Build (or reuse) kernels (the candidate: cand's) and initramfs;
    return {variant: {...}},
    each with "build": the seconds this run spent on its kernel and
    initramfs, and whether the kernel was cached."""
    out = {}
    t0 = time.monotonic()
    rfs = rootfs.build(tgt_name, jobs=jobs)
    rfs_s = round(time.monotonic() - t0, 1)
    rfs_art = {"url": "file://" + rfs, "sha256": sha256_file(rfs), "path": rfs}
    for v in variants:
        t0 = time.monotonic()
        rec = {"cached": False}
        if v == CANDIDATE and cand.images:
            if tgt_name not in cand.images:
                raise KgateError(f"no --image for {tgt_name} (given for: "
                                 f"{', '.join(sorted(cand.images))})")
            img = candidate_image(tgt_name, cand)
            rec["prebuilt"] = True
        else:
            img = kernel.build(tgt_name, v, jobs=jobs, record=rec, cand=cand)
        rec.update(kernel=round(time.monotonic() - t0, 1), rootfs=rfs_s)
        out[v] = {"kernel": {"url": "file://" + img, "sha256": sha256_file(img), "path": img},
                  "rootfs": rfs_art, "build": rec}
        if not rec.get("prebuilt"):
            # how this image was built: kept with the job's results
            made = kernel.build_record(tgt_name, v) or {}
            out[v]["kernel_build"] = {k: made[k] for k in BUILD_FACTS if made.get(k)}
            out[v]["config"] = kernel.config_path(tgt_name, v)
    return out


# What a job's results keep of its kernel's build (kernel.build_record).
BUILD_FACTS = ("compiler", "fragments", "config_name", "command", "finished")


def record_trees(run_dir, variants, cand):
    """Copy each kernel tree's patches into run_dir/patches/<variant>/
    and return {variant: {'source', 'patches': [{'name', 'sha256',
    'file'}]}} for results.json: what each kernel was built from, kept
    with the run (a prebuilt --image candidate has no entry)."""
    trees = {}
    for v in dict.fromkeys(base_variant(v) for v in variants):
        if v == CANDIDATE and cand.source:
            trees[v] = {"source": cand.source, "patches": []}
            continue
        if v == CANDIDATE and not cand.patches:
            continue  # prebuilt images: no tree
        folder = os.path.join("patches", v)
        os.makedirs(os.path.join(run_dir, folder))
        patches = []
        names = set()
        for i, path in enumerate(kernel.variant_patches(v, cand), 1):
            name = os.path.basename(path)
            if name in names:
                # two series may share a name: the later one is numbered
                name = f"{i:04d}-{name}"
            names.add(name)
            shutil.copyfile(path, os.path.join(run_dir, folder, name))
            patches.append({"name": name, "sha256": sha256_file(path),
                            "file": os.path.join(folder, name)})
        try:
            source = kernel.source_id()
        except OSError:
            source = None  # the tarball is gone: its kernels were built before
        trees[v] = {"source": source, "patches": patches}
    return trees


# The lava-run processes of this run, to stop them when it is interrupted.
_procs = set()
_procs_lock = threading.Lock()


def stop_jobs():
    """Ask every running lava-run to stop (it ends its QEMU), then wait."""
    with _procs_lock:
        procs = list(_procs)
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


def run_job(job_path, device_path, outdir, timeout):
    """Run one job with lava-run; return (parsed results, seconds)."""
    with _job_id_lock:
        job_id = next(_job_ids)
    logpath = os.path.join(outdir, "lava.log")
    tmp = os.path.join(outdir, "lava-run")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = ["lava-run", "--job-id", str(job_id), "--output-dir", tmp, "--device", device_path,
           "--dispatcher", DISPATCHER, job_path]
    start = time.monotonic()
    with open(logpath, "w", encoding="utf-8") as logf:
        p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
        with _procs_lock:
            _procs.add(p)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            logf.write('{"lvl": "error", "msg": "kgate: lava-run exceeded its %ds limit"}\n' % timeout)
        finally:
            with _procs_lock:
                _procs.discard(p)
    secs = time.monotonic() - start
    shutil.rmtree(tmp, ignore_errors=True)
    with open(logpath, encoding="utf-8", errors="replace") as f:
        parsed = lavalog.parse(f.read())
    return parsed, secs


def new_run_dir():
    """A new folder under build/runs."""
    return new_out_dir(workspace.current().runs)


def point_latest(run_dir):
    link = workspace.current().latest
    tmp = link + f".tmp{os.getpid()}"
    os.symlink(os.path.basename(run_dir), tmp)
    os.replace(tmp, link)


def write_reports(run_dir, doc):
    """Everything a run folder holds besides results.json: matrix.txt,
    junit.xml, report.html and, when a job measured anything, bench.txt
    and bench.svg."""
    jobs = doc["jobs"]
    atomic_write(os.path.join(run_dir, "matrix.txt"), results.matrix(jobs) + "\n")
    atomic_write(os.path.join(run_dir, "junit.xml"), reports.junit(doc))
    text = figures.table(jobs)
    plot = figures.svg(jobs) if text else None
    if text:
        atomic_write(os.path.join(run_dir, "bench.txt"), text + "\n")
        atomic_write(os.path.join(run_dir, "bench.svg"), plot)
    atomic_write(os.path.join(run_dir, "report.html"), reports.html(doc, plot, text))


def preflight(target_names):
    """What would stop many runs alike (mutants, bisect steps), checked
    once: a usage error now, not every run undecided later."""
    for name in target_names:
        target(name)
    check_runnable()
    with RunLock():
        pass


def check_runnable():
    """What running jobs locally needs, checked before anything is built."""
    need_tools(["lava-run"], "install lava-dispatcher: 'make deps'")
    if os.geteuid() != 0:
        raise KgateError("lava-run needs root (it manages QEMU and /var/lib/lava)")


def check_unique(target_names, variants):
    """A target or a variant named twice would run (or submit) one job
    twice under one name, and the second would hide the first: refused
    before anything is built."""
    for what, names in (("target", target_names), ("variant", variants)):
        twice = sorted({n for n in names if list(names).count(n) > 1})
        if twice:
            raise KgateError(f"{what} named twice: {', '.join(twice)}")


@dataclasses.dataclass(frozen=True)
class Options:
    """How a run goes, passed down as one value.

    parallel: jobs at once; jobs: make -j (None: cores + 1); bench=False
    leaves the benchmark out of every job; latest=False leaves
    build/runs/latest pointing where it did; retry_infra: how many more
    times a job whose verdict is infrastructure runs (every attempt is
    kept, see job.attempt_folder, and listed in the job's 'attempts';
    only infrastructure is retried: a job with a failed case is a
    regression, never run again into a pass); repeat: each job that many
    times, runs that disagree make it flaky (results.combine_runs);
    overlap: a target's jobs start as soon as its kernels and initramfs
    are built, while the next target builds (not with repeat: its rounds
    need every job first). Overlap is off by default: on two cores it
    gained nothing (a 3-target candidate run took 127 s with it, 126 s
    without: builds beside two guests took 3-4 times as long, and the
    guests were slower too)."""
    parallel: int = 1
    jobs: int = None
    bench: bool = True
    latest: bool = True
    retry_infra: int = 1
    repeat: int = 1
    overlap: bool = False
    # The job template's overrides (render.render_job): a program's
    # arguments, timeouts.
    job: dict = dataclasses.field(default_factory=dict)


def run(target_names, variants=VARIANTS, cand=kernel.NO_CANDIDATE, opts=None, **options):
    """Run the matrix for target_names x variants (the candidate
    variants: cand, a kernel.Candidate) as opts (an Options, or its
    fields as keywords) say; return (doc, run_dir)."""
    opts = opts or Options(**options)
    if opts.repeat < 1:
        raise KgateError(f"--repeat wants 1 or more, not {opts.repeat}")
    for v in variants:
        check_variant(v)
    check_unique(target_names, variants)
    plan = [(target(t), target_variants(t, variants)) for t in target_names]
    plan = [(tgt, vs) for tgt, vs in plan if vs]
    if not plan:
        raise KgateError(f"no job to run: none of {', '.join(target_names)} has a "
                         f"{' or '.join(variants)} kernel")
    check_runnable()
    if opts.overlap and opts.repeat > 1:
        opts = dataclasses.replace(opts, overlap=False)
    with RunLock():
        return _Run(plan, variants, cand, opts).go()


class _Run:
    """One run of the matrix: its folder, its jobs' attempts, the pool."""

    def __init__(self, plan, variants, cand, opts):
        self.plan, self.variants, self.cand, self.opts = plan, variants, cand, opts
        self.run_dir = self.trees = None
        self.stopping = threading.Event()

    def attempt(self, item, r, n, queued):
        """Attempt n at run r of a job (item: Job, job file, device,
        artifacts): its folder, lava-run, its results entry."""
        job, job_path, dev, art = item
        job = job.attempt(r, n)
        name, v, folder = job.target, job.variant, job.folder
        repeat = self.opts.repeat
        outdir = os.path.join(self.run_dir, folder)
        os.makedirs(outdir)
        shutil.copy(job_path, os.path.join(outdir, "job.yaml"))
        if os.path.isfile(art.get("config") or ""):
            shutil.copy(art["config"], os.path.join(outdir, "kernel.config"))
        waited = time.monotonic() - queued
        began = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        log(f"[run] start  {name}/{v}" + (f" (run {r + 1} of {repeat})" if repeat > 1 else "")
            + (f" (retry {n} after infrastructure)" if n else ""))
        # lava-run is stopped when the job's own timeout has passed.
        parsed, secs = run_job(job_path, dev, outdir, render.timeouts(v)["job"] * 60)
        # Where the time went: built (this run), queued for a worker,
        # then lava-run's phases (lavalog.parse) and what is left of its
        # wall time (start-up, exit).
        timing = dict(parsed["timing"], build=art.get("build", {}), queued=round(waited, 1))
        phases = sum(timing.get(p, 0) for p in set(lavalog.PHASES.values()))
        timing["lava_overhead"] = round(max(0.0, secs - phases), 1)
        extra = {"started": began}
        if art.get("kernel_build"):
            extra["kernel_build"] = art["kernel_build"]
        if os.path.isfile(os.path.join(outdir, "kernel.config")):
            extra["kernel_config"] = os.path.join(folder, "kernel.config")
        rec = job.record(parsed["health"], parsed["cases"], parsed["errors"], round(secs, 1),
                         timing, bench=render.has_bench(v, self.opts.bench),
                         tail=parsed["tail"], **extra)
        log(f"[run] end    {name}/{v}: {rec['verdict']} ({rec['reason']}) in {secs:.1f}s")
        return rec

    def one(self, task):
        """Every attempt at run r of a job. queued: when the job was
        handed to the pool (a retry's wait counts from there too)."""
        item, r, queued = task
        return retry_attempts(lambda n: self.attempt(item, r, n, queued),
                              self.opts.retry_infra, self.stopping.is_set)

    def start(self):
        """The run folder, made when the first target is built."""
        opts = self.opts
        self.run_dir = new_run_dir()
        self.trees = record_trees(self.run_dir, self.variants, self.cand)
        log(f"[run] {sum(len(vs) for _, vs in self.plan)} jobs" +
            (f", each {opts.repeat} times" if opts.repeat > 1 else "") +
            f", {opts.parallel} at a time" +
            (", each target's as soon as it is built" if opts.overlap else "") +
            f"; results in {os.path.relpath(self.run_dir, TOP)}")

    def execute(self, pool):
        """Build each target, then run its jobs (at once with overlap,
        else in rounds); return each job's combined entry."""
        opts = self.opts
        todo, futures = [], []
        for tgt, tvariants in self.plan:
            arts = artifacts(tgt["name"], tvariants, jobs=opts.jobs, cand=self.cand)
            paths = render.write_local(tgt["name"], arts, bench=opts.bench, **opts.job)
            if self.run_dir is None:
                self.start()
            for v in tvariants:
                job = Job(tgt["name"], v, arts[v]["kernel"]["sha256"],
                          arts[v]["rootfs"]["sha256"])
                item = (job, paths[v], render.device_path(tgt["name"]), arts[v])
                todo.append(item)
                if opts.overlap:
                    futures.append(pool.submit(self.one, (item, 0, time.monotonic())))
        if opts.overlap:
            return [results.combine_runs([f.result()]) for f in futures]
        # In rounds (each job once, then again): the runs of a job never
        # run beside each other, and a round loads the machine as a run
        # without --repeat does.
        rounds = [list(pool.map(self.one, [(item, r, time.monotonic()) for item in todo]))
                  for r in range(opts.repeat)]
        return [results.combine_runs([rnd[i] for rnd in rounds]) for i in range(len(todo))]

    def go(self):
        t_start = time.monotonic()
        started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        # Interrupted (Ctrl-C, or SIGTERM from a CI runner: cli.main
        # turns it into KeyboardInterrupt) or a build that failed under
        # running jobs: stop the guests and write nothing, so no half
        # run looks complete.
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, self.opts.parallel)) \
                as pool:
            try:
                done = self.execute(pool)
            except BaseException as e:  # noqa: B036 (re-raised)
                self.stopping.set()
                pool.shutdown(wait=False, cancel_futures=True)
                stop_jobs()
                if self.run_dir:
                    why = "interrupted" if isinstance(e, KeyboardInterrupt) else "stopped"
                    log(f"[run] {why}: no results written in "
                        f"{os.path.relpath(self.run_dir, TOP)}")
                raise
        finished = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        run_dir = self.run_dir
        doc = results.write_json(os.path.join(run_dir, "results.json"), os.path.basename(run_dir),
                                 started, finished, done,
                                 candidate=self.cand.describe()
                                 if CANDIDATE in map(base_variant, self.variants) else None,
                                 seconds=round(time.monotonic() - t_start, 1), trees=self.trees,
                                 planned=results.planned_jobs(
                                     (tgt["name"], v) for tgt, vs in self.plan for v in vs))
        write_reports(run_dir, doc)
        if self.opts.latest:
            point_latest(run_dir)
        return doc, run_dir
