"""Generic tests over the op registry: every op, present and future, with no test edits.

For each op, hypothesis draws small single-node graphs through the op's own
`accepts`, `draw_attrs` and `draw_operands`, and the float64 backends (torch
eager, jax jit) must agree with the float64 numpy reference, whose output shape
must be the one the shape rule infers.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from click.testing import CliRunner
from hypothesis import strategies as st

from fuzzer.arrays import materialize
from fuzzer.backends import get_backend
from fuzzer.cli import main
from fuzzer.drawing.regimes import MAGNITUDE_PROFILES, SMALL_PROFILES
from fuzzer.ir import Graph, Node, TensorSpec, infer_shapes
from fuzzer.ops import OpDef, registry
from fuzzer.ops._common import DIMS
from fuzzer.ops.numerics import Numerics

# Ops on float tensors; the integer-only ones (bitwise, shifts) are tests/test_exact_dtypes.py's.
OP_NAMES = sorted(name for name, op in registry().items() if op.float_dtypes)
RANKS = (1, 2, 3, 4, 5)
# Keeps every drawn input small: the references are python loops in places, and
# jax compiles once per new shape.
MAX_INPUT_ELEMENTS = 1024

RTOL, ATOL = 1e-7, 1e-9

REFERENCE = get_backend("numpy-ref")
TORCH = get_backend("torch-eager:cpu:float64")
JAX_JIT = get_backend("jax-jit:cpu:float64")
# jax.jit compiles each drawn case anew (new shapes): ~85% of the time when both took 25 cases an
# op. CI judges torch eager on 25 cases of each op and jax-jit on 10; `pytest -m long`, jax-jit on 50.
SETTINGS = dict(deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.filter_too_much])


# -- the declaration itself ---------------------------------------------------


@pytest.mark.parametrize("name", OP_NAMES)
def test_op_declares_name_implementations_and_sensitivity(name):
    op = registry()[name]
    assert isinstance(op, OpDef)
    assert op.name and op.name == name
    for family in ("numpy", "torch", "jax"):
        assert callable(op.impl(family)), f"{name} has no {family} implementation"
    assert callable(op.infer) and callable(op.accepts) and callable(op.draw_attrs) and callable(op.params)
    assert op.numerics.sensitivity >= 1
    low, high = op.arity
    assert 1 <= low <= high
    assert op.family, f"{name} has no family"


@pytest.mark.parametrize("name", OP_NAMES)
def test_every_numerics_fact_an_op_declares_says_why(name):
    numerics = registry()[name].numerics
    assert not numerics.unexplained(), f"{name} declares {numerics.unexplained()} without a reason in Numerics(why=...)"
    assert set(numerics.why) <= set(numerics.declared()), f"{name} gives reasons for facts it leaves at their defaults"


def test_a_reason_for_no_numerics_fact_is_refused_by_name():
    with pytest.raises(TypeError, match="'sensitivty'.*no numerics facts"):
        Numerics(sensitivity=2.0, why={"sensitivty": "typo"})


def test_an_opdef_given_a_numerics_fact_directly_is_refused_by_name():
    relu = registry()["relu"]
    with pytest.raises(TypeError, match="unexpected keyword argument 'sensitivity'"):
        OpDef(name="relu2", infer=relu.infer, reference=relu.reference, torch=relu.torch, jax=relu.jax,
              accepts=relu.accepts, sensitivity=2.0)


def test_a_reference_is_the_float64_math_and_a_narrower_dtype_runs_the_kernel_model():
    # float16 layer_norm of a constant row with eps = 1e-12: the float64 math run in float16 adds
    # eps to 0 as 0 and gives 0 / 0 = nan; the kernel model holds the statistics in float32: 0.
    op, attrs = registry()["layer_norm"], {"normalized_shape": [4], "eps": 1e-12, "affine": False}
    row = [np.full(4, 3.0, dtype=np.float16)]
    with np.errstate(invalid="ignore"):
        assert np.isnan(op.reference(row, {}, attrs)).all()
    assert (op.impl("numpy")(row, {}, attrs) == 0).all()
    exact = [row[0].astype(np.float64)]
    assert np.array_equal(op.impl("numpy")(exact, {}, attrs), op.reference(exact, {}, attrs))


def test_fuzz_ops_prints_an_ops_numerics_with_the_reasons_and_lists_them_in_json():
    text = CliRunner().invoke(main, ["ops", "--numerics", "layer_norm"])
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert [line.split(" = ")[0] for line in lines] == ["sensitivity", "forward_error", "low_precision_model"]
    assert lines[0] == f"sensitivity = 4.0: {registry()['layer_norm'].numerics.why['sensitivity']}"
    assert "declares nothing" in CliRunner().invoke(main, ["ops", "--numerics", "relu"]).output
    rows = {row["name"]: row for row in json.loads(CliRunner().invoke(main, ["ops", "--json"]).output)}
    assert rows["relu"]["numerics"] == []
    assert {fact["fact"]: fact["value"] for fact in rows["sin"]["numerics"]} == {"forward_error": "_argument_rounding",
                                                                                  "period": 2 * math.pi}


def test_fuzz_ops_refuses_the_numerics_of_an_unknown_op():
    result = CliRunner().invoke(main, ["ops", "--numerics", "layer_nrom"])
    assert result.exit_code == 2 and "'layer_nrom'" in result.output and "fuzz ops" in result.output


@pytest.mark.parametrize("name", OP_NAMES)
def test_op_accepts_some_small_shape(name):
    assert _accepted_ranks(registry()[name]), f"{name} accepts no shape of rank {RANKS[0]}..{RANKS[-1]}"


def test_registry_has_the_seed_bug_ops():
    assert {"conv2d", "layer_norm", "dropout", "gru", "lstm", "matmul", "linear", "permute", "transpose"} <= set(OP_NAMES)


# -- single-op graphs ---------------------------------------------------------


def _accepted_ranks(op: OpDef) -> list[int]:
    probes = (1, 2, 3)
    return [rank for rank in RANKS if any(op.accepts((d,) * rank) for d in probes)]


@st.composite
def first_shapes(draw, op: OpDef):
    """A shape of a rank the op accepts, with at most MAX_INPUT_ELEMENTS elements."""
    rank = draw(st.sampled_from(_accepted_ranks(op)))
    shape, budget = [], MAX_INPUT_ELEMENTS
    for _ in range(rank):
        d = draw(st.sampled_from([d for d in DIMS if d <= budget]))
        shape.append(d)
        budget //= d
    return tuple(shape)


@st.composite
def single_op_graphs(draw, name: str) -> Graph:
    op = registry()[name]
    # Shapes of an accepted rank may still be refused (e.g. the rnn caps batch * seq_len).
    shape = draw(first_shapes(op).filter(op.accepts))
    attrs = op.draw_attrs(draw, [shape])
    if op.draw_operands is not None:
        others = [tuple(s) for s in op.draw_operands(draw, shape, attrs)]
    else:
        others = [shape] * (op.arity[0] - 1)
    specs = [TensorSpec(f"x{i}", s) for i, s in enumerate([shape, *others])]
    node = Node("n0", name, tuple(spec.name for spec in specs), attrs)
    return Graph(tuple(specs), (node,), ("n0",))


@st.composite
def single_op_cases(draw, name: str):
    graph = draw(single_op_graphs(name))
    # Finite values of every magnitude; special values (inf, nan) are judged by the oracle's rules
    # in campaigns and tests/test_oracle.py, where the reference decides what is defined.
    profiles = {spec.name: draw(st.sampled_from(SMALL_PROFILES + MAGNITUDE_PROFILES)) for spec in graph.inputs}
    return materialize(graph, draw(st.integers(0, 2**32 - 1)), profiles)


def _describe(case) -> str:
    node = case.graph.nodes[0]
    shapes = [list(spec.shape) for spec in case.graph.inputs]
    return f"{node.op} attrs={node.attrs} input shapes={shapes} seed={case.seed}"


def assert_agrees_with_reference(backend, case):
    inferred = infer_shapes(case.graph)["n0"]
    (expected,) = REFERENCE.run(case)
    assert expected.shape == inferred, f"reference shape {expected.shape} != inferred {inferred}: {_describe(case)}"
    (actual,) = backend.run(case)
    assert actual.shape == expected.shape, f"{backend.name} shape {actual.shape} != {expected.shape}: {_describe(case)}"
    np.testing.assert_allclose(
        actual, expected, rtol=RTOL, atol=ATOL, err_msg=f"{backend.name} vs numpy-ref: {_describe(case)}"
    )


@pytest.mark.parametrize("name", OP_NAMES)
@settings(max_examples=25, **SETTINGS)
@given(data=st.data())
def test_float64_torch_agrees_with_reference(name, data):
    assert_agrees_with_reference(TORCH, data.draw(single_op_cases(name), label="case"))


@pytest.mark.parametrize("name", OP_NAMES)
@settings(max_examples=10, **SETTINGS)
@given(data=st.data())
def test_float64_jax_jit_agrees_with_reference(name, data):
    assert_agrees_with_reference(JAX_JIT, data.draw(single_op_cases(name), label="case"))


@pytest.mark.long
@pytest.mark.parametrize("name", OP_NAMES)
@settings(max_examples=50, **SETTINGS)
@given(data=st.data())
def test_float64_jax_jit_agrees_with_reference_on_50_cases(name, data):
    assert_agrees_with_reference(JAX_JIT, data.draw(single_op_cases(name), label="case"))


@pytest.mark.parametrize("name", OP_NAMES)
@settings(max_examples=25, **SETTINGS)
@given(data=st.data())
def test_drawn_attrs_satisfy_the_shape_rule_and_params_are_well_formed(name, data):
    graph = data.draw(single_op_graphs(name), label="graph")
    op = registry()[name]
    shapes = [spec.shape for spec in graph.inputs]
    out = op.infer(graph.nodes[0].attrs, shapes)
    assert all(isinstance(d, int) and d >= 1 for d in out)
    assert math.prod(out) >= 1
    for pname, pshape in op.params(graph.nodes[0].attrs, shapes).items():
        assert pname and "." not in pname
        assert all(isinstance(d, int) and d >= 1 for d in pshape), f"{pname} has shape {pshape}"


def test_the_op_registry_imports_without_hypothesis():
    """Ops are shipped to other Python environments that have numpy and one framework only
    (fuzzer/running/env_worker.py): no op module may need hypothesis before it draws attributes."""
    import subprocess
    import sys

    blocker = ("import sys\n"
               "class Block:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name.split('.')[0] == 'hypothesis': raise ImportError('hypothesis is blocked')\n"
               "sys.meta_path.insert(0, Block())\n"
               "from fuzzer.ops import registry\n"
               "import fuzzer.running.env_worker\n"
               "print(len(registry()))\n")
    done = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) == len(registry())
