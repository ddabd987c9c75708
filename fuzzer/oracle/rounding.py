"""The rounding runs: honest models of dtype d that run the float64 reference with every op's
operands and result moved by a few units of d's roundoff (see "Why each term" in compare.py), and
the directed runs, which move every result by its whole rounding bound, up in one run and down in
the other (see "Non-finite values" in models.py). rules.py says which of their entries are
undefined or moved onto a zero or an infinity.

rounding_runs is the plain specification; fast.rounding_runs_shared computes the same bits for
every dtype at once.
"""

from __future__ import annotations

import numpy as np

from fuzzer.ir import Case
from fuzzer.judging.reference import evaluate_all
from fuzzer.ops import get_op
from fuzzer.oracle.dtypes import LARGEST, ROUNDING_SLACK, TINY, UNIT_ROUNDOFF
from fuzzer.oracle.rules import UNDEFINED_RULES, VALUE_RULES, OpSite
from fuzzer.oracle.undeclared import operand_reach

NOISY_RUNS = 2


def perturb(out: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """out + delta on finite entries; non-finite entries stay as the math made them, and an
    unbounded delta on a finite entry makes it nan: its value is then undefined in this dtype."""
    delta = np.broadcast_to(delta, np.shape(out))
    return np.where(np.isfinite(out), np.where(np.isfinite(delta), out + delta, np.nan), out)


def rounding_runs(case: Case, inputs: dict, params: dict, dtype: str, env: dict | None = None,
                   directed: bool = False) -> list[list[np.ndarray]]:
    """NOISY_RUNS runs of the float64 reference with every op's inputs and result perturbed by a
    few units of `roundoff` (a model of rounding at each op; see "Why each term" in compare.py). `env`: the
    float64 run's values (reference.evaluate_all), computed here where not given. `directed`: no
    draws; every op reads its operands as they come and its result is moved by its whole rounding
    bound (and forward error), up in run 0 and down in run 1, so a class that a monotone chain of
    ops decides from one rounding (exp of a sum that cancels to -2e14 beside terms of 4e17; rsqrt
    of group_norm's bias plus its rounding noise over a constant row) is reached in one of them,
    not by the luck of the draws (see "Non-finite values" in models.py). A directed run moves a sum of n terms
    further, by the n - 1 roundoffs of summing them one after the other (_accumulation_reach).

    A result within its rounding bound of zero may come out as an exact zero in an honest
    implementation (gelu(-6) is 0 in float32 through 1 + erf cancelling), and so may one below
    the dtype's smallest normal (it underflows); the sign of such a zero is the implementation's
    choice. Run 0 snaps those entries to +0 and run 1 to -0 (run 0 also those rules.py's near-zero finds,
    whose sign the rounding upstream decides), and an op that declares
    `zero_sign_matters` gives nan (undefined) wherever its result depends on the sign of a
    computed zero among its operands (see "Signed zeros" in rules.py).
    Where the op's magnitude (the op on absolute values) passes the dtype's largest value, an
    honest implementation may overflow in its own order of operations (a float32 sum of
    values near 3e38): those entries are made inf in the runs, so they are undefined too.
    Piecewise-constant ops (Numerics.exact) read graph inputs, the same numbers everywhere:
    their inputs are not perturbed (a tie in argmax would flip otherwise).
    """
    roundoff = UNIT_ROUNDOFF[dtype]
    largest, tiny = LARGEST[dtype], TINY[dtype]
    if env is None:
        with np.errstate(all="ignore"):
            env = evaluate_all(case.graph, inputs, params)
    runs = []
    for run in range(NOISY_RUNS):
        rng = np.random.default_rng([case.seed % 2**32, run])
        zero = 0.0 if run % 2 == 0 else -0.0
        sign = (1.0 if run % 2 == 0 else -1.0) if directed else None

        def run_op(op, xs, computed, undefined_in, ps, attrs, exact, exact_xs):
            # Backward error: a stable op computes the exact result of slightly perturbed
            # inputs; this is what exposes rounding *inside* an op (layer_norm's mean of
            # equal values, amplified by 1 / sqrt(var + eps)).
            if not op.numerics.exact and not directed:
                xs = [x * (1.0 + ROUNDING_SLACK * roundoff * rng.uniform(-1.0, 1.0, np.shape(x))) for x in xs]
            out = np.asarray(op.reference(xs, ps, attrs), dtype=np.float64)
            # Rounding is relative to the magnitudes summed, not to a result that cancelled:
            # the op on absolute values gives that (sum |x_i| for sum, sum |x_i w_i| for matmul).
            magnitude = np.abs(np.asarray(op.reference([np.abs(x) for x in xs], {k: np.abs(v) for k, v in ps.items()}, attrs)))
            magnitude = operand_reach(op, xs, ps, attrs, out, magnitude, ROUNDING_SLACK * roundoff, largest)
            scale = np.maximum(np.abs(out), np.where(np.isfinite(magnitude), magnitude, 0.0))
            bound = ROUNDING_SLACK * roundoff * scale
            if directed:  # a sum of many terms, added in any order (_accumulation_reach)
                bound = bound + min(roundoff, UNIT_ROUNDOFF["float32"]) * _accumulation_reach(op, xs, ps, attrs) * scale
            noisy = perturb(out, bound * (rng.uniform(-1.0, 1.0, out.shape) if sign is None else sign))
            with np.errstate(invalid="ignore"):
                # A directed run keeps a computed zero on its side of 0 (exp of it is then 0 or inf), and
                # moves an underflowed one by its bound where that reaches past the subnormals: a float64
                # sum of 1e21, 65504 and -1e21 is 0 in numpy's order and 65504 in another (cosh: inf).
                if directed:
                    snap = (np.abs(out) < tiny) & (bound < tiny)
                else:
                    snap = (np.abs(out) <= bound) | (np.abs(out) < tiny)
                noisy = np.where(np.isfinite(out) & snap, zero, noisy)
                noisy = np.where(np.isfinite(magnitude) & (magnitude > largest), np.copysign(np.inf, out), noisy)
            # An op's own declared error (e.g. a rounded mean shared by a whole row) is systematic:
            # the same sign everywhere, so downstream sums do not cancel it (finished).
            return finished(noisy, op, xs, computed, undefined_in, ps, attrs, out, exact, dtype, run, directed, exact_xs)

        values, undefined = dict(inputs), {}
        with np.errstate(all="ignore"):
            for node in case.graph.nodes:
                values[node.name], undefined[node.name] = run_op(
                    get_op(node.op), [values[name] for name in node.inputs], [name not in inputs for name in node.inputs],
                    [undefined.get(name) for name in node.inputs], params.get(node.name, {}), node.attrs, env[node.name],
                    [env[name] for name in node.inputs])
        runs.append(model_outputs(values, undefined, case.graph.outputs, env))
    return runs


# Ops whose result accumulates many terms, each adding its rounding: a kernel may sum in any order,
# one term after the other too (torch's CPU vector_norm(ord=1) of float32 adds 4,161 nonzero terms
# so: 344 roundoffs off, where torch.sum is within 1; GPU campaign case 362).
ACCUMULATING_FAMILIES = ("reduce", "matmul", "conv")


def _accumulation_reach(op, xs: list, ps: dict, attrs: dict) -> np.ndarray | float:
    """How many more roundoffs (of float32, where the dtype is narrower: half-precision kernels
    accumulate in float32) of its magnitude a directed run moves `op`'s result: n - 1 for an entry
    that adds n nonzero terms, the worst case of adding them one after the other (Higham, Accuracy
    and Stability of Numerical Algorithms, 4.2); n is the op on the operands' nonzero patterns (the
    count for a sum, the nonzero products of a matmul or conv row; 1 for a max, which adds nothing).
    The random runs keep a few roundoffs: they set the tolerance, which this would widen for every
    long reduction; the directed ones only decide which entries are defined (cos of a float32 norm
    near 4000 may have either sign)."""
    if op.family not in ACCUMULATING_FAMILIES:
        return 0.0
    try:
        terms = np.abs(np.asarray(op.reference([(np.asarray(x) != 0).astype(np.float64) for x in xs],
                                                {k: (np.asarray(v) != 0).astype(np.float64) for k, v in ps.items()}, attrs), dtype=np.float64))
    except (ValueError, ArithmeticError):
        return 0.0
    return np.maximum(np.where(np.isfinite(terms), terms, 1.0), 1.0) - 1.0


def finished(noisy: np.ndarray, op, xs: list, computed: list[bool], undefined_in: list, ps: dict, attrs: dict,
             out: np.ndarray, exact: np.ndarray, dtype: str, run: int,
             directed: bool = False, exact_xs: list | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """A rounding run's result of `op` and the mask of its undefined entries (None: none), from
    `noisy` (its perturbed result, fast.perturbed_result), `out` (its result on the operands `xs`), `exact` (the
    float64 run's value of the node) and the masks of the operands' undefined entries
    (`undefined_in`, None each where none).

    The op's declared forward error (Numerics.forward_error) is added with the run's sign. Run 0 makes
    every computed zero an exact zero (rules' near-zero; not in a `directed` run, which keeps it on the
    side of 0 its direction puts it), as one within its rounding bound is (fast.perturbed_result):
    x - tanh(x) of a small x is 0 in float32; run 1 keeps it off by the error, so the allowance
    spans both. An entry is undefined
    in `dtype` (nan in the run, and in the mask) where a rule of rules.UNDEFINED_RULES says so: it
    depends on the sign of a computed zero, on an integer a computed operand may round onto, on an
    operand entry undefined upstream, on an operand the run moved a quarter of the op's period from
    its float64 value (`exact_xs`), or the op leaves it to convention (Numerics.undefined). The mask, not the nan, says so: a
    nan the math defines (sqrt(-1)) is required of a backend, an undefined entry never is."""
    error = None
    if op.numerics.forward_error is not None:
        error = np.asarray(op.numerics.forward_error(xs, ps, attrs))
        if exact_xs is not None:
            # Also at the float64 operands: the run's perturbation gives a constant row a variance
            # (1.5e-4 for two entries of 207417), which shrank the normalization error of its
            # x * scale + shift from 2.6e3 to 7 (GPU campaign case 560: torch's -2625.75 for 0).
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                error = np.fmax(error, np.asarray(op.numerics.forward_error(exact_xs, ps, attrs)))
        error = ROUNDING_SLACK * UNIT_ROUNDOFF[dtype] * error
    if op.numerics.intermediate_error is not None:
        rounded = np.asarray(op.numerics.intermediate_error(xs, ps, attrs, UNIT_ROUNDOFF[dtype]))
        error = rounded if error is None else error + rounded
    if error is not None:
        noisy = perturb(noisy, (1.0 if run % 2 == 0 else -1.0) * error)  # systematic: one sign a run
    # A computed zero is an exact zero in one run; the other keeps the error's size, which a zero
    # in both would hide (instance_norm of a constant row: 0, yet 0.05 off in a correct float32);
    # and a result within rounding of d's largest value overflows in the other (rules.VALUE_RULES).
    site = OpSite(op, xs, computed, undefined_in, ps, attrs, out, exact, dtype, exact_xs)
    for rule in VALUE_RULES:
        if rule.applies(run, directed):
            moved = rule.moved(site, noisy, error)
            if moved.any():
                noisy = np.where(moved, rule.value(site), noisy)
    masks = [rule.undefined(site) for rule in UNDEFINED_RULES]
    masks = [np.broadcast_to(mask, np.shape(out)) for mask in masks if mask is not None and mask.any()]
    if not masks:
        return noisy, None
    undefined = np.logical_or.reduce(masks)
    return np.where(undefined, np.nan, noisy), undefined


def model_outputs(values: dict, undefined: dict, names: list[str], env: dict) -> list[np.ndarray]:
    """A rounding run's outputs as float64 arrays, each undefined entry nan, or inf where the float64
    run's (`env`) is nan: non-finite, and of another class than r64's, so the entry is neither
    judged nor defined non-finite, even where only one run finds it undefined."""
    outputs = []
    for name in names:
        value = np.asarray(values[name], dtype=np.float64)
        if undefined.get(name) is not None:
            value = np.where(undefined[name], np.where(np.isnan(env[name]), np.inf, np.nan), value)
        outputs.append(value)
    return outputs
