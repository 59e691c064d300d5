"""One job of a run, the same for the local path (lava-run) and the lab
path (lavacli): a target's kernel of one variant booted with the test,
once per --repeat run, again after an infrastructure verdict.

A Job says which kernel and initramfs (by sha256) and which attempt;
Job.record() is the one place a job's entry of results.json is made
from what an attempt saw, and retry_infra() the one loop that runs an
attempt again.
"""
import dataclasses
import os

from . import results
from .common import guest_of, load_targets


def attempt_folder(name, variant, run, retry):
    """Where one attempt at a job keeps its files: <target>-<variant>,
    then .run2, .run3 for --repeat and .retry1, ... for retries."""
    return (f"{name}-{variant}" + (f".run{run + 1}" if run else "") +
            (f".retry{retry}" if retry else ""))


@dataclasses.dataclass(frozen=True)
class Job:
    target: str
    variant: str
    kernel_sha256: str
    rootfs_sha256: str
    run: int = 0      # which run of --repeat, from 0
    retry: int = 0    # which attempt of that run, from 0

    @classmethod
    def of(cls, entry):
        """The job a submitted.json entry names."""
        return cls(entry["target"], entry["variant"], entry["kernel_sha256"],
                   entry["rootfs_sha256"], entry.get("run", 0), entry.get("retry", 0))

    def attempt(self, run, retry):
        return dataclasses.replace(self, run=run, retry=retry)

    @property
    def folder(self):
        return attempt_folder(self.target, self.variant, self.run, self.retry)

    def record(self, health, cases, errors, seconds, timing=None, bench=True, tail=(), **extra):
        """This attempt's entry of results.json, judged from what it saw:
        health ('complete' or not), the cases and the errors; tail (the
        program's last words) kept when a program broke. extra: what
        the path adds (when it started, the LAVA job and its worker)."""
        verdict, reason = results.job_verdict(self.variant, health, cases, bench=bench,
                                              errors=errors)
        rec = {
            "target": self.target, "variant": self.variant, "verdict": verdict,
            "reason": reason, "health": health, "errors": list(errors),
            "seconds": seconds, "timing": timing or {}, "cases": list(cases),
            "kernel_sha256": self.kernel_sha256, "rootfs_sha256": self.rootfs_sha256,
            "log": os.path.join(self.folder, "lava.log"),
        }
        targets = load_targets()
        if self.target in targets:
            # the machine it ran in (a lab record may name a target
            # targets.yaml no longer has)
            rec["guest"] = guest_of(targets[self.target])
        if verdict == results.ERROR:
            rec["tail"] = list(tail)
        # what a path adds never replaces what the judge said
        assert not set(extra) & set(rec), sorted(set(extra) & set(rec))
        rec.update(extra)
        return rec


def retry_infra(attempt, limit, stop=None):
    """attempt(0), then attempt(1), ... while the last one's verdict is
    infrastructure, at most limit more times and not once stop() says
    so; attempt(n) may return None (it could not be made). Returns the
    records of the attempts made. Only infrastructure is retried: an
    attempt that was judged decides, and a job with a failed case is
    never run again into a pass."""
    tried = [attempt(0)]
    while (tried[-1]["verdict"] == results.INFRA and len(tried) <= limit and
           not (stop and stop())):
        again = attempt(len(tried))
        if again is None:
            break
        tried.append(again)
    return tried
