"""What the math leaves to convention for some derived ops, declared once as data with its reason.

A derived op declares no numerics (the generic models judge it), but its reference (numpy/scipy, or
torch's own float64 run) and the frameworks may each define a value the math does not fix: sign(nan)
is torch's 0 and jax's nan, sinc(inf) numpy's nan and jax's limit 0. Such an entry is undefined
(Numerics.undefined_operands marks the operand entries; the oracle leaves every result that depends on
one undefined, and what is computed from it). The rules are generic, by the
kind of point: a nan operand, an infinite one, or a point of the op's own (a pole, a branch point).
A jax twin that is another function (not only at such points) is dropped: jax backends then call the
op unsupported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


def at_nan(x: np.ndarray) -> np.ndarray:
    """The value at nan (0, nan, or what the op makes of nan)."""
    return np.isnan(x)


def at_infinity(x: np.ndarray) -> np.ndarray:
    """The value at +-inf: the limit, or nan."""
    return np.isinf(x)


def at_nonpositive_integer(x: np.ndarray) -> np.ndarray:
    """The value at 0, -1, -2, ...: the poles of the gamma family (inf of either sign, or nan)."""
    return (x <= 0) & (x == np.floor(x))


@dataclass(frozen=True)
class Rule:
    marks: Callable[[np.ndarray], np.ndarray]  # operand entries whose results are left to convention
    operands: tuple[int, ...] | None = None  # which operands it reads (None: every one)


@dataclass(frozen=True)
class Convention:
    why: str  # whose convention differs from whose, and where
    undefined: tuple[Rule, ...] = ()  # the results that depend on an operand entry a rule marks are undefined
    drop_jax: bool = False  # the jax twin is another function: jax backends call the op unsupported

    def rules_text(self) -> str:
        """'at_infinity, at_nonpositive_integer (operand 1)'."""
        return ", ".join(rule.marks.__name__ + ("" if rule.operands is None else f" (operand {', '.join(map(str, rule.operands))})")
                         for rule in self.undefined)

    def marks(self, xs) -> list[np.ndarray | None]:
        """Per operand, the entries a rule marks (None where none): the oracle leaves every result that
        depends on one undefined (Numerics.undefined_operands)."""
        marked = []
        with np.errstate(all="ignore"):
            for at, x in enumerate(xs):
                x = np.asarray(x, np.float64)
                masks = [rule.marks(x) for rule in self.undefined if rule.operands is None or at in rule.operands]
                found = np.logical_or.reduce(masks) if masks else None
                marked.append(found if found is not None and found.any() else None)
        return marked


CONVENTIONS: dict[str, Convention] = {
    "torch.sign": Convention(
        "sign(nan) is 0 in torch (its float64 run is this op's reference; pytorch#41245, the registry's "
        "torch-sign-nan) and nan in numpy and jax", (Rule(at_nan),)),
    "torch.sinc": Convention(
        "sinc(+-inf) is nan in torch and numpy (sin(pi x) / (pi x)) and the limit 0 in jax (from 0.12; nan in 0.10)", (Rule(at_infinity),)),
    "torch.special.zeta": Convention(
        "the Hurwitz zeta(x, q) at q = 0, -1, -2, ... (its poles) and at an infinite x or q is inf or nan by "
        "library: torch inf, jax nan at q's poles for x > 1 and inf for x <= 0, scipy 0 at q = inf, torch nan",
        (Rule(at_infinity), Rule(at_nonpositive_integer, operands=(1,)))),
    **dict.fromkeys(("torch.nn.functional.upsample_bilinear", "torch.nn.functional.interpolate", "torch.nn.functional.grid_sample",
                     "torch.grid_sampler_2d", "torch.grid_sampler_3d"), Convention(
        "a blend that reads a non-finite neighbour takes its class from how it is written (the hand-written "
        "interpolate's numerics say the same, fuzzer/ops/resize.py): eager skips a neighbour of weight 0 (inf at a corner "
        "with align_corners), inductor's lerp a + t (b - a) gives nan (inf - inf), a weighted sum nan (0 * inf)",
        (Rule(at_infinity), Rule(at_nan)))),
    "torch.unique": Convention(
        "jnp.unique's result size depends on the values, so jax.jit refuses it (it asks for a static size=): "
        "no twin a traced graph can call", drop_jax=True),
}


def convention(name: str) -> Convention | None:
    return CONVENTIONS.get(name)
