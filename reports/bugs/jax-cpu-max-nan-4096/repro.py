"""jax on CPU: max/min (and norm ord=inf) over 4,096 or more elements drop a nan.

numpy, torch and jax itself below 4,096 elements return nan; from 4,096 elements on, jnp.max,
jnp.min and jnp.linalg.norm(ord=inf) return the max/min of the other values, wherever the nan is,
in float32 and float64, eager and under jax.jit. Exits 1 while any of them drops the nan, 0 once fixed.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
failed = False
for n in (4095, 4096, 10_000):
    for dtype in (np.float32, np.float64):
        x = np.ones(n, dtype)
        x[n // 2] = np.nan
        results = {"max": jnp.max(x), "min": jnp.min(x), "jit(max)": jax.jit(jnp.max)(x),
                   "norm(ord=inf)": jnp.linalg.norm(x, ord=jnp.inf)}
        dropped = [name for name, value in results.items() if not np.isnan(float(value))]
        print(f"n={n:>6} {np.dtype(dtype).name}: numpy max {np.max(x)}; jax drops the nan in: {dropped or 'none'}")
        failed |= bool(dropped)

print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__ if hasattr(jax.lib, '__version__') else ''}, "
      f"device {jax.devices()[0].device_kind}, numpy {np.__version__}")
sys.exit(1 if failed else 0)
