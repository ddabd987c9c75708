"""Complex semantics of the ops (fuzzer/complex_dtypes.py): `complex_semantics` gives the ops that mean
something on complex values their complex dtypes (OpDef.complex_dtypes), where they are declared, so
one op keeps one declaration. Their float64 `reference` is numpy's complex math on complex128."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

KINDS = ("complex", "promotes", "real")


def _real_part(reference):
    """A reference whose result is real on complex operands (abs, angle): numpy's result, whose `like`
    cast made it complex again, without its (zero) imaginary part."""
    def run(xs, ps, attrs):
        return np.real(reference(xs, ps, attrs))

    return run


def complex_semantics(ops: list, kinds: dict[str, str], jax_differs: dict[str, str] | None = None,
                      periods: dict[str, float] | None = None) -> list:
    """`ops` with those named in `kinds` declared on the complex dtypes, each of its kind (KINDS; see
    OpDef.complex_dtypes), why jax's convention differs where `jax_differs` names it, and the period
    of the result in an operand's component where `periods` names one (OpDef.complex_period)."""
    jax_differs, periods = jax_differs or {}, periods or {}
    names = {op.name for op in ops}
    unknown = (set(kinds) | set(jax_differs) | set(periods)) - names
    if unknown or not set(kinds.values()) <= set(KINDS):
        raise ValueError(f"complex_semantics: unknown ops {sorted(unknown)} or kinds {sorted(set(kinds.values()) - set(KINDS))}")
    return [replace(op, complex_dtypes=kinds[op.name], jax_complex_differs=jax_differs.get(op.name, ""),
                    complex_period=periods.get(op.name),
                    reference=_real_part(op.reference) if kinds[op.name] == "real" else op.reference)
            if op.name in kinds else op for op in ops]
