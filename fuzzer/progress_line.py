"""`fuzz run`'s progress line: what a person watching a campaign wants to know, most important first,
cut to the terminal's width. A line redrawn in place with a carriage return must fit: one wider
than the terminal wraps, and every redraw then leaves a new line behind."""

from __future__ import annotations

SEPARATOR = " | "


def progress_line(progress, time_limit: float | None, last_new_bucket_at: float | None, width: int | None = None) -> str:
    """The line for `progress` (a campaign.Progress). With a `width` it is shorter than that many
    columns (the last column is left free: a terminal wraps as soon as it is written): pieces are
    dropped from the end, so the time and the new buckets stay longest and the compilers go first.
    Without a width (a log, not a screen) it is whole and names its campaign."""
    pieces = [  # (separator before it, text), most important first
        ("", _time(progress.elapsed, time_limit)),
        (SEPARATOR, f"{progress.new_buckets} new bucket{'' if progress.new_buckets == 1 else 's'}"),
    ]
    if last_new_bucket_at is not None:
        pieces.append((", ", f"last {_duration(progress.elapsed - last_new_bucket_at)} ago"))
    pieces.append((SEPARATOR, f"{progress.graphs} graphs {progress.graphs_per_second:.1f}/s"))
    regions = progress.region_coverage()
    if regions["declared"]:
        pieces.append((SEPARATOR, f"regions {regions['covered']}/{regions['declared']}"))
    compilers = compiler_counts(progress.compiled_structures)
    for position, (name, counts) in enumerate(compilers.items()):
        entry = f"{name} {'/'.join(map(str, counts))}"
        pieces.append((SEPARATOR + "structures: ", entry) if position == 0 else (" ", entry))
    if width is None:
        return f"[campaign {progress.campaign_id}] " + "".join(separator + text for separator, text in pieces)
    room = max(width - 1, 1)
    line = pieces[0][1]
    for separator, text in pieces[1:]:
        if len(line) + len(separator) + len(text) > room:
            break
        line += separator + text
    return line[:room]


def compiler_counts(compiled_structures: dict) -> dict[str, list[int]]:
    """Structures compiled per compiler, under short names in their order, one count per dtype in name
    order: {"jax-jit:cpu:float32": 40, "jax-jit:cpu:float64": 38, "torch-compile:cuda:float32": 12}
    -> {"compile-cuda": [12], "jit": [40, 38]}."""
    counts: dict[str, list[int]] = {}
    for name, count in sorted(compiled_structures.items()):
        kind, device = (name.split(":") + ["cpu"])[:2]  # a plugin's backend may be named without ":device:dtype"
        label = short_kind(kind) + ("" if device == "cpu" else f"-{device}")
        counts.setdefault(label, []).append(count)
    return dict(sorted(counts.items()))


def short_kind(kind: str) -> str:
    """torch-compile -> compile, torch-export -> export, jax-jit -> jit, jax-eager -> jeager."""
    if kind.startswith("torch-"):
        return kind.removeprefix("torch-")
    if kind.startswith("jax-"):
        rest = kind.removeprefix("jax-")
        return rest if rest.startswith("j") else "j" + rest
    return kind


def _time(elapsed: float, time_limit: float | None) -> str:
    if time_limit is None:
        return _duration(elapsed)
    return f"{_duration(elapsed)}, {_duration(max(time_limit - elapsed, 0))} left"


def _duration(seconds: float) -> str:
    """45s, 2m05s, 1h02m."""
    seconds = int(max(seconds, 0))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
