"""torch-compile-grad with dynamic=True: the forward and the backward AOTAutograd derives from it compiled
once with symbolic sizes per shape-free structure (torch_compile_dynamic.py says how a campaign feeds it
other sizes), so a backward that is wrong only for symbolic sizes (a guard, a size computed in the
backward graph) is a finding of its own."""

from __future__ import annotations

from fuzzer.backends.torch_compile_dynamic import shape_free_key
from fuzzer.backends.torch_compile_grad import TorchCompileGrad
from fuzzer.ir import Graph


class TorchCompileGradDynamic(TorchCompileGrad):
    # Its forward is torch-compile-dynamic's: wrong the same way, that kind's finding.
    derives_from_kind = "torch-compile-dynamic"
    kind = "torch-compile-grad-dynamic"
    in_sets = {"grad": {35: "cpu:float32"}}
    description = ("torch.compile(dynamic=True) of the forward and its backward: outputs, then gradients w.r.t. inputs "
                   "and parameters (vs float64 eager autograd), one compile per shape-free structure")
    dynamic = True

    def cache_key(self, graph: Graph) -> tuple:
        return (self.name, shape_free_key(graph))


BACKENDS = [TorchCompileGradDynamic]
