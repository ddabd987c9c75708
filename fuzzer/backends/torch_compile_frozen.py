"""torch.compile (inductor) of the nested nn.Module with freezing: the weights become constants
of the compiled graph and are constant-folded, as in production inference.

Freezing applies when dynamo traces under torch.no_grad() with inductor's `freezing` set, and
dynamo reads that setting from the global config: torch.compile(options={"freezing": True})
alone freezes nothing in torch 2.13 (the parameters stay graph inputs; compare
pytorch/pytorch#139272). So `compile_options` is patched into the config around the call.

The frozen graph holds this case's weights, so every run compiles anew (~0.1 s for a small
graph once warm), each in a code object of its own: dynamo keeps at most `recompile_limit`
compiled variants per code object, and frozen weights make each module a variant.
"""

from __future__ import annotations

from fuzzer.backends.torch_compile import GraphBreak, _own_code_object, inductor_config, with_inductor_config
from fuzzer.backends.torch_module import ModuleBackend
from fuzzer.reproducers.op_source import Source


def _call_module(module, *inputs):
    return module(*inputs)


class TorchCompileFrozen(ModuleBackend):
    kind = "torch-compile-frozen"
    path = "torch/inductor"
    description = "torch.compile (inductor) of the nested nn.Module, freezing=True under torch.no_grad (weights as constants)"
    expensive = True
    compile_weight = 3.0  # as torch-compile: inductor's seconds per structure
    compile_options = {"freezing": True}
    transform_source = ("program = torch.compile(model, fullgraph=True)",)
    context_source = "torch.no_grad()"

    def transform(self, module, args, fresh):
        import torch

        compiled = torch.compile(_own_code_object(_call_module, "fuzz_frozen_module"), fullgraph=True)

        def program(*inputs):
            try:
                with inductor_config(self.compile_options):
                    return compiled(module, *inputs)
            except torch._dynamo.exc.Unsupported as exc:
                raise GraphBreak(f"graph break under fullgraph=True: {str(exc).strip().splitlines()[0]}") from None

        return program

    def run_context(self):
        import torch

        return torch.no_grad()

    def reproducer_context(self, source: Source) -> str:
        return with_inductor_config(self.context_source, self.compile_options, source)


BACKENDS = [TorchCompileFrozen]
