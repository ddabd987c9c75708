"""An op whose value the math leaves to convention on most entries (its `undefined` declaration):
the reference gives the input itself, the frameworks nan wherever the input is not above 1. The
oracle skips those entries, so its outputs are mostly not judged: the judged-share meter must say
so (tests/test_judged_share.py).

Plugins have no call for ops; this one adds its OpDef to the op registry, as fuzzer/ops/ collects
its modules' OPS."""

from dataclasses import replace

from fuzzer.ops import registry
from fuzzer.ops.elementwise import unary


def _torch(x):
    import torch

    return torch.where(x > 1, x, torch.nan)


def _jax(x):
    import jax.numpy as jnp

    return jnp.where(x > 1, x, jnp.nan)


CONVENTIONAL = replace(unary("conventional", lambda x: x.copy(), _torch, _jax, undefined=lambda x: ~(x > 1),
                             notes="the input above 1; left to convention elsewhere"), family="plugin")


def register(api):
    registry().setdefault(CONVENTIONAL.name, CONVENTIONAL)
