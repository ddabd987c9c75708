"""The parts of a complex value: real, imag, angle (real results), conj, and view_as_real (the cast to a
real tensor with a last dim of 2: real and imaginary part). Complex values only: float
backends never draw them (OpDef.float_dtypes), and a real value given to one makes the graph ill-typed
(torch.imag refuses it; torch's angle of a real -0.0 is 0 where jax's is pi)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fuzzer.ops._complex import complex_semantics
from fuzzer.ops.elementwise import unary


def _jax_view_as_real(x):
    import jax.numpy as jnp

    return jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1)


def _view_as_real():
    op = unary("view_as_real", lambda x: np.stack([np.real(x), np.imag(x)], axis=-1), "view_as_real", _jax_view_as_real,
               notes="a real tensor of shape (..., 2): the real and the imaginary part")
    return replace(op, infer=lambda attrs, shapes: (*shapes[0], 2), accepts=lambda shape: 1 <= len(shape) <= 4)


def _torch_conj(x):
    import torch

    return torch.conj_physical(x)  # torch.conj is lazy (a bit on the tensor): the physical one computes it


OPS = complex_semantics([replace(op, float_dtypes=False) for op in (
    unary("real", np.real, "real", "numpy.real", notes="the real part"),
    unary("imag", np.imag, "imag", "numpy.imag", notes="the imaginary part"),
    unary("angle", np.angle, "angle", "numpy.angle",
          notes="atan2(imag, real) in [-pi, pi]; the branch cut is the negative real axis, where a -0.0 imaginary "
                "part gives -pi"),
    unary("conj", np.conj, _torch_conj, "numpy.conj", notes="the complex conjugate"),
    _view_as_real(),
)], {"real": "real", "imag": "real", "angle": "real", "conj": "complex", "view_as_real": "real"})
