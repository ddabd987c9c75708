"""jnp.sinh of a complex64 x+iy with a small |x| loses its real part, sinh(x)cos(y), to cancellation, on the CPU
and the GPU: XLA lowers complex sinh to exp(z + log 1/2) - exp(-z + log 1/2), with no expm1. cosh's imaginary
part, sinh(x)sin(y), likewise; float32 sinh is right. Exits 1 while an error is over 100 float32 roundoffs."""
import sys

import jax
import jax.numpy as jnp
import numpy as np

print("jax", jax.__version__, "numpy", np.__version__, [str(d) for d in jax.devices()])
zs = np.array([5.910924301133491e-07 + 1.4289063301475835e-06j, 3e-07, 1e-04, 1e-03 + 1e-03j, 1e-08 + 0.5j], np.complex64)
roundoff, worst = np.finfo(np.float32).eps / 2, 0.0
for device in jax.devices("cpu")[:1] + [d for d in jax.devices() if d.platform != "cpu"][:1]:
    for name, part in (("sinh", np.real), ("cosh", np.imag)):
        got = part(np.asarray(getattr(jnp, name)(jax.device_put(zs, device)))).astype(np.float64)
        exact = part(getattr(np, name)(zs.astype(np.complex128)))  # numpy's csinh/ccosh use real sinh: right
        errors = np.abs(got - exact) / np.maximum(np.abs(exact), np.finfo(np.float64).tiny) / roundoff
        worst = max(worst, errors.max())
        for z, g, e, err in zip(zs, got, exact, errors):
            if e == 0:  # cosh(x + 0j) is real
                continue
            print(f"{device.platform} {name}({complex(z):.7g}).{part.__name__}: {g:.9g}  exact {e:.9g}  "
                  f"({err:,.0f} roundoffs)")
print(f"worst: {worst:,.0f} float32 roundoffs")
sys.exit(1 if worst > 100 else 0)
