"""A campaign: hand seed indices to isolated workers, store what they find, checkpoint, resume.

The parent process is the corpus's only writer. Workers generate, check and
shrink (fuzzer/running/pipeline.py); a worker that crashes or hangs becomes a crash/hang
finding for the case it was running, is restarted, and the campaign goes on. A
worker whose device a backend's error left unusable is replaced too, but what it
ran is not trusted: see Campaign._after_poisoning.
Seed indices form a fixed stream (pipeline.seed_for), so `--resume` continues
from the checkpoint without repeating or skipping a case.
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing.connection
import signal
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Callable

from fuzzer import verdicts
from fuzzer.backend_names import BackendName
from fuzzer.backends import parse_backend_list
from fuzzer.corpus import Corpus
from fuzzer.drawing import motifs
from fuzzer.drawing.region_pairs import declared_pairs
from fuzzer.drawing.regions import coverage, declared_dtype_regions, declared_regions, lane_targets, steered_focus
from fuzzer.errors import InternalError, UserError
from fuzzer.judging import judged_share
from fuzzer.judging.check import Finding
from fuzzer.plugins import load_plugins
from fuzzer.records import CaseRecord, CaseReply, CheckReply, FoundCase
from fuzzer.running.budget import assign_compilers, parse_shares, single_op_order, single_op_parts
from fuzzer.running.campaign_config import resumed_options
from fuzzer.running.dtype_families import budget_account, is_float
from fuzzer.running.environment import versions
from fuzzer.running.pipeline import CaseDrawer, CaseSource, WorkerConfig
from fuzzer.running.ray_workers import NodeLost, RayWorker, start_ray
from fuzzer.running.workers import SlowCheck, Worker, WorkerDied, WorkerPoisoned, stop_all, within_hard_limit
from fuzzer.shrinking.death_shrink import dies_again, shrink_death
from fuzzer.triaging.buckets import bucket_signatures
from fuzzer.triaging.known import Registry, load_registry

CHECKPOINT_EVERY = 2.0  # seconds
# Past --time, a worker still checking a case gets this long before it is killed and its case
# counted as abandoned; one in a compiling backend is killed at once (a compile can take minutes).
DEADLINE_GRACE = 3.0  # seconds
# ... except a case in which a compiler made its first compile (its cold start: tens of seconds on a loaded
# machine): it may finish for this long past --time, or the compiler would end the campaign untested.
FIRST_COMPILE_GRACE = 120.0  # seconds
# A worker this long in one step (a compile, a backend run, its own judging) is named on the progress line.
SLOW_WORK_S = 10.0


@dataclass
class CampaignOptions(WorkerConfig):
    """What a worker needs (WorkerConfig) plus what only the parent uses."""

    max_cases: int | None = None
    time_limit: float | None = None
    workers: int = 1
    timeout: float = 60.0
    compile_timeout: float = 600.0
    # jax and inductor keep every compiled graph; a worker past this peak memory is replaced
    # by a fresh one between cases (measured: ~4 GB after 10 minutes of the default set).
    recycle_rss_mb: int = 3000
    stop_after_findings: int | None = None  # selftest: stop at the first finding
    shrink_known: bool = False  # selftest: shrink even signatures the corpus already has
    ray: str | None = None  # run the workers as Ray actors: "local", "auto" or a cluster address
    steer: bool = True  # steer a share of graphs toward region keys not covered yet (fuzzer/drawing/regions.py)

    def worker_config(self) -> WorkerConfig:
        return WorkerConfig(**{f.name: getattr(self, f.name) for f in fields(WorkerConfig)})


@dataclass
class Progress:
    campaign_id: int
    graphs: int = 0
    checked: int = 0
    invalid: int = 0
    finding_cases: int = 0
    explained_cases: int = 0  # differences explained as no bug (precision policy, a base's finding): recorded
    new_buckets: int = 0  # buckets new to the corpus, of a bug that is not known: each gets a line
    known_findings: int = 0  # bug findings the known-bug registry lists, or in a bucket triaged `known`
    triaged_findings: int = 0  # bug findings in a bucket triaged `wontfix`
    unknown_finding_cases: int = 0  # cases with a bug finding that is neither: `fuzz run --fail-on new` exits 1
    crashes: int = 0
    unrepeated_hangs: int = 0  # hangs a fresh worker did not repeat (a slow case on a loaded machine): not findings
    unrepeated_deaths: int = 0  # kills from outside a fresh worker did not repeat (WorkerDied.from_outside), and deaths between requests: not findings
    poisoned_restarts: int = 0  # workers replaced after a backend's error left their device unusable
    slow_checks: int = 0  # cases not checked: the fuzzer's own work on them ran past --timeout (SlowCheck)
    internal_errors: int = 0
    last_internal_error: str = ""
    elapsed: float = 0.0
    op_counts: dict = field(default_factory=dict)
    regime_counts: dict = field(default_factory=dict)  # graphs per regime (fuzzer/drawing/regimes.py)
    backend_seconds: dict = field(default_factory=dict)
    worker_seconds: float = 0.0  # summed over workers: what the backend shares are shares of
    backend_graphs: dict = field(default_factory=dict)  # per backend: graphs it ran (compilers: their one-op and small ones too)
    backend_cases: dict = field(default_factory=dict)  # ... input sets it was judged on
    backend_op_counts: dict = field(default_factory=dict)  # ... op -> graphs with that op it ran (the report's coverage)
    alone_op_counts: dict = field(default_factory=dict)  # ... single-op tier item (op, motif key) -> graphs covering it (pipeline.alone_items)
    compiled_structures: dict = field(default_factory=dict)  # per compiling backend: new graphs compiled
    compiled_by_slot: dict = field(default_factory=dict)  # ... per worker slot ("0", "1", ...): compiler affinity
    not_compiled: dict = field(default_factory=dict)  # ... given a graph it could not compile (a graph break)
    budget_skipped: dict = field(default_factory=dict)  # ... graphs the compile budget did not give it
    abandoned: int = 0  # cases still running at the deadline, killed (neither checked nor findings)
    lost_nodes: list = field(default_factory=list)  # Ray: ids of the nodes lost mid-campaign (their cases ran again)
    regions_declared: list = field(default_factory=list)  # the region keys of the campaign's ops and regimes
    region_counts: dict = field(default_factory=dict)  # region key -> graphs that exercised it (fuzzer/drawing/regions.py)
    pairs_declared: list = field(default_factory=list)  # the pairs of region keys of one node (fuzzer/drawing/region_pairs.py)
    pair_counts: dict = field(default_factory=dict)  # pair -> graphs with a node that held both keys
    judged_share: dict = field(default_factory=dict)  # "op|dtype|kind" -> what the oracle judged (fuzzer/judging/judged_share.py)
    first_graph_s: float | None = None  # start-up: seconds from the start until the first graph was checked
    # The step the busy worker silent longest is in, once it has taken SLOW_WORK_S: {"doing": "compiling",
    # "backend": "torch-compile:cpu:float32", "seconds": 42.0} (backend None: the fuzzer's own judging); else {}.
    slow_work: dict = field(default_factory=dict)
    next_index: int = 0
    done_above: list = field(default_factory=list)
    status: str = "running"

    @property
    def graphs_per_second(self) -> float:
        return self.graphs / self.elapsed if self.elapsed > 0 else 0.0

    def structures_per_second(self) -> dict:
        return {name: round(count / self.elapsed, 3) if self.elapsed > 0 else 0.0
                for name, count in sorted(self.compiled_structures.items())}

    def cases_per_structure(self) -> dict:
        """Per compiler: input sets judged per structure it compiled (compile once, test many)."""
        return {name: round(self.backend_cases.get(name, 0) / count, 1)
                for name, count in sorted(self.compiled_structures.items()) if count}

    def rarely_run(self, backends: list[str], shares: dict[str, float], floor: float = 0.05) -> list[str]:
        """The backends asked for that were judged on under `floor` of the cases (cases, not graphs: a
        compiler runs each graph it compiled on many input sets), except a compiler that had at least
        0.8 of its declared share of worker time (`shares`): it ran as much as it was given."""
        time_share = self.backend_time_share()
        for name, share in list(time_share.items()):  # a family lane's compiler spends its float peer's share
            peer = _family_peer(name, backends)
            if peer is not None:
                time_share[peer] = time_share.get(peer, 0.0) + share
        return [name for name in backends if self.checked and self.backend_cases.get(name, 0) < floor * self.checked
                and time_share.get(name, 0.0) < 0.8 * shares.get(name, float("inf"))]

    def region_coverage(self) -> dict:
        """{"declared", "covered", "never_reached"}: the declared region keys and those covered."""
        return coverage(self.region_counts, self.regions_declared)

    def motif_coverage(self) -> dict:
        """The same for the motifs' keys (fuzzer/drawing/motifs.py) among the region keys."""
        return coverage(self.region_counts, self.regions_declared, motifs.PREFIX)

    def pair_coverage(self) -> dict:
        """The same for the declared pairs of keys."""
        return coverage(self.pair_counts, self.pairs_declared)

    def backend_time_share(self) -> dict:
        """Each backend's share of the time workers spent on cases (generation and judging included)."""
        busy = self.worker_seconds or 1.0
        return {name: round(seconds / busy, 3) for name, seconds in sorted(self.backend_seconds.items())}

    def to_dict(self) -> dict:
        data = asdict(self)
        data["graphs_per_second"] = round(self.graphs_per_second, 2)
        data["cases_per_second"] = round(self.checked / self.elapsed, 2) if self.elapsed > 0 else 0.0
        data["structures_per_second"] = self.structures_per_second()
        data["cases_per_structure"] = self.cases_per_structure()
        data["backend_time_share"] = self.backend_time_share()
        data["region_coverage"] = {k: v for k, v in self.region_coverage().items() if k != "never_reached"}
        data["pair_coverage"] = {k: v for k, v in self.pair_coverage().items() if k != "never_reached"}
        return data

    def event_dict(self) -> dict:
        """to_dict without the region key and pair lists (~1,000 and ~3,000 each) and the judged-share rows
        (op x dtype x kind), which only the checkpoint keeps: a progress event gives their coverage's counts."""
        return {k: v for k, v in self.to_dict().items()
                if k not in ("regions_declared", "region_counts", "pairs_declared", "pair_counts", "judged_share")}


class Campaign:
    def __init__(self, corpus: Corpus, options: CampaignOptions, on_progress: Callable[[Progress], None] | None = None,
                 on_new_bucket: Callable[[Progress, Finding, int], None] | None = None, known_bugs: Registry | None = None):
        self.corpus = corpus
        self.options = options
        self.on_progress = on_progress or (lambda progress: None)
        self.on_new_bucket = on_new_bucket or (lambda progress, finding, case_id: None)  # (progress, finding, case id)
        buckets = corpus.buckets()
        # The findings' signatures the corpus holds (the workers shrink only others) and its buckets (fuzzer/triaging/buckets.py).
        self.known_signatures = set() if options.shrink_known else corpus.member_signatures()
        self.known_buckets = {b["signature"] for b in buckets}
        self.known_bugs = known_bugs if known_bugs is not None else load_registry()
        # The workers shrink no finding of a registry bug, but for selftest, which shrinks everything.
        self._unshrunk_bugs = None if options.shrink_known else self.known_bugs
        # Triage as the campaign starts: findings in a bucket a person settled do not fail the run.
        self.settled = {b["signature"]: b["status"] for b in buckets if b["status"] in ("known", "wontfix")}
        self.marked_known: set[str] = set()  # buckets this campaign recorded as known bugs
        # Declared keys and pairs not covered yet, sorted (None: to compute).
        self._uncovered: tuple[list[str], list[str]] | None = None
        self._steered: Counter = Counter()  # key or pair -> graphs steered toward it (regions.steered_focus)
        # The same drawer as the workers', to rebuild the case a dead worker was running.
        load_plugins(options.plugins)
        self.backends = parse_backend_list(",".join(options.backends))
        self.drawer = CaseDrawer(options, self.backends)
        compiling = [b for b in self.drawer.backends if b.expensive]  # the float graphs' (a family's spend theirs)
        # Parsed once (a bad share fails here), for the compiler affinity of every worker slot.
        self.compile_shares = parse_shares(options.compile_share, [b.name for b in compiling],
                                           {b.name: b.compile_weight for b in compiling})

    @classmethod
    def resume(cls, corpus: Corpus, campaign_id: int, on_progress=None, on_new_bucket=None, plugins=(), ray=None,
               known_bugs: Registry | None = None, **overrides) -> "Campaign":
        """The stored campaign, its config and checkpoint checked against the bounds of `fuzz run`'s options
        (fuzzer/running/campaign_config.py); `plugins` and `ray` come from the command line, never from the row.
        Everything is checked before the lease is taken, so a refused resume leaves the corpus as it was."""
        config, state = resumed_options(corpus.campaign(campaign_id), list(plugins))
        options = CampaignOptions(**{**config, **{k: v for k, v in overrides.items() if v is not None}},
                                  plugins=list(plugins), ray=ray)
        options.memory_limit_mb = within_hard_limit(options.memory_limit_mb)  # stored on a machine that allowed more
        judged_share.checked_rows(state.get("judged_share", {}), f"Campaign {campaign_id}'s checkpoint")
        campaign = cls(corpus, options, on_progress, on_new_bucket, known_bugs)
        corpus.take_lease(campaign_id)  # refused while another live process runs it
        campaign.progress = Progress(campaign_id, **{k: v for k, v in state.items() if k in Progress.__dataclass_fields__})
        campaign.progress.status = "running"
        return campaign

    def start(self) -> None:
        config = asdict(self.options)
        campaign_id = self.corpus.start_campaign(config, self.options.seed, versions(self.backends))
        self.progress = Progress(campaign_id)

    # -- the main loop -------------------------------------------------------------------
    def run(self) -> Progress:
        with _sigterm_as_interrupt():
            return self._run()

    def _run(self) -> Progress:
        """The loop, step by step: dispatch a case index to every idle worker, wait, collect and
        store each reply (or the death of its worker), checkpoint now and then; until the limits
        stop dispatching and no worker is busy."""
        if not hasattr(self, "progress"):
            self.start()
        progress = self.progress
        self._started = time.monotonic() - progress.elapsed
        self._next_index = progress.next_index
        self._assigned: dict[int, int] = {}  # id(worker) -> the case index it is checking
        self._poisoned: dict[int, dict] = {}  # case index run again after a poisoning -> its rechecks (_after_poisoning)
        self._done_above = set(progress.done_above)
        self._requeued: list[int] = []  # case indices whose Ray node was lost while checking them: run again first
        self._focus: dict[int, str | None] = {}  # case index in flight -> the region key it is steered toward
        self._first_compiling: set[int] = set()  # case indices in which a compiler with no structure yet compiled
        self._last_checkpoint = time.monotonic()
        workers: list = []
        status, stopped_because = "finished", None
        try:
            self.on_progress(progress)  # at once: workers take seconds to start
            workers = self._start_workers()
            while True:
                progress.elapsed = time.monotonic() - self._started
                self._dispatch(workers)
                busy = self._abandon_at_deadline([w for w in workers if w.in_flight is not None], progress)
                if not busy:
                    progress.abandoned += len(self._requeued)  # a limit stopped them: unchecked, a resume runs them
                    break
                _wait_for(busy)
                for worker in busy:
                    self._collect(worker)
                progress.slow_work = slow_work(busy)
                self._checkpoint_now_and_then()
        except KeyboardInterrupt:
            status = "interrupted"
        except BaseException as exc:
            status = "interrupted"  # resumable: the checkpoint below is written before re-raising
            stopped_because = str(exc)[:500] or type(exc).__name__
            raise
        finally:
            stop_all(workers)
            progress.elapsed = time.monotonic() - self._started
            progress.status = status
            progress.slow_work = {}
            try:
                self._checkpoint()
            finally:  # a full disk or a held lock fails the checkpoint: the row still says how it ended, and why
                self.corpus.finish_campaign(progress.campaign_id, status, stopped_because)
            self.on_progress(progress)
        return progress

    def _dispatch(self, workers: list) -> None:
        """Send the next unchecked case index to each idle worker, unless a limit says stop. A Ray
        actor still starting gets one only while no worker has started: a replacement may wait for
        a CPU for good (its node's are gone), and the case would wait with it."""
        started = [w for w in workers if not getattr(w, "starting", False)]
        for worker in started or workers:
            if worker.in_flight is None:
                index = self._next_case()
                if index is None:
                    return
                focus = self._focus.setdefault(index, self._steer(index))  # a requeued index keeps its focus
                self._submit(worker, ("case", index, sorted(self.known_signatures), focus))
                self._assigned[id(worker)] = index

    def _submit(self, worker, message: tuple) -> None:
        """`worker.submit`, counting a worker that had died since its last reply (Worker.deaths_between_requests; a
        Ray actor has no such count) with the deaths a fresh worker did not repeat: no case of its was in flight."""
        before = getattr(worker, "deaths_between_requests", 0)
        worker.submit(message)
        self.progress.unrepeated_deaths += getattr(worker, "deaths_between_requests", 0) - before

    def _next_case(self) -> int | None:
        """The case index to check next: a requeued one first (see _requeue); None if a limit says stop."""
        if self._requeued and not self._should_stop(self._requeued[0], self.progress):
            return self._requeued.pop(0)
        while self._next_index in self._done_above:
            self._next_index += 1
        if self._should_stop(self._next_index, self.progress):
            return None
        self._next_index += 1
        return self._next_index - 1

    def _steer(self, index: int) -> str | None:
        """The region key or pair of keys (fuzzer/drawing/region_pairs.py) case `index` is steered toward:
        one not covered yet, for three indices in STEER_EVERY (fuzzer/drawing/regions.py); None (the plain
        mix) otherwise, or without --steer."""
        if not self.options.steer:
            return None
        if self._uncovered is None:
            p = self.progress
            self._uncovered = (sorted(set(p.regions_declared) - set(p.region_counts)),
                               sorted(set(p.pairs_declared) - set(p.pair_counts)))
        dtype = self.drawer.lane(index).dtype  # a family graph is steered toward its dtype's keys only
        return steered_focus(index, self._steered, *(lane_targets(targets, dtype) for targets in self._uncovered))

    def _requeue(self, index: int, lost: NodeLost) -> None:
        """The Ray node checking case `index` left the cluster: not a finding about any backend. The
        node is counted, and the case goes back to the queue, unchecked."""
        node_id = (lost.node or {}).get("node_id", "?")
        if node_id not in self.progress.lost_nodes:
            self.progress.lost_nodes.append(node_id)
        self._requeued.append(index)

    def _collect(self, worker) -> None:
        """A busy worker's reply, stored; its death, stored as a finding; or nothing yet (then its
        time limit is checked). A checked case index is marked done (with what it stored: _stored_then_done).
        A Ray node lost meanwhile, during the request or a recheck or death shrink on the actor that
        replaced it, sends the index back to the queue, nothing of it stored."""
        index = self._assigned[id(worker)]
        try:
            self._collect_reply(worker, index)
        except NodeLost as lost:
            self._poisoned.pop(index, None)  # the index starts over elsewhere
            self._requeue(index, lost)

    def _collect_reply(self, worker, index: int) -> None:
        try:
            reply = worker.collect()
            if reply is None:
                worker.check_timeout(self.options.timeout, self.options.compile_timeout)
                return
            with self._stored_then_done(index, stores=bool(reply.found) or index in self._poisoned):
                self._store(reply)
                _tally(self.progress.compiled_by_slot.setdefault(str(self._slots[id(worker)]), {}),
                       Counter(reply.compiled_structures))
                self._store_rechecks(index, replies=False)  # the index's own run covers their cases
            if reply.peak_rss_mb > self.options.recycle_rss_mb:
                worker.recycle()
            return
        except WorkerPoisoned as poisoned:
            if self._after_poisoning(worker, index, poisoned):
                return
            with self._stored_then_done(index):
                self._store_rechecks(index, replies=True)
            return
        except WorkerDied as died:
            with self._stored_then_done(index):
                self._store_death(index, died, worker)
                self._store_rechecks(index, replies=False)
            return
        except InternalError as exc:
            self._count_internal_error(index, exc)
        with self._stored_then_done(index, stores=index in self._poisoned):
            self._store_rechecks(index, replies=False)

    @contextlib.contextmanager
    def _stored_then_done(self, index: int, stores: bool = True):
        """What case `index` stores, then the index marked done, in one transaction with a checkpoint
        (when it stores anything): a kill -9 leaves both or neither, so a resume runs the index again
        or never, and no case or new bucket is lost, stored twice or counted twice."""
        if not stores:
            yield
            self._mark_done(index)
            return
        counted = copy.deepcopy(self.progress)
        try:
            with self.corpus.transaction():
                yield
                self._mark_done(index)
                self._checkpoint()
        except BaseException:  # rolled back (a full disk): the final checkpoint counts only what was stored
            vars(self.progress).update(vars(counted))
            raise

    def _count_internal_error(self, index: int, exc: InternalError) -> None:
        """A bug of ours on one case must not end a week-long campaign: count it, keep the last one
        for the summary, and go on."""
        self.progress.internal_errors += 1
        self.progress.last_internal_error = f"case index {index}: {str(exc)[-1500:]}"

    def _after_poisoning(self, worker, index: int, poisoned: WorkerPoisoned) -> bool:
        """A backend's error left `worker`'s device unusable while it checked case index `index`
        (a CUDA sticky error: every later run there fails alike). A fresh worker has replaced it,
        and nothing of that request is stored or counted. The case that poisoned it is checked
        again in the fresh worker (_recheck): stored as a crash only if it poisons that one too.
        Then the index runs again, once; if that poisons a worker too, the index ends with what the
        fresh rechecks found. What the rechecks found is stored when the index is done, in its transaction
        (_store_rechecks): a kill -9 before then stores none of it, and the resume runs the index again.
        Returns whether the index runs again."""
        self.progress.poisoned_restarts += 1
        again = index in self._poisoned
        rechecks = self._poisoned.setdefault(index, {})  # (source, backend) -> the fresh worker's reply, or None
        source = poisoned.source or CaseSource(index, focus=self._focus.get(index)).to_list()
        key = (tuple(source), poisoned.backend)
        if key not in rechecks:
            rechecks[key] = self._recheck(worker, index, source, poisoned.backend)
        if not again:
            self._submit(worker, ("case", index, sorted(self.known_signatures), self._focus.get(index)))
            return True
        return False

    def _recheck(self, worker, index: int, source: list, backend: str) -> CheckReply | WorkerDied | None:
        """The case of `source`, which poisoned a worker on `backend`, checked in the fresh `worker`
        (Pipeline.recheck). Its death where it poisons, crashes or hangs that one too: then that first
        case is the crash finding, named after the node that alone poisoned the device. None: a bug of ours."""
        try:
            return worker.request(("recheck", source, backend), self.options.timeout, self.options.compile_timeout)
        except WorkerDied as died:
            self.progress.poisoned_restarts += isinstance(died, WorkerPoisoned)
            return died
        except InternalError as exc:
            self._count_internal_error(index, exc)
        return None

    def _store_rechecks(self, index: int, replies: bool) -> None:
        """Store what the rechecks of case `index` found (_after_poisoning), inside its done-transaction:
        each death, and with `replies` (the index poisoned its second worker too) each reply's findings."""
        for (source, backend), result in self._poisoned.pop(index, {}).items():
            if isinstance(result, WorkerDied):
                self._store_death(index, result)
            elif replies and result is not None and result.findings:
                self._store_record(CaseRecord(self.drawer.draw(CaseSource(*source)), campaign_id=self.progress.campaign_id,
                                              verdict=result.verdict, backends=[backend], findings=result.findings,
                                              verdicts=result.verdicts))

    def _mark_done(self, index: int) -> None:
        """Count the case; the checkpoint's next_index moves past every index done below it."""
        progress = self.progress
        self._done_above.add(index)
        self._focus.pop(index, None)
        if progress.first_graph_s is None:
            progress.first_graph_s = round(time.monotonic() - self._started, 2)
        progress.graphs += 1
        while progress.next_index in self._done_above:
            self._done_above.discard(progress.next_index)
            progress.next_index += 1
        progress.done_above = sorted(self._done_above)

    def _checkpoint_now_and_then(self) -> None:
        if time.monotonic() - self._last_checkpoint >= CHECKPOINT_EVERY:
            self._checkpoint()
            self.on_progress(self.progress)
            self._last_checkpoint = time.monotonic()

    def _abandon_at_deadline(self, busy: list, progress: Progress) -> list:
        """Past --time, kill a worker in a compiling backend at once and any other after DEADLINE_GRACE,
        but one whose case holds a compiler's first compile after FIRST_COMPILE_GRACE; its case stays
        unchecked (a resumed campaign runs it). Returns the workers still busy."""
        for worker in busy:  # Ray workers do not say what they run
            if getattr(worker, "backend_compiles", False) and not progress.compiled_structures.get(worker.backend):
                self._first_compiling.add(self._assigned[id(worker)])
        if self.options.time_limit is None or progress.elapsed < self.options.time_limit:
            return busy
        over = progress.elapsed - self.options.time_limit
        still_busy = []
        for worker in busy:
            if self._assigned[id(worker)] in self._first_compiling and over < FIRST_COMPILE_GRACE:
                still_busy.append(worker)
            elif over >= DEADLINE_GRACE or getattr(worker, "backend_compiles", False):
                worker.kill()
                worker.in_flight = None
                progress.abandoned += 1
            else:
                still_busy.append(worker)
        return still_busy

    def _start_workers(self) -> list:
        configs = self._slot_configs(max(1, self.options.workers))
        if self.options.ray is None:
            self._first_compiles = tempfile.TemporaryDirectory(prefix="fuzz-first-compile-")
            workers = [Worker(replace(config, first_compile_dir=self._first_compiles.name), wait=False, known_bugs=self._unshrunk_bugs)
                       for config in configs]
            self._declare_regions()  # while the workers start
            started = time.monotonic()
            for worker in workers:  # launched side by side, then waited for, saying so on the progress line
                worker.wait_ready(on_wait=lambda: self._tell_starting(started))
            self.progress.slow_work = {}
        else:
            start_ray(self.options.ray)
            self._declare_regions()
            workers = [RayWorker(config, self._unshrunk_bugs) for config in configs]
        self._slots = {id(worker): slot for slot, worker in enumerate(workers)}
        return workers

    def _tell_starting(self, started: float) -> None:
        self.progress.elapsed = time.monotonic() - self._started
        self.progress.slow_work = {"doing": "starting workers", "backend": None, "seconds": round(time.monotonic() - started, 1)}
        self.on_progress(self.progress)

    def _slot_configs(self, count: int) -> list[WorkerConfig]:
        """Each worker slot's config, with the compilers it runs (compiler affinity: fuzzer/running/budget.py's
        assign_compilers). A worker that replaces one (recycled, dead, poisoned) keeps its config, so
        its slot's compilers. Without a cheap tier every compiler runs on every graph: no affinity."""
        compiling = [b for b in self.drawer.backends if b.expensive]
        slots: list = [None] * count
        if len(compiling) < len(self.drawer.backends):
            slots = assign_compilers(self.compile_shares, count)
        parts = single_op_parts(slots, [b.name for b in compiling])
        stored = self.corpus.alone_op_counts()
        orders = {b.name: single_op_order(self.drawer.alone_items, stored.get(b.name, {}), self.options.seed, self.drawer.shared,
                                          self.drawer.motif_items) for b in compiling}
        # A family lane's compiler takes its lane's items in its own order, and the part of them its float peer
        # takes in each slot that runs the peer (its family account is spent there). Each dtype's order is drawn
        # from its own seed: with one, every lane compiled the same 2 to 4 ops alone in a 10-minute campaign.
        for number, lane in enumerate(self.drawer.families.values(), start=1):
            for backend in (b for b in lane.backends if b.expensive):
                peer = budget_account(backend, self.drawer.backends)
                if peer is None:
                    continue
                orders[backend.name] = single_op_order(lane.alone_items, stored.get(backend.name, {}),
                                                       self.options.seed * 16 + number, lane.shared, lane.motif_items)
                for part in parts:
                    if peer in part:
                        part[backend.name] = part[peer]
        return [replace(self.options.worker_config(), compilers=compilers, single_op_parts=part, single_op_orders=orders)
                for compilers, part in zip(slots, parts)]

    def _declare_regions(self) -> None:
        """The region keys the campaign's ops and regimes declare, once (a resumed campaign keeps its own)."""
        if not self.progress.regions_declared:
            shared = set(self.drawer.shared)
            steered = [op for op in self.drawer.ops if op not in shared]
            self.progress.regions_declared = sorted(declared_regions(steered, self.drawer.regimes) + [
                key for lane in self.drawer.families.values() for key in declared_dtype_regions(lane.ops, lane.dtype)])
        if not self.progress.pairs_declared:
            self.progress.pairs_declared = declared_pairs(self.progress.regions_declared)
        self._uncovered = None

    def _should_stop(self, next_index: int, progress: Progress) -> bool:
        """`max_cases` counts seed indices, so a resumed campaign ends where the original would have."""
        if self.options.max_cases is not None and next_index >= self.options.max_cases:
            return True
        if self.options.stop_after_findings is not None and progress.finding_cases >= self.options.stop_after_findings:
            return True
        return self.options.time_limit is not None and progress.elapsed >= self.options.time_limit

    def _checkpoint(self) -> None:
        p = self.progress
        self.corpus.checkpoint(p.campaign_id, p.to_dict(), cases_run=p.graphs, findings=p.finding_cases)

    # -- storing results -----------------------------------------------------------------
    def _store(self, reply: CaseReply) -> None:
        progress = self.progress
        progress.checked += reply.checked
        progress.invalid += reply.invalid
        _tally(progress.op_counts, Counter(reply.ops))
        _tally(progress.regime_counts, {reply.regime: 1})
        if any(key not in progress.region_counts for key in reply.regions) or any(p not in progress.pair_counts for p in reply.pairs):
            self._uncovered = None  # recomputed at the next steered index
        _tally(progress.region_counts, dict.fromkeys(reply.regions, 1))
        _tally(progress.pair_counts, dict.fromkeys(reply.pairs, 1))
        judged_share.tally(progress.judged_share, reply.judged_share)
        _tally(progress.backend_seconds, reply.seconds)
        progress.worker_seconds += reply.worker_seconds
        for key in ("compiled_structures", "not_compiled", "budget_skipped"):
            _tally(getattr(progress, key), Counter(getattr(reply, key)))
        for key in ("backend_graphs", "backend_cases"):
            _tally(getattr(progress, key), getattr(reply, key))
        for name, ops in reply.backend_ops.items():
            _tally(progress.backend_op_counts.setdefault(name, {}), ops)
        for name, ops in reply.alone_ops.items():
            _tally(progress.alone_op_counts.setdefault(name, {}), ops)
        for found in reply.found:
            self._store_found(found, reply.node)

    def _store_found(self, found: FoundCase, node: dict | None) -> None:
        """A case with findings and its shrunk cases (`node`: the Ray node the findings came from). Stored
        bounded: a bucket keeps a few cases and counts the rest (fuzzer/corpus/)."""
        case_id = self._store_record(found.record(campaign_id=self.progress.campaign_id, node=node))
        for small in found.shrunk:
            self.corpus.add_case(small.record(campaign_id=self.progress.campaign_id, shrunk_from=case_id, node=node), bounded=True)

    def _store_record(self, record: CaseRecord) -> int:
        """Store a case with findings, counting it and its new buckets; returns its id. Only a bug
        finding that is neither a known bug nor in a settled bucket gets a new-bucket line and
        counts against `--fail-on new`; a known bug's new bucket is stored with status `known`."""
        progress = self.progress
        if not any(verdicts.is_bug(f.verdict) for f in record.findings):
            progress.explained_cases += 1
        else:
            progress.finding_cases += 1
        case_id = self.corpus.add_case(record, bounded=True)
        unknown = False
        buckets = bucket_signatures([finding.to_dict() for finding in record.findings])
        unseen = set(buckets) - self.known_buckets
        self.known_buckets.update(buckets)
        for finding, bucket in zip(record.findings, buckets):
            self.known_signatures.add(finding.signature)
            if not verdicts.is_bug(finding.verdict):
                continue  # inherited (listed with its base's bucket), precision-policy: recorded, never a new bucket
            bug = self.known_bugs.match(finding, record.case.graph)
            if bug is not None and bucket not in self.marked_known:
                self.marked_known.add(bucket)
                self.corpus.mark_known(bucket, bug.id)
                self.settled.setdefault(bucket, "known")  # the bucket's other members are that bug too
            if bug is not None or self.settled.get(bucket) == "known":
                progress.known_findings += 1
            elif self.settled.get(bucket) == "wontfix":
                progress.triaged_findings += 1
            else:
                unknown = True
                if bucket in unseen:
                    unseen.discard(bucket)
                    progress.new_buckets += 1
                    self.on_new_bucket(progress, finding, case_id)
        progress.unknown_finding_cases += unknown
        return case_id

    def _store_death(self, index: int, died: WorkerDied, worker=None) -> None:
        """A worker died or hung on case `index`: that is a finding about the backend it was running,
        named after its culprit and shrunk in `worker`, the fresh replacement (_shrink_death). What the
        fresh worker does not repeat is counted, not stored, where it says nothing of the backend: a
        hang (a judgment of time: a case that took 60 s among 14 workers sharing a GPU may take 0.3 s
        alone) and a kill from outside (WorkerDied.from_outside: the OOM killer, a scheduler, a user's
        kill). Any other crash is stored either way (a fault that strikes once in two runs is still a
        fault: heap corruption)."""
        if isinstance(died, SlowCheck):  # no backend's fault, nor a bug of ours: the case is left unchecked
            self.progress.slow_checks += 1
            return
        # The case it said it was checking (a compiler's one-op graph, a further input set), else the index's graph.
        source = CaseSource(*died.source) if died.source else CaseSource(index, focus=self._focus.get(index))
        case, backends = self.drawer.draw(source), [b.name for b in self.drawer.lane(index).backends]
        node = getattr(died, "node", None)  # Ray workers: the node it died on
        death = self._shrink_death(worker, case, died) if worker is not None else None
        if worker is not None and (died.kind == verdicts.HANG or died.from_outside()) and not self._repeats(worker, case, died, death, backends):
            if died.kind == verdicts.HANG:
                self.progress.unrepeated_hangs += 1
            else:
                self.progress.unrepeated_deaths += 1
            return
        self.progress.crashes += 1
        finding = replace(death.finding if death else died.finding(), node=node)
        case_id = self._store_record(CaseRecord(case, campaign_id=self.progress.campaign_id, verdict=died.kind,
                                                backends=backends, findings=[finding]))
        if death and death.shrunk:
            self.corpus.add_case(death.shrunk.record(campaign_id=self.progress.campaign_id, shrunk_from=case_id, node=node),
                                 bounded=True)

    def _repeats(self, worker, case, died: WorkerDied, death, backends: list[str]) -> bool:
        """Does a fresh worker die on `case` as well? shrink_death asked that of a death in a backend;
        a death outside any backend is asked here, of the whole case. Not asked (no time left to shrink
        in): yes."""
        if death is not None:
            return death.repeated
        if died.backend:
            return True
        return dies_again(worker, case, backends, self.options.timeout, self.options.compile_timeout)

    def _shrink_death(self, worker, case, died: WorkerDied):
        """fuzzer/shrinking/death_shrink.py, within --shrink-time and the campaign's time left; a signature the
        campaign knows gets its culprit but no shrink."""
        seconds = self.options.shrink_time
        if self.options.time_limit is not None:
            seconds = min(seconds, self.options.time_limit - (time.monotonic() - self._started))
        if seconds <= 0:
            return None
        return shrink_death(worker, case, died, seconds, self.options.timeout, self.options.compile_timeout,
                            known=self.known_signatures)


def _family_peer(name: str, backends: list[str]) -> str | None:
    """The float backend among `backends` whose compile share `name`, a family lane's variant the campaign
    added (fuzzer/running/dtype_families.py), spends: the first of its kind on its device; None for any other."""
    if name in backends:
        return None
    parsed = BackendName.parse(name)
    if not parsed.full or is_float(parsed.dtype):
        return None
    return next((b for b in backends if (p := BackendName.parse(b)).full and p.env is None and is_float(p.dtype)
                 and (p.kind, p.device) == (parsed.kind, parsed.device)), None)


def _tally(counts: dict, increments) -> None:
    """Add `increments` (key -> count) into the checkpoint's `counts`."""
    for key, count in increments.items():
        counts[key] = counts.get(key, 0) + count


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM (a scheduler, `kill`, a CI timeout) ends a campaign like Ctrl-C: checkpoint, status
    'interrupted', summary. Later SIGTERMs are ignored until that cleanup is done."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return

    def interrupt(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def slow_work(busy: list) -> dict:
    """Progress.slow_work of these busy workers, from their heartbeats (a Ray worker sends none)."""
    silent = [w for w in busy if getattr(w, "last_heartbeat", None)]
    if not silent:
        return {}
    worker = min(silent, key=lambda w: w.last_heartbeat)
    seconds = time.monotonic() - worker.last_heartbeat
    if seconds < SLOW_WORK_S:
        return {}
    doing = "judging" if worker.backend is None else "compiling" if worker.backend_compiles else "running"
    return {"doing": doing, "backend": worker.backend, "seconds": round(seconds, 1)}


def _wait_for(busy: list) -> None:
    """Until a busy worker may have something to collect: pipe workers are waited on, Ray workers polled."""
    conns = [w.conn for w in busy if w.conn is not None]
    if len(conns) == len(busy):
        multiprocessing.connection.wait(conns, timeout=0.5)
    else:
        time.sleep(0.05)


def run_campaign(corpus: Corpus, options: CampaignOptions, on_progress=None, resume: int | None = None,
                 on_new_bucket=None, known_bugs: Registry | None = None) -> Progress:
    """`known_bugs`: the registry whose findings are not new (None: the shipped one, fuzzer/triaging/known.py)."""
    if resume is not None:
        campaign = Campaign.resume(corpus, resume, on_progress, on_new_bucket, plugins=options.plugins, ray=options.ray,
                                   known_bugs=known_bugs, max_cases=options.max_cases, time_limit=options.time_limit)
    else:
        if options.max_cases is None and options.time_limit is None:
            raise UserError("A campaign needs a limit: pass --time (e.g. 10m) or --max-cases.")
        campaign = Campaign(corpus, options, on_progress, on_new_bucket, known_bugs)
    return campaign.run()
