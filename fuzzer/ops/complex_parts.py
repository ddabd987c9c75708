"""The parts of a complex value: real, imag, angle (real results) and conj. Complex values only: float
backends never draw them (OpDef.float_dtypes), and a real value given to one makes the graph ill-typed
(torch.imag refuses it; torch's angle of a real -0.0 is 0 where jax's is pi)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fuzzer.ops._complex import complex_semantics
from fuzzer.ops.elementwise import unary


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
)], {"real": "real", "imag": "real", "angle": "real", "conj": "complex"})
