"""Integer and bool tensors (fuzzer/exact_dtypes.py): stored exactly, run by torch and jax with the
integer semantics torch documents, judged exactly (fuzzer/oracle/exact.py), Python scalars of every kind
as region keys, and short campaigns that find faults planted only there (tests/plugins/integer_faults.py)."""

import math
from pathlib import Path

import numpy as np
import pytest

from conftest import planted_fault_campaign
from fuzzer import oracle, verdicts
from fuzzer.arrays import from_npy_bytes, materialize, to_npy_bytes
from fuzzer.backends import get_backend
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.drawing.regimes import INTEGER_REGIMES
from fuzzer.drawing.region_keys import attribute_regions
from fuzzer.exact_dtypes import EDGE_INTEGERS, EXACT_DTYPES
from fuzzer.ir import Case, Graph, Node, TensorSpec, hash_content
from fuzzer.judging.check import check_case
from fuzzer.ops import registry

PLUGIN = str(Path(__file__).parent / "plugins" / "integer_faults.py")
EXACT_OPS = sorted(name for name, op in registry().items() if op.exact_dtypes)


def one_op_case(op: str, values: dict, attrs: dict | None = None) -> Case:
    arrays = {name: np.asarray(v, dtype=np.int64) for name, v in values.items()}
    inputs = tuple(TensorSpec(name, array.shape) for name, array in arrays.items())
    graph = Graph(inputs, (Node("n0", op, tuple(arrays), attrs or {}),), ("n0",))
    return Case(graph, arrays, 0)


def test_integer_values_round_trip_exactly_and_the_case_hash_tells_int64_extremes_apart():
    top = np.array([2**63 - 1, -2**63, 2**53 + 1], dtype=np.int64)
    back = from_npy_bytes(to_npy_bytes(top))
    assert back.dtype == np.int64 and np.array_equal(back, top)
    graph = '{"inputs":[]}'
    assert hash_content(graph, {"x": top}) != hash_content(graph, {"x": top - 1}), "float64 would make them equal"


def test_integer_regimes_draw_exact_int64_values_with_dtype_edges():
    generator = CaseGenerator(["add", "mul", "reshape"], 3, INTEGER_REGIMES)
    values = np.concatenate([a.ravel() for seed in range(40) for a in generator.case(seed).arrays.values()])
    assert values.dtype == np.int64
    assert {2**63 - 1, -2**63, 2**31 - 1, 255, -1, 0} & set(values.tolist()), "edge values are drawn"
    assert set(values.tolist()) <= set(range(-8, 9)) | set(EDGE_INTEGERS)


def test_every_exact_dtype_declared_is_a_known_one():
    for name, op in registry().items():
        assert set(op.exact_dtypes) <= set(EXACT_DTYPES), name
        assert op.float_dtypes or op.exact_dtypes or op.complex_dtypes, f"{name} runs on no dtype"


@pytest.mark.parametrize("name", EXACT_OPS)
def test_each_integer_op_equals_its_reference_in_torch_and_jax_on_edge_values(name):
    """The exact reference has torch's documented semantics (wraparound, floor and trunc division,
    remainder's sign, shifts past the width, sum of int32 in int64): torch eager equals it, and so
    does jax eager, whose functions compute in torch's dtypes (jnp.sum of uint8 given dtype=int64)."""
    op = registry()[name]
    generator = CaseGenerator([name], 1, INTEGER_REGIMES)
    for dtype in op.exact_dtypes:
        for seed in range(1):
            case = generator.case(seed)
            case = materialize(case.graph, case.seed, {spec.name: "integer-edges" for spec in case.graph.inputs})
            backends = [get_backend(f"torch-eager:cpu:{dtype}"), get_backend(f"jax-eager:cpu:{dtype}")]
            result = check_case(case, backends)
            by_backend = {v.backend: v for v in result.verdicts}
            assert by_backend[backends[0].name].verdict == verdicts.AGREE, (dtype, case.graph.to_json(), by_backend)
            assert by_backend[backends[1].name].verdict == verdicts.AGREE, (dtype, case.graph.to_json(), by_backend)


def judge(case: Case, dtype: str, outputs: list) -> oracle.BackendVerdict:
    reference = oracle.compute_reference(case, {dtype})
    return oracle.judge_outputs(f"torch-eager:cpu:{dtype}", dtype, outputs, reference)


def test_an_integer_output_is_judged_exactly_naming_the_entry_and_both_values():
    case = one_op_case("mul", {"x0": [3, 2**31 - 1], "x1": [7, 2]})
    assert judge(case, "int32", [np.array([21, -2])]).verdict == verdicts.AGREE, "int32 wraps: (2^31 - 1) * 2 = -2"
    saturated = judge(case, "int32", [np.array([21, 2**31 - 1])])
    assert saturated.verdict == verdicts.MISMATCH
    assert saturated.detail == "1 entries differ, e.g. at [1]: 2147483647 where the reference is -2 (int32)"
    assert judge(case, "int32", [np.array([22, -2])]).verdict == verdicts.MISMATCH, "one unit off is wrong"


def test_an_integer_tensor_with_a_float_scalar_is_float_and_a_result_of_another_kind_is_a_mismatch():
    case = one_op_case("add_scalar", {"x0": [1, -3]}, {"value": 1.5})
    assert judge(case, "int32", [np.array([2.5, -1.5])]).verdict == verdicts.AGREE
    assert judge(case, "int32", [np.array([2.0, -2.0])]).verdict == verdicts.MISMATCH
    integer = judge(case, "int32", [np.array([2, -1])])
    assert integer.verdict == verdicts.MISMATCH and "integer result where the reference is float" in integer.detail
    same_dtype = one_op_case("add_scalar", {"x0": [2**31 - 1]}, {"value": 1})
    assert judge(same_dtype, "int32", [np.array([-2**31])]).verdict == verdicts.AGREE, "an int scalar keeps int32, wrapping"


def test_an_op_given_a_dtype_it_does_not_take_is_unsupported_not_a_finding():
    graph = Graph((TensorSpec("x0", (3,)), TensorSpec("x1", (3,))),
                  (Node("n0", "lt", ("x0", "x1")), Node("n1", "neg", ("n0",))), ("n1",))
    case = Case(graph, {"x0": np.array([1, 2, 3]), "x1": np.array([3, 2, 1])}, 0)
    result = check_case(case, [get_backend("torch-eager:cpu:int32")])
    assert [v.verdict for v in result.verdicts] == [verdicts.UNSUPPORTED] and not result.findings
    assert "applies neg to a bool value" in result.verdicts[0].detail


@pytest.mark.parametrize("value, keys", [(1, {"value=1"}), (1.0, set()), (True, {"value=True"}), ("inf", {"value=inf"}),
                                         ("nan", {"value=nan"}), (-0.0, {"value=0"})])
def test_the_kind_of_a_python_scalar_is_a_region_key(value, keys):
    """An int 1 is not a float 1.0: torch keeps an int tensor's dtype for the first, promotes for the second."""
    assert attribute_regions({"value": value}) == keys


def test_scalar_ops_draw_every_kind_of_python_scalar():
    drawn = [node.attrs["value"] for seed in range(200) for node in CaseGenerator(["add_scalar"], 1).case(seed).graph.nodes]
    kinds = {type(value).__name__ for value in drawn} | {value for value in drawn if isinstance(value, str)}
    assert {"int", "bool", "float", "inf", "-inf", "nan"} <= kinds
    assert any(value == 0 and math.copysign(1, value) < 0 for value in drawn if isinstance(value, float)), "-0.0 is drawn"


@pytest.mark.slow
@pytest.mark.parametrize("backend, ops, culprit", [
    ("fault-saturating-mul", "mul,add,reshape,sum", "mul"),
    # -m long: the second (CI's 15 minutes); the judging tests above cover float-scalar promotion.
    pytest.param("fault-int-plus-float-scalar", "add_scalar,add,reshape,sum", "add_scalar", marks=pytest.mark.long),
])
def test_a_short_integer_campaign_finds_a_fault_planted_on_integers(tmp_path, backend, ops, culprit):
    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, backend, ops)
    assert {row["signature"] for row in rows} == {f"mismatch | {backend} | {culprit}"}
    assert [node["op"] for node in shrunk["graph"]["nodes"]] == [culprit]


def test_the_shrinker_cuts_no_integer_node_into_an_input():
    """A GPU campaign's shrinks of integer findings stopped at an internal error: cutting a node into an
    input took its float64 value, and shift_right has no float64 (an int32 value also differs from int64's)."""
    from fuzzer.shrinking.shrink import pass_cut_inputs

    graph = Graph((TensorSpec("x", (4,)),), (Node("a", "abs", ("x",), {}), Node("s", "shift_right", ("a",), {"shift": 33})), ("s",))
    case = Case(graph, {"x": np.array([-6, 8, 0, 3], dtype=np.int64)}, seed=0)
    assert list(pass_cut_inputs(case, "shift_right")) == []


def test_an_integer_finding_s_minimal_script_compares_exactly_and_exits_1(tmp_path):
    """`fuzz export` of an integer finding stopped at an internal error (the float oracle's masks): its
    script now writes the exact reference and allows no error."""
    import subprocess
    import sys

    from fuzzer.plugins import load_plugin
    from fuzzer.reproducers.minimal_reproducer import build_minimal_script

    load_plugin(PLUGIN)
    graph = Graph((TensorSpec("x", (3,)), TensorSpec("y", (3,))), (Node("m", "mul", ("x", "y"), {}),), ("m",))
    case = Case(graph, {"x": np.array([2**20, 3, -7], dtype=np.int64), "y": np.array([2**12, 5, 2], dtype=np.int64)}, 0)
    script = build_minimal_script(case, get_backend("fault-saturating-mul"), "mismatch | fault-saturating-mul | mul",
                                  {"verdict": "mismatch", "culprit": "mul"})
    (tmp_path / "repro.py").write_text(script)
    ran = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 1 and "(allowed error 0)" in ran.stderr, (script, ran.stderr)


def test_jax_sums_multiplies_and_scans_integers_in_int64_as_torch_does():
    # GPU campaign (uint8): sum of [0] minus 128, trunc-divided by 127, is -1 in torch (the sum is int64);
    # jnp.sum of uint8 is uint64, so 0 - 128 wrapped to 2^64 - 128 and jax-eager gave 145249953336295681.
    chain = Graph((TensorSpec("x0", (1, 2)),),
                  (Node("n0", "sum", ("x0",), {"dims": [1], "keepdim": False}),
                   Node("n1", "add_scalar", ("n0",), {"value": -128}),
                   Node("n2", "trunc_divide_scalar", ("n1",), {"value": 127})), ("n2",))
    scan = Graph((TensorSpec("x0", (2,)),), (Node("n0", "cumsum", ("x0",), {"dim": 0}),
                                             Node("n1", "prod", ("n0",), {"dim": 0, "keepdim": False})), ("n1",))
    for case, dtype in ((Case(chain, {"x0": np.array([[0, 0]])}, 0), "uint8"),
                        (Case(scan, {"x0": np.array([2**31 - 1, 2**31 - 1])}, 0), "int32")):
        result = check_case(case, [get_backend(f"torch-eager:cpu:{dtype}"), get_backend(f"jax-eager:cpu:{dtype}")])
        assert [v.verdict for v in result.verdicts] == [verdicts.AGREE] * 2, result.verdicts
    assert [np.asarray(y).tolist() for y in get_backend("jax-eager:cpu:uint8").run(Case(chain, {"x0": np.array([[0, 0]])}, 0))] == [[-1]]


def test_a_node_whose_float_operand_an_integer_backend_cannot_be_fed_is_blamed_not_its_producer():
    """GPU integer campaign: (x + nan) * False on torch.compile int32 was blamed on add_scalar, because
    mul_scalar cut out alone got its nan operand cast to int32 (and agreed); the first wrong node is."""
    from fuzzer.judging.localize import localize
    from fuzzer.plugins import load_plugin

    load_plugin(PLUGIN)
    graph = Graph((TensorSpec("x", (2,)),), (Node("a", "add_scalar", ("x",), {"value": "nan"}),
                                             Node("m", "mul_scalar", ("a",), {"value": False})), ("m",))
    case = Case(graph, {"x": np.array([0, 3])}, 0)
    backend = get_backend("fault-mul-by-zero-drops-nan")
    assert check_case(case, [backend]).verdicts[0].verdict == verdicts.NAN_INF
    assert localize(backend, case)[0] == "mul_scalar"
    # Planted elsewhere: the same graph with a wrong add_scalar is still blamed on add_scalar.
    assert localize(get_backend("fault-int-plus-float-scalar"), _add_then_double(case, 1.5))[0] == "add_scalar"


def _add_then_double(case: Case, value) -> Case:
    nodes = (Node("a", "add_scalar", ("x",), {"value": value}), Node("m", "mul_scalar", ("a",), {"value": 2}))
    return Case(Graph(case.graph.inputs, nodes, ("m",)), case.arrays, 0)
