"""`fuzz run`'s progress line fits the terminal it is redrawn on, and keeps what matters most."""

import time
from dataclasses import replace
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from fuzzer.cli import main
from fuzzer.running.campaign import Progress, slow_work
from fuzzer.running.progress_line import LEGEND, compiler_counts, progress_line

# A 14-worker cpu,gpu campaign: the widest line there is, many compilers on two devices.
BUSY = Progress(
    campaign_id=12, graphs=123456, elapsed=4321.0, new_buckets=17,
    compiled_structures={f"{kind}:{device}:{dtype}": 418
                         for kind in ("jax-jit", "jax-eager", "torch-compile", "torch-export")
                         for device in ("cpu", "cuda") for dtype in ("float16", "float32", "float64", "bfloat16")},
)


def test_every_line_fits_a_terminal_from_40_to_200_columns_with_its_last_column_free():
    for width in range(40, 201):
        line = progress_line(BUSY, time_limit=7200, last_new_bucket_at=4000.0, width=width)
        assert len(line) < width, (width, line)
        assert "\n" not in line and "\r" not in line


# A default CPU campaign's compilers, 12 minutes into an hour.
DEFAULT = Progress(
    campaign_id=3, graphs=1234, elapsed=725.0, new_buckets=3,
    compiled_structures={"torch-compile:cpu:float32": 12, "jax-eager:cpu:float32": 250, "jax-jit:cpu:float32": 480,
                         "jax-jit:cpu:float64": 470, "jax-jit-const:cpu:float32": 300},
)


def test_an_80_column_line_keeps_the_time_the_new_buckets_and_every_compilers_work():
    line = progress_line(DEFAULT, time_limit=3600, last_new_bucket_at=600.0, width=80)
    assert line == "12m05s/1h00m | 3 new | 1234 graphs | compile 12 eager 250 jit 950 jit-const 300"
    line = progress_line(DEFAULT, time_limit=3600, last_new_bucket_at=600.0, width=100)
    assert line == "12m05s/1h00m | 3 new, 2m05s ago | 1234 graphs 1.7/s | compile 12 eager 250 jit 950 jit-const 300"
    wide = progress_line(DEFAULT, time_limit=3600, last_new_bucket_at=600.0, width=160)
    assert wide.startswith("12m05s, 47m55s left | 3 new buckets, last 2m05s ago | ")
    assert wide.endswith("compiled: compile 12 eager 250 jit 480/470 jit-const 300")
    assert progress_line(BUSY, time_limit=7200, last_new_bucket_at=4000.0, width=80).endswith(" | compiled 13376")


def test_a_worker_long_in_one_step_is_named_with_its_time_before_the_graphs():
    stalled = replace(DEFAULT, graphs=4, slow_work={"doing": "compiling", "backend": "torch-compile:cpu:float32", "seconds": 42.0})
    assert progress_line(stalled, time_limit=3600, last_new_bucket_at=None, width=80) == (
        "12m05s/1h00m | 3 new | compiling torch-compile 42s | 4 graphs | compiled 1512")
    assert "compiling torch-compile:cpu:float32 for 42s" in progress_line(stalled, time_limit=3600, last_new_bucket_at=None)
    assert progress_line(stalled, 3600, None, width=40) == "12m05s, 47m55s left | 3 new buckets"
    judging = replace(stalled, slow_work={"doing": "judging", "backend": None, "seconds": 75.0})
    assert "| judging for 1m15s |" in progress_line(judging, time_limit=3600, last_new_bucket_at=None, width=80)


def test_slow_work_names_the_busy_worker_silent_longest_once_it_passes_the_threshold():
    now = time.monotonic()
    compiling = SimpleNamespace(backend="torch-compile:cpu:float32", backend_compiles=True, last_heartbeat=now - 42)
    judging = SimpleNamespace(backend=None, backend_compiles=False, last_heartbeat=now - 12)
    running = SimpleNamespace(backend="torch-eager:cpu:float32", backend_compiles=False, last_heartbeat=now - 1)
    work = slow_work([running, judging, compiling])
    assert (work["doing"], work["backend"], round(work["seconds"])) == ("compiling", "torch-compile:cpu:float32", 42)
    assert slow_work([running, judging])["doing"] == "judging"
    assert slow_work([running]) == {} and slow_work([]) == {}


def test_the_legend_is_in_run_help_and_explains_each_short_compiler_name():
    result = CliRunner().invoke(main, ["run", "--help"])
    assert result.exit_code == 0 and LEGEND.splitlines()[1] in result.output
    assert "compile: torch-compile" in LEGEND and "eager: jax-eager" in LEGEND and "torch- or jax-" in LEGEND


def test_a_log_line_is_whole_and_names_its_campaign():
    line = progress_line(BUSY, time_limit=None, last_new_bucket_at=None)
    assert line.startswith("[campaign 12] 1h12m | 17 new buckets | 123456 graphs 28.6/s | compiled: compile ")
    assert line.endswith(" jit-cuda 418/418/418/418") and "last" not in line


def test_compilers_get_short_names_with_one_count_per_dtype():
    counts = compiler_counts({"torch-compile:cpu:float32": 12, "jax-jit:cpu:float32": 40, "jax-jit:cpu:float64": 38,
                              "jax-eager:cpu:float32": 9, "jax-jit:gpu:float32": 3, "my-layernorm": 2})
    assert counts == {"compile": [12], "eager": [9], "jit": [40, 38], "jit-gpu": [3], "my-layernorm": [2]}


def test_on_a_terminal_a_first_line_comes_before_the_imports_and_an_error_then_replaces_it(tmp_path):
    """What the framework imports are for is said at once, as a live line that what follows overwrites."""
    import os
    import pty
    import subprocess
    import sys

    import torch

    if torch.cuda.is_available():
        pytest.skip("needs a machine where torch-eager:cuda is unavailable")
    leader, follower = pty.openpty()
    done = subprocess.run([sys.executable, "-c", "import sys; from fuzzer.cli import main; sys.argv[0] = 'fuzz'; main()",
                           "run", "--db", str(tmp_path / "fuzz.db"), "--max-cases", "1", "--workers", "1",
                           "--backends", "torch-eager:cuda"], stderr=follower, stdout=subprocess.PIPE, timeout=300)
    os.close(follower)
    screen = os.read(leader, 65536).decode()
    os.close(leader)
    assert done.returncode == 2
    assert screen.startswith("Starting: importing torch to check 1 backends, then starting 1 workers...\r\x1b[KError: "
                             "Backend 'torch-eager:cuda:float32' is not available here"), screen


def test_a_campaign_says_its_workers_are_starting_while_they_do(tmp_path):
    from fuzzer.corpus import Corpus
    from fuzzer.running.campaign import CampaignOptions, run_campaign

    plugin = tmp_path / "slow_to_load.py"  # each worker loads it: a start of 3 s at least, whatever the machine
    plugin.write_text("import time\n\ntime.sleep(3)\n\n\ndef register(api):\n    pass\n")
    seen = []
    options = CampaignOptions(backends=["torch-eager:cpu:float32"], ops=["relu"], plugins=[str(plugin)], max_cases=1, workers=1)
    run_campaign(Corpus(tmp_path / "c.db"), options, on_progress=lambda p: seen.append(dict(p.slow_work)))
    starting = [work for work in seen if work.get("doing") == "starting workers"]
    assert starting and starting[-1]["seconds"] >= 2 and seen[-1] == {}
    assert progress_line(replace(DEFAULT, slow_work=starting[-1]), 3600, None, width=80).startswith(
        "12m05s/1h00m | 3 new | starting workers for ")
