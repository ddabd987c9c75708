"""Worker isolation, on real processes and real sqlite files: a backend that aborts, hangs,
runs out of memory or raises becomes a finding about *that* backend, the campaign
finishes, and the corpus stays intact. Also: `kill -9` of a running `fuzz run`, then
`--resume`, loses nothing.

Every campaign here starts real spawn workers (import torch, a few seconds each);
a worker that dies or hangs is restarted, which costs the same again.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import resource
import runpy
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuzzer.corpus import Corpus
from fuzzer.errors import UserError
from fuzzer.running.campaign import CampaignOptions, run_campaign
from fuzzer.running.workers import hide_unused_accelerators

PLUGINS = Path(__file__).resolve().parent / "plugins"
FUZZ = Path(sys.executable).parent / "fuzz"
REFERENCE = "torch-eager:cpu:float32"

# A worker running only torch backends peaks near 650 MB of address space (torch + jax
# imported together need about 2 GB; with RLIMIT_AS at 1000-1500 MB such a worker dies
# at import with SIGSEGV/SIGABRT). hog_relu's campaign runs torch backends only, so
# 2048 MB leaves ample room to start and still stops the hog after ~1.3 GB.
HOG_MEMORY_LIMIT_MB = 2048


def integrity(db_path: Path) -> str:
    conn = sqlite3.connect(str(db_path))
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def read_only(db_path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)


def plugin_campaign(tmp_path: Path, plugin: str, backend: str, max_cases: int = 3, **options):
    """Run a short campaign of relu graphs on the reference and a plugin backend; returns (corpus, progress)."""
    corpus = Corpus(tmp_path / "corpus.db")
    opts = CampaignOptions(
        backends=[REFERENCE, backend], plugins=[str(PLUGINS / plugin)], ops=["relu"], max_cases=max_cases,
        workers=1, timeout=5, shrink_time=5, **options,
    )
    try:
        progress = run_campaign(corpus, opts)
    except BaseException:
        corpus.close()
        raise
    return corpus, progress


def assert_campaign_survived(tmp_path: Path, corpus: Corpus, progress, max_cases: int) -> None:
    assert progress.status == "finished"
    row = corpus.campaign(progress.campaign_id)
    assert row["status"] == "finished"
    assert row["ended"] is not None
    assert progress.graphs == max_cases and row["cases_run"] == max_cases  # every case ran, none was lost
    assert multiprocessing.active_children() == []  # no worker, dead, hung or alive, is left behind
    assert integrity(tmp_path / "corpus.db") == "ok"


def findings_of(corpus: Corpus, verdict: str) -> list[tuple[dict, dict]]:
    """(case row, finding) for every stored finding with this verdict."""
    return [(row, f) for row in corpus.list_cases(limit=1000) for f in row["findings"] if f["verdict"] == verdict]


def assert_only_blamed(corpus: Corpus, backend: str, verdict: str) -> list[tuple[dict, dict]]:
    found = findings_of(corpus, verdict)
    assert found, f"no {verdict} finding stored"
    every = [f for row in corpus.list_cases(limit=1000) for f in row["findings"]]
    assert {f["backend"] for f in every} == {backend}, "only the plugin backend is to blame, never the reference"
    assert {f["verdict"] for f in every} == {verdict}
    buckets = corpus.buckets()
    assert buckets and all(b["backend"] == backend and b["verdict"] == verdict for b in buckets)
    return found


@pytest.mark.slow
def test_aborting_backend_is_a_crash_finding(tmp_path):
    corpus, progress = plugin_campaign(tmp_path, "abort_relu.py", "plugin-abort-relu")
    with corpus:
        assert_campaign_survived(tmp_path, corpus, progress, 3)
        found = assert_only_blamed(corpus, "plugin-abort-relu", "crash")
        assert progress.crashes == 3  # every case killed its worker, and each time a new one took over
        assert all("SIGABRT" in f["detail"] for _, f in found)
        assert all(row["verdict"] == "crash" for row, _ in found)
    # Exporting the crash runs no backend: the script is written from the plugin kernel's source.
    exported = subprocess.run([sys.executable, "-m", "fuzzer.cli", "export", str(found[0][0]["id"]), "--db",
                               str(tmp_path / "corpus.db"), "--plugin", str(PLUGINS / "abort_relu.py")],
                              capture_output=True, text=True, timeout=120)
    assert exported.returncode == 0, exported.stderr
    assert "def relu_abort(xs, ps, attrs):" in exported.stdout and "os.abort()" in exported.stdout
    # So does the report: the bucket whose backend aborts gets its script, and the report is written.
    reported = subprocess.run([sys.executable, "-m", "fuzzer.cli", "report", "--db", str(tmp_path / "corpus.db"),
                               "--output", str(tmp_path / "report"), "--plugin", str(PLUGINS / "abort_relu.py")],
                              capture_output=True, text=True, timeout=300)
    assert reported.returncode == 0, reported.stderr
    assert "relu_abort" in (tmp_path / "report" / "report.html").read_text()


@pytest.mark.long  # CI's 15 minutes: test_bounds' hanging backend is found and shrunk in CI
def test_sleeping_backend_is_a_hang_finding(tmp_path):
    # Each hang costs the 5 s timeout plus a worker restart and a shrink; that a restarted worker
    # carries on after a hang is shown by test_a_death_a_fresh_worker_does_not_repeat_is_counted_not_stored.
    corpus, progress = plugin_campaign(tmp_path, "sleep_relu.py", "plugin-sleep-relu", max_cases=1)
    with corpus:
        assert_campaign_survived(tmp_path, corpus, progress, 1)
        found = assert_only_blamed(corpus, "plugin-sleep-relu", "hang")
        assert progress.crashes == 1
        # The campaign's timeout; a shrunk case was asked with a shorter one (fuzzer/shrinking/death_shrink.py).
        assert all("5 s" in f["detail"] for row, f in found if row["shrunk_from"] is None)


@pytest.mark.parametrize("plugin, backend, counted", [
    # GPU-machine case 189: 60 s without an answer among 14 workers sharing the GPU, 0.25 s alone.
    ("sleep_once_relu.py", "plugin-sleep-once-relu", "unrepeated_hangs"),
    # SIGKILL ends a worker from outside (the OOM killer, a scheduler, kill -9): once, it says nothing
    # of the backend. Killing a campaign's workers and fork server made a `crash | unknown` bucket.
    ("sigkill_once_relu.py", "plugin-sigkill-once-relu", "unrepeated_deaths"),
], ids=["hang", "kill-from-outside"])
def test_a_death_a_fresh_worker_does_not_repeat_is_counted_not_stored(tmp_path, plugin, backend, counted):
    marker = runpy.run_path(str(PLUGINS / plugin))["MARKER"]
    marker.unlink(missing_ok=True)
    try:
        corpus, progress = plugin_campaign(tmp_path, plugin, backend, max_cases=2)
        assert marker.exists(), "the first case did end its worker"
    finally:
        marker.unlink(missing_ok=True)
    with corpus:
        assert_campaign_survived(tmp_path, corpus, progress, 2)
        assert (getattr(progress, counted), progress.crashes) == (1, 0)
        assert findings_of(corpus, "hang") == findings_of(corpus, "crash") == []


@pytest.mark.slow
def test_memory_hog_under_limit_is_a_crash_finding(tmp_path):
    parent_limit = resource.getrlimit(resource.RLIMIT_AS)
    corpus, progress = plugin_campaign(tmp_path, "hog_relu.py", "plugin-hog-relu", memory_limit_mb=HOG_MEMORY_LIMIT_MB)
    with corpus:
        assert_campaign_survived(tmp_path, corpus, progress, 3)
        found = assert_only_blamed(corpus, "plugin-hog-relu", "crash")
        # Under RLIMIT_AS the allocation fails with MemoryError below the limit, inside the worker.
        for _, f in found:
            got = re.search(r"MemoryError: hog gave up after (\d+) MB", f["detail"])
            assert got, f["detail"]
            assert 0 < int(got.group(1)) < HOG_MEMORY_LIMIT_MB, "the hog was not stopped by the worker's limit"
    assert resource.getrlimit(resource.RLIMIT_AS) == parent_limit  # the limit is the worker's alone


@pytest.mark.long  # CI's 15 minutes: test_memory_hog_under_limit_is_a_crash_finding keeps the memory limit in CI
def test_a_worker_silent_at_its_memory_limit_is_a_crash_finding_not_a_hang(tmp_path):
    # Issue 51: a memory hog under --memory-limit 3000 was filed as `hang`.
    corpus, progress = plugin_campaign(tmp_path, "hog_wait_relu.py", "plugin-hog-wait-relu", max_cases=1,
                                       memory_limit_mb=HOG_MEMORY_LIMIT_MB)
    with corpus:
        assert_campaign_survived(tmp_path, corpus, progress, 1)
        found = assert_only_blamed(corpus, "plugin-hog-wait-relu", "crash")
        for _, f in found:
            got = re.fullmatch(r"worker process stopped answering at its memory limit \((\d+) of 2048 MB\) for 5 s", f["error"])
            assert got and int(got.group(1)) >= 1800, f["error"]


def test_raising_backend_is_a_crash_finding(tmp_path):
    corpus, progress = plugin_campaign(tmp_path, "raise_relu.py", "plugin-raise-relu")
    with corpus:
        assert_campaign_survived(tmp_path, corpus, progress, 3)
        found = assert_only_blamed(corpus, "plugin-raise-relu", "crash")
        assert progress.crashes == 0  # an exception is caught in the worker: no process died
        assert all("KernelBug: plugin relu kernel exploded" in f["detail"] for _, f in found)
        shrunk = [row for row, _ in found if row["shrunk_from"]]
        assert shrunk, "a new crash signature is shrunk and stored linked to its original"
        originals = {row["id"]: row for row, _ in found}
        assert all(row["node_count"] <= originals[row["shrunk_from"]]["node_count"] for row in shrunk)


@pytest.mark.slow
def test_a_reference_slower_than_the_timeout_leaves_the_case_unchecked_and_the_campaign_goes_on(tmp_path):
    # Issue 51: under the compile timeout a jax-vmap campaign's one worker spent 9 of its 10 minutes in
    # the float64 reference of a backend's extra outputs, with no finding. Each case here reaches the
    # reference within `timeout`; a compile timeout of 300 s would have held each for 300 s.
    corpus, progress = plugin_campaign(tmp_path, "slow_extra_reference.py", "plugin-slow-extra-reference", max_cases=2,
                                       compile_timeout=300)
    with corpus:
        assert_campaign_survived(tmp_path, corpus, progress, 2)
        assert (progress.slow_checks, progress.internal_errors, progress.crashes) == (2, 0, 0)
        assert corpus.list_cases(limit=10) == [] and corpus.buckets() == []  # not the backend's hang, nor anyone's


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full, a file whose every write finds the disk full")
def test_a_backend_that_finds_its_disk_full_ends_the_campaign_with_that_sentence_not_a_finding(tmp_path):
    # Issue 51: under a full disk some messages blamed the wrong thing (here: the backend, as a crash).
    with pytest.raises(UserError, match=r"^plugin-full-disk-relu could not write a file: its disk is full \(OSError: \[Errno 28\]"):
        plugin_campaign(tmp_path, "full_disk_relu.py", "plugin-full-disk-relu", max_cases=2)
    with Corpus(tmp_path / "corpus.db") as corpus:
        [row] = corpus.campaigns()
        assert row["status"] == "interrupted" and "its disk is full" in row["checkpoint"]["stopped_because"]
        assert corpus.list_cases(limit=10) == []
    assert multiprocessing.active_children() == []


# A relu kernel that starts helpers which sleep (a child, and a child of that child) and writes their pids
# to a file, then answers: the campaign itself finishes fine.
SPAWNING_PLUGIN = """
import subprocess

import torch


def relu_spawning(xs, ps, attrs):
    helper = subprocess.Popen(["sh", "-c", "sleep 300 & echo $! >> {pids}; exec sleep 300"])
    with open("{pids}", "a") as pids:
        pids.write(f"{{helper.pid}}\\n")
    return torch.relu(xs[0])


def register(api):
    api.derive_backend("plugin-spawn-relu", base="torch-eager:cpu:float32", overrides={{"relu": relu_spawning}})
"""


def ended(pid: int) -> bool:
    """Has process `pid` ended (gone, or a zombie no one has reaped yet)?"""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the helpers' state from /proc")
def test_every_process_a_backend_starts_ends_with_its_worker(tmp_path):
    # Issue 51: a plugin's 26 sleeping helpers outlived a 6 s campaign and held its stderr open for 170 s.
    pids = tmp_path / "helpers.txt"
    plugin = tmp_path / "spawn_relu.py"
    plugin.write_text(SPAWNING_PLUGIN.format(pids=pids))
    corpus, progress = plugin_campaign(tmp_path, str(plugin), "plugin-spawn-relu", max_cases=1)
    with corpus:
        assert_campaign_survived(tmp_path, corpus, progress, 1)
    helpers = [int(line) for line in pids.read_text().split()]
    assert len(helpers) >= 4, "the kernel ran and started its helpers and theirs"
    deadline = time.monotonic() + 10
    while not all(ended(pid) for pid in helpers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in helpers if not ended(pid)] == []


# -- a backend's error that leaves the device unusable (a CUDA sticky error) ---------------------

STICKY = "sticky_device_error.py"
ILLEGAL_ADDRESS = "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"


def sticky_campaign(tmp_path: Path, backends: list[str], max_cases: int):
    """A short campaign of small graphs of the stand-in plugin's ops; returns (corpus, progress)."""
    corpus = Corpus(tmp_path / "corpus.db")
    opts = CampaignOptions(backends=[REFERENCE, *backends], plugins=[str(PLUGINS / STICKY)], max_nodes=3,
                           ops=["relu", "tanh", "add", "mul", "sigmoid"], max_cases=max_cases, workers=1, timeout=10,
                           shrink_time=5)
    try:
        return corpus, run_campaign(corpus, opts)
    except BaseException:
        corpus.close()
        raise


@pytest.mark.slow
def test_a_sticky_device_error_is_one_crash_of_the_case_that_caused_it_not_a_cascade(tmp_path):
    """After its tanh, every op of `plugin-sticky-tanh` and of its bystander raises a CUDA illegal
    address in that process. The landed code stored 6 buckets (the first case blamed on relu, every
    later case a crash on both backends, each shrunk to a lone op) and no tanh bucket. Now the worker
    ends at the error; the case is stored only because it poisons a fresh worker too, named after the
    node that alone poisons one (tanh), unshrunk; the cases after it run in fresh workers."""
    corpus, progress = sticky_campaign(tmp_path, ["plugin-sticky-tanh", "plugin-sticky-bystander"], max_cases=8)
    with corpus:
        assert_campaign_survived(tmp_path, corpus, progress, 8)
        assert [b["signature"] for b in corpus.buckets()] == [f"crash | plugin-sticky-tanh | tanh | {ILLEGAL_ADDRESS}"]
        rows = corpus.list_cases(limit=1000)
        assert rows and all(row["shrunk_from"] is None and "tanh" in row["op_sequence"].split(">") for row in rows)
        assert len(rows) == progress.crashes == progress.finding_cases
        # Each: the worker that met it, the fresh one that rechecked it, the one that ran its index again.
        assert progress.poisoned_restarts == 3 * progress.crashes
        assert progress.to_dict()["poisoned_restarts"] == progress.poisoned_restarts


@pytest.mark.slow
def test_a_poisoning_a_fresh_worker_does_not_repeat_stores_nothing_and_is_counted(tmp_path):
    """`plugin-sticky-tanh-late` poisons only a process that already ran 40 ops: rechecked in a fresh
    worker its case passes, so nothing is stored (the landed code stored 3 buckets, 8 cases). 24 graphs: steered
    graphs (a key or a pair of one node) are often of one op, and 12 of them may not reach the 41st op."""
    corpus, progress = sticky_campaign(tmp_path, ["plugin-sticky-tanh-late"], max_cases=24)
    with corpus:
        assert_campaign_survived(tmp_path, corpus, progress, 24)
        assert corpus.buckets() == [] and corpus.list_cases(limit=1000) == []
        assert progress.crashes == progress.finding_cases == 0
        assert progress.poisoned_restarts >= 1


@pytest.mark.slow
def test_replay_asks_a_fresh_worker_again_when_its_worker_was_poisoned():
    """`fuzz replay` and `regress` check many cases in one worker: the one that meets a poisoning left
    by earlier requests is checked again in a fresh worker, which agrees."""
    from fuzzer.drawing.generate import CaseGenerator
    from fuzzer.running.replay import Replayer

    case = CaseGenerator(["tanh"], 1).case(0)
    with Replayer(["plugin-sticky-tanh-late"], [str(PLUGINS / STICKY)]) as replayer:
        first_worker = replayer.worker.process.pid
        replies = [replayer.check(case, ["plugin-sticky-tanh-late"]) for _ in range(45)]  # the 41st op poisons
        assert replayer.worker.process.pid != first_worker
    assert {reply.verdict for reply in replies} == {"agree"}


@pytest.mark.long  # CI's 15 minutes: the campaign's own death culprits stay in CI (test_crash_culprit)
def test_replay_names_a_death_after_the_node_that_dies_alone():
    """`fuzz replay` and `regress` of a stored crash must give the signature the campaign stored, whose
    culprit the campaign found by running each node alone (death_shrink): a case of several nodes whose
    relu aborts its worker is a crash of relu, not of the whole graph ("-")."""
    from fuzzer.arrays import materialize
    from fuzzer.ir import Graph, Node, TensorSpec
    from fuzzer.running.replay import Replayer

    graph = Graph([TensorSpec("x0", (2, 3))], [Node("n0", "tanh", ["x0"], {}), Node("n1", "relu", ["n0"], {}),
                                               Node("n2", "sigmoid", ["n1"], {})], ["n2"])
    with Replayer(["plugin-abort-relu"], [str(PLUGINS / "abort_relu.py")], timeout=60) as replayer:
        reply = replayer.check(materialize(graph, seed=1), ["plugin-abort-relu"])
    assert reply.verdict == "crash"
    assert [f.signature for f in reply.findings] == ["crash | plugin-abort-relu | relu | worker process killed by signal SIGABRT"]


# -- kill -9 of a running `fuzz run`, then --resume ---------------------------------------------

def child_pids(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (ended, not yet reaped by its parent) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def poll_db(db_path: Path, proc: subprocess.Popen, ready, deadline_s: float, what: str) -> dict:
    """Poll the corpus read-only until ready(state) holds; state has campaign row and case rows."""
    deadline = time.monotonic() + deadline_s
    state: dict = {}
    while time.monotonic() < deadline:
        if db_path.exists():
            try:
                with read_only(db_path) as conn:
                    conn.row_factory = sqlite3.Row
                    campaigns = [dict(r) for r in conn.execute("SELECT * FROM campaigns ORDER BY id")]
                    cases = [dict(r) for r in conn.execute(
                        "SELECT id, content_hash, verdict, signature, findings FROM cases ORDER BY id")]
                conn.close()
                state = {"campaign": campaigns[-1] if campaigns else None, "cases": cases}
                if state["campaign"] and ready(state):
                    return state
            except sqlite3.OperationalError:
                pass  # the layout is being created, or the file is briefly locked
        if proc.poll() is not None:
            break
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}; last state {state}; `fuzz run` exit code {proc.poll()}")


def start_fuzz(args: list[str], log: Path) -> subprocess.Popen:
    handle = open(log, "wb")
    try:
        return subprocess.Popen([str(FUZZ), *args], stdout=handle, stderr=subprocess.STDOUT, cwd=log.parent)
    finally:
        handle.close()


def snapshot(db_path: Path) -> dict:
    conn = sqlite3.connect(str(db_path))
    try:
        return {
            "cases": conn.execute("SELECT id, content_hash, verdict, signature, findings, graph FROM cases ORDER BY id").fetchall(),
            "arrays": conn.execute("SELECT case_id, name, npy FROM case_arrays ORDER BY case_id, name").fetchall(),
            "buckets": {row[0] for row in conn.execute("SELECT signature FROM buckets")},
            "counts": dict(conn.execute("SELECT signature, count FROM buckets").fetchall()),
            # what a bounded corpus keeps for good: each bucket's first case, shrunk cases and the cases they came from
            "kept": {row[0] for row in conn.execute("SELECT first_case FROM buckets UNION SELECT id FROM cases WHERE "
                                                    "shrunk_from IS NOT NULL UNION SELECT shrunk_from FROM cases")} - {None},
        }
    finally:
        conn.close()


@pytest.mark.slow
def test_kill_9_then_resume_loses_nothing(tmp_path):
    db = tmp_path / "fuzz.db"
    common = ["--db", str(db), "--workers", "1"]
    # `mean` is in the op set because without an op that can shrink a tensor, the generator sometimes
    # draws an input too large for every op and builds an empty graph, which aborts the campaign
    # (library bug, e.g. `--ops layer_norm,transpose,permute` at seed index 479).
    first = start_fuzz(
        ["run", *common, "--max-cases", "100000", "--plugin", "layout-layernorm",
         "--backends", "torch-eager,canary-layout-layernorm", "--ops", "layer_norm,transpose,permute,mean",
         "--inputs-per-graph", "1", "--shrink-time", "1", "--timeout", "60"],
        tmp_path / "first.log",
    )
    workers: list[int] = []
    second = None
    try:
        # At least one stored finding and one checkpoint, so the kill lands mid-campaign with state to resume.
        before = poll_db(
            db, first, lambda s: s["campaign"]["cases_run"] >= 1 and any(c["signature"] for c in s["cases"]),
            60, "the first finding and checkpoint",
        )
        workers = child_pids(first.pid)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert first.returncode == -signal.SIGKILL

        # Orphaned workers notice their parent is gone and end on their own.
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(alive(pid) for pid in workers), "workers outlived the killed campaign"

        assert integrity(db) == "ok"
        killed = snapshot(db)
        assert killed["cases"], "findings stored before the kill are on disk"
        campaign_id = before["campaign"]["id"]
        conn = sqlite3.connect(str(db))
        cases_run_before, checkpoint = conn.execute(
            "SELECT cases_run, checkpoint FROM campaigns WHERE id = ?", [campaign_id]).fetchone()
        conn.close()
        next_index = json.loads(checkpoint)["next_index"]

        # Resume for a few more graphs (its plugin passed again: a resume loads none from the corpus).
        # The campaign must continue from its checkpoint.
        second = start_fuzz(["run", *common, "--resume", str(campaign_id), "--max-cases", str(next_index + 3),
                             "--plugin", "layout-layernorm"], tmp_path / "second.log")
        poll_db(db, second, lambda s: s["campaign"]["cases_run"] > cases_run_before, 90, "the resumed campaign to progress")
        try:
            second.wait(5)
        except subprocess.TimeoutExpired:
            # `--max-cases` is not applied on resume (see test_resume_applies_new_max_cases): stop it gracefully.
            second.send_signal(signal.SIGINT)
            second.wait(60)
        log = (tmp_path / "second.log").read_text()
        assert second.returncode in (0, 1), log  # 1: it stored a canary finding; never 2, 3 or 130
        assert f"Campaign {campaign_id}" in log

        conn = sqlite3.connect(str(db))
        status, cases_run_after = conn.execute("SELECT status, cases_run FROM campaigns WHERE id = ?", [campaign_id]).fetchone()
        campaigns = conn.execute("SELECT count(*) FROM campaigns").fetchone()[0]
        conn.close()
        assert campaigns == 1, "--resume continues the campaign, it does not start another"
        assert status in ("finished", "interrupted")
        assert cases_run_after > cases_run_before
        after = snapshot(db)
        assert killed["kept"], "the first finding's case is kept"
        assert {c for c in killed["cases"] if c[0] in killed["kept"]} <= set(after["cases"]), \
            "every case kept before the kill is still there, unchanged"
        assert {a for a in killed["arrays"] if a[0] in killed["kept"]} <= set(after["arrays"])
        assert killed["buckets"] <= after["buckets"]
        assert all(after["counts"][signature] >= count for signature, count in killed["counts"].items()), "no finding uncounted"
        assert integrity(db) == "ok"
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_resume_applies_new_max_cases(tmp_path):
    """`fuzz run --resume ID --max-cases 4` is run_campaign(corpus, options(max_cases=4), resume=ID)."""
    options = dict(backends=[REFERENCE], ops=["relu"], workers=1, inputs_per_graph=1, shrink_time=1)
    with Corpus(tmp_path / "fuzz.db") as corpus:
        progress = run_campaign(corpus, CampaignOptions(max_cases=2, **options))
        assert progress.graphs == 2
        resumed = run_campaign(corpus, CampaignOptions(max_cases=4, **options), resume=progress.campaign_id)
        assert resumed.campaign_id == progress.campaign_id
        assert resumed.graphs == 4
        assert corpus.campaign(progress.campaign_id)["cases_run"] == 4


# long (out of CI's 15 minutes): an aborting backend is a crash finding in CI (test_aborting_backend_is_a_crash_finding); this is the gradient reference's export path.
@pytest.mark.long
def test_an_export_whose_gradient_reference_aborts_refuses_in_one_sentence_and_the_minimal_script_still_exports(tmp_path):
    # XLA:CPU aborts (a CHECK failure) compiling jax.grad of this stride-2 conv2d, in float64 too, so
    # the full harness, whose expected gradients are jax.grad's float64 run, cannot be written: the
    # export finds that out in a bounded worker instead of dying with it. A crash's minimal script
    # needs no reference. (reports/bugs/xla-cpu-conv-lhs-dilation-abort)
    db = tmp_path / "corpus.db"
    subprocess.run([str(FUZZ), "import", str(Path(__file__).parent / "data" / "xla-cpu-conv-lhs-dilation-abort.json"),
                    "--db", str(db)], check=True, capture_output=True)
    harness = subprocess.run([str(FUZZ), "export", "1", "--db", str(db), "--format", "script"], capture_output=True, text=True)
    assert harness.returncode == 2 and not harness.stdout
    assert harness.stderr.strip().splitlines()[-1] == (
        "Error: Case 1 cannot be exported: the float64 reference of jax-grad:cpu:float32's extra outputs ended its "
        "worker (worker process killed by signal SIGABRT); the minimal script (the default format) needs none for a "
        "crash; export it with --format json.")
    minimal = subprocess.run([str(FUZZ), "export", "1", "--db", str(db), "-o", str(tmp_path / "repro.py")], capture_output=True, text=True)
    assert minimal.returncode == 0, minimal.stderr
    assert "jax.vjp" in (tmp_path / "repro.py").read_text()
    assert Corpus(db).get_case(1).findings  # nothing lost
    # XLA's abort kills the script's process too: the script runs the program in a child and exits 1.
    run = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 1 and "Check failed" in run.stderr
    # The report, which writes the full harness of each bucket, says why this one has none.
    report = subprocess.run([str(FUZZ), "report", "--db", str(db), "-o", str(tmp_path / "report")], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    assert "extra outputs ended its worker (worker process killed by signal SIGABRT)" in (tmp_path / "report" / "report.html").read_text()


@pytest.mark.slow
def test_a_resumed_summary_is_of_the_campaigns_own_backends(tmp_path):
    # Issue 51: `fuzz run --resume ID` summed up (and warned about) the default backends, which it never ran.
    from test_hostile import fuzz

    common = ["--db", tmp_path / "fuzz.db", "--workers", 1]
    assert fuzz("run", *common, "--backends", REFERENCE, "--ops", "relu", "--max-cases", 1).exit_code == 0
    resumed = fuzz("run", *common, "--resume", 1, "--max-cases", 2)
    assert resumed.exit_code == 0, resumed.output
    what_ran = resumed.stdout.split("What ran", 1)[1].split("Share of worker time", 1)[0]
    assert re.findall(r"\n  (\S+): ", what_ran) == [REFERENCE] and "Warning" not in resumed.stdout



@pytest.mark.parametrize("backends, hidden", [
    (["torch-eager:cpu:float32", "jax-jit:cpu:float32@old"], True),
    (["torch-eager:cpu:float32", "torch-eager:cuda:float32"], False),
    (["torch-eager:cpu:float32", "my-plugin-backend"], False),  # a plugin's name says no device: keep them
])
def test_a_worker_of_cpu_backends_leaves_the_gpus_alone(monkeypatch, backends, hidden):
    for variable in ("CUDA_VISIBLE_DEVICES", "JAX_PLATFORMS"):
        monkeypatch.delenv(variable, raising=False)
    import jax

    platforms = jax.config.jax_platforms
    try:
        hide_unused_accelerators(backends)
        # jax was imported before the call, as in a worker forked from the fork server: its config must say cpu too
        assert jax.config.jax_platforms == ("cpu" if hidden else platforms)
    finally:
        jax.config.update("jax_platforms", platforms)
    assert (os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("JAX_PLATFORMS")) == (("", "cpu") if hidden else (None, None))
