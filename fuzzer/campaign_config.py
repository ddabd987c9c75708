"""What a stored campaign row may say, checked before `--resume` or `fuzz merge` uses it.

A campaign row is data (store data, never code): its config is read back only as numbers and names
within the bounds `fuzz run`'s options accept (CONFIG_FIELDS, which the CLI builds those
options from), its checkpoint only as counters of the expected kinds (CHECKPOINT_FIELDS). It
never chooses code or a cluster: the plugins and the Ray address of a resumed campaign come
from the resuming command line (ONLY_FROM_COMMAND_LINE); the stored plugin names only say
which files to pass again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from fuzzer.errors import UserError

MAX_SHOWN = 200  # characters of a stored value quoted in an error (a plugin path in full)


@dataclass(frozen=True)
class Number:
    """A whole number (whole=True) or a finite number in [low, high] (above low when low_open)."""

    whole: bool
    low: float
    high: float
    low_open: bool = False

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int if self.whole else (int, float)):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return (self.low < value if self.low_open else self.low <= value) and value <= self.high

    @property
    def description(self) -> str:
        low, high = (str(int(x)) if isinstance(x, int) or x.is_integer() else f"{x:g}" for x in (self.low, self.high))
        noun = "a whole number" if self.whole else "a number"
        return f"{noun} above {low} and at most {high}" if self.low_open else f"{noun} from {low} to {high}"


@dataclass(frozen=True)
class Plain:
    """A value of one JSON type: a string, a boolean, an object."""

    type: type
    description: str

    def accepts(self, value: Any) -> bool:
        return isinstance(value, self.type)


TEXT = Plain(str, "a string")
FLAG = Plain(bool, "true or false")
OBJECT = Plain(dict, "a JSON object")


@dataclass(frozen=True)
class ListOf:
    item: Any
    non_empty: bool = False

    def accepts(self, value: Any) -> bool:
        return isinstance(value, list) and (bool(value) or not self.non_empty) and all(map(self.item.accepts, value))

    @property
    def description(self) -> str:
        return f"a {'non-empty ' if self.non_empty else ''}list whose items are each {self.item.description}"


@dataclass(frozen=True)
class MapOf:
    value: Any

    def accepts(self, value: Any) -> bool:
        return isinstance(value, dict) and all(isinstance(k, str) and self.value.accepts(v) for k, v in value.items())

    @property
    def description(self) -> str:
        return f"an object whose values are each {self.value.description}"


@dataclass(frozen=True)
class Nullable:
    """`kind`, or null (an option left unset: no limit, every op, every regime)."""

    kind: Any

    def accepts(self, value: Any) -> bool:
        return value is None or self.kind.accepts(value)

    @property
    def description(self) -> str:
        return f"{self.kind.description}, or null"


@dataclass(frozen=True)
class Field:
    kind: Any
    flag: str | None = None  # the `fuzz run` option whose type is built from `kind` (cli.bounded)


INT64 = 2**63 - 1
DAY = 86400.0
SECONDS = Number(whole=False, low=0, high=DAY)
RUN_TIME = Number(whole=False, low=0, high=DAY, low_open=True)  # a time limit per backend run
NAMES = ListOf(TEXT)

# Every CampaignOptions field (tests/test_stored_data.py checks the two stay in step).
CONFIG_FIELDS: dict[str, Field] = {
    "backends": Field(ListOf(TEXT, non_empty=True)),
    "ops": Field(Nullable(NAMES)),
    "max_nodes": Field(Number(whole=True, low=1, high=64), "--max-nodes"),
    "regimes": Field(Nullable(NAMES)),
    "seed": Field(Number(whole=True, low=-INT64 - 1, high=INT64), "--seed"),
    "inputs_per_graph": Field(Number(whole=True, low=1, high=100), "--inputs-per-graph"),
    "compile_share": Field(TEXT),
    "compiled_inputs": Field(Number(whole=True, low=0, high=100), "--compiled-inputs"),
    "first_compile_dir": Field(Nullable(TEXT)),  # set for the workers only, never stored
    "compilers": Field(Nullable(MapOf(Number(whole=False, low=0, high=1)))),  # set for the workers only, never stored
    "single_op_parts": Field(Nullable(MapOf(ListOf(Number(whole=True, low=0, high=1024))))),  # likewise
    "single_op_orders": Field(Nullable(MapOf(NAMES))),  # likewise
    "threads": Field(Number(whole=True, low=0, high=1024), "--threads"),
    "shrink_time": Field(SECONDS, "--shrink-time"),
    "reruns": Field(Number(whole=True, low=0, high=10)),
    "plugins": Field(NAMES),
    "memory_limit_mb": Field(Nullable(Number(whole=True, low=0, high=2**30)), "--memory-limit"),
    "max_cases": Field(Nullable(Number(whole=True, low=1, high=INT64)), "--max-cases"),
    "time_limit": Field(Nullable(Number(whole=False, low=0, high=1e10))),
    "workers": Field(Number(whole=True, low=1, high=4096), "--workers"),
    "timeout": Field(RUN_TIME, "--timeout"),
    "compile_timeout": Field(RUN_TIME, "--compile-timeout"),
    "recycle_rss_mb": Field(Number(whole=True, low=1, high=2**30), "--recycle-memory"),
    "stop_after_findings": Field(Nullable(Number(whole=True, low=1, high=INT64))),
    "shrink_known": Field(FLAG),
    "ray": Field(Nullable(TEXT)),
    "steer": Field(FLAG),
    "derived_share": Field(Number(whole=False, low=0, high=1), "--derived-share"),
}
ONLY_FROM_COMMAND_LINE = ("plugins", "ray")

COUNT = Number(whole=True, low=0, high=INT64)
# Every Progress field but campaign_id (the row's own id), with the kind a checkpoint stores.
CHECKPOINT_FIELDS: dict[str, Any] = {
    **dict.fromkeys(["graphs", "checked", "invalid", "finding_cases", "explained_cases", "new_buckets", "crashes",
                     "internal_errors", "abandoned", "next_index", "known_findings", "triaged_findings",
                     "unknown_finding_cases", "poisoned_restarts", "unrepeated_hangs", "unrepeated_deaths", "slow_checks"], COUNT),
    **dict.fromkeys(["elapsed", "worker_seconds"], Number(whole=False, low=0, high=1e12)),
    "first_graph_s": Nullable(Number(whole=False, low=0, high=1e12)),
    **dict.fromkeys(["last_internal_error", "status"], TEXT),
    **dict.fromkeys(["op_counts", "regime_counts", "compiled_structures", "not_compiled", "budget_skipped",
                     "backend_graphs", "backend_cases"], MapOf(COUNT)),
    **dict.fromkeys(["backend_op_counts", "alone_op_counts", "compiled_by_slot"], MapOf(MapOf(COUNT))),
    "backend_seconds": MapOf(Number(whole=False, low=0, high=1e12)),
    "done_above": ListOf(COUNT),
    "lost_nodes": ListOf(TEXT),
    "regions_declared": ListOf(TEXT),
    "region_counts": MapOf(COUNT),
    "pairs_declared": ListOf(TEXT),
    "pair_counts": MapOf(COUNT),
    "judged_share": MapOf(MapOf(COUNT)),  # fuzzer/judging/judged_share.py reads its keys
}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."


def check_fields(data: Any, kinds: dict, what: str, flags: dict | None = None) -> dict:
    """The entries of `data` that `kinds` names, each of its kind; UserError('its {what} has ...') otherwise.
    Other entries are left out (an older release stored keys this one no longer reads)."""
    if not isinstance(data, dict):
        raise UserError(f"its {what} is {_shown(data)}, not a JSON object")
    checked = {}
    for name, kind in kinds.items():
        if name in data:
            if not kind.accepts(data[name]):
                flag = (flags or {}).get(name)
                accepted = f" (what {flag} accepts)" if flag else ""
                raise UserError(f"its {what} has {name} = {_shown(data[name])}, which is not {kind.description}{accepted}")
            checked[name] = data[name]
    return checked


def check_config(config: Any) -> dict:
    """The stored config's CampaignOptions entries, each within its bound."""
    return check_fields(config, {name: f.kind for name, f in CONFIG_FIELDS.items()}, "config",
                    {name: f.flag for name, f in CONFIG_FIELDS.items()})


def check_checkpoint(state: Any) -> dict:
    """The stored checkpoint's Progress entries, each of its kind ({} for a campaign never checkpointed)."""
    return {} if state is None else check_fields(state, CHECKPOINT_FIELDS, "checkpoint")


def check_campaign_row(row: dict) -> None:
    """A campaign row fit to copy into another corpus (`fuzz merge`): UserError saying what is not."""
    check_config(row["config"])
    check_checkpoint(row["checkpoint"])
    check_fields(row, {"seed": CONFIG_FIELDS["seed"].kind, "cases_run": Nullable(COUNT), "findings": Nullable(COUNT),
                   "status": TEXT, "versions": Nullable(OBJECT)}, "row")


def stored_plugins(config: Any) -> list[str]:
    """The plugin names a stored config records (as data: to name them, never to load them); [] if it has none."""
    plugins = config.get("plugins") if isinstance(config, dict) else None
    return list(plugins) if NAMES.accepts(plugins) else []


def missing_plugins(stored: list[str], passed: list[str]) -> list[str]:
    """The stored plugins not passed again on the command line, matched by file name (a canary by its
    name), so a campaign can be resumed on a machine that keeps its plugin files elsewhere."""
    passed_names = {PurePath(p).name for p in passed}
    return [p for p in stored if PurePath(p).name not in passed_names]


def resumed_options(row: dict, plugins: list[str]) -> tuple[dict, dict]:
    """(CampaignOptions entries, Progress entries) of a stored campaign row to resume with `plugins`
    from the command line; UserError, in one sentence, if the row is out of bounds or the campaign
    used plugins that were not passed again."""
    where = f"Campaign {row['id']} cannot be resumed"
    try:
        config, checkpoint = check_config(row["config"]), check_checkpoint(row["checkpoint"])
        if "backends" not in config:
            raise UserError("its config names no backends")
    except UserError as exc:
        raise UserError(f"{where}: {exc}; the corpus row is damaged or not from this fuzzer, so start a new "
                        "campaign with `fuzz run` instead.") from None
    missing = missing_plugins(config.get("plugins", []), plugins)
    if missing:
        noun = "plugin" if len(missing) == 1 else "plugins"
        raise UserError(f"{where} without its {noun} {', '.join(_shown(p) for p in missing)}: a resume loads plugins "
                        f"only from the command line, so pass each again with --plugin PATH.")
    # A campaign stored before derived ops were drawn by default drew none: resumed, it draws what it drew.
    config.setdefault("derived_share", 0.0)
    return {k: v for k, v in config.items() if k not in ONLY_FROM_COMMAND_LINE}, checkpoint
