"""onnxruntime: the graph exported to ONNX by torch.onnx and run by an InferenceSession.

Two kinds, one export:

  ort               graph optimizations on (ORT_ENABLE_ALL: constant folding, fusions, layout
                    transformations), the way ORT is deployed
  ort-unoptimized   graph optimizations off (ORT_DISABLE_ALL): the exported graph node by node

Both run the same exported model, so a case where `ort` is wrong and `ort-unoptimized` is
right is exactly what ORT's optimizer changed; `ort` derives from `ort-unoptimized`, so a wrong
answer both give bit for bit (an exporter or kernel bug) is charged to `ort-unoptimized` only
(check.py: `inherited`).

Export. The graph is built as the nested torch module of fuzzer/running/model.py from torch's op
implementations (nesting seed fixed: the ONNX graph then depends on the structure alone) and
exported with the dynamo exporter (`torch.onnx.export(dynamo=True)`, onnxscript's torchlib);
where that raises, with the TorchScript exporter (`dynamo=False`). Neither exporter folds
constants here (dynamo `optimize=False`, TorchScript `do_constant_folding=False`): the weights
stay initializers named by their module path, so one export per graph structure serves every
case of that structure with its own weights written in, and every simplification is left to
ORT's optimizer, which is what the pair of kinds tests.

What is a finding, and what is not:

* Neither exporter can export the graph: `OpUnsupported` (no verdict, counted per backend),
  with both exporters' reasons. Almost all such failures are coverage gaps (an aten op with no
  ONNX translation, 3-D attention, an op ONNX lacks) that look the same from here as a genuine
  exporter crash; the backend under test is ORT, which has nothing to run, and torch.export's
  own failures are `torch-export`'s to find. Counting them as crashes would fill an ORT
  campaign with torch.onnx buckets.
* ORT has no kernel for a node (its `NotImplemented` error): `OpUnsupported` too.
* Everything after a successful export is judged: a model ORT refuses to load or run is a
  crash finding, wrong numbers a mismatch. An exporter that writes an invalid or wrong model
  shows on both kinds (a real torch.onnx bug); the optimizer's own faults on `ort` alone.

A plugin can put a graph pass of its own between export and session (`rewrite_model`), which
is how tests/plugins/ort_planted_fault.py plants an optimizer fault.

$FUZZ_ORT_OPTIMIZATION, where set to one of OPTIMIZATION_LEVELS, replaces every ORT kind's own
level: `fuzz localize` reruns a finding in fresh workers at each level, lowest first
(fuzzer/triaging/pass_bisect.py `localize_ort`).
"""

from __future__ import annotations

import base64
import contextlib
import io
import logging
import os
import warnings
from dataclasses import dataclass

import numpy as np

from fuzzer import DISTRIBUTION
from fuzzer.backends import Backend, CompiledCache
from fuzzer.errors import OpUnsupported
from fuzzer.ir import Case, split_arrays
from fuzzer.ops import get_op

INSTALL_HINT = f"pip install '{DISTRIBUTION}[onnx]'"
# Nodes the exporter turns into a different computation on purpose or by an ONNX limit: no
# verdict (op -> (does it apply to these attributes?, why)). Each is about the exporter, not ORT.
EXPORT_GAPS = {
    "batch_norm": (lambda attrs: attrs["training"],
                   "torch.onnx exports training-mode batch_norm as inference BatchNormalization (running "
                   "statistics): onnxscript's torchlib forces training=False ('temporary fix' in "
                   "aten__native_batch_norm_legit_functional)"),
    "dropout": (lambda attrs: attrs["training"] and attrs["p"] == 1.0,
                "ONNX Dropout's ratio must be in [0, 1); torch.onnx exports p=1 as ratio 1, which ORT refuses"),
}
# Exported models by graph structure, shared by every ORT kind (the export is the same).
EXPORTS = CompiledCache(limit=256)
PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
OPTIMIZATION_ENV = "FUZZ_ORT_OPTIMIZATION"
# ORT's graph optimization levels, lowest first, each adding to the one before, in ORT's words.
# ORT_ENABLE_LAYOUT is newer than some releases we support (available_levels leaves it out there).
OPTIMIZATION_LEVELS = {
    "ORT_DISABLE_ALL": "every graph optimization off",
    "ORT_ENABLE_BASIC": "a basic graph optimization (constant folding, redundant node eliminations, "
                        "semantics-preserving node fusions)",
    "ORT_ENABLE_EXTENDED": "an extended graph optimization (complex node fusions)",
    "ORT_ENABLE_LAYOUT": "a layout optimization",
    "ORT_ENABLE_ALL": "an optimization only ORT_ENABLE_ALL turns on",
}


def available_levels() -> list[str]:
    """OPTIMIZATION_LEVELS that the installed onnxruntime has, lowest first."""
    import onnxruntime

    return [level for level in OPTIMIZATION_LEVELS if hasattr(onnxruntime.GraphOptimizationLevel, level)]


@dataclass
class ExportedModel:
    """An ONNX model (an onnx.ModelProto) and the exporter that wrote it ("dynamo" or "torchscript")."""

    model: object
    exporter: str
    versions: str  # torch and onnxscript versions at export time, for reproducers

    def initializer_names(self) -> set[str]:
        return {initializer.name for initializer in self.model.graph.initializer}

    def with_weights(self, weights: dict[str, np.ndarray]):
        """A copy of the model with these initializers' values written in."""
        import onnx
        from onnx import numpy_helper

        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        for initializer in model.graph.initializer:
            if initializer.name in weights:
                initializer.CopyFrom(numpy_helper.from_array(weights[initializer.name], initializer.name))
        return model


def _root_cause(exc: BaseException) -> str:
    """'Type: first line' of the innermost cause: the exporters wrap the informative error in
    generic ones ('Failed to convert the exported program ... step 3/3')."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:200]


@contextlib.contextmanager
def quiet_exporter():
    """The exporters print progress on stdout, log a warning per missing torchvision op and warn
    about deprecations on every export: a campaign worker's output is not their log."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def export(module, args: tuple, input_names: list[str]) -> ExportedModel:
    """`module` as ONNX: the dynamo exporter, else the TorchScript one; OpUnsupported if neither can."""
    import onnx
    import torch

    versions = f"torch {torch.__version__}"
    try:
        import onnxscript

        with quiet_exporter():
            program = torch.onnx.export(module, args, dynamo=True, optimize=False, verbose=False, input_names=input_names)
        return ExportedModel(program.model_proto, "dynamo", f"{versions}, onnxscript {onnxscript.__version__}, dynamo exporter")
    except Exception as exc:  # noqa: BLE001 - any exporter failure sends the graph to the fallback
        dynamo_error = _root_cause(exc)
    try:
        buffer = io.BytesIO()
        with quiet_exporter():
            torch.onnx.export(module, args, buffer, dynamo=False, do_constant_folding=False, input_names=input_names)
        return ExportedModel(onnx.load_from_string(buffer.getvalue()), "torchscript", f"{versions}, TorchScript exporter")
    except Exception as exc:  # noqa: BLE001
        raise OpUnsupported(f"torch.onnx cannot export this graph: dynamo exporter: {dynamo_error}; "
                            f"TorchScript exporter: {_root_cause(exc)}") from None


class OnnxRuntime(Backend):
    """The exported graph in an onnxruntime InferenceSession with graph optimizations on."""

    kind = "ort"
    path = "onnx/ort"
    family = "onnxruntime"
    devices = ("cpu", "cuda")
    dtypes = ("float32",)
    description = "torch.onnx export (dynamo, TorchScript fallback) -> onnxruntime, ORT_ENABLE_ALL"
    derives_from_kind = "ort-unoptimized"
    expensive = True
    optimization_level = "ORT_ENABLE_ALL"
    # Printed by reproducers before the program runs, after its imports (reproducer_program).
    versions_source = "VERSIONS = f'onnxruntime {onnxruntime.__version__}, onnx {onnx.__version__}, numpy {np.__version__}'"

    def unavailable_reason(self) -> str | None:
        try:
            import onnx  # noqa: F401 - availability check only: exported() and reproducers use it
            import onnxruntime
            import onnxscript  # noqa: F401 - availability check only: torch.onnx's dynamo exporter needs it
        except ImportError as exc:
            return f"onnxruntime, onnx or onnxscript is missing ({exc}); `{INSTALL_HINT}` installs them."
        if PROVIDERS[self.device] not in onnxruntime.get_available_providers():
            return f"onnxruntime has no {PROVIDERS[self.device]} here; install onnxruntime-gpu on a CUDA machine."
        if self.graph_optimization_level() not in available_levels():
            return (f"{OPTIMIZATION_ENV}={self.graph_optimization_level()!r} is not a graph optimization level of this "
                    f"onnxruntime; set one of {', '.join(available_levels())} or unset it.")
        return None

    def impl_for(self, op_name: str):
        """The graph is written with torch's implementations (then exported)."""
        return self.overrides.get(op_name) or get_op(op_name).torch

    def graph_optimization_level(self) -> str:
        """The kind's own level, or $FUZZ_ORT_OPTIMIZATION's where it is set."""
        return os.environ.get(OPTIMIZATION_ENV) or self.optimization_level

    def rewrite_model(self, model):
        """A graph pass between export and session (a plugin's own optimization); none by default."""
        return model

    def exported(self, case: Case) -> tuple[ExportedModel, object]:
        """(the export of the case's structure, the ONNX model with the case's weights) as run."""
        import torch

        from fuzzer.running import model as graph_model

        for node in case.graph.nodes:
            applies, reason = EXPORT_GAPS.get(node.op, (lambda attrs: False, ""))
            if applies(node.attrs):
                raise OpUnsupported(f"{node.op} {node.name}: {reason}.")
        inputs, params = split_arrays(case)
        module = graph_model.build_graph_module(case.graph, params, "float32", "cpu", nesting_seed=0,
                                                impl_for=self.impl_for)
        weights = {name: tensor.detach().numpy() for name, tensor in module.state_dict().items()}

        def build():
            args = tuple(torch.from_numpy(np.ascontiguousarray(inputs[spec.name], dtype=np.float32))
                         for spec in case.graph.inputs)
            try:
                return export(module, args, [spec.name for spec in case.graph.inputs])
            except OpUnsupported as exc:
                return exc  # remembered: the structure is not exported again

        key = (case.graph.structure_key(), tuple(sorted(self.overrides.items())))
        exported = EXPORTS.get(key, build)
        if isinstance(exported, OpUnsupported):
            raise exported
        if not weights.keys() <= exported.initializer_names():
            exported = build()  # a weight was pruned (dead node) or made a constant: export with these values
        return exported, self.rewrite_model(exported.with_weights(weights))

    def session(self, model):
        import onnxruntime
        import torch

        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = getattr(onnxruntime.GraphOptimizationLevel, self.graph_optimization_level())
        # As many threads as torch uses here (campaign workers set it: workers.limit_threads).
        options.intra_op_num_threads = torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.log_severity_level = 4  # errors raise; ORT's log would repeat them on stderr
        try:
            return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=[PROVIDERS[self.device]])
        except onnxruntime.capi.onnxruntime_pybind11_state.NotImplemented as exc:
            raise OpUnsupported(f"onnxruntime has no kernel for a node of this graph: {str(exc).strip()[:200]}") from None

    def run(self, case: Case) -> list[np.ndarray]:
        _, model = self.exported(case)
        session = self.session(model)
        feeds = {spec.name: np.ascontiguousarray(case.arrays[spec.name], dtype=np.float32)
                 for spec in case.graph.inputs}
        wanted = {i.name for i in session.get_inputs()}  # the TorchScript exporter drops unused inputs
        outputs = session.run(None, {name: value for name, value in feeds.items() if name in wanted})
        return [np.asarray(output, dtype=np.float64) for output in outputs]

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        """The exported model (with the case's weights) embedded as base64 ONNX bytes, run by an
        InferenceSession with this kind's options; graph inputs come from the script's variables."""
        from fuzzer.reproducers.program_source import variable_name

        exported, model = self.exported(case)
        blob = base64.b64encode(model.SerializeToString()).decode()
        feeds = ", ".join(f"{spec.name!r}: {variable_name(spec.name)}" for spec in case.graph.inputs)
        code = "\n".join([
            f"# The graph as torch.onnx exported it ({exported.versions}), weights included.",
            f"MODEL = base64.b64decode('{blob}')",
            "options = onnxruntime.SessionOptions()",
            f"options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.{self.graph_optimization_level()}",
            f"session = onnxruntime.InferenceSession(MODEL, options, providers=[{PROVIDERS[self.device]!r}])",
            f"feeds = {{{feeds}}}",
            "wanted = {i.name for i in session.get_inputs()}",
            "outputs = session.run(None, {name: np.asarray(value, np.float32) for name, value in feeds.items() if name in wanted})",
            "outputs = [np.asarray(o, dtype=np.float64) for o in outputs]",
        ])
        return ["import onnx", "import onnxruntime"], code


class OnnxRuntimeUnoptimized(OnnxRuntime):
    """The same exported graph with ORT's graph optimizations off: the exporter and ORT's kernels alone."""

    kind = "ort-unoptimized"
    description = "torch.onnx export (dynamo, TorchScript fallback) -> onnxruntime, ORT_DISABLE_ALL"
    derives_from_kind = None
    optimization_level = "ORT_DISABLE_ALL"


BACKENDS = [OnnxRuntime, OnnxRuntimeUnoptimized]
