"""Shrinking a finding whose backend killed its worker process or left it silent (a `crash` by a
signal, a `hang`): the case cannot be shrunk inside the worker it kills, so the parent shrinks it,
with the shrinker's own passes (fuzzer/shrinking/shrink.py), asking a bounded worker about each candidate.

- A candidate is kept only if it kills or silences a worker that ran nothing before it, the same
  way (same verdict and normalized message: the same signal, or silence). A worker dies on every
  kept candidate and is replaced, so most candidates meet a fresh one anyway; one that dies after
  other candidates ran in its worker is asked again in the fresh worker that replaced it.
- A hang is called after a short time derived from the case itself: HANG_FACTOR times what the
  case's float64 reference takes in the worker, at least MIN_HANG_SECONDS, at most the timeout the
  finding was found under (a compiling backend keeps its compile timeout: workers.check_timeout).
- The culprit is the first node, in graph order, that dies the same way alone (localize.NodeIsolation:
  its operands fed the reference's values), and the shrinker starts from that one-node case.

The parent computes the float64 reference of the case and of the shrinker's candidates (to cut
nodes and feed isolated ones): the worker computed it for the whole case before its backend ran,
within the same bounds, and the candidates are smaller.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fuzzer.backends import get_backend
from fuzzer.errors import InternalError, UserError, normalize_error
from fuzzer.ir import Case
from fuzzer.judging.localize import NodeIsolation
from fuzzer.records import Finding, ShrinkReply
from fuzzer.running.workers import AT_MEMORY_LIMIT, SlowCheck, WorkerDied, WorkerPoisoned
from fuzzer.shrinking.shrink import shrink_case

HANG_FACTOR = 20.0
MIN_HANG_SECONDS = 2.0


class DeathProbe:
    """Asks a worker (workers.Worker or ray_workers.RayWorker) whether a case kills it as `died` did."""

    def __init__(self, worker, died: WorkerDied | None, timeout: float, compile_timeout: float | None):
        """`worker` has run no backend yet (just started, or the replacement of the one that died)."""
        self.worker, self.died = worker, died
        self.timeout, self.compile_timeout = timeout, compile_timeout
        self.fresh = True  # has the worker run no backend since it started?
        self.last: WorkerDied | None = None  # the last death that matched

    def run(self, case: Case, backends: list[str]) -> WorkerDied | None:
        """The death `case` caused on `backends` (the worker is then a fresh one), or None."""
        try:
            self.worker.request(("check", case, backends), self.timeout, self.compile_timeout)
        except (WorkerPoisoned, SlowCheck):  # a device error, or our own slow oracle: not this death
            self.fresh = True
            return None
        except WorkerDied as died:
            self.fresh = True
            return died
        except (InternalError, UserError):  # the worker could not check it (a bug of ours): not kept
            pass
        self.fresh = self.fresh and not backends  # the reference alone leaves no backend state behind
        return None

    def dies(self, case: Case) -> bool:
        """Does `case` kill or silence a fresh worker as the finding did?"""
        for _ in range(2):  # a death in a used worker is asked again in the fresh one
            was_fresh = self.fresh
            died = self.run(case, [self.died.backend])
            if died is None or not self._same(died):
                return False
            if was_fresh:
                self.last = died
                return True
        return False

    def _same(self, died: WorkerDied) -> bool:
        """The same backend, the same way: the same signal (a crash), or silence (a hang)."""
        return (died.kind, died.backend, normalize_error(died.message)) == \
            (self.died.kind, self.died.backend, normalize_error(self.died.message))


def hang_timeout(probe: DeathProbe, case: Case) -> float:
    """HANG_FACTOR times the seconds a check of `case` on the reference alone takes in the worker,
    within [MIN_HANG_SECONDS, the timeout the finding was found under]; that timeout itself for a
    worker silent at its memory limit (filling it page by page takes what it takes)."""
    if probe.died.message.startswith(AT_MEMORY_LIMIT):
        return probe.timeout
    began = time.perf_counter()
    probe.run(case, [])
    return min(probe.timeout, max(MIN_HANG_SECONDS, HANG_FACTOR * (time.perf_counter() - began)))


@dataclass
class DeathShrink:
    finding: Finding  # the death, named after its culprit ("-" where no node dies alone)
    shrunk: ShrinkReply | None  # None: not shrunk, its signature being known already or the time spent
    repeated: bool = True  # False: a fresh worker ran the case without dying or going silent


def shrink_death(worker, case: Case, died: WorkerDied, seconds: float, timeout: float,
                 compile_timeout: float | None = None, known: set[str] = frozenset()) -> DeathShrink | None:
    """`died`'s finding on `case` named after the node that does it alone, and the smallest case found
    within `seconds` that kills or silences a fresh worker the same way (not searched where the named
    finding's signature is in `known`); `repeated` False, and no culprit, when `case` does not do it
    to a fresh worker. None when no backend was running (the worker died outside any backend).
    `worker` has run no backend yet; the backend's plugin is loaded here too (the parent cuts nodes
    out for the backend's dtype)."""
    if not died.backend or isinstance(died, WorkerPoisoned):
        return None
    deadline = time.monotonic() + seconds
    probe = DeathProbe(worker, died, timeout, compile_timeout)
    probe.timeout = hang_timeout(probe, case)
    if not probe.dies(case):
        return DeathShrink(died.finding(), None, repeated=False)
    culprit, smallest = _culprit(probe, case, deadline)
    finding = died.finding(culprit)
    if finding.signature in known or time.monotonic() >= deadline:
        return DeathShrink(finding, None)
    result = shrink_case(smallest, probe.dies, culprit, deadline - time.monotonic())
    log = {**result.log(), "original_nodes": len(case.graph.nodes), "seconds": round(seconds - (deadline - time.monotonic()), 2),
           "hang_timeout": round(probe.timeout, 2)}
    shrunk = WorkerDied(died.kind, died.backend, probe.last.message).finding(culprit)
    return DeathShrink(finding, ShrinkReply(finding.signature, result.case, log, died.kind, [shrunk], [shrunk], [died.backend]))


def dies_again(worker, case: Case, backends: list[str], timeout: float, compile_timeout: float | None = None) -> bool:
    """Does `case`, run whole on `backends`, kill or silence `worker` (fresh: it replaced the one that
    died) in any way? Asked of a death outside any backend, which no backend's probe can repeat."""
    return DeathProbe(worker, None, timeout, compile_timeout).run(case, backends) is not None


def name_death(worker, case: Case, died: WorkerDied, timeout: float, compile_timeout: float | None = None) -> Finding:
    """`died`'s finding on `case` named after the node that does it alone, as a campaign names it
    (shrink_death), without repeating or shrinking it: a replay or regress of a stored death must give
    the signature the campaign stored. At most `timeout` seconds go to the search; "-" after that."""
    if not died.backend or isinstance(died, WorkerPoisoned):
        return died.finding()
    probe = DeathProbe(worker, died, timeout, compile_timeout)
    probe.timeout = hang_timeout(probe, case)
    culprit, _ = _culprit(probe, case, time.monotonic() + timeout)
    return died.finding(culprit)


def _culprit(probe: DeathProbe, case: Case, deadline: float) -> tuple[str, Case]:
    """(the op of the first node that dies alone, that node's one-node case), or ("-", case)."""
    if len(case.graph.nodes) == 1:
        return case.graph.nodes[0].op, case
    isolation = NodeIsolation(get_backend(probe.died.backend), case, runner=None)
    for index, node in enumerate(case.graph.nodes):
        if time.monotonic() >= deadline:
            break
        alone = isolation.case_for([index])
        if probe.dies(alone):
            return node.op, alone
    return "-", case
