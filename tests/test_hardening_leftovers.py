"""The leftovers of the hardening work (issue 30): each test below failed before its fix."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuzzer.arrays import materialize
from fuzzer.corpus import Corpus
from fuzzer.ir import Graph, Node, TensorSpec
from fuzzer.report.data import gather
from test_hostile import corpus_with, exported, fuzz, refused, relu_case, unchanged, write_json


# -- the float64 reference of export and report runs bounded -------------------------------------

def slow_reference_case():
    """Within every element bound, but its reference slides a 100x100 kernel over a 6001x6001 padded input:
    hours of float64 work."""
    conv = Node("n0", "conv2d", ("x0",), {"out_channels": 1, "kernel_size": [100, 100], "stride": [1, 1],
                                          "padding": [3000, 3000], "dilation": [1, 1], "groups": 1, "bias": False})
    return materialize(Graph((TensorSpec("x0", (1, 1, 1, 1)),), (conv,), ("n0",)), 0)


@pytest.mark.slow
def test_export_refuses_a_case_whose_reference_runs_past_the_timeout(tmp_path):
    db = tmp_path / "fuzz.db"
    case_id = corpus_with(db, slow_reference_case(), signature="mismatch | torch-eager:cpu:float32 | conv2d")
    refused(fuzz("export", case_id, "--db", db, "--timeout", 2), f"Case {case_id}", "did not finish within 2 s", "--timeout")


@pytest.mark.slow
def test_report_marks_a_bucket_whose_reference_runs_past_the_timeout(tmp_path):
    db = tmp_path / "fuzz.db"
    corpus_with(db, slow_reference_case(), signature="mismatch | torch-eager:cpu:float32 | conv2d")
    with Corpus(db) as corpus:
        [row] = gather(corpus, reference_timeout=2).buckets
    assert row.script is None and "did not finish within 2 s" in row.why_no_script and '"conv2d"' in row.fallback


# -- an op's attribute names are declared, and a graph from a file is held to them ----------------

def conv_attrs() -> dict:
    return slow_reference_case().graph.nodes[0].attrs


@pytest.mark.parametrize("attrs, needles", [
    ({"bogus": 1}, ("Node 'n0' (relu)", "'bogus'", "does not take")),
    ({**conv_attrs(), "strides": [1, 1]}, ("Node 'n0' (conv2d)", "'strides'", "does not take")),
    ({k: v for k, v in conv_attrs().items() if k != "groups"}, ("Node 'n0' (conv2d)", "'groups'", "needs")),
])
def test_an_attribute_the_op_does_not_take_or_lacks_is_refused_on_import(tmp_path, attrs, needles):
    data = exported(relu_case() if "bogus" in attrs else slow_reference_case())
    data["graph"]["nodes"][0]["attrs"] = attrs
    db = tmp_path / "fuzz.db"
    refused(fuzz("import", "--db", db, write_json(tmp_path / "case.json", data)), *needles)


def test_a_stored_case_with_an_unknown_attribute_is_refused_not_an_internal_error(tmp_path):
    db = tmp_path / "fuzz.db"
    case_id = corpus_with(db, relu_case())
    conn = sqlite3.connect(db)
    graph = json.loads(conn.execute("SELECT graph FROM cases WHERE id = ?", [case_id]).fetchone()[0])
    graph["nodes"][0]["attrs"] = {"bogus": 1}
    conn.execute("UPDATE cases SET graph = ? WHERE id = ?", [json.dumps(graph), case_id])
    conn.commit()
    conn.close()
    with unchanged(db):
        for command in (["replay", case_id], ["export", case_id, "--format", "json"]):
            refused(fuzz(*command, "--db", db), "'bogus'")


# -- a case's identity is its graph and arrays, not the backends that ran it ----------------------

TORCH, COMPILE = "torch-eager:cpu:float32", "torch-compile:cpu:float32"


def ran_on(backends: list[str], case=None):
    """relu_case() checked on `backends`, each of which found a mismatch."""
    from fuzzer.judging.check import Finding
    from fuzzer.records import CaseRecord

    findings = [Finding(b, "mismatch", "relu", f"mismatch | {b} | relu", max_error=1.0, allowed=1e-5, detail="planted")
                for b in backends]
    return CaseRecord(case or relu_case(), campaign_id=None, verdict="mismatch", backends=backends, findings=findings)


def test_the_same_case_run_on_other_backends_is_stored_once_with_every_finding(tmp_path):
    with Corpus(tmp_path / "fuzz.db") as corpus:
        first = corpus.add_case(ran_on([TORCH]))
        assert corpus.add_case(ran_on([TORCH, COMPILE])) == first  # a resume whose compile budget differs
        assert corpus.add_case(ran_on([TORCH])) == first
        stored = corpus.get_case(first)
        assert len(corpus.list_cases(limit=10)) == 1
        assert stored.backends == [TORCH, COMPILE]
        assert sorted(f["backend"] for f in stored.findings) == [COMPILE, TORCH]
        assert sorted((b["backend"], b["count"]) for b in corpus.buckets()) == [(COMPILE, 1), (TORCH, 1)]


def test_a_case_an_older_release_stored_under_its_backends_is_found_by_its_content(tmp_path):
    from fuzzer.corpus.schema import _v3_case_key

    with Corpus(tmp_path / "fuzz.db") as corpus:
        first = corpus.add_case(ran_on([TORCH]))
        old_key = _v3_case_key(relu_case().content_hash(), [TORCH])
        corpus.db.execute("UPDATE cases SET case_key = ? WHERE id = ?", [old_key, first])
        assert corpus.add_case(ran_on([TORCH, COMPILE])) == first
        assert len(corpus.list_cases(limit=10)) == 1


# -- the poisoning path stores as the normal path does: with the index done, in one transaction ----

class TransactionWatchingCorpus(Corpus):
    """A corpus that notes, for every case stored, whether it was inside an outer transaction (the one
    that also marks the case index done and writes the checkpoint)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.stored_inside: list[bool] = []

    def add_case(self, record, bounded=False):
        self.stored_inside.append(self._write_depth > 0)
        return super().add_case(record, bounded)


@pytest.mark.slow
def test_a_poisoning_stores_its_crash_with_the_index_done_in_one_transaction(tmp_path):
    from test_isolation import PLUGINS, REFERENCE, STICKY
    from fuzzer.running.campaign import CampaignOptions, run_campaign

    corpus = TransactionWatchingCorpus(tmp_path / "corpus.db")
    options = CampaignOptions(backends=[REFERENCE, "plugin-sticky-tanh"], plugins=[str(PLUGINS / STICKY)], max_nodes=2,
                              ops=["relu", "tanh"], max_cases=4, workers=1, timeout=10, shrink_time=5)
    with corpus:
        progress = run_campaign(corpus, options)
        assert progress.crashes >= 1 and progress.graphs == 4
        assert corpus.stored_inside and all(corpus.stored_inside), corpus.stored_inside


# -- --max-nodes is a hard maximum ---------------------------------------------------------------

@pytest.mark.parametrize("max_nodes", [1, 2, 3])
def test_max_nodes_is_a_hard_maximum_even_for_seed_patterns(max_nodes):
    from fuzzer.drawing.generate import CaseGenerator

    generator = CaseGenerator(None, max_nodes)
    sizes = [len(generator.case(seed).graph.nodes) for seed in range(200)]
    assert max(sizes) <= max_nodes and min(sizes) >= 1
    assert max_nodes in sizes  # and the seed patterns still start graphs: cut to their first nodes, not dropped


# -- a Ray node lost while a poisoned case is rechecked: requeued, not a crash of the campaign ------

@pytest.mark.slow
def test_a_node_lost_during_a_recheck_requeues_the_case(tmp_path, monkeypatch):
    """RayWorker.request raises NodeLost where the fresh actor's node leaves the cluster. Here a process
    worker stands in for that actor: its first recheck meets a lost node; the rest is a real campaign."""
    import fuzzer.running.campaign as campaign
    from fuzzer.running.ray_workers import NodeLost
    from fuzzer.running.workers import Worker
    from test_isolation import ILLEGAL_ADDRESS, PLUGINS, REFERENCE, STICKY

    lost = []

    class NodeLostOnFirstRecheck(Worker):
        def request(self, message, timeout, compile_timeout=None):
            if message[0] == "recheck" and not lost:
                lost.append(message)
                raise NodeLost({"node_id": "node-gone"})
            return super().request(message, timeout, compile_timeout)

    monkeypatch.setattr(campaign, "Worker", NodeLostOnFirstRecheck)
    options = campaign.CampaignOptions(backends=[REFERENCE, "plugin-sticky-tanh"], plugins=[str(PLUGINS / STICKY)],
                                       max_nodes=2, ops=["relu", "tanh"], max_cases=4, workers=1, timeout=10, shrink_time=5)
    with Corpus(tmp_path / "corpus.db") as corpus:
        progress = campaign.run_campaign(corpus, options)
        assert lost and progress.status == "finished" and progress.graphs == 4
        assert progress.lost_nodes == ["node-gone"] and progress.internal_errors == 0
        # The requeued case ran again: its poisoning is stored once, as the crash it is.
        assert [b["signature"] for b in corpus.buckets()] == [f"crash | plugin-sticky-tanh | tanh | {ILLEGAL_ADDRESS}"]


# -- the plugin-check child dies with its parent ---------------------------------------------------

def process_gone(pid: int) -> bool:
    """No such process, or only its zombie (the init of a container may never reap it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return "\nState:\tZ" in status


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_plugin_check_child_dies_with_a_parent_killed_by_sigkill(tmp_path):
    pid_file = tmp_path / "child.pid"
    plugin = tmp_path / "slow_plugin.py"
    plugin.write_text(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", "from fuzzer.plugins import check_plugins_in_child; "
                               f"check_plugins_in_child([{str(plugin)!r}])"])
    child = None
    try:
        for _ in range(1200):  # the child imports the fuzzer before the plugin: seconds on a busy machine
            if pid_file.exists() and pid_file.read_text():
                child = int(pid_file.read_text())
                break
            time.sleep(0.1)
        assert child is not None, "the plugin-check child never loaded the plugin"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        for _ in range(300):
            if process_gone(child):
                break
            time.sleep(0.1)
        assert process_gone(child), "the plugin-check child outlived its parent"
    finally:
        parent.kill()
        if child is not None and not process_gone(child):
            os.kill(child, signal.SIGKILL)
