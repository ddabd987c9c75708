"""The compile budget: which compiling backends run on a graph.

Cheap backends (the float64 reference, torch eager, model-level transformations that do not
compile) run on every graph. A compiling backend (jax.jit per dtype, torch.compile, jax eager:
`Backend.expensive`) costs 0.1-1 s per new graph structure, and structures almost never repeat,
so each owns a share of the worker's time and spends it on the graphs that are most novel *to
it*, judged from what it has compiled in this worker:

    NEW_PAIR   an op, or a (producer op, consumer op) pair, it has never compiled
    NEW_NODE   else a node key (op, attrs, input shapes) it has never compiled
    NOTHING    every node of the graph was compiled before, in other graphs

A backend takes a graph when its charged time plus the graph's expected cost stays under
ALLOWANCE[novelty] x share x worker time: below half its share it takes every graph, up to its
share only graphs with something new, up to 1.5x its share only new ops and op pairs (the
rarest, most valuable structures). The expected cost is the backend's mean so far, and before
its first graph its declared cold start (torch.compile ~20 s in a fresh process, more under
load): so a worker's first graph runs the cheap tier alone and comes in seconds, and one slow
compile cannot overdraw a share by minutes. In a short campaign torch.compile may therefore
compile nothing; in a long one every compiler gets its share.

Everything here is plain bookkeeping on numbers: the pipeline feeds it measured seconds.
"""

from __future__ import annotations

import json

from fuzzer.errors import UserError
from fuzzer.ir import Graph, infer_shapes

NOTHING, NEW_NODE, NEW_PAIR = 0, 1, 2
ALLOWANCE = {NOTHING: 0.5, NEW_NODE: 1.0, NEW_PAIR: 1.5}
DEFAULT_SHARE = "0.5"


def graph_features(graph: Graph) -> tuple[frozenset, frozenset]:
    """(ops and op pairs, node keys) of a graph: what a compiler sees of its structure."""
    shapes = infer_shapes(graph)
    producer = {node.name: node.op for node in graph.nodes}
    pairs, nodes = set(), set()
    for node in graph.nodes:
        pairs.add((node.op,))
        pairs.update((producer[name], node.op) for name in node.inputs if name in producer)
        nodes.add((node.op, json.dumps(node.attrs, sort_keys=True), tuple(tuple(shapes[name]) for name in node.inputs)))
    return frozenset(pairs), frozenset(nodes)


def parse_shares(text: str, compiling: list[str]) -> dict[str, float]:
    """`--compile-share` -> {backend name: share of worker time}.

    Comma-separated items: `NAME=SHARE` sets the backends whose name is NAME or starts with
    "NAME:" (so `jax-jit=0.2` covers every jax-jit dtype); one bare number is the total share
    of the backends not named, split evenly among them (default 0.5).
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
        matched = [b for b in compiling if b == name or b.startswith(name + ":")]
        if not matched:
            raise UserError(f"--compile-share names '{name}', which is none of this campaign's compiling backends "
                            f"({', '.join(compiling) or 'none'}).")
        shares.update({b: share for b in matched})
    unnamed = [b for b in compiling if b not in shares]
    total = float(DEFAULT_SHARE) if rest is None else rest
    shares.update({b: total / len(unnamed) for b in unnamed})
    if sum(shares.values()) > 1.0 + 1e-9:
        raise UserError(f"The compile shares add up to {sum(shares.values()):.2f} of worker time; keep the total at 1 or less.")
    return shares


class CompileBudget:
    def __init__(self, shares: dict[str, float], cold_start: dict[str, float] | None = None):
        """`cold_start`: each backend's expected seconds for its first graph (default 1 s)."""
        self.shares = dict(shares)
        self.cold_start = {name: (cold_start or {}).get(name, 1.0) for name in shares}
        self.worker_seconds = 0.0
        self.charged = {name: 0.0 for name in shares}
        self.compiled = {name: 0 for name in shares}
        self.seen_pairs: dict[str, set] = {name: set() for name in shares}
        self.seen_nodes: dict[str, set] = {name: set() for name in shares}

    def novelty(self, backend: str, features: tuple[frozenset, frozenset]) -> int:
        pairs, nodes = features
        if not pairs <= self.seen_pairs[backend]:
            return NEW_PAIR
        if not nodes <= self.seen_nodes[backend]:
            return NEW_NODE
        return NOTHING

    def wants(self, backend: str, features: tuple[frozenset, frozenset]) -> bool:
        """Should `backend` compile a graph with these features now?"""
        allowed = ALLOWANCE[self.novelty(backend, features)] * self.shares[backend] * self.worker_seconds
        return self.charged[backend] + self.expected_cost(backend) <= allowed

    def expected_cost(self, backend: str) -> float:
        if self.compiled[backend] == 0:
            return self.cold_start[backend]
        return self.charged[backend] / self.compiled[backend]

    def charge(self, backend: str, seconds: float, features: tuple[frozenset, frozenset]) -> None:
        """`backend` ran a graph with these features for `seconds` (compile and runs)."""
        self.charged[backend] += seconds
        self.compiled[backend] += 1
        self.seen_pairs[backend] |= features[0]
        self.seen_nodes[backend] |= features[1]

    def advance(self, seconds: float) -> None:
        """The worker spent `seconds` more (on anything): every share grows with it."""
        self.worker_seconds += seconds
