"""A campaign's new compiler buckets, each localized to the pass that breaks it before the campaign ends.

A maintainer's first question about a compiler bug is "which pass?", and a triage bot asks it before
a person reads the report, so `fuzz run` answers it for every new bucket of a torch.compile or XLA
kind (fuzzer/triaging/pass_bisect.py, the work of `fuzz localize`) once the campaign's time is up. The
localizations run one after another within their own time (`--localize-time`): each on its bucket's
smallest case, each trial bounded by `--timeout`, each in a process of its own, so a pass that
crashes is a trial and never the campaign's end. What is named is kept on the bucket and joins its
identity (fuzzer/triaging/buckets.py, "The pass"); a bucket left for want of time says so, with the command
that localizes it later.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from fuzzer.corpus import Corpus
from fuzzer.errors import UserError
from fuzzer.running.environment import versions
from fuzzer.triaging.pass_bisect import localizable_backend, localize

# Below this much time left, a localization could not finish one torch.compile trial: the bucket is left.
LEAST_SECONDS = 30.0


@dataclass
class NewBucketPasses:
    """What the campaign's localizations named, per bucket, and which buckets were left."""

    localized: list[dict] = field(default_factory=list)  # bucket, case, backend, passes, summary, seconds
    left: list[int] = field(default_factory=list)  # ids of the buckets no time was left for

    @property
    def median_seconds(self) -> float | None:
        return statistics.median(item["seconds"] for item in self.localized) if self.localized else None

    def to_dict(self) -> dict:
        median = self.median_seconds
        return {"localized": self.localized, "left": self.left,
                "median_seconds": None if median is None else round(median, 1)}

    def text(self, db_option: str) -> str:
        """The campaign summary's lines: each bucket's pass, the median cost, the buckets left."""
        if not self.localized and not self.left:
            return ""
        lines = [f"Pass of each new compiler bucket (median {self.median_seconds:.0f} s a bucket):"] if self.localized else []
        lines += [f"  B{item['bucket']}: {item['summary']}" for item in self.localized]
        if self.left:
            lines.append("  Left for want of --localize-time: " + ", ".join(f"B{b}" for b in self.left)
                         + f"; run `fuzz localize B{self.left[0]}{db_option}` for each.")
        return "\n".join(lines)


def localize_new_buckets(corpus: Corpus, signatures: list[str], plugins: list[str], timeout: float,
                         seconds: float, on_result=None) -> NewBucketPasses:
    """Localize the buckets `signatures` (a campaign's new compiler buckets, in the order found) within
    `seconds` in all; `on_result(item)` after each."""
    found = NewBucketPasses()
    deadline = time.monotonic() + seconds
    for signature in signatures:
        bucket = corpus.bucket(signature)
        if bucket is None or bucket["representative"] is None:
            continue  # a bucket a rebucket merged away, or one keeping no case
        left = deadline - time.monotonic()
        if left < LEAST_SECONDS:
            found.left.append(bucket["id"])
            continue
        found.localized.append(_localized(corpus, bucket, plugins, timeout, left))
        if on_result is not None:
            on_result(found.localized[-1])
    return found


def _localized(corpus: Corpus, bucket: dict, plugins: list[str], timeout: float, seconds: float) -> dict:
    """One bucket's localization on its smallest case, kept on the bucket: what the summary says of it."""
    case_id, started = bucket["representative"], time.monotonic()
    item = {"bucket": bucket["id"], "case": case_id, "backend": bucket["backend"], "passes": [], "trials": 0}
    try:
        stored = corpus.get_case(case_id)
        item["backend"] = localizable_backend(stored.findings, bucket["backend"])
        result = localize(stored.case, item["backend"], plugins, timeout, seconds)
    except UserError as exc:  # its smallest case is on no compiler, or that compiler is missing here
        return {**item, "summary": str(exc), "seconds": round(time.monotonic() - started, 1)}
    if result.trials:  # a bucket new to the campaign has no pass yet: it is kept on the bucket itself
        corpus.record_localization(bucket["signature"], result.stored(versions(), case_id))
    return {**item, "passes": result.passes, "summary": result.summary, "trials": result.trials,
            "seconds": round(time.monotonic() - started, 1)}
