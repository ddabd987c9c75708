"""Campaign workers as Ray actors (`fuzz run --ray`), on a local Ray instance and real sqlite files.

One machine, one node: tests/test_ray_cluster.py runs a multi-node cluster and loses a node.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from fuzzer import ray_workers  # noqa: E402
from fuzzer.corpus import Corpus  # noqa: E402
from fuzzer.running.campaign import CampaignOptions, run_campaign  # noqa: E402
from fuzzer.running.ray_workers import NodeLost, RayWorker, start_ray  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]  # one ray at a time: under `-n 2` both modules share a worker

PLUGINS = Path(__file__).resolve().parent / "plugins"
REFERENCE = "torch-eager:cpu:float32"


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    start_ray("local")
    yield
    ray.shutdown()


def stored_findings(corpus: Corpus) -> list[tuple[dict, dict]]:
    return [(row, f) for row in corpus.list_cases(limit=1000) for f in row["findings"]]


def test_canary_campaign_on_ray_actors(tmp_path):
    db = tmp_path / "corpus.db"
    corpus = Corpus(db)
    try:
        options = CampaignOptions(
            backends=[REFERENCE, "canary-layout-layernorm"], plugins=["layout-layernorm"], max_cases=20, workers=2,
            shrink_time=10, timeout=60, ray="local",
        )
        progress = run_campaign(corpus, options)
        assert progress.status == "finished" and progress.graphs == 20
        assert corpus.campaign(progress.campaign_id)["status"] == "finished"
        assert progress.finding_cases >= 1 and progress.crashes == 0
        findings = stored_findings(corpus)
        assert findings and all(f.get("node") and f["node"]["node_id"] and f["node"]["hostname"] and f["node"]["ip"]
                                for _, f in findings)
    finally:
        corpus.close()
    conn = sqlite3.connect(str(db))
    try:
        rows = conn.execute("SELECT count(*), count(DISTINCT content_hash) FROM cases WHERE shrunk_from IS NULL").fetchone()
        assert rows[0] >= 1 and rows[0] == rows[1]  # each case stored once: the driver is the only writer
        shrunk = conn.execute("SELECT count(*) FROM cases c JOIN cases p ON c.shrunk_from = p.id").fetchone()[0]
        assert shrunk >= 1
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


@pytest.mark.long  # CI's 15 minutes: the canary campaign on ray actors stays in CI
def test_an_aborting_actor_is_a_crash_finding_and_the_campaign_finishes(tmp_path):
    corpus = Corpus(tmp_path / "corpus.db")
    try:
        options = CampaignOptions(
            backends=[REFERENCE, "plugin-abort-relu"], plugins=[str(PLUGINS / "abort_relu.py")], ops=["relu"],
            max_cases=2, workers=1, timeout=30, shrink_time=5, ray="local",
        )
        progress = run_campaign(corpus, options)
        assert progress.status == "finished" and progress.graphs == 2
        assert progress.crashes == 2
        crashes = [(row, f) for row, f in stored_findings(corpus) if f["verdict"] == "crash"]
        found = [(row, f) for row, f in crashes if row["shrunk_from"] is None]
        # The two found cases; the first death's shrunk case too when the shrink finished in time.
        assert len(found) == 2 and len(crashes) in (2, 3)
        assert all(f["backend"] == "plugin-abort-relu" and f["node"]["hostname"] for _, f in crashes)
        assert all("ray actor died" in f["detail"] for _, f in crashes)
    finally:
        corpus.close()


def test_a_request_gives_up_on_an_actor_no_node_can_start(monkeypatch):
    """A death shrink or a recheck waits on a fresh actor's reply, the campaign loop with it. Where no
    node has a CPU for that actor (its node lost, Ray not saying so yet), the request raises NodeLost
    (the campaign requeues the case) instead of waiting for good."""
    monkeypatch.setattr(ray_workers, "PLACEMENT_WAIT", 1.0)

    @ray.remote(num_cpus=1)
    class CpuHolder:
        def ready(self) -> bool:
            return True

    holders = [CpuHolder.remote() for _ in range(int(ray.cluster_resources()["CPU"]))]
    ray.get([holder.ready.remote() for holder in holders])
    worker = RayWorker(CampaignOptions(backends=[REFERENCE]).worker_config())
    raised = []

    def request():
        try:
            worker.request(("case", 0, [], None), timeout=60)
        except NodeLost as lost:
            raised.append(lost)

    asking = threading.Thread(target=request, daemon=True)  # without the bound it never returns
    asking.start()
    asking.join(timeout=60)
    worker.stop()
    for holder in holders:
        ray.kill(holder)
    assert not asking.is_alive() and len(raised) == 1 and raised[0].node is None
