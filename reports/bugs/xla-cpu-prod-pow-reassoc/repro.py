"""jax.jit(prod(x ** c)) on the CPU computes pow(x0 * x1, c) for each pair of elements: finite for a
negative base to a non-integer power, where eager jax (and the math) give nan.

The optimized HLO still holds power then reduce(multiply); XLA_FLAGS=--xla_backend_optimization_level=0
gives nan, so the rewrite is in the LLVM pipeline (pow(a, c) * pow(b, c) -> pow(a * b, c), a fold that
needs reassociation, which XLA:CPU allows in reductions). Exit 1 while the bug is there, 0 once fixed.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

x = jnp.array([-1.0, -2.0], jnp.float32)
eager = float(jnp.prod(x ** 2.5))                     # nan: (-1) ** 2.5 is nan
jitted = float(jax.jit(lambda x: jnp.prod(x ** 2.5))(x))  # 5.656854 = (-1 * -2) ** 2.5 on jax 0.12.0.1
print(f"jax {jax.__version__} {jax.default_backend()}: eager {eager}, jit {jitted}")
sys.exit(1 if np.isnan(eager) and not np.isnan(jitted) else 0)
