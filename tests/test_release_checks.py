"""`fuzz replay ID --on ENV,...`: is a stored bug still in this release, and which releases have it?

Everything is real. tests/data/corpus-schema6.db (written by the release before schema 7: the
schema-5 corpus of test_buckets.py opened, then reports/cross-version/case-softmax-axis0.json
imported) holds two real bugs: torch's scaled_dot_product_attention nan on a causal row with no
key (case 4, still in this torch) and jax 0.4.26's jit softmax over a leading axis (case 6,
fixed since 0.4.27). The environments are this interpreter registered with `fuzz env add`
(`cur`), and `bare`, a venv that has numpy and no framework. A short canary campaign stores a
finding of a plugin backend, which runs here only. Each outcome is recorded on the bucket,
shown, exported in the issue report, merged, regrouped, and a schema-6 file migrates."""

from __future__ import annotations

import json
import platform
import shutil
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import jax
import numpy
import pytest
import torch

from fuzzer.corpus import SCHEMA_VERSION, Corpus
from fuzzer.drawing.generate import generate_case
from fuzzer.judging.check import Finding
from fuzzer.records import CaseRecord
from fuzzer.reproducers.issue_report import LOCAL_PATH, local_paths, without_local_paths
from fuzzer.triaging.triage import rebucket
from test_envs import fuzz, one_error_line

SCHEMA6 = Path(__file__).resolve().parent / "data" / "corpus-schema6.db"
SDPA, SOFTMAX = 4, 6  # case ids there
SDPA_BUCKET = "nan-inf | torch-eager:cpu | scaled_dot_product_attention"
SOFTMAX_BUCKET = "constant | jax-jit:cpu | softmax@fused"
SOFTMAX_FILE = Path(__file__).resolve().parent.parent / "reports" / "cross-version" / "case-softmax-axis0.json"
PYTHON = platform.python_version()


def numpy_only_python(folder: Path) -> Path:
    """An interpreter with numpy and no framework: a bare venv of this Python whose site-packages reach
    numpy alone (a .pth naming a folder that links to this environment's numpy)."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    reach = folder / "numpy-only"
    reach.mkdir()
    installed = Path(numpy.__file__).parent
    (reach / "numpy").symlink_to(installed)
    if installed.with_name("numpy.libs").exists():  # the wheel's bundled libraries
        (reach / "numpy.libs").symlink_to(installed.with_name("numpy.libs"))
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True,
                          text=True, check=True).stdout.strip()
    Path(site, "numpy-only.pth").write_text(f"{reach}\n")
    return python


# The tests that register environments (env_home: `fuzz env add` probes torch and jax in a new process, twice) and
# replay on them (checked) are under -m long: 90 s of CI's 15 minutes. CI keeps the environments' protocol
# (tests/test_envs.py, a backend run in an environment bit for bit) and this module's tests of stored checks.
@pytest.fixture(scope="module")
def env_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("envs")
    fuzz("env", "add", "cur", sys.executable, env_home=home)
    fuzz("env", "add", "bare", numpy_only_python(tmp_path_factory.mktemp("bare")), env_home=home)
    return home


@pytest.fixture(scope="module")
def checked(env_home, tmp_path_factory):
    """(a copy of the schema-6 corpus whose two cases were checked here, in `cur` and in `bare`, their replies)."""
    db = tmp_path_factory.mktemp("checked") / "fuzz.db"
    shutil.copy(SCHEMA6, db)
    replies = {}
    for case_id, exit_code in ((SDPA, 1), (SOFTMAX, 0)):
        result = fuzz("replay", case_id, "--db", db, "--on", "here,cur,bare", "--json", env_home=env_home, expect=exit_code)
        replies[case_id] = json.loads(result.stdout)
    return db, replies


def copy_of(db: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(db, folder / "fuzz.db")
    return folder / "fuzz.db"


def stored_checks(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT bucket, environment, versions, case_id, outcome, detail, checked_at FROM release_checks "
                            "ORDER BY bucket, environment").fetchall()


# -- outcomes ----------------------------------------------------------------------------------------

@pytest.mark.long  # CI's 15 minutes: see the note above env_home
def test_a_bug_still_here_is_present_one_fixed_since_is_fixed_and_a_release_without_jax_cannot_run_it(checked):
    _, replies = checked
    outcomes = {case_id: {c["environment"]: c["outcome"] for c in reply["checks"]} for case_id, reply in replies.items()}
    assert outcomes == {SDPA: {"here": "present", "cur": "present", "bare": "cannot-run"},
                        SOFTMAX: {"here": "fixed", "cur": "fixed", "bare": "cannot-run"}}
    assert (replies[SDPA]["reproduces"], replies[SOFTMAX]["reproduces"]) == (True, False)
    assert (replies[SDPA]["bucket"], replies[SOFTMAX]["bucket"]) == (SDPA_BUCKET, SOFTMAX_BUCKET)
    sdpa = {c["environment"]: c for c in replies[SDPA]["checks"]}
    # The stored finding comes back on the backend as it ran there: KIND@ENV, or KIND here.
    assert sdpa["cur"]["detail"] == "nan-inf | torch-eager:cpu:float32@cur | scaled_dot_product_attention"
    assert sdpa["here"]["detail"] == "nan-inf | torch-eager:cpu:float32 | scaled_dot_product_attention"
    assert sdpa["cur"]["versions"] == {"python": PYTHON, "numpy": numpy.__version__, "torch": torch.__version__,
                                       "jax": jax.__version__, "jaxlib": jax.__version__}
    softmax_bare = next(c for c in replies[SOFTMAX]["checks"] if c["environment"] == "bare")
    assert softmax_bare["versions"] == {"python": PYTHON, "numpy": numpy.__version__}
    assert "jax-jit:cpu:float32@bare" in softmax_bare["detail"] and "jax cannot be imported" in softmax_bare["detail"]


@pytest.mark.long  # CI's 15 minutes: see the note above env_home
def test_the_text_names_each_environment_its_versions_and_outcome(checked, env_home, tmp_path):
    db = copy_of(checked[0], tmp_path)
    text = fuzz("replay", SOFTMAX, "--db", db, "--on", "cur,bare", env_home=env_home).stdout
    lines = text.strip().splitlines()
    assert lines[0] == f"Case {SOFTMAX}, bucket '{SOFTMAX_BUCKET}', checked on releases (recorded on the bucket):"
    assert lines[1].split()[:2] == ["cur", "fixed"] and f"torch {torch.__version__} / jax {jax.__version__} on Python {PYTHON}" in lines[1]
    assert lines[2].split()[:2] == ["bare", "cannot-run"] and f"Python {PYTHON} without torch or jax" in lines[2]


# long (out of CI's 15 minutes): present / fixed / cannot-run are in CI through test_a_bug_still_here_is_present_one_fixed_since_is_fixed....
@pytest.mark.long
def test_a_canary_finding_is_present_here_and_cannot_run_in_another_environment(env_home, tmp_path):
    """A plugin's backend lives in this process: in another environment it cannot run, which is said, not an error."""
    db = tmp_path / "canary.db"
    fuzz("run", "--db", db, "--plugin", "layout-layernorm", "--backends", "torch-eager,canary-layout-layernorm",
         "--max-cases", 12, "--workers", 1, "--shrink-time", 5, env_home=env_home, expect=1)
    rows = json.loads(fuzz("list", "--cases", "--db", db, "--verdict", "mismatch", "--json", env_home=env_home).stdout)
    smallest = min((row for row in rows if row["shrunk_from"]), key=lambda row: row["node_count"])
    reply = json.loads(fuzz("replay", smallest["id"], "--db", db, "--on", "here,cur", "--json", env_home=env_home, expect=1).stdout)
    here, cur = reply["checks"]
    assert (here["outcome"], here["detail"]) == ("present", smallest["signature"])
    assert cur["outcome"] == "cannot-run" and "only the backends shipped with fuzzer can" in cur["detail"]


@pytest.mark.long  # CI's 15 minutes: see the note above env_home
def test_an_unregistered_environment_or_both_options_is_one_sentence_and_records_nothing(env_home, tmp_path):
    db = copy_of(SCHEMA6, tmp_path)
    one_error_line(fuzz("replay", SDPA, "--db", db, "--on", "cur,nope", env_home=env_home, expect=None),
                   "No environment named 'nope'", "`fuzz env list`")
    one_error_line(fuzz("replay", SDPA, "--db", db, "--on", "cur", "--backends", "jax-jit", env_home=env_home, expect=None),
                   "--backends or --on")
    assert stored_checks(db) == []


# -- recorded, shown, exported --------------------------------------------------------------------------

@pytest.mark.long  # CI's 15 minutes: see the note above env_home
def test_each_outcome_is_recorded_on_the_bucket_and_a_recheck_replaces_it(checked, env_home, tmp_path):
    db = copy_of(checked[0], tmp_path)
    rows = stored_checks(db)
    assert [(bucket, env, case_id, outcome) for bucket, env, _, case_id, outcome, _, _ in rows] == [
        (SOFTMAX_BUCKET, "bare", SOFTMAX, "cannot-run"), (SOFTMAX_BUCKET, "cur", SOFTMAX, "fixed"),
        (SOFTMAX_BUCKET, "here", SOFTMAX, "fixed"), (SDPA_BUCKET, "bare", SDPA, "cannot-run"),
        (SDPA_BUCKET, "cur", SDPA, "present"), (SDPA_BUCKET, "here", SDPA, "present")]
    for row in rows:
        assert json.loads(row[2])["python"] == PYTHON
        assert datetime.fromisoformat(row[6]).utcoffset() == timezone.utc.utcoffset(None), "checked_at is UTC"
    before = {row[:2]: row for row in rows}
    fuzz("replay", SDPA, "--db", db, "--on", "cur", env_home=env_home, expect=1)
    after = {row[:2]: row for row in stored_checks(db)}
    assert after.keys() == before.keys(), "the same environment and versions again: replaced, no second row"
    assert after[(SDPA_BUCKET, "cur")][6] >= before[(SDPA_BUCKET, "cur")][6]


@pytest.mark.long  # CI's 15 minutes: see the note above env_home
def test_show_and_list_show_the_checks(checked, env_home):
    db, _ = checked
    text = fuzz("show", SDPA, "--db", db, env_home=env_home).stdout
    lines = text.splitlines()
    start = lines.index("Checked on releases:")
    shown = [line.split(", checked ")[0].strip() for line in lines[start + 1:start + 4]]
    assert sorted(shown) == sorted([f"present in torch {torch.__version__} / jax {jax.__version__} (env cur)",
                                    f"present in torch {torch.__version__} / jax {jax.__version__} (env here)",
                                    f"cannot run in Python {PYTHON} without torch or jax (env bare)"])
    assert lines[start + 1].endswith(f" UTC on case {SDPA}")
    fixed = fuzz("show", SOFTMAX, "--db", db, env_home=env_home).stdout
    assert f"  not reproduced in torch {torch.__version__} / jax {jax.__version__} (env cur), checked " in fixed
    shown_json = json.loads(fuzz("show", SDPA, "--db", db, "--json", env_home=env_home).stdout)
    assert {c["environment"]: c["outcome"] for c in shown_json["release_checks"]} == {"here": "present", "cur": "present",
                                                                                     "bare": "cannot-run"}
    listed = {b["signature"]: b for b in json.loads(fuzz("list", "--db", db, "--all", "--json", env_home=env_home).stdout)}
    assert [c["outcome"] for c in listed[SOFTMAX_BUCKET]["release_checks"]].count("fixed") == 2
    assert listed[SDPA_BUCKET]["release_checks"][0]["versions"]["python"] == PYTHON


@pytest.mark.long  # CI's 15 minutes: see the note above env_home
def test_the_issue_report_says_where_it_was_checked_and_names_no_path_of_this_machine(checked, env_home, tmp_path,
                                                                                       monkeypatch):
    home = tmp_path / "home"
    db = copy_of(checked[0], home / "corpora")
    monkeypatch.setenv("HOME", str(home))
    # --force: the registry calls this sdpa nan a convention (no bug to report); the lines checked here are the same
    text = fuzz("export", SDPA, "--db", db, "--format", "issue", "--force", env_home=env_home).stdout
    checked_on = next(line for line in text.splitlines() if line.startswith("Checked on: "))
    assert checked_on.startswith(f"Checked on: present in torch {torch.__version__} / jax {jax.__version__} on Python {PYTHON} (")
    assert f"; cannot run in Python {PYTHON} without torch or jax (" in checked_on
    assert checked_on.count("present in") == 1, "two environments of the same releases are one release"
    bare_python = json.loads(fuzz("env", "list", "--json", env_home=env_home).stdout)[0]["python"]
    for local in (str(db), str(home), sys.executable, bare_python, str(env_home)):
        assert local not in text, local


def test_local_paths_in_any_text_become_a_placeholder(tmp_path, monkeypatch):
    monkeypatch.setenv("FUZZ_ENV_HOME", str(tmp_path / "envs"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    paths = local_paths(tmp_path / "data" / "fuzz.db")
    text = (f"ImportError: cannot import name 'mish' from 'jax.nn' ({tmp_path}/envs/venvs/old/lib/jax/nn/__init__.py); "
            f"corpus {tmp_path}/data/fuzz.db, cache {tmp_path}/home/.cache/x, see https://github.com{tmp_path}/home, "
            f"{tmp_path}/homer")
    assert without_local_paths(text, paths) == (
        f"ImportError: cannot import name 'mish' from 'jax.nn' ({LOCAL_PATH}); corpus {LOCAL_PATH}, cache {LOCAL_PATH}, "
        f"see https://github.com{tmp_path}/home, {tmp_path}/homer")


# -- carried: merge, rebucket, migration ----------------------------------------------------------------
@pytest.mark.long  # CI's 15 minutes: merge's other carried fields stay in CI (test_merge)
def test_merge_carries_the_checks_once_and_the_newer_check_wins(checked, env_home, tmp_path):
    source = copy_of(checked[0], tmp_path / "node")
    team = tmp_path / "team.db"
    fuzz("import", "--db", team, SOFTMAX_FILE, env_home=env_home)  # case 1 there: the ids differ from the source's
    fuzz("merge", "--db", team, source, env_home=env_home)
    with Corpus(team) as merged, Corpus(source) as node:
        for bucket in (SDPA_BUCKET, SOFTMAX_BUCKET):
            theirs, ours = node.bucket(bucket)["release_checks"], merged.bucket(bucket)["release_checks"]
            assert [{**c, "case_id": None} for c in ours] == [{**c, "case_id": None} for c in theirs]
            for mine, original in zip(ours, theirs):  # the case replayed, by its id here
                assert merged.get_case(mine["case_id"]).content_hash == node.get_case(original["case_id"]).content_hash
        assert merged.bucket(SOFTMAX_BUCKET)["release_checks"][0]["case_id"] == 1
    before = stored_checks(team)
    fuzz("merge", "--db", team, source, env_home=env_home)
    assert stored_checks(team) == before, "merging again changes nothing"
    fuzz("replay", SOFTMAX, "--db", source, "--on", "cur", env_home=env_home)
    newer = next(row for row in stored_checks(source) if row[:2] == (SOFTMAX_BUCKET, "cur"))
    fuzz("merge", "--db", team, source, env_home=env_home)
    rows = stored_checks(team)
    assert len(rows) == len(before) and next(row for row in rows if row[:2] == (SOFTMAX_BUCKET, "cur"))[6] == newer[6]


@pytest.mark.long  # CI's 15 minutes: see the note above env_home
def test_a_merged_check_of_a_foreign_form_is_refused_and_nothing_merged(checked, env_home, tmp_path):
    source = copy_of(checked[0], tmp_path / "node")
    with sqlite3.connect(source) as conn:
        conn.execute("UPDATE release_checks SET outcome = 'gone' WHERE environment = 'cur'")
    team = tmp_path / "team.db"
    one_error_line(fuzz("merge", "--db", team, source, env_home=env_home, expect=None), "release check", "malformed")
    with Corpus(team) as merged:
        assert merged.case_count() == 0


def test_a_regrouped_bucket_keeps_its_checks(tmp_path):
    """An older release bucketed an all-zeros output apart from a mismatch; `fuzz rebucket` regroups it,
    and the checks recorded on the old bucket go with it."""
    with Corpus(tmp_path / "old.db") as corpus:
        finding = Finding.from_dict({"signature": "all-zeros | torch-eager:cpu:float32 | relu", "verdict": "all-zeros",
                                     "backend": "torch-eager:cpu:float32", "culprit": "relu", "max_error": 1.0, "allowed": 1e-4})
        case_id = corpus.add_case(CaseRecord(generate_case(1), campaign_id=None, verdict="all-zeros",
                                             backends=["torch-eager:cpu:float32"], findings=[finding]))
        corpus.record_release_checks("all-zeros | torch-eager:cpu | relu", case_id, [
            {"environment": "latest", "versions": {"python": "3.12.3", "torch": "2.15.0"}, "outcome": "present", "detail": ""}])
        assert rebucket(corpus)["changes"][0]["signature"] == "mismatch | torch-eager:cpu | relu"
        [bucket] = corpus.buckets()
        assert bucket["signature"] == "mismatch | torch-eager:cpu | relu"
        assert [(c["environment"], c["outcome"], c["case_id"]) for c in bucket["release_checks"]] == [("latest", "present", case_id)]
        assert stored_checks(corpus.path) == [("mismatch | torch-eager:cpu | relu", "latest", '{"python": "3.12.3", "torch": "2.15.0"}',
                                               case_id, "present", "", bucket["release_checks"][0]["checked_at"])]


def test_a_schema_6_corpus_opens_as_the_current_schema_keeping_everything(tmp_path):
    db = copy_of(SCHEMA6, tmp_path)
    tables = ("meta WHERE key != 'schema_version'", "campaigns", "cases", "case_arrays", "members")
    bucket_columns = ("signature, verdict, backend, culprit, first_seen, last_seen, count, status, note, representative, "
                      "known_bug, first_case, latest_case, campaigns")  # schema 8 adds an id

    def contents() -> dict:
        with sqlite3.connect(db) as conn:
            found = {table: sorted(conn.execute(f"SELECT * FROM {table}").fetchall()) for table in tables}
            return {**found, "buckets": sorted(conn.execute(f"SELECT {bucket_columns} FROM buckets").fetchall())}

    before = contents()
    assert sum(map(len, before.values())) > 30 and len(before["cases"]) == 6
    with Corpus(db) as corpus:
        assert corpus.schema_version() == SCHEMA_VERSION == 9
        assert corpus.bucket(SDPA_BUCKET)["release_checks"] == []
        corpus.record_release_checks(SDPA_BUCKET, SDPA, [{"environment": "latest", "outcome": "present", "detail": "",
                                                          "versions": {"python": "3.12.3", "torch": "2.15.0"}}])
    assert contents() == before
    with Corpus(db) as corpus:
        assert corpus.migrate() == SCHEMA_VERSION and len(corpus.bucket(SDPA_BUCKET)["release_checks"]) == 1
