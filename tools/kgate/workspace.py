"""Where kgate keeps what it builds, runs and serves.

One Workspace is made by cli.main from the environment (KGATE_BUILD,
KGATE_JOBS, KGATE_SERIES, KGATE_KERNEL_TARBALL) and installed with
use(); every module asks current() when a function runs, never at
import. So a test, or a
tool driving two workspaces, installs another one with one call instead
of patching a copy of a path in each module.

    build/            KGATE_BUILD (default: build/ of the checkout)
      runs/           one folder per run (new_out_dir), runs/latest
      serve/          what 'serve' serves to a lab (content-addressed)
      baseline/       the baseline results.json
      bisect/ mutants/ soak/ bench/ selftest/ crash/
      kernels/ rootfs/ src/ obj/ logs/ ccache/ busybox/ tests/
    jobs/             KGATE_JOBS (default: jobs/ of the checkout),
                      the rendered jobs; jobs/lab/ the lab's
"""
import dataclasses
import datetime
import os

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# What the environment may say.
ENV = ("KGATE_BUILD", "KGATE_JOBS", "KGATE_SERIES", "KGATE_KERNEL_TARBALL")


@dataclasses.dataclass(frozen=True)
class Workspace:
    build: str
    jobs: str
    # The kernel series (kernel/series.yaml; None: its default) and a
    # tarball to use instead of the series' own.
    series: str = None
    tarball: str = None
    # The folder of suites and of gate.yaml, the suites every job runs
    # (None: suites/ of the checkout; tests use their own).
    suites: str = None
    # Of those, the suites to run (None: all of them; run --suite).
    only: tuple = None

    @classmethod
    def from_env(cls, environ=None):
        """The workspace the environment names; a variable that is set
        but empty is refused (ValueError), not read as its default."""
        env = os.environ if environ is None else environ
        empty = [v for v in ENV if v in env and not env[v]]
        if empty:
            raise ValueError(f"{', '.join(empty)} set but empty: unset it or name a path")
        return cls(build=os.path.abspath(env.get("KGATE_BUILD") or os.path.join(TOP, "build")),
                   jobs=os.path.abspath(env.get("KGATE_JOBS") or os.path.join(TOP, "jobs")),
                   series=env.get("KGATE_SERIES") or None,
                   tarball=env.get("KGATE_KERNEL_TARBALL") or None)

    @classmethod
    def under(cls, folder, **kw):
        """A workspace whose build and jobs folders are inside folder
        (tests)."""
        folder = os.path.abspath(str(folder))
        return cls(build=os.path.join(folder, "build"), jobs=os.path.join(folder, "jobs"), **kw)

    def path(self, *parts):
        """A path under the build folder."""
        return os.path.join(self.build, *parts)

    @property
    def runs(self):
        return self.path("runs")

    @property
    def latest(self):
        """runs/latest: the link to the newest run's folder."""
        return os.path.join(self.runs, "latest")

    @property
    def serve(self):
        return self.path("serve")

    @property
    def baseline(self):
        return self.path("baseline", "results.json")

    @property
    def lab_jobs(self):
        return os.path.join(self.jobs, "lab")


_current = None


def use(ws):
    """Make ws the workspace of what runs next; return the one before."""
    global _current
    before, _current = _current, ws
    return before


def current():
    """The workspace in use: the one installed with use(), else the
    environment's, read now."""
    return _current if _current is not None else Workspace.from_env()


def new_out_dir(root):
    """A new folder root/<UTC time>, or root/<UTC time>-<n> when that
    second's is taken (by an earlier or a concurrent call): never a
    folder someone else made."""
    os.makedirs(root, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    n = 1
    while True:
        path = os.path.join(root, stamp if n == 1 else f"{stamp}-{n}")
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            n += 1
