"""Regimes: the regions of input space a case is drawn from, declared as data.

Real kernel bugs hide where code paths switch: vectorized loops with scalar tails and
blocked or multi-threaded reductions above size thresholds, batch sizes where a library
picks another algorithm, runs of size-1 dims that change broadcasting and squeeze rules,
magnitudes where approximations change branch (|x| < 1e-6) or overflow, special values
the math defines (relu(-inf) = 0, log(0) = -inf), and memory layouts a kernel must not
confuse with logical order. The `small` regime (small dims, O(1) values, contiguous) is
most of a campaign because it is cheap and compiled code is reused; each other regime
takes a stated share of cases (REGIMES' weights are percentages).

A case records its regime in its graph (`Graph.regime`), so `fuzz show`, `fuzz stats`
and the report count coverage and findings per regime, and the shrinker keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuzzer.errors import UserError

# How an input array is filled (fuzzer/arrays.py). "normal" dominates the small regime;
# the others are the edges real kernels get wrong.
SMALL_PROFILES = ("normal", "normal", "normal", "normal", "uniform", "small-ints", "zeros", "constant", "tiny", "large")
# log-uniform magnitudes from 1e-8 to 1e4 with random signs, and narrow bands at both ends.
MAGNITUDE_PROFILES = ("log-uniform", "log-uniform", "minuscule", "huge")
# Exact edge values of common ops and values the math defines results for.
SPECIAL_PROFILES = ("special", "special", "edge", "subnormal")

# Sizes where kernels switch paths: just off powers of two (vector tails, tiles, blocks).
LARGE_DIMS = (127, 129, 255, 257, 511, 513, 1023, 1025, 2047, 2049, 4095, 4097, 8193, 32769)
BATCH_THRESHOLD_DIMS = (31, 33, 63, 65, 127, 129, 255, 257)


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
    layouts: bool = False  # inputs get non-default torch memory layouts (fuzzer/layouts.py)


REGIMES = (
    Regime("small", 55, "small dims from a fixed set, O(1) values, contiguous inputs"),
    Regime("large-op", 8, "one input dim just off a power of two (127 .. 32769), up to 1e6 elements a tensor",
           max_elements=1_000_000, large_dims=LARGE_DIMS),
    Regime("batch-threshold", 7, "a leading (batch) dim above 32/64/128/256", max_elements=200_000,
           leading_dims=BATCH_THRESHOLD_DIMS),
    Regime("size-1", 7, "runs of size-1 dims", size_one_share=0.6),
    Regime("magnitudes", 8, "log-uniform magnitudes 1e-8 .. 1e4, and narrow bands at both ends",
           value_profiles=MAGNITUDE_PROFILES),
    Regime("special-values", 8, "a few inf, -inf, nan, -0.0, 0, +-1, overflow edges and subnormals",
           value_profiles=SPECIAL_PROFILES),
    Regime("layout", 7, "non-contiguous, transposed, expanded (stride 0) and channels_last inputs",
           layouts=True),
)
BY_NAME = {regime.name: regime for regime in REGIMES}
DEFAULT = BY_NAME["small"]
assert sum(r.weight for r in REGIMES) == 100, "regime weights are percentages"


def get_regime(name: str) -> Regime:
    """The regime a case names; an unknown or empty name is the small regime (older cases)."""
    return BY_NAME.get(name, DEFAULT)


def parse_regime_list(text: str | None) -> tuple[Regime, ...]:
    """'small,large-op' -> those regimes; None or '' or 'all' -> every regime."""
    if not text or text == "all":
        return REGIMES
    chosen = []
    for name in (n.strip() for n in text.split(",") if n.strip()):
        if name not in BY_NAME:
            raise UserError(f"Unknown regime '{name}'; choose from {', '.join(BY_NAME)}.")
        chosen.append(BY_NAME[name])
    return tuple(chosen)
