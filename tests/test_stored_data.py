"""Stored data never runs code, joins a cluster or sizes the work (issue 30): a campaign row's
plugin names are only shown, its Ray address is ignored, its numbers are held to the bounds of
`fuzz run`'s options; `merge` refuses a malformed campaign row; every column of a case, bucket and
member row is checked where it is read, so a tampered one is one sentence in every command; `regress` and `import` never open
a FIFO, a device or a link leading out of the folder; the default memory limit stays within the
shell's hard limit.

Each attack is a real sqlite corpus or folder crafted here, through the real CLI; "nothing ran"
is a marker file the payload would create, "nothing changed" the corpus's full dump.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from fuzzer.cli import run
from fuzzer.corpus import Corpus
from fuzzer.judging.check import Finding
from fuzzer.records import CaseRecord
from fuzzer.running.campaign import Campaign, CampaignOptions, Progress
from fuzzer.running.campaign_config import CHECKPOINT_FIELDS, CONFIG_FIELDS, check_checkpoint, check_config
from test_hostile import (CLEAN_RUN, TORCH, corpus_with, exported, fuzz, fuzz_process, refused, relu_case, rows, unchanged,
                          write_json)

CONFIG = {"backends": [TORCH], "ops": ["relu"], "inputs_per_graph": 1, "workers": 1, "max_cases": 4}


def interrupted_campaign(db: Path, config, checkpoint=None) -> int:
    """A campaign row as a crash or a hostile colleague left it: interrupted, resumable."""
    with Corpus(db) as corpus:
        campaign = corpus.start_campaign(config, 0, {})
        if checkpoint is not None:
            corpus.checkpoint(campaign, checkpoint, cases_run=0, findings=0)
        corpus.finish_campaign(campaign, "interrupted")
    return campaign


# -- the bounds are every option's ------------------------------------------------------------------

def test_every_campaign_option_and_progress_field_has_a_bound_its_default_meets():
    assert set(CONFIG_FIELDS) == {f.name for f in fields(CampaignOptions)}
    types = {flag: param.type for param in run.params for flag in param.opts}
    for field in (f for f in CONFIG_FIELDS.values() if f.flag):  # `fuzz run` accepts what a resume accepts
        number = getattr(field.kind, "kind", field.kind)
        assert (types[field.flag].min, types[field.flag].max) == (number.low, number.high), field.flag
    live = {"campaign_id", "slow_work"}  # slow_work: what a worker is doing now, for the progress line; never resumed
    assert set(CHECKPOINT_FIELDS) == {f.name for f in fields(Progress)} - live
    options = asdict(CampaignOptions(backends=[TORCH], plugins=["p.py"], ray="auto", max_cases=5, time_limit=60.0))
    assert check_config(options) == options
    state = {**Progress(1).to_dict(), "first_graph_s": 0.5, "done_above": [7], "op_counts": {"relu": 3}}
    assert check_checkpoint(state) == {k: v for k, v in state.items() if k in CHECKPOINT_FIELDS}


# -- plugins: named, never loaded ----------------------------------------------------------------------

@pytest.fixture
def marker(tmp_path) -> Path:
    path = tmp_path / "IMPORTED"
    yield path
    assert not path.exists(), "a plugin file named in a corpus was imported"


@pytest.fixture(params=["planted", "stdlib this.py"])
def stored_plugin(request, tmp_path, marker) -> str:
    """A plugin path a corpus names: a file that touches the marker when imported, or the stdlib's
    `this` (which prints the Zen of Python on import: stdout must stay empty)."""
    if request.param == "stdlib this.py":
        return str(Path(os.__file__).parent / "this.py")
    path = tmp_path / "elsewhere" / "evil_plugin.py"
    path.parent.mkdir()
    path.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n\ndef register(api):\n    pass\n")
    return str(path)


def test_a_stored_plugin_is_never_imported_by_resume_show_merge_or_campaigns(tmp_path, stored_plugin):
    node = tmp_path / "node.db"
    campaign = interrupted_campaign(node, {**CONFIG, "plugins": [stored_plugin]})
    backend = "evil-backend"  # what the plugin would register
    with Corpus(node) as corpus:
        case = corpus.add_case(CaseRecord(relu_case(), campaign_id=campaign, verdict="crash", backends=[backend], findings=[
            Finding(backend, "crash", "relu", f"crash | {backend} | relu", detail="planted")]))
    with unchanged(node):
        refused(fuzz("run", "--db", node, "--resume", campaign), f"Campaign {campaign} cannot be resumed without its plugin",
                repr(stored_plugin), "--plugin PATH")
        refused(fuzz("show", "--db", node, case, "--rerun"), f"Backend '{backend}' is not registered",
                f"--plugin {stored_plugin}")
    team = tmp_path / "team.db"
    assert fuzz("merge", "--db", team, node).exit_code == 0  # a campaign row is data: merged as it is
    listed = json.loads(fuzz("campaigns", "--db", team, "--json").stdout)
    assert listed[0]["resume"] == f"fuzz run --db {team} --resume 1" and listed[0]["plugins"] == [stored_plugin]
    text = fuzz("campaigns", "--db", team).stdout
    assert f"fuzz run --db {team} --resume 1, with --plugin PATH for each of its plugins {stored_plugin!r}" in text
    with unchanged(team):
        refused(fuzz("run", "--db", team, "--resume", 1), "cannot be resumed without its plugin", "--plugin PATH")


def test_resume_takes_plugins_and_ray_from_the_command_line_only(tmp_path):
    """Passed again (matched by file name, from any folder), the plugin is loaded; the stored Ray address is not used."""
    db = tmp_path / "fuzz.db"
    stored = "/nowhere/on/this/machine/kernel_plugin.py"
    campaign = interrupted_campaign(db, {**CONFIG, "plugins": [stored], "ray": "10.255.255.1:6379"})
    passed = tmp_path / "kernel_plugin.py"
    passed.write_text("def register(api):\n    pass\n")
    with Corpus(db) as corpus:
        for ray in (None, "local"):
            resumed = Campaign.resume(corpus, campaign, plugins=[str(passed)], ray=ray)
            assert (resumed.options.plugins, resumed.options.ray) == ([str(passed)], ray)
            corpus.finish_campaign(campaign, "interrupted")


def test_resume_with_ray_on_the_command_line_starts_ray_there(tmp_path, monkeypatch):
    """`fuzz run --resume 1 --ray local` used to run local workers at the stored address's word."""
    from fuzzer.errors import UserError
    import fuzzer.running.ray_workers

    def start_ray(address):
        raise UserError(f"start_ray({address!r}) called")

    monkeypatch.setattr(fuzzer.running.ray_workers, "start_ray", start_ray)
    db = tmp_path / "fuzz.db"
    campaign = interrupted_campaign(db, {**CONFIG, "ray": "10.255.255.1:6379"})
    result = fuzz("run", "--db", db, "--resume", campaign, "--ray", "local")
    assert result.exit_code == 2 and "Error: start_ray('local') called" in result.stderr, result.stderr
    assert rows(db, "SELECT status FROM campaigns") == [("interrupted",)]


# -- stored numbers are bounded ---------------------------------------------------------------------------

@pytest.mark.parametrize("config, checkpoint, needles", [
    ({**CONFIG, "inputs_per_graph": 10**6}, None, ["inputs_per_graph = 1000000", "from 1 to 100", "--inputs-per-graph"]),
    ({**CONFIG, "max_nodes": "8"}, None, ["max_nodes = '8'", "--max-nodes"]),
    ({**CONFIG, "shrink_time": 1e9}, None, ["shrink_time = 1000000000.0", "--shrink-time"]),
    ({**CONFIG, "timeout": 0}, None, ["timeout = 0", "above 0 and at most 86400"]),
    ({**CONFIG, "workers": 10**6}, None, ["workers = 1000000", "--workers"]),
    ({**CONFIG, "memory_limit_mb": True}, None, ["memory_limit_mb = True", "--memory-limit"]),
    ({**CONFIG, "reruns": 10**6}, None, ["reruns = 1000000", "from 0 to 10"]),
    ({**CONFIG, "backends": "torch-eager"}, None, ["backends = 'torch-eager'", "list"]),
    ({**CONFIG, "seed": 2**64}, None, ["seed = 18446744073709551616"]),
    ([TORCH], None, ["its config is ['torch-eager:cpu:float32'], not a JSON object"]),
    ({"seed": 1}, None, ["its config names no backends"]),
    (CONFIG, {"next_index": "5"}, ["its checkpoint has next_index = '5'"]),
    (CONFIG, {"done_above": {"7": 1}}, ["its checkpoint has done_above = {'7': 1}"]),
    (CONFIG, {"elapsed": -1}, ["its checkpoint has elapsed = -1"]),
], ids=["inputs_per_graph", "max_nodes-text", "shrink_time", "timeout-0", "workers", "memory_limit-bool", "reruns",
        "backends-text", "seed-2**64", "config-list", "no-backends", "next_index-text", "done_above-object", "elapsed-negative"])
def test_a_stored_value_out_of_bounds_refuses_the_resume_and_changes_nothing(tmp_path, config, checkpoint, needles):
    db = tmp_path / "fuzz.db"
    campaign = interrupted_campaign(db, config, checkpoint)
    with unchanged(db):
        refused(fuzz("run", "--db", db, "--resume", campaign), f"Campaign {campaign} cannot be resumed", *needles,
                "start a new campaign")


# -- merge refuses a malformed campaign row -----------------------------------------------------------------

@pytest.mark.parametrize("config, checkpoint, needle", [
    ([TORCH], None, "its config is ['torch-eager:cpu:float32'], not a JSON object"),
    (CONFIG, ["not", "an", "object"], "its checkpoint is ['not', 'an', 'object'], not a JSON object"),
    (CONFIG, {"elapsed": "soon"}, "its checkpoint has elapsed = 'soon'"),
    ({**CONFIG, "inputs_per_graph": 10**6}, None, "its config has inputs_per_graph = 1000000"),
], ids=["config-list", "checkpoint-list", "elapsed-text", "inputs-per-graph"])
def test_merge_refuses_a_malformed_campaign_row_before_writing(tmp_path, config, checkpoint, needle):
    source = tmp_path / "node.db"
    campaign = interrupted_campaign(source, config, checkpoint)
    with Corpus(source) as corpus:
        corpus.add_case(CaseRecord(relu_case(), campaign_id=campaign, verdict="agree", backends=[TORCH]))
    team = tmp_path / "team.db"
    interrupted_campaign(team, CONFIG)
    with unchanged(team):
        refused(fuzz("merge", "--db", team, source), f"Nothing merged: campaign {campaign} of '{source}' is refused", needle)
    fresh = tmp_path / "fresh.db"
    refused(fuzz("merge", "--db", fresh, source), "Nothing merged")
    assert not fresh.exists()
    assert fuzz("campaigns", "--db", team).exit_code == 0


# -- a tampered case, bucket or member row is one sentence in every command that reads it -----------------------

CASE_COMMANDS = [["show", 1], ["show", 1, "--rerun"], ["list", "--cases"], ["replay", 1],
                 *(["export", 1, "--format", fmt] for fmt in ("minimal", "script", "pytest", "json", "issue"))]
BUCKET_COMMANDS = [["show", 1], ["list"], ["list", "--json"], ["export", 1, "--format", "json"]]
A_FINDING = {"signature": "s", "verdict": "mismatch", "backend": TORCH, "culprit": "relu"}


J = json.dumps  # a JSON column's text


@pytest.mark.parametrize("table, column, stored", [
    ("cases", "findings", "junk"), ("cases", "findings", J({})), ("cases", "findings", J([1])), ("cases", "findings", J(None)),
    ("cases", "findings", J([{"signature": "s"}])), ("cases", "findings", J([{**A_FINDING, "max_error": "big"}])),
    ("cases", "findings", J([{**A_FINDING, "detail": 3}])),
    ("cases", "verdicts", "junk"), ("cases", "verdicts", J([{}])), ("cases", "verdicts", J([{"backend": TORCH}])),
    ("cases", "verdicts", J([{"backend": TORCH, "verdict": "agree", "allowed": [1]}])),
    ("cases", "seed", "x"), ("cases", "seed", -1), ("cases", "seed", 1.5),
    ("cases", "backends", "junk"), ("cases", "backends", J([1])), ("cases", "backends", J({})),
    ("cases", "campaign_id", "x"), ("cases", "shrunk_from", 0), ("cases", "shrink_log", "junk"),
    ("cases", "node_count", -1), ("cases", "element_count", "x"),
    ("buckets", "count", "x"), ("buckets", "count", -1), ("buckets", "campaigns", "junk"), ("buckets", "campaigns", J({"1": "x"})),
    ("buckets", "status", "bogus"), ("buckets", "representative", "x"), ("buckets", "note", b"\x00"),
    ("members", "count", 1.5), ("members", "campaigns", J([1])),
])
def test_a_tampered_column_is_one_sentence_in_every_command_that_reads_it(tmp_path, table, column, stored):
    db = tmp_path / "fuzz.db"
    corpus_with(db, relu_case(1))
    connection = sqlite3.connect(db)
    connection.execute(f"UPDATE {table} SET {column} = ?", [stored])
    connection.commit()
    connection.close()
    what = {"cases": "Case 1 in ", "buckets": "Bucket 'mismatch | ", "members": "Member 'mismatch | "}[table]
    junk_json = stored == "junk" and column in ("findings", "verdicts", "backends", "shrink_log", "campaigns")
    with unchanged(db):
        for command in CASE_COMMANDS if table == "cases" else BUCKET_COMMANDS:
            if command == ["list", "--cases"] and column in ("verdicts", "shrink_log"):
                assert fuzz(*command, "--db", db).exit_code == 0  # columns the case list does not read
                continue
            refused(fuzz(*command, "--db", db), what, "is damaged", f"JSON in its {column} column" if junk_json else
                    f"has {column} = ", "restore the file from a copy")


# -- files that are not regular files are never opened --------------------------------------------------------

def test_regress_skips_a_fifo_a_device_and_links_out_of_the_folder_without_reading_them(tmp_path):
    folder = tmp_path / "regression"
    folder.mkdir()
    outside = write_json(tmp_path / "outside.json", {**exported(relu_case()), "expect": "agree"})
    (folder / "zero.json").symlink_to("/dev/zero")
    (folder / "outside.json").symlink_to(outside)
    (folder / "loop.json").symlink_to(folder / "loop.json")
    os.mkfifo(folder / "pipe.json")
    (folder / "folder.json").mkdir()
    # In its own process, bounded: reading /dev/zero would fail the address-space limit, a FIFO the timeout.
    done = fuzz_process("regress", folder, limit_bytes=2 * 2**30, timeout=120)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.splitlines() == [
        f"Warning: skipped '{folder}/folder.json': a folder, not a regular file.",
        f"Warning: skipped '{folder}/loop.json': a link that leads to no file.",
        f"Warning: skipped '{folder}/outside.json': a link leading out of the folder (to '{outside.resolve()}').",
        f"Warning: skipped '{folder}/pipe.json': a FIFO, not a regular file.",
        f"Warning: skipped '{folder}/zero.json': a link leading out of the folder (to '/dev/zero').",
        f"Error: No regression cases (*.json) in '{folder}'; export some with `fuzz export ID --format json --expect agree`.",
    ]


def test_import_refuses_a_device_or_a_fifo_before_reading(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for path, kind in (("/dev/zero", "a character device"), (fifo, "a FIFO")):
        done = fuzz_process("import", "--db", tmp_path / "fuzz.db", path, limit_bytes=2 * 2**30, timeout=120)
        refused(done, f"Case file '{path}' is {kind}, not a regular file")
    assert not (tmp_path / "fuzz.db").exists()


# -- the memory limit within the shell's hard limit --------------------------------------------------------

@pytest.mark.long  # one real campaign (~10 s here); CI's 15 minutes
def test_the_default_memory_limit_stays_within_a_hard_ulimit(tmp_path):
    from fuzzer.backends import get_backend
    from fuzzer.cli import default_memory_limit_mb

    hard_mb = 8192  # ample for the CLI and a torch-eager worker
    if default_memory_limit_mb(1, [get_backend(TORCH)]) <= hard_mb:
        pytest.skip("this machine's default memory limit is within 8 GB already")
    db = tmp_path / "fuzz.db"
    limit = hard_mb * 2**20
    done = fuzz_process("run", "--db", db, "--max-cases", 1, *CLEAN_RUN, limit_bytes=limit)
    assert done.returncode == 0, done.stderr  # every worker used to fail to start: exit 3
    assert json.loads(rows(db, "SELECT config FROM campaigns")[0][0])["memory_limit_mb"] == hard_mb
    explicit = fuzz_process("run", "--db", db, "--max-cases", 1, *CLEAN_RUN, "--memory-limit", hard_mb + 1, limit_bytes=limit)
    refused(explicit, f"--memory-limit {hard_mb + 1} is above this shell's hard address-space limit of {hard_mb} MB",
            "ulimit -Hv")
