"""Test plugin: jax.jit whose sum is off by 3e-5 of its magnitudes only inside a compiled graph (when
traced), as an accumulation in a narrower type would be: within the float32 tolerance of a lone sum
(about a third of its allowance), but hundreds of times eager's error on the same case."""


def sum_sloppy_when_traced(xs, ps, attrs):
    import jax
    import jax.numpy as jnp

    from fuzzer.ops import get_op

    y = get_op("sum").jax(xs, ps, attrs)
    if not isinstance(y, jax.core.Tracer):
        return y
    return y + jnp.sign(y) * 3e-5 * jnp.maximum(jnp.abs(y), jnp.max(jnp.abs(xs[0])))


def register(api):
    api.derive_backend("plugin-jit-sloppy-sum", base="jax-jit:cpu:float32", overrides={"sum": sum_sloppy_when_traced})
