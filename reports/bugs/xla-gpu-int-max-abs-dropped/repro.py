"""jax.jit on an NVIDIA GPU: maximum(abs(a), b) of int32 comes out as maximum(a, b), the abs dropped
(eager is right; float32 and int8 are right). Exits 1 while the jitted result differs; 2 without a GPU."""
import sys

import jax
import jax.numpy as jnp
import numpy as np

if jax.devices()[0].platform != "gpu":
    print("This reproducer needs jax with a CUDA GPU.", file=sys.stderr)
    sys.exit(2)
print("jax", jax.__version__, jax.devices()[0].device_kind)
f = lambda a, b: jnp.maximum(jnp.abs(a), b)  # noqa: E731
a, b = np.array([-1, -5, 3, 0], np.int32), np.zeros(4, np.int32)
eager, jitted = np.asarray(f(a, b)), np.asarray(jax.jit(f)(a, b))
print(f"int32: eager {eager.tolist()}  jit {jitted.tolist()}")  # H200, jax 0.11.2: eager [1, 5, 3, 0]  jit [0, 0, 3, 0]
sys.exit(0 if np.array_equal(eager, jitted) else 1)
