"""Compare a run with a baseline: what got worse, what got better, what
is missing, and which figures moved beyond their measured spread.

The rule (exit 1 when any holds): a job's verdict got worse, a case
that passed (or was inconclusive) now fails, a case of the baseline is
missing, or a target/variant of the baseline is missing. Figures are
reported, and only gate with --figures: under emulation they move with
the machine's load.
"""
import os

from . import results
from . import workspace
from .common import KNOWN_BAD, KgateError, atomic_copy, loads_json

RANK = {results.PASS: 0, results.CAUGHT: 0, results.INCONCLUSIVE: 1, results.INFRA: 2,
        results.FLAKY: 3, results.ERROR: 3, results.REGRESSION: 3, results.MISSED: 3}
# Figures compared: name -> True if bigger is better.
FIGURE_SENSE = {"bulk_ratio": True, "bulk_on_goodput": True, "bulk_off_goodput": True}


def load(path):
    """A results.json, or the one in a run folder."""
    if os.path.isdir(path):
        path = os.path.join(path, "results.json")
    if not os.path.isfile(path):
        raise KgateError(f"no results at {path}")
    try:
        with open(path, encoding="utf-8") as f:
            doc = loads_json(f.read())
    except (OSError, ValueError) as e:
        raise KgateError(f"{path}: not a results.json: {e}") from None
    if not isinstance(doc, dict) or doc.get("schema") != results.SCHEMA_VERSION or \
            not isinstance(doc.get("jobs"), list):
        raise KgateError(f"{path}: not a kgate results.json of schema {results.SCHEMA_VERSION}")
    # every job checked, and judged again from its cases
    return results.judge(doc, path)


def save_baseline(run_path, dest=None):
    dest = dest or workspace.current().baseline
    doc = load(run_path)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    src = run_path if os.path.isfile(run_path) else os.path.join(run_path, "results.json")
    atomic_copy(src, dest)
    return doc


def _figure_sense(name):
    if name in FIGURE_SENSE:
        return FIGURE_SENSE[name]
    # The drain ratios, not the raw times: those follow the host's load.
    if name.startswith("drain_") and name.endswith("_ratio") and name != "drain_0_ratio":
        return True
    return None


def _moved(name, base, new):
    """A line if figure name moved beyond both runs' spread, else None."""
    sense = _figure_sense(name)
    if sense is None or name not in base or name not in new:
        return None
    b, n = base[name][0], new[name][0]
    b_lo, b_hi = base.get(name + "_min", (b,))[0], base.get(name + "_max", (b,))[0]
    n_lo, n_hi = new.get(name + "_min", (n,))[0], new.get(name + "_max", (n,))[0]
    if b_lo <= n <= b_hi or n_lo <= b <= n_hi:
        return None
    better = (n > b) == sense
    units = base[name][1]
    return (f"{'better' if better else 'worse'}: {name} {b:g} -> {n:g} {units} "
            f"(each median outside the other run's range: {b_lo:g}-{b_hi:g}, {n_lo:g}-{n_hi:g})",
            better)


def compare(base, new):
    """Return (lines, failed) comparing results documents base and new."""
    lines, failed = [], False
    bjobs = {(j["target"], j["variant"]): j for j in base["jobs"]}
    njobs = {(j["target"], j["variant"]): j for j in new["jobs"]}
    for key, bj in bjobs.items():
        name = "/".join(key)
        nj = njobs.get(key)
        if nj is None:
            lines.append(f"{name}: MISSING from the new run")
            failed = True
            continue
        if RANK.get(nj["verdict"], 9) > RANK.get(bj["verdict"], 9):
            lines.append(f"{name}: verdict WORSE: {bj['verdict']} -> {nj['verdict']} ({nj.get('reason', '')})")
            failed = True
        elif nj["verdict"] != bj["verdict"]:
            lines.append(f"{name}: verdict {bj['verdict']} -> {nj['verdict']}")
        bc = {c["case"]: c["result"] for c in bj["cases"] if c.get("measurement") is None}
        nc = {c["case"]: c["result"] for c in nj["cases"] if c.get("measurement") is None}
        expect_fail = set(results.gate().control_must_fail) if key[1] == KNOWN_BAD else set()
        groups = {"NEW FAILURES": [], "fixed": [], "newly inconclusive": [], "MISSING cases": [],
                  "new cases": []}
        for c, r in bc.items():
            if c not in nc:
                groups["MISSING cases"].append(c)
            elif c in expect_fail:
                if r == "fail" and nc[c] != "fail":
                    groups["NEW FAILURES"].append(f"{c} (the control no longer fails it)")
            elif nc[c] == "fail" and r != "fail":
                groups["NEW FAILURES"].append(c)
            elif r == "fail" and nc[c] == "pass":
                groups["fixed"].append(c)
            elif r == "pass" and nc[c] == "skip":
                groups["newly inconclusive"].append(c)
        groups["new cases"] = [c for c in nc if c not in bc]
        for title, items in groups.items():
            if items:
                lines.append(f"{name}: {title}: {', '.join(items)}")
        failed |= bool(groups["NEW FAILURES"] or groups["MISSING cases"])
        bf, nf = results.figures(bj["cases"]), results.figures(nj["cases"])
        for fig in sorted(bf):
            moved = _moved(fig, bf, nf)
            if moved:
                lines.append(f"{name}: figure {moved[0]}")
    for key in njobs:
        if key not in bjobs:
            v = njobs[key]["verdict"]
            # a job the baseline lacks is no regression only if it passed
            worse = RANK.get(v, 9) > 0
            lines.append(f"{'/'.join(key)}: new in this run ({v.upper() if worse else v})")
            failed |= worse
    return lines, failed


def figures_worse(lines):
    return any(": figure worse:" in ln for ln in lines)


def report(base_path, new_path, gate_figures=False):
    """Text and exit code (0 same or better, 1 worse)."""
    base, new = load(base_path), load(new_path)
    lines, failed = compare(base, new)
    if gate_figures and figures_worse(lines):
        failed = True
    head = f"Compare: {base.get('run', base_path)} (baseline) -> {new.get('run', new_path)}"
    verdict = "WORSE than the baseline" if failed else "no regression against the baseline"
    body = lines or ["no differences"]
    return "\n".join([head] + body + [f"Compare: {verdict}"]), 1 if failed else 0

