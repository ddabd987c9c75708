"""torch eager mode: each op's `torch` implementation, called node by node."""

from __future__ import annotations

import contextlib
import math
from typing import ClassVar

import numpy as np

from fuzzer.backends import Backend
from fuzzer.complex_dtypes import COMPLEX_DTYPES
from fuzzer.exact_dtypes import EXACT_DTYPES, result_array
from fuzzer.ir import Case, Graph, interpret
from fuzzer.ops import get_op
from fuzzer.programs.program import run_steps, scalar_reads
from fuzzer.reproducers.program_source import TORCH_VERSIONS, torch_program

# How far past its allowance the error of a graph on cuDNN's RNN kernels may go and still be
# cuDNN's precision (approximate activations: ~2^-11 relative) rather than a bug.
CUDNN_RNN_POLICY_LIMIT = 100.0


def cuda_unavailable_reason() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return "torch sees no CUDA device (torch.cuda.is_available() is False)."
    return None


def dynamo_marks():
    """torch._dynamo.decorators: mark_dynamic, mark_unbacked (torch 2.3 on)."""
    import torch._dynamo.decorators

    return torch._dynamo.decorators


class TorchEager(Backend):
    kind = "torch-eager"
    path = "torch/eager"
    in_sets = {"cpu": {10: "cpu:float32", 30: "cpu:float64"},
               "gpu": {10: "cuda:float32", 20: "cuda:float64", 30: "cuda:float16", 40: "cuda:bfloat16"}}
    family = "torch"
    devices = ("cpu", "cuda")
    dtypes = ("float32", "float64", "float16", "bfloat16", *EXACT_DTYPES, *COMPLEX_DTYPES)
    description = "torch eager, op by op"
    computes_every_node = True
    versions_source = TORCH_VERSIONS
    runs_programs = True
    # torch.compile's kinds mark a resized program's dim 0 before each step (ir.Resize); eager has no use for marks.
    marks_resized_dims: ClassVar[bool] = False

    def unavailable_reason(self) -> str | None:
        try:
            import torch  # noqa: F401 - availability check only: can this environment import torch?
        except ImportError as exc:
            return f"torch cannot be imported ({exc})."
        return cuda_unavailable_reason() if self.device == "cuda" else None

    def _to_torch(self, array):
        import torch

        return torch.from_numpy(np.ascontiguousarray(array)).to(device=self.device, dtype=getattr(torch, self.dtype))

    def _input_tensors(self, graph: Graph, inputs: dict) -> dict:
        """Graph inputs as tensors, each stored in the layout its spec names (fuzzer/drawing/layouts.py)."""
        from fuzzer.drawing.layouts import apply_layout

        return {spec.name: apply_layout(self._to_torch(inputs[spec.name]), spec.layout) for spec in graph.inputs}

    def has_precision_policy(self) -> bool:
        return self.device == "cuda"

    def _on_cudnn_rnn(self, op_name: str) -> bool:
        """Does torch run `op_name` on cuDNN's RNN kernels here (the op's `cudnn_rnn`, on CUDA)?"""
        return self.device == "cuda" and get_op(op_name).cudnn_rnn

    def _runs_cudnn_rnn(self, graph: Graph) -> bool:
        return any(self._on_cudnn_rnn(node.op) for node in graph.nodes)

    # The strict run of a graph with an RNN turns cuDNN off, unless this is set (same_kernels_strict_variant).
    keeps_cudnn = False

    def same_kernels_strict_variant(self, graph: Graph):
        if not self._runs_cudnn_rnn(graph):
            return None
        return self.variant("strict-cudnn")

    def variant(self, suffix: str):
        if suffix != "strict-cudnn":
            return super().variant(suffix)
        variant = self.strict_variant()
        variant.keeps_cudnn, variant.name = True, f"{self.name}+{suffix}"
        return variant

    @contextlib.contextmanager
    def precision_context(self, graph: Graph):
        """Strict: no TF32 in matmul or cuDNN conv/RNN, no reduced-precision fp16/bf16 reductions,
        and a graph with an RNN runs without cuDNN (torch's own CUDA RNN kernels): cuDNN's float32
        RNN is off by ~5e-6 in one GRU step even with TF32 off (torch's own kernel: 9e-8, on an H100)."""
        import torch

        if not self.strict:
            yield
            return
        matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
        saved = (matmul.allow_tf32, cudnn.allow_tf32, matmul.allow_fp16_reduced_precision_reduction,
                 matmul.allow_bf16_reduced_precision_reduction, cudnn.enabled, torch.get_float32_matmul_precision())
        matmul.allow_tf32 = cudnn.allow_tf32 = False
        matmul.allow_fp16_reduced_precision_reduction = matmul.allow_bf16_reduced_precision_reduction = False
        cudnn.enabled = self.keeps_cudnn or not self._runs_cudnn_rnn(graph)
        torch.set_float32_matmul_precision("highest")
        try:
            yield
        finally:
            (matmul.allow_tf32, cudnn.allow_tf32, matmul.allow_fp16_reduced_precision_reduction,
             matmul.allow_bf16_reduced_precision_reduction, cudnn.enabled) = saved[:5]
            torch.set_float32_matmul_precision(saved[5])

    def precision_policy_limit(self, graph: Graph) -> float:
        # Without cuDNN a graph's convolutions change kernels too, and an RNN bug of cuDNN's own (a GRU
        # that drops its hidden state errs by the state's size) must stay a finding: only an error of
        # the size an approximate activation makes is cuDNN's precision.
        return CUDNN_RNN_POLICY_LIMIT if self._runs_cudnn_rnn(graph) else math.inf

    def _graph_fn(self, graph: Graph):
        return lambda inputs, params: interpret(graph, inputs, params, scalar_reads(self.impl_for))

    def _take_rows(self, graph: Graph):
        """How a resized program's step takes an input's leading rows (ir.Resize): a view, written through, its dim 0
        marked as the case says (a backed or an unbacked symbol) where a compiler reads marks."""
        mark = getattr(dynamo_marks(), f"mark_{graph.resized.mark}") if graph.resized and self.marks_resized_dims else None

        def take(tensor, rows):
            view = tensor[:rows]
            if mark is not None:
                mark(view, 0)
            return view

        return take

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        return torch_program(case, self, [], "graph(*args)")

    def _execute(self, graph: Graph, inputs: dict, params: dict) -> list[np.ndarray]:
        import torch

        fn = self._graph_fn(graph)
        with torch.no_grad(), self.precision_context(graph):
            tensors = self._input_tensors(graph, inputs)
            if graph.steps:  # a program: the same input tensors every step, written in place (fuzzer/programs/program.py)
                state = {name: tensor.clone() for name, tensor in tensors.items()}
                outputs = run_steps(graph, lambda state: (fn(state, {}), state), state, lambda out: out.clone(),
                                    self._take_rows(graph))
            else:
                outputs = fn(tensors, {node: {k: self._to_torch(v) for k, v in ps.items()} for node, ps in params.items()})
        # A float result to float64 in torch: numpy has no bfloat16 (an integer or bool one stays exact).
        return [result_array((out.double() if out.is_floating_point() else out).detach().cpu().numpy(), self.dtype)
                for out in outputs]


BACKENDS = [TorchEager]
