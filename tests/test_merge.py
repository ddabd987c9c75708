"""`fuzz merge`: corpora from several machines become one, without duplicates, keeping shrink links and triage."""

import json
import sqlite3

from click.testing import CliRunner

from fuzzer.cli import main
from fuzzer.corpus import Corpus
from fuzzer.drawing.generate import generate_case
from fuzzer.judging.check import Finding
from fuzzer.records import CaseRecord


def finding(signature):
    """A finding as an older release stored it: no 'detail' or 'error' (a merge keeps it as it is)."""
    verdict, backend, culprit = signature.split(" | ")
    return Finding.from_dict({"signature": signature, "verdict": verdict, "backend": backend, "culprit": culprit,
                              "max_error": 1.0, "allowed": 1e-4})


def machine_corpus(path, seed, signature):
    corpus = Corpus(path)
    campaign = corpus.start_campaign({"backends": ["torch-eager:cpu:float32"]}, seed, {"device": f"node{seed}"})
    original = corpus.add_case(CaseRecord(generate_case(seed), campaign_id=campaign, verdict="mismatch", backends=["b"],
                                          findings=[finding(signature)]))
    corpus.add_case(CaseRecord(generate_case(seed + 100), campaign_id=campaign, verdict="mismatch", backends=["b"],
                               findings=[finding(signature)], shrunk_from=original, shrink_log={"final_nodes": 1}))
    corpus.finish_campaign(campaign)
    return corpus, original


def test_merge_combines_machines_and_is_idempotent(tmp_path):
    first, original = machine_corpus(tmp_path / "node1.db", 1, "mismatch | b | layer_norm")
    first.triage(original, "reported", "upstream #1")
    machine_corpus(tmp_path / "node2.db", 2, "mismatch | b | gru")
    target = tmp_path / "team.db"
    runner = CliRunner()
    result = runner.invoke(main, ["merge", "--db", str(target), str(tmp_path / "node1.db"), str(tmp_path / "node2.db"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert [r["cases_added"] for r in summary.values()] == [2, 2]

    again = runner.invoke(main, ["merge", "--db", str(target), str(tmp_path / "node1.db"), "--json"])
    assert json.loads(again.output)[str(tmp_path / "node1.db")] == {
        "campaigns_added": 0, "cases_added": 0, "cases_already_here": 2, "buckets_triaged": 0}

    team = Corpus(target)
    assert team.stats()["cases"] == 4 and team.stats()["campaigns"] == 2
    shrunk = [row for row in team.list_cases() if row["shrunk_from"]]
    assert len(shrunk) == 2 and all(team.get_case(row["shrunk_from"]).signature == row["signature"] for row in shrunk)
    assert team.bucket("mismatch | b | layer_norm")["status"] == "reported"
    assert {c["versions"]["device"] for c in team.campaigns()} == {"node1", "node2"}
    assert sqlite3.connect(target).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_merging_a_file_that_is_not_a_corpus_writes_nothing(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all")
    result = CliRunner().invoke(main, ["merge", "--db", str(tmp_path / "team.db"), str(junk)])
    assert result.exit_code == 2 and "not a fuzzer corpus" in result.output
    assert not (tmp_path / "team.db").exists()


def test_merging_a_corpus_with_a_zeroed_page_is_refused_and_writes_nothing(tmp_path):
    """Issue 51: a zeroed page (here the pointer map, page 2) went unnoticed by `fuzz list` and `fuzz merge`."""
    source, _ = machine_corpus(tmp_path / "node1.db", 1, "mismatch | b | layer_norm")
    source.close()
    damaged = bytearray((tmp_path / "node1.db").read_bytes())
    damaged[4096:8192] = bytes(4096)
    (tmp_path / "node1.db").write_bytes(bytes(damaged))
    result = CliRunner().invoke(main, ["merge", "--db", str(tmp_path / "team.db"), str(tmp_path / "node1.db")])
    assert result.exit_code == 2 and result.stderr.startswith(f"Error: Nothing merged: '{tmp_path / 'node1.db'}' is damaged "
                                                              "(sqlite's quick_check: "), result.output
    assert "`sqlite3" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "team.db").exists()


def test_a_campaign_merged_while_it_ran_is_brought_up_to_date_by_the_next_merge(tmp_path):
    """Issue 51: merging a live corpus froze its campaign's copy as `interrupted`, for good."""
    node = Corpus(tmp_path / "node.db")
    campaign = node.start_campaign({"backends": ["torch-eager:cpu:float32"]}, 1, {})  # leased: running
    node.add_case(CaseRecord(generate_case(1), campaign_id=campaign, verdict="mismatch", backends=["b"],
                             findings=[finding("mismatch | b | gru")]))
    node.checkpoint(campaign, {"next_index": 1}, 1, 1)
    team = Corpus(tmp_path / "team.db")
    team.merge_all([node])
    assert [(c["status"], c["cases_run"]) for c in team.campaigns()] == [("interrupted", 1)]
    node.checkpoint(campaign, {"next_index": 5}, 5, 1)
    node.finish_campaign(campaign)
    team.merge_all([node])
    assert [(c["status"], c["cases_run"], c["checkpoint"]["next_index"]) for c in team.campaigns()] == [("finished", 5, 5)]
    team.merge_all([Corpus(tmp_path / "node.db")])
    assert [(c["status"], c["cases_run"]) for c in team.campaigns()] == [("finished", 5)], "a merge again changes nothing"


def test_merge_keeps_the_targets_bucket_ids_and_numbers_new_buckets_after_them(tmp_path):
    machine_corpus(tmp_path / "team.db", 1, "mismatch | b | layer_norm")[0].close()
    other, _ = machine_corpus(tmp_path / "node2.db", 2, "mismatch | b | gru")
    other.add_case(CaseRecord(generate_case(3), verdict="mismatch", backends=["b"], findings=[finding("mismatch | b | layer_norm")]))
    other.close()  # its B1 is gru, its B2 layer_norm: the target's B1
    for _ in range(2):  # merging again changes no id
        assert CliRunner().invoke(main, ["merge", "--db", str(tmp_path / "team.db"), str(tmp_path / "node2.db")]).exit_code == 0
        with Corpus(tmp_path / "team.db") as team:
            assert {b["signature"]: b["id"] for b in team.buckets()} == {"mismatch | b | layer_norm": 1, "mismatch | b | gru": 2}
