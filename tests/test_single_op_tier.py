"""Cost where it is paid (fuzzer/running/budget.py): a compiler's single-op tier takes the ops the corpus's
stored campaigns compiled alone least often first (not the alphabet), and a kind that compiles
again for every input set (jax-jit-const) pays those compiles from its share after its first graph."""

from __future__ import annotations

import json

import pytest

from conftest import fuzz
from fuzzer.corpus import Corpus
from fuzzer.running.budget import single_op_order
from fuzzer.running.pipeline import Pipeline, WorkerConfig

EAGER, JIT, CONST = "torch-eager:cpu:float32", "jax-jit:cpu:float32", "jax-jit-const:cpu:float32"
OPS = ["abs", "exp", "neg", "relu", "sigmoid", "tanh"]


def test_the_ops_compiled_alone_least_often_come_first_ties_in_the_seeds_order():
    order = single_op_order(OPS, {"abs": 3, "exp": 1}, seed=7)
    assert order[-2:] == ["exp", "abs"] and set(order[:-2]) == {"neg", "relu", "sigmoid", "tanh"}
    orders = {tuple(single_op_order(OPS, {}, seed)) for seed in range(6)}
    assert len(orders) > 1 and tuple(OPS) not in orders, "ties follow the seed, not the alphabet"
    assert single_op_order(OPS, {}, 3) == single_op_order(list(reversed(OPS)), {}, 3), "the seed alone decides"


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


@pytest.mark.slow  # two campaigns of 8 graphs, jax-jit compiling: ~30 s
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
