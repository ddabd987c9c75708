"""torch.func.jvp in eager mode: forward-mode AD op by op. The outputs, then J t of each output along
fixed tangents of the graph inputs and parameters (fuzzer/backends/forward_mode.py), judged against
float64 eager reverse mode: each op's forward-mode formula against its backward's."""

from __future__ import annotations

import numpy as np

from fuzzer.backends.forward_mode import (FORWARD_AD_GAPS, torch_forward_mode, torch_functional_jvp, torch_jvp_by_reverse,
                                          torch_tangents)
from fuzzer.backends.gradients import GradientOutputs, torch_eager_gradients, undifferentiated_indices
from fuzzer.backends.torch_eager import TorchEager
from fuzzer.errors import documented_gaps
from fuzzer.ir import Case, Graph, interpret
from fuzzer.ops import get_op
from fuzzer.reproducers.op_source import Source
from fuzzer.reproducers.program_source import torch_program


def draws_forward_mode(op_name: str) -> bool:
    """Can a torch forward-mode kind draw this op? Its reference differentiates each backward once more
    (OpDef.second_order), and a custom autograd.Function node defines no jvp (its backward is its point)."""
    op = get_op(op_name)
    return op.second_order and not op.custom_gradient_of


def buffer_indices(graph: Graph, names: list[str]) -> list[int]:
    """Positions in `names` of the graph's buffers (running statistics): passed as they are, no tangent."""
    from fuzzer.running.model import buffer_weights  # imports torch: not at module level, where backends are named

    buffers = buffer_weights(graph)
    return [index for index, name in enumerate(names) if name in buffers]


def forward_mode_function(graph: Graph, impl_for, transform=torch_functional_jvp):
    """(inputs, params, tangents) -> the outputs, then J t of each output: `transform` (torch_functional_jvp,
    or second_order.torch_functional_hvp) of the graph over its inputs and parameters (buffers fixed),
    `tangents` those of the differentiated ones in order."""

    def forward_mode(inputs, params, tangents):
        names = [*inputs, *(f"{node}.{name}" for node, ps in params.items() for name in ps)]
        args = [*inputs.values(), *(value for ps in params.values() for value in ps.values())]

        def graph_fn(*values):
            by_name = dict(zip(names, values))
            weights = {node: {name: by_name[f"{node}.{name}"] for name in ps} for node, ps in params.items()}
            return interpret(graph, {name: by_name[name] for name in inputs}, weights, impl_for)

        return transform(graph_fn, args, buffer_indices(graph, names), tangents)

    return forward_mode


def jvp_reproducer_lines(case: Case, source: Source, wrap=lambda expression: expression) -> list[str]:
    """The reproducer's lines that make `program` from `graph` as the campaign's forward mode does (`wrap`:
    the compile around it), with the campaign's own torch_functional_jvp and tangents written out."""
    source.add_function(torch_functional_jvp)
    source.add_function(torch_tangents)
    constants = undifferentiated_indices(case)
    return [f"TANGENTS = torch_tangents([a for i, a in enumerate(args) if i not in {constants!r}])",
            "# the outputs, then J t of each output along TANGENTS (forward mode)",
            f"program = {wrap(f'lambda *args: torch_functional_jvp(graph, args, {constants!r}, TANGENTS)')}"]


class TorchForwardMode(GradientOutputs):
    """What the torch forward-mode kinds share: the ops they draw, their run of `_graph_fn(graph)` (a
    forward_mode_function, compiled or not), the reverse-mode reference, and forward mode's float64
    convention at singular points (forward_mode.py)."""

    transformation = "jvp"

    def supports(self, op_name: str) -> bool:
        return draws_forward_mode(op_name) and super().supports(op_name)

    def _execute(self, graph: Graph, inputs: dict, params: dict) -> list[np.ndarray]:
        import torch

        tensors = self._input_tensors(graph, inputs)
        weights = {node: {name: self._to_torch(value) for name, value in ps.items()} for node, ps in params.items()}
        args = [*tensors.values(), *(value for ps in weights.values() for value in ps.values())]
        constants = buffer_indices(graph, [*tensors, *(f"{node}.{name}" for node, ps in weights.items() for name in ps)])
        tangents = torch_tangents([arg for index, arg in enumerate(args) if index not in constants])
        with self.precision_context(graph), documented_gaps(FORWARD_AD_GAPS):
            results = self._graph_fn(graph)(tensors, weights, tangents)
        return [out.detach().to("cpu", torch.float64).numpy() for out in results]

    def eager_gradients(self, case: Case, dtype: str, noise=None, device: str = "cpu") -> list[np.ndarray]:
        return torch_eager_gradients(case, dtype, noise, parameters=True, device=device, differentiate=torch_jvp_by_reverse)

    def other_route(self, case: Case, dtype: str) -> list[np.ndarray]:
        return torch_eager_gradients(case, dtype, parameters=True, differentiate=torch_forward_mode)


class TorchJvp(TorchForwardMode, TorchEager):
    # Its outputs are torch-eager's: wrong the same way, torch-eager's finding.
    derives_from_kind = "torch-eager"
    kind = "torch-jvp"
    in_sets = {"grad": {50: "cpu:float32"}}
    description = ("torch.func.jvp, eager (forward-mode AD): outputs, then J t along fixed tangents of inputs and "
                   "parameters (vs float64 eager reverse mode)")
    dtypes = ("float32", "float64")
    computes_every_node = False  # its values are the tangents, which a node-by-node probe does not compute

    def _graph_fn(self, graph: Graph):
        return forward_mode_function(graph, self.impl_for)

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        source = Source(imports=["import torch"])
        return torch_program(case, self, jvp_reproducer_lines(case, source), "program(*args)", source=source)


BACKENDS = [TorchJvp]
