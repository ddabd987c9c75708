"""An op whose value the math leaves to convention on most entries (its `undefined` declaration):
the reference gives the input itself, the frameworks nan wherever the input is not above 1. The
oracle skips those entries, so its outputs are mostly not judged: the judged-share meter must say
so (tests/test_judged_share.py).

It comes in through the plugin API's add_op, like any plugin's op."""

from fuzzer.ops.elementwise import unary
from fuzzer.ops.numerics import Numerics


def _torch(x):
    import torch

    return torch.where(x > 1, x, torch.nan)


def _jax(x):
    import jax.numpy as jnp

    return jnp.where(x > 1, x, jnp.nan)


CONVENTIONAL = unary("conventional", lambda x: x.copy(), _torch, _jax,
                     numerics=Numerics(undefined=lambda x: ~(x > 1), why={"undefined": "nan below 1 by convention"}),
                     notes="the input above 1; left to convention elsewhere")


def register(api):
    api.add_op(CONVENTIONAL)
