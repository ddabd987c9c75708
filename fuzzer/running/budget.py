"""The compile budget: which compiling backends run on a graph, and on which graph.

Cheap backends (the float64 reference, torch eager, model-level transformations that do not
compile) run on every graph. A compiling backend (jax.jit per dtype, torch.compile, jax eager:
`Backend.expensive`) costs 0.1-2 s per new graph structure, and structures almost never repeat,
so each owns a share of the worker's time (`--compile-share`; the default total is split by each
kind's declared `compile_weight`, so torch.compile, ~10x dearer a structure than jax.jit, gets a
larger slice) and spends it on the graphs that are most novel *to it*, judged from what it has
compiled in this worker:

    NEW_PAIR   an op, or a (producer op, consumer op) pair, it has never compiled
    NEW_NODE   else a node key (op, attrs, input shapes) it has never compiled
    NOTHING    every node of the graph was compiled before, in other graphs

A backend takes a graph when its charged time plus the graph's expected cost (its mean so far)
stays under ALLOWANCE[novelty] x share x worker time: below 0.8 of its share it takes every
graph, up to 0.9 only graphs with something new, up to its whole share only new ops and op pairs
(the rarest, most valuable structures). The share is a ceiling: the cheap tier keeps the rest of
the worker (a 1.5x allowance for new pairs, which nearly every graph has, let the compilers take
0.9 of a worker and the cheap tier check 60 graphs in 2 minutes). It is also nearly a floor: a
compiler that has seen every op pair still gets 0.8 of its share, since each compile is judged on
many input sets (with 0.5, jax-jit used 7% of worker time against a 0.15 share once the pairs of a
15-minute campaign were covered).

The cold start is paid once and early, never starved: a compiler takes its first graph as soon
as the worker has checked FIRST_COMPILE_AFTER graphs with the cheap tier (so the worker's first
graph still comes in seconds), and that first compile (dynamo and inductor imported, caches
filled: 3-20 s) is not charged to its share. Charging it as a prior made torch.compile wait
~2 minutes of worker time for its first graph: a 2-minute campaign compiled nothing with it.
The cold start is also paid by few workers: with several, each runs only some compilers, at a
larger share, so that each compiler keeps its share of all worker time (assign_compilers).

Novelty starts small (`tier`): most kernel bugs shrink to one or two ops, and a one-op compile
is the cheapest, so a compiler first compiles each op of the campaign alone (SINGLE), and each
motif variant's chain alone (fuzzer/drawing/motifs.py: matmul + a column bias; a rewrite fires only on
its pattern, which drawn graphs seldom hold whole), the items it covered least often in the
campaigns the corpus holds first, motifs first among equals (single_op_order; pipeline.alone_items);
then small graphs of at most
SMALL_NODES nodes (SMALL) until it has compiled as many as there are items, and then the drawn
graphs (WHOLE). Every WHOLE_EVERY-th compile is a drawn graph in any tier, so composed structures
(conv -> transpose -> layer_norm) are reached from the start.

Everything here is plain bookkeeping on numbers: the pipeline feeds it measured seconds.
"""

from __future__ import annotations

import itertools
import json
import math
import random

from fuzzer.backend_names import BackendName
from fuzzer.errors import UserError
from fuzzer.ir import Graph, infer_shapes

NOTHING, NEW_NODE, NEW_PAIR = 0, 1, 2
ALLOWANCE = {NOTHING: 0.8, NEW_NODE: 0.9, NEW_PAIR: 1.0}
DEFAULT_SHARE = "0.6"
FIRST_COMPILE_AFTER = 2  # cheap-tier graphs a worker checks before its compilers' first compile
SINGLE, SMALL, WHOLE = "single-op", "small", "whole"
SMALL_NODES = 2
WHOLE_EVERY = 3
# The default total where the cheap tier is only this release's eager peers of other releases'
# compilers (torch-eager beside torch-compile@torch-2.3.1: default_share): its graphs test this
# release's eager against numpy, a default campaign's work, while 2.3.1's inductor compiles a
# structure in 3-9 s (115 structures, 79 ops alone, in 10 minutes at 0.6).
CROSS_RELEASE_SHARE = "0.9"
# Compilers whose share of a default campaign is declared, not weighed. torch-compile-grad compiles
# the forward and the backward (twice torch-compile's seconds a structure), so by weight it would take
# twice torch-compile's time; a training graph's compile gets a sixth of the default total instead.
DECLARED_SHARES = {"torch-compile-grad": 0.1}
SLIVER = 0.25  # of a worker slot: a compiler's smaller piece joins its largest (assign_compilers)
MAX_SLOT_SHARE = 0.9  # the most of a worker's time its compilers may take once pieces are joined


def graph_features(graph: Graph, dtype: str | None = None) -> tuple[frozenset, frozenset]:
    """(ops and op pairs, node keys) of a graph: what a compiler sees of its structure. A family lane's
    graph (fuzzer/running/dtype_families.py) names its ops with their `dtype`: int32's mul is another kernel."""
    shapes = infer_shapes(graph)
    producer = {node.name: node.op if dtype is None else f"{node.op}@{dtype}" for node in graph.nodes}
    pairs, nodes = set(), set()
    for node in graph.nodes:
        op = producer[node.name]
        pairs.add((op,))
        pairs.update((producer[name], op) for name in node.inputs if name in producer)
        nodes.add((op, json.dumps(node.attrs, sort_keys=True), tuple(tuple(shapes[name]) for name in node.inputs)))
    return frozenset(pairs), frozenset(nodes)


def _share_matches(name: str, backend: str) -> bool:
    """Does `--compile-share` NAME cover `backend`? NAME is any form `--backends` takes: a full name
    (jax-jit:cpu:float32), a kind (jax-jit, every device and dtype), and either with @ENV for
    another environment's backend (torch-compile@torch-2.3.1)."""
    return BackendName.parse(name).covers(BackendName.parse(backend))


def parse_shares(text: str, compiling: list[str], weights: dict[str, float] | None = None) -> dict[str, float]:
    """`--compile-share` -> {backend name: share of worker time}.

    Comma-separated items: `NAME=SHARE` sets the backends NAME covers (_share_matches: so
    `jax-jit=0.2` covers every jax-jit dtype); one bare number is the total share of the backends
    not named (default DEFAULT_SHARE), split among them by `weights` (each backend's declared
    compile_weight; evenly without them).
    """
    shares: dict[str, float] = {}
    rest = None
    for item in (part.strip() for part in text.split(",") if part.strip()):
        name, _, value = item.rpartition("=")
        try:
            share = float(value)
        except ValueError:
            raise UserError(f"Bad --compile-share item '{item}'; write a number (0.5) or NAME=SHARE "
                            "(jax-jit:cpu:float32=0.2).") from None
        if not 0.0 <= share <= 1.0:
            raise UserError(f"Share {share:g} in --compile-share '{item}' is outside 0..1; it is a fraction of worker time.")
        if not name:
            rest = share
            continue
        matched = [b for b in compiling if _share_matches(name, b)]
        if not matched:
            raise UserError(f"--compile-share names '{name}', which is none of this campaign's compiling backends "
                            f"({', '.join(compiling) or 'none'}).")
        shares.update({b: share for b in matched})
    unnamed = [b for b in compiling if b not in shares]
    total = float(DEFAULT_SHARE) if rest is None else rest
    weight = {b: (weights or {}).get(b, 1.0) for b in unnamed}
    shares.update({b: total * weight[b] / sum(weight.values()) for b in unnamed})
    if sum(shares.values()) > 1.0 + 1e-9:
        raise UserError(f"The compile shares add up to {sum(shares.values()):.2f} of worker time; keep the total at 1 or less.")
    return shares


def default_share(cheap: list[str], compiler_peers: list[str | None], compiling: list[str] = ()) -> str:
    """The default --compile-share: CROSS_RELEASE_SHARE where every cheap backend is the eager peer,
    in this release, of a compiler from another release (`compiler_peers`: each compiler's eager
    peer, release included: check.eager_peer), else DEFAULT_SHARE; the DECLARED_SHARES of the
    `compiling` backends' kinds named, and taken from that total."""
    peers = [BackendName.parse(peer) for peer in compiler_peers if peer]
    other_release = {str(peer.here) for peer in peers if peer.env is not None}
    total = CROSS_RELEASE_SHARE if cheap and set(cheap) <= other_release else DEFAULT_SHARE
    kinds = {BackendName.parse(name).kind for name in compiling}
    declared = {kind: share for kind, share in DECLARED_SHARES.items() if kind in kinds}
    if not declared:
        return total
    return ",".join([f"{float(total) - sum(declared.values()):g}"] + [f"{kind}={share:g}" for kind, share in declared.items()])


def assign_compilers(shares: dict[str, float], workers: int) -> list[dict[str, float] | None]:
    """Compiler affinity: the compilers each of `workers` worker slots runs, each with its part of
    the slot's compile share (None: every compiler, at its own share).

    Every compiler a worker runs costs it a cold start (imports, first compile: 10-60 s on a loaded
    machine, uncharged), so with several workers each runs only some compilers. A compiler's time
    without affinity is `workers` x its share; in slots, that is workers x its part of the total
    share (its share / the total). These stretches are laid end to end over the slots in campaign
    order (McNaughton's wrap-around rule), and each compiler runs on the slots its stretch covers,
    with the part of each slot's compile share that it covers. So every worker keeps the campaign's
    compile share (but where a compiler's sliver of a slot joins its larger piece: _join_slivers),
    each compiler gets exactly its campaign-wide time of today, and the campaign pays at most
    C + W - 1 cold starts instead of C x W: equal shares, 2 workers and 4 compilers, slot 0
    runs the first two and slot 1 the others; 5 workers and 2 compilers, slots 0-1 the first, 3-4
    the second, slot 2 both at half. One worker, or one compiler: every slot runs them all.
    """
    positive = [name for name, share in shares.items() if share > 0.0]
    if workers <= 1 or len(positive) <= 1:
        return [None] * max(1, workers)
    total = sum(shares[name] for name in positive)
    slots: list[dict[str, float]] = [{} for _ in range(workers)]
    start = 0.0
    for name in positive:
        end = start + workers * shares[name] / total
        for slot in range(int(start), min(workers, math.ceil(end))):
            covered = min(end, slot + 1) - max(start, slot)
            if covered > 1e-9:  # not a rounding error's sliver
                slots[slot][name] = covered
        start = end
    _join_slivers(slots, total)
    return slots


def _join_slivers(slots: list[dict[str, float]], total: float) -> None:
    """Moves each compiler's piece of under SLIVER of a slot to its largest piece, where that slot's
    compile share stays within MAX_SLOT_SHARE: a cold start (torch.compile's first compile, 20-30 s
    on a 2-core machine) is not worth a tenth of a worker. With 2 workers, torch.compile's 1.2
    slots ran on both: the second paid that cold start for 7 of 38 structures. The compiler keeps
    its campaign-wide time; the slot that took the piece spends more of its time compiling, the one
    that gave it less."""
    for name in dict.fromkeys(name for parts in slots for name in parts):  # in campaign order
        holding = [parts for parts in slots if name in parts]
        largest = max(holding, key=lambda parts: parts[name])
        for parts in holding:
            if (parts is not largest and parts[name] < SLIVER
                    and total * (sum(largest.values()) + parts[name]) <= MAX_SLOT_SHARE + 1e-9):
                largest[name] += parts.pop(name)


def single_op_parts(slots: list[dict[str, float] | None], compilers: list[str]) -> list[dict[str, list[int]]]:
    """Each worker slot's part of its compilers' single-op tier, [j, m]: the j-th of the m slots that
    run a compiler (assign_compilers; None runs every one) compiles the ops at positions j, j + m, ...
    of the op list alone first, then the others. Each drawing from the whole list, two slots compiled
    the same ops twice: 62 of 114 ops alone in 107 compiles of a cross-version campaign."""
    runs = {name: [slot for slot, parts in enumerate(slots) if parts is None or name in parts] for name in compilers}
    return [{name: [runs[name].index(slot), len(runs[name])] for name in compilers if slot in runs[name]}
            for slot in range(len(slots))]


def single_op_order(ops: list[str], alone_counts: dict[str, int], seed: int, last: list[str] = (),
                    first: list[str] = ()) -> list[str]:
    """`ops` (the single-op tier's items: ops and motif keys) in the order a compiler's single-op tier
    takes them: those it covered least often in the stored campaigns (`alone_counts`, item -> graphs:
    pipeline.alone_items) first, ties in an order drawn from the campaign's `seed`. In list order, a compiler
    that gets through 30 of 114 ops alone in a short campaign (13 s a compile on a loaded machine)
    compiled the same first 30 every time. The ops of `last` (a default campaign's derived ops, drawn
    at a share of graphs) come after all others. Among the items covered as often, the items of `first`
    (the motif keys) alternate with the others, a motif first: a drawn graph seldom holds a motif's whole
    chain (none in 3,000 graphs of the big-contraction regime before motifs), but with all 29 variants
    first a 2-minute campaign's torch.compile compiled 12 of them and 2 ops alone."""
    shuffled = sorted(ops)
    random.Random(seed).shuffle(shuffled)
    later, earlier = set(last), set(first)
    ties: dict[tuple, list[str]] = {}
    for item in shuffled:
        ties.setdefault((item in later, alone_counts.get(item, 0)), []).append(item)
    order = []
    for key in sorted(ties):
        motifs = [item for item in ties[key] if item in earlier]
        others = [item for item in ties[key] if item not in earlier]
        order += [item for pair in itertools.zip_longest(motifs, others) for item in pair if item is not None]
    return order


def slot_shares(shares: dict[str, float], parts: dict[str, float]) -> dict[str, float]:
    """The shares of a worker slot that runs only the compilers of `parts` (assign_compilers): each
    its part of the total of `shares`; every other compiler none."""
    total = sum(shares.values())
    return {name: total * parts.get(name, 0.0) for name in shares}


class CompileBudget:
    def __init__(self, shares: dict[str, float], ops: list[str] = (), parts: dict[str, list[int]] | None = None,
                 orders: dict[str, list[str]] | None = None):
        """`ops`: the SINGLE tier's items, each compiled alone first: the campaign's ops and motif
        keys (pipeline.CaseDrawer.alone_items); each compiler's part of them (`parts`,
        single_op_parts; all where not given) before the others, in its order (`orders`,
        single_op_order; the campaign's where not given)."""
        self.shares = dict(shares)
        self.ops = list(ops)
        self.parts = dict(parts or {})
        self.orders = dict(orders or {})
        self.worker_seconds = 0.0
        self.graphs_checked = 0
        self.charged = {name: 0.0 for name in shares}
        self.compiled = {name: 0 for name in shares}  # graphs compiled, the uncharged first one included
        self.cold_start = {name: None for name in shares}  # seconds of the first compile, once paid
        self.small_compiled = {name: 0 for name in shares}
        self.singles_done: dict[str, set] = {name: set() for name in shares}  # items (ops, motif keys) compiled alone (or undrawable)
        self.lane_items: dict[str, list[str]] = {}  # a family lane's compiler -> its lane's items (add_lane_compiler)
        self.lane_compiled: dict[str, int] = {}  # ... -> the graphs it compiled (its account's are in `compiled`)
        self.seen_pairs: dict[str, set] = {name: set() for name in shares}
        self.seen_nodes: dict[str, set] = {name: set() for name in shares}

    def add_lane_compiler(self, name: str, items: list[str]) -> None:
        """A family lane's compiler (fuzzer/running/dtype_families.py: torch-compile:cpu:int32), which charges its
        float peer's family account but has a tier of its own: its lane's `items` (ops, motif keys) compiled
        alone first, then small graphs, then the drawn ones, on the lane's graphs (its part and order: `parts`,
        `orders`, where given); `lane_compiled` counts its own compiles, its tier's turns."""
        self.lane_items[name] = list(items)
        self.lane_compiled.setdefault(name, 0)
        self.small_compiled.setdefault(name, 0)
        self.singles_done.setdefault(name, set())

    def count_lane_compile(self, name: str, tier: str) -> None:
        """A family lane's compiler compiled a graph of `tier` (its account was charged: `charge`)."""
        self.lane_compiled[name] += 1
        self.small_compiled[name] += tier == SMALL

    def compiles(self, name: str) -> int:
        """The graphs `name` has compiled: a compiler's, or a family lane's compiler's own (add_lane_compiler)."""
        return self.lane_compiled.get(name, self.compiled.get(name, 0))

    def novelty(self, backend: str, features: tuple[frozenset, frozenset]) -> int:
        pairs, nodes = features
        if not pairs <= self.seen_pairs[backend]:
            return NEW_PAIR
        if not nodes <= self.seen_nodes[backend]:
            return NEW_NODE
        return NOTHING

    def wants(self, backend: str, features: tuple[frozenset, frozenset]) -> bool:
        """Should `backend` compile a graph with these features now?"""
        return self._affords(backend, self.novelty(backend, features))

    def may_afford(self, backend: str) -> bool:
        """Could `backend` take the most novel graph now? (Asked first: drawing its graph costs too.)"""
        return self._affords(backend, NEW_PAIR)

    def _affords(self, backend: str, novelty: int) -> bool:
        if self.shares[backend] <= 0.0:
            return False
        if self.compiled[backend] == 0:  # the cold start: early, and not charged (see the module docstring)
            return self.graphs_checked >= FIRST_COMPILE_AFTER
        allowed = ALLOWANCE[novelty] * self.shares[backend] * self.worker_seconds
        return self.charged[backend] + self.expected_cost(backend) <= allowed

    def expected_cost(self, backend: str) -> float:
        charged_graphs = self.compiled[backend] - 1  # the first one is the cold start
        return self.charged[backend] / charged_graphs if charged_graphs > 0 else 0.0

    def tier(self, backend: str) -> str:
        """Which graph `backend` compiles next: one op alone, a small graph or the drawn graph."""
        if self.compiles(backend) % WHOLE_EVERY == WHOLE_EVERY - 1:
            return WHOLE
        if self.uncovered_ops(backend):
            return SINGLE
        return SMALL if self.small_compiled[backend] < len(self.lane_items.get(backend, self.ops)) else WHOLE

    def uncovered_ops(self, backend: str) -> list[str]:
        """The items (ops, motif keys) of its part that `backend` has not compiled alone yet, in its
        order; once they are done, every item it has not."""
        position, count = self.parts.get(backend, (0, 1))
        done, ordered = self.singles_done[backend], self.orders.get(backend, self.lane_items.get(backend, self.ops))
        mine = [op for k, op in enumerate(ordered) if k % count == position and op not in done]
        return mine or [op for op in ordered if op not in done]

    def cover_single(self, backend: str, op: str) -> None:
        """`op` (or a motif key) needs no more compiles alone by `backend`: it compiled one, or none can
        be drawn or run."""
        self.singles_done[backend].add(op)

    def charge(self, backend: str, seconds: float, features: tuple[frozenset, frozenset], tier: str) -> None:
        """`backend` ran a graph of `tier` with these features for `seconds` (compile and runs)."""
        if self.compiled[backend] == 0:
            self.cold_start[backend] = seconds
        else:
            self.charged[backend] += seconds
        self.compiled[backend] += 1
        self.small_compiled[backend] += tier == SMALL
        self.seen_pairs[backend] |= features[0]
        self.seen_nodes[backend] |= features[1]

    def advance(self, seconds: float) -> None:
        """The worker spent `seconds` more on one graph: every share grows with it."""
        self.worker_seconds += seconds
        self.graphs_checked += 1
