"""Recorded lava-run logs (tests/data/lava-run-*.log) and what kgate
reads from them, kept as reference files (tests/data/parsed/*.json) as
the rendered jobs are kept as golden files: a change to the parser or to
the verdict is a reviewed diff. Write them again after a change meant:
KGATE_UPDATE_REFERENCES=1 /usr/bin/python3 -m pytest tests/unit/test_reference_logs.py
"""
import glob
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))

from kgate import lavalog, render, results  # noqa: E402

DATA = os.path.join(HERE, "..", "data")
LOGS = sorted(glob.glob(os.path.join(DATA, "lava-run-*.log")))
# The job each log is of: lava-run-<target>-<variant or what went wrong>.log
VARIANT = {"fixed": "fixed", "known-bad": "known-bad", "hang": "fixed"}


def reading(path):
    """What kgate reads from a log: lavalog.parse's fields (the console
    as its line count) and the job's verdict."""
    with open(path, encoding="utf-8", errors="replace") as f:
        parsed = lavalog.parse(f.read())
    variant = VARIANT[os.path.basename(path)[len("lava-run-x86_64-"):-len(".log")]]
    verdict, reason = results.job_verdict(variant, parsed["health"], parsed["cases"],
                                          bench=render.has_bench(variant),
                                          errors=parsed["errors"])
    out = {k: v for k, v in parsed.items() if k != "console"}
    out["console_lines"] = len(parsed["console"])
    out["variant"], out["verdict"], out["reason"] = variant, verdict, reason
    return json.dumps(out, indent=1, sort_keys=True) + "\n"


def test_there_are_logs():
    assert len(LOGS) >= 3


@pytest.mark.parametrize("path", LOGS, ids=os.path.basename)
def test_what_kgate_reads_from_a_recorded_log_is_its_reference(path):
    ref = os.path.join(DATA, "parsed", os.path.basename(path)[:-len(".log")] + ".json")
    text = reading(path)
    if os.environ.get("KGATE_UPDATE_REFERENCES") == "1":
        os.makedirs(os.path.dirname(ref), exist_ok=True)
        with open(ref, "w", encoding="utf-8") as f:
            f.write(text)
    with open(ref, encoding="utf-8") as f:
        assert text == f.read(), f"{os.path.basename(ref)} differs: review, then update"
