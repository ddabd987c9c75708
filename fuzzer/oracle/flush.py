"""The flush-to-zero models: honest runs of dtype d by a kernel that flushes subnormals (XLA on
the CPU, Triton and fast-math CUDA kernels), in float64's range (flush_to_zero_run: an honest
model, its deviation joins e_same) and in d's range too (flush_in_range_run: a classifier only).

flush_to_zero_run is the plain specification; fast.flush_to_zero_shared computes the same bits.
"""

from __future__ import annotations

import numpy as np

from fuzzer.ir import Graph, interpret
from fuzzer.judging.reference import evaluate_all
from fuzzer.ops import get_op
from fuzzer.oracle.dtypes import LARGEST, TINY, flushed, nonfinite_class, round_to_dtype
from fuzzer.oracle.rounding import model_outputs
from fuzzer.oracle.rules import depends_on_undefined


def flush_to_zero_run(graph: Graph, inputs: dict, params: dict, dtype: str, env: dict | None = None) -> list[np.ndarray]:
    """The float64 reference with subnormals of `dtype` flushed to (signed) zero at every op's
    inputs and outputs. `env`: the float64 run's values, computed here where not given.

    The run starts from the case's values rounded to `dtype`, as the backend gets them (an exponent
    of 19.055 is 19 in bfloat16, so pow of a negative base is a tiny negative, flushed to -0, and
    its log -inf, where the float64 reference is nan).

    Flushing subnormals (FTZ/DAZ) is a documented platform policy, not a bug: XLA on CPU does
    it (jnp.add(1e-40, 0.0) is 0.0 in float32, x / x is nan, exp(-87.5) is 0), so do fast-math
    GPU kernels. Ops make subnormals from normal inputs too (silu(-99) is -1e-41), so the run
    is always made. The oracle counts it like rounding: its deviation joins e_same, and an
    entry that flushing makes non-finite, or finite, is undefined in that dtype. A kernel may
    flush in some reads and not others, so an op whose class flushing changes (-inf times a
    flushed 1e-39 is nan) makes undefined what depends on it, even where a later op would hide
    the change (pow(nan, -0.0) is 1, pow(nan, -8e-39) is nan): _flush_undefined.
    """
    flush = lambda values: flushed(values, dtype)  # noqa: E731
    with np.errstate(all="ignore"):
        if env is None:
            env = evaluate_all(graph, inputs, params)
        raw = {name: round_to_dtype(value, dtype) for name, value in inputs.items()}
        values = {name: flush(value) for name, value in raw.items()}
        undefined = {}
        for node in graph.nodes:
            values[node.name], undefined[node.name], raw[node.name] = flushed_node(node, values, raw, undefined, params, env, dtype)
        return model_outputs(values, undefined, graph.outputs, env)


def flush_in_range_run(graph: Graph, inputs: dict, params: dict, dtype: str) -> list[np.ndarray]:
    """The flush-to-zero run in `dtype`'s range as well: every value rounded to `dtype`, flushed, and
    past its largest value +-inf. A classifier only (which entries are judged or defined), like the
    directed runs: a float32 kernel both overflows and flushes, and neither the flush run (float64's
    range) nor numpy in float32 (no flush) sees the two together: XLA's CPU cosh(103) is inf (honest),
    and its dot reads x1 = -2.1e-42 as 0, so inf * 0 is nan where both models say -inf or a number."""
    def honest(values):
        values = flushed(round_to_dtype(values, dtype), dtype)
        return np.where(np.abs(values) > LARGEST[dtype], np.copysign(np.inf, values), values)

    def in_range(op_name):
        reference_fn = get_op(op_name).reference
        return lambda xs, ps, attrs: honest(reference_fn(xs, {k: honest(v) for k, v in ps.items()}, attrs))

    with np.errstate(all="ignore"):
        return interpret(graph, {name: honest(value) for name, value in inputs.items()}, params, in_range)


def flushed_node(node, values: dict, raw: dict, undefined: dict, params: dict, env: dict, dtype: str):
    """One node of the flush-to-zero run: its result from the run's `values` (operands and
    parameters rounded to `dtype` and flushed, the result flushed), its undefined entries, and
    its result before the flush (what a kernel that does not flush reads: `raw`)."""
    flush = lambda values: flushed(values, dtype)  # noqa: E731
    op, ps = get_op(node.op), params.get(node.name, {})
    xs = [values[name] for name in node.inputs]
    rounded = {k: round_to_dtype(v, dtype) for k, v in ps.items()}
    unflushed = op.reference(xs, {k: flush(v) for k, v in rounded.items()}, node.attrs)
    result = flush(unflushed)
    # A kernel may read its operands flushed or not, whatever the ops before it did: XLA's CPU dot
    # flushes a subnormal operand where its pow reads a subnormal exponent as it is.
    read_raw = op.reference([raw[name] for name in node.inputs], rounded, node.attrs)
    result = _farther_where_jumped(result, read_raw, env[node.name], dtype)
    return result, _flush_undefined(op, xs, [env[name] for name in node.inputs], [undefined.get(name) for name in node.inputs],
                                    ps, node.attrs, result, env[node.name], read_raw), unflushed


# A change of a result that no subnormal operand makes in a continuous op: half its size, and more
# than sqrt(TINY) (a subnormal times 1e19; 1e-19 in float32).
_JUMP = 0.5


def _farther_where_jumped(result: np.ndarray, read_raw: np.ndarray, exact: np.ndarray, dtype: str) -> np.ndarray:
    """The flush-to-zero run's `result` of an op, or where reading the operands unflushed (`read_raw`)
    moves it by more than any continuous op would (_JUMP), whichever of the two is farther from the
    float64 value `exact`: an op that jumps where an operand is zero (pow(0, 0) is 1, pow(0, 3e-41)
    is 0), read by a kernel that flushes one operand and not another, may give either."""
    with np.errstate(all="ignore"):
        change = np.abs(result - read_raw)
        jumped = ((change > _JUMP * np.maximum(np.abs(result), np.abs(read_raw))) & (change > np.sqrt(TINY[dtype]))
                  & np.isfinite(result) & np.isfinite(read_raw))
        if not jumped.any():
            return result
        return np.where(jumped & (np.abs(read_raw - exact) > np.abs(result - exact)), read_raw, result)


def _flush_undefined(op, xs: list, exact_xs: list, undefined_in: list, ps: dict, attrs: dict, result: np.ndarray,
                     exact: np.ndarray, read_raw: np.ndarray) -> np.ndarray | None:
    """The entries of a flush-to-zero run's `result` of `op` (on the operands `xs`) that are
    undefined (None: none): of another non-finite class than the float64 run's (`exact`, on
    `exact_xs`) or than the op gives reading its operands unflushed (`read_raw`), or dependent on
    an operand entry undefined upstream, with the other operands flushed or not
    (pow(undefined, -8e-39) depends on it, pow(undefined, -0.0) does not)."""
    shape = np.shape(result)
    masks = [np.broadcast_to(nonfinite_class(result) != nonfinite_class(exact), shape),
             np.broadcast_to(nonfinite_class(result) != nonfinite_class(read_raw), shape),
             depends_on_undefined(op, xs, undefined_in, ps, attrs, shape),
             depends_on_undefined(op, exact_xs, undefined_in, ps, attrs, shape)]
    masks = [mask for mask in masks if mask is not None and mask.any()]
    return np.logical_or.reduce(masks) if masks else None
