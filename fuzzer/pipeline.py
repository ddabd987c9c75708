"""What a worker does with one seed index: generate -> check on every backend -> shrink new findings.

Runs inside a worker process (fuzzer/workers.py) and can run in-process too. The
result is plain data for the parent, which is the only corpus writer.
"""

from __future__ import annotations

import hashlib
import resource
from typing import Callable

from fuzzer.arrays import materialize
from fuzzer.backends import Backend, all_ops_supported_by, get_backend, parse_backend_list
from fuzzer.check import Finding, check_case, still_fails_predicate
from fuzzer.errors import UserError
from fuzzer.execute import run_backend
from fuzzer.generate import CaseGenerator
from fuzzer.ir import Case
from fuzzer.oracle import INVALID, PRECISION_POLICY
from fuzzer.plugins import load_plugins
from fuzzer.shrink import shrink_case
from fuzzer.workers import WorkerConfig


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


class Pipeline:
    def __init__(self, config: WorkerConfig, heartbeat: Callable[[Backend], None] | None = None):
        self.config = config
        load_plugins(config.plugins)
        self.backends = parse_backend_list(",".join(config.backends))
        self.generator = CaseGenerator(campaign_ops(config.ops, self.backends), config.max_nodes)
        self.heartbeat = heartbeat or (lambda backend: None)
        self.shrunk_signatures: set[str] = set()

    def runner(self, backend: Backend, case: Case):
        self.heartbeat(backend)
        return run_backend(backend, case)

    def backends_for(self, case: Case, index: int) -> list[Backend]:
        sample_expensive = index % max(1, self.config.expensive_every) == 0
        return [
            b for b in self.backends if b.supports_graph(case.graph) and (sample_expensive or not b.expensive)
        ]

    def run_index(self, index: int, known_signatures: set[str]) -> dict:
        case = self.generator.case(seed_for(self.config.seed, index))
        backends = self.backends_for(case, index)
        reply = {"index": index, "ops": case.graph.op_names(), "backends": [b.name for b in backends],
                 "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                 "checked": 0, "invalid": 0, "seconds": {}, "findings": []}
        for variant in range(self.config.inputs_per_graph):
            # Several input/weight sets per graph: compiled code is reused, regimes vary.
            current = case if variant == 0 else materialize(case.graph, case.seed + variant)
            result = check_case(current, backends, self.config.reruns, self.runner)
            reply["checked"] += 1
            for name, seconds in result.seconds.items():
                reply["seconds"][name] = reply["seconds"].get(name, 0.0) + seconds
            if result.verdict == INVALID:
                reply["invalid"] += 1
                continue
            if result.findings:
                reply["findings"].append(self._finding_record(current, result, backends, known_signatures))
        return reply

    def _finding_record(self, case: Case, result, backends: list[Backend], known: set[str]) -> dict:
        record = {
            "case": case,
            "verdict": result.verdict,
            "findings": [f.to_dict() for f in result.findings],
            "backends": [b.name for b in backends],
            "verdicts": [v.to_dict() for v in result.verdicts],
            "shrunk": [],
        }
        for finding in result.findings:
            if finding.verdict == PRECISION_POLICY:
                continue  # not a bug: stored as found, with both errors, never shrunk
            if finding.signature in known or finding.signature in self.shrunk_signatures:
                continue
            self.shrunk_signatures.add(finding.signature)
            record["shrunk"].append(self.shrink(case, finding))
        return record

    def shrink(self, case: Case, finding: Finding, seconds: float | None = None) -> dict:
        backend = get_backend(finding.backend)
        predicate = still_fails_predicate(backend, finding.signature, self.config.reruns, self.runner)
        shrunk = shrink_case(case, predicate, finding.culprit, seconds or self.config.shrink_time)
        final = check_case(shrunk.case, [backend], self.config.reruns, self.runner)
        return {
            "signature": finding.signature,
            "case": shrunk.case,
            "log": shrunk.log(),
            "verdict": final.verdict,
            "findings": [f.to_dict() for f in final.findings],
            "verdicts": [v.to_dict() for v in final.verdicts],
            "backends": [backend.name],
        }

    def check_given(self, case: Case, backend_names: list[str]) -> dict:
        backends = [get_backend(name) for name in backend_names]
        result = check_case(case, backends, self.config.reruns, self.runner)
        return {
            "verdict": result.verdict,
            "findings": [f.to_dict() for f in result.findings],
            "verdicts": [v.to_dict() for v in result.verdicts],
        }

    def shrink_given(self, case: Case, finding: dict, seconds: float) -> dict:
        known = {k: finding[k] for k in ("backend", "verdict", "culprit", "signature")}
        return self.shrink(case, Finding(**known), seconds)
