"""Test data: a planted ONNX graph-optimizer fault, as a plugin (tests/test_ort.py finds it).

`ort-planted-fault` is the `ort` backend with one graph pass of its own between export and
session (`OnnxRuntime.rewrite_model`): it fuses Log(Softmax(x, axis)) into LogSoftmax(x) and
drops the axis, so the fused node normalizes over the last axis (LogSoftmax's default). Right
when the softmax was over the last axis, wrong over any other; like a real fusion, it leaves
the pair alone when the softmax output is read elsewhere too.

`ort-planted-extended-fault` plants the same fusion as one of ORT's extended optimizations would
be: only at ORT_ENABLE_EXTENDED and above (tests/test_novelty.py localizes it there).
"""

from collections import Counter

from onnx import helper

from fuzzer.backends.ort import OPTIMIZATION_LEVELS, OnnxRuntime


def fuse_log_softmax_dropping_axis(model):
    graph = model.graph
    readers = Counter(name for node in graph.node for name in node.input)
    readers.update(output.name for output in graph.output)
    softmax_of = {node.output[0]: node for node in graph.node if node.op_type == "Softmax"}
    fused_softmaxes = set()
    for index, node in enumerate(graph.node):
        softmax = softmax_of.get(node.input[0]) if node.op_type == "Log" else None
        if softmax is None or readers[softmax.output[0]] != 1:
            continue
        graph.node[index].CopyFrom(helper.make_node("LogSoftmax", [softmax.input[0]], [node.output[0]], name=node.name))
        fused_softmaxes.add(softmax.output[0])
    kept = [node for node in graph.node if node.output[0] not in fused_softmaxes]
    del graph.node[:]
    graph.node.extend(kept)
    return model


class PlantedFault(OnnxRuntime):
    kind = "ort-planted-fault"
    description = "ort with a planted Log(Softmax) -> LogSoftmax fusion that drops the axis"
    derives_from_kind = None

    def rewrite_model(self, model):
        return fuse_log_softmax_dropping_axis(model)


class PlantedExtendedFault(OnnxRuntime):
    kind = "ort-planted-extended-fault"
    description = "ort with the planted fusion from ORT_ENABLE_EXTENDED up"
    derives_from_kind = None

    def rewrite_model(self, model):
        levels = list(OPTIMIZATION_LEVELS)
        extended = levels.index(self.graph_optimization_level()) >= levels.index("ORT_ENABLE_EXTENDED")
        return fuse_log_softmax_dropping_axis(model) if extended else model


def register(api):
    api.add_backend(PlantedFault)
    api.add_backend(PlantedExtendedFault)
