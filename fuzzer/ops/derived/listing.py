"""What `fuzz ops` says about the derived ops: one row each, and the rebuild's summary."""

from __future__ import annotations

import sys


def derived_rows() -> list[dict]:
    """`fuzz ops` rows of the derived ops (source: which reference judges it); the table's problem, if
    any, goes to stderr in its one sentence."""
    from fuzzer.ops.derived import loaded
    from fuzzer.ops.derived.ops import reference_source

    ops, _, problem = loaded()
    if problem:
        print(f"fuzzer: {problem}", file=sys.stderr)
    return [{"name": op.name, "family": op.family, "arity": list(op.arity), "sensitivity": op.numerics.sensitivity,
             "numerics": [], "notes": op.notes, "source": reference_source(op)}
            for op in sorted(ops.values(), key=lambda o: o.name)]


def rebuild_table() -> str:
    """Builds the installed torch's table into the user's cache; one line saying what it holds."""
    from fuzzer.errors import UserError
    from fuzzer.ops import derived
    from fuzzer.ops.derived import table
    from fuzzer.ops.derived.build import Skip, rebuild

    release = table.torch_release()
    if release is None:
        raise UserError("torch is not installed; install it to derive ops from its op database.")
    path = table.cache_dir() / table.table_name(release)
    try:
        built = rebuild(path, lambda text: print(f"fuzzer: {text}", file=sys.stderr))
    except Skip as why:
        raise UserError(str(why)) from None
    derived.forget()
    return summary(built["counts"], path)


def summary(counts: dict, path) -> str:
    skipped = ", ".join(f"{n} {why}" for why, n in counts["skipped"].items())
    return (f"Derived-op table {path}: {counts['entries']} entries, {counts['usable']} usable as {counts['ops']} ops "
            f"({counts['numpy_reference']} with a numpy/scipy reference, {counts['jax_twin']} with a jax twin); "
            f"skipped: {skipped}.")
