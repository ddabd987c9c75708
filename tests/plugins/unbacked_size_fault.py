"""A planted compiler fault wrong only where a size is unbacked: a post-grad pass (torch._inductor.config
`post_grad_custom_post_pass`) that turns an `add` whose result has an unbacked size into a `sub`, in a torch.compile
kind of its own (fullgraph=True, dynamic=False). Static sizes and backed symbols (torch._dynamo.mark_dynamic) compile
right; only a program whose inputs change size between steps with dim 0 marked by mark_unbacked (ir.Resize) reaches
it, as a pass that reasons from size hints, which an unbacked size has none of, would go wrong there."""

import torch

from fuzzer.backends.torch_compile import TorchCompile


def add_of_unbacked_size_subtracts(graph):
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    for node in graph.nodes:
        value = node.meta.get("val")
        if node.op == "call_function" and node.target is torch.ops.aten.add.Tensor and value is not None \
                and free_unbacked_symbols(value.shape):
            node.target = torch.ops.aten.sub.Tensor


class UnbackedAddFault(TorchCompile):
    kind = "planted-unbacked-add"
    compile_options = {"post_grad_custom_post_pass": add_of_unbacked_size_subtracts}
    runs_programs = True


def register(api):
    api.add_backend(UnbackedAddFault)
