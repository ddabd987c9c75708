"""Hostile and broken data runs nothing, allocates nothing big and changes nothing; the exit-code
table of the README holds row by row; import, merge, resume and shrink are idempotent by content.

Every attack is a real file through the real `fuzz` CLI. "Nothing ran" is proved by a sentinel
file the payload would create, "nothing changed" by the corpus's full dump (integrity check,
schema, rows and blobs) before and after.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import json
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fuzzer.arrays import materialize, to_npy_bytes
from fuzzer.cli import main
from fuzzer.corpus import Corpus
from fuzzer.drawing.generate import generate_case
from fuzzer.errors import UserError
from fuzzer.ir import Graph, Node, TensorSpec
from fuzzer.judging.check import Finding
from fuzzer.ops import registry
from fuzzer.records import CaseRecord
from test_cli_errors import dump

FUZZ = str(Path(sys.executable).with_name("fuzz"))
TORCH = "torch-eager:cpu:float32"
CLEAN_RUN = ["--workers", "1", "--backends", TORCH, "--ops", "relu,add,linear", "--inputs-per-graph", "1"]
# The tiled-matmul canary gets every linear with fewer than 8 outputs wrong: findings in most graphs.
CANARY_RUN = ["--workers", "1", "--plugin", "tiled-matmul-zeros", "--backends", "canary-tiled-matmul-zeros",
              "--ops", "linear,relu,add", "--max-nodes", "3", "--inputs-per-graph", "1", "--shrink-time", "20"]


# -- helpers ----------------------------------------------------------------------------------

# What the CLI sets in os.environ for the workers it starts; restored after each in-process call.
CLI_VARIABLES = ("FUZZ_MAX_TENSOR_ELEMENTS", "FUZZ_MAX_CASE_ELEMENTS", "FUZZ_COMMAND_LINE_ENV_PATHS")


def fuzz(*args):
    return CliRunner(env={name: None for name in CLI_VARIABLES}).invoke(main, [str(a) for a in args])


def fuzz_process(*args, cwd=None, limit_bytes=None, timeout=300):
    """`fuzz` in its own process; `limit_bytes` caps its address space (an allocation above it fails)."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    return subprocess.run([FUZZ, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          preexec_fn=cap if limit_bytes else None)


def one_sentence(stderr: str, *needles: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in stderr, stderr
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


def refused(result, *needles: str) -> str:
    """Exit 2 with one `Error: ...` sentence and nothing on stdout (CliRunner result or CompletedProcess)."""
    code = getattr(result, "exit_code", getattr(result, "returncode", None))
    assert code == 2, (code, result.stdout, result.stderr)
    assert result.stdout == ""
    return one_sentence(result.stderr, *needles)


@contextlib.contextmanager
def unchanged(db: Path):
    before = dump(db)
    yield
    assert dump(db) == before, "a refused command changed the corpus"


def rows(db: Path, sql: str) -> list:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def files_under(folder: Path) -> set[Path]:
    """Every file below `folder`, but sqlite's own side files (which come and go with connections)."""
    return {path for path in folder.rglob("*") if not path.name.endswith(("-wal", "-shm"))}


def finding(backend: str, signature: str) -> dict:
    return Finding(backend, "mismatch", "relu", signature, max_error=1.0, allowed=1e-5, detail="planted").to_dict()


def relu_case(seed: int = 0):
    graph = Graph((TensorSpec("x0", (2, 3)),), (Node("n0", "relu", ("x0",)),), ("n0",))
    return materialize(graph, seed)


def corpus_with(db: Path, case, backend: str = TORCH, signature: str = f"mismatch | {TORCH} | relu") -> int:
    with Corpus(db) as corpus:
        return corpus.add_case(CaseRecord(case, verdict="mismatch", backends=[backend],
                                          findings=[Finding.from_dict(finding(backend, signature))]))


def exported(case, backends=(TORCH,)) -> dict:
    return {
        "format": "fuzzer-case", "version": 1, "graph": case.graph.to_dict(), "seed": case.seed,
        "arrays": {name: base64.b64encode(to_npy_bytes(value)).decode() for name, value in case.arrays.items()},
        "verdict": "agree", "findings": [], "backends": list(backends),
    }


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


@pytest.fixture
def db(tmp_path) -> Path:
    """A corpus holding one relu case (with a finding on torch eager) and one imported case."""
    path = tmp_path / "good.db"
    corpus_with(path, relu_case(1))
    assert fuzz("import", "--db", path, write_json(tmp_path / "one.json", exported(relu_case(2)))).exit_code == 0
    return path


@pytest.fixture
def sentinel(tmp_path) -> Path:
    path = tmp_path / "SENTINEL"
    yield path
    assert not path.exists(), "code from the data ran"


@pytest.fixture
def evil_program(tmp_path, sentinel) -> Path:
    """An executable that, if ever started, creates the sentinel."""
    program = tmp_path / "evil" / "python"
    program.parent.mkdir()
    program.write_text(f"#!/bin/sh\ntouch '{sentinel}'\n")
    program.chmod(0o755)
    return program


# -- code never runs from data -------------------------------------------------------------------

def test_a_signature_holding_code_stays_text_in_the_reproducer(tmp_path, sentinel):
    db = tmp_path / "fuzz.db"
    payload = f'"""\nimport pathlib; pathlib.Path({str(sentinel)!r}).touch()\n"""\\'
    case_id = corpus_with(db, relu_case(), signature=payload)
    # The full harness keeps the signature in its docstring; the minimal script leaves it out.
    for fmt in ("script", "minimal"):
        script = tmp_path / f"repro_{fmt}.py"
        assert fuzz("export", "--db", db, case_id, "--format", fmt, "-o", script).exit_code == 0
        module = ast.parse(script.read_text())
        if fmt == "script":
            assert payload in ast.get_docstring(module), "the signature is not kept verbatim as text"
        done = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=300)
        assert done.returncode in (0, 1), done.stderr  # ran as a reproducer: 0 (torch agrees), no syntax error
        assert not sentinel.exists(), f"the {fmt} script ran the signature's code"


def test_a_nul_in_a_finding_s_text_leaves_every_script_valid_python(tmp_path):
    """Python refuses a source file holding a NUL; the title (a signature) and the detail are escaped."""
    db = tmp_path / "fuzz.db"
    with Corpus(db) as corpus:
        signature = f"mismatch | {TORCH} | relu\x00\x1b[2J"
        planted = Finding(TORCH, "mismatch", "relu", signature, max_error=1.0, allowed=1e-5, detail="nul \x00 here")
        case_id = corpus.add_case(CaseRecord(relu_case(), verdict="mismatch", backends=[TORCH], findings=[planted]))
    for fmt in ("minimal", "script", "pytest"):
        script = tmp_path / f"repro_{fmt}.py"
        assert fuzz("export", "--db", db, case_id, "--format", fmt, "-o", script).exit_code == 0
        source = script.read_text()
        compile(source, str(script), "exec")
        if fmt == "script":
            assert signature in ast.get_docstring(ast.parse(source)), "the title is kept, escaped"


@pytest.mark.parametrize("where", ["stored backends", "finding backend"])
def test_a_backend_path_from_a_case_never_starts_a_program(tmp_path, evil_program, where):
    backend = f"{TORCH}@{evil_program}"
    db = tmp_path / "fuzz.db"
    case = relu_case()
    data = exported(case, backends=[backend])
    if where == "finding backend":
        data["findings"] = [finding(backend, f"mismatch | {backend} | relu")]
    assert fuzz("import", "--db", db, write_json(tmp_path / "case.json", data)).exit_code == 0  # data is just data
    with unchanged(db):
        refused(fuzz("replay", "--db", db, 1), str(evil_program), "fuzz env add")
        if where == "finding backend":
            refused(fuzz("export", "--db", db, 1), str(evil_program), "fuzz env add")


def test_a_backend_path_in_a_regression_case_never_starts_a_program(tmp_path, evil_program):
    folder = tmp_path / "regression"
    folder.mkdir()
    write_json(folder / "case.json", {**exported(relu_case(), backends=[TORCH, f"jax-jit@{evil_program}"]),
                                      "expect": "agree"})
    refused(fuzz("regress", folder), str(evil_program), "fuzz env add")


def test_a_backend_path_in_a_resumed_campaign_never_starts_a_program(tmp_path, evil_program):
    db = tmp_path / "fuzz.db"
    with Corpus(db) as corpus:
        campaign = corpus.start_campaign({"backends": [TORCH, f"jax-jit@{evil_program}"], "seed": 0}, 0, {})
        corpus.finish_campaign(campaign, "interrupted")
    refused(fuzz("run", "--db", db, "--resume", campaign), str(evil_program))


@pytest.mark.parametrize("name", ["/tmp/escape", "../../escape", "x; import os", "a.b", "", "x" * 65, "é", "__builtins__"])
@pytest.mark.parametrize("role", ["input", "node"])
def test_names_must_be_identifiers(tmp_path, db, name, role):
    data = exported(relu_case())
    if role == "input":
        data["graph"]["inputs"][0]["name"] = name
        data["graph"]["nodes"][0]["inputs"] = [name]
        data["arrays"] = {name: data["arrays"]["x0"]}
    else:
        data["graph"]["nodes"][0]["name"] = name
        data["graph"]["outputs"] = [name]
    before = files_under(tmp_path)
    with unchanged(db):
        refused(fuzz("import", "--db", db, write_json(tmp_path / "bad.json", data)), "identifiers")
    assert files_under(tmp_path) == before | {tmp_path / "bad.json"}


@pytest.mark.parametrize("key", ["x=1); import os; (y", "lambda", "a b"])
def test_attribute_names_must_be_identifiers(tmp_path, db, key):
    """Reproducers write attributes as keywords (F.silu(x, inplace=False)): a key is never code."""
    data = exported(relu_case())
    data["graph"]["nodes"][0]["attrs"] = {key: 1}
    with unchanged(db):
        refused(fuzz("import", "--db", db, write_json(tmp_path / "bad.json", data)), "an identifier")


@pytest.mark.parametrize("op_name, attr", [(op.name, attr) for op in registry().values() for attr in op.choices])
@pytest.mark.parametrize("value", ["bogus", True])
def test_an_attribute_value_outside_the_op_s_declared_choices_is_refused_at_load(tmp_path, db, op_name, attr, value):
    """Not replayed as a crash of the framework, which is what refusing it in a worker looked like."""
    case = generate_case(0, [op_name], max_nodes=1)
    (index,) = [i for i, node in enumerate(case.graph.nodes) if node.op == op_name]
    assert case.graph.nodes[index].attrs[attr] in registry()[op_name].choices[attr], "the draws keep to the declaration"
    data = exported(case)
    data["graph"]["nodes"][index]["attrs"][attr] = value
    with unchanged(db):
        refused(fuzz("import", "--db", db, write_json(tmp_path / "bad.json", data)), f"has {attr} = {str(value)!r}",
                "use one of")


def test_a_path_name_planted_in_a_corpus_writes_no_file_anywhere(tmp_path):
    """The env-backend replay used to write arrays/<name>.npy: an absolute name escaped its folder."""
    db = tmp_path / "fuzz.db"
    case_id = corpus_with(db, relu_case())
    target = tmp_path / "outside"
    conn = sqlite3.connect(db)
    graph = json.loads(conn.execute("SELECT graph FROM cases WHERE id = ?", [case_id]).fetchone()[0])
    graph["inputs"][0]["name"] = str(target)
    graph["nodes"][0]["inputs"] = [str(target)]
    conn.execute("UPDATE cases SET graph = ? WHERE id = ?", [json.dumps(graph), case_id])
    conn.execute("UPDATE case_arrays SET name = ? WHERE case_id = ? AND name = 'x0'", [str(target), case_id])
    conn.commit()
    conn.close()
    with unchanged(db):
        for command in (["replay", case_id], ["show", case_id],
                        ["export", case_id, "--format", "json"]):
            refused(fuzz(*command, "--db", db), "identifiers")
    assert not list(tmp_path.glob("outside*"))


# -- resource bounds before allocation -------------------------------------------------------------

def conv_case_file(tmp_path: Path, padding: int) -> Path:
    """A generated conv2d case whose padding is then set to `padding` (the shape rules still hold)."""
    for seed in range(200):
        case = generate_case(seed, ["conv2d"], max_nodes=1)
        nodes = [n for n in case.graph.nodes if n.op == "conv2d" and n.attrs["padding"] != "same"]
        if nodes:
            break
    data = exported(case)
    for node in data["graph"]["nodes"]:
        if node["op"] == "conv2d":
            node["attrs"]["padding"] = [padding] * len(node["attrs"]["kernel_size"])
    return write_json(tmp_path / "conv-bomb.json", data)


def test_a_huge_padding_is_refused_from_the_shape_rules_before_allocating(tmp_path, db):
    bomb = conv_case_file(tmp_path, 20000)
    with unchanged(db):
        # 1.5 GB of address space is plenty for the CLI and far below the 12 GB the case asks for.
        done = fuzz_process("import", "--db", db, bomb, limit_bytes=1536 * 2**20)
        refused(done, "conv2d", "elements", "above the limit", "--max-tensor-elements")


def test_element_limits_are_overridable(tmp_path, db):
    case = tmp_path / "case.json"
    write_json(case, exported(relu_case()))
    with unchanged(db):
        refused(fuzz("--max-tensor-elements", 5, "import", "--db", db, case), "input 'x0'", "6 elements", "limit of 5")
        refused(fuzz("--max-case-elements", 11, "import", "--db", db, case), "12 elements", "limit of 11")
    assert fuzz("--max-tensor-elements", 6, "import", "--db", db, case).exit_code == 0


def test_a_npy_header_claiming_1e12_elements_is_refused_before_reading(tmp_path, db):
    data = exported(relu_case())
    header_bomb = to_npy_bytes(np.zeros((2, 3))).replace(b"(2, 3)", b"(1000000, 1000000)")
    data["arrays"]["x0"] = base64.b64encode(header_bomb).decode()
    with unchanged(db):
        done = fuzz_process("import", "--db", db, write_json(tmp_path / "npy-bomb.json", data), limit_bytes=1536 * 2**20)
        refused(done, "array 'x0'", "1,000,000,000,000 elements")


def test_a_npy_header_that_disagrees_with_the_graph_is_refused(tmp_path, db):
    data = exported(relu_case())
    data["arrays"]["x0"] = base64.b64encode(to_npy_bytes(np.zeros((3, 2)))).decode()
    with unchanged(db):
        refused(fuzz("import", "--db", db, write_json(tmp_path / "shape.json", data)), "shape [3, 2]", "[2, 3]")


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deeply_nested_json_is_refused(tmp_path, db, depth):
    data = exported(relu_case())
    data["graph"]["nodes"][0]["attrs"] = {"deep": "@@"}
    text = json.dumps(data).replace('"@@"', "[" * depth + "]" * depth)
    with unchanged(db):
        refused(fuzz("import", "--db", db, write_json(tmp_path / "deep.json", text)), "nests deeper than 64")


def test_default_memory_limit_is_a_share_of_the_machine(tmp_path):
    from fuzzer.backends import get_backend
    from fuzzer.cli import default_memory_limit_mb
    from fuzzer.running.workers import address_space_floor_mb

    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    cpu, floor = [get_backend(TORCH)], address_space_floor_mb()
    assert floor >= 4096 + 512 * os.cpu_count()  # the malloc arenas of a many-core machine's threads
    assert default_memory_limit_mb(1, cpu) == max(floor, int(total_mb * 0.8))
    assert default_memory_limit_mb(1000, cpu) == floor
    assert default_memory_limit_mb(2, cpu) <= max(floor, total_mb // 2)


# -- exit codes: one row of the README's table each ---------------------------------------------------

def test_exit_0_a_clean_campaign(tmp_path):
    done = fuzz_process("run", "--db", tmp_path / "c.db", "--max-cases", 3, "--seed", 1, *CLEAN_RUN)
    assert done.returncode == 0, done.stderr
    assert "Campaign 1 finished" in done.stdout


def test_exit_1_a_campaign_that_stored_a_finding(tmp_path):
    # No shrinking: the exit code is the test (CANARY_RUN's later --shrink-time wins)
    done = fuzz_process("run", "--db", tmp_path / "c.db", "--max-cases", 6, "--json", *CANARY_RUN, "--shrink-time", 0)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["finding_cases"] >= 1
    # --fail-on-finding is a no-op alias now
    again = fuzz_process("run", "--db", tmp_path / "d.db", "--max-cases", 6, "--fail-on-finding", *CANARY_RUN, "--shrink-time", 0)
    assert again.returncode == 1


@pytest.mark.parametrize("command", [
    pytest.param(["run", "--bogus-option"], id="usage"),
    pytest.param(["show", "999"], id="unknown-id"),
    pytest.param(["report", "-o", "{tmp}/good.db/inside-a-file"], id="output-under-a-file"),
])
def test_exit_2_bad_input_and_refused_paths(tmp_path, db, command):
    command = [part.replace("{tmp}", str(tmp_path)) for part in command]
    with unchanged(db):
        result = fuzz(*command, "--db", db)
        if command[1] == "--bogus-option":
            assert result.exit_code == 2 and "No such option" in result.output
        else:
            refused(result)


@pytest.mark.parametrize("command", [["triage", "1", "--status", "confirmed"], ["import", "{case}"]])
def test_exit_2_a_read_only_corpus(tmp_path, db, command, read_only):
    case = write_json(tmp_path / "new.json", exported(relu_case(9)))
    command = [part.replace("{case}", str(case)) for part in command]
    with unchanged(db), read_only(db):  # in a process of its own: sqlite shares open files within one
        refused(fuzz_process(*command, "--db", db), str(db), "read-only")


def test_exit_2_a_corpus_in_a_read_only_folder(tmp_path, read_only):
    folder = tmp_path / "locked"
    folder.mkdir()
    case = write_json(tmp_path / "new.json", exported(relu_case(9)))
    with read_only(folder):
        refused(fuzz_process("import", "--db", folder / "fuzz.db", case), "locked")
    assert not list(folder.iterdir())


def test_exit_3_an_unexpected_exception_is_a_bug_to_report(tmp_path):
    plugin = tmp_path / "broken_backend.py"
    plugin.write_text(
        "from fuzzer.backends.torch_eager import BACKENDS\n\n"
        "class Broken(BACKENDS[0]):\n"
        "    kind = 'broken'\n"
        "    def unavailable_reason(self):\n"
        "        raise RuntimeError('an exception nobody expected')\n\n"
        "def register(api):\n"
        "    api.add_backend(Broken)\n"
    )
    done = fuzz_process("backends", "--plugin", plugin)
    assert done.returncode == 3, (done.stdout, done.stderr)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("Internal error (a bug in fuzzer)") and "report it" in last
    assert "RuntimeError: an exception nobody expected" in done.stderr


def wait_for_campaign(db: Path, proc: subprocess.Popen, ready, what: str, seconds: float = 120) -> dict:
    """Poll the corpus read-only until ready(campaign row, case count) holds."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(sqlite3.OperationalError):
            if db.exists():
                conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
                conn.row_factory = sqlite3.Row
                try:
                    campaign = conn.execute("SELECT * FROM campaigns ORDER BY id DESC LIMIT 1").fetchone()
                    cases = conn.execute("SELECT count(*) FROM cases").fetchone()[0]
                finally:
                    conn.close()
                if campaign is not None and ready(dict(campaign), cases):
                    return dict(campaign)
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; `fuzz run` exit code {proc.poll()}")


def _as_from_a_terminal() -> None:
    """Ctrl-C reaches a command started from a terminal. A pytest-xdist worker ignores SIGINT, and a
    child inherits an ignored signal, for which Python installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_run(args: list, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([FUZZ, "run", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            preexec_fn=_as_from_a_terminal)


# Ctrl-C with -m long (CI's 15 minutes): SIGTERM is turned into the same KeyboardInterrupt, so CI's
# SIGTERM run goes through Ctrl-C's checkpoint and summary too.
@pytest.mark.parametrize("signum", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.long)], ids=["SIGTERM", "Ctrl-C"])
def test_exit_130_an_interrupted_campaign_prints_its_summary_and_is_resumable(tmp_path, signum):
    db = tmp_path / "fuzz.db"
    proc = start_run(["--db", db, "--max-cases", 100000, *CLEAN_RUN], tmp_path)
    try:
        wait_for_campaign(db, proc, lambda campaign, cases: campaign["cases_run"] >= 1, "a checkpoint")
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Campaign 1 interrupted" in out
    assert out.rstrip().endswith(f"Resume it with: fuzz run --db {db} --resume 1")
    assert rows(db, "SELECT status, lease_pid FROM campaigns") == [("interrupted", None)]
    listed = json.loads(fuzz("campaigns", "--db", db, "--json").output)
    assert listed[0]["status"] == "interrupted" and listed[0]["resume"] == f"fuzz run --db {db} --resume 1"


# -- idempotence by content ------------------------------------------------------------------------

def test_importing_the_same_file_twice_stores_it_once(tmp_path, db):
    case = write_json(tmp_path / "new.json", {**exported(relu_case(7)), "verdict": "mismatch",
                                               "findings": [finding(TORCH, "mismatch | x | relu")]})
    first = json.loads(fuzz("import", "--db", db, case, "--json").output)
    assert len(first["imported"]) == 1 and first["already_here"] == []
    with unchanged(db):
        second = fuzz("import", "--db", db, case, case, "--json")
        assert second.exit_code == 0
        assert json.loads(second.output) == {"imported": [], "already_here": first["imported"] * 2, "known_bugs": []}
    assert rows(db, "SELECT count FROM buckets WHERE signature = 'mismatch | x | relu'") == [(1,)]


def campaign_corpus(path: Path) -> Path:
    with Corpus(path) as corpus:
        campaign = corpus.start_campaign({"backends": [TORCH]}, 3, {"device": "cpu"})
        first = corpus.add_case(CaseRecord(relu_case(1), campaign_id=campaign, verdict="mismatch", backends=[TORCH],
                                           findings=[Finding.from_dict(finding(TORCH, "sig"))]))
        corpus.add_case(CaseRecord(relu_case(2), campaign_id=campaign, verdict="mismatch", backends=[TORCH],
                                   findings=[Finding.from_dict(finding(TORCH, "sig"))], shrunk_from=first,
                                   shrink_log={"final_nodes": 1}))
        corpus.finish_campaign(campaign)
        corpus.triage(first, "reported", "upstream")
    return path


def test_list_json_gives_every_row_and_the_text_view_its_first_50(tmp_path):
    # A script reading `fuzz list --json` took 50 of 62 buckets for all of them (GPU campaign of 2026-11-28).
    db = tmp_path / "fuzz.db"
    with Corpus(db) as corpus:
        for seed in range(53):
            corpus.add_case(CaseRecord(relu_case(seed), verdict="mismatch", backends=[TORCH],
                                       findings=[Finding.from_dict(finding(TORCH, f"mismatch | {TORCH} | relu {seed}"))]))
    listed = fuzz("list", "--db", db, "--json")
    assert len(json.loads(listed.stdout)) == 53 and "showing" not in listed.stderr
    shown = fuzz("list", "--db", db)
    assert len(shown.stdout.splitlines()) == 1 + 50 and "showing 50 of 53 buckets" in shown.stderr
    assert len(json.loads(fuzz("list", "--db", db, "--json", "--limit", "7").stdout)) == 7


def test_merging_a_corpus_into_itself_or_a_renamed_copy_changes_nothing(tmp_path):
    db = campaign_corpus(tmp_path / "team.db")
    copy = tmp_path / "renamed-copy.db"
    shutil.copy(db, copy)
    with unchanged(db):
        for other in (db, copy, copy):
            result = fuzz("merge", "--db", db, other, "--json")
            assert result.exit_code == 0, result.output
            assert json.loads(result.output)[str(other)] == {
                "campaigns_added": 0, "cases_added": 0, "cases_already_here": 2, "buckets_triaged": 0}


def test_merging_twice_into_a_third_corpus_adds_once(tmp_path):
    node = campaign_corpus(tmp_path / "node.db")
    team = tmp_path / "team.db"
    assert fuzz("merge", "--db", team, node).exit_code == 0
    with unchanged(team):
        assert fuzz("merge", "--db", team, node).exit_code == 0
    assert rows(team, "SELECT count(*) FROM campaigns") == [(1,)]
    assert rows(team, "SELECT uuid FROM campaigns") == rows(node, "SELECT uuid FROM campaigns")


def test_a_merge_refused_for_one_bad_case_adds_nothing(tmp_path):
    good = campaign_corpus(tmp_path / "good.db")
    bad = campaign_corpus(tmp_path / "bad.db")
    with Corpus(bad) as corpus:
        corpus.add_case(CaseRecord(relu_case(5), verdict="agree", backends=[TORCH]))
    conn = sqlite3.connect(bad)  # the last case's graph now asks for a 12 GB tensor
    conn.execute("UPDATE cases SET graph = replace(graph, '[2,3]', '[200000,300000]') WHERE id = 3")
    conn.commit()
    conn.close()
    team = campaign_corpus(tmp_path / "team.db")
    with Corpus(team) as corpus:
        corpus.add_case(CaseRecord(relu_case(6), verdict="agree", backends=[TORCH]))
    with unchanged(team):
        refused(fuzz("merge", "--db", team, good, bad), "Nothing merged: case 3 of", "bad.db", "above the limit")


def test_an_unregistered_backend_name_is_refused_on_import(tmp_path, db):
    cases = {"torch-eagr:cpu:float32": exported(relu_case(3), backends=[TORCH, "torch-eagr:cpu:float32"]),
             "torch-eager:tpu:float32": exported(relu_case(3), backends=[TORCH, "torch-eager:tpu:float32"]),
             "my-plugin-backend": {**exported(relu_case(3)), "findings": [finding("my-plugin-backend", "sig")]},
             "canary-no-such-canary": {**exported(relu_case(3)), "findings": [finding("canary-no-such-canary", "sig")]}}
    with unchanged(db):
        for backend, data in cases.items():
            refused(fuzz("import", "--db", db, write_json(tmp_path / "case.json", data)),
                    f"The case file names backend '{backend}', which is not registered here; run `fuzz backends`")
    canary = exported(relu_case(3), backends=["canary-tiled-matmul-zeros", "jax-jit:cpu:float64@jax-0.4.30"])
    assert fuzz("import", "--db", db, write_json(tmp_path / "canary.json", canary)).exit_code == 0


def test_a_key_given_twice_is_refused_in_a_case_file_and_a_graph(tmp_path, db):
    text = json.dumps(exported(relu_case(3)))
    with unchanged(db):
        refused(fuzz("import", "--db", db, write_json(tmp_path / "case.json", text.replace('"verdict": "agree"',
                                                                                         '"verdict": "agree", "verdict": "crash"'))),
                "case.json' is ambiguous: an object gives the key 'verdict' twice")
    with pytest.raises(UserError, match="Ambiguous graph JSON: an object gives the key 'op' twice"):
        Graph.from_json('{"inputs": [], "nodes": [{"name": "n0", "op": "relu", "op": "sin", "inputs": []}], "outputs": []}')


def test_an_sql_trigger_stored_in_a_corpus_is_refused_before_it_can_run(tmp_path, db):
    """Issue 51: a trigger planted in the file rewrote every bucket's triage status at each write."""
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("CREATE TRIGGER wontfix_all AFTER UPDATE ON buckets BEGIN UPDATE buckets SET status = 'wontfix'; END")
    with unchanged(db):
        for command in (("triage", 1, "--status", "reported", "--db", db), ("list", "--db", db), ("merge", "--db", tmp_path / "team.db", db)):
            refused(fuzz(*command), f"The corpus '{db}' holds the SQL trigger 'wontfix_all', which the fuzzer never writes")
    assert not (tmp_path / "team.db").exists()


@pytest.fixture(scope="module")
def canary_db(tmp_path_factory) -> Path:
    """A corpus from a short canary campaign: findings, shrunk and not."""
    db = tmp_path_factory.mktemp("canary") / "fuzz.db"
    done = fuzz_process("run", "--db", db, "--max-cases", 6, "--seed", 2, *CANARY_RUN)
    assert done.returncode == 1, done.stderr
    return db


@pytest.mark.long  # CI's 15 minutes: a second shrink of a canary finding
def test_shrinking_twice_stores_one_shrunk_case(canary_db, tmp_path):
    db = tmp_path / "fuzz.db"
    shutil.copy(canary_db, db)
    original = rows(db, "SELECT id FROM cases WHERE shrunk_from IS NULL AND signature IS NOT NULL ORDER BY node_count DESC")[0][0]
    first = fuzz_process("shrink", "--db", db, original, "--shrink-time", 20, "--plugin", "tiled-matmul-zeros", "--json")
    assert first.returncode == 0, first.stderr
    with unchanged(db):
        second = fuzz_process("shrink", "--db", db, original, "--shrink-time", 20, "--plugin", "tiled-matmul-zeros", "--json")
        assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["id"] == json.loads(first.stdout)["id"]


# long (out of CI's 15 minutes): a live lease refusing a resume is in CI (test_corpus.py::test_a_live_lease_refuses_resume_and_a_stale_one_is_taken_over).
@pytest.mark.long
def test_a_second_resume_is_refused_while_the_first_runs(tmp_path):
    db = tmp_path / "fuzz.db"
    first = start_run(["--db", db, "--max-cases", 100000, *CLEAN_RUN], tmp_path)
    try:
        wait_for_campaign(db, first, lambda campaign, cases: campaign["cases_run"] >= 1, "a checkpoint")
        second = fuzz_process("run", "--db", db, "--resume", 1)
        refused(second, "Campaign 1 is running in process", str(first.pid))
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert first.returncode == 130
    assert rows(db, "SELECT status, lease_pid FROM campaigns") == [("interrupted", None)]


def test_campaigns_lists_every_campaign_with_its_resume_command(tmp_path):
    db = tmp_path / "fuzz.db"
    with Corpus(db) as corpus:
        done = corpus.start_campaign({"backends": [TORCH]}, 1, {})
        corpus.checkpoint(done, {"elapsed": 12.5}, cases_run=40, findings=2)
        corpus.finish_campaign(done)
        corpus.finish_campaign(corpus.start_campaign({"backends": [TORCH]}, 2, {}), "interrupted")
    listed = json.loads(fuzz("campaigns", "--db", db, "--json").output)
    assert [(c["id"], c["status"], c["graphs"], c["findings"], c["seconds"]) for c in listed] == [
        (1, "finished", 40, 2, 12.5), (2, "interrupted", 0, 0, None)]
    assert listed[0]["resume"] is None and listed[1]["resume"] == f"fuzz run --db {db} --resume 2"
    assert len({c["uuid"] for c in listed}) == 2
    text = fuzz("campaigns", "--db", db).output
    assert f"fuzz run --db {db} --resume 2" in text
    refused(fuzz("run", "--db", db, "--resume", 9), "No campaign with id 9", "fuzz campaigns")


# -- kill -9 at random moments, then --resume ----------------------------------------------------------

def content(db: Path) -> tuple[dict, list]:
    """(bucket counts, the content of every unshrunk case), and no case stored twice."""
    assert rows(db, "SELECT case_key FROM cases GROUP BY case_key HAVING count(*) > 1") == []
    assert rows(db, "SELECT count(*) FROM cases WHERE case_key IS NULL") == [(0,)]
    buckets = dict(rows(db, "SELECT signature, count FROM buckets"))
    originals = sorted(rows(db, "SELECT content_hash, verdict, signature FROM cases WHERE shrunk_from IS NULL"))
    return buckets, originals


@pytest.mark.long  # CI keeps test_isolation's kill -9 and resume; this one kills five times
def test_kill_9_at_five_random_moments_then_resume_equals_an_uninterrupted_campaign(tmp_path):
    args = ["--max-cases", 24, "--seed", 5, *CANARY_RUN]
    baseline = tmp_path / "baseline.db"
    uninterrupted = start_run(["--db", baseline, *args], tmp_path)  # alongside, to save time
    db = tmp_path / "killed.db"
    rng = random.Random(16)
    kills = 0
    while True:
        resume = ["--resume", 1] if db.exists() and rows(db, "SELECT count(*) FROM campaigns") == [(1,)] else []
        proc = start_run(["--db", db, *args, *resume], tmp_path)
        if kills == 5:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 1, err
            break
        stored = rows(db, "SELECT count(*) FROM cases")[0][0] if resume else 0
        target = stored + rng.randint(1, 4)  # a moment among the next few stores (with a random delay)
        try:
            wait_for_campaign(db, proc, lambda campaign, cases: cases >= target, f"{target} stored cases")
            time.sleep(rng.uniform(0, 0.5))
        except AssertionError:
            pass  # the campaign ended first: kill whatever is left
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        kills += 1
    uninterrupted.communicate(timeout=300)
    assert uninterrupted.returncode == 1
    assert rows(db, "SELECT count(*), status FROM campaigns") == [(1, "finished")]
    assert content(db) == content(baseline)


@pytest.mark.slow
def test_selftest_keeps_canary_findings_out_of_every_corpus(tmp_path):
    """Without --db, selftest writes a temporary corpus only: neither $FUZZ_DB nor corpus/fuzz.db appear."""
    done = subprocess.run([FUZZ, "selftest", "--max-cases", "1", "--json"], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "FUZZ_DB": str(tmp_path / "team.db")}, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    assert {r["canary"] for r in json.loads(done.stdout)} >= {"tiled-matmul-zeros", "layout-layernorm"}
    assert list(tmp_path.iterdir()) == []
