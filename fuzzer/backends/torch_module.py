"""Model-level (metamorphic) torch backends: the graph computed through a transformed real model.

Three of the five seed bugs were a model disagreeing with a transformed version of
itself (save/load, dropout active in eval, BatchNorm folding with nested
submodules). Each transformation here is a backend, so the existing oracle,
shrinker and corpus handle it unchanged: the transformed model's outputs are judged
against the float64 reference like any backend's, and a finding's signature names
the transformation (e.g. "mismatch | torch-bnfold:cpu:float32 | batch_norm").

The model is `fuzzer.model.build_module`: one module per node, nested in
containers drawn from `case.seed` (kept by the shrinker, so a shrunk case nests
the same way), in eval mode; op modes come from the ops' `training` attributes.

Kinds:
  torch-module         the nested module under torch.inference_mode()
  torch-module-grad    the same with autograd on; outputs plus input gradients (gradients.py)
  torch-saveload       state_dict -> torch.save -> torch.load(weights_only=True) -> a
                       freshly built zero-filled module, load_state_dict(strict=True)
  torch-export         torch.export.export -> torch.export.save/load -> .module()
  torch-bnfold         our reference BatchNorm folding (fold_batch_norms) on the module tree
  torch-jit-trace      torch.jit.trace
  torch-layout         torch eager with channels_last / strided / transposed inputs and weights

torch is imported lazily (like the other torch backends) so that listing backends
works without it.
"""

from __future__ import annotations

import copy
import io
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from fuzzer.backends.gradients import GradientOutputs, torch_eager_gradients, torch_outputs_and_gradients
from fuzzer.backends.torch_eager import TorchEager
from fuzzer.ir import Case, Graph, interpret, split_arrays
from fuzzer.errors import UserError
from fuzzer.layouts import apply_layout, layouts_for
from fuzzer.op_source import Source
from fuzzer.program_source import argument_names, module_program, torch_program


class ModuleBackend(TorchEager):
    """Base: build the nested module for the case, transform it, run it."""

    derives_from_kind = "torch-eager"

    devices = ("cpu", "cuda")
    dtypes = ("float32", "float64")
    default_dtype = "float32"
    # Ops this kind cannot run (measured; see each subclass). Set per instance in __init__.
    UNSUPPORTED: frozenset[str] = frozenset()

    def __init__(self, device="cpu", dtype=None, overrides=None, name=None):
        super().__init__(device, dtype, overrides, name)
        self.unsupported_ops = set(self.UNSUPPORTED)

    def run(self, case: Case) -> list[np.ndarray]:
        inputs, params = split_arrays(case)
        return self._execute(case.graph, inputs, params, nesting_seed=case.seed)

    def build(self, graph: Graph, params: dict | None, nesting_seed: int):
        """The nested model (params None: a fresh zero-filled one)."""
        from fuzzer import model

        return model.build_graph_module(graph, params, self.dtype, self.device, nesting_seed, self.impl_for)

    def _execute(self, graph: Graph, inputs: dict, params: dict, nesting_seed: int = 0) -> list[np.ndarray]:
        from fuzzer import model

        module = self.build(graph, params, nesting_seed)
        args = list(self._input_tensors(graph, inputs).values())
        with self.precision_context():
            program = self.transform(module, args, lambda: self.build(graph, None, nesting_seed))
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
        from fuzzer.model import BUFFER_PARAMS

        source = Source(imports=[*self.transform_imports, "import torch"])
        return module_program(case, self, self.reproducer_transform(source), self.reproducer_context(source),
                              BUFFER_PARAMS, source)

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
    description = "nested nn.Module tree, eval(), torch.inference_mode()"


class TorchModuleGrad(GradientOutputs, ModuleBackend):
    """The nested module with autograd on (parameters and graph inputs require grad); outputs
    are the forward outputs, then the gradient of each graph input, judged against float64 torch
    eager autograd of the stock ops (fuzzer/backends/gradients.py)."""

    kind = "torch-module-grad"
    description = "nested nn.Module tree, eval(), autograd on: outputs and input gradients (vs float64 eager autograd)"

    context_source = "torch.enable_grad()"

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

    def eager_gradients(self, case: Case, dtype: str, noise=None) -> list[np.ndarray]:
        return torch_eager_gradients(case, dtype, noise)


class TorchSaveLoad(ModuleBackend):
    """state_dict through torch.save / torch.load(weights_only=True) into a freshly built,
    zero-filled module of the same structure: a dropped or misnamed tensor shows as zeros."""

    kind = "torch-saveload"
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
    """torch.jit.trace of the nested module (deprecated in torch 2.x but still what many
    deployment paths use); the DeprecationWarning and TracerWarnings are silenced locally."""

    kind = "torch-jit-trace"
    description = "torch.jit.trace of the nested module"
    transform_source = ("with torch.no_grad():", "    program = torch.jit.trace(model, tuple(inputs), check_trace=False)")
    context_source = "torch.no_grad()"

    def transform(self, module, args, fresh):
        import torch

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            with torch.no_grad():
                return torch.jit.trace(module, tuple(args), check_trace=False)

    def run_context(self):
        import torch

        return torch.no_grad()


# -- BatchNorm folding -------------------------------------------------------------

FOLDABLE_PRODUCERS = ("conv2d", "linear")


@dataclass
class FoldReport:
    """What a fold did: pairs folded, producer->batch_norm structures skipped (with the
    reason; each is also a warning), and batch_norms not reading a conv2d/linear at all."""

    folded: list[tuple[str, str]] = field(default_factory=list)  # (producer node, batch_norm node)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (producer, batch_norm, reason)
    not_applicable: list[tuple[str, str]] = field(default_factory=list)  # (batch_norm, reason)


class FoldWarning(UserWarning):
    """A conv2d/linear -> batch_norm structure the fold had to leave alone."""


class BatchNormFolder:
    """Reference BatchNorm folding on a GraphModule tree.

    Walks every OpModule depth first through ALL nested containers (so a pair split
    across two submodules is found too) and folds a conv2d->batch_norm or
    linear->batch_norm pair only when the batch_norm reads the producer's output
    directly, runs in eval mode, and is the only consumer of that output. The fold
    math is torch's own fuse_conv_bn_eval / fuse_linear_bn_eval on temporary
    nn.Conv2d / nn.Linear / nn.BatchNorm modules. The producer then writes the
    batch_norm's output name and the batch_norm module is removed from its parent.
    """

    def fold(self, module):
        import torch

        module = copy.deepcopy(module)
        report = FoldReport()
        leaves = module.op_modules()
        consumers = Counter(ref for _, leaf in leaves for ref in leaf.inputs)
        consumers.update(module.output_names)
        by_output = {leaf.output: (qualname, leaf) for qualname, leaf in leaves}
        for qualname, bn in leaves:
            if bn.op != "batch_norm":
                continue
            found = by_output.get(bn.inputs[0])
            if found is None or found[1].op not in FOLDABLE_PRODUCERS:
                what = found[1].op if found else "a graph input"
                report.not_applicable.append((bn.node_name, f"reads {what}, not conv2d/linear"))
                continue
            _, producer = found
            reason = self.cannot_fold(producer, bn, consumers)
            if reason:
                report.skipped.append((producer.node_name, bn.node_name, reason))
                warnings.warn(
                    f"BatchNorm fold: left {producer.op} {producer.node_name} -> batch_norm {bn.node_name} unfolded: {reason}",
                    FoldWarning,
                    stacklevel=2,
                )
                continue
            with torch.no_grad():
                weight, bias = self.fused_weights(producer, bn)
            producer.add_param("weight", weight)
            producer.add_param("bias", bias)
            producer.attrs["bias"] = True
            producer.output = bn.output
            _remove(module, qualname)
            report.folded.append((producer.node_name, bn.node_name))
        return module, report

    def cannot_fold(self, producer, bn, consumers: Counter) -> str | None:
        if bn.attrs.get("training"):
            return "batch_norm runs in training mode (batch statistics cannot be folded)"
        if consumers[producer.output] != 1:
            return f"the {producer.op} output is also read elsewhere ({consumers[producer.output]} readers or a graph output)"
        if producer.op == "linear":
            rank, channels = len(producer.out_shape), bn.running_mean.shape[0]
            if rank != 2 and channels != 1:
                return (
                    f"batch_norm normalizes dim 1 of a rank-{rank} linear output, not the feature dim "
                    "(fuse_linear_bn_eval would accept it when the sizes happen to match, and be wrong)"
                )
        return None

    def fused_weights(self, producer, bn):
        from torch import nn
        from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval

        p, attrs, dev = producer.params(), producer.attrs, dict(device=bn.running_mean.device, dtype=bn.running_mean.dtype)
        channels = bn.running_mean.shape[0]
        if producer.op == "conv2d":
            out_channels, in_per_group = p["weight"].shape[:2]
            real = nn.Conv2d(in_per_group * attrs["groups"], out_channels, tuple(attrs["kernel_size"]),
                             tuple(attrs["stride"]), tuple(attrs["padding"]), tuple(attrs["dilation"]),
                             attrs["groups"], bias="bias" in p, **dev)
            norm = nn.BatchNorm2d(channels, eps=bn.attrs["eps"], **dev)
            fuse = fuse_conv_bn_eval
        else:
            out_features, in_features = p["weight"].shape
            real = nn.Linear(in_features, out_features, bias="bias" in p, **dev)
            norm = nn.BatchNorm1d(channels, eps=bn.attrs["eps"], **dev)
            fuse = fuse_linear_bn_eval
        real.weight.copy_(p["weight"])
        if "bias" in p:
            real.bias.copy_(p["bias"])
        for pname in ("weight", "bias", "running_mean", "running_var"):
            getattr(norm, pname).copy_(getattr(bn, pname))
        fused = fuse(real.eval(), norm.eval())
        return nn.Parameter(fused.weight.detach().clone()), nn.Parameter(fused.bias.detach().clone())


def _remove(root, qualname: str) -> None:
    """Delete the submodule at `qualname` from its parent container."""
    from torch import nn

    parent_name, _, child = qualname.rpartition(".")
    parent = root.get_submodule(parent_name) if parent_name else root
    if isinstance(parent, (nn.Sequential, nn.ModuleList)):
        del parent[int(child)]
    else:
        delattr(parent, child)


def fold_batch_norms(module):
    """(folded copy of `module`, FoldReport); see BatchNormFolder. The input is not modified."""
    return BatchNormFolder().fold(module)


class TorchBnFold(ModuleBackend):
    """The nested module after our reference BatchNorm folding, under inference_mode.

    Fold warnings are recorded (counted in `fold_stats`, the latest report kept in
    `last_report`) rather than printed once per case by a campaign worker."""

    kind = "torch-bnfold"
    description = "nested nn.Module tree with conv2d/linear -> batch_norm(eval) pairs folded"
    folder: type[BatchNormFolder] = BatchNormFolder

    def __init__(self, device="cpu", dtype=None, overrides=None, name=None):
        super().__init__(device, dtype, overrides, name)
        self.fold_stats: Counter = Counter()
        self.last_report: FoldReport | None = None

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        raise UserError(f"Backend '{self.name}' runs the fuzzer's own BatchNorm folding, which has no standalone form; "
                        f"export the case with --backend torch-module:{self.device}:{self.dtype} and fold it with your tool.")

    def transform(self, module, args, fresh):
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always", FoldWarning)
            folded, report = self.folder().fold(module)
        self.last_report = report
        self.fold_stats.update(folded=len(report.folded), skipped=len(report.skipped))
        return folded


# -- layout ------------------------------------------------------------------------


def relayout(x):
    """The same logical values in another memory layout (deterministic): the first of
    channels_last (rank 4), transposed (the last two dims > 1) and strided (a stride-2 view
    whose gaps hold NaN) that the shape allows; see fuzzer/layouts.py."""
    if x.numel() <= 1:
        return x
    allowed = layouts_for(tuple(x.shape))
    return apply_layout(x, next(layout for layout in ("channels_last", "transposed", "strided") if layout in allowed))


class TorchLayout(TorchEager):
    """torch eager, op by op, with every graph input and every weight of rank >= 2 in a
    non-default memory layout (see `relayout`): layout invariance against the reference.

    Exception, on CUDA only: gru/lstm parameters (weights and h0/c0) stay contiguous.
    cuDNN's RNN requires it: a non-contiguous hx is refused by an explicit check ("rnn: hx
    is not contiguous"), and non-contiguous weights fail inside the cuDNN path with "view
    size is not compatible with input tensor's size and stride" (torch 2.11, cuDNN 9.19),
    while the CPU kernels accept both. Relayouting them would make every RNN graph a crash
    finding on CUDA; their *inputs* are still relayouted (cuDNN handles those)."""

    derives_from_kind = "torch-eager"
    kind = "torch-layout"
    description = "torch eager with channels_last / transposed / strided inputs and weights"
    devices = ("cpu", "cuda")
    dtypes = ("float32", "float64")
    CONTIGUOUS_PARAMS_ON_CUDA = frozenset({"gru", "lstm"})

    def _keeps_params_contiguous(self, op_name: str) -> bool:
        return self.device == "cuda" and op_name in self.CONTIGUOUS_PARAMS_ON_CUDA

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        # As _execute: every input relayouted (not in its stored layout), and weights of rank >= 2.
        ops, inputs = {node.name: node.op for node in case.graph.nodes}, len(case.graph.inputs)
        kept = [i for i, name in enumerate(argument_names(case))
                if i >= inputs and self._keeps_params_contiguous(ops[name.split(".", 1)[0]])]
        relayout_line = (f"args = [relayout(a) if i < {inputs} or (a.dim() >= 2 and i not in {kept!r}) else a "
                         "for i, a in enumerate(args)]  # inputs and weights in another memory layout")
        return torch_program(case, self, [relayout_line], "graph(*args)", helpers=(relayout,), layouts=False)

    def _execute(self, graph: Graph, inputs: dict, params: dict) -> list[np.ndarray]:
        import torch

        ops = {node.name: node.op for node in graph.nodes}

        def weight(node, array):
            tensor = self._to_torch(array)
            if tensor.dim() < 2 or self._keeps_params_contiguous(ops[node]):
                return tensor
            return relayout(tensor)

        with torch.no_grad(), self.precision_context():
            outputs = interpret(
                graph,
                {k: relayout(self._to_torch(v)) for k, v in inputs.items()},
                {node: {k: weight(node, v) for k, v in ps.items()} for node, ps in params.items()},
                self.impl_for,
            )
        return [out.detach().to("cpu", torch.float64).numpy() for out in outputs]


BACKENDS = [TorchModule, TorchModuleGrad, TorchSaveLoad, TorchExport, TorchBnFold, TorchJitTrace, TorchLayout]
