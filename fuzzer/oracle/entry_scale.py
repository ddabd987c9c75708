"""Per-entry scales: the magnitude each output entry's rounding errors are relative to, propagated
through the graph, for the per-entry allowance of compare.py ("Per entry").

The output's `scale` (the largest magnitude anywhere along the way, inputs included) bounds every
entry's rounding, and so lets an entry far below it be off by a relative error far above the
dtype's precision: sqrt(1e4) = 100 beside an input of 1e4, tanh(1e19) = 1. An entry's own scale m
is a first-order bound of how far rounding every value it depends on by a relative u moves it, in
units of u. Per node, from its operands' scales (a graph input's is |x|, a parameter's |p|):

    m = max( |y|,                      its own value
             |op(m_1, m_2, ...)|,      the op on its operands' scales (sum |x_i| for a sum,
                                       sum |x_i w_i| for a matmul: the rounding model's magnitude)
             reach )                   how far y moves when each operand x_k moves by SLACK * m_k,
                                       over REACH_PATTERNS sign patterns, in units of SLACK

`reach` covers what the op on magnitudes does not: x - y of two near-equal values (|x| - |y| is
small), a quotient by a value that cancelled, softmax's dependence on differences. The patterns
are: every operand up, every operand alternately up and down (operand k by (-1)^k: where there are
two or more), and two seeded patterns of one sign per entry (a contraction whose terms differ in
sign; not for ops of ENTRYWISE_FAMILIES, whose result entry reads one entry of each operand, where
they add nothing to the first two). Where a move
makes a value non-finite, the scale is infinite: that entry keeps the output's allowance.

Conservative where it is a bound of the first order only (an error past the op's linear range:
the honest models' deviation covers it, see compare.py) and where the patterns miss a worst sign
(the models again, and the floor's RTOL, a few hundred units of roundoff, above the few an op makes).
"""

from __future__ import annotations

import numpy as np

from fuzzer.ir import Graph
from fuzzer.ops import get_op

SLACK = 2.0**-20  # small enough that the moves stay in an op's linear range, far above float64's roundoff
REACH_PATTERNS = 4
# Op families whose result entry reads one entry of each operand (or moves entries: shape, indexing).
ENTRYWISE_FAMILIES = ("unary", "elementwise", "scalar", "shape", "indexing", "dropout")


def entry_scales(graph: Graph, env: dict, inputs: dict, params: dict, seed: int) -> list[np.ndarray]:
    """Per output of `graph`, each entry's scale (see above), from the float64 run's values `env`."""
    rng = np.random.default_rng([seed % 2**32, 49])
    scales = {name: np.abs(np.asarray(value, dtype=np.float64)) for name, value in inputs.items()}
    with np.errstate(all="ignore"):
        for node in graph.nodes:
            op = get_op(node.op)
            xs = [np.asarray(env[name], dtype=np.float64) for name in node.inputs]
            ms = [scales[name] for name in node.inputs]
            ps = {k: np.asarray(v, dtype=np.float64) for k, v in params.get(node.name, {}).items()}
            out = np.asarray(env[node.name], dtype=np.float64)
            scale = np.abs(out)
            candidates = [np.abs(np.asarray(op.reference(ms, {k: np.abs(v) for k, v in ps.items()}, node.attrs), dtype=np.float64))]
            for pattern in _patterns(op, len(xs) + len(ps)):
                signs = [_signs(pattern, k, np.shape(x), rng) for k, x in enumerate([*xs, *ps.values()])]
                try:
                    moved = op.reference([x + sign * SLACK * m for x, sign, m in zip(xs, signs, ms)],
                                         {k: v + sign * SLACK * np.abs(v) for (k, v), sign in zip(ps.items(), signs[len(xs):])},
                                         node.attrs)
                except (ValueError, ArithmeticError):  # a reference that refuses the moved operands: no bound known
                    moved = np.full(np.shape(out), np.nan)
                candidates.append(np.abs(np.asarray(moved, dtype=np.float64) - out) / SLACK)
            for candidate in candidates:
                candidate = np.broadcast_to(candidate, np.shape(out))
                # nan (inf - inf): the move reached a non-finite value; the entry keeps the output's allowance
                scale = np.fmax(scale, np.where(np.isnan(candidate) & np.isfinite(out), np.inf, candidate))
            scales[node.name] = np.where(np.isfinite(out), scale, np.inf)
    return [np.broadcast_to(scales[name], np.shape(env[name])) for name in graph.outputs]


def _patterns(op, operands: int) -> list[int]:
    """The sign patterns (_signs) that can tell something about `op` with that many operands and parameters."""
    return [pattern for pattern in range(REACH_PATTERNS)
            if pattern == 0 or (pattern == 1 and operands > 1) or (pattern > 1 and op.family not in ENTRYWISE_FAMILIES)]


def _signs(pattern: int, operand: int, shape: tuple, rng: np.random.Generator) -> np.ndarray | float:
    if pattern == 0:
        return 1.0
    if pattern == 1:
        return (-1.0) ** operand
    return rng.choice((-1.0, 1.0), size=shape)
