"""Compiler affinity: with several workers each runs only some of the campaign's compilers (so it
pays few cold starts), and every compiler still gets its part of the campaign's compile time."""

from __future__ import annotations

import pytest

from fuzzer.running.budget import MAX_SLOT_SHARE, assign_compilers, parse_shares, slot_shares
from fuzzer.running.pipeline import Pipeline, WorkerConfig


def equal(count: int) -> dict[str, float]:
    return {f"c{j}": 0.6 / count for j in range(count)}


@pytest.mark.parametrize("workers, compilers, expected", [
    (1, 3, [None]),
    (2, 4, [{"c0": 1, "c1": 1}, {"c2": 1, "c3": 1}]),  # fewer workers: neighbours share a slot
    (3, 3, [{"c0": 1}, {"c1": 1}, {"c2": 1}]),
    (3, 4, [{"c0": 3, "c1": 1}, {"c1": 2, "c2": 2}, {"c2": 1, "c3": 3}]),  # quarters of a slot's share
    (5, 2, [{"c0": 4}, {"c0": 4}, {"c0": 2, "c1": 2}, {"c1": 4}, {"c1": 4}]),
    (4, 2, [{"c0": 1}, {"c0": 1}, {"c1": 1}, {"c1": 1}]),  # W >= 2C: every compiler on two workers
    (3, 1, [None, None, None]),  # one compiler: nothing to split
])
def test_each_slot_gets_the_expected_compilers_and_parts(workers, compilers, expected):
    """`expected` gives each slot's compilers with their parts in proportion (4: the whole slot)."""
    slots = assign_compilers(equal(compilers), workers)
    assert [slot and set(slot) for slot in slots] == [slot and set(slot) for slot in expected]
    for slot, parts in zip(slots, expected):
        if slot:
            assert slot == {name: pytest.approx(part / sum(parts.values())) for name, part in parts.items()}


@pytest.mark.parametrize("workers", range(1, 20))
@pytest.mark.parametrize("weights", [[1, 1], [1, 1, 1], [3, 3, 1, 1, 1, 1, 1, 1, 1], [3, 1, 1, 1, 1]])
def test_every_compiler_keeps_its_campaign_wide_share_and_the_workers_the_whole_compile_share(workers, weights):
    names = [f"c{j}" for j in range(len(weights))]
    shares = parse_shares("0.6", names, dict(zip(names, weights)))
    slots = assign_compilers(shares, workers)
    assert len(slots) == workers
    if workers == 1:
        return
    # The workers' compilers split the whole compile share of all of them, as without affinity;
    # a slot that took a sliver of another's (budget._join_slivers) spends more of its own on it.
    assert sum(sum(slot_shares(shares, slot).values()) for slot in slots) == pytest.approx(workers * 0.6)
    assert all(slot and sum(slot_shares(shares, slot).values()) <= MAX_SLOT_SHARE + 1e-9 for slot in slots)
    for name in names:  # worker-equivalents of compile time: `workers` x its share, as without affinity
        assert sum(slot_shares(shares, slot)[name] for slot in slots) == pytest.approx(workers * shares[name])
    assert sum(len(slot) for slot in slots) <= len(names) + workers - 1  # cold starts, against C x W


def test_the_gpu_set_on_14_workers_pays_20_cold_starts_instead_of_126():
    """torch.compile on the CPU (weight 6) and on CUDA (3) and seven compilers of weight 1:
    torch.compile gets five workers of its own on the CPU and two on CUDA, and no worker runs more
    than two compilers (jax's slivers joined their larger pieces: 22 cold starts without)."""
    names = ["torch-compile:cpu:float32", "torch-compile:cuda:float32"] + [f"jax-{j}" for j in range(7)]
    shares = parse_shares("0.6", names, {names[0]: 6.0, names[1]: 3.0})
    slots = assign_compilers(shares, 14)
    assert slots[:5] == [{names[0]: pytest.approx(1.0)}] * 5 and slots[6] == {names[1]: pytest.approx(1.0)}
    assert max(len(slot) for slot in slots) == 2
    assert sum(len(slot) for slot in slots) == 20


def test_a_sliver_of_a_slot_joins_the_compilers_larger_piece():
    """The README campaign: torch.compile (weight 6 on the CPU) and four jax compilers on 2 workers.
    Laid end to end, torch.compile covers slot 0 and a fifth of slot 1, which would pay its cold
    start for a tenth of a worker; it runs on slot 0 alone, at 0.72 of its time."""
    names = ["torch-compile:cpu:float32"] + [f"jax-{j}" for j in range(4)]
    shares = parse_shares("0.6", names, {names[0]: 6.0})
    slots = assign_compilers(shares, 2)
    assert slots[0] == {names[0]: pytest.approx(1.2)} and set(slots[1]) == set(names[1:])
    assert slot_shares(shares, slots[0])[names[0]] == pytest.approx(0.72)
    assert sum(slot_shares(shares, slots[1]).values()) == pytest.approx(0.48)


def test_a_compiler_without_a_share_gets_no_slot_and_a_slot_shares_by_its_parts():
    assert assign_compilers({"a": 0.3, "b": 0.0, "c": 0.3}, 2) == [{"a": 1.0}, {"c": 1.0}]
    assert assign_compilers({"a": 0.4, "b": 0.0}, 3) == [None, None, None]
    assert slot_shares({"a": 0.3, "b": 0.1, "c": 0.2}, {"a": 0.75, "b": 0.25}) == {
        "a": pytest.approx(0.45), "b": pytest.approx(0.15), "c": 0.0}


JIT, EAGER = "jax-jit:cpu:float32", "jax-eager:cpu:float32"
BACKENDS = ["torch-eager:cpu:float32", EAGER, JIT]


def test_a_worker_runs_only_its_slots_compilers():
    """In process: a slot given jax-jit compiles with it and never with jax eager."""
    pipeline = Pipeline(WorkerConfig(backends=BACKENDS, ops=["relu", "tanh", "add"], compilers={JIT: 1.0}, compiled_inputs=1))
    assert pipeline.budget.shares[EAGER] == 0.0 and pipeline.budget.shares[JIT] == pytest.approx(0.6)
    replies = [pipeline.run_index(index, set()) for index in range(8)]
    assert any(JIT in reply.compiled_structures for reply in replies)
    assert all(EAGER in reply.budget_skipped and EAGER not in reply.backends for reply in replies)


@pytest.mark.slow
def test_a_two_worker_campaign_gives_each_compiler_its_own_worker_and_starves_neither(tmp_path):
    from fuzzer.corpus import Corpus
    from fuzzer.running.campaign import CampaignOptions, run_campaign

    options = CampaignOptions(backends=BACKENDS, ops=["relu", "tanh", "add"], max_cases=40, workers=2,
                              compiled_inputs=1)
    progress = run_campaign(Corpus(tmp_path / "c.db"), options)
    assert progress.compiled_structures[EAGER] > 0 and progress.compiled_structures[JIT] > 0
    assert set(progress.compiled_by_slot["0"]) == {EAGER} and set(progress.compiled_by_slot["1"]) == {JIT}  # campaign order
    assert {name: sum(slot.get(name, 0) for slot in progress.compiled_by_slot.values())
            for name in (EAGER, JIT)} == {name: progress.compiled_structures[name] for name in (EAGER, JIT)}


def test_a_compilers_first_compile_frees_the_other_workers_as_soon_as_it_ran(tmp_path):
    """FirstCompileGate: the other workers wait for jax-jit's first compile, not for the rest of the
    index it is in (its further input sets, the other compilers' first compiles)."""
    done = tmp_path / f"{JIT}.done"
    seen = []  # (input set, whether the gate was open) at each later run of jax-jit

    def heartbeat(backend, source):  # backend None: the worker is back in its own work
        if backend is not None and backend.name == JIT:
            seen.append((source.input_set, done.exists()))

    pipeline = Pipeline(WorkerConfig(backends=BACKENDS, ops=["relu", "tanh", "add"], compiled_inputs=2,
                                     first_compile_dir=str(tmp_path)), heartbeat)
    index = 0
    while not seen:
        pipeline.run_index(index, set())
        index += 1
    assert seen[0] == (0, False) and len(seen) > 1 and all(opened for _, opened in seen[1:])
