"""A test suite as data: suites/<name>.yaml says which guest programs
it has (sources under guest/, each with a role: unit, test, bench),
the cases its test program reports, the cases the known-bad control
must fail, and its LAVA test definitions. rootfs builds the programs,
render writes the steps, results judges the cases from it; see
suites/backlog.yaml for the fields."""
import dataclasses
import functools
import os
import re

import yaml

from .common import TOP, KgateError, StrictYamlLoader

SUITES = os.path.join(TOP, "suites")
GUEST = os.path.join(TOP, "guest")
DEFAULT = "backlog"
ROLES = ("unit", "test", "bench")
_KEYS = {"name", "title", "definition", "description", "programs", "headers", "cases",
         "control_must_fail"}
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
    if not isinstance(data, dict) or set(data) != _KEYS:
        _fail(path, f"wants exactly {', '.join(sorted(_KEYS))}")
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
    # The verdict knows one program of each role (results.py).
    for role in ROLES:
        if sum(p.role == role for p in programs) != 1:
            _fail(path, f"wants one {role} program")
    # Bench cases are told apart by their definition ('<n>_<definition>'):
    # two definitions alike would judge the test's cases as the bench's.
    defs = [data["definition"]] + [p.definition for p in programs if p.definition]
    for d in defs:
        if not _NAME.fullmatch(d):
            _fail(path, f"definition {d!r}: letters, digits, _ and - only")
    if any(a == b or a.endswith("_" + b)
           for i, a in enumerate(defs) for j, b in enumerate(defs) if i != j):
        _fail(path, f"the test definitions must differ, and none end in '_' and another: "
              f"{', '.join(defs)}")
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
                fixture=cases["fixture"], control_must_fail=must)
    for src in out.sources + sorted({s for p in programs for s in p.faults}):
        if os.path.basename(src) != src:
            _fail(path, f"{src}: a file directly under guest/")
    return out
