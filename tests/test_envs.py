"""Backends in other Python environments (KIND@ENV), `fuzz env` and `fuzz bisect`, for real:
real interpreters, real worker processes, and (slow) a real old jax release from PyPI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from fuzzer import verdicts
from fuzzer.backends import get_backend
from fuzzer.backends.torch_eager import TorchEager
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.errors import OpUnsupported, UserError
from fuzzer.judging.check import check_case
from fuzzer.ops import float_op_names
from fuzzer.running import envs
from fuzzer.running.env_worker import missing_api
from fuzzer.running.execute import ERROR, OK, run_backend

FUZZ = str(Path(sys.executable).parent / "fuzz")
REPORTS = Path(__file__).resolve().parent.parent / "reports"
OLD_JAX = "0.4.26"  # its XLA:CPU jit gets softmax over axis 0 of (N, M, 1) float32 wrong; 0.4.27 fixed it


def fuzz(*args, env_home: Path, expect: int | None = 0) -> subprocess.CompletedProcess:
    variables = {**os.environ, "FUZZ_ENV_HOME": str(env_home)}
    result = subprocess.run([FUZZ, *map(str, args)], capture_output=True, text=True, env=variables, timeout=900)
    if expect is not None:
        assert result.returncode == expect, (result.returncode, result.stdout[-3000:], result.stderr[-3000:])
    return result


@pytest.fixture
def env_home(tmp_path, monkeypatch):
    home = tmp_path / "envs"
    monkeypatch.setenv("FUZZ_ENV_HOME", str(home))
    return home


def one_error_line(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# -- bad input: one sentence, exit 2, nothing created -------------------------------------------

def test_unknown_environment_in_a_campaign(env_home, tmp_path):
    db = tmp_path / "c.db"
    result = fuzz("run", "--db", db, "--backends", "jax-jit,jax-jit@nope", "--max-cases", 1, env_home=env_home, expect=None)
    one_error_line(result, "'nope'", "fuzz env create")
    assert not db.exists()


@pytest.mark.parametrize("spec, needle", [
    ("jax-jit@", "KIND[:DEVICE[:DTYPE]]@ENVIRONMENT"),
    ("@here", "KIND[:DEVICE[:DTYPE]]@ENVIRONMENT"),
    ("no-such-kind@here", "Unknown backend 'no-such-kind'"),
    ("jax-jit@/no/such/venv", "neither a registered name nor a venv"),
])
def test_malformed_backend_names(env_home, spec, needle):
    with pytest.raises(UserError, match=None) as caught:
        get_backend(spec)
    assert needle in str(caught.value)


@pytest.mark.long  # CI's 15 minutes: a backend in an environment stays in CI (test_a_backend_in_an_environment_...)
def test_an_interpreter_path_from_the_command_line_runs_in_the_campaigns_workers(env_home, tmp_path, monkeypatch):
    """`fuzz run` accepts the path after its fork server has started: the workers forked from it are told."""
    monkeypatch.delenv(envs.TRUSTED_PATHS_VARIABLE, raising=False)
    db = tmp_path / "c.db"
    result = fuzz("run", "--db", db, "--backends", f"torch-eager,torch-eager@{sys.executable}", "--ops", "relu,add",
                  "--inputs-per-graph", 1, "--max-cases", 2, "--workers", 1, "--json", env_home=env_home)
    summary = json.loads(result.stdout)
    assert summary["graphs"] == 2 and summary["internal_errors"] == 0 and summary["finding_cases"] == 0


def test_plugin_backends_cannot_move_to_another_environment_and_shipped_kinds_of_any_framework_can(env_home, canaries):
    envs.add("here", sys.executable)
    with pytest.raises(UserError, match="only the backends shipped with fuzzer can"):
        get_backend(f"{canaries['dropout-in-eval']}@here")
    # No framework list: a shipped kind of another framework (onnxruntime) is accepted by name,
    # and whether it runs there is the environment's to say (`fuzz backends`, unavailable_reason).
    assert get_backend("ort-unoptimized:cpu:float32@here").name == "ort-unoptimized:cpu:float32@here"


def test_interpreter_without_numpy_is_refused_and_not_registered(env_home, tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    result = fuzz("env", "add", "bare", bare / "bin" / "python", env_home=env_home, expect=None)
    one_error_line(result, "cannot start under", "numpy")
    assert envs.load_all() == {}


def test_missing_interpreter_and_corrupt_registry(env_home):
    one_error_line(fuzz("env", "add", "x", "/no/such/python", env_home=env_home, expect=None), "does not exist")
    envs.add("here", sys.executable)
    (env_home / envs.REGISTRY_FILE).write_text("{ not json")
    one_error_line(fuzz("env", "list", env_home=env_home, expect=None), "registry", "unreadable")


def test_a_relative_interpreter_path_is_the_callers(env_home, monkeypatch):
    """The probe starts the interpreter from another folder: the path must be made absolute first."""
    venv = Path(sys.executable).parent.parent
    monkeypatch.chdir(venv)
    assert envs.add("relative", "bin/python").python == str(venv / "bin" / "python")


def test_broken_environment_is_reported_by_check(env_home, tmp_path):
    venv = tmp_path / "gone"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    envs.add("gone", str(venv / "bin" / "python"))
    (venv / "bin" / "python").unlink()
    result = fuzz("env", "list", "--check", "--json", env_home=env_home, expect=1)
    [row] = json.loads(result.stdout)
    assert "does not exist" in row["broken"]
    # Replay checks its backends in its worker: bad ones must still be one sentence, not an internal error.
    db = tmp_path / "c.db"
    fuzz("import", "--db", db, REPORTS / "cross-version" / "case-softmax-axis0.json", env_home=env_home)
    one_error_line(fuzz("replay", 1, "--db", db, "--backends", "jax-jit@gone", env_home=env_home, expect=None),
                   "not available", "cannot start Python", "'gone'")
    one_error_line(fuzz("replay", 1, "--db", db, "--backends", "jax-jit@/no/such/venv", env_home=env_home, expect=None),
                   "neither a registered name")


# -- the protocol, against this very interpreter (fast, no download) ----------------------------

@pytest.fixture(scope="module")
def registered_here(tmp_path_factory):
    """(home, environment): this interpreter registered once for the module, since registering probes
    torch and jax in a new process (seconds); the worker is shared per process anyway (env_backend)."""
    home = tmp_path_factory.mktemp("envs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FUZZ_ENV_HOME", str(home))
        return home, envs.add("here", sys.executable)


@pytest.fixture
def here(registered_here, monkeypatch):
    """This interpreter registered as an environment: its results must equal in-process ones bit for bit."""
    home, environment = registered_here
    monkeypatch.setenv("FUZZ_ENV_HOME", str(home))
    return environment


def test_a_compiler_in_another_environment_keeps_its_slice_of_the_compile_share(here):
    for kind in ("torch-compile", "torch-compile-breaks", "jax-jit"):
        local, remote = get_backend(kind), get_backend(f"{kind}@here")
        assert (remote.compile_weight, remote.compiled_sets) == (local.compile_weight, local.compiled_sets)
    assert get_backend("torch-compile@here").compile_weight > get_backend("jax-jit@here").compile_weight


@pytest.mark.parametrize("kind", ["torch-eager", "jax-jit:cpu:float64", "torch-module"])
def test_a_backend_in_an_environment_computes_what_it_computes_in_process(here, kind):
    generator = CaseGenerator(float_op_names(), 5)
    local, remote = get_backend(kind), get_backend(f"{kind}@here")
    assert remote.name == f"{local.name}@here"
    for seed in range(8):
        case = generator.case(seed)
        mine, theirs = run_backend(local, case), run_backend(remote, case)
        assert (mine.status, theirs.status) == (OK, OK), theirs.error
        for a, b in zip(mine.outputs, theirs.outputs):
            np.testing.assert_array_equal(a, b)
    name, versions = remote.other_environment()
    assert name == "here" and versions["torch"] == here.versions["torch"]


def test_the_worker_runs_the_shipped_copy_not_the_checkout(here):
    """`python -m` puts the working folder on sys.path first; the copy must win anyway."""
    command = envs.worker_command(sys.executable)
    found = subprocess.run([*command.args[:2], "-c", "import fuzzer; print(fuzzer.__file__)"], capture_output=True,
                           text=True, env=command.variables, cwd=command.cwd, check=True).stdout.strip()
    assert Path(found).is_relative_to(envs.runner_root())


def test_a_worker_that_dies_mid_case_is_a_crash_and_the_next_case_gets_a_new_one(here):
    backend = get_backend("torch-eager@here")
    case = CaseGenerator(float_op_names(), 3).case(0)
    assert run_backend(backend, case).status == OK
    pid = backend.worker.process.pid
    os.kill(pid, signal.SIGSTOP)  # it cannot answer before the kill below lands
    threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
    died = run_backend(backend, case)
    assert died.status == ERROR and "died of signal SIGKILL" in died.error, died.error
    assert run_backend(backend, case).status == OK and backend.worker.process.pid != pid


def test_a_worker_past_its_time_is_killed_and_replaced(here):
    backend = get_backend("torch-eager@here")
    case = CaseGenerator(float_op_names(), 3).case(0)
    assert run_backend(backend, case).status == OK
    stuck = backend.worker.process
    os.kill(stuck.pid, signal.SIGSTOP)
    with pytest.raises(TimeoutError, match="ran past 1 s"):
        backend.worker.ask({"check": "torch-eager"}, timeout=1.0)
    assert stuck.poll() is not None  # killed, not left behind
    assert run_backend(backend, case).status == OK


# Long (CI's 15 minutes): the cross-version campaign test below also checks both sides' versions.
@pytest.mark.long
def test_cross_environment_campaign_records_both_sides(here, tmp_path):
    db = tmp_path / "c.db"
    result = fuzz("run", "--db", db, "--backends", "torch-eager,torch-eager@here,jax-jit@here", "--max-cases", 6,
                  "--workers", 1, "--seed", 3, "--json", env_home=envs.home())
    summary = json.loads(result.stdout)
    assert summary["graphs"] == 6 and summary["internal_errors"] == 0 and summary["finding_cases"] == 0
    from fuzzer.corpus import Corpus

    versions = Corpus(str(db)).campaign(summary["campaign_id"])["versions"]
    assert versions["environments"]["here"]["jax"] == versions["jax"]


def test_a_reproducer_names_the_environment_and_runs_there(here, tmp_path):
    from fuzzer.reproducers.reproducer import build_script

    case = CaseGenerator(float_op_names(), 4).case(2)
    script = build_script(case, get_backend("torch-eager@here"), "title")
    assert "# Run it in environment 'here' (" in script and sys.executable not in script
    path = tmp_path / "repro.py"
    path.write_text(script)
    ran = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr  # no bug in this release: exit 0


# -- unsupported ops ----------------------------------------------------------------------------

def test_missing_api_errors_are_recognized():
    import jax
    import torch

    for module, name in ((torch.nn.functional, "rms_norm_from_the_future"), (jax.nn, "softmax_v9")):
        with pytest.raises(AttributeError) as caught:
            getattr(module, name)
        assert missing_api(caught.value)
    with pytest.raises(AttributeError) as caught:
        torch.zeros(1).no_such_method()
    assert not missing_api(caught.value)  # a tensor's attribute: our bug or theirs, not a missing release API
    assert not missing_api(ValueError("bad value"))


class LacksSoftmax(TorchEager):
    """torch-eager as a release without softmax would behave (the env worker raises the same)."""

    def impl_for(self, op_name):
        if op_name == "softmax":
            raise OpUnsupported("op 'softmax' needs torch.softmax, which this release lacks")
        return super().impl_for(op_name)


def test_an_unsupported_op_gives_no_verdict_and_no_finding():
    from fuzzer.arrays import materialize
    from fuzzer.ir import Graph, Node, TensorSpec

    graph = Graph([TensorSpec("x", (2, 3))], [Node("n0", "softmax", ["x"], {"dim": 1})], ["n0"])
    result = check_case(materialize(graph, 0), [LacksSoftmax(), get_backend("jax-jit")])
    assert [v.verdict for v in result.verdicts] == [verdicts.UNSUPPORTED, verdicts.AGREE]
    assert result.findings == [] and result.verdict == verdicts.AGREE


def test_the_worker_answers_unsupported_for_what_a_release_cannot_express(tmp_path):
    """An OpUnsupported in the worker (an op's declared minimum release, a graph break) comes back as
    `unsupported` naming no op (only this case is out of reach), never as an error: a crash finding."""
    import torch

    from fuzzer.arrays import materialize
    from fuzzer.ir import Graph, Node, TensorSpec
    from fuzzer.running import case_folder
    from fuzzer.running.env_worker import Worker

    def breaking_relu(xs, ps, attrs):
        torch._dynamo.graph_break()
        return torch.relu(xs[0])

    worker = Worker()
    worker.backends[("lacks-softmax", False)] = LacksSoftmax()
    worker.backends[("breaks", False)] = get_backend("torch-compile").derive("torch-compile-graph-break", {"relu": breaking_relu})
    for spec, op, reason in (("lacks-softmax", "softmax", "OpUnsupported: op 'softmax' needs torch.softmax"),
                             ("breaks", "relu", "GraphBreak: graph break under fullgraph=True")):
        graph = Graph([TensorSpec("x", (2, 3))], [Node("n0", op, ["x"], {"dim": 1} if op == "softmax" else {})], ["n0"])
        folder = tmp_path / spec
        folder.mkdir()
        case_folder.write_case(materialize(graph, 0), folder)
        answer = worker.run({"backend": spec, "case": str(folder)})
        assert answer.keys() == {"unsupported", "reason"} and answer["unsupported"] is None, answer
        assert reason in answer["reason"], answer


# -- the real thing: an old jax from PyPI -------------------------------------------------------

@pytest.fixture(scope="module")
def old_jax(tmp_path_factory):
    home = tmp_path_factory.mktemp("envs")
    fuzz("env", "create", "old-jax", f"jax=={OLD_JAX}", f"jaxlib=={OLD_JAX}", env_home=home)
    return home


# Before the campaign test below, which removes the environment at its end. Long: a fast test above
# covers the worker's answer; this one is the real old release (CI's 15 minutes).
@pytest.mark.long
def test_what_an_old_release_cannot_express_is_unsupported_never_a_finding(old_jax, monkeypatch):
    from fuzzer.arrays import materialize
    from fuzzer.ir import Graph, Node, TensorSpec

    monkeypatch.setenv("FUZZ_ENV_HOME", str(old_jax))
    backend = get_backend("jax-jit@old-jax")

    def single(op, attrs):
        return materialize(Graph([TensorSpec("x", (2, 3, 4))], [Node("n0", op, ["x"], attrs)], ["n0"]), 0)

    expected = [
        (single("mish", {}), verdicts.UNSUPPORTED),  # jax.nn.mish came in 0.4.27: OpUnsupported in the worker
        # jnp.linalg.vector_norm takes several axes from 0.4.36 on (the op declares it): before,
        # two axes are a matrix norm (a false mismatch) and three raise "Invalid axis values".
        (single("norm", {"dims": [0, 2], "p": 2, "keepdim": False}), verdicts.UNSUPPORTED),
        (single("norm", {"dims": [0, 1, 2], "p": 1, "keepdim": True}), verdicts.UNSUPPORTED),
        (single("norm", {"dims": [1], "p": 2, "keepdim": False}), verdicts.AGREE),  # one axis: judged
    ]
    for case, verdict in expected:
        result = check_case(case, [backend])
        assert [v.verdict for v in result.verdicts] == [verdict] and not result.findings, [v.to_dict() for v in result.verdicts]
    assert backend.unsupported_ops == set()  # each case, not the op: norm over one axis still runs


@pytest.mark.long  # about 2 minutes (a jax 0.4.26 venv, a campaign, bisect): CI keeps the in-process end-to-end tests
def test_cross_version_campaign_finds_shrinks_stores_replays_and_bisects_a_real_jax_bug(old_jax, tmp_path):
    home, db = old_jax, tmp_path / "xv.db"
    listed = json.loads(fuzz("env", "list", "--json", env_home=home).stdout)
    assert [(e["name"], e["versions"]["jax"], e["versions"]["jaxlib"]) for e in listed] == [("old-jax", OLD_JAX, OLD_JAX)]

    # Find: the new release against the old one, both judged against the float64 reference.
    # The small regime only: the further input sets of each compiled graph then stay plain values too,
    # where the new release has no softmax bug of its own (jax#37234 needs large finite rows).
    summary = json.loads(fuzz("run", "--db", db, "--backends", "jax-jit,jax-jit@old-jax", "--ops", "softmax,reshape,permute,relu",
                              "--regimes", "small", "--compiled-inputs", 1, "--max-cases", 30, "--workers", 2, "--seed", 1,
                              "--json", env_home=home,
                              expect=1).stdout)
    assert summary["finding_cases"] > 0 and summary["internal_errors"] == 0
    cases = json.loads(fuzz("list", "--cases", "--db", db, "--json", env_home=home).stdout)
    shrunk = [c for c in cases if c["shrunk_from"] and "softmax" in c["signature"]]
    assert shrunk, cases
    assert all(c["signature"].split(" | ")[1] == "jax-jit:cpu:float32@old-jax" for c in cases)  # never the new release
    assert len({c["signature"] for c in cases}) == 1, cases  # one bug, one bucket, however it was fused
    case_id = shrunk[0]["id"]

    # Stored with both sides' versions.
    shown = json.loads(fuzz("show", case_id, "--db", db, "--json", env_home=home).stdout)
    assert shown["versions"]["environments"]["old-jax"]["jax"] == OLD_JAX
    assert shown["versions"]["jax"] != OLD_JAX
    assert [node["op"] for node in shown["graph"]["nodes"]] == ["softmax"]  # shrunk to the lone softmax

    # Replayed across both: the old release still fails, the new one agrees.
    replayed = fuzz("replay", case_id, "--db", db, "--backends", "jax-jit,jax-jit@old-jax", "--json", env_home=home, expect=1)
    by_backend = {v["backend"]: v["verdict"] for v in json.loads(replayed.stdout)["verdicts"]}
    assert by_backend["jax-jit:cpu:float32"] == "agree"
    assert by_backend["jax-jit:cpu:float32@old-jax"] in ("constant", "mismatch")

    # Its reproducer is written from source (no tracing there) and names the environment to run it in.
    # It runs there and exits 1, and 0 under the fixed release: plain jax, the softmax call as one writes it.
    fuzz("export", case_id, "--db", db, "-o", tmp_path / "repro.py", env_home=home)
    script = (tmp_path / "repro.py").read_text()
    assert f"jax {OLD_JAX}" in script and "jax.nn.softmax(" in script and len(script.splitlines()) < 100
    for python, status in ((home / "venvs" / "old-jax" / "bin" / "python", 1), (sys.executable, 0)):
        ran = subprocess.run([str(python), "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert ran.returncode == status, ran.stdout + ran.stderr

    # Bisected over two real releases: the fix is in 0.4.27.
    result = fuzz("bisect", case_id, "--db", db, "--package", "jax", "--from", OLD_JAX, "--to", "0.4.27", "--find-fix",
                  "--with", "jaxlib=={version}", "--versions", f"{OLD_JAX},0.4.27", "--json", env_home=home)
    answer = json.loads(result.stdout)
    assert (answer["last_bad"], answer["first_good"]) == (OLD_JAX, "0.4.27")
    assert [step["versions"]["jaxlib"] for step in answer["steps"]] == [OLD_JAX, "0.4.27"]
    assert "creating environment" in result.stderr  # progress while it installs

    # Removing an environment that `fuzz env create` made deletes its venv too.
    assert (home / "venvs" / "old-jax" / "bin" / "python").exists()
    fuzz("env", "remove", "old-jax", env_home=home)
    assert not (home / "venvs" / "old-jax").exists()
    names = [e["name"] for e in json.loads(fuzz("env", "list", "--json", env_home=home).stdout)]
    assert sorted(name.rsplit("-", 1)[0] for name in names) == [f"bisect-jax-{OLD_JAX}", "bisect-jax-0.4.27"]


@pytest.mark.parametrize("kind", ["torch-eager", "torch-compile"])
def test_a_program_runs_in_an_environment_as_in_process_every_step_and_written_input(here, kind):
    """Programs reach KIND@ENV (torch 2.15's compiler, from a campaign on this interpreter): a 10-minute
    programs campaign of such backends drew 21,286 programs and ran none. Every step's outputs and the
    written inputs come back, not the graph's outputs alone."""
    from fuzzer.drawing.regimes import BY_NAME

    generator = CaseGenerator(None, 5, [BY_NAME["programs"]])
    local, remote = get_backend(kind), get_backend(f"{kind}@here")
    case = next(case for seed in range(20) if local.supports_graph((case := generator.case(seed)).graph) and case.graph.steps > 1)
    assert remote.supports_graph(case.graph)
    mine, theirs = run_backend(local, case), run_backend(remote, case)
    assert (mine.status, theirs.status) == (OK, OK), theirs.error
    assert len(theirs.outputs) == len(mine.outputs) > len(case.graph.outputs)
    for a, b in zip(mine.outputs, theirs.outputs):
        np.testing.assert_array_equal(a, b)
