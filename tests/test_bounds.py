"""Every process that runs a backend or the reference is bounded, and so is every case: the resource
bounds count each node's output and the big temporaries of its reference before anything is
allocated; a replaying command's worker has the memory limit of a campaign's; a backend that kills
or silences its worker is shrunk like any other finding, each kept candidate killing a fresh worker.
"""

from __future__ import annotations

import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fuzzer.arrays import materialize
from fuzzer.ir import Case, Graph, Node, TensorSpec, param_shapes
from fuzzer.plugins import load_plugins
from fuzzer.running.pipeline import WorkerConfig
from fuzzer.running.workers import SlowCheck, Worker, WorkerDied
from fuzzer.shrinking.death_shrink import dies_again, shrink_death
from test_hostile import corpus_with, exported, fuzz, refused, relu_case, write_json

PLUGINS = Path(__file__).resolve().parent / "plugins"
FUZZ = str(Path(sys.executable).with_name("fuzz"))
TORCH = "torch-eager:cpu:float32"


def case_file(tmp_path: Path, graph: Graph, name: str = "case.json") -> Path:
    case = materialize(graph, 0)
    return write_json(tmp_path / name, exported(case))


# -- resource bounds count intermediates ----------------------------------------------------------

def test_attention_scores_count_against_the_tensor_bound(tmp_path):
    # q, k, v of (1, 6, 1): 18 elements in, but L x S = 36 scores (and as many weights) in the reference.
    graph = Graph(tuple(TensorSpec(n, (1, 6, 1)) for n in "qkv"),
                  (Node("a", "scaled_dot_product_attention", ("q", "k", "v"),
                        {"causal": False, "mask": False, "scale": None}),), ("a",))
    path = case_file(tmp_path, graph)
    refused(fuzz("--max-tensor-elements", 30, "import", "--db", tmp_path / "c.db", path),
            "attention scores of node 'a'", "36 elements", "limit of 30")
    assert fuzz("--max-tensor-elements", 36, "import", "--db", tmp_path / "c.db", path).exit_code == 0


def test_a_conv_padded_input_counts_against_the_tensor_bound(tmp_path):
    conv = Node("c", "conv2d", ("x",), {"out_channels": 1, "kernel_size": [3, 3], "stride": [1, 1], "padding": [10, 10],
                                       "dilation": [1, 1], "groups": 1, "bias": False})
    graph = Graph((TensorSpec("x", (1, 1, 1, 1)),), (conv,), ("c",))
    assert param_shapes(graph) == {"c.weight": (1, 1, 3, 3)}
    # The output is 19 x 19 = 361 elements; the reference pads the input to 21 x 21 = 441 first.
    refused(fuzz("--max-tensor-elements", 400, "import", "--db", tmp_path / "c.db", case_file(tmp_path, graph)),
            "padded input of node 'c'", "441 elements")


def test_every_node_output_counts_against_the_case_bound(tmp_path):
    # Five expands of 70 elements to 70 x 70: 24,570 elements the inputs alone do not show.
    nodes = tuple(Node(f"e{i}", "expand", ("x",), {"sizes": [70, 70]}) for i in range(5))
    graph = Graph((TensorSpec("x", (1, 70)),), nodes, tuple(n.name for n in nodes))
    refused(fuzz("--max-case-elements", 20_000, "import", "--db", tmp_path / "c.db", case_file(tmp_path, graph)),
            "by its node 'e4' (expand)", "limit of 20,000")


# -- a replaying command's worker is bounded -------------------------------------------------------

def fuzz_capped(*args, hard_mb: int, timeout: float = 300) -> subprocess.CompletedProcess:
    """`fuzz` under a hard address-space limit (also a safety net: nothing it starts can take more)."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (hard_mb * 2**20, hard_mb * 2**20))

    return subprocess.run([FUZZ, *map(str, args)], capture_output=True, text=True, timeout=timeout, preexec_fn=cap)


def test_a_memory_limit_above_the_hard_limit_is_refused(tmp_path):
    db = tmp_path / "c.db"
    corpus_with(db, relu_case())
    done = fuzz_capped("replay", 1, "--db", db, "--memory-limit", 7000, hard_mb=6000)
    refused(done, "--memory-limit 7000 is above this shell's hard address-space limit of 6000 MB")


@pytest.mark.slow
def test_replay_runs_its_worker_under_the_memory_limit(tmp_path):
    # hog_relu reserves 100 MB at a time until refused (RLIMIT_AS bounds reservations): under
    # --memory-limit 2048 its worker is refused well below 2 GB, and the finding says so; the
    # parent, under an 8 GB safety net, is untouched.
    db = tmp_path / "c.db"
    corpus_with(db, relu_case(), backend="plugin-hog-relu", signature="crash | plugin-hog-relu | relu")
    done = fuzz_capped("replay", 1, "--db", db, "--plugin", PLUGINS / "hog_relu.py", "--memory-limit", 2048,
                       "--json", hard_mb=8192)
    assert done.returncode == 1, done.stderr  # the crash reproduces: the README's exit 1
    got = re.search(r"hog gave up after (\d+) MB", done.stdout)
    assert got and 0 < int(got.group(1)) < 2048, done.stdout


# -- a dead or hung worker is shrunk like any other finding ---------------------------------------

def two_node_case(shape: tuple[int, ...]):
    """tanh then relu: the plugin's relu is the culprit, the tanh before it noise to shrink away."""
    graph = Graph((TensorSpec("x0", shape),), (Node("n0", "tanh", ("x0",)), Node("n1", "relu", ("n0",))), ("n1",))
    return materialize(graph, 1)


def shrunk_death(plugin: str, backend: str, timeout: float, shape: tuple[int, ...]):
    case = two_node_case(shape)
    load_plugins([str(PLUGINS / plugin)])  # the parent isolates nodes for the backend's dtype, as a campaign does
    worker = Worker(WorkerConfig(backends=[backend], plugins=[str(PLUGINS / plugin)]))
    try:
        try:
            worker.request(("check", case, [backend]), timeout)
            raise AssertionError("the plugin backend did not kill its worker")
        except WorkerDied as died:
            return case, died, shrink_death(worker, case, died, seconds=30, timeout=timeout)
    finally:
        worker.stop()


@pytest.mark.slow
def test_an_aborting_backend_is_shrunk_to_its_culprit():
    case, died, death = shrunk_death("abort_relu.py", "plugin-abort-relu", timeout=60, shape=(3, 4))
    assert died.culprit == "-" and "SIGABRT" in died.message
    assert death.finding.culprit == "relu" and death.finding.signature.startswith("crash | plugin-abort-relu | relu |")
    shrunk = death.shrunk.case
    assert shrunk.graph.op_names() == ["relu"] and sum(a.size for a in shrunk.arrays.values()) == 1
    assert death.shrunk.findings[0].signature == death.finding.signature


@pytest.mark.slow
def test_a_hanging_backend_is_shrunk_with_a_short_timeout():
    # Found under a 4 s timeout; each candidate is given the case's own measure (here the 2 s floor).
    # Every kept candidate costs a hang: two elements keep them few.
    case, died, death = shrunk_death("sleep_relu.py", "plugin-sleep-relu", timeout=4, shape=(1, 2))
    assert died.kind == "hang" and death.finding.culprit == "relu"
    assert death.shrunk.log["hang_timeout"] < 4
    assert death.shrunk.case.graph.op_names() == ["relu"]
    waited = re.fullmatch(r"no answer within ([0-9.]+) s", death.shrunk.findings[0].detail)
    assert waited and float(waited.group(1)) < 4


def test_a_case_that_no_longer_kills_a_fresh_worker_is_not_shrunk():
    worker = Worker(WorkerConfig(backends=[TORCH]))
    try:
        died = WorkerDied("crash", TORCH, "worker process killed by signal SIGSEGV")
        death = shrink_death(worker, relu_case(), died, seconds=10, timeout=60)
        assert (death.repeated, death.shrunk, death.finding.culprit) == (False, None, "-")
    finally:
        worker.stop()


def test_a_worker_dead_since_its_last_reply_is_replaced_and_the_next_request_answered():
    """A torch 2.15 campaign's worker aborted on a heap corruption after replying ("double free or corruption"); the
    next request's send raised BrokenPipeError and ended the campaign with exit 2."""
    worker = Worker(WorkerConfig(backends=[TORCH]))
    try:
        assert worker.request(("check", relu_case(), [TORCH]), timeout=120).verdict == "agree"
        dead = worker.process
        dead.kill()
        dead.join(10)
        reply = worker.request(("check", relu_case(), [TORCH]), timeout=120)
        assert (reply.verdict, worker.deaths_between_requests) == ("agree", 1) and worker.process is not dead
    finally:
        worker.stop()


def test_a_death_outside_any_backend_is_asked_of_the_whole_case_in_a_fresh_worker():
    # A worker whose fork server was killed with it dies "with status 255", here running no backend.
    assert WorkerDied("crash", None, "worker process exited with status 255", exit_code=255).from_outside()
    assert WorkerDied("crash", TORCH, "worker process killed by signal SIGKILL", exit_code=-signal.SIGKILL).from_outside()
    assert WorkerDied("crash", TORCH, "worker process exited with status 255", exit_code=255).from_outside()
    assert not WorkerDied("crash", TORCH, "worker process killed by signal SIGSEGV", exit_code=-signal.SIGSEGV).from_outside()
    plugin = str(PLUGINS / "abort_relu.py")
    worker = Worker(WorkerConfig(backends=[TORCH, "plugin-abort-relu"], plugins=[plugin]))
    try:
        assert not dies_again(worker, relu_case(), [TORCH], timeout=60)
        assert dies_again(worker, relu_case(), [TORCH, "plugin-abort-relu"], timeout=60)
    finally:
        worker.stop()


def wide_conv1d_case(length: int = 384) -> Case:
    """A 512-channel conv1d of `length` positions: its float16 model is slow (numpy float16), and so
    is its float64 reference once long (1.2 s for 16,384 positions here on one BLAS thread)."""
    conv = {"bias": False, "dilation": [2], "groups": 1, "kernel_size": [3], "out_channels": 512, "padding": [0], "stride": [1]}
    graph = Graph([TensorSpec("x0", (1, 512, length))], [Node("n0", "conv1d", ["x0"], conv)], ["n0"])
    rng = np.random.default_rng(0)
    return Case(graph, {"x0": rng.standard_normal((1, 512, length)), "n0.weight": rng.standard_normal((512, 512, 3)) * 0.03},
                seed=1)


@pytest.mark.slow
def test_a_worker_silent_after_its_backend_returned_is_judging_it_not_hanging():
    # The lazy oracle computes its honest models only for a verdict the cheap bound does not settle:
    # after the backend ran. For a 512-channel float16 conv1d that is the float16 model's conv, 8 s
    # here and a minute among 14 workers; its silence was a `hang` of the backend it judged. Past the
    # timeout it is the fuzzer's own slowness, whatever the compile timeout.
    case = wide_conv1d_case()
    worker = Worker(WorkerConfig(backends=["plugin-zero-conv1d"], plugins=[str(PLUGINS / "zero_conv1d.py")]))
    try:
        reply = worker.request(("check", case, ["plugin-zero-conv1d"]), timeout=300.0)
        with pytest.raises(SlowCheck, match="no backend was running") as raised:
            worker.request(("check", case, ["plugin-zero-conv1d"]), timeout=1.0, compile_timeout=300.0)
        assert raised.value.backend is None
    finally:
        worker.stop()
    assert [f.signature for f in reply.findings] == ["mismatch | plugin-zero-conv1d | conv1d"]
    assert reply.verdict == "all-zeros"


def test_a_worker_silent_before_any_backend_is_the_fuzzers_own_slowness_not_a_hang_finding():
    # GPU campaign case 790: a 512-channel conv1d with nans took a fresh worker past the 60 s timeout
    # before any backend ran (the float16 model's conv, among 14 workers), stored as `hang | unknown`.
    # The lazy oracle now models a non-finite reference after the backends too; the float64
    # reference still comes first, and a long conv makes it slow. `timeout` bounds it, not the
    # compile timeout (issue 51: `fuzz replay --timeout 30` had not returned after 240 s).
    case = wide_conv1d_case(length=16384)
    worker = Worker(WorkerConfig(backends=["torch-eager:cpu:float16", TORCH, "plugin-sleep-relu"],
                                 plugins=[str(PLUGINS / "sleep_relu.py")]))
    try:
        # Warm first: a worker still importing when the 0.2 s pass has said nothing either (a loaded CI machine).
        worker.request(("check", relu_case(), [TORCH]), timeout=120, compile_timeout=120)
        with pytest.raises(SlowCheck, match="did not finish within 0.2 s") as raised:
            worker.request(("check", case, ["torch-eager:cpu:float16"]), timeout=0.2, compile_timeout=600)
        assert raised.value.backend is None
        # A backend silent as long is a hang finding that names it (the compile timeout is not its).
        with pytest.raises(WorkerDied, match="no answer within 0.2 s") as raised:
            worker.request(("check", relu_case(), [TORCH, "plugin-sleep-relu"]), timeout=0.2, compile_timeout=5.0)
        assert not isinstance(raised.value, SlowCheck) and raised.value.backend == "plugin-sleep-relu"
    finally:
        worker.stop()


@pytest.mark.long  # CI's 15 minutes: the campaign's own reference timeout stays in CI (test_isolation)
def test_replay_and_regress_give_up_on_a_reference_slower_than_their_timeout_in_one_sentence(tmp_path):
    # Issue 51: a 100 x 100 kernel slid over a padding of 3000 (35 M outputs, within the element bounds)
    # asks hours of the float64 reference; `--timeout 30` had not returned after 240 s.
    conv = Node("c", "conv2d", ("x",), {"out_channels": 1, "kernel_size": [100, 100], "stride": [1, 1],
                                       "padding": [3000, 3000], "dilation": [1, 1], "groups": 1, "bias": False})
    folder = tmp_path / "regression"
    folder.mkdir()
    path = case_file(folder, Graph((TensorSpec("x", (1, 1, 1, 1)),), (conv,), ("c",)))
    db = tmp_path / "c.db"
    assert fuzz("import", "--db", db, path).exit_code == 0
    refused(fuzz("replay", 1, "--db", db, "--timeout", 2), "The case was not checked", "float64 reference",
            "no backend was running", "did not finish within 2 s", "raise --timeout")
    write_json(folder / "relu.json", exported(relu_case()))
    regressed = fuzz("regress", folder, "--timeout", 2)
    assert regressed.exit_code == 1, regressed.output  # a surprise: the case was not checked
    assert re.search(r"SURPRISE +case.json +expect agree +got not-checked\n.*did not finish within 2 s", regressed.stdout)
    assert re.search(r"\nok +relu.json +expect agree +got agree", regressed.stdout), "the next file is still checked"


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads a worker's environment from /proc")
@pytest.mark.parametrize("memory_limit_mb", [None, 3000], ids=["forked-from-template", "spawned"])
def test_a_worker_loads_numpy_with_its_blas_pool_at_its_thread_count(memory_limit_mb, monkeypatch):
    """numpy's OpenBLAS sizes its pool as numpy loads (in the template, or a spawned worker's unpickling),
    before the worker limits its threads: unbounded, 14 workers on 16 cores ran at load 53."""
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    worker = Worker(WorkerConfig(backends=[TORCH], memory_limit_mb=memory_limit_mb))
    try:
        # A fork server started by an earlier test keeps that test's count: any count is a bounded pool.
        started_with = Path(f"/proc/{worker.process.pid}/environ").read_bytes().split(b"\0")
        assert any(re.fullmatch(rb"OPENBLAS_NUM_THREADS=[0-9]+", line) for line in started_with)
    finally:
        worker.stop()
