"""adaptive_avg_pool2d on jax-jit:gpu:float32 (jax.jit of the whole graph (XLA)), graph adaptive_avg_pool2d: worst at [0, 0, 0, 0]: -2.32830644e-10 where the reference is 1. Exit 1 while the bug is there, 0 once fixed, 2 where the device it needs is missing."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
jax.config.update("jax_enable_x64", True)  # float64 stays float64, as in the campaign


if jax.default_backend() != 'gpu':
    print('This reproducer needs a GPU, and jax sees none here.', file=sys.stderr)
    sys.exit(2)

def graph(x0):
    n0_index = jnp.arange(5)
    n0_start = n0_index * 1 // 5
    n0_end = ((n0_index + 1) * 1 + 5 - 1) // 5
    n0_taps = n0_start[:, None] + jnp.arange(2)[None, :]
    n0_x = jnp.sum(jnp.where((n0_taps < n0_end[:, None]).reshape((5, 2, 1)), jnp.take(x0, jnp.minimum(n0_taps, 0).reshape(-1), axis=2).reshape((1, 1, 5, 2, 1)), 0), axis=3) / (n0_end - n0_start).astype(x0.dtype).reshape((5, 1))
    n0_size = n0_x.shape[3]
    n0_longest = -(-n0_size // 2050) + 1
    n0_index_2 = jnp.arange(2050)
    n0_start_2 = n0_index_2 * n0_size // 2050
    n0_end_2 = ((n0_index_2 + 1) * n0_size + 2050 - 1) // 2050
    n0_taps_2 = n0_start_2[:, None] + jnp.arange(n0_longest)[None, :]
    return [jnp.sum(jnp.where((n0_taps_2 < n0_end_2[:, None]).reshape((2050, n0_longest) + (1,) * (n0_x.ndim - 1 - 3)), jnp.take(n0_x, jnp.minimum(n0_taps_2, n0_size - 1).reshape(-1), axis=3).reshape(n0_x.shape[:3] + (2050, n0_longest) + n0_x.shape[4:]), 0), axis=4) / (n0_end_2 - n0_start_2).astype(n0_x.dtype).reshape((2050,) + (1,) * (n0_x.ndim - 1 - 3))]


print(f'jax {jax.__version__}, jaxlib {jax.lib.__version__}, device {jax.devices()[0].device_kind}')
x0 = np.full((1, 1, 1, 1), 1.0, np.float32)
jax.config.update('jax_default_device', jax.devices('gpu')[0])  # where the campaign ran it, arguments or none
jax.config.update('jax_default_matmul_precision', 'highest')  # strict, as the campaign judges
outputs = [np.asarray(o, dtype=np.float64) for o in jax.jit(graph)(*[jax.device_put(a.astype(jax.numpy.float32), jax.devices('gpu')[0]) for a in (x0,)])]
expected = [np.asarray(o) for o in graph(*[jax.device_put(np.asarray(a, np.float64), jax.devices('cpu')[0]) for a in (x0,)])]  # float64 reference: jax on the CPU
for got, want, allowed in zip(outputs, expected, [6.47e-05]):  # allowed: the largest error of a correct float32 implementation here (the fuzzer's tolerance model)
    if got.shape != want.shape:
        raise SystemExit(f'MISMATCH: shape {got.shape}, float64 reference {want.shape}')
    wrong = ~np.isclose(got, want, rtol=0, atol=allowed, equal_nan=True)  # inf == inf, nan == nan
    if wrong.any():
        at = np.unravel_index(np.argmax(np.nan_to_num(abs(np.subtract(got, want, where=wrong, out=np.zeros(got.shape))), nan=np.inf)), got.shape)
        raise SystemExit(f'MISMATCH: {wrong.sum()} of {wrong.size} entries differ, worst at {[int(k) for k in at]}: got {float(got[at])}, float64 reference {float(want[at])} (allowed error {allowed:.3g})')
print('OK: every entry within the allowed error of the float64 reference')
