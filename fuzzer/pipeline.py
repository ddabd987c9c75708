"""What a worker does with one seed index: generate -> check on every backend -> shrink new findings.

Runs inside a worker process (fuzzer/workers.py) and can run in-process too. The
result is a record of fuzzer/records.py for the parent, which is the only corpus writer.
"""

from __future__ import annotations

import hashlib
import os
import resource
import time
from dataclasses import dataclass, field
from typing import Callable

from fuzzer.arrays import materialize, regime_profiles
from fuzzer.backends import Backend, all_ops_supported_by, get_backend, parse_backend_list
from fuzzer.budget import CompileBudget, graph_features, parse_shares
from fuzzer.check import CaseResult, Finding, check_case, still_fails_predicate
from fuzzer.errors import UserError
from fuzzer.execute import OK, UNSUPPORTED, run_backend
from fuzzer.generate import CaseGenerator
from fuzzer.regimes import parse_regime_list
from fuzzer.ir import Case
from fuzzer import verdicts
from fuzzer.plugins import load_plugins
from fuzzer.records import CaseReply, CheckReply, FoundCase, ShrinkReply
from fuzzer.shrink import shrink_case

THREADS_ENV = "FUZZ_WORKER_THREADS"


@dataclass
class WorkerConfig:
    backends: list[str]
    ops: list[str] | None = None
    max_nodes: int = 8
    regimes: list[str] | None = None  # names from fuzzer/regimes.py; None: all, at their stated shares
    seed: int = 0
    inputs_per_graph: int = 2
    # Each compiling backend's share of the worker's time (see fuzzer/budget.py): a number is
    # the total for all of them, split evenly; "name=share" entries set one backend's share.
    compile_share: str = "0.5"
    # Intra-op threads per worker for torch and XLA's CPU client; 0 leaves the libraries' defaults.
    threads: int = field(default_factory=lambda: int(os.environ.get(THREADS_ENV, "1")))
    shrink_time: float = 60.0
    reruns: int = 2
    plugins: list[str] = field(default_factory=list)
    memory_limit_mb: int | None = None


def seed_for(campaign_seed: int, index: int) -> int:
    """The graph seed of the index-th case of a campaign: a fixed stream, so resume repeats nothing."""
    digest = hashlib.sha256(f"{campaign_seed}:{index}".encode()).hexdigest()
    return int(digest[:15], 16)


def campaign_ops(requested: list[str] | None, backends: list[Backend]) -> list[str]:
    """The ops a campaign draws from: those requested (default: all) that every backend supports,
    so a plugin declaring a few ops gets graphs it can run."""
    supported = all_ops_supported_by(backends)
    ops = [op for op in (requested or supported) if op in supported]
    if not ops:
        raise UserError(f"No op is supported by every selected backend ({', '.join(b.name for b in backends)}); "
                        "pass fewer backends or other --ops.")
    return ops


def case_generator(config: WorkerConfig, backends: list[Backend]) -> CaseGenerator:
    """The campaign's case stream: its ops (those every backend supports), size and regimes."""
    return CaseGenerator(campaign_ops(config.ops, backends), config.max_nodes,
                         parse_regime_list(",".join(config.regimes or [])))


class Pipeline:
    def __init__(self, config: WorkerConfig, heartbeat: Callable[[Backend], None] | None = None):
        self.config = config
        load_plugins(config.plugins)
        self.backends = parse_backend_list(",".join(config.backends))
        self.generator = case_generator(config, self.backends)
        self.heartbeat = heartbeat or (lambda backend: None)
        self.shrunk_signatures: set[str] = set()
        compiling = [b for b in self.backends if b.expensive]
        cold_start = {b.name: b.cold_start_seconds for b in compiling}
        shares = parse_shares(config.compile_share, [b.name for b in compiling])
        # Nothing but compilers (jax-jit against jax-jit@old-jax): there is no cheap tier to share
        # the worker with, so every compiler takes every graph (a budget would only idle it).
        self.budget = CompileBudget(shares, cold_start) if len(compiling) < len(self.backends) else None
        self.backend_seconds: dict[str, float] = {}  # every run of the current graph, reruns included
        self.first_status: dict[str, str] = {}

    def runner(self, backend: Backend, case: Case):
        self.heartbeat(backend)
        outcome = run_backend(backend, case)
        self.backend_seconds[backend.name] = self.backend_seconds.get(backend.name, 0.0) + outcome.seconds
        self.first_status.setdefault(backend.name, outcome.status)
        return outcome

    def backends_for(self, case: Case, features) -> list[Backend]:
        """The cheap tier always; a compiling backend when the budget gives it this graph."""
        return [b for b in self.backends
                if b.supports_graph(case.graph) and (not b.expensive or not self.budget or self.budget.wants(b.name, features))]

    def handle(self, request: tuple) -> CaseReply | CheckReply | ShrinkReply | dict:
        """One request of the worker protocol (the process workers and the Ray actors both answer
        with this; the requests are listed in fuzzer/workers.py)."""
        kind, *arguments = request
        if kind == "case":
            return self.run_index(arguments[0], set(arguments[1]))
        handlers = {"check": self.check_given, "shrink": self.shrink_given, "outputs": self.outputs_given}
        if kind not in handlers:
            raise ValueError(f"unknown worker request {kind!r}")
        return handlers[kind](*arguments)

    def run_index(self, index: int, known_signatures: set[str]) -> CaseReply:
        start = time.perf_counter()
        self.backend_seconds, self.first_status = {}, {}
        case = self.generator.case(seed_for(self.config.seed, index))
        features = graph_features(case.graph)
        backends = self.backends_for(case, features)
        reply = CaseReply(index, case.graph.op_names(), case.graph.regime or "small", [b.name for b in backends])
        for variant in range(self.config.inputs_per_graph):
            # Several input/weight sets per graph: compiled code is reused, regimes vary.
            seed = case.seed + variant
            current = case if variant == 0 else materialize(case.graph, seed, regime_profiles(case.graph, seed))
            result = check_case(current, backends, self.config.reruns, self.runner)
            reply.checked += 1
            if result.verdict == verdicts.INVALID:
                reply.invalid += 1
                continue
            if result.findings:
                reply.found.append(self._found_case(current, result, backends, known_signatures))
        compiled = [b.name for b in backends if b.expensive and b.name in self.first_status]
        if self.budget:
            for name in compiled:
                self.budget.charge(name, self.backend_seconds[name], features)
            self.budget.advance(time.perf_counter() - start)
        reply.seconds = self.backend_seconds
        reply.worker_seconds = time.perf_counter() - start
        reply.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        # New structures per compiler (structures never repeat: 2 whole-graph repeats in 2,051 graphs).
        reply.compiled_structures = [name for name in compiled if self.first_status[name] == OK]
        reply.not_compiled = [name for name in compiled if self.first_status[name] == UNSUPPORTED]
        reply.budget_skipped = [b.name for b in self.backends if b.expensive and b.supports_graph(case.graph) and b not in backends]
        return reply

    def _found_case(self, case: Case, result: CaseResult, backends: list[Backend], known: set[str]) -> FoundCase:
        found = FoundCase(case, result.verdict, list(result.findings), [b.name for b in backends], list(result.verdicts))
        for finding in result.findings:
            if not verdicts.get(finding.verdict).shrink:
                continue  # not a bug: stored as found, with both errors, never shrunk
            if finding.signature in known or finding.signature in self.shrunk_signatures:
                continue
            self.shrunk_signatures.add(finding.signature)
            found.shrunk.append(self.shrink(case, finding))
        return found

    def shrink(self, case: Case, finding: Finding, seconds: float | None = None) -> ShrinkReply:
        backend = get_backend(finding.backend)
        predicate = still_fails_predicate(backend, finding.signature, self.config.reruns, self.runner)
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

    def shrink_given(self, case: Case, finding: Finding, seconds: float) -> ShrinkReply:
        return self.shrink(case, finding, seconds)
