"""Every op, in both frameworks, can be written as source for a reproducer, and that source
computes bit for bit what the implementation the campaign runs computes (fuzzer/reproducers/op_source.py).

The written source is our own op code read back with `inspect`; executing it here is running
our code, not data."""

from __future__ import annotations

import numpy as np
import pytest

from fuzzer.arrays import materialize
from fuzzer.backends import get_backend
from fuzzer.drawing.generate import generate_case
from fuzzer.drawing.layouts import apply_layout
from fuzzer.ir import Graph, Node, TensorSpec, infer_shapes
from fuzzer.ops import registry
from fuzzer.reproducers.op_source import Source, literal
from fuzzer.reproducers.program_source import argument_names, graph_function

OP_NAMES = sorted(name for name, op in registry().items() if op.float_dtypes)  # integer-only ops: test_exact_dtypes.py
BACKENDS = {"torch": get_backend("torch-eager:cpu:float32"), "jax": get_backend("jax-eager:cpu:float32")}


def _single_op_case(name: str):
    for seed in range(40):
        case = generate_case(seed, op_names=[name], max_nodes=1)
        if name in case.graph.op_names():
            return case
    pytest.fail(f"no case with {name} in 40 seeds")


def _run_written(case, framework: str) -> list[np.ndarray]:
    backend = BACKENDS[framework]
    source = Source(fallback=False)  # an op of ours must always stand alone
    graph = graph_function(case, backend.impl_for, source)
    code = "\n".join(source.imports) + "\n\n" + source.text() + "\n\n" + graph
    namespace: dict = {}
    exec(compile(code, f"<{framework} source of {case.graph.op_names()}>", "exec"), namespace)  # our own op code
    if framework == "torch":
        import torch

        args = [torch.from_numpy(np.ascontiguousarray(case.arrays[n], dtype=np.float32)) for n in argument_names(case)]
        for index, spec in enumerate(case.graph.inputs):
            args[index] = apply_layout(args[index], spec.layout)
        with torch.no_grad():
            return [o.detach().to(torch.float64).numpy() for o in namespace["graph"](*args)]
    import jax.numpy as jnp

    args = [jnp.asarray(case.arrays[n], dtype=jnp.float32) for n in argument_names(case)]
    return [np.asarray(o, dtype=np.float64) for o in namespace["graph"](*args)]


@pytest.mark.parametrize("framework", sorted(BACKENDS))
@pytest.mark.parametrize("name", OP_NAMES)
def test_written_op_source_computes_what_the_implementation_computes(name, framework):
    case = _single_op_case(name)
    expected = BACKENDS[framework].run(case)
    actual = _run_written(case, framework)
    for a, e in zip(actual, expected):
        np.testing.assert_array_equal(a, e, err_msg=f"{name} written as {framework} source computes something else")


# Dims as users spell them: from the end, one int where a tuple is also taken, in any order.
DIM_SPELLINGS = [
    ("sum", {"dims": [-1, 0], "keepdim": False}),
    ("mean", {"dim": -2, "keepdim": True}),
    ("var", {"dims": [2, -3], "keepdim": False, "correction": 1}),
    ("norm", {"dim": -1, "keepdim": True, "p": "inf"}),
    ("logsumexp", {"dims": [-1, -2], "keepdim": False}),
    ("prod", {"dim": -3, "keepdim": True}),
    ("argmax", {"dim": -1, "keepdim": False}),
    ("permute", {"perm": [-1, 0, -2]}),
    ("transpose", {"dim0": -1, "dim1": 0}),
    ("flatten", {"start_dim": -2, "end_dim": -1}),
]


@pytest.mark.parametrize("name, attrs", DIM_SPELLINGS, ids=[f"{name}-{attrs}" for name, attrs in DIM_SPELLINGS])
def test_negative_and_single_int_dims_agree_with_the_reference_in_both_frameworks_and_their_source(name, attrs):
    graph = Graph((TensorSpec("x0", (2, 3, 4)),), (Node("n0", name, ("x0",), attrs),), ("n0",))
    case = materialize(graph, seed=0)
    (expected,) = get_backend("numpy-ref").run(case)
    assert expected.shape == infer_shapes(graph)["n0"]
    for framework, backend in BACKENDS.items():
        (computed,) = backend.run(case)
        np.testing.assert_allclose(computed, expected, rtol=1e-5, err_msg=f"{name} {attrs} in {framework}")
        (written,) = _run_written(case, framework)
        np.testing.assert_array_equal(written, computed, err_msg=f"{name} {attrs} written as {framework} source")


def test_literal_writes_non_finite_floats_and_tuples_as_source():
    assert literal({"a": [1.5, float("inf")], "b": (2,), "c": float("nan")}) == \
        "{'a': [1.5, float('inf')], 'b': (2,), 'c': float('nan')}"


def test_specializing_computes_literal_methods_but_no_dunder_attribute():
    # Attribute values from a case file reach op_source as literals; the restricted eval that folds
    # them must never follow a dunder attribute (the usual way out of such an eval).
    import ast

    from fuzzer.reproducers.op_source import _UNKNOWN, _known

    assert _known(ast.parse("'same'.upper()", mode="eval").body) == "SAME"
    assert _known(ast.parse("().__class__.__base__.__subclasses__()", mode="eval").body) is _UNKNOWN
    assert _known(ast.parse("'x'.__class__", mode="eval").body) is _UNKNOWN
