"""jax.jit(log(power(x, y))) is finite for a negative base, where op-by-op jax (and the math) give nan.

XLA's algebraic simplifier rewrites log(pow(x, y)) into y * log(|x|) (the same rewrite as
jax-ml/jax#7701 for 0 ** 0), which is wrong for x < 0: pow(-2, 0.5) is nan, pow(-2, 1) is -2,
and the log of either is nan. Exit 1 while the bug is there, 0 once jit agrees with eager.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np


def f(x, y):
    return jnp.log(jnp.power(x, y))


x = np.array([-2.0, -2.0, 2.0], dtype=np.float32)
y = np.array([1.0, 0.5, 0.5], dtype=np.float32)
eager = np.asarray(f(x, y))
jitted = np.asarray(jax.jit(f)(x, y))
print("jax", jax.__version__, "| x", x, "y", y)
print("eager (op by op):", eager)  # [nan nan 0.3466]
print("jax.jit:         ", jitted)  # [0.6931 0.3466 0.3466] on jax 0.10.2 CPU
wrong = ~np.isclose(eager, jitted, equal_nan=True)
print("entries where jit differs:", np.flatnonzero(wrong).tolist())
sys.exit(1 if wrong.any() else 0)
