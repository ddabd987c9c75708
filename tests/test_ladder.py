"""Size ladders (fuzzer/drawing/ladder.py): 2^k - 1, 2^k and 2^k + 1 elements on one reduction or contraction
axis, drawn by the ladder regime within its bound, named as region keys, steered to, and reaching a
fault (tests/plugins/ladder_faults.py) that no other regime's sizes reach."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import planted_fault_campaign
from fuzzer.arrays import materialize
from fuzzer.backends import get_backend
from fuzzer.backends.batching import judged_copies
from fuzzer.drawing import ladder
from fuzzer.drawing.generate import VMAPPED_ELEMENTS, CaseGenerator
from fuzzer.drawing.regimes import BY_NAME, REGIMES
from fuzzer.drawing.region_keys import drawn_regions
from fuzzer.drawing.regions import focus_of, graph_regions
from fuzzer.errors import UserError
from fuzzer.ir import Graph, Node, TensorSpec, infer_shapes
from fuzzer.judging.check import check_case
from fuzzer.ops import get_op, registry
from fuzzer.ops._common import DIMS
from fuzzer.ops.matmul import TILE_EDGE_SIZES
from fuzzer.reproducers.reproducer import build_script

PLUGIN = str(Path(__file__).parent / "plugins" / "ladder_faults.py")
LADDER = BY_NAME["ladder"]
FAULTY = {ladder.size(power, 1) for power in ladder.POWERS if power >= 16}  # the plugin's faulty extents


def test_a_rung_is_named_and_read_back():
    assert [ladder.rung_of(n) for n in (31, 32, 33, 65537, 131071)] == [(5, -1), (5, 0), (5, 1), (16, 1), (17, -1)]
    assert [ladder.rung_of(n) for n in (7, 100, 2**18, 2**18 + 1)] == [None] * 4
    assert ladder.region("reduction", 16, 1) == "ladder=reduction:2^16+1"
    assert ladder.parse("ladder=contraction:2^9-1") == ("contraction", 9, -1)
    assert ladder.parse("dim<0") is None
    assert len(ladder.regions("reduction")) == 3 * len(ladder.POWERS)


def test_every_reduction_and_contraction_declares_its_axes():
    families = ("reduce", "softmax")
    named = ("linear", "matmul", "bmm", "einsum", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "layer_norm", "rms_norm")
    for name, op in registry().items():
        if op.family in families or name in named:
            assert op.ladder is not None and op.ladder.kind in ladder.KINDS, name
    assert get_op("sum").ladder.axes({"dims": [-1, 0], "keepdim": False}, [(2, 3, 4)]) == (0, 2)
    assert get_op("matmul").ladder.axes({}, [(2, 3, 4), (4, 5)]) == (2,)
    assert get_op("einsum").ladder.axes({"equation": "bhqd,bhkd->bhqk"}, [(1, 2, 3, 4)]) == (3,)
    assert get_op("conv2d").ladder.axes({"groups": 2}, [(1, 4, 5, 5)]) == (), "a grouped conv's groups must divide the rung"


@pytest.fixture(scope="module")
def laddered():
    generator = CaseGenerator(regimes=(LADDER,))
    return [generator.case(seed).graph for seed in range(150)]


def test_the_ladder_regime_puts_a_rung_on_a_reducing_axis_and_stays_in_its_bound(laddered):
    rungs = set()
    for graph in (graph for graph in laddered if not graph.vmapped):
        first = graph.nodes[0]
        op, shapes = get_op(first.op), infer_shapes(graph)
        assert op.ladder is not None, first.op
        operand = tuple(shapes[first.inputs[0]])
        found = {ladder.rung_of(operand[axis]) for axis in op.ladder.axes(first.attrs, [operand])} - {None}
        assert found, (first, operand)
        rungs |= found
        assert max(int(np.prod(shape)) for shape in shapes.values()) <= LADDER.max_elements
        assert all(int(np.prod(p)) <= LADDER.max_elements for p in op.params(first.attrs, [operand]).values())
    assert {power for power, _ in rungs} >= {7, 12, 17} and {offset for _, offset in rungs} == set(ladder.OFFSETS)


def test_no_other_regime_draws_the_rungs_past_2_to_the_16():
    others = tuple(regime for regime in REGIMES if not regime.ladder)
    sizes = {*DIMS, *TILE_EDGE_SIZES, *(d for r in others for d in (*r.large_dims, *r.leading_dims, *r.contraction_dims))}
    assert max(sizes) < 2**16
    generator = CaseGenerator(["sum"], regimes=others)
    extents = {size for seed in range(300) for spec in generator.case(seed).graph.inputs for size in spec.shape}
    assert not extents & FAULTY and max(extents) < 2**16


def test_a_laddered_node_has_its_rung_key():
    graph = Graph((TensorSpec("x0", (3, 65537)), TensorSpec("x1", (2, 255)), TensorSpec("x2", (255, 4))),
                  (Node("n0", "sum", ("x0",), {"dim": -1, "keepdim": False}), Node("n1", "softmax", ("x0",), {"dim": 0}),
                   Node("n2", "matmul", ("x1", "x2"), {})), ("n0", "n1", "n2"), "ladder")
    assert {key for key in graph_regions(graph) if "ladder=" in key} == {
        "sum:ladder=reduction:2^16+1", "matmul:ladder=contraction:2^8-1"}, "softmax reduces the 3: no rung"


@pytest.mark.parametrize("region_key", ["sum:ladder=reduction:2^17+1", "softmax:ladder=reduction:2^5-1",
                                        "linear:ladder=contraction:2^16", "conv1d:ladder=contraction:2^13+1"])
def test_steering_reaches_a_rung_in_a_few_graphs(region_key):
    generator = CaseGenerator()
    op, _, region = region_key.partition(":")
    for seed in range(4):
        graph = generator.case(seed, focus_of(region_key)).graph
        first = graph.nodes[0]
        if first.op == op and region in drawn_regions(get_op(op), first.attrs, tuple(infer_shapes(graph)[first.inputs[0]])):
            return
    pytest.fail(f"{region_key} not reached in 4 steered graphs")


@pytest.mark.long  # CI's 15 minutes: the ladder's draws and rungs above stay in CI
@pytest.mark.parametrize("op", ["sum", "matmul"])
def test_a_short_campaign_finds_an_op_wrong_only_on_a_high_rung(tmp_path, op):
    backend = f"fault-ladder-{op}"
    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, backend, op, max_cases=80, shrink_time=10)
    assert {row["signature"] for row in rows} == {f"mismatch | {backend} | {op}"}
    assert [node["op"] for node in shrunk["graph"]["nodes"]] == [op]
    assert set(shrunk["graph"]["inputs"][0]["shape"]) & FAULTY, "the shrinker keeps the rung"


def test_a_vmapped_rung_is_stored_with_the_graph_and_a_bad_one_refused():
    graph = Graph((TensorSpec("x0", (3,)),), (Node("n0", "sum", ("x0",), {"dim": 0, "keepdim": False}),), ("n0",), "ladder", 16385)
    assert Graph.from_json(graph.to_json()) == graph and '"vmapped":16385' in graph.to_json()
    assert "vmapped" not in Graph(graph.inputs, graph.nodes, graph.outputs).to_json(), "older graphs keep their hashes"
    assert graph_regions(graph) == {"sum:dim>=0", "sum:keepdim=False", "sum:ladder=vmapped:2^14+1"}
    for bad in (-1, 2**20, "16385", 2.5, True):
        with pytest.raises(UserError, match="'vmapped' must be a whole number from 0 to 131073"):
            Graph.from_dict({**graph.to_dict(), "vmapped": bad})


def test_a_third_of_ladder_graphs_put_their_rung_on_the_vmapped_axis_each_tensor_within_its_share(laddered):
    vmapped = [graph for graph in laddered if graph.vmapped]
    assert 0.2 < len(vmapped) / len(laddered) < 0.5
    for graph in vmapped:
        assert ladder.rung_of(graph.vmapped)
        assert max(int(np.prod(s)) for s in infer_shapes(graph).values()) <= max(VMAPPED_ELEMENTS, LADDER.max_elements // graph.vmapped)


def test_jax_vmap_judges_the_copies_at_the_powers_of_two_below_a_rung_and_the_last():
    assert judged_copies(3) == [1, 2]
    judged = judged_copies(16385)
    assert {1, 8192, 16383, 16384} | {2**j + d for j in (11, 12, 13) for d in (-1, 0, 1)} == set(judged)
    graph = Graph((TensorSpec("x0", (3,)),), (Node("n0", "linear", ("x0",), {"out_features": 3, "bias": False}),
                                             Node("n1", "mul", ("n0", "n0"), {}), Node("n2", "sum", ("n1",), {"dim": 0, "keepdim": False})),
                  ("n2",), "ladder", 16385)
    case = materialize(graph, 0)
    result = check_case(case, [get_backend("jax-vmap:cpu:float32")])
    assert result.verdict == "agree", result.verdicts


@pytest.mark.long
def test_a_laddered_jax_vmap_reproducer_redraws_the_copies_the_campaign_judged(tmp_path):
    """The reproducer of a 1,025-copy batch exits 0 as it is and 1 when the batching goes wrong past copy 1,024
    (its copies are the campaign's: it judges them against the campaign's reference)."""
    from test_reproducers import _run

    graph = Graph((TensorSpec("x0", (3,)),), (Node("n0", "linear", ("x0",), {"out_features": 3, "bias": True}),
                                             Node("n1", "sum", ("n0",), {"dim": 0, "keepdim": False})), ("n1",), "ladder", 1025)
    script = build_script(materialize(graph, 0), get_backend("jax-vmap:cpu:float32"), "planted fault past 1,024 copies")
    fault = ("import jax\nvmap = jax.vmap\n"
             "jax.vmap = lambda fn, **kw: (lambda *xs: [o.at[1024:].multiply(1.01) for o in vmap(fn, **kw)(*xs)])\n")
    assert _run(script, tmp_path, None).returncode == 0
    assert _run(script, tmp_path, fault).returncode == 1


def feeds(graph: Graph, producer: str, consumer: str) -> bool:
    """Does a `producer` node's value reach a `consumer` node?"""
    nodes = {node.name: node for node in graph.nodes}
    return any(node.op == consumer and any(nodes[name].op == producer for name in graph.ancestors(node.inputs) if name in nodes)
               for node in graph.nodes)


def test_the_ladder_draws_jax_39103s_pattern_a_shared_matrix_times_a_vmapped_row_then_a_sum():
    generator = CaseGenerator(["mv", "sum"], regimes=(LADDER,))
    drawn = [generator.case(seed).graph for seed in range(300)]
    assert any(graph.vmapped > 2**14 and feeds(graph, "mv", "sum") for graph in drawn)


JAX_39103 = Graph((TensorSpec("x0", (3,)),), (Node("n0", "mv", ("x0",), {"out_features": 4}),
                                              Node("n1", "sum", ("n0",), {"dim": -1, "keepdim": False})), ("n1",), "ladder", 16385)


@pytest.mark.skipif(__import__("jax").__version__ != "0.10.2", reason="jax#39103 is a bug of jax 0.10.2")
def test_jax_vmap_on_a_laddered_batch_finds_jax_39103_from_16385_rows():
    """Drawn by the ladder at seed 1448 of an mv,sum ladder campaign: wrong under jit(vmap) from row 16,384 on."""
    backend = get_backend("jax-vmap:cpu:float64")
    assert check_case(materialize(JAX_39103, 0), [backend]).verdict == "mismatch"
    assert check_case(materialize(replace(JAX_39103, vmapped=16384), 0), [backend]).verdict == "agree"
