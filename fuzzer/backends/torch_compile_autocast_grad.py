"""torch.compile of a mixed-precision training step: the graph's forward in a `torch.autocast` region
(bfloat16 on the CPU, float16 on CUDA), its backward outside it as the autocast recipe runs it, float32
inputs and parameters; the outputs, then the gradients, as torch-compile-grad returns them.

Autocast picks a dtype per op (its lower-precision list: matmul, linear, conv, ...; float32 for a
few; the others in their inputs' dtype), so no one dtype's tolerance model is honest for the whole
graph: every output, forward ones too, is judged by models of its own (`own_reference`): float64
eager autograd as the reference; as honest runs, eager autograd under the same autocast region (each
op in the dtype autocast chose, by construction) and float64 runs whose every op's output is moved
by the roundoff of the dtype autocast chose for that op, read from an eager autocast run of the graph
(`autocast_choices`), not from a list of ours. The floor is float32's: an op autocast leaves in float32
(or that a nested `autocast(enabled=False)` region keeps there, ops/autocast_region.py) is held to float32.
"""

from __future__ import annotations

import numpy as np

from fuzzer import oracle
from fuzzer.backends.gradients import torch_eager_gradients, torch_outputs_and_gradients, value_variants
from fuzzer.backends.torch_compile_grad import TorchCompileGrad
from fuzzer.ir import Case, Graph, interpret, split_arrays
from fuzzer.ops import get_op

LOWER_PRECISION = {"cpu": "bfloat16", "cuda": "float16"}


def under_autocast(fn, device: str, dtype: str):
    """`fn` with its body run in a torch.autocast region of `dtype`."""
    import torch

    def autocast_region(*args, **kwargs):
        with torch.autocast(device, dtype=getattr(torch, dtype)):
            return fn(*args, **kwargs)

    return autocast_region


def autocast_choices(case: Case, device: str, dtype: str) -> dict[str, str]:
    """Each op of the graph -> the dtype autocast ran it in (its output's, in an eager forward under
    autocast on float32 tensors); the lower precision where its nodes differ."""
    import torch

    inputs, params = split_arrays(case)
    tensor = lambda array: torch.as_tensor(np.asarray(array, dtype=np.float32), device=device)  # noqa: E731
    run = under_autocast(interpret, device, dtype)
    with torch.no_grad():
        values = run(case.graph, {name: tensor(value) for name, value in inputs.items()},
                     {node: {name: tensor(value) for name, value in ps.items()} for node, ps in params.items()},
                     lambda op: get_op(get_op(op).custom_gradient_of or op).impl("torch"), keep_all=True)
    choices = {node.op: "float32" for node in case.graph.nodes}
    for node in case.graph.nodes:
        if values[node.name].dtype == getattr(torch, dtype):
            choices[node.op] = dtype
    return choices


class TorchCompileAutocastGrad(TorchCompileGrad):
    # Computed exactly as torch-compile-grad computes it (no op autocast lowers), wrong the same way: its finding.
    derives_from_kind = "torch-compile-grad"
    kind = "torch-compile-autocast-grad"
    transformation = "autocast-vjp"
    in_sets = {}
    description = ("torch.compile of the forward in a torch.autocast region (bfloat16 on the CPU, float16 on CUDA) "
                   "and its backward: outputs and gradients, each op judged in the dtype autocast chose")
    dtypes = ("float32",)  # the inputs' and parameters' dtype; autocast's is LOWER_PRECISION[device]

    @property
    def autocast_dtype(self) -> str:
        return LOWER_PRECISION[self.device]

    def _traced_function(self, graph: Graph, impls: dict):
        return under_autocast(super()._traced_function(graph, impls), self.device, self.autocast_dtype)

    def compile_source(self) -> str:
        # The reproducer's program: the graph's forward in the same autocast region, compiled (its backward runs outside).
        compiled = super().compile_source().replace("torch.compile(graph,", "torch.compile(autocast_graph,")
        return "\n".join([
            "def autocast_graph(*args):",
            f"    with torch.autocast({self.device!r}, dtype=torch.{self.autocast_dtype}):",
            "        return graph(*args)",
            "",
            "",
            compiled])

    def _eager_run(self, case: Case, dtype: str, noise=None, autocast: bool = False) -> list[np.ndarray]:
        """The outputs and gradients by eager autograd in `dtype`; `autocast`: the forward in the autocast region."""
        region = (lambda fn, args: torch_outputs_and_gradients(under_autocast(fn, self.device, self.autocast_dtype), args)) \
            if autocast else None
        return torch_eager_gradients(case, dtype, noise, parameters=True, device=self.device if autocast else "cpu",
                                     differentiate=region, with_outputs=True)

    def own_reference(self, case: Case) -> oracle.Reference:
        with np.errstate(all="ignore"):
            exact, rounded, *moved = value_variants(case, self.dtype)
            chosen = autocast_choices(case, self.device, self.autocast_dtype)
            noisy = [self._eager_run(variant, "float64", (chosen, run)) for run, variant in enumerate(moved)]
            exact, rounded = self._eager_run(exact, "float64"), self._eager_run(rounded, "float64")
            same_dtype = self._eager_run(case, self.dtype, autocast=True)
        sensitivity = 1.0 + sum(get_op(node.op).numerics.sensitivity for node in case.graph.nodes)
        return oracle.framework_reference(exact, rounded, [same_dtype, *noisy], self.dtype, sensitivity)


BACKENDS = [TorchCompileAutocastGrad]
