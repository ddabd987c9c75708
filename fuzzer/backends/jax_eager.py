"""jax eager (op by op dispatch). x64 is switched on once so float64 backends are real float64;
every impl casts explicitly, so float32 stays float32."""

from __future__ import annotations

import numpy as np

from fuzzer.backends import Backend, interpret
from fuzzer.ir import Graph


def import_jax():
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


class JaxEager(Backend):
    kind = "jax-eager"
    family = "jax"
    devices = ("cpu", "gpu")
    dtypes = ("float32", "float64", "bfloat16", "float16")
    description = "jax, op by op (no jit)"

    def unavailable_reason(self) -> str | None:
        try:
            jax = import_jax()
        except ImportError as exc:
            return f"jax cannot be imported ({exc})."
        try:
            jax.devices(self.device)
        except RuntimeError:
            return f"jax sees no '{self.device}' device (install jax with its CUDA plugin for gpu)."
        return None

    def _graph_fn(self, graph: Graph):
        return lambda inputs, params: interpret(graph, inputs, params, self.impl_for)

    def _execute(self, graph: Graph, inputs: dict, params: dict) -> list[np.ndarray]:
        jax = import_jax()
        device = jax.devices(self.device)[0]
        dtype = getattr(jax.numpy, self.dtype)
        put = lambda a: jax.device_put(np.asarray(a).astype(dtype), device)  # noqa: E731
        outputs = self._graph_fn(graph)(
            {k: put(v) for k, v in inputs.items()},
            {node: {k: put(v) for k, v in ps.items()} for node, ps in params.items()},
        )
        return [np.asarray(jax.device_get(out)).astype(np.float64) for out in outputs]


BACKENDS = [JaxEager]
