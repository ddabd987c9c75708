"""Ops derived from torch's own op database, loaded from a table of data (build.py builds it,
table.py stores and validates it, ops.py turns its entries into registry ops).

The table for the installed torch release comes from the user's cache ($FUZZ_DERIVED_CACHE, default
~/.cache/fuzzer/derived/), else from the one shipped in this folder; where neither exists it is
built once (importing torch's op database, a few minutes) and cached, but only where derived ops are
asked for (`--ops derived`, a case naming one, `fuzz ops --rebuild-derived`): loading the known-bug
registry or a misspelt op name never starts a build. A table that cannot be read or built leaves no
derived ops, and `problem()` says why in one sentence.
"""

from __future__ import annotations

import sys

from fuzzer.errors import UserError

_LOADED: tuple[dict, list[str], str | None] | None = None


NOT_BUILT = "no derived-op table for torch {release} here yet: `fuzz ops --rebuild-derived` (or `--ops derived`) builds it once."
# The share of a default campaign's graphs that may draw the derived ops beside the hand-written ones
# (`fuzz run --derived-share`; 0 leaves them out). Such a graph draws from both sets, so with 326 derived
# ops to 115 hand-written ones about three of its nodes in four are derived: a fifth of graphs gave the
# derived ops 9% of all nodes in a 10-minute default campaign (steered graphs start hand-written). A derived
# graph costs about twice a hand-written one to draw and judge (150 graphs on the eager tier: 4.5 against 9.0 a
# second): a fifth cut the README campaign's graphs/s to 0.61 of a campaign without them, so a tenth. The
# hand-written ones keep the other graphs whole, their region keys' steering (the derived ops' keys are steered
# toward in `--ops derived` campaigns only) and the first turns of the compilers' one-op tier.
DEFAULT_SHARE = 0.1


def _load(build: bool) -> tuple[dict, dict, str | None]:
    """({name: OpDef}, {derived name: hand-written twin}, problem sentence or None); a missing table is
    built only with `build`."""
    from fuzzer.ops import registry
    from fuzzer.ops.derived import table
    from fuzzer.ops.derived.ops import derived_ops

    release = table.torch_release()
    if release is None:
        return {}, {}, "torch is not installed, so no ops are derived from its op database."
    path = table.table_path(release)
    if path is None and not build:
        return {}, {}, NOT_BUILT.format(release=release)
    try:
        if path is None:
            path = table.cache_dir() / table.table_name(release)
            print(f"fuzzer: building the derived-op table for torch {release} once (a few minutes) into {path}",
                  file=sys.stderr)
            from fuzzer.ops.derived.build import Skip, rebuild

            try:
                rebuild(path)
            except Skip as why:
                return {}, {}, str(why)
        loaded = table.load(path)
    except UserError as exc:
        return {}, {}, str(exc)
    ops, twins = derived_ops(loaded["ops"], registry())
    return ops, twins, None


def loaded(build: bool = False) -> tuple[dict, dict, str | None]:
    """The table's ops, twins and problem (see _load), read once; with `build`, built first if it was missing."""
    global _LOADED
    if _LOADED is None or (build and _LOADED[2] is not None and _LOADED[2].startswith(NOT_BUILT[:30])):
        _LOADED = _load(build)
    return _LOADED


def derived_registry(build: bool = False) -> dict:
    """{name: OpDef} of the derived ops (empty where the table cannot be had: see `problem`); `build`:
    build a missing table (derived ops were asked for)."""
    return loaded(build)[0]


def default_ops() -> list[str]:
    """The derived ops a default campaign draws: the table's where it is here already (shipped, or built
    by `fuzz ops --rebuild-derived`), else none (`problem` says why). A default campaign never builds
    one: that takes minutes, past a short campaign's whole time and the first graph's 5 s."""
    return sorted(derived_registry())


def problem() -> str | None:
    """Why there are no derived ops, in one sentence; None where the table loaded."""
    return loaded()[2]


def forget() -> None:
    """Read the table again on next use (after a rebuild, or a test that changed the cache folder)."""
    global _LOADED
    _LOADED = None


def shipped_names() -> set[str]:
    """The op names of every table shipped in this folder (whatever torch is installed), read as data: a
    known-bug entry may name a derived op on a release whose own table is not here (yet)."""
    import json

    from fuzzer.ops.derived import table

    names = set()
    for path in sorted(table.SHIPPED_DIR.glob("torch-*.json")):
        names |= {entry["name"] for entry in json.loads(path.read_text())["ops"]}
    return names
