"""Pairs of region keys of one node (fuzzer/drawing/region_pairs.py): declared from the keys, held by a node,
steered to, counted by a campaign, and reaching a fault planted only on a pair
(tests/plugins/pair_faults.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from conftest import fuzz, planted_fault_campaign
from fuzzer.corpus import Corpus
from fuzzer.drawing import tails
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.drawing.regimes import REGIMES
from fuzzer.drawing.region_pairs import declared_pairs, focus_of, node_pairs
from fuzzer.drawing.regions import STEER_TRIES, declared_regions, node_regions, steered_focus
from fuzzer.ir import Graph, Node, TensorSpec, infer_shapes

PLUGIN = str(Path(__file__).parent / "plugins" / "pair_faults.py")
EAGER = "torch-eager:cpu:float32"
FAULT = "fault-sum-strided-tail"


def test_pairs_are_declared_from_the_keys_of_one_op_by_family():
    sum_pairs = set(declared_pairs(declared_regions(["sum"], REGIMES)))
    assert {"sum:keepdim=False & layout=transposed", "sum:layout=strided & reduced-tail=4-7",
            "sum:keepdim=False & input-has:nan"} <= sum_pairs
    # A dim's sign is normalized before the kernel; a reduction walks its reduced axis; regime and size keys are single draws.
    assert not {"sum:dims<0 & layout=transposed", "sum:layout=strided & tail=4-7", "sum:regime=size-1 & layout=strided",
                "sum:extent>4096 & layout=strided"} & sum_pairs
    pool_pairs = set(declared_pairs(declared_regions(["avg_pool2d", "matmul"], REGIMES)))
    assert {"avg_pool2d:ceil_mode=True & output=1", "avg_pool2d:ceil_mode=True & layout=channels_last"} <= pool_pairs
    # A whole number sizes a window or stride (the output's class follows); a GEMM packs its input before its tail.
    assert not {"avg_pool2d:stride=2 & output=1", "avg_pool2d:stride=2 & layout=channels_last",
                "matmul:layout=transposed & tail=8-15"} & pool_pairs


def test_a_node_holds_the_pairs_of_its_own_keys_only():
    graph = Graph((TensorSpec("x0", (2, 3, 20), "transposed"),),
                  (Node("n0", "sum", ("x0",), {"dims": [-1], "keepdim": True}), Node("n1", "softmax", ("n0",), {"dim": 0})),
                  ("n1",), "layout")
    values = {"x0": np.full((2, 3, 20), np.nan), "n0": np.ones((2, 3, 1))}
    pairs = node_pairs(node_regions(graph, values))
    assert {"sum:keepdim=True & layout=transposed", "sum:layout=transposed & reduced-tail=4-7",
            "sum:keepdim=True & input-has:nan"} <= pairs
    assert not {p for p in pairs if p.startswith("softmax:")}, "the softmax reads a contiguous, finite value"


@pytest.mark.parametrize("pair", ["sum:layout=strided & reduced-tail=4-7", "max_pool2d:ceil_mode=False & layout=strided",
                                  "avg_pool2d:ceil_mode=True & output=1", "gelu:approximate=tanh & input-has:inf",
                                  "conv2d:bias=False & layout=channels_last", "layer_norm:layout=expanded & reduced-tail=1"])
def test_steering_reaches_a_pair_of_each_family_in_a_few_graphs(pair):
    generator = CaseGenerator()
    for seed in range(4):
        case = generator.case(seed, focus_of(pair))
        if pair in node_pairs(node_regions(case.graph, case.arrays)):
            return
    pytest.fail(f"{pair} not reached in 4 steered graphs")


def test_of_four_graphs_one_is_steered_to_a_key_and_two_to_pairs_each_the_least_tried():
    keys, pairs, tries = ["k1", "k2"], ["p1", "p2", "p3"], Counter()
    assert [steered_focus(index, tries, keys, pairs) for index in range(8)] == [None, "p1", "p2", "k1", None, "p3", "p1", "k2"]
    assert tries == {"p1": 2, "p2": 1, "p3": 1, "k1": 1, "k2": 1}
    # Once one list is covered every steered slot takes the other.
    assert [steered_focus(index, tries, [], pairs) for index in range(4)] == [None, "p2", "p3", "p1"]
    key_tries = Counter()
    assert [steered_focus(index, key_tries, keys, []) for index in range(4)] == [None, "k1", "k2", "k1"]
    assert {steered_focus(index, Counter(), [], []) for index in range(8)} == {None}
    # One steering has not reached in STEER_TRIES graphs is left to the plain mix, which gets the slots back.
    capped = Counter()
    steered = [steered_focus(index, capped, ["k1"], ["p1"]) for index in range(40)]
    assert steered.count("k1") == steered.count("p1") == STEER_TRIES and steered[-8:] == [None] * 8


def test_stats_and_the_report_give_pair_coverage_beside_key_coverage(tmp_path):
    from fuzzer.report.data import gather
    from fuzzer.report.render import render_html

    db = tmp_path / "c.db"
    corpus = Corpus(str(db))
    campaign = corpus.start_campaign({"backends": [EAGER]}, 0, {})
    pairs = ["sum:keepdim=False & layout=strided", "sum:layout=strided & reduced-tail=1"]
    state = {"regions_declared": ["sum:keepdim=False", "sum:layout=strided"], "region_counts": {"sum:keepdim=False": 3},
             "pairs_declared": pairs, "pair_counts": {pairs[0]: 2}}
    corpus.checkpoint(campaign, state, cases_run=3, findings=0)
    stats = json.loads(fuzz("stats", "--db", db, "--json").stdout)
    assert stats["pair_coverage"] == {str(campaign): {"declared": 2, "covered": 1, "never_reached": [pairs[1]]}}
    text = fuzz("stats", "--db", db).stdout
    assert "Region keys covered: 1/2 (50%)" in text
    assert f"Pairs of keys of one node covered: 1/2 (50%); never reached: {pairs[1]}." in text
    [row] = gather(corpus).campaigns
    assert row.pairs["covered"] == 1 and "pairs covered" in render_html(gather(corpus), {}, None)


def _sum_campaign(tmp_path, *options, name: str) -> dict:
    db = tmp_path / name
    result = fuzz("run", "--db", db, "--plugin", PLUGIN, "--backends", f"{EAGER},{FAULT}", "--ops", "sum", *options,
                  "--max-cases", 60, "--workers", 1, "--seed", 0, "--shrink-time", 10, "--json")
    return {"returncode": result.returncode, "summary": json.loads(result.stdout)}


@pytest.mark.long  # 2 campaigns of 60 graphs (CI's 15 minutes: the steering tests above reach a pair of each family)
def test_a_fault_on_a_pair_is_found_with_pair_steering_and_not_by_the_plain_mix(tmp_path):
    """sum is wrong only on a non-contiguous input whose reduced extent is 16k + r: 60 graphs of a
    campaign restricted to sum find it (and shrink it to that sum alone, on such an input); the plain
    mix's 60 graphs meet neither the pair nor the fault."""
    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, f"{EAGER},{FAULT}", "sum", max_cases=60, shrink_time=10)
    assert {row["signature"] for row in rows} == {f"mismatch | {FAULT} | sum"}
    case = Corpus(str(tmp_path / "fuzz.db")).get_case(shrunk["id"]).case
    [node] = case.graph.nodes
    [spec] = [spec for spec in case.graph.inputs if spec.name == node.inputs[0]]
    shape = infer_shapes(case.graph)[spec.name]
    reduced = [node.attrs["dim"]] if "dim" in node.attrs else node.attrs["dims"]
    assert spec.layout != "contiguous" and tails.tail_class(shape[max(d % len(shape) for d in reduced)])

    plain = _sum_campaign(tmp_path, "--no-steer", name="plain.db")
    assert plain["returncode"] == 0 and plain["summary"]["finding_cases"] == 0
    steered_pairs = plain["summary"]["pair_coverage"]
    assert steered_pairs["covered"] < steered_pairs["declared"]
