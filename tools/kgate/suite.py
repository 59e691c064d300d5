"""A test suite as data: suites/<name>.yaml says which guest programs
it has (sources under guest/, each with a role: unit, test, bench),
the cases its test program reports, the cases the known-bad control
must fail, and its LAVA test definitions; see suites/backlog.yaml for
the fields. suites/gate.yaml lists the suites every job runs: the
Gate. rootfs builds its programs, render writes their steps, results
judges their cases; each asks current() when it runs."""
import dataclasses
import functools
import os
import re

import yaml

from . import workspace
from .common import TOP, KgateError, StrictYamlLoader

SUITES = os.path.join(TOP, "suites")
GUEST = os.path.join(TOP, "guest")
DEFAULT = "backlog"
GATE_FILE = "gate.yaml"
ROLES = ("unit", "test", "bench")
_KEYS = {"name", "title", "definition", "description", "programs", "headers", "cases",
         "control_must_fail"}
# data: folders under guest/ the suite's programs read at run time,
# installed in the initramfs as /usr/share/kgate/<folder>/.
_SUITE_OPTIONAL = {"data"}
DATA_DIR = "/usr/share/kgate"
# A program's name is a file name in /usr/bin and a job's step; a
# definition's, a LAVA test definition's and a case prefix.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_PROGRAM_KEYS = {"unit": {"role", "sources"}, "test": {"role", "sources", "faults"},
                 "bench": {"role", "sources", "args", "definition", "description", "cases"}}
# A test program's faults: the sources of its test-the-test hooks and
# the symbols they wrap (ld --wrap), for a native copy (rootfs.py).
_OPTIONAL = {"faults"}
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    role: str
    sources: tuple
    args: str = None          # bench: its command line in the job
    definition: str = None    # bench: its own test definition
    description: str = None
    cases: tuple = ()         # bench: the cases it reports
    faults: tuple = ()        # test: sources of its test-the-test hooks
    wrap: tuple = ()          # test: the symbols those hooks wrap

    @property
    def run_case(self):
        """The case the program's runner reports for the program itself."""
        return f"{self.name}-run"


@dataclasses.dataclass(frozen=True)
class Suite:
    name: str
    title: str
    definition: str
    description: str
    programs: tuple           # Program, in the order a job runs them
    headers: tuple
    cases: tuple              # the test program's cases, in --list order
    fixture: str
    control_must_fail: tuple
    data: tuple = ()          # folders under guest/, installed under DATA_DIR

    def role(self, role):
        """The suite's one program of that role (None if it has none)."""
        return next((p for p in self.programs if p.role == role), None)

    @property
    def test(self):
        return self.role("test")

    @property
    def unit(self):
        return self.role("unit")

    @property
    def bench(self):
        return self.role("bench")

    @property
    def sources(self):
        """Every file under guest/ the suite's programs are built from."""
        return sorted({s for p in self.programs for s in p.sources} | set(self.headers))


def _distinct_definitions(path, defs):
    # Bench cases are told apart by their definition ('<n>_<definition>'):
    # two definitions alike would judge the test's cases as the bench's.
    if any(a == b or a.endswith("_" + b)
           for i, a in enumerate(defs) for j, b in enumerate(defs) if i != j):
        _fail(path, f"the test definitions must differ, and none end in '_' and another: "
              f"{', '.join(defs)}")


def _fail(path, what):
    raise KgateError(f"{os.path.relpath(path, TOP)}: {what}")


def _names(path, value, what):
    if not isinstance(value, list) or not value or \
            not all(isinstance(v, str) and v for v in value) or len(set(value)) != len(value):
        _fail(path, f"{what} wants a list of distinct names")
    return tuple(value)


@functools.lru_cache(maxsize=None)
def load(name=DEFAULT, folder=None):
    """suites/<name>.yaml, checked; read once (results, render and
    rootfs each ask for it when imported)."""
    path = os.path.join(folder or SUITES, f"{name}.yaml")
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.load(f, Loader=StrictYamlLoader)  # noqa: S506 - a SafeLoader
    except (OSError, yaml.YAMLError) as e:
        raise KgateError(f"suite {name!r}: {e}") from None
    if not isinstance(data, dict) or not _KEYS <= set(data) <= _KEYS | _SUITE_OPTIONAL:
        _fail(path, f"wants exactly {', '.join(sorted(_KEYS))} (and may have "
              f"{', '.join(sorted(_SUITE_OPTIONAL))})")
    if data["name"] != name:
        _fail(path, f"names itself {data['name']!r}")
    for key in ("title", "definition", "description"):
        if not isinstance(data[key], str) or not data[key]:
            _fail(path, f"{key} wants text")
    if not isinstance(data["programs"], dict) or not data["programs"]:
        _fail(path, "programs wants name: fields")
    programs = []
    for prog, row in data["programs"].items():
        if not isinstance(prog, str) or not _NAME.fullmatch(prog):
            _fail(path, f"program name {prog!r}: letters, digits, _ and - only")
        role = row.get("role") if isinstance(row, dict) else None
        need = _PROGRAM_KEYS.get(role, {"role", "sources"}) - _OPTIONAL
        if role not in ROLES or not need <= set(row) <= _PROGRAM_KEYS[role]:
            _fail(path, f"program {prog!r} wants a role ({', '.join(ROLES)}) and exactly "
                  f"{', '.join(sorted(need))}"
                  + "".join(f" (and may have {k})" for k in sorted(_PROGRAM_KEYS.get(role, ()))
                            if k in _OPTIONAL))
        fields = {k: v for k, v in row.items() if k not in ("role", "sources", "cases", "faults")}
        fault_srcs = wrap = ()
        if "faults" in row:
            faults = row["faults"]
            if not isinstance(faults, dict) or set(faults) != {"sources", "wrap"}:
                _fail(path, f"program {prog!r}: faults wants sources and wrap")
            fault_srcs = _names(path, faults["sources"], f"{prog}'s fault sources")
            wrap = _names(path, faults["wrap"], f"{prog}'s wrapped symbols")
            if not all(_SYMBOL.fullmatch(w) for w in wrap):
                _fail(path, f"program {prog!r}: faults' wrap wants C symbol names")
        for k, v in fields.items():
            if not isinstance(v, str) or not v:
                _fail(path, f"program {prog!r}: {k} wants text")
        programs.append(Program(name=str(prog), role=role,
                                sources=_names(path, row["sources"], f"{prog}'s sources"),
                                cases=_names(path, row["cases"], f"{prog}'s cases")
                                if "cases" in row else (),
                                faults=fault_srcs, wrap=wrap, **fields))
    # One test program judges the kernel; a unit program and a
    # benchmark are optional, one each.
    if sum(p.role == "test" for p in programs) != 1:
        _fail(path, "wants one test program")
    for role in ("unit", "bench"):
        if sum(p.role == role for p in programs) > 1:
            _fail(path, f"wants at most one {role} program")
    defs = [data["definition"]] + [p.definition for p in programs if p.definition]
    for d in defs:
        if not _NAME.fullmatch(d):
            _fail(path, f"definition {d!r}: letters, digits, _ and - only")
    _distinct_definitions(path, defs)
    cases = data["cases"]
    if not isinstance(cases, dict) or set(cases) != {"fixture", "variants", "tests"} or \
            not isinstance(cases["fixture"], str) or not _NAME.fullmatch(cases["fixture"]):
        _fail(path, "cases wants fixture (a name), variants and tests")
    names = tuple(f"{cases['fixture']}.{v}.{t}"
                  for v in _names(path, cases["variants"], "cases' variants")
                  for t in _names(path, cases["tests"], "cases' tests"))
    must = _names(path, data["control_must_fail"], "control_must_fail")
    if not set(must) <= set(names):
        _fail(path, f"control_must_fail names cases the test does not report: "
              f"{', '.join(sorted(set(must) - set(names)))}")
    out = Suite(name=name, title=data["title"], definition=data["definition"],
                description=data["description"], programs=tuple(programs),
                headers=_names(path, data["headers"], "headers"), cases=names,
                fixture=cases["fixture"], control_must_fail=must,
                data=_names(path, data["data"], "data") if "data" in data else ())
    for d in out.data:
        if os.path.basename(d) != d or not _NAME.fullmatch(d) or \
                not os.path.isdir(os.path.join(GUEST, d)):
            _fail(path, f"data {d!r}: a folder directly under guest/")
    for src in out.sources + sorted({s for p in programs for s in p.faults}):
        if os.path.basename(src) != src:
            _fail(path, f"{src}: a file directly under guest/")
    return out


@dataclasses.dataclass(frozen=True)
class Gate:
    """The suites every job runs, in the order it runs them: each
    suite's unit and test programs in one test definition of its own,
    then the benchmarks, each in its own definition. Program names,
    definitions and cases are distinct across suites."""
    suites: tuple
    # Each list below is a tuple, worked out once: a caller cannot
    # change what the next verdict reads.

    def role(self, role):
        """Every program of that role, in suite order."""
        return tuple(p for s in self.suites for p in s.programs if p.role == role)

    @functools.cached_property
    def programs(self):
        """Every program in the order a job runs them."""
        return tuple(p for s in self.suites for p in s.programs if p.role != "bench") + self.role("bench")

    @functools.cached_property
    def cases(self):
        """Every test program's cases, suite after suite."""
        return tuple(c for s in self.suites for c in s.cases)

    @functools.cached_property
    def fixtures(self):
        return tuple(s.fixture for s in self.suites)

    @functools.cached_property
    def run_cases(self):
        """The test programs' own '<program>-run' cases."""
        return tuple(p.run_case for p in self.role("test"))

    @functools.cached_property
    def unit_run_cases(self):
        return tuple(p.run_case for p in self.role("unit"))

    @functools.cached_property
    def bench_run_cases(self):
        return tuple(p.run_case for p in self.role("bench"))

    @functools.cached_property
    def bench_cases(self):
        return tuple(c for p in self.role("bench") for c in p.cases)

    @functools.cached_property
    def bench_definitions(self):
        return tuple(p.definition for p in self.role("bench"))

    @functools.cached_property
    def control_must_fail(self):
        """The cases the known-bad control must fail: every suite's."""
        return tuple(c for s in self.suites for c in s.control_must_fail)

    def select(self, names):
        """The gate of these of its suites, in the gate's order; a name
        it does not have is a KgateError."""
        known = [s.name for s in self.suites]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise KgateError(f"no suite {', '.join(repr(n) for n in unknown)} in the gate "
                             f"(suites/{GATE_FILE}: {', '.join(known)})")
        return Gate(suites=tuple(s for s in self.suites if s.name in names))

    def suite_of(self, case):
        """The suite whose test program reports case (None: no suite's)."""
        return next((s for s in self.suites if case in s.cases), None)


@functools.lru_cache(maxsize=None)
def gate(folder=None):
    """<folder>/gate.yaml ('suites: [name, ...]'), with each suite
    loaded and checked against the others."""
    folder = folder or SUITES
    path = os.path.join(folder, GATE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.load(f, Loader=StrictYamlLoader)  # noqa: S506 - a SafeLoader
    except (OSError, yaml.YAMLError) as e:
        raise KgateError(f"the gate's suites: {e}") from None
    if not isinstance(data, dict) or set(data) != {"suites"}:
        _fail(path, "wants exactly suites")
    names = _names(path, data["suites"], "suites")
    for n in names:
        if not _NAME.fullmatch(n):
            _fail(path, f"suite {n!r}: letters, digits, _ and - only")
    out = Gate(suites=tuple(load(n, None if folder == SUITES else folder) for n in names))
    for what, values in (("program", [p.name for s in out.suites for p in s.programs]),
                         ("fixture", out.fixtures)):
        dup = sorted({v for v in values if values.count(v) > 1})
        if dup:
            _fail(path, f"two suites have the {what} {', '.join(dup)}")
    _distinct_definitions(path, [d for s in out.suites
                                 for d in [s.definition] + [p.definition for p in s.programs
                                                            if p.definition]])
    return out


def current():
    """The gate of the workspace in use (suites/gate.yaml unless the
    workspace names another folder of suites), or the suites of it the
    workspace selects (run --suite)."""
    ws = workspace.current()
    return gate(ws.suites).select(ws.only) if ws.only else gate(ws.suites)
