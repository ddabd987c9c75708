"""jax.jit(softmax(x * c)) is nan for a row with a huge finite negative entry; eager jax is right.

x = [-3.556e37, -9.82e18], c = 1/3: eager (and torch, numpy) give [0, 1]; the jitted function gives
[nan, nan]. softmax of the already-scaled row under jit is right, so the fusion of the scalar multiply
into softmax is what breaks. Exit 1 while the bug is there, 0 once jit matches eager.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)


def f(x):
    return jax.nn.softmax(x * (1.0 / 3.0), axis=-1)


print("jax", jax.__version__)
failed = False
for dtype in (np.float32, np.float64):
    x = np.array([[-3.55611944e37, -9.82406163e18]], dtype=dtype)
    eager, jitted = np.asarray(f(x)), np.asarray(jax.jit(f)(x))
    print(f"{np.dtype(dtype).name}: eager {eager.tolist()}  jit {jitted.tolist()}")
    failed |= not np.allclose(eager, jitted, equal_nan=True)
sys.exit(1 if failed else 0)
