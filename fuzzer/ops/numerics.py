"""An op's numerics declaration: every fact the oracle needs about how its correct kernels round,
beyond the float64 reference, in one place, each with its reason.

An op that declares nothing gets `Numerics()`: the oracle's generic models (rounding at every op
at the dtype's precision, flush-to-zero, overflow; fuzzer/oracle/) judge it alone. A fact other than
its default says why in `why` ({fact: reason}); `fuzz ops --numerics NAME` prints them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Callable


@dataclass(frozen=True)
class Numerics:
    # Multiplies the oracle's dtype tolerance: how much rounding error this op may amplify.
    sensitivity: float = 1.0
    # (inputs, params, attrs) -> per-element bound of the error a correct implementation makes,
    # in units of roundoff, where it exceeds |output| (e.g. normalizing near-constant data);
    # the oracle's rounding model adds it as a systematic error (see fuzzer/oracle/rounding.py).
    forward_error: Callable | None = None
    # (inputs, params, attrs, unit roundoff) -> per-element bound of how far a correct kernel's
    # rounding of the op's own intermediates to the dtype moves its result, where that is not
    # linear in the roundoff (sdpa's scores: one rounding can turn a row's winning key into a tie);
    # the oracle's rounding model adds it like forward_error.
    intermediate_error: Callable | None = None
    # Piecewise-constant ops (floor, round, sign, argmax, comparison masks): a rounding error in
    # an input can move the output by a whole step, so the generator applies them only to graph
    # inputs (the same float32 numbers in every backend) and bfloat16 backends skip them (numpy
    # has no bfloat16 to round their inputs the way the backend does).
    exact: bool = False
    # Does the sign of a zero operand matter beyond the sign of the result (atan2(+-0, -1) = +-pi,
    # 1 / +-0 = +-inf, sqrt is nan just below zero)? The oracle then judges the results that depend
    # on the sign of a computed zero, a rounding artifact, as undefined (fuzzer/oracle/rules.py, "Signed zeros").
    zero_sign_matters: bool = False
    # Does the class of a result change where an operand is exactly an integer (a negative base to a
    # non-integer power is nan)? The oracle then judges the results that depend on whether a computed
    # operand within rounding of an integer is that integer as undefined (fuzzer/oracle/rules.py, "Signed zeros").
    integer_matters: bool = False
    # (inputs, params, attrs) -> mask of the entries the math leaves to convention, where IEEE and the
    # frameworks disagree (pow(-inf, 0.5): IEEE's +inf, numpy's and torch's sqrt-shortcut nan): the
    # oracle judges them, and what is computed from them, as undefined (fuzzer/oracle/rules.py, "Signed zeros").
    undefined: Callable | None = None
    # (inputs, params, attrs) -> per operand, a mask of its entries whose results the op leaves to
    # convention (or None): sign(nan) is 0 in torch and nan in numpy. The oracle judges every result
    # entry that depends on a marked operand entry as undefined, found by its own dependence probe
    # (fuzzer/oracle/rules.py, depends_on_undefined), so the op need not say which results those are.
    undefined_operands: Callable | None = None
    # A periodic op's period (sin, cos: 2 pi): where upstream rounding may move its operand by a
    # quarter period, its result may be anything in its range, which a few rounding runs cannot
    # sample; the oracle judges it as undefined there (fuzzer/oracle/rules.py, _moved_a_quarter_period).
    period: float | None = None
    # A scan (cumsum) whose reduced-precision kernels may carry the running value in the tensor's
    # own dtype: torch's CUDA cumsum/cumprod in float16/bfloat16 do, and its maintainers call that
    # expected (pytorch#180150, #180155), so a bfloat16 running sum of 0.73s stalls at 256. The
    # bfloat16 model then scans in bfloat16 too (reference.py), and the allowance spans both kinds.
    scans_in_dtype: bool = False
    # Attributes a framework turns into a constant of the tensor's dtype before computing (a Python
    # scalar is a weak type in jax, and torch does the same for bfloat16: x + 1.1591796875 adds
    # 1.15625). The bfloat16 model rounds them too (reference.py): the exact-scalar rounding runs
    # beside it then leave the entries whose class hangs on that rounding undefined.
    weak_scalars: tuple[str, ...] = ()
    # (inputs, params, attrs) -> the op as an honest kernel computes it on operands of a dtype
    # other than float64, where that is not the reference's float64 math run in the dtype (a
    # kernel that holds its statistics in float32, or flushes what it cannot represent). The
    # same-dtype model runs it in place of the reference (OpDef.in_numpy); None: the reference.
    low_precision_model: Callable | None = None
    # (inputs, params, attrs, indices) -> (the operand values at `indices`, which entries are a valid
    # index): the op's result is an index into its operand (argmax), not a value, so the oracle judges
    # it exactly, and a different index only where the operand's values there tie within the float
    # tolerance (fuzzer/oracle/indices.py). None: the result is a value.
    indexes: Callable | None = None
    # {fact: why}: the reason for every fact above that is not its default.
    why: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        unknown = sorted(set(self.why) - set(fact_names()))
        if unknown:
            raise TypeError(f"Numerics(why=...) names {unknown}, which are no numerics facts; "
                            f"the facts are {', '.join(fact_names())}.")

    def declared(self) -> dict[str, object]:
        """The facts that differ from their defaults, by name."""
        default = Numerics()
        return {name: getattr(self, name) for name in fact_names() if getattr(self, name) != getattr(default, name)}

    def unexplained(self) -> list[str]:
        """The declared facts that `why` gives no reason for."""
        return [name for name in self.declared() if not self.why.get(name, "").strip()]

    def describe(self) -> list[dict]:
        """[{fact, value, why}] of the declared facts, printable (a function as its name)."""
        return [{"fact": name, "value": _printable(value), "why": self.why.get(name, "")}
                for name, value in self.declared().items()]


def fact_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Numerics) if f.name != "why")


def _printable(value):
    if callable(value):
        return getattr(value, "__qualname__", getattr(value, "__name__", repr(value)))
    return list(value) if isinstance(value, tuple) else value


# Steps (floor, round, sign, argmax): the declaration they share.
PIECEWISE_CONSTANT = Numerics(exact=True, why={"exact": "piecewise constant: one rounding of a computed input can move it a whole step"})
