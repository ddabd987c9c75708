"""When a verdict that agrees is still an accuracy regression against another backend's verdict
on the same case: its error as a share of its allowance, against the other's share of its own."""

from __future__ import annotations

from fuzzer import verdicts
from fuzzer.records import BackendVerdict

# An error this many times another release's error on the same case, or eager's of a compiler's
# own release, is an accuracy regression, once it is at least ACCURACY_FLOOR of its allowance
# (below that, kernels differing by an ulp or two would be "10x" apart). Measured on 427 generated
# cases (7 compiler / eager pairs, CPU and CUDA): no compiled share of the allowance reached 0.1 on
# the CPU (the largest 0.074), and above 0.01 none was twice eager's; on the GPU, the two above 0.1
# and 10x eager were TF32 defaults (check_case's strict re-run makes them precision-policy).
ACCURACY_FACTOR = 10.0
ACCURACY_FLOOR = 0.1


def share(verdict: BackendVerdict) -> float:
    """The verdict's error as a share of its allowance."""
    return verdict.max_error / verdict.allowed if verdict.allowed > 0 else 0.0


def regresses_from(verdict: BackendVerdict, best: BackendVerdict) -> bool:
    """Do both agree, with `verdict` erring at least ACCURACY_FLOOR of its allowance and
    ACCURACY_FACTOR times `best`'s share of its own?"""
    return (verdict.verdict == verdicts.AGREE and best.verdict == verdicts.AGREE and share(verdict) >= ACCURACY_FLOOR
            and share(verdict) >= ACCURACY_FACTOR * share(best))
