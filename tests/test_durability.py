"""The corpus under attack from outside the fuzzer: its folder removed or its file replaced while a
campaign writes it, a flipped byte in an array, a full disk, a held lock, a read-only folder, and
kill -9 of a campaign with a compiler in its budget (fuzzer/corpus/integrity.py, Campaign._stored_then_done)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from fuzzer.cli import main
from fuzzer.corpus import Corpus
from fuzzer.drawing.generate import generate_case
from fuzzer.errors import UserError
from fuzzer.records import CaseRecord, Finding
from fuzzer.running.campaign import CampaignOptions, run_campaign
from test_hostile import rows

FUZZ = Path(sys.executable).with_name("fuzz")  # the fuzz of the interpreter running the tests, as in the other modules
SIG = "mismatch | torch-eager:cpu:float32 | linear"
CANARY = dict(plugins=["tiled-matmul-zeros"], backends=["canary-tiled-matmul-zeros"], ops=["linear", "relu", "add"],
              max_nodes=3, inputs_per_graph=1, shrink_time=2, workers=1)
CANARY_RUN = ["--workers", "1", "--plugin", "tiled-matmul-zeros", "--ops", "linear,relu,add", "--max-nodes", "3",
              "--inputs-per-graph", "1", "--shrink-time", "2"]


def fuzz(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def refused(result, *needles: str) -> str:
    """Exit 2 with one `Error: ...` sentence (a CliRunner result or a CompletedProcess)."""
    code = getattr(result, "exit_code", getattr(result, "returncode", None))
    stderr = result.stderr
    assert code == 2, (code, result.stdout, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in stderr, stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def store(corpus: Corpus, seed: int, campaign_id: int | None = None) -> int:
    finding = Finding("torch-eager:cpu:float32", "mismatch", "linear", SIG, max_error=0.5, allowed=1e-4)
    return corpus.add_case(CaseRecord(generate_case(seed), campaign_id=campaign_id, verdict="mismatch",
                                      backends=["torch-eager:cpu:float32"], findings=[finding]))


def wait_for(db: Path, proc: subprocess.Popen, sql: str, count: int, seconds: float = 180) -> None:
    """Until `sql` (a count) reaches `count` in the corpus a running `fuzz run` writes."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(sqlite3.Error, TypeError):
            if db.exists() and rows(db, sql)[0][0] >= count:
                return
        time.sleep(0.1)
    raise AssertionError(f"{sql} never reached {count}; `fuzz run` exit code {proc.poll()}")


def wait_for_cases(db: Path, proc: subprocess.Popen, count: int) -> None:
    wait_for(db, proc, "SELECT count(*) FROM cases", count)


# -- the corpus removed or replaced under a running campaign --------------------------------------------

@pytest.mark.slow
def test_a_campaign_whose_corpus_folder_is_removed_stops_with_exit_2_and_writes_nothing(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    proc = subprocess.Popen([FUZZ, "run", "--db", folder / "fuzz.db", "--time", "60s", "--backends",
                             "canary-tiled-matmul-zeros", *CANARY_RUN], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    try:
        wait_for_cases(folder / "fuzz.db", proc, 1)
        shutil.rmtree(folder)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 2 and out == "", (proc.returncode, out, err)
    assert err.strip().splitlines()[-1].startswith(f"Error: The corpus '{folder / 'fuzz.db'}' is gone: it was removed")
    assert not folder.exists(), "nothing was written where the corpus was"


def test_a_corpus_replaced_under_its_writer_is_left_as_it_is_and_the_writer_stops(tmp_path):
    """`git checkout` of a tracked corpus: the old writer's log must not be replayed over the new file."""
    db, other = tmp_path / "fuzz.db", tmp_path / "other.db"
    with Corpus(other) as corpus:
        store(corpus, 3)
    before = other.read_bytes()
    writer = Corpus(db)
    campaign_id = writer.start_campaign({}, 0, {})
    store(writer, 1, campaign_id)  # in the write-ahead log, not yet in the file
    db.unlink()
    shutil.copy(other, db)
    with pytest.raises(UserError, match="is another file now: it was removed or replaced"):
        store(writer, 2, campaign_id)
    with pytest.raises(UserError, match="is another file now"):
        writer.checkpoint(campaign_id, {}, 1, 1)
    writer.close()
    assert db.read_bytes() == before
    assert rows(db, "PRAGMA integrity_check") == [("ok",)]
    assert rows(db, "SELECT count(*) FROM cases") == [(1,)] and rows(db, "SELECT count(*) FROM campaigns") == [(0,)]


def test_a_corpus_copied_over_its_writer_is_left_as_it_is_and_the_writer_stops(tmp_path):
    """Issue 51: `cp other.db fuzz.db` under a campaign keeps the inode, so the identity check missed it:
    the campaign died with "No campaign with id 2", integrity_check failed, `fuzz list` mixed both files."""
    db, other = tmp_path / "fuzz.db", tmp_path / "other.db"
    with Corpus(other) as corpus:
        store(corpus, 3)
    before = other.read_bytes()
    writer = Corpus(db)
    campaign_id = writer.start_campaign({}, 0, {})
    store(writer, 1, campaign_id)  # in the write-ahead log, not yet in the file
    shutil.copyfile(other, db)  # in place: the same inode
    refused(fuzz("list", "--db", db), f"The corpus '{db}' was overwritten (a copy over it?) while a process had it open")
    with pytest.raises(UserError, match="was overwritten with another corpus .* nothing more was written"):
        writer.checkpoint(campaign_id, {}, 1, 1)
    with pytest.raises(UserError, match="was overwritten with another corpus"):
        store(writer, 2, campaign_id)
    writer.close()
    assert db.read_bytes() == before, "the writer's log was dropped, not copied into the new content"
    assert rows(db, "PRAGMA integrity_check") == [("ok",)]
    assert rows(db, "SELECT count(*) FROM cases") == [(1,)] and rows(db, "SELECT count(*) FROM campaigns") == [(0,)]
    assert fuzz("list", "--db", db).exit_code == 0


# -- a flipped byte -------------------------------------------------------------------------------------

@pytest.fixture
def flipped(tmp_path) -> tuple[Path, int]:
    """A corpus whose second case has one byte of an array's values flipped."""
    db = tmp_path / "flipped.db"
    with Corpus(db) as corpus:
        store(corpus, 1)
        case_id = store(corpus, 2)
    conn = sqlite3.connect(db)
    name, blob = conn.execute("SELECT name, npy FROM case_arrays WHERE case_id = ? ORDER BY rowid LIMIT 1", [case_id]).fetchone()
    blob = bytearray(blob)
    blob[-3] ^= 0x40
    conn.execute("UPDATE case_arrays SET npy = ? WHERE case_id = ? AND name = ?", [bytes(blob), case_id, name])
    conn.commit()
    conn.close()
    return db, case_id


@pytest.mark.parametrize("command", [["show", "{id}"], ["export", "{id}", "--format", "json"], ["replay", "{id}"]])
def test_a_case_whose_bytes_changed_is_refused_on_read(flipped, command):
    db, case_id = flipped
    refused(fuzz(*[str(case_id) if part == "{id}" else part for part in command], "--db", db),
            f"Case {case_id}", "does not match its content hash")


def test_merging_a_corpus_with_a_changed_byte_copies_nothing(tmp_path, flipped):
    source, _ = flipped
    target = tmp_path / "team.db"
    with Corpus(target) as corpus:
        store(corpus, 7)
    before = rows(target, "SELECT id, content_hash FROM cases")
    refused(fuzz("merge", "--db", target, source), "Nothing merged", "does not match its content hash")
    assert rows(target, "SELECT id, content_hash FROM cases") == before


def test_an_intact_case_still_reads_back(flipped):
    db, case_id = flipped
    exported = json.loads(fuzz("export", "1", "--format", "json", "--db", db).stdout)
    assert exported["graph"] == generate_case(1).graph.to_dict() and base64.b64decode(exported["arrays"]["x0"])


# -- a full disk, a held lock -----------------------------------------------------------------------------

@pytest.mark.slow
def test_a_full_disk_ends_the_campaign_interrupted_with_its_reason(tmp_path):
    db = tmp_path / "fuzz.db"
    with Corpus(db) as corpus:
        pages = corpus.db.conn.execute("PRAGMA page_count").fetchone()[0]
        corpus.db.conn.execute(f"PRAGMA max_page_count = {pages + 8}")  # sqlite's disk full, on this connection
        with pytest.raises(UserError, match="could not be written: its disk is full"):
            run_campaign(corpus, CampaignOptions(max_cases=300, **CANARY))
    [(status, lease, checkpoint)] = rows(db, "SELECT status, lease_pid, checkpoint FROM campaigns")
    assert status == "interrupted" and lease is None
    assert "its disk is full" in json.loads(checkpoint)["stopped_because"]
    summary = json.loads(fuzz("campaigns", "--db", db, "--json").stdout)[0]
    assert "its disk is full" in summary["stopped_because"]


def campaign_counts(db: Path) -> tuple[int, int]:
    """(the campaign row's findings, the findings its buckets count for it)."""
    [(findings,)] = rows(db, "SELECT findings FROM campaigns")
    tallies = [json.loads(text).get("1", 0) for (text,) in rows(db, "SELECT campaigns FROM buckets")]
    return findings, sum(tallies)


@pytest.mark.slow
def test_a_write_failure_leaves_the_campaign_counting_only_what_was_stored(tmp_path):
    """Issue 51: after a full disk, a campaign's `findings` stayed 2 above its buckets' counts through a
    successful resume (274 vs 272): the rolled-back transaction's findings had been counted anyway."""
    db = tmp_path / "fuzz.db"
    with Corpus(db) as corpus:
        pages = corpus.db.conn.execute("PRAGMA page_count").fetchone()[0]
        corpus.db.conn.execute(f"PRAGMA max_page_count = {pages + 24}")  # sqlite's disk full, on this connection
        with pytest.raises(UserError, match="its disk is full"):
            run_campaign(corpus, CampaignOptions(max_cases=300, **CANARY))
    findings, counted = campaign_counts(db)
    assert findings == counted > 0, "the findings the failed transaction would have stored are not counted"
    with Corpus(db) as corpus:
        run_campaign(corpus, CampaignOptions(max_cases=findings + 3, **CANARY), resume=1)
    findings, counted = campaign_counts(db)
    assert findings == counted, "nor after a resume that ran those cases again"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full, a file whose every write finds the disk full")
def test_an_output_on_a_full_disk_says_the_disk_is_full_not_that_the_path_is_wrong(tmp_path):
    # Issue 51: "Cannot use (No space left on device); check that the path exists and that you may read and write it."
    from test_hostile import corpus_with, refused, relu_case

    corpus_with(tmp_path / "c.db", relu_case())
    refused(fuzz("export", 1, "--format", "json", "--db", tmp_path / "c.db", "-o", "/dev/full"),
            "Cannot write the output: its disk is full (No space left on device); free some space")


def test_a_lock_held_past_the_busy_timeout_is_one_sentence(tmp_path):
    db = tmp_path / "fuzz.db"
    with Corpus(db) as corpus:
        campaign_id = corpus.start_campaign({}, 0, {})
        corpus.db.conn.execute("PRAGMA busy_timeout = 100")  # the 30 s default, shortened for the test
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(UserError, match="stayed locked by another process"):
                corpus.checkpoint(campaign_id, {}, 0, 0)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        corpus.finish_campaign(campaign_id, "interrupted", "the lock")
    assert rows(db, "SELECT status FROM campaigns") == [("interrupted",)]


# -- a read-only corpus ------------------------------------------------------------------------------------

@pytest.mark.parametrize("locked", ["folder", "file"])
def test_a_read_only_corpus_opens_for_reading_and_refuses_writing(tmp_path, locked, read_only):
    folder = tmp_path / "shared"
    folder.mkdir()
    db, other = folder / "fuzz.db", tmp_path / "other.db"
    for path, seed in ((db, 1), (other, 2)):
        with Corpus(path) as corpus:
            corpus.finish_campaign(corpus.start_campaign({}, 0, {}))
            store(corpus, seed)
    before = db.read_bytes()
    with read_only(folder if locked == "folder" else db):
        for command in (["list"], ["show", "1"], ["stats"], ["campaigns"], ["export", "1", "--format", "json"]):
            result = fuzz(*command, "--db", db)
            assert result.exit_code == 0, (command, result.output)
        why = "its folder is read-only" if locked == "folder" else "the file is read-only"
        for command in (["triage", "1", "--status", "wontfix"], ["merge", other],
                        ["run", "--max-cases", "1", "--backends", "numpy-ref", "--workers", "1"]):
            refused(fuzz(*command, "--db", db), f"The corpus '{db}' cannot be written: {why}")
    assert db.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) in (["fuzz.db"], ["fuzz.db", "fuzz.db-shm", "fuzz.db-wal"])


# -- kill -9 of a campaign with a compiler in its budget, then --resume -----------------------------------------

def content(db: Path) -> tuple[dict, list]:
    """(bucket counts, every unshrunk case's content), checking that no content is stored twice."""
    assert rows(db, "SELECT content_hash FROM cases GROUP BY content_hash HAVING count(*) > 1") == []
    buckets = dict(rows(db, "SELECT signature, count FROM buckets"))
    return buckets, sorted(rows(db, "SELECT content_hash, verdict, signature FROM cases WHERE shrunk_from IS NULL"))


FINDINGS_COUNTED = "SELECT coalesce(sum(count), 0) FROM buckets"


@pytest.mark.long  # ten kills, each resume compiling afresh: several minutes on 2 cores
def test_kill_9_ten_times_with_a_compiler_in_the_budget_loses_and_repeats_nothing(tmp_path):
    args = ["--max-cases", 40, "--seed", 3, "--backends", "canary-tiled-matmul-zeros,torch-compile", *CANARY_RUN]
    baseline, db = tmp_path / "baseline.db", tmp_path / "killed.db"
    uninterrupted = subprocess.run([FUZZ, "run", "--db", baseline, *map(str, args)], capture_output=True, text=True,
                                   cwd=tmp_path, timeout=900)
    assert uninterrupted.returncode == 1, uninterrupted.stderr
    rng = random.Random(30)
    for kill in range(11):
        resume = ["--resume", 1] if kill else []
        proc = subprocess.Popen([FUZZ, "run", "--db", db, *map(str, args + resume)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        try:
            if kill < 10:
                # Findings counted, not cases stored: a bounded corpus drops a bucket's older cases as it stores new ones.
                counted = rows(db, FINDINGS_COUNTED)[0][0] if kill else 0
                with contextlib.suppress(AssertionError):  # the campaign may end first: kill what is left
                    wait_for(db, proc, FINDINGS_COUNTED, counted + rng.randint(1, 3))
                    time.sleep(rng.uniform(0, 0.3))
                proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert proc.returncode == 1, err
    assert rows(db, "SELECT count(*), status FROM campaigns") == [(1, "finished")]
    assert content(db) == content(baseline)
    killed_summary = json.loads(rows(db, "SELECT checkpoint FROM campaigns")[0][0])
    assert killed_summary["new_buckets"] == json.loads(rows(baseline, "SELECT checkpoint FROM campaigns")[0][0])["new_buckets"]
