"""Repeatability: run the matrix N times and report every verdict and
every case result that changed between runs. A gate is worthless if it
is flaky."""
import json
import os

from . import kernel
from . import run as runner
from . import workspace
from .workspace import new_out_dir
from .common import KgateError, atomic_write, log



def flips(docs):
    """Return (lines, counts) over results documents of repeated runs:
    each job verdict and case result that was not the same in all."""
    seen = {}
    for i, doc in enumerate(docs):
        for j in doc["jobs"]:
            key = f"{j['target']}/{j['variant']}"
            seen.setdefault((key, "verdict"), {})[i] = j["verdict"]
            for c in j["cases"]:
                if c.get("measurement") is None:
                    seen.setdefault((key, c["case"]), {})[i] = c["result"]
    lines, n_flips = [], 0
    for (key, what), per_run in sorted(seen.items()):
        values = [per_run.get(i, "absent") for i in range(len(docs))]
        if len(set(values)) > 1:
            n_flips += 1
            lines.append(f"{key} {what}: " + " ".join(values))
    return lines, {"runs": len(docs), "results_per_run": len(seen), "changed": n_flips}


def soak(times, target_names, variants, parallel=2, jobs=None, retry_infra=1,
         cand=kernel.NO_CANDIDATE):
    """Run the matrix `times` times; return (text, exit code)."""
    if times < 2:
        raise KgateError("a soak needs at least 2 runs")
    out_dir = new_out_dir(workspace.current().path("soak"))
    docs, run_ids = [], []
    for i in range(times):
        log(f"[soak] run {i + 1} of {times}")
        doc, run_dir = runner.run(target_names, variants, parallel=parallel, jobs=jobs,
                                  retry_infra=retry_infra, cand=cand)
        docs.append(doc)
        run_ids.append(os.path.basename(run_dir))
        log(f"[soak] run {i + 1}: {doc['verdict']} ({doc['summary']})")
    lines, counts = flips(docs)
    verdicts = ", ".join(f"{r}: {d['verdict']}" for r, d in zip(run_ids, docs))
    text = "\n".join(
        [f"Soak: {times} runs of {len(docs[0]['jobs'])} jobs ({verdicts})"] +
        (lines or [f"Soak: no verdict and none of the {counts['results_per_run']} results "
                   f"per run changed between runs"]) +
        [f"Soak: {counts['changed']} changed"])
    atomic_write(os.path.join(out_dir, "soak.json"),
                 json.dumps(dict(counts, run_ids=run_ids, changes=lines), indent=2) + "\n")
    atomic_write(os.path.join(out_dir, "soak.txt"), text + "\n")
    return text, 1 if counts["changed"] else 0
