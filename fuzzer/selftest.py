"""`fuzz selftest`: a short campaign against each canary proves each seed bug class is found and shrunk."""

from __future__ import annotations

from typing import Callable

from fuzzer.corpus import Corpus
from fuzzer.plugins import canary_names
from fuzzer.running.campaign import CampaignOptions, run_campaign


def run_selftest(corpus: Corpus, max_cases: int = 300, seed: int = 0, shrink_time: float = 30.0,
                 device: str = "cpu", on_result: Callable[[dict], None] | None = None,
                 canaries: list[str] | None = None) -> list[dict]:
    """One short campaign per canary (on the CPU, or with device="cuda" the canaries derived from torch CUDA);
    `on_result` gets each canary's result as soon as its campaign ends. `canaries`: these only (default: every one)."""
    results = []
    for canary in canaries or canary_names():
        backend = f"canary-{canary}" + ("-cuda" if device == "cuda" else "")
        options = CampaignOptions(
            backends=[backend], plugins=[canary], seed=seed, max_cases=max_cases, workers=1,
            shrink_time=shrink_time, inputs_per_graph=1, stop_after_findings=1, shrink_known=True,
        )
        progress = run_campaign(corpus, options)
        shrunk = [row for row in corpus.list_cases(limit=10**9) if row["campaign_id"] == progress.campaign_id and row["shrunk_from"]]
        smallest = min(shrunk, key=lambda row: row["node_count"], default=None)
        results.append({
            "canary": canary,
            "found": progress.finding_cases > 0,
            "graphs": progress.graphs,
            "seconds": round(progress.elapsed, 2),
            "campaign_id": progress.campaign_id,
            "shrunk_case": smallest["id"] if smallest else None,
            "shrunk_nodes": smallest["node_count"] if smallest else None,
            "shrunk_ops": smallest["op_sequence"] if smallest else None,
        })
        if on_result:
            on_result(results[-1])
    return results
