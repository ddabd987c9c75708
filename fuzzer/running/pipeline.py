"""What a worker does with one seed index: generate -> check on every backend -> shrink new findings.

Runs inside a worker process (fuzzer/running/workers.py) and can run in-process too. The
result is a record of fuzzer/records.py for the parent, which is the only corpus writer.
A backend error that leaves the device unusable (errors.poisons_device) ends the request
with DevicePoisoned: nothing this process runs after it can be trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable

from fuzzer.arrays import materialize, regime_profiles
from fuzzer.backend_names import BackendName
from fuzzer.backends import Backend, all_ops_supported_by, get_backend, kind_family, parse_backend_list
from fuzzer.complex_dtypes import COMPLEX_DTYPES, is_complex
from fuzzer.exact_dtypes import EXACT_DTYPES, is_exact
from fuzzer.running.dtype_families import budget_account, drawn_dtype, family_lanes_apply, float_backends, lane_backends, split_budget, turns
from fuzzer.running.budget import (DEFAULT_SHARE, SINGLE, SMALL, SMALL_NODES, WHOLE, CompileBudget, graph_features, parse_shares,
                           slot_shares)
from fuzzer import verdicts
from fuzzer.drawing import motifs
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.drawing.regimes import COMPLEX_REGIMES, INTEGER_REGIMES, Regime, parse_regime_list
from fuzzer.drawing.region_pairs import focus_of, node_pairs
from fuzzer.drawing.regions import dtype_regions, keys_of, node_regions
from fuzzer.drawing.shape_variants import shape_variant
from fuzzer.errors import DevicePoisoned, DiskFull, InternalError, UserError, fills_disk, poisons_device
from fuzzer.ir import Case, Graph
from fuzzer.judging import judged_share
from fuzzer.judging.check import CaseResult, Finding, check_case, still_fails_predicate
from fuzzer.judging.localize import NodeIsolation
from fuzzer.judging.unmasked import unmasked_findings
from fuzzer.ops import derived, get_op
from fuzzer.ops.derived.ops import FAMILY as DERIVED_FAMILY
from fuzzer.oracle import Reference
from fuzzer.plugins import load_plugins
from fuzzer.records import CaseReply, CheckReply, FoundCase, ShrinkReply
from fuzzer.running.execute import ERROR, OK, UNSUPPORTED, run_backend
from fuzzer.shrinking.shrink import shrink_case
from fuzzer.triaging.known import Registry

THREADS_ENV = "FUZZ_WORKER_THREADS"
SINGLE_DRAWS = 4  # seeds a compiler tries for an op's one-op graph (or a motif's) before leaving it to the other tiers


@dataclass
class WorkerConfig:
    backends: list[str]
    ops: list[str] | None = None
    max_nodes: int = 8
    regimes: list[str] | None = None  # names from fuzzer/drawing/regimes.py; None: all, at their stated shares
    seed: int = 0
    inputs_per_graph: int = 2
    # Each compiling backend's share of the worker's time (see fuzzer/running/budget.py): a number is
    # the total for all of them, split by their compile_weight; "name=share" entries set one backend's share.
    compile_share: str = DEFAULT_SHARE
    # Further input sets (other value regimes, same shapes) each compiler runs a graph it compiled on.
    compiled_inputs: int = 8
    # The compilers this worker slot runs, each with its part of the compile share (compiler affinity:
    # fuzzer/running/budget.py's assign_compilers; set by the campaign, never stored). None: every one at its share.
    compilers: dict[str, float] | None = None
    # Each of its compilers' part of the single-op tier, [j, m] (budget.single_op_parts; set by the
    # campaign, never stored). None: every op.
    single_op_parts: dict[str, list[int]] | None = None
    # Each of its compilers' order of the single-op tier's ops (budget.single_op_order, from the
    # corpus's stored campaigns; set by the campaign, never stored). None: the campaign's op order.
    single_op_orders: dict[str, list[str]] | None = None
    # A folder the campaign's workers share for FirstCompileGate (set by the campaign, never stored).
    first_compile_dir: str | None = None
    # Intra-op threads per worker for torch and XLA's CPU client; 0 leaves the libraries' defaults.
    threads: int = field(default_factory=lambda: int(os.environ.get(THREADS_ENV, "1")))
    shrink_time: float = 60.0
    reruns: int = 2
    plugins: list[str] = field(default_factory=list)
    memory_limit_mb: int | None = None
    # The share of graphs of a campaign not given --ops that may draw the ops derived from torch's op
    # database; 0 leaves them out. `fuzz run`'s default is fuzzer/ops/derived/'s DEFAULT_SHARE; a campaign
    # built in code (a plugin's test, selftest) draws the graphs it drew before unless it asks.
    derived_share: float = 0.0
    # The shares of a float campaign's graphs drawn in the integer and bool dtypes and in the complex ones
    # (fuzzer/running/dtype_families.py); as with derived_share, `fuzz run` sets its defaults, code asks.
    integer_share: float = 0.0
    complex_share: float = 0.0


def seed_for(campaign_seed: int, index: int) -> int:
    """The graph seed of the index-th case of a campaign: a fixed stream, so resume repeats nothing."""
    digest = hashlib.sha256(f"{campaign_seed}:{index}".encode()).hexdigest()
    return int(digest[:15], 16)


def campaign_ops(requested: list[str] | None, backends: list[Backend], derived_share: float = 0.0) -> list[str]:
    """The ops a campaign draws from: those requested (default: all, the derived ops too where their
    table is here and `derived_share` is not 0) that every backend supports, so a plugin declaring a
    few ops gets graphs it can run."""
    supported = all_ops_supported_by(backends)
    if requested is None and derived_share:
        supported += [name for name in derived.default_ops() if all(b.supports(name) for b in backends)]
    # A requested derived op (fuzzer/ops/derived/) is outside registry(), which all_ops_supported_by walks.
    ops = [op for op in (requested or supported) if op in supported or all(b.supports(op) for b in backends)]
    if not ops:
        raise UserError(f"No op is supported by every selected backend ({', '.join(b.name for b in backends)}); "
                        "pass fewer backends or other --ops.")
    return ops


def all_exact(backends: list[Backend]) -> bool:
    """Is every backend an integer or bool one? Then the campaign draws integer values (regimes.INTEGER_REGIMES)."""
    return all(is_exact(backend.dtype) for backend in backends)


def drawn_derived_share(config: WorkerConfig) -> float:
    """The share of graphs that may draw derived ops beside the others: --derived-share in a default
    campaign; none for one given its ops, which draws them all alike."""
    return 0.0 if config.ops else config.derived_share


def case_generator(config: WorkerConfig, backends: list[Backend]) -> CaseGenerator:
    """The campaign's case stream: its ops (those every backend supports), size and regimes."""
    share = drawn_derived_share(config)
    return CaseGenerator(campaign_ops(config.ops, backends, share), config.max_nodes, campaign_regimes(config, backends), share)


def campaign_regimes(config: WorkerConfig, backends: list[Backend]) -> tuple[Regime, ...]:
    """The campaign's regimes (the integer ones where every backend judges exactly); without a jax-vmap
    backend, no ladder graph puts its rung on a batch. The default mix draws programs only where a
    backend runs them, and not for a campaign narrowed to some ops or holding a plugin's backend: a
    program's statements are ops of their own, which those would not have chosen."""
    regimes = parse_regime_list(",".join(config.regimes or []), integers=all_exact(backends),
                                complex_values=all(is_complex(backend.dtype) for backend in backends))
    if not config.regimes and (config.ops or not any(backend.runs_program_steps() for backend in backends)
                               or any(kind_family(BackendName.parse(backend.name)) is None for backend in backends)):
        regimes = tuple(regime for regime in regimes if not regime.programs)
    if any(BackendName.parse(backend.name).kind == "jax-vmap" for backend in backends):
        return regimes
    return tuple(replace(regime, vmapped=False) if regime.ladder else regime for regime in regimes)


# The value regimes a compiled graph's further input sets cycle through (same shapes, so no recompile).
VALUE_REGIMES = ("special-values", "magnitudes", "small")


@dataclass(frozen=True)
class CaseSource:
    """How a worker drew a case it checks, so that the parent can draw it again if the worker
    dies on it: the index's drawn graph (tier WHOLE), or the one-op (SINGLE) or small (SMALL)
    graph a compiler took instead (fuzzer/running/budget.py), and which of its input sets. The drawn graph
    of an index is determined by the campaign's seed, the index and `focus`: the region key the
    campaign steered it toward (fuzzer/drawing/regions.py), or None for the plain mix: never by the worker
    that draws it. Which compilers check an index does depend on its worker (the compilers of its
    slot, and their compile budget: fuzzer/running/budget.py), and so do the one-op and small graphs they take."""

    index: int
    tier: str = WHOLE
    op: str | None = None  # SINGLE: the op
    input_set: int = 0
    focus: str | None = None  # WHOLE: the region key (or pair of keys, fuzzer/drawing/region_pairs.py) it was steered toward

    def to_list(self) -> list:
        return [self.index, self.tier, self.op, self.input_set, self.focus]


def alone_items(graph: Graph) -> list[str]:
    """The single-op tier's items (fuzzer/running/budget.py) `graph` covers: its op where it has one node, and
    the keys of the motif variants whose chain it holds (fuzzer/drawing/motifs.py)."""
    return [op for op in graph.op_names() if len(graph.nodes) == 1] + sorted(motifs.held(graph))


class CaseDrawer:
    """Every case of a campaign from its CaseSource (the workers and the parent draw alike). In a float
    campaign with dtype families, a family graph's index is drawn by its dtype's lane, a CaseDrawer of its
    own (`lane`, fuzzer/running/dtype_families.py)."""

    def __init__(self, config: WorkerConfig, backends: list[Backend]):
        self.config = config
        self.dtype: str | None = None  # a lane's family dtype
        self.families = _family_lanes(config, backends)  # dtype -> its lane
        listed = {backend.dtype for backend in backends}
        self.turns = tuple(turns(tuple(d for d in family if d in self.families), listed) for family in (EXACT_DTYPES, COMPLEX_DTYPES))
        self.backends = backends = float_backends(backends)  # those of the graphs this drawer draws
        self.whole = case_generator(config, backends)
        self.ops = list(self.whole.op_names)
        # The derived ops drawn at a share of graphs: the campaign steers toward the others' region keys
        # and compiles them alone first (their share is what it gives the derived ops).
        self.shared = [name for name in self.ops if get_op(name).family == DERIVED_FAMILY] if drawn_derived_share(config) else []
        self.regimes = campaign_regimes(config, backends)
        # The single-op tier's items (fuzzer/running/budget.py): each op, and where a regime draws motifs each
        # motif variant its ops build, whose chain is compiled alone like an op.
        self.motif_items = motifs.declared(self.ops) if any(regime.motifs for regime in self.regimes) else []
        self.alone_items = self.ops + self.motif_items
        # The value regimes the campaign allows, for the further input sets of compiled graphs.
        self.value_regimes = tuple(name for name in VALUE_REGIMES if name in {r.name for r in self.regimes})
        self._small: CaseGenerator | None = None
        self._single: dict[str, CaseGenerator] = {}

    def lane(self, index: int) -> "CaseDrawer":
        """The drawer of graph `index`: the lane of its family dtype, or this one for a float graph."""
        if not self.families:
            return self
        dtype = drawn_dtype(index, self.config.integer_share, self.config.complex_share, *self.turns)
        return self.families[dtype] if dtype else self

    def graph_case(self, source: CaseSource) -> Case:
        """The case of `source`'s graph with its first input set (InternalError: none can be drawn)."""
        if self.lane(source.index) is not self:
            return self.lane(source.index).graph_case(source)
        seed = seed_for(self.config.seed, source.index)
        if source.tier == SINGLE:
            return self._alone_case(source.op, seed + 1)
        if source.tier == SMALL:
            if self._small is None:
                self._small = CaseGenerator(self.ops, min(SMALL_NODES, self.config.max_nodes), self.regimes,
                                            drawn_derived_share(self.config))
            return self._small.case(seed + 2)
        return self.whole.case(seed, focus_of(source.focus) if source.focus else None)

    def _alone_case(self, item: str, seed: int) -> Case:
        """A single-op tier item's graph: the op alone, or a motif variant's chain alone (drawn from the
        campaign's ops, steered to its key)."""
        if motifs.find(item) is None:
            if item not in self._single:
                self._single[item] = CaseGenerator([item], 1, self.regimes)
            return self._single[item].case(seed)
        if motifs.PREFIX not in self._single:
            self._single[motifs.PREFIX] = CaseGenerator(self.ops, 1, self.regimes)
        case = self._single[motifs.PREFIX].case(seed, focus_of(item))
        if item not in motifs.held(case.graph):
            raise InternalError(f"hypothesis drew no chain of {item} from seed {seed}")
        return case

    def plain_sets(self, source: CaseSource) -> int:
        """Input sets drawn from the graph's own regime: --inputs-per-graph for the drawn graph, one for
        a compiler's one-op or small graph (its further sets are the compiled ones)."""
        return self.config.inputs_per_graph if source.tier == WHOLE else 1

    def shape_variants(self) -> int:
        """Shape variants a dynamic-shape compiler runs after the value sets: half as many."""
        return self.config.compiled_inputs // 2

    def input_set(self, case: Case, source: CaseSource) -> Case | None:
        """The `source.input_set`-th input set of `source`'s drawn `case` (0: the case itself). Its
        plain sets take values from the graph's own regime; the further sets of a compiled graph
        from the campaign's value regimes in turn (special values, magnitudes, plain values), and a
        graph of the small regime is then labelled with the regime its values came from. After
        those come the shape variants (fuzzer/drawing/shape_variants.py): None where the graph has none."""
        if self.lane(source.index) is not self:
            return self.lane(source.index).input_set(case, source)
        number, plain_sets = source.input_set, self.plain_sets(source)
        if number == 0:
            return case
        seed = case.seed + number
        if number >= plain_sets + self.config.compiled_inputs:
            variant = shape_variant(case.graph, seed)
            return None if variant is None else materialize(variant, seed, regime_profiles(variant, seed))
        if number < plain_sets or not self.value_regimes:
            return materialize(case.graph, seed, regime_profiles(case.graph, seed))
        regime = self.value_regimes[(number - plain_sets) % len(self.value_regimes)]
        graph = case.graph if case.graph.regime else replace(case.graph, regime="" if regime == "small" else regime)
        return materialize(graph, seed, regime_profiles(graph, seed, regime))

    def draw(self, source: CaseSource) -> Case:
        case = self.input_set(self.graph_case(source), source)
        if case is None:
            raise InternalError(f"input set {source.input_set} of graph {source.index} has no shape variant")
        return case


def _family_lanes(config: WorkerConfig, backends: list[Backend]) -> dict[str, CaseDrawer]:
    """The lanes of a float campaign's family dtypes (dtype -> its drawer), each drawing from its family's
    regimes (those --regimes names, if it names any); none for a dtype whose backends run none of the
    --ops (`--ops conv2d`)."""
    if not (config.integer_share or config.complex_share) or not family_lanes_apply(backends):
        return {}
    lanes = {}
    for dtype in (*EXACT_DTYPES * bool(config.integer_share), *COMPLEX_DTYPES * bool(config.complex_share)):
        regimes = INTEGER_REGIMES if is_exact(dtype) else COMPLEX_REGIMES
        named = [name for name in config.regimes or () if name in {regime.name for regime in regimes}]
        lane_config = replace(config, regimes=named or None, integer_share=0.0, complex_share=0.0)
        members = lane_backends(backends, dtype)
        if config.ops and not any(all(b.supports(op) for b in members) for op in config.ops):
            continue
        lanes[dtype] = CaseDrawer(lane_config, members)
        lanes[dtype].dtype = dtype
    return lanes


class FirstCompileGate:
    """One worker of a campaign pays each compiler's first compile while the others go on with the
    cheap tier; they follow once it is done. The first compile fills inductor's and triton's caches
    on disk (a fresh machine: ~17 s for torch.compile on the CPU); 14 workers paying it at once on
    the H100 held the whole campaign for ~85 s. Files in a folder the workers share: NAME.lock is
    taken (O_EXCL) by the worker that goes first, NAME.done written when it has compiled. A lock
    older than STALE_S (its worker died) no longer holds the others back; without a folder, or on
    a machine that does not see it (Ray), every worker goes at once."""

    STALE_S = 300.0

    def __init__(self, folder: str | None):
        self.folder = folder
        self.holding: set[str] = set()

    def may_compile(self, name: str) -> bool:
        if self.folder is None or name in self.holding:
            return True
        lock, done = (os.path.join(self.folder, f"{name}.{end}") for end in ("lock", "done"))
        try:
            if os.path.exists(done):
                return True
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            self.holding.add(name)
            return True
        except FileExistsError:
            try:
                return time.time() - os.stat(lock).st_mtime > self.STALE_S
            except OSError:
                return True
        except OSError:  # no such folder here
            return True

    def compiled(self, name: str) -> None:
        if name in self.holding:
            self.holding.discard(name)
            with contextlib.suppress(OSError):
                open(os.path.join(self.folder, f"{name}.done"), "w").close()


class Pipeline:
    def __init__(self, config: WorkerConfig, heartbeat: Callable[[Backend | None, CaseSource], None] | None = None,
                 known_bugs: Registry | None = None):
        """`known_bugs`: the campaign's registry, whose bugs are stored as found but never shrunk: each
        has its case on file (their first shrinks were 8% of a 10-minute CPU campaign's worker time)."""
        self.config = config
        self.known_bugs = known_bugs
        load_plugins(config.plugins)
        self.backends = parse_backend_list(",".join(config.backends))
        self.drawer = CaseDrawer(config, self.backends)
        self.heartbeat = heartbeat or (lambda backend, source: None)
        self.shrunk_signatures: set[str] = set()
        compiling = [b for b in self.drawer.backends if b.expensive]
        # The compile budget each compiler spends: its own; a family lane's, its float peer's family account (split_budget).
        self.accounts = {b.name: b.name for b in compiling}
        self.accounts.update({b.name: budget_account(b, self.drawer.backends) for lane in self.drawer.families.values()
                              for b in lane.backends if b.expensive})
        shares = parse_shares(config.compile_share, [b.name for b in compiling], {b.name: b.compile_weight for b in compiling})
        if config.compilers is not None:
            shares = slot_shares(shares, config.compilers)
        if self.drawer.families:
            shares = split_budget(shares, self.accounts, config.integer_share + config.complex_share)
        # Nothing but compilers (jax-jit against jax-jit@old-jax): there is no cheap tier to share
        # the worker with, so every compiler takes every drawn graph (a budget would only idle it).
        self.budget = (CompileBudget(shares, self.drawer.alone_items, config.single_op_parts, config.single_op_orders)
                       if len(compiling) < len(self.drawer.backends) else None)
        for lane in self.drawer.families.values() if self.budget else ():
            for backend in lane.backends:
                if backend.expensive and self.accounts[backend.name] not in (None, backend.name):
                    self.budget.add_lane_compiler(backend.name, lane.alone_items)
        self.gate = FirstCompileGate(config.first_compile_dir)
        self.backend_seconds: dict[str, float] = {}  # every run of the current graph, reruns included
        self.first_status: dict[str, str] = {}
        self.source = CaseSource(0)  # what the worker checks now (for the heartbeat)
        self.regions: set[str] = set()  # the region keys of the cases checked for the current index
        self.pairs: set[str] = set()  # ... and the pairs of keys of one node (fuzzer/drawing/region_pairs.py)
        self.single_draw_failures: Counter[str] = Counter()

    def runner(self, backend: Backend, case: Case):
        self.heartbeat(backend, self.source)
        outcome = run_backend(backend, case)
        # Back in our own work (the oracle's honest models, which the lazy oracle computes after the
        # backend, take a minute for a float16 conv among 14 workers): its silence is not the backend's.
        self.heartbeat(None, self.source)
        if outcome.status == ERROR and poisons_device(outcome.error):
            # Every later run in this process would fail alike and be taken for findings: the request ends here.
            raise DevicePoisoned(backend.name, outcome.error, self.source.to_list())
        if outcome.status == ERROR and fills_disk(outcome.error):  # the disk's fault, not the backend's: no finding
            raise DiskFull(backend.name, outcome.error)
        self.backend_seconds[backend.name] = self.backend_seconds.get(backend.name, 0.0) + outcome.seconds
        self.gate.compiled(backend.name)  # its first run compiled: the other workers need not wait for the whole index
        self.first_status.setdefault(backend.name, outcome.status)
        return outcome

    def handle(self, request: tuple) -> CaseReply | CheckReply | ShrinkReply | dict:
        """One request of the worker protocol (the process workers and the Ray actors both answer
        with this; the requests are listed in fuzzer/running/workers.py)."""
        kind, *arguments = request
        if kind == "case":  # ("case", index, known signatures[, focus])
            return self.run_index(arguments[0], set(arguments[1]), *arguments[2:])
        handlers = {"check": self.check_given, "shrink": self.shrink_given, "outputs": self.outputs_given,
                    "extra-reference": self.extra_reference_given, "recheck": self.recheck}
        if kind not in handlers:
            raise ValueError(f"unknown worker request {kind!r}")
        return handlers[kind](*arguments)

    def compile_plan(self, whole: CaseSource, case: Case, lane: CaseDrawer) -> dict[CaseSource, tuple[Case, list[Backend]]]:
        """Which compilers of `lane` (the drawer of `whole`'s index) run now, and on which graph: the
        drawn `case` (of `whole`), or a one-op or small graph of their novelty tier (fuzzer/running/budget.py; a
        family lane's compilers have a tier of their own over their lane's ops, drawn in the lane, on their float
        peers' family accounts). Compilers given the same graph share its runs."""
        compilers = [b for b in lane.backends if b.expensive]
        if not self.budget:
            return {whole: (case, [b for b in compilers if b.supports_graph(case.graph)])}
        plan: dict[CaseSource, tuple[Case, list[Backend]]] = {}
        for backend in compilers:
            account = self.accounts[backend.name]
            if account is None:  # a family lane's compiler of a kind no float compiler has: every graph of its lane
                if backend.supports_graph(case.graph):
                    plan.setdefault(whole, (case, []))[1].append(backend)
                continue
            if not self.budget.may_afford(account):
                continue
            source = self._tier_source(backend, whole)
            candidate = plan[source][0] if source in plan else case if source == whole else self._tier_case(source)
            if candidate is None or not backend.supports_graph(candidate.graph):
                if source.tier == SINGLE and (candidate is not None or self._gave_up_drawing(source.op)):
                    self.budget.cover_single(backend.name, source.op)  # leave this op to the other tiers
                continue
            first = self.budget.compiled[account] == 0
            if self.budget.wants(account, graph_features(candidate.graph, lane.dtype)) and (not first or self.gate.may_compile(account)):
                plan.setdefault(source, (candidate, []))[1].append(backend)
        return plan

    def _tier_source(self, backend: Backend, whole: CaseSource) -> CaseSource:
        tier, index = self.budget.tier(backend.name), whole.index
        if tier == WHOLE:
            return whole
        if tier != SINGLE:
            return CaseSource(index, tier)
        # The least compiled alone first: the workers running a compiler take parts of its order (single_op_parts).
        items = self.budget.uncovered_ops(backend.name)
        if self.budget.compiles(backend.name) == 0:
            # Its cold start, which its share is not charged, on one op alone: the cheapest compile (a motif's
            # chain holds up to six nodes).
            items = [item for item in items if motifs.find(item) is None] or items
        return CaseSource(index, SINGLE, items[0])

    def _gave_up_drawing(self, op: str) -> bool:
        """Counts one more failed draw of `op`'s one-op graph; True once there are SINGLE_DRAWS (other
        seeds may draw it: hypothesis found conv3d's shapes for 2 of 3 seeds, and one failure cost
        it its turn alone)."""
        self.single_draw_failures[op] += 1
        return self.single_draw_failures[op] >= SINGLE_DRAWS

    def _tier_case(self, source: CaseSource) -> Case | None:
        try:
            return self.drawer.graph_case(source)
        except InternalError:  # hypothesis found no valid graph of this one op (conv3d's shapes)
            return None

    def run_index(self, index: int, known_signatures: set[str], focus: str | None = None) -> CaseReply:
        """Graph `index`, steered toward the region key or pair `focus` where given (fuzzer/drawing/regions.py)."""
        start = time.perf_counter()
        self.backend_seconds, self.first_status, self.overhead = {}, {}, {}
        self.regions, self.pairs = set(), set()
        whole, lane = CaseSource(index, focus=focus), self.drawer.lane(index)
        case = self.drawer.graph_case(whole)
        plan = self.compile_plan(whole, case, lane)
        _, compilers_on_case = plan.pop(whole, (case, []))
        backends = [b for b in lane.backends
                    if (not b.expensive and b.supports_graph(case.graph)) or b in compilers_on_case]
        reply = CaseReply(index, case.graph.op_names(), case.graph.regime or "small", [b.name for b in backends])
        self._check_input_sets(whole, case, backends, reply, known_signatures)
        for source, (graph_case, compilers) in plan.items():
            self._check_input_sets(source, graph_case, compilers, reply, known_signatures)
        # A compiler in the plan that never ran: its graph's reference defined nothing (invalid).
        ran = {b.name: (whole, case) for b in compilers_on_case if b.name in self.first_status}
        ran.update({b.name: (source, graph_case) for source, (graph_case, compilers) in plan.items() for b in compilers
                    if b.name in self.first_status})
        if self.budget:
            for name, (source, graph_case) in ran.items():
                if self.accounts[name] is None:
                    continue
                self.budget.charge(self.accounts[name], self.backend_seconds[name] + self.overhead.get(name, 0.0),
                                   graph_features(graph_case.graph, lane.dtype), source.tier)
                if self.accounts[name] != name:  # a family lane's compiler: its own tier, on its account's budget
                    self.budget.count_lane_compile(name, source.tier)
                # Its tier item, and every other it compiled on the way (addmm + relu holds addmm's chain).
                for item in ([source.op] if source.tier == SINGLE else []) + alone_items(graph_case.graph):
                    self.budget.cover_single(name, item)
            self.budget.advance(time.perf_counter() - start)
        reply.seconds = self.backend_seconds
        reply.worker_seconds = time.perf_counter() - start
        reply.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        # New structures per compiler (structures never repeat: 2 whole-graph repeats in 2,051 graphs).
        reply.compiled_structures = [name for name in ran if self.first_status[name] == OK]
        reply.not_compiled = [name for name in ran if self.first_status[name] == UNSUPPORTED]
        reply.budget_skipped = [b.name for b in lane.backends if b.expensive and b.name not in ran]
        reply.regions, reply.pairs = sorted(self.regions), sorted(self.pairs)
        return reply

    def _check_input_sets(self, source: CaseSource, case: Case, backends: list[Backend], reply: CaseReply,
                          known_signatures: set[str]) -> None:
        """Check `case` on `backends` with its plain input sets, then the compilers among them that
        compiled it on `compiled_inputs` more (compile once, test many: same shapes, no recompile),
        then the dynamic-shape compilers among those on shape variants of the graph (their one
        compile serves every size). The time of a set only compilers ran, beyond their own runs,
        is theirs (self.overhead)."""
        plain_sets = self.drawer.plain_sets(source)
        value_sets = plain_sets + self.config.compiled_inputs
        for number in range(value_sets + self.drawer.shape_variants()):
            if number == plain_sets:
                backends = [b for b in backends if b.expensive and self.first_status.get(b.name) == OK]
            if number >= plain_sets:  # a kind past the compiled sets it runs (Backend.compiled_sets) leaves
                backends = [b for b in backends if b.compiled_sets is None or number < plain_sets + b.compiled_sets]
            if number == value_sets:
                backends = [b for b in backends if b.dynamic]
            if not backends:
                return
            self.source = replace(source, input_set=number)
            current = self.drawer.input_set(case, self.source)
            if current is None:
                return  # no size of this graph can change: no variant would
            began, ran_before = time.perf_counter(), sum(self.backend_seconds.get(b.name, 0.0) for b in backends)
            seen: list[Reference] = []  # the case's reference: its region keys now, the judged-share meter after the verdicts

            def on_reference(reference: Reference) -> None:
                seen.append(reference)
                regions = dtype_regions(node_regions(current.graph, reference.values), self.drawer.lane(source.index).dtype)
                self.regions |= keys_of(regions)
                self.pairs |= node_pairs(regions)

            result = check_case(current, backends, self.config.reruns, self.runner, on_reference=on_reference)
            reply.count([b.name for b in backends], current.graph.op_names(), number == 0,
                        alone_items(current.graph) if number == 0 else ())
            if all(b.expensive for b in backends):  # judging, localizing, other backends' runs (an inherited check)
                overhead = time.perf_counter() - began - (sum(self.backend_seconds.get(b.name, 0.0) for b in backends) - ran_before)
                for backend in backends:
                    self.overhead[backend.name] = self.overhead.get(backend.name, 0.0) + overhead / len(backends)
            judged_share.tally(reply.judged_share, judged_share.measure(current.graph, seen[0], result, backends))
            if result.verdict == verdicts.INVALID:
                reply.invalid += 1
                continue
            if result.findings:
                reply.found.append(self._found_case(current, result, known_signatures))
            for cut, cut_result in unmasked_findings(current, backends, result, self.config.reruns, self.runner):
                reply.found.append(self._found_case(cut, cut_result, known_signatures))

    def _found_case(self, case: Case, result: CaseResult, known: set[str]) -> FoundCase:
        found = FoundCase(case, result.verdict, list(result.findings), list(result.judged), list(result.verdicts))
        for finding in result.findings:
            if not verdicts.get(finding.verdict).shrink:
                continue  # not a bug: stored as found, with both errors, never shrunk
            if finding.signature in known or finding.signature in self.shrunk_signatures:
                continue
            if self.known_bugs is not None and self.known_bugs.match(finding, case.graph) is not None:
                continue
            self.shrunk_signatures.add(finding.signature)
            found.shrunk.append(self.shrink(case, finding))
        return found

    def shrink(self, case: Case, finding: Finding, seconds: float | None = None) -> ShrinkReply:
        backend = get_backend(finding.backend)
        predicate = still_fails_predicate(backend, finding.signature, self.config.reruns, self.runner, original=finding)
        shrunk = shrink_case(case, predicate, finding.culprit, seconds or self.config.shrink_time)
        final = check_case(shrunk.case, [backend], self.config.reruns, self.runner)
        return ShrinkReply(finding.signature, shrunk.case, shrunk.log(), final.verdict, list(final.findings),
                           list(final.verdicts), [backend.name])

    def check_given(self, case: Case, backend_names: list[str]) -> CheckReply:
        backends = [get_backend(name) for name in backend_names]
        return CheckReply.of(check_case(case, backends, self.config.reruns, self.runner))

    def outputs_given(self, case: Case, backend_name: str) -> dict:
        """One backend's outputs on `case`, or the error it raised (for `fuzz export --format issue`)."""
        try:
            return {"outputs": get_backend(backend_name).run(case)}
        except Exception as exc:  # noqa: BLE001 - the framework raised on the case: that is the result
            return {"error": f"{type(exc).__name__}: {exc}"}

    def extra_reference_given(self, case: Case, backend_name: str) -> dict:
        """{} once `backend_name`'s reference of its extra outputs is computed on `case`, or the error it raised."""
        try:
            get_backend(backend_name).extra_reference(case)
            return {}
        except Exception as exc:  # noqa: BLE001 - the framework raised on the case: the export reports it
            return {"error": f"{type(exc).__name__}: {exc}"}

    def shrink_given(self, case: Case, finding: Finding, seconds: float) -> ShrinkReply:
        return self.shrink(case, finding, seconds)

    def recheck(self, source: list, backend_name: str) -> CheckReply:
        """The case of `source` (a CaseSource as a list), whose run on `backend_name` poisoned another
        worker's device context, run again in this fresh worker: its nodes alone first, in graph order,
        so that the first one that poisons this worker too names the culprit; then the whole case.
        A reply means nothing poisoned this worker (the poisoning needed that worker's history)."""
        self.source = CaseSource(*source)
        case, backend = self.drawer.draw(self.source), get_backend(backend_name)
        isolation = NodeIsolation(backend, case, self.runner)
        for index, node in enumerate(case.graph.nodes):
            try:
                isolation.outcome(index)
            except DevicePoisoned as poisoned:
                raise DevicePoisoned(poisoned.backend, poisoned.error, poisoned.source, culprit=node.op) from None
        return self.check_given(case, [backend_name])
