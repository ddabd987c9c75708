"""`fuzz run`'s progress line fits the terminal it is redrawn on, and keeps what matters most."""

from fuzzer.campaign import Progress
from fuzzer.progress_line import compiler_counts, progress_line

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


def test_an_80_column_line_keeps_the_time_left_and_the_new_buckets_and_drops_compilers_from_the_end():
    line = progress_line(BUSY, time_limit=7200, last_new_bucket_at=4000.0, width=80)
    assert line == "1h12m, 47m59s left | 17 new buckets, last 5m21s ago | 123456 graphs 28.6/s"
    line = progress_line(BUSY, time_limit=7200, last_new_bucket_at=4000.0, width=120)
    assert line.endswith("28.6/s | structures: compile 418/418/418/418")  # whole entries: compile-cuda's is left out
    assert progress_line(BUSY, time_limit=7200, last_new_bucket_at=4000.0, width=40) == "1h12m, 47m59s left | 17 new buckets"


def test_a_log_line_is_whole_and_names_its_campaign():
    line = progress_line(BUSY, time_limit=None, last_new_bucket_at=None)
    assert line.startswith("[campaign 12] 1h12m | 17 new buckets | 123456 graphs 28.6/s | structures: compile ")
    assert line.endswith(" jit-cuda 418/418/418/418") and "last" not in line


def test_compilers_get_short_names_with_one_count_per_dtype():
    counts = compiler_counts({"torch-compile:cpu:float32": 12, "jax-jit:cpu:float32": 40, "jax-jit:cpu:float64": 38,
                              "jax-eager:cpu:float32": 9, "jax-jit:gpu:float32": 3, "my-layernorm": 2})
    assert counts == {"compile": [12], "jeager": [9], "jit": [40, 38], "jit-gpu": [3], "my-layernorm": [2]}
    assert " ".join(f"{name} {'/'.join(map(str, n))}" for name, n in counts.items()).startswith("compile 12 jeager 9 jit 40/38")
