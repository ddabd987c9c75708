"""The sqlite corpus, on real files: round-trips, buckets, triage, export/import, refusals, migration, concurrency."""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fuzzer.arrays import materialize, to_npy_bytes
from fuzzer.corpus import SCHEMA_VERSION, Corpus, case_from_export, load_case_file
from fuzzer.drawing.generate import generate_case
from fuzzer.errors import UserError
from fuzzer.ir import Graph, Node, TensorSpec
from fuzzer.judging.check import Finding
from fuzzer.oracle import BackendVerdict
from fuzzer.records import CaseRecord
from fuzzer.running.campaign import CampaignOptions, run_campaign

REPO = Path(__file__).resolve().parents[1]
SIG = "mismatch | torch-cpu-float32 | linear"


def chain_case(seed: int = 0, ops: tuple[str, ...] = ("linear",), shape=(4, 8)):
    """x0 -> ops[0] -> ops[1] -> ...; linear gets out_features=3 and a bias."""
    nodes, prev = [], "x0"
    for index, op in enumerate(ops):
        attrs = {"linear": {"out_features": 3, "bias": True}, "log_softmax": {"dim": -1}}.get(op, {})
        nodes.append(Node(f"n{index}", op, (prev,), attrs))
        prev = f"n{index}"
    return materialize(Graph((TensorSpec("x0", shape),), tuple(nodes), (prev,)), seed)


def finding(signature: str = SIG, verdict: str = "mismatch", backend: str = "torch-cpu-float32", culprit: str = "linear") -> dict:
    return Finding(backend, verdict, culprit, signature, max_error=0.5, allowed=1e-4, detail="d").to_dict()


def add(corpus: Corpus, case, findings=(), verdict=None, bounded=False, **kwargs) -> int:
    """Store `case` with `findings` given in their JSON form (as the tests compare them); `bounded`: as a campaign does."""
    findings = list(findings)
    verdict = verdict or (findings[0]["verdict"] if findings else "agree")
    return corpus.add_case(CaseRecord(case, campaign_id=kwargs.pop("campaign_id", None), verdict=verdict,
                                      backends=kwargs.pop("backends", ["torch-cpu-float32", "jax-cpu-float32"]),
                                      findings=[Finding.from_dict(f) for f in findings], **kwargs), bounded=bounded)


def count_rows(path: Path, table: str = "cases") -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@pytest.fixture
def corpus(tmp_path):
    with Corpus(tmp_path / "fuzz.db") as c:
        yield c


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("seed", [1, 7])
def test_generated_case_round_trips_exactly(corpus, seed):
    case = generate_case(seed)
    case_id = add(corpus, case, [finding()], shrink_log=[{"step": "drop n1", "nodes": 2}])
    stored = corpus.get_case(case_id)
    assert stored.id == case_id
    assert stored.case.graph.to_json() == case.graph.to_json()
    assert stored.case.graph == case.graph
    assert stored.case.seed == case.seed
    assert list(stored.case.arrays) == list(case.arrays)
    for name, value in case.arrays.items():
        got = stored.case.arrays[name]
        assert got.dtype == np.float64 and got.shape == value.shape
        assert got.tobytes() == np.ascontiguousarray(value).tobytes()
    assert stored.case.content_hash() == case.content_hash() == stored.content_hash
    assert stored.findings == [finding()]
    assert stored.signature == SIG and stored.verdict == "mismatch"
    assert stored.backends == ["torch-cpu-float32", "jax-cpu-float32"]
    assert stored.shrink_log == [{"step": "drop n1", "nodes": 2}]
    assert stored.op_sequence == ">".join(case.graph.op_names())


def test_unknown_case_id(corpus):
    with pytest.raises(UserError, match=r"No case with id 42 in .*fuzz\.db; run `fuzz list`"):
        corpus.get_case(42)


def test_campaign_lifecycle(corpus):
    cid = corpus.start_campaign({"ops": ["linear"], "budget": 10}, seed=3, versions={"python": "3.11", "torch": "x"})
    assert corpus.campaign(cid)["status"] == "running"
    add(corpus, chain_case(), campaign_id=cid)
    corpus.checkpoint(cid, {"next_seed": 11}, cases_run=10, findings=1)
    corpus.finish_campaign(cid, "interrupted")
    row = corpus.campaign(cid)
    assert row["status"] == "interrupted" and row["ended"]
    assert row["config"] == {"ops": ["linear"], "budget": 10}
    assert row["versions"]["torch"] == "x"
    assert row["checkpoint"] == {"next_seed": 11}
    assert (row["cases_run"], row["findings"], row["seed"]) == (10, 1, 3)
    assert [c["id"] for c in corpus.campaigns()] == [cid]
    with pytest.raises(UserError, match="No campaign with id 99"):
        corpus.campaign(99)
    with pytest.raises(UserError, match="No campaign with id 99"):
        add(corpus, chain_case(), campaign_id=99)
    with pytest.raises(UserError, match="No case with id 77"):
        add(corpus, chain_case(), shrunk_from=77)
    assert corpus.stats()["cases"] == 1


# ---------------------------------------------------------------- buckets and triage


def test_bucket_dedup_keeps_smallest_representative(corpus):
    big = add(corpus, chain_case(1, ("linear", "relu", "tanh")), [finding()])
    small = add(corpus, chain_case(2, ("linear",)), [finding()])
    same_nodes_more_elements = add(corpus, chain_case(3, ("linear",), shape=(6, 8)), [finding()])
    buckets = corpus.buckets()
    assert len(buckets) == 1
    bucket = buckets[0]
    assert bucket["signature"] == SIG and bucket["count"] == 3 and bucket["status"] == "new"
    assert bucket["representative"] == small
    assert (bucket["verdict"], bucket["backend"], bucket["culprit"]) == ("mismatch", "torch-cpu-float32", "linear")
    assert {big, same_nodes_more_elements}.isdisjoint({bucket["representative"]})
    # a shrunk case becomes the representative but is not another independent hit
    shrunk = add(corpus, chain_case(4, ("linear",), shape=(1, 8)), [finding()], shrunk_from=big)
    bucket = corpus.bucket(SIG)
    assert bucket["representative"] == shrunk and bucket["count"] == 3
    assert corpus.get_case(shrunk).shrunk_from == big


def test_two_cases_same_signature_one_bucket_count_two(corpus):
    add(corpus, chain_case(1, ("linear", "relu")), [finding()])
    smaller = add(corpus, chain_case(2), [finding()])
    add(corpus, chain_case(3), [finding("crash | jax-cpu-float32 | - | boom", "crash", "jax-cpu-float32", "-")])
    add(corpus, chain_case(4))  # agree: no bucket
    by_sig = {b["signature"]: b for b in corpus.buckets()}
    assert len(by_sig) == 2
    assert by_sig[SIG]["count"] == 2 and by_sig[SIG]["representative"] == smaller


def test_primary_signature_follows_case_verdict(corpus):
    crash = finding("crash | jax | - | boom", "crash", "jax", "-")
    case_id = add(corpus, chain_case(), [finding(), crash], verdict="crash")
    assert corpus.get_case(case_id).signature == crash["signature"]
    assert len(corpus.buckets()) == 2  # every finding gets its bucket


def test_triage_and_filters(corpus):
    first = add(corpus, chain_case(1, ("linear", "log_softmax")), [finding()])
    other_sig = "nan-inf | jax-cpu-float32 | tanh"
    second = add(corpus, chain_case(2, ("tanh",)), [finding(other_sig, "nan-inf", "jax-cpu-float32", "tanh")],
                 backends=["jax-cpu-float32"])
    agree = add(corpus, chain_case(3, ("relu",)))

    bucket = corpus.triage(first, "confirmed", note="see upstream issue")
    assert bucket["status"] == "confirmed" and bucket["note"] == "see upstream issue"
    assert corpus.triage(first, "reported")["note"] == "see upstream issue"  # note kept when not given
    with pytest.raises(UserError, match="new, confirmed, reported, fixed, wontfix, flaky"):
        corpus.triage(first, "done")
    with pytest.raises(UserError, match="No case with id 999"):
        corpus.triage(999, "fixed")
    with pytest.raises(UserError, match="no finding"):
        corpus.triage(agree, "fixed")

    ids = lambda **kw: [row["id"] for row in corpus.list_cases(**kw)]  # noqa: E731
    assert ids() == [agree, second, first]
    assert ids(status="reported") == [first]
    assert ids(status="new") == [second]
    assert ids(verdict="nan-inf") == [second]
    assert ids(backend="jax-cpu-float32") == [agree, second, first]
    assert ids(backend="torch-cpu-float32") == [agree, first]
    assert ids(op="log_softmax") == [first]
    assert ids(op="softmax") == []  # whole names only: no prefix, and no LIKE wildcards (they are no op's name)
    for pattern in ("log%", "log_softma_"):
        with pytest.raises(UserError, match=f"Unknown op '{pattern}'"):
            ids(op=pattern)
    assert ids(op="tanh", backend="jax-cpu-float32") == [second]
    assert ids(limit=1) == [agree]
    assert corpus.list_cases(status="reported")[0]["findings"] == [finding()]
    with pytest.raises(UserError, match="Unknown triage status"):
        corpus.list_cases(status="bogus")
    assert [b["signature"] for b in corpus.buckets(status="new")] == [other_sig]

    stats = corpus.stats()
    assert stats["cases"] == 3 and stats["cases_with_findings"] == 2 and stats["buckets"] == 2
    assert stats["buckets_by_status"] == {"new": 1, "reported": 1}
    assert stats["cases_by_verdict"] == {"agree": 1, "mismatch": 1, "nan-inf": 1}
    assert stats["campaigns"] == 0


# ---------------------------------------------------------------- a bounded corpus


def stored_ids(corpus: Corpus) -> set[int]:
    return {row["id"] for row in corpus.list_cases(limit=10**6)}


def named_ids(corpus: Corpus) -> set[int]:
    """Every case id something in the corpus names: the cases each bucket keeps, and the cases shrunk from."""
    rows = corpus.db.execute("SELECT first_case, latest_case, representative FROM buckets "
                             "UNION ALL SELECT shrunk_from, NULL, NULL FROM cases").fetchall()
    return {case_id for row in rows for case_id in row if case_id is not None}


def assert_nothing_names_a_dropped_case(corpus: Corpus) -> None:
    assert named_ids(corpus) <= stored_ids(corpus)
    assert {row[0] for row in corpus.db.execute("SELECT DISTINCT case_id FROM case_arrays")} == stored_ids(corpus)


def test_a_campaign_keeps_each_buckets_first_latest_and_smallest_case_and_counts_the_rest(corpus):
    campaign = corpus.start_campaign({}, 0, {})
    rows = [(2, 8), (3, 8), (1, 8), (5, 8), (4, 8)]  # the third case is the smallest
    ids = [add(corpus, chain_case(seed, ("linear", "relu"), shape=shape), [finding()], campaign_id=campaign, bounded=True)
           for seed, shape in enumerate(rows)]
    bucket = corpus.bucket(SIG)
    assert (bucket["first_case"], bucket["latest_case"], bucket["representative"]) == (ids[0], ids[4], ids[2])
    assert stored_ids(corpus) == {ids[0], ids[2], ids[4]}, "the second and fourth were displaced as latest: dropped"
    assert bucket["count"] == 5 and bucket["campaigns"] == {str(campaign): 5}
    # a case something was shrunk from stays; the shrunk case is the reproducer, not another finding
    shrunk = add(corpus, chain_case(9, ("linear",), shape=(1, 2)), [finding()], campaign_id=campaign, shrunk_from=ids[4],
                 bounded=True)
    later = add(corpus, chain_case(10, ("linear", "relu")), [finding()], campaign_id=campaign, bounded=True)
    assert stored_ids(corpus) == {ids[0], ids[4], shrunk, later}, "the old representative went when the shrunk case took over"
    assert corpus.bucket(SIG)["count"] == 6 and corpus.bucket(SIG)["representative"] == shrunk
    # a case a person imported (no campaign) is never dropped, displaced or not
    imported = add(corpus, chain_case(11, ("linear", "relu")), [finding()])
    add(corpus, chain_case(12, ("linear", "relu")), [finding()], campaign_id=campaign, bounded=True)
    assert imported in stored_ids(corpus) and corpus.bucket(SIG)["latest_case"] != imported
    assert_nothing_names_a_dropped_case(corpus)


def bounded_node(path: Path, errors: str) -> Corpus:
    """A corpus whose one campaign found SIG once per letter of `errors` (the finding's error text), stored bounded."""
    corpus = Corpus(path)
    campaign = corpus.start_campaign({}, 0, {})
    for seed, error in enumerate(errors):
        add(corpus, chain_case(seed, ("linear", "relu")), [{**finding(), "error": error}], campaign_id=campaign, bounded=True)
    corpus.finish_campaign(campaign)
    return corpus


def test_merge_counts_the_findings_a_corpus_did_not_keep_once(tmp_path):
    with bounded_node(tmp_path / "node.db", "aaaaaa") as node:
        assert node.case_count() == 2 and node.bucket(SIG)["count"] == 6
    with Corpus(tmp_path / "team.db") as team, Corpus(tmp_path / "node.db") as node:
        assert team.merge_from(node)["cases_added"] == 2
        assert team.bucket(SIG)["count"] == 6 and team.bucket(SIG)["campaigns"] == {"1": 6}
        team.merge_from(node)
        assert team.bucket(SIG)["count"] == 6, "merging the same file again adds nothing"
        assert_nothing_names_a_dropped_case(team)


def test_rebucket_moves_the_counts_of_findings_not_kept(tmp_path):
    """Six findings, two cases kept (first: error a, latest: error b); a rule that splits by error text keeps all six counted."""
    with bounded_node(tmp_path / "node.db", "aaaaab") as corpus:
        corpus.resign_findings(lambda f: f"{f['signature']} | {f['error']}")
        counts = {b["signature"]: (b["count"], b["campaigns"]) for b in corpus.buckets()}
        assert counts == {f"{SIG} | a": (5, {"1": 5}), f"{SIG} | b": (1, {"1": 1})}
        assert_nothing_names_a_dropped_case(corpus)


def test_migrates_version_4_keeping_every_case_and_writing_strict_json(tmp_path):
    """Version 5 adds the kept cases and counts per campaign to each bucket, deleting nothing, and rewrites
    findings held with a bare Infinity token, which sqlite's JSON functions refuse (`fuzz list --op` failed)."""
    path = tmp_path / "v4.db"
    with Corpus(path) as corpus:
        campaign = corpus.start_campaign({}, 0, {})
        ids = [add(corpus, chain_case(seed), [finding()], campaign_id=campaign) for seed in range(3)]
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE old AS SELECT signature, verdict, backend, culprit, first_seen, last_seen, count, status, note,
            representative, known_bug FROM buckets;
        DROP TABLE buckets; ALTER TABLE old RENAME TO buckets;
        UPDATE meta SET value = '4' WHERE key = 'schema_version';""")
    conn.execute("UPDATE cases SET findings = ?", [json.dumps([{**finding(), "max_error": float("inf")}])])
    conn.commit()
    conn.close()
    with Corpus(path) as corpus:
        assert corpus.schema_version() == SCHEMA_VERSION == 9 and stored_ids(corpus) == set(ids)
        bucket = corpus.bucket(SIG)
        assert (bucket["first_case"], bucket["latest_case"], bucket["count"], bucket["campaigns"]) == (ids[0], ids[2], 3, {"1": 3})
        assert corpus.db.execute("SELECT findings FROM cases WHERE id = ?", [ids[0]]).fetchone()[0].count('"max_error": "inf"') == 1
        assert corpus.get_case(ids[0]).findings[0]["max_error"] == float("inf")
        assert [row["signature"] for row in corpus.list_buckets(op="linear")[0]] == [SIG]


@pytest.mark.slow
def test_a_campaign_with_a_frequent_bug_stores_a_few_cases_and_counts_every_finding(tmp_path):
    """60 graphs where layer_norm raises for every odd-sized row: one bucket, every finding counted,
    and stored in full only the bucket's first, latest and smallest (shrunk) case."""
    corpus = Corpus(tmp_path / "bounded.db")
    findings = set()  # the distinct cases with findings the campaign handed to the corpus (shrunk ones aside)
    store = corpus.add_case

    def add_case(record, bounded=False):
        if record.shrunk_from is None:
            findings.add(record.case.content_hash())
        return store(record, bounded)

    corpus.add_case = add_case
    progress = run_campaign(corpus, CampaignOptions(
        backends=["torch-eager:cpu:float32", "plugin-raise-layernorm"], plugins=[str(REPO / "tests/plugins/raise_layernorm_shapes.py")],
        ops=["layer_norm", "relu", "add"], regimes=["small"], max_cases=60, workers=1, shrink_time=5, seed=1))
    [bucket] = corpus.buckets()
    assert bucket["verdict"] == "crash" and bucket["count"] == len(findings) >= 20
    assert bucket["campaigns"] == {str(progress.campaign_id): bucket["count"]}
    assert stored_ids(corpus) == {bucket["first_case"], bucket["latest_case"], bucket["representative"]}
    assert corpus.get_case(bucket["representative"]).shrunk_from == bucket["first_case"]
    assert_nothing_names_a_dropped_case(corpus)


# ---------------------------------------------------------------- export / import


def test_export_import_into_second_db(tmp_path, corpus):
    case = generate_case(3)  # an import takes registered backends only
    real = "mismatch | torch-eager:cpu:float32 | linear"
    case_id = add(corpus, case, [finding(real, backend="torch-eager:cpu:float32")], backends=["torch-eager:cpu:float32"])
    data = corpus.export_case(case_id, expect="agree")
    path = tmp_path / "case.json"
    path.write_text(json.dumps(data))
    loaded = load_case_file(path)
    assert loaded["format"] == "fuzzer-case" and loaded["version"] == 1 and loaded["expect"] == "agree"
    assert case_from_export(loaded).content_hash() == case.content_hash()

    with Corpus(tmp_path / "other.db") as other:
        new_id = other.import_case(loaded)
        stored = other.get_case(new_id)
        assert stored.campaign_id is None
        assert stored.case.graph.to_json() == case.graph.to_json()
        assert all(stored.case.arrays[n].tobytes() == case.arrays[n].tobytes() for n in case.arrays)
        assert stored.verdict == "mismatch" and stored.findings == [finding(real, backend="torch-eager:cpu:float32")]
        assert other.bucket(real)["representative"] == new_id


def _export_with_array(corpus: Corpus, name: str, payload: bytes) -> dict:
    data = corpus.export_case(add(corpus, chain_case()))
    data["arrays"][name] = base64.b64encode(payload).decode()
    return data


def _object_npy() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    return buffer.getvalue()


@pytest.mark.parametrize("payload", [_object_npy(), pickle.dumps(np.array([1, "x"], dtype=object))],
                         ids=["npy-object-array", "raw-pickle"])
def test_import_refuses_pickles_and_writes_nothing(tmp_path, corpus, payload):
    data = _export_with_array(corpus, "x0", payload)
    before = count_rows(corpus.path), count_rows(corpus.path, "case_arrays"), count_rows(corpus.path, "buckets")
    with pytest.raises(UserError, match="array 'x0'"):
        corpus.import_case(data)
    after = count_rows(corpus.path), count_rows(corpus.path, "case_arrays"), count_rows(corpus.path, "buckets")
    assert after == before


def test_import_validates_everything(corpus):
    good = corpus.export_case(add(corpus, chain_case()))
    before = count_rows(corpus.path)
    bad_variants = {
        "format": {**good, "format": "something-else"},
        "version": {**good, "version": 99},
        "graph": {**good, "graph": {"inputs": "nope"}},
        "unknown op": {**good, "graph": {**good["graph"], "nodes": [{**good["graph"]["nodes"][0], "op": "frobnicate"}]}},
        "shape": {**good, "arrays": {**good["arrays"], "x0": base64.b64encode(to_npy_bytes(np.zeros((2, 2)))).decode()}},
        "missing array": {**good, "arrays": {k: v for k, v in good["arrays"].items() if k != "x0"}},
        "base64": {**good, "arrays": {**good["arrays"], "x0": "not base64!!"}},
        "findings": {**good, "findings": [{"signature": 3}]},
        "backends": {**good, "backends": "torch"},
        "seed": {**good, "seed": "7"},
    }
    for what, data in bad_variants.items():
        with pytest.raises(UserError):
            corpus.import_case(data)
        assert count_rows(corpus.path) == before, what


def test_load_case_file_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "fuzzer-case", ')
    with pytest.raises(UserError, match=r"bad\.json' is not valid JSON"):
        load_case_file(bad)
    with pytest.raises(UserError, match="Cannot read case file"):
        load_case_file(tmp_path / "missing.json")
    listing = tmp_path / "list.json"
    listing.write_text("[1, 2]")
    with pytest.raises(UserError, match="not an object"):
        load_case_file(listing)


# ---------------------------------------------------------------- files that are not ours


def test_non_sqlite_file_refused_untouched(tmp_path):
    path = tmp_path / "random.db"
    content = np.random.default_rng(0).bytes(5000)
    path.write_bytes(content)
    with pytest.raises(UserError, match=r"random\.db' is not a fuzzer corpus \(not a sqlite database\); pass --db"):
        Corpus(path)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["random.db"]


def test_foreign_sqlite_refused_untouched(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.close()
    content = path.read_bytes()
    with pytest.raises(UserError, match="is not a fuzzer corpus \\(no meta table\\)"):
        Corpus(path)
    assert path.read_bytes() == content
    # a `meta` table of someone else's
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (k TEXT, v TEXT)")
    conn.close()
    content = path.read_bytes()
    with pytest.raises(UserError, match="not a fuzzer corpus"):
        Corpus(path)
    assert path.read_bytes() == content


def test_newer_schema_refused_untouched(tmp_path):
    path = tmp_path / "fuzz.db"
    Corpus(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    conn.close()
    content = path.read_bytes()
    with pytest.raises(UserError, match="newer fuzzer"):
        Corpus(path)
    assert path.read_bytes() == content


def test_missing_file_without_create(tmp_path):
    with pytest.raises(UserError, match="No corpus at"):
        Corpus(tmp_path / "nope.db", create=False)
    assert not (tmp_path / "nope.db").exists()
    Corpus(tmp_path / "sub" / "new.db").close()  # creates parents
    with Corpus(tmp_path / "sub" / "new.db", create=False) as corpus:
        assert corpus.schema_version() == SCHEMA_VERSION


def test_wal_and_busy_timeout(corpus):
    assert corpus.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert corpus.db.execute("PRAGMA busy_timeout").fetchone()[0] >= 10_000


# ---------------------------------------------------------------- migration


V0_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '0');
CREATE TABLE campaigns (id INTEGER PRIMARY KEY, started TEXT NOT NULL, ended TEXT, status TEXT NOT NULL,
    seed INTEGER NOT NULL, config TEXT NOT NULL, versions TEXT NOT NULL, cases_run INTEGER NOT NULL DEFAULT 0,
    findings INTEGER NOT NULL DEFAULT 0, checkpoint TEXT);
CREATE TABLE cases (id INTEGER PRIMARY KEY, campaign_id INTEGER, created TEXT NOT NULL, content_hash TEXT NOT NULL,
    seed INTEGER NOT NULL, graph TEXT NOT NULL, op_sequence TEXT NOT NULL, node_count INTEGER NOT NULL,
    backends TEXT NOT NULL, verdict TEXT NOT NULL, signature TEXT, findings TEXT NOT NULL, shrunk_from INTEGER);
CREATE TABLE case_arrays (case_id INTEGER NOT NULL, name TEXT NOT NULL, npy BLOB NOT NULL, PRIMARY KEY (case_id, name));
CREATE TABLE buckets (signature TEXT PRIMARY KEY, verdict TEXT NOT NULL, backend TEXT NOT NULL, culprit TEXT NOT NULL,
    first_seen TEXT NOT NULL, last_seen TEXT NOT NULL, count INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'new', representative INTEGER);
"""


def test_migrates_version_0_corpus(tmp_path):
    path = tmp_path / "old.db"
    case = chain_case(5, ("linear", "relu"))
    conn = sqlite3.connect(path)
    conn.executescript(V0_SCHEMA)
    conn.execute(
        "INSERT INTO cases (id, created, content_hash, seed, graph, op_sequence, node_count, backends, verdict, "
        "signature, findings) VALUES (1, '2024-01-01T00:00:00+00:00', ?, 5, ?, 'linear>relu', 2, ?, 'mismatch', ?, ?)",
        [case.content_hash(), case.graph.to_json(), json.dumps(["torch-cpu-float32"]), SIG, json.dumps([finding()])],
    )
    for name, value in case.arrays.items():
        conn.execute("INSERT INTO case_arrays VALUES (1, ?, ?)", [name, to_npy_bytes(value)])
    conn.execute("INSERT INTO buckets (signature, verdict, backend, culprit, first_seen, last_seen, count, representative) "
                 "VALUES (?, 'mismatch', 'torch-cpu-float32', 'linear', 'a', 'a', 1, 1)", [SIG])
    conn.commit()
    conn.close()

    with Corpus(path) as corpus:
        assert corpus.schema_version() == SCHEMA_VERSION == 9
        columns = {c.name for c in corpus.db["cases"].columns}
        assert {"element_count", "shrink_log", "verdicts"} <= columns
        assert "note" in {c.name for c in corpus.db["buckets"].columns}
        stored = corpus.get_case(1)
        assert stored.case.graph == case.graph and stored.shrink_log is None and stored.verdicts == []
        assert corpus.list_cases()[0]["element_count"] == sum(a.size for a in case.arrays.values())
        assert corpus.triage(1, "confirmed", note="old bug")["note"] == "old bug"
        # the migrated bucket keeps working: a smaller case takes over as representative
        smaller = add(corpus, chain_case(6), [finding()])
        assert corpus.bucket(SIG)["representative"] == smaller and corpus.bucket(SIG)["count"] == 2
        assert corpus.migrate() == SCHEMA_VERSION  # idempotent


# ---------------------------------------------------------------- concurrency


WRITER = """
import sys, time
from fuzzer.arrays import materialize
from fuzzer.corpus import Corpus
from fuzzer.ir import Graph, Node, TensorSpec
from fuzzer.judging.check import Finding
from fuzzer.records import CaseRecord

path, worker, start_at = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
graph = Graph((TensorSpec("x0", (4, 8)),), (Node("n0", "linear", ("x0",), {"out_features": 3, "bias": True}),), ("n0",))
cases = [materialize(graph, worker * 1000 + i) for i in range(50)]
finding = Finding("torch", "mismatch", "linear", "shared", max_error=1.0, allowed=0.0)
while time.time() < start_at:
    time.sleep(0.005)
corpus = Corpus(path)
for case in cases:
    corpus.add_case(CaseRecord(case, campaign_id=None, verdict="mismatch", backends=["torch"], findings=[finding]))
    time.sleep(0.002)  # a fuzzer works between writes; lets the two writers interleave
corpus.close()
"""


def test_two_processes_write_one_corpus(tmp_path):
    path = tmp_path / "shared.db"  # created concurrently by both writers
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    start_at = time.time() + 2.0
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(worker), str(start_at)],
                         env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for worker in (1, 2)
    ]
    results = [proc.communicate(timeout=60) for proc in procs]
    for proc, (_, err) in zip(procs, results):
        assert proc.returncode == 0, err
    with Corpus(path) as corpus:
        assert corpus.stats()["cases"] == 100
        assert corpus.bucket("shared")["count"] == 100
        assert corpus.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert corpus.db.execute("SELECT count(*) FROM case_arrays").fetchone()[0] == 100 * 3


def test_migrates_version_1_corpus_adding_every_backends_verdicts(tmp_path):
    """Version 2 keeps each backend's verdict and error; a version-1 file gains the column."""
    path = tmp_path / "v1.db"
    with Corpus(path) as corpus:
        old_id = add(corpus, chain_case(5), [finding()])
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE cases DROP COLUMN verdicts")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with Corpus(path) as corpus:
        assert corpus.schema_version() == SCHEMA_VERSION
        assert corpus.get_case(old_id).verdicts == []
        verdicts = [{"backend": "jax-jit:cpu:float32", "verdict": "agree", "max_error": 1e-7, "allowed": 1e-4}]
        new_id = corpus.add_case(CaseRecord(chain_case(6), verdict="mismatch", backends=["b"], findings=[Finding.from_dict(finding())],
                                            verdicts=[BackendVerdict.from_dict(v) for v in verdicts]))
        assert corpus.get_case(new_id).verdicts == verdicts  # stored as given: no key added


# ---------------------------------------------------------------- version 3: identity by content, uuids, leases


def downgrade_to_v2(path: Path) -> None:
    """Turn a current file into what version 2 wrote: no case_key, no uuid, no lease."""
    conn = sqlite3.connect(path)
    for index in ("idx_cases_case_key", "idx_campaigns_uuid"):
        conn.execute(f"DROP INDEX {index}")
    conn.execute("ALTER TABLE cases DROP COLUMN case_key")
    for column in ("uuid", "lease_pid", "lease_host", "lease_heartbeat"):
        conn.execute(f"ALTER TABLE campaigns DROP COLUMN {column}")
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()


def test_migrates_version_2_keeping_old_duplicates_and_deriving_uuids(tmp_path):
    path = tmp_path / "v2.db"
    with Corpus(path) as corpus:
        campaign = corpus.start_campaign({"backends": ["b"]}, 7, {"torch": "x"})
        first = add(corpus, chain_case(1), [finding()], campaign_id=campaign)
        corpus.finish_campaign(campaign)
    downgrade_to_v2(path)
    conn = sqlite3.connect(path)  # version 2 stored a re-run case twice; the copy keeps its arrays
    conn.execute("INSERT INTO cases (campaign_id, created, content_hash, seed, graph, op_sequence, node_count, element_count, "
                 "backends, verdict, signature, findings) SELECT campaign_id, created, content_hash, seed, graph, op_sequence, "
                 "node_count, element_count, backends, verdict, signature, findings FROM cases WHERE id = ?", [first])
    conn.execute("INSERT INTO case_arrays SELECT 2, name, npy FROM case_arrays WHERE case_id = ?", [first])
    conn.commit()
    conn.close()
    copy = tmp_path / "copy.db"
    copy.write_bytes(path.read_bytes())
    with Corpus(path) as corpus, Corpus(copy) as other:
        assert corpus.schema_version() == SCHEMA_VERSION == 9
        keys = corpus.db.execute("SELECT case_key FROM cases ORDER BY id").fetchall()
        assert keys[0][0] is not None and keys[1][0] is None  # nothing deleted; the duplicate is left unkeyed
        assert corpus.get_case(2).case.content_hash() == corpus.get_case(first).case.content_hash()
        assert corpus.campaigns()[0]["uuid"] == other.campaigns()[0]["uuid"]  # derived from content: copies agree
        assert add(corpus, chain_case(1), [finding()]) == first  # stored already
        assert corpus.merge_from(other) == {"campaigns_added": 0, "cases_added": 0, "cases_already_here": 2,
                                            "buckets_triaged": 0}
        assert corpus.case_count() == 2 and corpus.bucket(SIG)["count"] == 1  # as before the migration


def test_a_version_2_merge_keeps_recognizing_its_source_after_migration(tmp_path):
    """Version 2 marked merged campaigns with config.merged_from = 'path#id'; the derived uuid follows it."""
    node, team = tmp_path / "node.db", tmp_path / "team.db"
    with Corpus(node) as corpus:
        campaign = corpus.start_campaign({"backends": ["b"]}, 3, {"device": "node"})
        add(corpus, chain_case(1), [finding()], campaign_id=campaign)
        corpus.finish_campaign(campaign)
    with Corpus(team) as corpus:  # what version 2's merge wrote
        copied = corpus.start_campaign({"backends": ["b"], "merged_from": f"{node.resolve()}#{campaign}"}, 3, {"device": "node"})
        corpus.finish_campaign(copied)
    downgrade_to_v2(node)
    downgrade_to_v2(team)
    with Corpus(team) as corpus, Corpus(node) as other:
        assert corpus.merge_from(other)["campaigns_added"] == 0


def test_same_content_on_other_backends_is_the_same_case(corpus):
    """A case is its graph and arrays: a resumed campaign's compile budget may run it on other backends."""
    case = chain_case(1)
    assert add(corpus, case, backends=["a"]) == add(corpus, case, backends=["b"]) == add(corpus, case, backends=["b", "a"])
    assert corpus.case_count() == 1


def test_a_live_lease_refuses_resume_and_a_stale_one_is_taken_over(corpus):
    campaign = corpus.start_campaign({}, 0, {})
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        corpus.db.execute("UPDATE campaigns SET lease_pid = ?, lease_heartbeat = ? WHERE id = ?",
                          [other.pid, time.time(), campaign])
        with pytest.raises(UserError, match=f"Campaign {campaign} is running in process {other.pid}"):
            corpus.take_lease(campaign)
        with pytest.raises(UserError, match="taken over"):
            corpus.checkpoint(campaign, {}, 0, 0)  # this process lost its lease: it must stop
        corpus.db.execute("UPDATE campaigns SET lease_heartbeat = ? WHERE id = ?", [time.time() - 3600, campaign])
        corpus.take_lease(campaign)  # alive but silent for an hour: stale
    finally:
        other.kill()
        other.wait()
    corpus.db.execute("UPDATE campaigns SET lease_pid = ?, lease_heartbeat = ? WHERE id = ?", [other.pid, time.time(), campaign])
    corpus.take_lease(campaign)  # fresh heartbeat, dead pid: stale
    assert corpus.campaign(campaign)["lease_pid"] == os.getpid()
    corpus.finish_campaign(campaign, "interrupted")
    assert corpus.campaign(campaign)["lease_pid"] is None
