"""torch-bnfold: the nested module after the fuzzer's own reference BatchNorm folding.

A model-level (metamorphic) kind (see torch_module.py): every conv2d -> batch_norm or
linear -> batch_norm pair in eval mode whose batch_norm reads the producer's output directly,
and is its only reader, is folded into the producer's weight and bias with torch's
fuse_conv_bn_eval / fuse_linear_bn_eval, wherever the pair sits in the nested module tree
(one of the seed bugs was a fold that missed pairs split across submodules). The folded model
must compute what the unfolded one does, so any disagreement with the float64 reference is a
fold that changed the math. Structures the fold must leave alone are reported (FoldReport)
and warned about (FoldWarning), never folded.

torch is imported lazily so that listing backends works without it.
"""

from __future__ import annotations

import copy
import warnings
from collections import Counter
from dataclasses import dataclass, field

from fuzzer.backends.torch_module import ModuleBackend
from fuzzer.errors import UserError
from fuzzer.ir import Case


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
            self.fold_into(producer, bn)
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

    def fold_into(self, producer, bn) -> None:
        """Give `producer` the weight and bias of producer-then-`bn` (fused_weights); rewiring
        the outputs and removing `bn` is the caller's."""
        import torch

        with torch.no_grad():
            weight, bias = self.fused_weights(producer, bn)
        producer.add_param("weight", weight)
        producer.add_param("bias", bias)
        producer.attrs["bias"] = True

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
    in_sets = {"cpu": {90: "cpu:float32"}, "model": {50: "cpu:float32"}}
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
        if not any(leaf.op == "batch_norm" for _, leaf in module.op_modules()):
            self.last_report = FoldReport()
            return module  # nothing to fold: no copy of the module (6 ms, most of this backend's time)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always", FoldWarning)
            folded, report = self.folder().fold(module)
        self.last_report = report
        self.fold_stats.update(folded=len(report.folded), skipped=len(report.skipped))
        return folded


BACKENDS = [TorchBnFold]
