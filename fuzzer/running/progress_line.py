"""`fuzz run`'s progress line: what a person watching a campaign wants to know, most important first,
cut to the terminal's width. A line redrawn in place with a carriage return must fit: one wider
than the terminal wraps, and every redraw then leaves a new line behind."""

from __future__ import annotations

from fuzzer.backend_names import BackendName

SEPARATOR = " | "

# What the line says, for `fuzz run --help` (\b keeps click from rewrapping it).
LEGEND = """\b
The progress line, live on a terminal and every 30 s in a log; its pieces are
shortened, then left out, to fit the terminal:
  12m05s, 47m55s left (or 12m05s/1h00m): time so far, and left before --time
  3 new buckets, last 2m05s ago (or 3 new, 2m05s ago): buckets new to the
      corpus, and the time since the last of them
  compiling torch-compile for 42s: the longest step a worker is in, once it
      passes 10 s (compiling: a compiler's run, its compile mostly; running:
      another backend's; judging: the float64 reference and the oracle;
      starting workers: their imports of torch and jax)
  1234 graphs 8.1/s: graphs checked, and per second
  compiled: compile 12 jit 40/38 (or their sums, or compiled 52 in all): graph
      structures each compiler compiled, one count per dtype; named without
      torch- or jax- (compile: torch-compile, eager: jax-eager)
  regions 300/1100 pairs 2900/3300: region keys covered (see `fuzz regimes`), and
      pairs of keys of one node (the pairs left out where the line has no room)"""


def progress_line(progress, time_limit: float | None, last_new_bucket_at: float | None, width: int | None = None) -> str:
    """The line for `progress` (a campaign.Progress). Each piece has forms, longest first. Without a
    `width` (a log, not a screen) every piece is whole and the line names its campaign. With one, the
    line is shorter than `width` columns (the last is left free: a terminal wraps as soon as it is
    written): every piece starts in its shortest form and the least important are left out until the
    line fits (time, new buckets, a slow worker's step, compilers, graphs: the last goes first); then,
    round by round, each piece is lengthened by one form while the line fits, in the order that keeps
    an 80-column line's compilers one by one: the slow step, compilers, buckets, graphs, time. The
    region count comes last, where room is left."""
    pieces = {"time": _time(progress.elapsed, time_limit), "buckets": _buckets(progress, last_new_bucket_at)}
    if progress.slow_work:
        pieces["slow"] = _slow_work(progress.slow_work)
    pieces["graphs"] = [f"{progress.graphs} graphs {progress.graphs_per_second:.1f}/s", f"{progress.graphs} graphs"]
    if progress.compiled_structures:
        pieces["compilers"] = _compilers(progress.compiled_structures)
    regions, pairs = progress.region_coverage(), progress.pair_coverage()
    if regions["declared"]:
        keys = f"regions {regions['covered']}/{regions['declared']}"
        pieces["regions"] = [f"{keys} pairs {pairs['covered']}/{pairs['declared']}", keys] if pairs["declared"] else [keys]
    if width is None:
        return f"[campaign {progress.campaign_id}] " + SEPARATOR.join(forms[0] for forms in pieces.values())
    room = max(width - 1, 1)
    chosen = {name: len(forms) - 1 for name, forms in pieces.items() if name != "regions"}  # piece -> its form's index

    def line() -> str:  # the pieces in their order above
        return SEPARATOR.join(forms[chosen[name]] for name, forms in pieces.items() if name in chosen)

    for name in ("graphs", "compilers", "slow", "buckets"):
        if len(line()) > room:
            chosen.pop(name, None)
    lengthened = True
    while lengthened:
        lengthened = False
        for name in [name for name in ("slow", "compilers", "buckets", "graphs", "time") if chosen.get(name, 0) > 0]:
            chosen[name] -= 1
            if len(line()) <= room:
                lengthened = True
            else:
                chosen[name] += 1
    for form in range(len(pieces.get("regions", ()))):  # the longest form that fits, or none
        chosen["regions"] = form
        if len(line()) <= room:
            break
    else:
        chosen.pop("regions", None)
    return line()[:room]


def _time(elapsed: float, time_limit: float | None) -> list[str]:
    if time_limit is None:
        return [_duration(elapsed)]
    return [f"{_duration(elapsed)}, {_duration(max(time_limit - elapsed, 0))} left", f"{_duration(elapsed)}/{_duration(time_limit)}"]


def _buckets(progress, last_new_bucket_at: float | None) -> list[str]:
    count = f"{progress.new_buckets} new bucket{'' if progress.new_buckets == 1 else 's'}"
    if last_new_bucket_at is None:
        return [count, f"{progress.new_buckets} new"]
    ago = _duration(progress.elapsed - last_new_bucket_at)
    return [f"{count}, last {ago} ago", f"{progress.new_buckets} new, last {ago} ago", f"{progress.new_buckets} new, {ago} ago",
            f"{progress.new_buckets} new"]


def _slow_work(work: dict) -> list[str]:
    """{"doing": "compiling", "backend": "torch-compile:cpu:float32", "seconds": 42} -> its forms."""
    seconds = _duration(work["seconds"])
    if not work.get("backend"):
        return [f"{work['doing']} for {seconds}"]
    kind = BackendName.parse(work["backend"]).kind
    return [f"{work['doing']} {work['backend']} for {seconds}", f"{work['doing']} {kind} for {seconds}",
            f"{work['doing']} {kind} {seconds}"]


def _compilers(compiled_structures: dict) -> list[str]:
    """Per compiler and dtype; per compiler; in all."""
    counts = compiler_counts(compiled_structures)
    return ["compiled: " + " ".join(f"{name} {'/'.join(map(str, n))}" for name, n in counts.items()),
            " ".join(f"{name} {sum(n)}" for name, n in counts.items()),
            f"compiled {sum(compiled_structures.values())}"]


def compiler_counts(compiled_structures: dict) -> dict[str, list[int]]:
    """Structures compiled per compiler, under short names in their order, one count per dtype in name
    order: {"jax-jit:cpu:float32": 40, "jax-jit:cpu:float64": 38, "torch-compile:cuda:float32": 12}
    -> {"compile-cuda": [12], "jit": [40, 38]}."""
    counts: dict[str, list[int]] = {}
    for name, count in sorted(compiled_structures.items()):
        parsed = BackendName.parse(name)  # a plugin's backend may be named without ":device:dtype"
        label = short_kind(parsed.kind) + ("" if parsed.device in (None, "cpu") else f"-{parsed.device}")
        counts.setdefault(label, []).append(count)
    return dict(sorted(counts.items()))


def short_kind(kind: str) -> str:
    """torch-compile -> compile, torch-export -> export, jax-jit -> jit, jax-eager -> eager (torch's
    eager backends compile nothing, so the name is jax's alone on this line)."""
    return kind.removeprefix("torch-").removeprefix("jax-")


def _duration(seconds: float) -> str:
    """45s, 2m05s, 1h02m."""
    seconds = int(max(seconds, 0))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
