"""The fast path (paths.FAST; see "Cost" in paths.py): the honest models with the same bits as the
plain functions they stand for (rounding.rounding_runs, flush.flush_to_zero_run), in less time.

Every function here returns, bit for bit, what the plain function it stands for returns. Two
arrays are *equivalent* when a reference function cannot tell them apart: the same dtype, values
and memory layout (a reduction's summation order and a BLAS kernel's choice follow strides and
alignment, so equal values alone are not enough). A shortcut replaces an array by an equivalent
one, and nothing else.
"""

from __future__ import annotations

import numpy as np

from fuzzer.ir import Case, Graph
from fuzzer.judging.reference import evaluate_all
from fuzzer.ops import get_op
from fuzzer.oracle.dtypes import LARGEST, ROUNDING_SLACK, TINY, UNIT_ROUNDOFF, flushed, round_to_dtype
from fuzzer.oracle.flush import flushed_node
from fuzzer.oracle.rounding import NOISY_RUNS, finished, model_outputs, perturb
from fuzzer.oracle.undeclared import operand_reach


# Below this many entries, the plain expressions cost no more than checking for the in-place ones.
IN_PLACE_SIZE = 4096


class Diverged(Exception):
    """The dtypes' rounding runs would draw different shapes: the shared draws do not apply."""


def _standard(values) -> bool:
    """Is `values` a float64 ndarray laid out as numpy lays out a fresh C-ordered array (np.empty's
    strides, and 16-byte aligned as numpy's allocations are here)? numpy's elementwise functions
    (ufuncs, np.where) give their result exactly this layout when every array operand has it, so
    such an array, a copy of it and a result with its values are equivalent. (Where a fresh array
    lands beyond that alignment is malloc's choice, which the plain path does not control either.)"""
    if (type(values) is not np.ndarray or values.dtype != np.float64 or not values.flags.c_contiguous
            or values.size == 0 or values.ctypes.data % 16):
        return False
    if 1 not in values.shape:  # C-contiguous: the strides are np.empty's but for size-1 dims, which may be any
        return True
    step, strides = values.itemsize, []
    for dim in reversed(values.shape):
        strides.append(step)
        step *= dim
    return values.strides == tuple(reversed(strides))


def _separate(arrays: list) -> bool:
    """No two of `arrays` share memory (a copy of each would not either: numpy may treat aliased
    operands differently, e.g. a product with its own transpose)."""
    return not any(np.may_share_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:])


def _sign_free(values: np.ndarray) -> bool:
    """No entry of the _standard array `values` has its sign bit set (as int64, none is negative)."""
    return bool(values.view(np.int64).min() >= 0)


def _abs_is_identity(xs: list, ps: dict) -> bool:
    """Are the operands `np.abs` gives the op (`[|x| for x in xs]`, `{k: |v|}`) equivalent to `xs`
    and `ps` themselves? np.abs only clears the sign bit, so where no entry has it set (no
    negative, no -0.0, no negative nan) the values are the same bits; `_standard` makes the
    layouts the same, `_separate` the aliasing."""
    operands = [*xs, *ps.values()]
    return all(_standard(a) and _sign_free(a) for a in operands) and _separate(operands)


def perturbed_result(out: np.ndarray, magnitude, draw: np.ndarray, dtype: str, zero: float) -> np.ndarray:
    """rounding.rounding_runs' perturbed result of one op (before any forward_error), from its result
    `out`, its magnitude and the output draw; the plain expressions unless `out` and `magnitude`
    are _standard, where the same values are computed in place, in fewer passes (the result is
    then _standard too, as the plain expressions' would be: every operand of theirs is)."""
    roundoff = UNIT_ROUNDOFF[dtype]
    largest = LARGEST[dtype]
    if not (out.size >= IN_PLACE_SIZE and out.ndim and _standard(out) and _standard(magnitude) and _standard(draw)
            and out.shape == magnitude.shape == draw.shape):
        bound = ROUNDING_SLACK * roundoff * np.maximum(np.abs(out), np.where(np.isfinite(magnitude), magnitude, 0.0))
        noisy = perturb(out, bound * draw)
        with np.errstate(invalid="ignore"):
            noisy = np.where(np.isfinite(out) & ((np.abs(out) <= bound) | (np.abs(out) < TINY[dtype])), zero, noisy)
            return np.where(np.isfinite(magnitude) & (magnitude > largest), np.copysign(np.inf, out), noisy)
    with np.errstate(invalid="ignore", over="ignore"):
        abs_out = np.abs(out)
        all_finite = bool(abs_out.max() < np.inf)  # a nan makes the maximum nan
        peak = magnitude.max()
        if peak < np.inf:  # every magnitude finite: np.where(np.isfinite(magnitude), magnitude, 0.0) is magnitude
            bound = np.maximum(abs_out, magnitude)
        else:
            bound = np.where(np.isfinite(magnitude), magnitude, 0.0)
            np.maximum(abs_out, bound, out=bound)
        bound *= ROUNDING_SLACK * roundoff
        snap = abs_out <= bound
        snap |= abs_out < TINY[dtype]
        finite = None if all_finite else np.isfinite(out)
        if finite is not None:
            snap &= finite
        # perturb(out, bound * draw): where `out` is finite the bound is finite (|out| and the finite
        # magnitudes are, and the factor is below 1), so the delta is, and the entry is out + delta;
        # elsewhere it is `out`. The bound is not needed after this: the result takes its place.
        noisy = np.multiply(bound, draw, out=bound)
        noisy += out
        if finite is not None:
            np.copyto(noisy, out, where=~finite)
        if snap.any():
            np.copyto(noisy, zero, where=snap)
        # A finite magnitude never passes float64's largest value, nor any where the peak is below it.
        if largest < np.finfo(np.float64).max and not peak <= largest:
            over = magnitude > largest  # nan is not; inf is, and is left out below
            over &= np.isfinite(magnitude)
            if over.any():
                np.copyto(noisy, np.copysign(np.inf, out), where=over)
    return noisy


def _perturbed_operand(x, draw: np.ndarray, slack: float) -> np.ndarray:
    """x * (1.0 + slack * draw), as rounding.rounding_runs computes it; in one buffer where x is _standard
    (the product's fresh array would be _standard too)."""
    factor = slack * draw
    factor += 1.0
    if np.size(x) >= IN_PLACE_SIZE and _standard(x) and _standard(factor) and x.shape == factor.shape:
        return np.multiply(x, factor, out=factor)
    return x * factor


def rounding_runs_shared(case: Case, inputs: dict, params: dict, dtypes: list[str],
                          env: dict | None = None) -> dict[str, list[list[np.ndarray]]]:
    """rounding.rounding_runs(case, inputs, params, dtype, env) for every dtype at once.

    Run r of every dtype seeds its generator alike and asks it for the same shapes in the same
    order (per node: one draw per perturbed operand, then one for the result), so it gets the
    same numbers: going node by node, each draw is made once and used by every dtype. Where the
    shapes would differ, Diverged (the caller runs the plain function)."""
    graph = case.graph
    if env is None:
        with np.errstate(all="ignore"):
            env = evaluate_all(graph, inputs, params)
    runs: dict[str, list] = {dtype: [] for dtype in dtypes}
    for run in range(NOISY_RUNS):
        rng = np.random.default_rng([case.seed % 2**32, run])
        zero = 0.0 if run % 2 == 0 else -0.0
        envs = {dtype: dict(inputs) for dtype in dtypes}
        undefined: dict[str, dict] = {dtype: {} for dtype in dtypes}
        for node in graph.nodes:
            op = get_op(node.op)
            ps = params.get(node.name, {})
            computed = [name not in inputs for name in node.inputs]
            operands = {dtype: [envs[dtype][name] for name in node.inputs] for dtype in dtypes}
            with np.errstate(all="ignore"):
                if not op.numerics.exact:
                    shapes = [np.shape(x) for x in operands[dtypes[0]]]
                    if any([np.shape(x) for x in operands[dtype]] != shapes for dtype in dtypes):
                        raise Diverged
                    draws = [rng.uniform(-1.0, 1.0, shape) for shape in shapes]
                    for dtype in dtypes:
                        operands[dtype] = [_perturbed_operand(x, u, ROUNDING_SLACK * UNIT_ROUNDOFF[dtype])
                                           for x, u in zip(operands[dtype], draws)]
                results = {}
                for dtype in dtypes:
                    xs = operands[dtype]
                    raw = op.reference(xs, ps, node.attrs)
                    out = np.asarray(raw, dtype=np.float64)
                    if _abs_is_identity(xs, ps):
                        # The plain call's operands are equivalent to these: the same result, again.
                        magnitude = np.abs(np.asarray(raw))
                    else:
                        magnitude = np.abs(np.asarray(op.reference([np.abs(x) for x in xs], {k: np.abs(v) for k, v in ps.items()},
                                                                   node.attrs)))
                    magnitude = operand_reach(op, xs, ps, node.attrs, out, magnitude, ROUNDING_SLACK * UNIT_ROUNDOFF[dtype],
                                              LARGEST[dtype])
                    results[dtype] = out, magnitude
                shape = results[dtypes[0]][0].shape
                if any(out.shape != shape for out, _ in results.values()):
                    raise Diverged
                draw = rng.uniform(-1.0, 1.0, shape)
                for dtype in dtypes:
                    out, magnitude = results[dtype]
                    envs[dtype][node.name], undefined[dtype][node.name] = finished(
                        perturbed_result(out, magnitude, draw, dtype, zero), op, operands[dtype], computed,
                        [undefined[dtype].get(name) for name in node.inputs], ps, node.attrs, out, env[node.name], dtype, run,
                        exact_xs=[env[name] for name in node.inputs])
        for dtype in dtypes:
            runs[dtype].append(model_outputs(envs[dtype], undefined[dtype], graph.outputs, env))
    return runs


def flush_to_zero_shared(graph: Graph, inputs: dict, params: dict, dtype: str, env: dict) -> list[np.ndarray]:
    """flush.flush_to_zero_run(graph, inputs, params, dtype), taking the float64 run's values (`env`,
    from reference.evaluate_all) where flushing changes nothing.

    By induction over the nodes: where every operand the plain run gives a node (a flushed copy)
    is equivalent to the one the float64 run gave it, the plain run's result is the float64
    run's, flushed; that flush changes nothing and is equivalent to the float64 value itself
    where the value has no entry in (0, tiny) in magnitude and is _standard. (`env` comes from
    reference.evaluate_all without overrides, whose implementation of an op is the op's reference.)"""
    tiny = TINY[dtype]
    flush = lambda values: flushed(values, dtype)  # noqa: E731

    def exact_in(rounded, values) -> bool:  # does rounding to dtype leave the values as they are?
        return np.array_equal(rounded, values, equal_nan=True)

    def untouched(values) -> bool:
        if not _standard(values):
            return False
        small = np.abs(values) < tiny
        return not (small.any() and np.any(values[small] != 0))  # +-0 flushes to itself

    # The run's values, the same before flushing (_flushed_node), and whether a value is the float64 run's own array.
    values, raw, shared, undefined = {}, {}, {}, {}
    with np.errstate(all="ignore"):
        for name, value in inputs.items():
            rounded = round_to_dtype(value, dtype)
            shared[name] = untouched(env[name]) and exact_in(rounded, env[name])
            values[name] = env[name] if shared[name] else flush(rounded)
            raw[name] = env[name] if shared[name] else rounded
        for node in graph.nodes:
            ps = params.get(node.name, {})
            # The float64 run's operands: env's values, and each parameter as np.asarray(float64) gave it.
            cast = {k: np.asarray(v, dtype=np.float64) for k, v in ps.items()}
            operands = [env[name] for name in node.inputs] + list(cast.values())
            if (all(shared[name] for name in node.inputs)
                    and all(untouched(v) and exact_in(round_to_dtype(v, dtype), v) for v in cast.values())
                    and _separate(operands)):
                # No operand flushed or undefined: the result is env's, flushed, of env's classes.
                result = raw[node.name] = env[node.name]
                shared[node.name] = untouched(result)
                values[node.name] = result if shared[node.name] else flush(result)
            else:
                shared[node.name] = False
                values[node.name], undefined[node.name], raw[node.name] = flushed_node(node, values, raw, undefined, params, env, dtype)
        return model_outputs(values, undefined, graph.outputs, env)
