"""Every op, in both frameworks, can be written as source for a reproducer, and that source
computes bit for bit what the implementation the campaign runs computes (fuzzer/op_source.py).

The written source is our own op code read back with `inspect`; executing it here is running
our code, not data."""

from __future__ import annotations

import numpy as np
import pytest

from fuzzer.backends import get_backend
from fuzzer.generate import generate_case
from fuzzer.layouts import apply_layout
from fuzzer.op_source import Source, literal
from fuzzer.ops import registry
from fuzzer.program_source import argument_names, graph_function

OP_NAMES = sorted(registry())
BACKENDS = {"torch": get_backend("torch-eager:cpu:float32"), "jax": get_backend("jax-eager:cpu:float32")}


def _single_op_case(name: str):
    for seed in range(40):
        case = generate_case(seed, op_names=[name], max_nodes=1)
        if name in case.graph.op_names():
            return case
    pytest.fail(f"no case with {name} in 40 seeds")


def _run_written(case, framework: str) -> list[np.ndarray]:
    backend = BACKENDS[framework]
    source = Source()
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


def test_literal_writes_non_finite_floats_and_tuples_as_source():
    assert literal({"a": [1.5, float("inf")], "b": (2,), "c": float("nan")}) == \
        "{'a': [1.5, float('inf')], 'b': (2,), 'c': float('nan')}"
