"""A crash's culprit is the op that raises, also when it raises only on what an upstream op made
(a strided view of a permute), which isolation, feeding contiguous arrays, cannot give it."""

from __future__ import annotations

import numpy as np

from fuzzer import verdicts
from fuzzer.backends import get_backend
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.judging.check import check_case


def softmax_refusing_strided_inputs(xs, ps, attrs):
    """torch's softmax, raising as a kernel with a `.view` would on a non-contiguous input."""
    import torch

    if not xs[0].is_contiguous():
        raise RuntimeError("view size is not compatible with input tensor's size and stride")
    return torch.softmax(xs[0], dim=attrs["dim"])


def permute_then_softmax() -> Case:
    graph = Graph(
        [TensorSpec("x0", (2, 3, 4))],
        [Node("n0", "permute", ["x0"], {"perm": [2, 0, 1]}),
         Node("n1", "softmax", ["n0"], {"dim": -1})],
        ["n1"],
    )
    return Case(graph, {"x0": np.linspace(-1, 1, 24).reshape(2, 3, 4)}, seed=0)


def test_an_op_that_raises_only_on_an_upstream_layout_is_the_culprit():
    backend = get_backend("torch-eager:cpu:float32").derive("strict-softmax", {"softmax": softmax_refusing_strided_inputs})
    result = check_case(permute_then_softmax(), [backend])
    assert result.verdict == verdicts.CRASH
    assert result.findings[0].culprit == "softmax"


def test_a_clean_backend_has_no_crash_on_the_same_case():
    result = check_case(permute_then_softmax(), [get_backend("torch-eager:cpu:float32")])
    assert result.verdict == verdicts.AGREE
