"""Seed bug 5: BatchNorm folding that pairs a BN with the wrong producer.

A correct fold rewrites conv2d -> batch_norm(eval) into one conv2d with scaled
weights and a shifted bias, but only when the BN reads the conv *directly*. This
transformation, like the AIMET bug with nested submodules, walks up through
whatever sits in between (a relu, a dropout: the "submodule" wrapping the conv)
and folds anyway, silently dropping the order of operations.
"""

from dataclasses import replace

import numpy as np

from fuzzer.canaries import on_every_device
from fuzzer.ir import Graph, Node

PASS_THROUGH = {"relu", "dropout", "tanh", "sigmoid", "gelu"}


def _producer_conv(name, ops_by_name):
    """The conv2d found by walking up through pass-through ops (the bug: it should not)."""
    while name in ops_by_name and ops_by_name[name].op in PASS_THROUGH:
        name = ops_by_name[name].inputs[0]
    node = ops_by_name.get(name)
    return node if node is not None and node.op == "conv2d" else None


def fold_batch_norms(case):
    graph, arrays = case.graph, dict(case.arrays)
    ops_by_name = {n.name: n for n in graph.nodes}
    folded_into = {}  # bn node name -> conv node name
    for node in graph.nodes:
        if node.op != "batch_norm" or node.attrs["training"]:
            continue
        conv = _producer_conv(node.inputs[0], ops_by_name)
        if conv is None or conv.name in folded_into.values():
            continue
        scale = arrays[f"{node.name}.weight"] / np.sqrt(arrays[f"{node.name}.running_var"] + node.attrs["eps"])
        arrays[f"{conv.name}.weight"] = arrays[f"{conv.name}.weight"] * scale.reshape(-1, 1, 1, 1)
        old_bias = arrays.get(f"{conv.name}.bias", np.zeros_like(scale))
        arrays[f"{conv.name}.bias"] = (old_bias - arrays[f"{node.name}.running_mean"]) * scale + arrays[f"{node.name}.bias"]
        folded_into[node.name] = conv.name
    if not folded_into:
        return case
    nodes = []
    for node in graph.nodes:
        if node.name in folded_into:
            continue
        inputs = tuple(_skip(ref, folded_into, ops_by_name) for ref in node.inputs)
        attrs = dict(node.attrs, bias=True) if node.name in folded_into.values() else node.attrs
        nodes.append(Node(node.name, node.op, inputs, attrs))
    outputs = tuple(_skip(o, folded_into, ops_by_name) for o in graph.outputs)
    for bn in folded_into:
        for param in ("weight", "bias", "running_mean", "running_var"):
            arrays.pop(f"{bn}.{param}")
    return replace(case, graph=Graph(graph.inputs, tuple(nodes), outputs), arrays=arrays)


def _skip(ref, folded_into, ops_by_name):
    """A reference to a folded BN now reads the BN's input."""
    while ref in folded_into:
        ref = ops_by_name[ref].inputs[0]
    return ref


def register(api):
    on_every_device(lambda suffix, base: api.add_transformation(f"canary-bnfold-nested{suffix}", base=base, transform=fold_batch_norms))
