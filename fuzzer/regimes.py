"""Regimes: the regions of input space a case is drawn from, declared as data.

Real kernel bugs hide where code paths switch: vectorized loops with scalar tails and
blocked or multi-threaded reductions above size thresholds, batch sizes where a library
picks another algorithm, runs of size-1 dims that change broadcasting and squeeze rules,
magnitudes where approximations change branch (|x| < 1e-6) or overflow, special values
the math defines (relu(-inf) = 0, log(0) = -inf), and memory layouts a kernel must not
confuse with logical order. The `small` regime (small dims, O(1) values, contiguous) is
most of a campaign because it is cheap and compiled code is reused; each other regime
takes a stated share of cases (REGIMES' weights are percentages).

Bugs also sit where two regions meet: a special value inside a large reduction, a tiny
magnitude through a saturating op, a layout on a large tensor. So a share of cases is drawn
from a composition of two regimes that set different features (`compose`), named "a+b"
(e.g. "large-op+special-values"); COMPOSITIONS lists those drawn and their shares.

A case records its regime in its graph (`Graph.regime`), so `fuzz show`, `fuzz stats`
and the report count coverage and findings per regime, and the shrinker keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from fuzzer.errors import UserError, did_you_mean

# How an input array is filled (fuzzer/arrays.py). "normal" dominates the small regime;
# the others are the edges real kernels get wrong.
SMALL_PROFILES = ("normal", "normal", "normal", "normal", "uniform", "small-ints", "zeros", "constant", "tiny", "large")
# log-uniform magnitudes from 1e-8 to 1e4 with random signs, and narrow bands at both ends.
MAGNITUDE_PROFILES = ("log-uniform", "log-uniform", "minuscule", "huge")
# Exact edge values of common ops and values the math defines results for.
# "special-rows" fills whole rows (one along each axis) with one value: an all -inf softmax row.
SPECIAL_PROFILES = ("special", "special", "edge", "subnormal", "special-rows")

# Sizes where kernels switch paths: just off powers of two (vector tails, tiles, blocks).
LARGE_DIMS = (127, 129, 255, 257, 511, 513, 1023, 1025, 2047, 2049, 4095, 4097, 8193, 32769)
BATCH_THRESHOLD_DIMS = (31, 33, 63, 65, 127, 129, 255, 257)
# Every dim of a contraction (M, K, N of a matmul; channels and output positions of a conv) from
# these: the library rewrites and kernels chosen above a work size (blocked GEMM, im2col) switch on.
CONTRACTION_DIMS = (128, 129, 255, 257, 384, 511, 512)


@dataclass(frozen=True)
class Regime:
    name: str
    weight: int  # percent of a campaign's cases
    description: str
    max_elements: int = 20_000  # per tensor, inputs and intermediates
    value_profiles: tuple[str, ...] = SMALL_PROFILES
    large_dims: tuple[int, ...] = ()  # one dim of an input is drawn from these, when non-empty
    leading_dims: tuple[int, ...] = ()  # the first dim of an input is drawn from these
    size_one_share: float = 0.0  # probability that a dim is 1 (beyond DIMS's own share)
    layouts: bool = False  # inputs get non-default torch memory layouts (fuzzer/drawing/layouts.py)
    contraction_dims: tuple[int, ...] = ()  # the graph starts with a contraction whose every dim is one of these
    ladder: bool = False  # the graph starts with an op whose reduction or contraction axis is a rung (fuzzer/drawing/ladder.py)
    # A ladder graph may put its rung on jax-vmap's batch instead (Graph.vmapped): off in a campaign
    # without jax-vmap, where no backend would batch it (pipeline.campaign_regimes).
    vmapped: bool = True
    programs: bool = False  # draws programs (fuzzer/programs/program.py) instead of graphs
    branch_points: bool = False  # inputs an op reads first hold its branch points (fuzzer/drawing/branch_points.py)
    motifs: bool = False  # a compiler's rewrite pattern starts the graph, or continues its big contraction (fuzzer/drawing/motifs.py)


def compose(first: Regime, second: Regime, weight: int = 0) -> Regime:
    """One regime with the features of both: each feature from the part that sets it (the first's
    where both do), and the larger size bound."""
    features = {}
    for feature in fields(Regime)[3:]:  # after name, weight and description
        mine = getattr(first, feature.name)
        features[feature.name] = getattr(second, feature.name) if mine == feature.default else mine
    features["max_elements"] = max(first.max_elements, second.max_elements)
    return Regime(f"{first.name}+{second.name}", weight, f"{first.name} and {second.name} together", **features)


SINGLE_REGIMES = (
    Regime("small", 48, "small dims from a fixed set, O(1) values, contiguous inputs"),
    Regime("large-op", 6, "one input dim just off a power of two (127 .. 32769), up to 1e6 elements a tensor",
           max_elements=1_000_000, large_dims=LARGE_DIMS),
    Regime("batch-threshold", 5, "a leading (batch) dim above 32/64/128/256", max_elements=200_000,
           leading_dims=BATCH_THRESHOLD_DIMS),
    Regime("size-1", 5, "runs of size-1 dims", size_one_share=0.6),
    Regime("magnitudes", 6, "log-uniform magnitudes 1e-8 .. 1e4, and narrow bands at both ends",
           value_profiles=MAGNITUDE_PROFILES),
    Regime("special-values", 6, "a few inf, -inf, nan, -0.0, 0, +-1, overflow edges, subnormals, whole rows of -inf or one value",
           value_profiles=SPECIAL_PROFILES),
    Regime("layout", 5, "non-contiguous, transposed, expanded (stride 0) and channels_last inputs",
           layouts=True),
    # A 512 x 512 matrix at most: the float64 reference of a 512^3 product takes ~0.05 .. 0.1 s.
    Regime("big-contraction", 3, "a matmul, linear, bmm, einsum or conv with every dim 128 .. 512, in half its graphs "
           "followed by a compiler's rewrite pattern (fuzzer/drawing/motifs.py)", max_elements=512 * 512,
           contraction_dims=CONTRACTION_DIMS, motifs=True),
    # 2^20 elements a tensor: a rung of 2^17 + 1 keeps 7 elements on the other axes of its operand.
    Regime("ladder", 3, "one reduction, contraction or vmapped axis of 2^k - 1, 2^k or 2^k + 1 elements (k 5 .. 17), "
           "the other axes small", max_elements=2**20, ladder=True),
    Regime("branch-points", 3, "an op's own branch points (thresholds, ties, overflow boundaries, poles), exact and one "
           "ulp either side, in the inputs it reads", branch_points=True),
)
_SINGLE = {regime.name: regime for regime in SINGLE_REGIMES}
# Pairs whose features combine (sizes or layouts from the first, values or layouts from the
# second), with their shares: 10 percent in all, taken from the single regimes but small.
COMPOSITIONS = (
    ("large-op", "special-values", 2),  # a special value inside a large reduction
    ("large-op", "magnitudes", 1),
    ("large-op", "layout", 1),  # a layout on a large tensor
    ("batch-threshold", "special-values", 1),
    ("batch-threshold", "magnitudes", 1),
    ("size-1", "magnitudes", 1),  # a tiny magnitude through a broadcast saturating op
    ("layout", "special-values", 1),
    ("big-contraction", "special-values", 1),
    ("big-contraction", "magnitudes", 1),
)
REGIMES = SINGLE_REGIMES + tuple(compose(_SINGLE[a], _SINGLE[b], weight) for a, b, weight in COMPOSITIONS)
# A campaign whose every backend is an integer or bool one (fuzzer/exact_dtypes.py) draws from these
# instead (weights: percent of its cases): int64 values stored exactly, cast by each backend.
INTEGERS = Regime("integers", 85, "integer values: small (-8 .. 8), and a few dtype edges (0, -1, each dtype's min "
                  "and max, +-2^k)", value_profiles=("integers", "integers", "integer-edges"))
_SINGLE[INTEGERS.name] = INTEGERS
INTEGER_REGIMES = (INTEGERS, *(compose(_SINGLE[name], INTEGERS, 5) for name in ("large-op", "size-1", "layout")))
# A campaign whose every backend is a complex one (fuzzer/complex_dtypes.py) draws from these: each
# component of a value from a float profile (plain, magnitudes, special values), stored as complex128.
COMPLEX = Regime("complex", 85, "complex values: the real and imaginary parts each from the small, magnitude or special-value "
                 "profiles", value_profiles=tuple(f"complex:{profile}" for profile in (
                     *SMALL_PROFILES, "log-uniform", "huge", "minuscule", "special", "special", "edge")))
_SINGLE[COMPLEX.name] = COMPLEX
COMPLEX_REGIMES = (COMPLEX, *(compose(_SINGLE[name], COMPLEX, 5) for name in ("large-op", "size-1", "layout")))
# Programs: in-place writes, views and steps (fuzzer/programs/generate.py); `--regimes programs` draws only them.
PROGRAMS = Regime("programs", 3, "programs: views written through and read after the writes, 2 to 4 steps with carried "
                  "state (where a backend runs programs)", programs=True)
# Motifs (fuzzer/drawing/motifs.py): a compiler's rewrite pattern (matmul + column bias, conv -> batch_norm -> relu) of
# small dims starts the graph; `--regimes motifs` draws only them, and a list without it none but big-contraction's.
MOTIFS = Regime("motifs", 4, "a compiler's rewrite pattern (fuzzer/drawing/motifs.py: addmm with a row or column bias, "
                "conv -> batch_norm -> relu, the attention patterns) starts the graph", motifs=True)
# A float campaign's default mix: the graph regimes and programs, which pipeline.campaign_regimes leaves out
# where no backend runs programs or --ops or a plugin's backend narrows the campaign. Motifs and programs come
# right after small, whose share they take, so that a seed draws the same regime as before wherever it draws neither.
MIX = (replace(REGIMES[0], weight=REGIMES[0].weight - MOTIFS.weight - PROGRAMS.weight), MOTIFS, PROGRAMS, *REGIMES[1:])
BY_NAME = {regime.name: regime for regime in (*REGIMES, MOTIFS, PROGRAMS, *INTEGER_REGIMES, *COMPLEX_REGIMES)}  # small at its own share
DEFAULT = BY_NAME["small"]
assert sum(r.weight for r in REGIMES) == sum(r.weight for r in MIX) == sum(r.weight for r in INTEGER_REGIMES) == sum(r.weight for r in COMPLEX_REGIMES) == 100, \
    "regime weights are percentages"


def get_regime(name: str) -> Regime:
    """The regime a case names: one of REGIMES, any composition "a+b" of two single regimes (a
    stored case outlives a change of COMPOSITIONS), or the small regime for an unknown or empty
    name (older cases)."""
    if name in BY_NAME:
        return BY_NAME[name]
    parts = name.split("+")
    if len(parts) == 2 and all(part in _SINGLE for part in parts):
        return compose(_SINGLE[parts[0]], _SINGLE[parts[1]])
    return DEFAULT


def parse_regime_list(text: str | None, integers: bool = False, complex_values: bool = False) -> tuple[Regime, ...]:
    """'small,large-op+layout' -> those regimes; None or '' or 'all' -> the default mix (compositions and
    programs too), or with `integers` (only integer and bool backends) every integer regime, with
    `complex_values` (only complex backends) every complex one."""
    if not text or text == "all":
        return INTEGER_REGIMES if integers else COMPLEX_REGIMES if complex_values else MIX
    chosen = []
    for name in (n.strip() for n in text.split(",") if n.strip()):
        if name not in BY_NAME:
            raise UserError(f"Unknown regime '{name}'{did_you_mean(name, BY_NAME)}; choose from {', '.join(BY_NAME)}.")
        chosen.append(BY_NAME[name])
    return tuple(chosen)
