"""The meter of what the oracle still judges: per (op, dtype, backend kind), the share of output
entries judged, and the median allowance in units of the dtype's unit roundoff.

Each fix of a false finding can only loosen the oracle; this says by how much. An entry of an
output is *judged* for a backend of dtype d when it is finite in the float64 reference and in every
honest model of d, no honest model or entry rule leaves it undefined (`Reference.judged`), and its
output's allowance is at most LOOSENED_FACTOR times the floor (`oracle.floor_allowance`). A verdict
that agreed at the floor (`at_floor`, no honest model computed) judged its output at the floor by
definition: there every entry finite in the float64 reference counts, and the meter never asks for
the models (it must not make the oracle slower). A case whose reference defines nothing (invalid)
counts its entries, none judged. A backend that raised, hung or could not run the case judged
nothing and counts nothing; a backend's extra outputs (gradients, vmapped copies) are not counted.

Attribution: an output's entries count for every op of the graph that output depends on (each op
once per output). On a one-op graph that is exact; in a larger graph an op shares the fate of its
neighbours (an entry a downstream pow leaves undefined counts against the relu before it).

Allowance: `allowed / (scale * u)`, with scale the oracle's scale of the output (the largest finite
magnitude along the way) and u the dtype's unit roundoff (`oracle.UNIT_ROUNDOFF`: 2**-24 for
float32, half of numpy's `eps`), once per output with a judged-by-the-models entry (loosened
outputs included: they are what the median should show) and a nonzero scale. It is kept as a
histogram of floor(log2) (bounded: at most ALLOWANCE_BINS bins per row), and the median is read
from it to within a factor of two: the centre of its bin, 2**(k + 0.5).

A row is plain counts, as the campaign checkpoints it (JSON, summed when replies and campaigns
are joined): {"cases", "entries", "judged", "u_log2:<k>" per bin}; its key is "op|dtype|kind".
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from fuzzer import verdicts
from fuzzer.errors import UserError

if TYPE_CHECKING:  # measuring imports them; reading rows (`fuzz stats`) needs neither numpy nor the oracle
    from fuzzer import oracle
    from fuzzer.backends import Backend
    from fuzzer.ir import Graph
    from fuzzer.records import CaseResult

# An output whose allowance passes this many floors is no longer judged. For a well-conditioned op
# the rounding model's e_same is about ROUNDING_SLACK units of roundoff of the output, so K_SAME *
# e_same is ~40 u against a float16 or bfloat16 floor of ~20 u (RTOL / u) per op: about 3 floors
# all told. Past 4 the allowance comes from ill-conditioning or an op's declared error, not rounding.
LOOSENED_FACTOR = 4.0
LOW_SHARE = 0.5  # the campaign summary names every (op, dtype, kind) judged on less than this share...
MIN_CASES = 20  # ... over at least this many cases: fewer say more about the draws than about the oracle
ALLOWANCE_BINS = 128  # floor(log2(allowance / (scale * u))) is clipped to 0 .. ALLOWANCE_BINS - 1
BIN_PREFIX = "u_log2:"
COUNTS = ("cases", "entries", "judged")
NOT_COMPARED = {verdicts.CRASH, verdicts.HANG, verdicts.UNSUPPORTED}  # no output to judge


def measure(graph: Graph, reference: oracle.Reference, result: CaseResult, backends: list[Backend]) -> dict[str, dict[str, int]]:
    """The rows of one case that check_case checked on `backends` (`result`), judged against
    `reference` (the case's own, before any extra outputs). An invalid result has no verdicts: every
    backend of `backends` counts then; a base backend check_case added is looked up by name."""
    from fuzzer.backends import get_backend
    from fuzzer.complex_dtypes import is_complex
    from fuzzer.exact_dtypes import is_exact

    per_output_ops = [sorted({node.op for node in graph.nodes if node.name in graph.ancestors([out])})
                      for out in graph.outputs]
    rows: dict[str, dict[str, int]] = {}
    invalid = result.verdict == verdicts.INVALID
    by_name = {backend.name: backend for backend in backends}
    judged_backends = ([(backend, None) for backend in backends] if invalid else
                       [(by_name.get(v.backend) or get_backend(v.backend), v) for v in result.verdicts if v.verdict not in NOT_COMPARED])
    for backend, verdict in judged_backends:
        if verdict is not None and not verdict.at_floor and reference.models_computed is None:
            continue  # a shape or output-count mismatch: judged before any entry was
        if is_exact(backend.dtype) or is_complex(backend.dtype):
            continue  # judged exactly (fuzzer/oracle/exact.py) or by component (oracle/complex.py): not metered here
        touched, kind = set(), backend.kind or backend.name  # a plugin's transformation has no kind: its name
        for index, ops in enumerate(per_output_ops):
            entries, judged, allowance = _output(reference, index, backend.dtype, verdict, invalid)
            for op in ops:
                row = rows.setdefault(f"{op}|{backend.dtype}|{kind}", dict.fromkeys(COUNTS, 0))
                row["entries"] += entries
                row["judged"] += judged
                if allowance is not None:
                    key = BIN_PREFIX + str(_bin(allowance))
                    row[key] = row.get(key, 0) + 1
                touched.add(op)
        for op in touched:
            rows[f"{op}|{backend.dtype}|{kind}"]["cases"] += 1
    return rows


def _output(reference: oracle.Reference, index: int, dtype: str, verdict, invalid: bool) -> tuple[int, int, float | None]:
    """(entries, judged entries, allowance in units of u or None) of output `index` for `dtype`."""
    import numpy as np

    from fuzzer import oracle

    r64 = reference.outputs[index]
    scale = reference.scales[index]
    if invalid:
        return r64.size, 0, None
    floor = oracle.floor_allowance(reference, index, dtype)
    if verdict.at_floor:  # judged at the floor: every finite entry, without the models
        finite = r64.size if reference.finite_everywhere else int(np.count_nonzero(np.isfinite(r64)))
        return r64.size, finite, (floor / (scale * oracle.UNIT_ROUNDOFF[dtype]) if finite and scale > 0 else None)
    mask = reference.judged_finite(dtype, index)
    judged = int(np.count_nonzero(mask))
    if not judged:
        return r64.size, 0, None
    allowed = oracle.allowed_error(reference, index, dtype)
    allowance = allowed / (scale * oracle.UNIT_ROUNDOFF[dtype]) if scale > 0 else None
    return r64.size, 0 if loosened(allowed, floor) else judged, allowance


def loosened(allowed: float, floor: float) -> bool:
    """Whether an output's allowance passed LOOSENED_FACTOR floors: its entries are no longer judged."""
    return allowed > LOOSENED_FACTOR * floor


def judged_entries(reference: oracle.Reference, index: int, dtype: str):
    """The mask of output `index`'s entries judged in `dtype` with every honest model computed: finite
    in r64 and in every model, none where the output's allowance is loosened (the detection-rate suite's
    planting sites, tests/quality)."""
    import numpy as np

    from fuzzer import oracle

    judged = reference.judged_finite(dtype, index)
    loose = loosened(oracle.allowed_error(reference, index, dtype), oracle.floor_allowance(reference, index, dtype))
    return np.zeros_like(judged) if loose else judged


def _bin(allowance: float) -> int:
    return min(max(math.floor(math.log2(allowance)), 0), ALLOWANCE_BINS - 1) if allowance > 0 else 0


def tally(rows: dict, increments: dict) -> None:
    """Add the rows `increments` into `rows` (a campaign's, a reply's)."""
    for key, counts in increments.items():
        row = rows.setdefault(key, {})
        for name, count in counts.items():
            row[name] = row.get(name, 0) + count


def median_allowance(row: dict) -> float | None:
    """The median allowance of a row in units of u, to within a factor of two (None: no allowance seen)."""
    bins = sorted((int(key[len(BIN_PREFIX):]), count) for key, count in row.items() if key.startswith(BIN_PREFIX))
    total = sum(count for _, count in bins)
    seen = 0
    for k, count in bins:
        seen += count
        if 2 * seen >= total and total:
            return 2.0 ** (k + 0.5)
    return None


def table(rows: dict) -> list[dict]:
    """One entry per row, least judged first (then most cases): op, dtype, kind, cases, entries,
    judged, share (None without entries) and median_allowance_u."""
    entries = []
    for key, row in rows.items():
        op, dtype, kind = key.split("|")
        share = row["judged"] / row["entries"] if row["entries"] else None
        entries.append({"op": op, "dtype": dtype, "kind": kind, **{name: row[name] for name in COUNTS},
                        "share": None if share is None else round(share, 4),
                        "median_allowance_u": median_allowance(row)})
    return sorted(entries, key=lambda e: (1.0 if e["share"] is None else e["share"], -e["cases"], e["op"], e["dtype"], e["kind"]))


def low_judged(rows: dict) -> list[dict]:
    """The table's entries judged on less than LOW_SHARE of their entries over MIN_CASES cases or more."""
    return [e for e in table(rows) if e["cases"] >= MIN_CASES and e["share"] is not None and e["share"] < LOW_SHARE]


def describe(entry: dict, kinds: str | None = None) -> str:
    """One entry of the table in words (`kinds`: the backend kinds it stands for, by default its own)."""
    share = "-" if entry["share"] is None else f"{entry['share']:.0%}"
    median = "-" if entry["median_allowance_u"] is None else f"{entry['median_allowance_u']:.3g} u"
    return (f"{entry['op']} {entry['dtype']} on {kinds or entry['kind']}: {share} of {entry['entries']} entries judged over "
            f"{entry['cases']} cases, median allowance {median}")


SUMMARY_LINES = 8  # the summary names the least judged; `fuzz stats` has the rest


def low_judged_summary(rows: dict) -> str:
    """The campaign summary's lines naming low_judged's entries ("" for none), least judged first: kinds
    that judged the same entries alike (torch-eager and the model-level kinds beside it) share a line."""
    groups: dict[tuple, list[dict]] = {}
    for entry in low_judged(rows):
        same = (entry["op"], entry["dtype"], entry["entries"], entry["judged"], entry["cases"], entry["median_allowance_u"])
        groups.setdefault(same, []).append(entry)
    if not groups:
        return ""
    lines = [describe(group[0], ", ".join(sorted(entry["kind"] for entry in group))) for group in groups.values()]
    more = f"  and {len(lines) - SUMMARY_LINES} more\n" if len(lines) > SUMMARY_LINES else ""
    return (f"Judged on under {LOW_SHARE:.0%} of their entries (over {MIN_CASES} cases or more; `fuzz stats` has the table):\n"
            + "".join(f"  {line}\n" for line in lines[:SUMMARY_LINES]) + more)


def checked_rows(rows, where: str) -> dict:
    """`rows` as stored (a checkpoint's judged_share), or UserError saying what is wrong with them."""
    if not isinstance(rows, dict):
        raise UserError(f"{where} has judged_share = {str(rows)[:80]!r}, not a JSON object; "
                        "delete that key from the checkpoint (the meter restarts) or restore the corpus from a copy.")
    for key, row in rows.items():
        problem = None
        if not isinstance(key, str) or len(key.split("|")) != 3:
            problem = "its key is not OP|DTYPE|KIND"
        elif not isinstance(row, dict) or any(name not in row for name in COUNTS):
            problem = f"it lacks one of the counts {', '.join(COUNTS)}"
        elif any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in row.values()):
            problem = "a count is not a whole number >= 0"
        elif any(name not in COUNTS and not (name.startswith(BIN_PREFIX) and name[len(BIN_PREFIX):].isdigit())
                 for name in row):
            problem = f"a key is neither a count nor {BIN_PREFIX}<bin>"
        if problem:
            raise UserError(f"{where} has a judged_share row {str(key)[:80]!r} that is malformed ({problem}); "
                            "delete that row from the checkpoint or restore the corpus from a copy.")
    return rows
