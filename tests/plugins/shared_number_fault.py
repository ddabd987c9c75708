"""A planted compiler fault wrong only where one number read with `.item()` feeds two writes: torch-compile-breaks
(fullgraph=False, dynamic=None) with a post-grad pass (torch._inductor.config `post_grad_custom_post_pass`) that gives
every use of a number the resumed graph takes as an input (a symbol, once automatic dynamic has seen it change) but the
first the constant 1.0, as a pass that kept one use of a symbol and folded the others would. A number one write uses is
computed right; only a program that reads a number once for two writes (program.shared_reads, as an optimizer reads
its step size once) in a graph resumed after the break reaches it (pytorch#185382's path). A write whose decomposition
uses its number twice (lerp_'s) would reach it too: its campaign draws add_ and mul_ only."""

import torch

from fuzzer.backends.torch_compile_breaks import TorchCompileBreaks


def later_uses_of_a_number_take_one(graph):
    for node in graph.nodes:
        if node.op != "placeholder" or not isinstance(node.meta.get("val"), (torch.SymFloat, torch.SymInt)):
            continue
        tensor_users = [user for user in node.users if isinstance(user.meta.get("val"), torch.Tensor)]
        for user in tensor_users[1:]:  # a symbol's own arithmetic (sym_float, truediv) stays
            user.args = tuple(1.0 if arg is node else arg for arg in user.args)


class SharedNumberFault(TorchCompileBreaks):
    kind = "planted-shared-number"
    compile_options = {"post_grad_custom_post_pass": later_uses_of_a_number_take_one}
    runs_programs = True


def register(api):
    api.add_backend(SharedNumberFault)
