"""Cost where it is paid (fuzzer/running/budget.py): a compiler's single-op tier takes the ops the corpus's
stored campaigns compiled alone least often first (not the alphabet), and each motif variant's chain
alone beside them (fuzzer/drawing/motifs.py), and a kind that compiles again for every input set
(jax-jit-const) pays those compiles from its share after its first graph."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import fuzz
from fuzzer.corpus import Corpus
from fuzzer.drawing import motifs
from fuzzer.drawing.regimes import MIX
from fuzzer.drawing.regions import declared_regions
from fuzzer.running.budget import SINGLE, single_op_order
from fuzzer.running.pipeline import CaseSource, Pipeline, WorkerConfig, alone_items

EAGER, JIT, CONST = "torch-eager:cpu:float32", "jax-jit:cpu:float32", "jax-jit-const:cpu:float32"
JIT_FAULT, COLUMN = "fault-jit-addmm-column-bias", "matmul:motif=addmm/column"
OPS = ["abs", "exp", "neg", "relu", "sigmoid", "tanh"]


def test_the_ops_compiled_alone_least_often_come_first_ties_in_the_seeds_order():
    order = single_op_order(OPS, {"abs": 3, "exp": 1}, seed=7)
    assert order[-2:] == ["exp", "abs"] and set(order[:-2]) == {"neg", "relu", "sigmoid", "tanh"}
    orders = {tuple(single_op_order(OPS, {}, seed)) for seed in range(6)}
    assert len(orders) > 1 and tuple(OPS) not in orders, "ties follow the seed, not the alphabet"
    assert single_op_order(OPS, {}, 3) == single_op_order(list(reversed(OPS)), {}, 3), "the seed alone decides"


def test_motif_keys_alternate_with_the_ops_covered_as_often_a_motif_first_derived_ops_last():
    bn = "conv2d:motif=conv-bn/relu"
    items = OPS + [COLUMN, bn, "add:motif=addmm/row", "erfcx"]
    order = single_op_order(items, {COLUMN: 1}, seed=4, last=["erfcx"], first=[COLUMN, bn, "add:motif=addmm/row"])
    assert set(order[0:4:2]) == {bn, "add:motif=addmm/row"} and set(order[1:4:2]) | set(order[4:-2]) == set(OPS)
    assert order[-2:] == [COLUMN, "erfcx"]


def test_the_corpus_sums_each_backends_ops_compiled_alone_over_its_campaigns(tmp_path):
    corpus = Corpus(str(tmp_path / "c.db"))
    for counts in ({JIT: {"abs": 2, "exp": 1}}, {JIT: {"abs": 1}, CONST: {"tanh": 1}}, {JIT: "damaged"}):
        campaign = corpus.start_campaign({"backends": [EAGER, JIT]}, 0, {})
        corpus.checkpoint(campaign, {"alone_op_counts": counts}, cases_run=0, findings=0)
    assert corpus.alone_op_counts() == {JIT: {"abs": 3, "exp": 1}, CONST: {"tanh": 1}}


def _alone(db, seed: int) -> dict:
    result = fuzz("run", "--db", db, "--backends", f"{EAGER},{JIT}", "--ops", ",".join(OPS), "--compile-share", "0.9",
                  "--compiled-inputs", 1, "--max-cases", 8, "--workers", 1, "--seed", seed, "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)["alone_op_counts"].get(JIT, {})


@pytest.mark.long  # two campaigns of 8 graphs, jax-jit compiling (CI's 15 minutes: the order's own tests stay)
def test_a_second_campaign_compiles_alone_first_the_ops_the_first_did_not(tmp_path):
    """Same seed, same corpus: the second campaign's one-op compiles start with the ops the first left
    out, where the campaign's own order would compile the same ops again."""
    db = tmp_path / "fuzz.db"
    first = _alone(db, seed=3)
    assert 0 < len(first) < len(OPS)
    second = _alone(db, seed=3)
    left = set(OPS) - set(first)
    assert left <= set(second) or set(second) <= left, (first, second)


def test_jax_jit_const_keeps_to_its_share_in_a_short_campaigns_accounting():
    """A worker's own bookkeeping over real graphs: every graph it takes after its first (the cold start)
    starts with its charged time plus that graph's expected cost within its share of the worker's time so far."""
    pipeline = Pipeline(WorkerConfig(backends=[EAGER, CONST], ops=OPS, compile_share=f"{CONST}=0.5", seed=1))
    budget, taken = pipeline.budget, 0
    for index in range(30):
        charged, expected, worker_seconds, compiled = (budget.charged[CONST], budget.expected_cost(CONST),
                                                        budget.worker_seconds, budget.compiled[CONST])
        pipeline.run_index(index, set())
        if budget.compiled[CONST] > compiled > 0:
            taken += 1
            assert charged + expected <= 0.5 * worker_seconds
    assert taken >= 1, "a graph after the first, whose start the share decided"


MOTIF_FAULTS = str(Path(__file__).parent / "plugins" / "motif_faults.py")
MOTIF_OPS = ["matmul", "add", "relu"]  # build 7 motif variants: addmm (4), addmm + relu (2), mm + mm


def test_each_motif_variant_is_an_item_of_the_single_op_tier_drawn_as_its_chain_alone():
    """Every declared variant's tier graph holds its chain and nothing else, and counts as covering it."""
    ops = sorted({motifs.head_op(v) for _, v in motifs.VARIANTS} | {op for _, v in motifs.VARIANTS for s in v.steps
                                                                     for op in s.ops} | {"transpose"})
    drawer = Pipeline(WorkerConfig(backends=[EAGER, JIT], ops=ops, seed=2)).drawer
    keys = [item for item in drawer.alone_items if motifs.PREFIX in item]
    assert keys == motifs.declared(ops) and len(keys) == len(motifs.VARIANTS)
    for key in keys:
        graph = drawer.graph_case(CaseSource(0, SINGLE, key)).graph
        chain = motifs.find(key)
        assert key in alone_items(graph), key
        assert len(graph.nodes) == 1 + len(chain.steps) + (chain.head == "scores") + ("mm-plus-mm" in key), (key, graph.op_names())
    # Without a regime that draws motifs (`--regimes small`), the tier holds the ops alone.
    plain = Pipeline(WorkerConfig(backends=[EAGER, JIT], ops=ops, seed=2, regimes=["small"])).drawer
    assert plain.alone_items == plain.ops


def _tier_campaign(db, backends: list[str], graphs: int, *options) -> dict:
    result = fuzz("run", "--db", db, "--plugin", MOTIF_FAULTS, "--backends", ",".join(backends), "--ops", ",".join(MOTIF_OPS),
                  "--compile-share", "1", "--compiled-inputs", 1, "--max-cases", graphs, "--workers", 1, "--seed", 5,
                  "--shrink-time", 1, "--json", *options)
    assert result.returncode in (0, 1), result.stderr[-2000:]
    return json.loads(result.stdout)


@pytest.mark.slow  # a campaign of 20 graphs, jax-jit compiling on nearly every one: ~30 s
def test_a_campaign_of_20_graphs_compiles_every_motif_variant_and_finds_a_fault_in_one_alone(tmp_path):
    """7 motif variants and 3 ops alone, every third compile a drawn graph: at most 15 compiles (a chain
    holding another covers both), taken on nearly every graph at a share of 1. The planted fault (jax.jit
    with a column bias after a matmul rolled by a row) is found by its compile of a chain that holds
    addmm/column (bench/motif_tier.py: graphs to find it, before and after)."""
    declared = [key for key in declared_regions(MOTIF_OPS, MIX) if motifs.PREFIX in key]
    summary = _tier_campaign(tmp_path / "fuzz.db", [EAGER, JIT_FAULT], 20)
    covered = summary["alone_op_counts"][JIT_FAULT]
    assert len(declared) == 7 and set(declared) <= set(covered), sorted(set(declared) - set(covered))
    assert summary["new_buckets"] >= 1
    buckets = json.loads(fuzz("list", "--db", tmp_path / "fuzz.db", "--json").stdout)
    assert any(JIT_FAULT in bucket["signature"] for bucket in buckets), buckets


@pytest.mark.long  # 29 motif chains and 19 ops alone, 72 compiles: torch.compile ~4 minutes
@pytest.mark.parametrize("compiler", ["torch-compile:cpu:float32", JIT])
def test_torch_compile_and_jax_jit_compile_every_motif_variant_early(tmp_path, compiler):
    ops = sorted({motifs.head_op(v) for _, v in motifs.VARIANTS} | {op for _, v in motifs.VARIANTS for s in v.steps
                                                                     for op in s.ops} | {"transpose"})
    result = fuzz("run", "--db", tmp_path / "fuzz.db", "--backends", f"{EAGER},{compiler}", "--ops", ",".join(ops),
                  "--compile-share", "0.9", "--compiled-inputs", 1, "--max-cases", 90, "--workers", 1, "--seed", 5, "--json")
    assert result.returncode in (0, 1), result.stderr[-2000:]
    covered = json.loads(result.stdout)["alone_op_counts"].get(compiler, {})
    assert set(motifs.declared(ops)) <= set(covered), sorted(set(motifs.declared(ops)) - set(covered))
