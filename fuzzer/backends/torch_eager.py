"""torch eager mode: each op's `torch` implementation, called node by node."""

from __future__ import annotations

import numpy as np

from fuzzer.backends import Backend, interpret
from fuzzer.ir import Graph


def cuda_unavailable_reason() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return "torch sees no CUDA device (torch.cuda.is_available() is False)."
    return None


class TorchEager(Backend):
    kind = "torch-eager"
    family = "torch"
    devices = ("cpu", "cuda")
    dtypes = ("float32", "float64", "float16", "bfloat16")
    description = "torch eager, op by op"

    def unavailable_reason(self) -> str | None:
        try:
            import torch  # noqa: F401
        except ImportError as exc:
            return f"torch cannot be imported ({exc})."
        return cuda_unavailable_reason() if self.device == "cuda" else None

    def _to_torch(self, array):
        import torch

        return torch.from_numpy(np.ascontiguousarray(array)).to(device=self.device, dtype=getattr(torch, self.dtype))

    def _graph_fn(self, graph: Graph):
        return lambda inputs, params: interpret(graph, inputs, params, self.impl_for)

    def _execute(self, graph: Graph, inputs: dict, params: dict) -> list[np.ndarray]:
        import torch

        fn = self._graph_fn(graph)
        with torch.no_grad():
            outputs = fn(
                {k: self._to_torch(v) for k, v in inputs.items()},
                {node: {k: self._to_torch(v) for k, v in ps.items()} for node, ps in params.items()},
            )
        return [out.detach().to("cpu", torch.float64).numpy() for out in outputs]


BACKENDS = [TorchEager]
