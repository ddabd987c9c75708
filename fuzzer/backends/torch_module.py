"""Model-level (metamorphic) torch backends: the graph computed through a transformed real model.

Three of the five seed bugs were a model disagreeing with a transformed version of
itself (save/load, dropout active in eval, BatchNorm folding with nested
submodules). Each transformation here is a backend, so the existing oracle,
shrinker and corpus handle it unchanged: the transformed model's outputs are judged
against the float64 reference like any backend's, and a finding's signature names
the transformation (e.g. "mismatch | torch-bnfold:cpu:float32 | batch_norm").

The model is `fuzzer.running.model.build_module`: one module per node, nested in
containers drawn from `case.seed` (kept by the shrinker, so a shrunk case nests
the same way), in eval mode; op modes come from the ops' `training` attributes. A kind to which
the nesting is only overhead sets `flat` and gets the graph as one module (model.FlatGraphModule):
torch-jit-trace, which would build a ScriptModule per submodule.

Kinds here:
  torch-module         the nested module under torch.inference_mode()
  torch-module-grad    the same with autograd on; outputs plus input gradients (gradients.py)
  torch-saveload       state_dict -> torch.save -> torch.load(weights_only=True) -> a
                       freshly built zero-filled module, load_state_dict(strict=True)
  torch-export         torch.export.export -> torch.export.save/load -> .module()
  torch-jit-trace      torch.jit.trace (of the flat module)

In their own modules: torch-bnfold (torch_bnfold.py: our reference BatchNorm folding on the
module tree, a ModuleBackend) and torch-layout (torch_layout.py: torch eager with
channels_last / strided / transposed inputs and weights).

torch is imported lazily (like the other torch backends) so that listing backends
works without it.
"""

from __future__ import annotations

import io
import warnings
from typing import Callable

import numpy as np

from fuzzer.backends import CompiledCache
from fuzzer.backends.gradients import GradientOutputs, torch_eager_gradients, torch_outputs_and_gradients
from fuzzer.backends.torch_eager import TorchEager
from fuzzer.ir import Case, Graph, split_arrays
from fuzzer.ops import registry
from fuzzer.reproducers.op_source import Source
from fuzzer.reproducers.program_source import module_program


class ModuleBackend(TorchEager):
    """Base: build the nested module for the case, transform it, run it."""

    derives_from_kind = "torch-eager"
    computes_every_node = False  # a model transformation (folding, export, tracing) may not keep a node's value

    devices = ("cpu", "cuda")
    dtypes = ("float32", "float64")
    default_dtype = "float32"
    # Ops this kind cannot run (measured; see each subclass). Set per instance in __init__.
    UNSUPPORTED: frozenset[str] = frozenset()
    # One flat module instead of the nested tree, where the nesting is only overhead (see fuzzer/running/model.py).
    flat = False

    def __init__(self, device="cpu", dtype=None, overrides=None, name=None):
        super().__init__(device, dtype, overrides, name)
        self.unsupported_ops = set(self.UNSUPPORTED)

    def run(self, case: Case) -> list[np.ndarray]:
        inputs, params = split_arrays(case)
        return self._execute(case.graph, inputs, params, nesting_seed=case.seed)

    def build(self, graph: Graph, params: dict | None, nesting_seed: int):
        """The nested model, or the flat one (params None: a fresh zero-filled one)."""
        from fuzzer.running import model

        return model.build_graph_module(graph, params, self.dtype, self.device, nesting_seed, self.impl_for, self.flat)

    def _execute(self, graph: Graph, inputs: dict, params: dict, nesting_seed: int = 0) -> list[np.ndarray]:
        from fuzzer.running import model

        module = self.build(graph, params, nesting_seed)
        args = list(self._input_tensors(graph, inputs).values())
        with self.precision_context(graph):
            program = self.program(graph, module, args, lambda: self.build(graph, None, nesting_seed))
            with self.run_context():
                out = program(*args)
        return model.to_numpy(list(out) if isinstance(out, (tuple, list)) else [out])

    def prepared(self, case: Case):
        """(the transformed program, its input tensors): what this backend runs for `case`,
        for tools that want to trace or re-run it (reproducers)."""
        inputs, params = split_arrays(case)
        module = self.build(case.graph, params, case.seed)
        args = list(self._input_tensors(case.graph, inputs).values())
        return self.transform(module, args, lambda: self.build(case.graph, None, case.seed)), args

    def program(self, graph: Graph, module, args: list, fresh: Callable):
        """What a run of `graph` calls: `transform`'s program (a kind that reuses one per graph
        structure, torch-jit-trace, overrides this)."""
        return self.transform(module, args, fresh)

    def transform(self, module, args: list, fresh: Callable):
        """The transformed model, called as program(*args) -> tuple of outputs; `fresh()`
        builds another, zero-filled copy of the module. The identity by default."""
        return module

    def run_context(self):
        """The autograd mode the program runs in."""
        import torch

        return torch.inference_mode()

    # The reproducer's lines that turn `model` into `program`, the imports they need, and the mode
    # it runs in (as source).
    transform_source: tuple[str, ...] = ("program = model",)
    transform_imports: tuple[str, ...] = ()
    context_source = "torch.inference_mode()"

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        from fuzzer.running.model import buffer_weights

        source = Source(imports=[*self.transform_imports, "import torch"])
        return module_program(case, self, self.reproducer_transform(source), self.reproducer_context(source),
                              buffer_weights(case.graph), source)

    def reproducer_transform(self, source: Source) -> list[str]:
        """The reproducer's lines from `model` to `program`; definitions they call go into `source`."""
        return list(self.transform_source)

    def reproducer_context(self, source: Source) -> str:
        """The context the reproducer runs `program` in; what it needs goes into `source`."""
        return self.context_source


class TorchModule(ModuleBackend):
    """The nested module in eval mode under torch.inference_mode().

    Autograd mode is a separate kind (torch-module-grad) rather than a second run
    compared bitwise in here: each execution is judged against the math by the
    oracle's calibrated tolerance (a bitwise check would need a second, uncalibrated
    one), and a disagreement then gets a culprit op and a signature naming the mode
    instead of an opaque crash."""

    kind = "torch-module"
    in_sets = {"cpu": {70: "cpu:float32"}, "model": {10: "cpu:float32"}}
    description = "nested nn.Module tree, eval(), torch.inference_mode()"


class TorchModuleGrad(GradientOutputs, ModuleBackend):
    """The nested module with autograd on (parameters and graph inputs require grad); outputs
    are the forward outputs, then the gradient of each graph input, judged against float64 torch
    eager autograd of the stock ops (fuzzer/backends/gradients.py)."""

    kind = "torch-module-grad"
    in_sets = {"model": {20: "cpu:float32"}, "grad": {10: "cpu:float32"}}
    description = "nested nn.Module tree, eval(), autograd on: outputs and input gradients (vs float64 eager autograd)"
    context_source = "torch.enable_grad()"

    def __init__(self, device="cpu", dtype=None, overrides=None, name=None):
        super().__init__(device, dtype, overrides, name)
        # cuDNN runs an RNN's backward in training mode only ("cudnn RNN backward can only be called in
        # training mode"), and the module is in eval mode (dropout off): no verdict on these on CUDA.
        self.unsupported_ops |= {name for name in registry() if self._on_cudnn_rnn(name)}

    def reproducer_transform(self, source: Source) -> list[str]:
        source.add_function(torch_outputs_and_gradients)
        return ["for parameter in model.parameters():", "    parameter.requires_grad_(True)",
                "program = lambda *inputs: torch_outputs_and_gradients(model, inputs)  # outputs, then input gradients"]

    def transform(self, module, args, fresh):
        for parameter in module.parameters():
            parameter.requires_grad_(True)
        return lambda *inputs: torch_outputs_and_gradients(module, inputs)

    def run_context(self):
        import torch

        return torch.enable_grad()

    def eager_gradients(self, case: Case, dtype: str, noise=None, device: str = "cpu") -> list[np.ndarray]:
        return torch_eager_gradients(case, dtype, noise, device=device)


class TorchSaveLoad(ModuleBackend):
    """state_dict through torch.save / torch.load(weights_only=True) into a freshly built,
    zero-filled module of the same structure: a dropped or misnamed tensor shows as zeros."""

    kind = "torch-saveload"
    in_sets = {"cpu": {80: "cpu:float32"}, "model": {30: "cpu:float32"}}
    description = "state_dict -> torch.save/torch.load(weights_only) -> fresh module, strict load"
    transform_imports = ("import io",)
    transform_source = (
        "buffer = io.BytesIO()",
        "torch.save(model.state_dict(), buffer)",
        "buffer.seek(0)",
        "program = Model([torch.zeros_like(w) for w in weights]).eval()  # a fresh, zero-filled copy",
        "program.load_state_dict(torch.load(buffer, weights_only=True, map_location=DEVICE), strict=True)",
    )

    def transform(self, module, args, fresh):
        import torch

        buffer = io.BytesIO()
        torch.save(module.state_dict(), buffer)
        buffer.seek(0)
        state = torch.load(buffer, weights_only=True, map_location=self.device)
        loaded = fresh()
        self.load(loaded, state)
        return loaded

    def load(self, module, state: dict) -> None:
        module.load_state_dict(state, strict=True)


class TorchExport(ModuleBackend):
    """torch.export.export, saved and loaded back through torch.export.save/load."""

    kind = "torch-export"
    in_sets = {"model": {40: "cpu:float32"}}
    description = "torch.export.export -> torch.export.save/load -> ExportedProgram.module()"
    expensive = True
    transform_imports = ("import io",)
    transform_source = (
        "exported = torch.export.export(model, tuple(inputs))",
        "buffer = io.BytesIO()",
        "torch.export.save(exported, buffer)",
        "buffer.seek(0)",
        "program = torch.export.load(buffer).module()",
    )
    context_source = "torch.no_grad()"

    def transform(self, module, args, fresh):
        import torch

        exported = torch.export.export(module, tuple(args))
        buffer = io.BytesIO()
        torch.export.save(exported, buffer)
        buffer.seek(0)
        return torch.export.load(buffer).module()

    def run_context(self):
        import torch

        return torch.no_grad()


class TorchJitTrace(ModuleBackend):
    """torch.jit.trace (deprecated in torch 2.x but still what many deployment paths use) of the
    graph as one flat module: tracing builds a ScriptModule for every submodule, most of a trace's
    time with the nested tree, and no bug it looks for lives in the nesting. The DeprecationWarning
    and TracerWarnings are silenced locally.

    Traced once per graph structure, as a deployment traces once and runs many inputs: a case of a
    structure already traced loads its weights into that trace (a trace reads its parameters and
    buffers at run time). Only a value-independent trace is reused (see `_value_independent`), so a
    reused trace computes what a trace of the case itself would, and verdicts and reproducers are
    the same as tracing every case (a third of this tier's time per graph, bench/vs_nnsmith.py)."""

    kind = "torch-jit-trace"
    in_sets = {"model": {60: "cpu:float32"}}
    description = "torch.jit.trace of the graph as one flat module, traced once per structure"
    flat = True
    transform_source = ("with torch.no_grad():", "    program = torch.jit.trace(model, tuple(inputs), check_trace=False)")
    context_source = "torch.no_grad()"

    def program(self, graph, module, args, fresh):
        key = (self.name, graph.structure_key())
        traced = TRACED.find(key)
        if traced is None:
            traced, reusable = self._trace(module, args)
            if reusable:
                TRACED.add(key, traced)
        else:
            traced.load_state_dict(module.state_dict())
        return traced

    def transform(self, module, args, fresh):
        return self._trace(module, args)[0]

    @staticmethod
    def _trace(module, args) -> tuple:
        """(the trace of `module` on `args`, whether it may serve other values of the same structure)."""
        import torch

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", torch.jit.TracerWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            with torch.no_grad():
                traced = torch.jit.trace(module, tuple(args), check_trace=False)
        return traced, all(_value_independent(w) for w in caught if issubclass(w.category, torch.jit.TracerWarning))

    def run_context(self):
        import torch

        return torch.no_grad()


# Traces by (backend name, graph structure), for the life of the process, oldest evicted first.
TRACED = CompiledCache(limit=64)


def _value_independent(warning: warnings.WarningMessage) -> bool:
    """Whether a TracerWarning leaves the trace valid for other values of the inputs and weights: a
    torch.tensor constant (our ops build them from attributes only, e.g. index lists) or a Python
    bool in torch.nn.functional (its norms' checks that a channel has more than one value: shapes).
    Any other conversion of a tensor to a Python value (an .item() on data) is baked into the trace."""
    message = str(warning.message)
    if message.startswith("torch.tensor results are registered as constants"):
        return True
    return message.startswith("Converting a tensor to a Python boolean") and warning.filename.endswith(
        ("torch/nn/functional.py", "torch\\nn\\functional.py"))


BACKENDS = [TorchModule, TorchModuleGrad, TorchSaveLoad, TorchExport, TorchJitTrace]
