"""Test plugin: jax.jit whose tanh is 1% off only inside a compiled graph (when traced); run op by op
it is right, so only compiling a node alone can tell which op of a fused graph is wrong."""


def tanh_wrong_when_traced(xs, ps, attrs):
    import jax
    import jax.numpy as jnp

    y = jnp.tanh(xs[0])
    return y * 1.01 if isinstance(y, jax.core.Tracer) else y


def register(api):
    api.derive_backend("plugin-jit-tanh", base="jax-jit:cpu:float32", overrides={"tanh": tanh_wrong_when_traced})
