"""jax.jit on the CPU: softmax of a row that is all nan (nan - x) returns finite numbers, different on
each call, where jax eager (and the math) give nan. Seen on jax 0.10.2; jax 0.12.0.1 gives nan.
Exits 1 while any of eight jitted calls returns a finite entry."""
import sys

import jax
import jax.numpy as jnp
import numpy as np

print("jax", jax.__version__, "jaxlib", jax.lib.__version__)
x = np.zeros((1, 1, 3), np.float32)
f = jax.jit(lambda x: jax.nn.softmax(jnp.nan - x, axis=2))
print("eager", np.asarray(jax.nn.softmax(jnp.nan - x, axis=2)).ravel())
calls = [np.asarray(f(x)).ravel() for _ in range(8)]
for out in calls:
    print("jit  ", out)
sys.exit(1 if any(np.isfinite(out).any() for out in calls) else 0)
