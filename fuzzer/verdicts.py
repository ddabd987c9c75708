"""Verdicts, declared once: what each means everywhere (campaign, replay, regress, bisect, report).

A backend's verdict on a case is one of these names; a case's verdict is its worst backend
verdict (the table is ordered worst first). Modules ask the table (`get(name).is_bug`,
`.passes`, ...) and never compare verdict strings of their own, so a new verdict is one row
here plus its test.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    name: str
    is_bug: bool  # a finding: stored in a bucket, counted, makes `fuzz run` exit 1
    passes: bool  # replay, regress (expect agree) and bisect count the case as passing
    wrong_value: bool  # a wrong output: the precision re-run and the nondeterminism gate apply
    shrink: bool  # findings with it are shrunk
    recorded: bool  # stored with the case as a finding (bugs, and differences explained as no bug)
    meaning: str


TABLE = (
    Verdict("crash", True, False, False, True, True, "the backend raised, or its process died"),
    Verdict("hang", True, False, False, True, True, "the backend did not answer within the timeout"),
    Verdict("nondeterministic", True, False, False, True, True, "a wrong answer that changes between re-runs of the same case"),
    Verdict("nan-inf", True, False, True, True, True,
            "non-finite where the reference is finite, or another non-finite value than the reference defines"),
    Verdict("all-zeros", True, False, True, True, True, "every value is zero where the reference is not constant"),
    Verdict("constant", True, False, True, True, True, "every value is the same where the reference is not constant"),
    Verdict("mismatch", True, False, True, True, True, "values beyond the tolerance model's allowance"),
    # Judged with no tolerance, and only inside the scope the release documents (fuzzer/judging/contracts.py).
    Verdict("contract", True, False, False, True, True,
            "within tolerance, but not bitwise what the compiler's configuration promises (strict numerics: torch "
            "eager's results; batch invariance: f(x)[:k] == f(x[:k])) where its release documents the promise"),
    # Judged across backends (check._accuracy_regressions), so a one-backend shrink predicate cannot keep it: not shrunk.
    Verdict("accuracy-regression", True, False, False, False, True,
            "within tolerance, but 10x or more the error of the same backend kind in another release, or of eager "
            "of a compiler's own framework and release, on the same case"),
    Verdict("precision-policy", False, True, False, False, True,
            "wrong only under a reduced-precision default (TF32); right once that is off"),
    Verdict("inherited", False, True, False, False, True,
            "the backend it was derived from gives the same verdict: a finding of that base, not of this backend"),
    Verdict("agree", False, True, False, False, False, "within the tolerance model, entry by entry"),
    Verdict("unsupported", False, True, False, False, False, "the backend cannot run an op of the case (an older release)"),
    Verdict("invalid", False, True, False, False, False, "the float64 reference defines no entry of any output: skipped"),
)
BY_NAME = {verdict.name: verdict for verdict in TABLE}
SEVERITY = {verdict.name: rank for rank, verdict in enumerate(TABLE)}  # 0 for the worst

CRASH, HANG, NONDETERMINISTIC, NAN_INF, ALL_ZEROS, CONSTANT, MISMATCH, CONTRACT = (
    "crash", "hang", "nondeterministic", "nan-inf", "all-zeros", "constant", "mismatch", "contract")
ACCURACY_REGRESSION, PRECISION_POLICY, INHERITED = "accuracy-regression", "precision-policy", "inherited"
AGREE, UNSUPPORTED, INVALID = "agree", "unsupported", "invalid"


def get(name: str) -> Verdict:
    """The verdict named `name`; an unknown name (a corpus from a newer release) is a bug, not a pass."""
    return BY_NAME.get(name) or Verdict(name, True, False, False, False, True, "a verdict this release does not know")


def is_bug(name: str) -> bool:
    return get(name).is_bug


def passes(name: str) -> bool:
    return get(name).passes


def bucket_verdict(name: str) -> str:
    """The verdict a finding is bucketed under. An all-zeros or constant output is a mismatch
    that happens to be flat: the same bug gives a flat output on some inputs (a GRU that ignores
    its hidden state, fed a constant) and not on others, so they share a bucket, and the
    shrinker may simplify inputs down to flat ones without losing the bug. So is an accuracy
    regression: the same wrong op is within the tolerance on some inputs (old jax's softmax over
    a leading axis) and past it on others."""
    return MISMATCH if name in (ALL_ZEROS, CONSTANT, ACCURACY_REGRESSION) else name


def severity(name: str) -> int:
    """0 for the worst; unknown names rank with the bugs."""
    return SEVERITY.get(name, 0)


def worst(names: list[str]) -> str:
    return min(names, key=severity, default=AGREE)
