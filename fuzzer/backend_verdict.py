"""One backend's verdict on one run of a case: its outputs judged against the float64 reference
(and its own reference of the extra outputs it returns), or its crash, hang or refusal as such."""

from __future__ import annotations

from fuzzer import oracle, verdicts
from fuzzer.backends import Backend
from fuzzer.complex_dtypes import is_complex
from fuzzer.errors import error_headline
from fuzzer.exact_dtypes import is_exact
from fuzzer.ir import Case
from fuzzer.running.execute import HANG, OK, UNSUPPORTED, Outcome


def reference_for(backend: Backend, case: Case, reference: oracle.Reference) -> oracle.Reference:
    """What `backend`'s outputs are judged against: the numpy reference of the graph's outputs,
    followed by the backend's own reference for the extra outputs it returns after them
    (gradients, vmapped copies: a method `extra_reference(case)`; see fuzzer/oracle/reference.py, "Extra outputs")."""
    own_reference = getattr(backend, "own_reference", None)  # every output judged by the backend's own models (autocast)
    if own_reference is not None:
        return own_reference(case)
    extra_reference = getattr(backend, "extra_reference", None)
    return reference if extra_reference is None else oracle.extended(reference, extra_reference(case))


def verdict_of(backend: Backend, case: Case, outcome: Outcome, reference: oracle.Reference,
               at_floor: bool = False) -> oracle.BackendVerdict:
    """`at_floor`: the verdict may agree at the floor, without the honest models (oracle.judge_outputs)."""
    ill_typed = reference.exact.ill_typed(backend.dtype) if is_exact(backend.dtype) and reference.exact else None
    if is_complex(backend.dtype) and reference.complex:  # an op refusing complex values, or real ones beside them
        ill_typed = reference.complex.ill_typed()
    if ill_typed:  # the framework refuses it as it should, or computes something no semantics defines
        return oracle.BackendVerdict(backend.name, verdicts.UNSUPPORTED, detail=ill_typed)
    if outcome.status == OK:
        try:
            judged_against = reference_for(backend, case, reference)
        except Exception as exc:  # noqa: BLE001 - a framework's float64 run that raises judges nothing
            return oracle.BackendVerdict(backend.name, verdicts.UNSUPPORTED,
                                         detail=f"the reference of its extra outputs raised: {error_headline(str(exc))[:200]}")
        return oracle.judge_outputs(backend.name, backend.dtype, outcome.outputs, judged_against, at_floor)
    if outcome.status == UNSUPPORTED:
        return oracle.BackendVerdict(backend.name, verdicts.UNSUPPORTED, detail=outcome.error)
    verdict = verdicts.HANG if outcome.status == HANG else verdicts.CRASH
    return oracle.BackendVerdict(backend.name, verdict, detail=error_headline(outcome.error)[:300])
