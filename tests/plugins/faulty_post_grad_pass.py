"""A planted compiler fault in one inductor pass: a post-grad pass (torch._inductor.config
`post_grad_custom_post_pass`) that turns every `mul` into an `add`, in a torch.compile kind of its own.
torch's CompilerBisector sees it as one of inductor's post-grad passes, so `fuzz localize` (and a
campaign, for a new bucket) must name `inductor/post_grad_passes` for it."""

import torch

from fuzzer.backends.torch_compile import TorchCompile


def mul_becomes_add(graph):
    for node in graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.mul.Tensor:
            node.target = torch.ops.aten.add.Tensor


class PostGradPassFault(TorchCompile):
    kind = "planted-post-grad-mul"
    compile_options = {"post_grad_custom_post_pass": mul_becomes_add}


def register(api):
    api.add_backend(PostGradPassFault)
