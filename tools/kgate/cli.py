"""kgate command line."""
import argparse
import dataclasses
import json
import os
import signal
import tempfile
import traceback

from . import (bench, bisect, compare, figures, golden, kcidb, kernel, lab, mutants, render,
               results, rootfs, soak)
from . import run as runner
from . import selftest, suite, workspace
from .common import (ALL_VARIANTS, CANDIDATE, KNOWN_BAD, TOP, VARIANTS, CandidateError, InfraError,
                     KgateError, base_variant, debug_twin, default_targets,
                     expand_targets, group_of, load_targets, log, target, with_debug,
                     write_output)


def cmd_list(args):
    for name, row in load_targets().items():
        off = f"  (disabled: {row['disabled']})" if row.get("disabled") else ""
        print(f"{name:10} {row['qemu']:22} {row['machine']:15} {row['endian']:6} "
              f"{row['bits']}-bit  {group_of(row)}{off}")
    return 0


def cmd_packages(args):
    pkgs = [s.package for s in kernel.load_series()[1].values()]
    for row in load_targets().values():
        for key in ("gcc_package", "libc_package", "qemu_package", "firmware_package"):
            if row.get(key) and row[key] not in pkgs:
                pkgs.append(row[key])
    print(" ".join(pkgs))
    return 0


def cmd_source(args):
    print(kernel.pristine())
    return 0


def cmd_series(args):
    s = kernel.kernel_series()
    if args.patches:
        for kind in ("patches", "control", "mutants"):
            for path in kernel.series(kind):
                print(os.path.relpath(path, TOP))
        return 0
    print(f"{s.name}: {s.package} ({s.tarball})")
    for kind in ("patches", "control", "mutants", "configs"):
        print(f"  {kind}: {os.path.relpath(getattr(s, kind), TOP)}/")
    return 0


def cmd_kernel(args):
    for variant in args.variant or VARIANTS:
        path = kernel.build(args.target, variant, jobs=args.jobs, force=args.force)
        print(path)
    return 0


def cmd_rootfs(args):
    print(rootfs.build(args.target, jobs=args.jobs, force=args.force))
    return 0


def cmd_native(args):
    for path in rootfs.build_native(os.path.abspath(args.dir)).values():
        print(os.path.relpath(path, TOP))
    return 0


def cmd_jobs(args):
    for name in args.target or list(load_targets()):
        arts = runner.artifacts(name, VARIANTS, jobs=args.jobs)
        for path in render.write_local(name, arts).values():
            print(os.path.relpath(path, TOP))
    return 0


def cmd_golden(args):
    if args.update:
        written, removed = golden.update()
        print(f"golden: {written} file(s) written, {removed} removed under "
              f"{os.path.relpath(golden.GOLDEN, TOP)}")
        return 0
    diff = golden.compare()
    if diff:
        print("".join(diff), end="")
        print("golden: the rendered jobs differ from the stored ones (above); if the change is "
              "meant, 'kgate.py golden --update' and commit the diff")
        return 1
    print(f"golden: every rendered job and device matches {os.path.relpath(golden.GOLDEN, TOP)}")
    return 0


def print_gate(doc):
    """The matrix and the gate's verdict of a run, judged again from its
    cases (results.judge: never what a file says); return its exit
    code."""
    doc = results.judge(doc)
    print(results.matrix(doc["jobs"]))
    print()
    fig = figures.table(doc["jobs"])
    if fig:
        print(fig)
        print()
    print(f"Gate: {doc['verdict'].upper()}: {doc['summary']}")
    return doc["exit_code"]


def candidate_setup(args):
    """The candidate kernel from --patches/--source/--image; return
    (targets, variants, candidate) to run."""
    images = {}
    for spec in args.image or []:
        tgt, sep, path = spec.partition("=")
        if not sep or not path:
            raise KgateError(f"--image wants TARGET=PATH, not {spec!r}")
        target(tgt)  # an unknown target is an error now
        if not os.path.isfile(path):
            raise KgateError(f"--image {spec}: no such file")
        images[tgt] = os.path.abspath(path)
    if images and (args.patches or args.source):
        raise KgateError("--image excludes --patches and --source")
    cand = kernel.Candidate(patches=args.patches, source=args.source, images=images)
    has_candidate = bool(cand)
    # --variant fixed --variant fixed means one fixed job
    variants = list(dict.fromkeys(args.variant or [])) or \
        ([CANDIDATE, KNOWN_BAD] if has_candidate else list(VARIANTS))
    if args.debug:
        variants = with_debug(variants)
    if images and debug_twin(CANDIDATE) in variants:
        raise KgateError("--image gives one plain kernel; a debug candidate is built from "
                         "--patches or --source")
    if any(base_variant(v) == CANDIDATE for v in variants) and not has_candidate:
        raise KgateError(f"--variant {CANDIDATE} needs --patches DIR, --source DIR or "
                         "--image T=PATH")
    names = args.target or (sorted(images, key=list(load_targets()).index) if images
                            else default_targets())
    without = [n for n in names if images and n not in images]
    if without and CANDIDATE in variants:
        raise KgateError(f"no --image for {', '.join(without)} (given for: "
                         f"{', '.join(sorted(images))})")
    return names, variants, cand


def cmd_run(args):
    names, variants, cand = candidate_setup(args)
    opts = runner.Options(parallel=args.parallel, jobs=args.jobs, retry_infra=args.retry_infra,
                          repeat=args.repeat, overlap=args.overlap, job=job_overrides(args))
    doc, run_dir = runner.run(names, variants, cand, opts)
    code = print_gate(doc)
    print(f"Results: {os.path.relpath(os.path.join(run_dir, 'results.json'), TOP)}")
    return code


def cmd_matrix(args):
    path = args.results or os.path.join(workspace.current().latest, "results.json")
    if not os.path.exists(path):
        raise KgateError(f"no results at {path}: run 'make run' first")
    return print_gate(compare.load(path))


def lab_overrides(args):
    """The lab's own parameters for the job template."""
    over = {"device_type": args.device_type, "priority": args.priority,
            "visibility": args.visibility, "job_prefix": args.job_prefix,
            "tags": args.tag or None}
    if args.job_timeout:
        # A busy lab's queue and slower workers: the whole job's limit.
        over["timeouts"] = {"job": args.job_timeout}
    over = {k: v for k, v in over.items() if v is not None}
    render.check_user_fields(over)  # before anything is built
    return over


def cmd_lab_jobs(args):
    lab.check_base_url(args.base_url)
    names, variants, cand = candidate_setup(args)
    for it in lab.write_lab_jobs(names, variants, args.base_url, jobs=args.jobs, cand=cand,
                                 **lab_overrides(args)):
        print(os.path.relpath(it["file"], TOP))
    return 0


def cmd_serve(args):
    lab.check_port(args.port)
    if not args.no_build:
        for name in args.target or default_targets():
            lab.stage(name, VARIANTS, jobs=args.jobs)
    try:
        lab.serve(args.bind, args.port)
    except KeyboardInterrupt:
        log("[serve] stopped")
    return 0


def cmd_submit(args):
    lab.check_base_url(args.base_url)
    names, variants, cand = candidate_setup(args)
    run_dir = lab.submit(args.identity, names, variants, args.base_url,
                         jobs=args.jobs, repeat=args.repeat, cand=cand, **lab_overrides(args))
    print(f"Submitted: {os.path.relpath(os.path.join(run_dir, lab.SUBMITTED), TOP)}")
    if args.no_wait:
        print(f"Collect with: kgate.py collect {os.path.relpath(run_dir, TOP)}")
        return 0
    code = print_gate(lab.collect(run_dir, args.identity, timeout=args.timeout,
                                  retry_infra=args.retry_infra))
    print(f"Results: {os.path.relpath(os.path.join(run_dir, 'results.json'), TOP)}")
    return code


def cmd_collect(args):
    run_dir = args.run or lab.newest_submitted(workspace.current().runs)
    code = print_gate(lab.collect(os.path.realpath(run_dir), args.identity, timeout=args.timeout,
                                  retry_infra=args.retry_infra))
    print(f"Results: {os.path.relpath(os.path.join(run_dir, 'results.json'), TOP)}")
    return code


def add_candidate_args(s):
    g = s.add_argument_group(
        "the kernel you want to ship (variant 'candidate', judged like 'fixed'; "
        "the default variants become candidate and known-bad)")
    g.add_argument("--patches", metavar="DIR",
                   help="your patches on top of Debian's 6.1 and kernel/patches: DIR/series, "
                   "else every *.patch/*.diff in name order")
    g.add_argument("--source", metavar="DIR",
                   help="your own (clean) kernel source tree, built with kgate's configs")
    g.add_argument("--image", action="append", metavar="TARGET=PATH",
                   help="a prebuilt kernel image for TARGET (repeatable); "
                   "without named targets, the targets given images")
    s.add_argument("--debug", action="store_true",
                   help="also run the debug kernel (KASAN, lockdep, ...: kernel/configs/"
                   "debug.config) of the fixed or candidate kernel, on the targets that have "
                   "one (kernel/configs/<target>.debug.config)")


def _at_least(least):
    """An argparse type: a whole number, least or more."""
    def parse(text):
        try:
            n = int(text)
        except ValueError:
            n = least - 1
        if n < least:
            raise argparse.ArgumentTypeError(f"wants a whole number, {least} or more: {text!r}")
        return n
    return parse


_non_negative = _at_least(0)
_positive = _at_least(1)


def add_run_args(s):
    """What 'run' and 'soak' take: targets, variants, parallelism, the
    candidate kernel."""
    s.add_argument("target", nargs="*", help="targets or groups (default: the default group; 'all': every target; see 'list')")
    s.add_argument("--variant", action="append", choices=ALL_VARIANTS,
                   help="variant to run (repeatable; default: fixed and known-bad)")
    s.add_argument("-p", "--parallel", type=_positive, default=2, help="jobs at once (default: 2)")
    s.add_argument("-j", "--jobs", type=_positive, help="parallel make jobs (default: cores + 1)")
    add_retry_arg(s)
    add_candidate_args(s)


def add_suite_arg(s):
    s.add_argument("--suite", action="append", metavar="NAME",
                   help="run only this suite of suites/gate.yaml (repeatable; default: all; "
                   "the known-bad control must then fail this suite's cases)")


def _program_args(value):
    prog, sep, args = value.partition("=")
    if not sep or not prog or not args:
        raise argparse.ArgumentTypeError(f"wants PROGRAM=ARGS, not {value!r}")
    return prog, args


def job_overrides(args):
    """A run's changes to its jobs: programs' arguments (--args), a
    longer test action (--test-timeout), checked before anything is
    built."""
    over = {}
    if getattr(args, "args", None):
        known = {p.name for p in suite.current().programs}
        for prog, _ in args.args:
            if prog not in known:
                raise KgateError(f"--args {prog}=...: no program {prog!r} in the suites run "
                                 f"({', '.join(sorted(known))})")
        over["program_args"] = dict(args.args)
    if getattr(args, "test_timeout", None):
        over["timeouts"] = {"test": args.test_timeout,
                            "job": render.DEFAULTS["timeouts"]["job"] + args.test_timeout}
    render.check_user_fields(over)
    return over


def add_retry_arg(s):
    s.add_argument("--retry-infra", type=_non_negative, default=1, metavar="N",
                   help="run a job whose verdict is infrastructure again, up to N times "
                   "(default: 1); a failed case is never retried")


def add_repeat_arg(s):
    s.add_argument("--repeat", type=_positive, default=1, metavar="N",
                   help="run each job N times (default: 1); a job whose runs disagree "
                   "(one passes, another fails) is flaky, exit 6")


def add_lab_args(s, base_url_required=True):
    s.add_argument("target", nargs="*", help="targets or groups (default: the default group; 'all': every target; see 'list')")
    s.add_argument("--variant", action="append", choices=ALL_VARIANTS,
                   help="variant (repeatable; default: fixed and known-bad)")
    s.add_argument("--base-url", required=base_url_required,
                   help="http(s) URL under which the lab's workers reach build/serve "
                   "(what 'kgate.py serve' serves)")
    s.add_argument("--device-type", help="the lab's device type (default: qemu)")
    s.add_argument("--tag", action="append", help="a device tag the job needs (repeatable)")
    s.add_argument("--priority", help="high, medium, low or 0-100 (default: medium)")
    s.add_argument("--visibility", help="public or personal (default: public)")
    s.add_argument("--job-prefix", help="text before each job name (default: 'kgate ')")
    s.add_argument("--job-timeout", type=_positive, metavar="MINUTES",
                   help=f"the job's timeout (default: {render.DEFAULTS['timeouts']['job']})")
    s.add_argument("-j", "--jobs", type=_positive, help="parallel make jobs (default: cores + 1)")
    add_candidate_args(s)


def cmd_compare(args):
    new = args.new or workspace.current().latest
    text, code = compare.report(args.base or workspace.current().baseline, new,
                                gate_figures=args.figures)
    print(text)
    return code


def cmd_export(args):
    run = args.run or workspace.current().latest
    doc = compare.load(run)
    run_dir = os.path.realpath(run if os.path.isdir(run) else os.path.dirname(run))
    data = kcidb.validate(kcidb.export(doc, run_dir, origin=args.origin, base_url=args.base_url,
                                       with_control=args.with_control))
    text = json.dumps(data, indent=1) + "\n"
    if args.output == "-":
        print(text, end="")
        return 0
    out = args.output or os.path.join(run_dir, "kcidb.json")
    write_output(out, text)
    log(f"[export] run {doc['run']}: {len(data['checkouts'])} checkouts, "
        f"{len(data['builds'])} builds, {len(data['tests'])} tests, valid KCIDB "
        f"v{kcidb.VERSION['major']}.{kcidb.VERSION['minor']}: {out}")
    return 0


def cmd_baseline(args):
    run = args.run or workspace.current().latest
    doc = compare.save_baseline(run)
    print(f"Baseline: run {doc.get('run')} ({doc.get('verdict')}) saved as "
          f"{os.path.relpath(workspace.current().baseline, TOP)}")
    return 0


def cmd_soak(args):
    names, variants, cand = candidate_setup(args)
    text, code = soak.soak(args.times, names, variants, parallel=args.parallel, jobs=args.jobs,
                           retry_infra=args.retry_infra, cand=cand)
    print(text)
    return code


def _report(text, code, label, path):
    """Print a report and where its summary was written; return code."""
    print(text)
    print(f"{label}: {os.path.relpath(path, TOP)}")
    return code


def cmd_mutants(args):
    text, code, out_dir = mutants.check(args.target, args.mutant, parallel=args.parallel,
                                        jobs=args.jobs)
    return _report(text, code, "Mutants", os.path.join(out_dir, "mutants.json"))


def cmd_bisect(args):
    if bool(args.patches) == bool(args.source):
        raise KgateError("bisect wants --patches DIR, or --source TREE --good REV --bad REV")
    if args.source:
        if not (args.good and args.bad):
            raise KgateError("--source wants --good REV and --bad REV")
        text, code, out_dir = bisect.bisect_source(args.source, args.good, args.bad, args.target,
                                                   parallel=args.parallel, jobs=args.jobs)
    else:
        if args.good or args.bad:
            raise KgateError("--good and --bad go with --source, not --patches")
        text, code, out_dir = bisect.bisect(args.patches, args.target, parallel=args.parallel,
                                            jobs=args.jobs)
    return _report(text, code, "Bisection", os.path.join(out_dir, "bisect.json"))


def cmd_bisect_step(args):
    try:
        return bisect.step_main(args.tree, args.out, args.target, parallel=args.parallel,
                                jobs=args.jobs)
    except Exception as e:  # noqa: BLE001 - git must stop, not call the commit bad
        log(f"kgate: bisect-step: {type(e).__name__}: {e}")
        return bisect.EXIT_ABORT


def cmd_bench(args):
    names = args.target or default_targets()
    if args.markdown and not os.path.isdir(os.path.dirname(os.path.realpath(args.markdown))):
        # before a --cold run, not an hour later
        raise KgateError(f"--markdown {args.markdown}: no such folder")
    if args.markdown and os.path.isdir(args.markdown):
        raise KgateError(f"--markdown {args.markdown}: a folder, not a file")
    text = bench.bench(names, cold=args.cold, parallel=args.parallel)
    if args.markdown:
        print(write_output(args.markdown, bench.markdown(names, text)))
    else:
        print(text)
    return 0


# --- the selftest in upstream form (make selftest-patch, selftest-check) ---

def cmd_selftest_patch(args):
    print(os.path.relpath(selftest.write_patch(args.output), TOP))
    return 0


def cmd_selftest_check(args):
    return selftest.check(args.output, run=not args.no_run, keep=args.keep,
                          headers=args.headers)


def add_selftest_parsers(sub):
    s = sub.add_parser("selftest-patch", help="write the backlog test as a git format-patch "
                       "for the kernel's tools/testing/selftests/net/",
                       description="Generated from guest/: backlog_coalesce.c and its helpers "
                       "(backlog_peer.[ch], backlog_pkt.[ch]), the net/Makefile lines that "
                       "build it and the net/config options it needs.")
    s.add_argument("-o", "--output", metavar="FILE",
                   help=f"where (default: {os.path.relpath(selftest.default_out(), TOP)})")
    s.set_defaults(func=cmd_selftest_patch)
    s = sub.add_parser("selftest-check", help="apply the selftest patch to a copy of the kernel "
                       "tree, build it with net/Makefile, run it, checkpatch it",
                       description="Writes the patch as selftest-patch does, applies it with "
                       "'patch -p1' to a hard-linked copy of the extracted tree, builds the "
                       "program with the tree's own net/Makefile and lib.mk, runs it once "
                       "(root), and runs scripts/checkpatch.pl --strict on the patch. Log in "
                       "build/selftest/check.log. Exit status: 0 all passed, 1 a step failed.")
    s.add_argument("-o", "--output", metavar="FILE",
                   help=f"the patch (default: {os.path.relpath(selftest.default_out(), TOP)})")
    s.add_argument("--no-run", action="store_true", help="build the program, do not run it")
    s.add_argument("--headers", action="store_true",
                   help="build against the tree's own UAPI headers ('make headers', "
                   "about a minute) rather than the system's")
    s.add_argument("--keep", action="store_true", help="keep the patched tree copy")
    s.set_defaults(func=cmd_selftest_check)


def parser():
    p = argparse.ArgumentParser(prog="kgate", description="Cross-architecture kernel regression gate tooling.")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("list", help="print the targets")
    s.set_defaults(func=cmd_list)
    s = sub.add_parser("packages", help="print the Debian packages the targets need")
    s.set_defaults(func=cmd_packages)
    s = sub.add_parser("source", help="extract the kernel series' source tarball (once); "
                       "print its path")
    s.set_defaults(func=cmd_source)
    s = sub.add_parser("series", help="the kernel series in use (kernel/series.yaml, "
                       "KGATE_SERIES): its source and folders",
                       description="With --patches: every patch of the series (fixed, then "
                       "the known-bad control's, then the mutants), one path a line.")
    s.add_argument("--patches", action="store_true", help="list its patch files")
    s.set_defaults(func=cmd_series)
    s = sub.add_parser("kernel", help="build (or reuse) the kernels of a target")
    s.add_argument("target")
    s.add_argument("--variant", action="append", choices=VARIANTS + (debug_twin("fixed"),),
                   help="variant to build (repeatable; default: fixed and known-bad)")
    s.add_argument("-j", "--jobs", type=_positive, help="parallel make jobs (default: cores + 1)")
    s.add_argument("--force", action="store_true", help="rebuild even if the cached image matches")
    s.set_defaults(func=cmd_kernel)
    s = sub.add_parser("rootfs", help="build (or reuse) the initramfs of a target")
    s.add_argument("target")
    s.add_argument("-j", "--jobs", type=_positive, help="parallel make jobs (default: cores + 1)")
    s.add_argument("--force", action="store_true", help="rebuild even if the cached initramfs matches")
    s.set_defaults(func=cmd_rootfs)
    s = sub.add_parser("native", help="build the test programs for this machine (make check)")
    s.add_argument("dir", nargs="?", default=os.path.join("build", "native"),
                   help="output folder (default: build/native)")
    s.set_defaults(func=cmd_native)
    s = sub.add_parser("jobs", help="build what is missing; render and validate the local LAVA jobs")
    s.add_argument("target", nargs="*", help="targets or groups (default: all)")
    s.add_argument("-j", "--jobs", type=_positive, help="parallel make jobs (default: cores + 1)")
    s.set_defaults(func=cmd_jobs)
    s = sub.add_parser("golden", help="compare every rendered job and device with tests/data/golden",
                       description="Render every job (local and lab, each target and variant) "
                       "and every local device with stand-in artifacts, validate each job "
                       "against LAVA's schema and compare it with its stored copy under "
                       "tests/data/golden. Exit status: 0 all match, 1 some differ (the diff is "
                       "printed), 2 a job does not render or validate.")
    s.add_argument("--update", action="store_true",
                   help="write the stored copies again (a change meant: review the diff)")
    s.set_defaults(func=cmd_golden)
    s = sub.add_parser("run", help="build what is missing and run the jobs locally with lava-run",
                       description="Exit status: 0 gate passed, 1 regression (or the known-bad "
                       "control was missed), 3 infrastructure failure, 4 inconclusive, 5 error (a "
                       "test program crashed or bailed out on the kernel under test), 6 flaky "
                       "(--repeat: the runs of a job disagree), 2 usage.")
    add_run_args(s)
    add_repeat_arg(s)
    add_suite_arg(s)
    s.add_argument("--args", action="append", type=_program_args, metavar="PROGRAM=ARGS",
                   help="arguments for a suite's program in every job, e.g. "
                   "'backlog_fuzz=--seed 1000 --count 5000' (repeatable)")
    s.add_argument("--test-timeout", type=_positive, metavar="MIN",
                   help="minutes each suite's test action may take (default: "
                   f"{render.DEFAULTS['timeouts']['test']}); the job's limit grows by as much")
    s.add_argument("--overlap", action="store_true",
                   help="start a target's jobs as soon as its kernels are built, while the "
                   "next target builds (default: build every kernel first, which was as fast "
                   "on two cores; not with --repeat)")
    s.set_defaults(func=cmd_run)
    s = sub.add_parser("matrix", help="print the matrix of a run (default: the latest)")
    s.add_argument("results", nargs="?", help="a results.json")
    s.set_defaults(func=cmd_matrix)
    s = sub.add_parser("lab-jobs", help="render and validate the jobs for a LAVA lab",
                       description="Jobs go to jobs/lab/; their artifact URLs are "
                       "BASE_URL/sha256/<hash>/<file>, the layout 'serve' serves.")
    add_lab_args(s)
    s.set_defaults(func=cmd_lab_jobs)
    s = sub.add_parser("serve", help="serve the artifacts over http for a lab's workers",
                       description="Builds what is missing, links the kernels and initramfs "
                       "under build/serve/sha256/<hash>/ and serves that folder until Ctrl-C.")
    s.add_argument("target", nargs="*", help="targets or groups (default: the default group)")
    s.add_argument("--bind", default="127.0.0.1", help="address (default: 127.0.0.1)")
    s.add_argument("--port", type=int, default=8011, help="port (default: 8011)")
    s.add_argument("--no-build", action="store_true",
                   help="serve build/serve as it is ('submit' links what it submits)")
    s.add_argument("-j", "--jobs", type=_positive, help="parallel make jobs (default: cores + 1)")
    s.set_defaults(func=cmd_serve)
    s = sub.add_parser("submit", help="submit the jobs to a LAVA lab with lavacli, then collect",
                       description="The identity is lavacli's (lavacli identities add ...): "
                       "kgate never stores a token. Waits for the jobs and collects them like "
                       "'collect' unless --no-wait. Exit status as for 'run'.")
    add_lab_args(s)
    s.add_argument("-i", "--identity", default="default", help="lavacli identity (default: default)")
    s.add_argument("--no-wait", action="store_true", help="submit only; collect later")
    s.add_argument("--timeout", type=_positive, default=1800, help="seconds to wait for each job")
    add_retry_arg(s)
    add_repeat_arg(s)
    s.set_defaults(func=cmd_submit)
    s = sub.add_parser("collect", help="wait for a submitted run's LAVA jobs and collect the results",
                       description="Reads each job's health (lavacli jobs show) and every test "
                       "case (lavacli results): a Complete job whose cases failed is a "
                       "regression; an Incomplete or Canceled one is infrastructure and is "
                       "submitted again (--retry-infra; every attempt is kept). Writes "
                       "results.json, matrix.txt and the job logs into the run folder. "
                       "Exit status as for 'run'.")
    s.add_argument("run", nargs="?", help="the run folder (default: the newest submitted one)")
    s.add_argument("-i", "--identity", help="lavacli identity (default: the one used to submit)")
    s.add_argument("--timeout", type=_positive, default=1800, help="seconds to wait for each job")
    add_retry_arg(s)
    s.set_defaults(func=cmd_collect)
    s = sub.add_parser("export", help="write a run as KCIDB v5 JSON, validated against its schema",
                       description="Write a run (default: the latest) as KCIDB v5.3 JSON: "
                       "a checkout per kernel tree with its patches, a build per target and "
                       "variant (the known-bad control only with --with-control), a test per "
                       "case plus the job's own node 'kgate'. Validated "
                       "against tools/schemas/kcidb.v5.3.json before it is written. URLs "
                       "point into the run folder (file://, or under --base-url where it is "
                       "served). Exit status: 0 written, 2 bad input or an export that does "
                       "not validate.")
    s.add_argument("format", choices=["kcidb"], help="the format (only kcidb)")
    s.add_argument("run", nargs="?", help="a run folder or its results.json (default: the latest)")
    s.add_argument("-o", "--output", help="where to write ('-': standard output; "
                   "default: kcidb.json in the run folder)")
    s.add_argument("--origin", default=kcidb.ORIGIN,
                   help=f"the CI system's name in KCIDB, prefix of every id (default: {kcidb.ORIGIN})")
    s.add_argument("--base-url", help="the URL the run folder is served at (default: file:// "
                   "of the folder)")
    s.add_argument("--with-control", action="store_true",
                   help="also the known-bad control's builds and tests (their failures are "
                   "what that kernel does; misc kgate_control marks them)")
    s.set_defaults(func=cmd_export)
    s = sub.add_parser("compare", help="compare a run with a baseline",
                       description="New failures, fixed cases, missing cases and jobs, verdict "
                       "changes, and figures that moved beyond both runs' measured range. "
                       "Exit status: 0 no regression against the baseline, 1 worse (a "
                       "verdict got worse, a case newly fails, a case or job is missing; "
                       "with --figures also a figure worse beyond the spread), 2 usage.")
    s.add_argument("base", nargs="?", help="baseline run folder or results.json "
                   "(default: the one saved with 'baseline')")
    s.add_argument("new", nargs="?", help="run folder or results.json (default: the latest run)")
    s.add_argument("--figures", action="store_true",
                   help="also fail when a figure got worse beyond the spread")
    s.set_defaults(func=cmd_compare)
    s = sub.add_parser("baseline", help="save a run's results as the baseline for 'compare'")
    s.add_argument("run", nargs="?", help="run folder or results.json (default: the latest run)")
    s.set_defaults(func=cmd_baseline)
    s = sub.add_parser("soak", help="run the matrix N times; report what changed between runs",
                       description="Each run is a normal run (its own folder); the soak's "
                       "report goes to build/soak/<time>/. Exit status: 0 no verdict and no "
                       "case result changed, 1 something did (the gate is flaky there).")
    s.add_argument("times", type=_positive, help="number of runs (at least 2)")
    add_run_args(s)
    s.set_defaults(func=cmd_soak)
    s = sub.add_parser("mutants", help="the mutation check: run each kernel/mutants patch; "
                       "each must fail the gate",
                       description="Each patch of kernel/mutants/series breaks one rule of "
                       "tcp_add_backlog(). One at a time, kernel/patches plus that mutant is "
                       "run as the candidate kernel, without the benchmark and without the "
                       "known-bad control (a mutant marked 'Kgate-kernel: debug' as the "
                       "debug candidate, on the targets that have a debug kernel); the table "
                       "lists each mutant's verdict and the "
                       "cases that failed or were inconclusive. Summary in "
                       "build/mutants/<time>/mutants.json. Exit status: 0 every mutant caught "
                       "(a case failed, or the test program crashed on it) or, where its "
                       "patch allows it, inconclusive; 1 a "
                       "mutant passed, was inconclusive where that is not allowed, or was left "
                       "undecided by an infrastructure failure; 2 usage.")
    s.add_argument("target", nargs="*",
                   help=f"targets (default: {' '.join(mutants.DEFAULT_TARGETS)})")
    add_suite_arg(s)
    s.add_argument("--mutant", action="append", metavar="NAME",
                   help="only this mutant: file name, name or number, e.g. 04 (repeatable)")
    s.add_argument("-p", "--parallel", type=_positive, default=2, help="jobs at once (default: 2)")
    s.add_argument("-j", "--jobs", type=_positive, help="parallel make jobs (default: cores + 1)")
    s.set_defaults(func=cmd_mutants)
    s = sub.add_parser("bisect", help="name the patch of a candidate series (or the commit "
                       "of a git tree) after which the gate fails",
                       description="The series in --patches (its 'series' file, else name "
                       "order) is applied step by step on kernel/patches; step 0 (the fixed "
                       "kernel) must pass and the whole series must fail; the range is halved "
                       "until one patch separates a pass from a failure. Steps whose kernel "
                       "does not apply or build, or whose verdict is inconclusive or "
                       "infrastructure, are skipped. The culprit must fail twice more and "
                       "the step before it pass twice more. Each step runs the candidate "
                       "only (no benchmark, no control). Report and every step's results in "
                       "build/bisect/<time>/. With --source TREE --good REV --bad REV, the "
                       "same for the commits of a git tree: the ends are checked, 'git bisect "
                       "run' halves (kgate's step exits 125 to skip), the culprit and its "
                       "parent are verified the same way. Exit status: 0 a culprit named and "
                       "verified, 1 none (the report says why), 2 usage.")
    s.add_argument("target", nargs="*",
                   help="targets (default: those where the latest run of this series failed, "
                   f"else {' '.join(bisect.DEFAULT_TARGETS)})")
    s.add_argument("--patches", metavar="DIR", help="the candidate series to bisect")
    s.add_argument("--source", metavar="TREE",
                   help="a git kernel tree: bisect its commits --good..--bad with 'git bisect "
                   "run' (in a shared clone under build/bisect/; TREE is only read), each "
                   "commit built and run as 'run --source' does")
    s.add_argument("--good", metavar="REV", help="with --source: a commit that passes")
    s.add_argument("--bad", metavar="REV", help="with --source: a later commit that fails")
    s.add_argument("-p", "--parallel", type=_positive, default=2, help="jobs at once (default: 2)")
    s.add_argument("-j", "--jobs", type=_positive, help="parallel make jobs (default: cores + 1)")
    s.set_defaults(func=cmd_bisect)
    s = sub.add_parser("bisect-step", help="(run by 'git bisect run' for 'bisect --source') "
                       "judge the commit checked out in TREE",
                       description="Exit status for git bisect run: 0 good, 1 bad, 125 skip "
                       "(no kernel, inconclusive, infrastructure), 128 stop.")
    s.add_argument("target", nargs="+")
    s.add_argument("--tree", required=True, help="the bisection's clone")
    s.add_argument("--out", required=True, help="the bisection's folder (steps.jsonl)")
    s.add_argument("-p", "--parallel", type=_positive, default=2, help="jobs at once (default: 2)")
    s.add_argument("-j", "--jobs", type=_positive, help="parallel make jobs (default: cores + 1)")
    s.set_defaults(func=cmd_bisect_step)
    s = sub.add_parser("bench", help="print where the time goes, and each speed goal "
                       "against its figure",
                       description="Per target: the first cold build and the last known-bad "
                       "build (seconds, files compiled), the initramfs, and the latest run's "
                       "boot and program times; every job of the latest run by phase (queued, "
                       "build, deploy, boot, each program, finalize); then each goal (warm "
                       "matrix, one-patch candidate on every target, incremental build, cold "
                       "matrix) against the newest run or build that measures it. With --cold: "
                       "first remove all build outputs and the ccache, run the matrix from "
                       "nothing, then again warm, and record both (build/bench/cold.json). "
                       "A benchmark: it prints, exit 0.")
    s.add_argument("target", nargs="*", help="targets or groups (default: the default group)")
    s.add_argument("--cold", action="store_true", help="rebuild everything from nothing first")
    s.add_argument("--markdown", metavar="FILE",
                   help="write it as a page (with the latest run's benchmark figures and the "
                   "newest mutation check) to FILE, e.g. docs/measurements.md")
    s.add_argument("-p", "--parallel", type=_positive, default=2, help="jobs at once (default: 2)")
    s.set_defaults(func=cmd_bench)
    add_selftest_parsers(sub)
    return p


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt


def _internal_error(exc):
    """Save the traceback of a bug of kgate's own; return its file."""
    text = "".join(traceback.format_exception(exc))
    try:
        folder = workspace.current().path("crash")
        os.makedirs(folder, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix="traceback-", suffix=".txt", dir=folder)
    except OSError:
        fd, path = tempfile.mkstemp(prefix="kgate-traceback-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def main(argv=None):
    """Run one command; every way out is an exit code of the README's
    table: usage 2 (argparse's own, or a KgateError), infrastructure 3
    (InfraError: our build, the lab, the network), the candidate's
    failure 1, interrupted 130 (Ctrl-C or SIGTERM, the one place that
    turns SIGTERM into KeyboardInterrupt), and a bug of kgate itself
    EXIT_INTERNAL with its traceback saved to a file."""
    try:
        old_term = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: its caller handles signals
        old_term = None
    old_ws = workspace.use(None)
    try:
        # The one place paths come from: the environment, read now (a
        # caller that installed a workspace of its own keeps it).
        try:
            workspace.use(old_ws or workspace.Workspace.from_env())
        except ValueError as e:
            raise KgateError(str(e)) from None
        args = parser().parse_args(argv)
        if getattr(args, "suite", None):
            workspace.use(dataclasses.replace(workspace.current(), only=tuple(args.suite)))
        # The gate's suites, checked before any command reads them: a
        # suite file that cannot be used is a usage error, never a verdict.
        suite.current()
        if isinstance(getattr(args, "target", None), list):
            # Groups and 'all' stand for their targets; none named: each
            # command's own default.
            args.target = expand_targets(args.target)
        return args.func(args)
    except CandidateError as e:
        log(f"kgate: the candidate failed: {e}")
        log("kgate: gate FAILED (the candidate kernel was never tested)")
        return results.EXIT_CODES[results.REGRESSION]
    except InfraError as e:
        log(f"kgate: infrastructure: {e}")
        return results.EXIT_CODES[results.INFRA]
    except KgateError as e:
        log(f"kgate: error: {e}")
        return results.EXIT_USAGE
    except KeyboardInterrupt:
        log("kgate: interrupted")
        return results.EXIT_INTERRUPTED
    except BrokenPipeError:
        # 'kgate.py matrix | head': what was not read is not a verdict
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        log("kgate: error: standard output was closed before all was written")
        return results.EXIT_USAGE
    except SystemExit as e:
        # argparse: --help (0) and usage errors (2); nothing else exits
        return 0 if e.code is None else e.code if e.code in (0, results.EXIT_USAGE) \
            else results.EXIT_INTERNAL
    except Exception as e:  # noqa: BLE001 - a bug of ours never reads as a verdict
        path = _internal_error(e)
        log(f"kgate: internal error: {type(e).__name__}: {e} (a bug of kgate; traceback in "
            f"{path})")
        return results.EXIT_INTERNAL
    finally:
        workspace.use(old_ws)
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
