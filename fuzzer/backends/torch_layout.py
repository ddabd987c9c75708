"""torch-layout: torch eager with inputs and weights in non-default memory layouts.

Layout invariance: the same logical values stored channels_last, transposed or strided (a
stride-2 view whose gaps hold NaN, so a kernel that reads the gaps shows it) must give the
same outputs as contiguous ones. Every graph input and every weight of rank >= 2 is
relayouted (see `relayout` and fuzzer/drawing/layouts.py); the outputs are judged against the float64
reference like any backend's. Reproducers write each argument's layout, decided from its shape
when the script is written, as the torch expression that makes it (program_source.torch_tensors).

torch is imported lazily so that listing backends works without it.
"""

from __future__ import annotations

import math

import numpy as np

from fuzzer.backends.torch_eager import TorchEager
from fuzzer.drawing.layouts import CONTIGUOUS, apply_layout, layouts_for
from fuzzer.ir import Case, Graph, interpret
from fuzzer.reproducers.program_source import argument_names, torch_program

RELAYOUTS = ("channels_last", "transposed", "strided")  # in order of preference


def relayout_of(shape: tuple[int, ...]) -> str:
    """The layout `relayout` gives a tensor of `shape` (deterministic): the first of channels_last
    (rank 4), transposed (the last two dims > 1) and strided (a stride-2 view whose gaps hold NaN)
    that the shape allows; contiguous for a tensor of one element or none."""
    if math.prod(shape) <= 1:
        return CONTIGUOUS
    allowed = layouts_for(tuple(shape))
    return next(layout for layout in RELAYOUTS if layout in allowed)


def relayout(x):
    """The same logical values in another memory layout: `relayout_of` its shape (fuzzer/drawing/layouts.py)."""
    return apply_layout(x, relayout_of(tuple(x.shape)))


class TorchLayout(TorchEager):
    """torch eager, op by op, with every graph input and every weight of rank >= 2 in a
    non-default memory layout (see `relayout`): layout invariance against the reference.

    Exception, on CUDA only: the parameters of ops on cuDNN's RNN kernels (`cudnn_rnn`;
    gru/lstm: weights and h0/c0) stay contiguous. cuDNN's RNN requires it (see
    fuzzer/ops/rnn.py), while the CPU kernels accept both. Relayouting them would make every
    RNN graph a crash finding on CUDA; their *inputs* are still relayouted (cuDNN handles those)."""

    derives_from_kind = "torch-eager"
    kind = "torch-layout"
    in_sets = {"cpu": {100: "cpu:float32"}, "model": {70: "cpu:float32"}}
    description = "torch eager with channels_last / transposed / strided inputs and weights"
    devices = ("cpu", "cuda")
    dtypes = ("float32", "float64")

    def _keeps_params_contiguous(self, op_name: str) -> bool:
        return self._on_cudnn_rnn(op_name)

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        # As _execute: every input relayouted (not in its stored layout), and weights of rank >= 2.
        ops, inputs = {node.name: node.op for node in case.graph.nodes}, len(case.graph.inputs)
        layouts = {}
        for index, name in enumerate(argument_names(case)):
            shape = np.shape(case.arrays[name])
            if index < inputs or (len(shape) >= 2 and not self._keeps_params_contiguous(ops[name.split(".", 1)[0]])):
                layouts[index] = relayout_of(shape)
        return torch_program(case, self, [], "graph(*args)", layouts=layouts)

    def _execute(self, graph: Graph, inputs: dict, params: dict) -> list[np.ndarray]:
        import torch

        ops = {node.name: node.op for node in graph.nodes}

        def weight(node, array):
            tensor = self._to_torch(array)
            if tensor.dim() < 2 or self._keeps_params_contiguous(ops[node]):
                return tensor
            return relayout(tensor)

        with torch.no_grad(), self.precision_context(graph):
            outputs = interpret(
                graph,
                {k: relayout(self._to_torch(v)) for k, v in inputs.items()},
                {node: {k: weight(node, v) for k, v in ps.items()} for node, ps in params.items()},
                self.impl_for,
            )
        return [out.detach().to("cpu", torch.float64).numpy() for out in outputs]


BACKENDS = [TorchLayout]
