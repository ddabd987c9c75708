"""torch.compile of torch.func.jvp: the outputs and J t of each output along fixed tangents of the
inputs and parameters (fuzzer/backends/forward_mode.py), traced whole by dynamo (functorch's forward
mode under AOTAutograd, then inductor), judged against float64 eager reverse mode, which shares
neither the tracing nor the forward-mode formulas."""

from __future__ import annotations

from fuzzer.backends.torch_compile_grad import TorchCompileGrad
from fuzzer.backends.torch_jvp import TorchForwardMode, forward_mode_function, jvp_reproducer_lines
from fuzzer.ir import Case, Graph
from fuzzer.reproducers.op_source import Source
from fuzzer.reproducers.program_source import torch_program


class TorchCompileJvp(TorchForwardMode, TorchCompileGrad):
    # Its outputs are torch-compile's forward: wrong the same way, torch-compile's finding.
    derives_from_kind = "torch-compile"
    kind = "torch-compile-jvp"
    in_sets = {"grad": {60: "cpu:float32"}}
    description = ("torch.compile of torch.func.jvp: outputs, then J t along fixed tangents of inputs and "
                   "parameters (vs float64 eager reverse mode)")

    def _traced_function(self, graph: Graph, impls: dict):
        # A lambda, not impls.__getitem__: dynamo 2.11 cannot trace that builtin inside torch.func.jvp (a graph break)
        return forward_mode_function(graph, lambda op: impls[op])

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        source = Source(imports=["import torch"])
        compiled = lambda program: f'torch.compile({program}, backend="inductor", fullgraph=True, dynamic={self.dynamic})'  # noqa: E731
        return torch_program(case, self, jvp_reproducer_lines(case, source, compiled), "program(*args)", source=source)


BACKENDS = [TorchCompileJvp]
