"""kgate command line."""
import argparse
import os

from . import bench, figures, kernel, render, results, rootfs
from . import run as runner
from .common import TOP, VARIANTS, KgateError, load_targets, log


def cmd_list(args):
    for name, row in load_targets().items():
        off = f"  (disabled: {row['disabled']})" if row.get("disabled") else ""
        print(f"{name:10} {row['qemu']:22} {row['machine']:10} {row['endian']}-endian "
              f"{row['bits']}-bit{off}")
    return 0


def default_targets():
    """All targets but the disabled ones, which are named on stderr."""
    names = []
    for name, row in load_targets().items():
        if row.get("disabled"):
            log(f"kgate: skipping {name}: {row['disabled']} (name it to run it anyway)")
        else:
            names.append(name)
    return names


def cmd_packages(args):
    pkgs = []
    for row in load_targets().values():
        for key in ("gcc_package", "libc_package", "qemu_package"):
            if row.get(key) and row[key] not in pkgs:
                pkgs.append(row[key])
    print(" ".join(pkgs))
    return 0


def cmd_source(args):
    print(kernel.pristine())
    return 0


def cmd_kernel(args):
    for variant in args.variant or VARIANTS:
        path = kernel.build(args.target, variant, jobs=args.jobs, force=args.force)
        print(path)
    return 0


def cmd_rootfs(args):
    print(rootfs.build(args.target, jobs=args.jobs, force=args.force))
    return 0


def cmd_jobs(args):
    for name in args.target or list(load_targets()):
        arts = runner.artifacts(name, VARIANTS, jobs=args.jobs)
        for path in render.write_local(name, arts).values():
            print(os.path.relpath(path, TOP))
    return 0


def print_gate(doc):
    """The matrix and the gate's verdict of a run; return its exit code."""
    print(results.matrix(doc["jobs"]))
    print()
    fig = figures.table(doc["jobs"])
    if fig:
        print(fig)
        print()
    print(f"Gate: {doc['verdict'].upper()}: {doc['summary']}")
    return doc["exit_code"]


def cmd_run(args):
    names = args.target or default_targets()
    doc, run_dir = runner.run(names, args.variant or VARIANTS, parallel=args.parallel, jobs=args.jobs)
    code = print_gate(doc)
    print(f"Results: {os.path.relpath(os.path.join(run_dir, 'results.json'), TOP)}")
    return code


def cmd_matrix(args):
    path = args.results or os.path.join(runner.RUNS, "latest", "results.json")
    if not os.path.isfile(path):
        raise KgateError(f"no results at {path}: run 'make run' first")
    return print_gate(results.load(path))


def cmd_bench(args):
    print(bench.bench(args.target or None, cold=args.cold, parallel=args.parallel))
    return 0


def parser():
    p = argparse.ArgumentParser(prog="kgate", description="Cross-architecture kernel regression gate tooling.")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("list", help="print the targets")
    s.set_defaults(func=cmd_list)
    s = sub.add_parser("packages", help="print the Debian packages the targets need")
    s.set_defaults(func=cmd_packages)
    s = sub.add_parser("source", help="extract Debian's linux-source-6.1 (once); print its path")
    s.set_defaults(func=cmd_source)
    s = sub.add_parser("kernel", help="build (or reuse) the kernels of a target")
    s.add_argument("target")
    s.add_argument("--variant", action="append", choices=VARIANTS,
                   help="variant to build (repeatable; default: all)")
    s.add_argument("-j", "--jobs", type=int, help="parallel make jobs (default: cores + 1)")
    s.add_argument("--force", action="store_true", help="rebuild even if the cached image matches")
    s.set_defaults(func=cmd_kernel)
    s = sub.add_parser("rootfs", help="build (or reuse) the initramfs of a target")
    s.add_argument("target")
    s.add_argument("-j", "--jobs", type=int, help="parallel make jobs (default: cores + 1)")
    s.add_argument("--force", action="store_true", help="rebuild even if the cached initramfs matches")
    s.set_defaults(func=cmd_rootfs)
    s = sub.add_parser("jobs", help="build what is missing; render and validate the local LAVA jobs")
    s.add_argument("target", nargs="*", help="targets (default: all)")
    s.add_argument("-j", "--jobs", type=int, help="parallel make jobs (default: cores + 1)")
    s.set_defaults(func=cmd_jobs)
    s = sub.add_parser("run", help="build what is missing and run the jobs locally with lava-run",
                       description="Exit status: 0 gate passed, 1 regression (or the known-bad "
                       "control was missed), 3 infrastructure failure, 4 inconclusive, 2 usage.")
    s.add_argument("target", nargs="*", help="targets (default: all; see 'list')")
    s.add_argument("--variant", action="append", choices=VARIANTS,
                   help="variant to run (repeatable; default: all)")
    s.add_argument("-p", "--parallel", type=int, default=2, help="jobs at once (default: 2)")
    s.add_argument("-j", "--jobs", type=int, help="parallel make jobs (default: cores + 1)")
    s.set_defaults(func=cmd_run)
    s = sub.add_parser("matrix", help="print the matrix of a run (default: the latest)")
    s.add_argument("results", nargs="?", help="a results.json")
    s.set_defaults(func=cmd_matrix)
    s = sub.add_parser("bench", help="print build and boot figures per target",
                       description="Without --cold: the figures the last builds and the latest "
                       "run recorded. With --cold: remove all build outputs and the ccache, "
                       "run the matrix from nothing, then again warm, and print both times.")
    s.add_argument("target", nargs="*", help="targets (default: all)")
    s.add_argument("--cold", action="store_true", help="rebuild everything from nothing first")
    s.add_argument("-p", "--parallel", type=int, default=2, help="jobs at once (default: 2)")
    s.set_defaults(func=cmd_bench)
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except KgateError as e:
        log(f"kgate: error: {e}")
        return 2
    except KeyboardInterrupt:
        log("kgate: interrupted")
        return 130
