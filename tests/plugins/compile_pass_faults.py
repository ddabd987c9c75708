"""Planted compiler faults, each visible to one compile configuration only: inductor post-grad
passes (torch._inductor.config `post_grad_custom_post_pass`) that corrupt what only that
configuration's graphs contain, in backends that carry the pass in `compile_options`.

  frozen constants   scales every get_attr constant by 1.5: only a frozen graph holds the
                     weights as constants (unfrozen, they are graph inputs);
  symbolic shapes    scales the first output by 1.5 when a graph input has a symbolic size:
                     only dynamic=True compiles have one;
  AOT compilation    scales the first output by 1.5 while AOTInductor compiles.
Each fault also has a control: the same pass in the configuration that must not see it.
"""

import torch
from torch._inductor.virtualized import V

from fuzzer.backends.torch_aoti import TorchAOTInductor
from fuzzer.backends.torch_compile import TorchCompile
from fuzzer.backends.torch_compile_dynamic import TorchCompileDynamic
from fuzzer.backends.torch_compile_frozen import TorchCompileFrozen


def _scale(graph, node):
    with graph.inserting_after(node):
        scaled = graph.call_function(torch.ops.aten.mul.Tensor, (node, 1.5))
    node.replace_all_uses_with(scaled, delete_user_cb=lambda user: user is not scaled)


def _scale_first_output(graph):
    output = next(node for node in graph.nodes if node.op == "output")
    first = output.args[0][0]
    with graph.inserting_before(output):
        scaled = graph.call_function(torch.ops.aten.mul.Tensor, (first, 1.5))
    output.args = ((scaled, *output.args[0][1:]),)


def scale_constants(graph):
    for node in list(graph.nodes):
        if node.op == "get_attr":
            _scale(graph, node)


def scale_if_symbolic(graph):
    placeholders = [node.meta.get("val") for node in graph.nodes if node.op == "placeholder"]
    if any(isinstance(value, torch.SymInt) or (isinstance(value, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in value.shape))
           for value in placeholders):
        _scale_first_output(graph)


def scale_in_aot(graph):
    if V.aot_compilation:
        _scale_first_output(graph)


# Without weight prepacking, a frozen linear's weight stays an aten operand (prepacked, it feeds
# an mkldnn kernel that inductor cannot lower a scaled copy into).
class FrozenConstantFault(TorchCompileFrozen):
    kind = "planted-frozen-constants"
    compile_options = {**TorchCompileFrozen.compile_options, "cpp.weight_prepack": False,
                       "post_grad_custom_post_pass": scale_constants}


class UnfrozenConstantFault(TorchCompileFrozen):
    kind = "planted-unfrozen-constants"
    compile_options = {"freezing": False, "cpp.weight_prepack": False, "post_grad_custom_post_pass": scale_constants}


class DynamicSymbolicFault(TorchCompileDynamic):
    kind = "planted-dynamic-symbolic"
    compile_options = {"post_grad_custom_post_pass": scale_if_symbolic}


class StaticSymbolicFault(TorchCompile):
    kind = "planted-static-symbolic"
    compile_options = {"post_grad_custom_post_pass": scale_if_symbolic}


class AotFault(TorchAOTInductor):
    kind = "planted-aot"
    compile_options = {"post_grad_custom_post_pass": scale_in_aot}


class JitAotFault(TorchCompile):
    kind = "planted-jit-aot"
    compile_options = {"post_grad_custom_post_pass": scale_in_aot}


def register(api):
    for cls in (FrozenConstantFault, UnfrozenConstantFault, DynamicSymbolicFault, StaticSymbolicFault, AotFault, JitAotFault):
        api.add_backend(cls)
