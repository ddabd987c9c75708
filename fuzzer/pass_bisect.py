"""Which compiler pass breaks a finding: `fuzz localize ID`.

A maintainer's first question about a compiler bug is "which pass?". For an XLA kind (the
"jax/xla" path: jax-jit and its variants, vmap, grad) the answer is searched the way XLA's own
developers work around a bad pass: the case is run again with `--xla_disable_hlo_passes=...`
until the smallest set of HLO passes whose disabling makes it agree is found, by halving the
passes the case's compile actually ran (read from an `--xla_dump_hlo_pass_re=.*` dump). Each
trial is a fresh worker (XLA reads XLA_FLAGS once, at start), so a pass that aborts the process
(a CHECK failure) is a trial that reproduces, not our crash. The halving assumes one culprit;
where disabling no half of a set helps but disabling the set does, the set is the answer, and
the result says that no single pass explains it.

A trial reproduces when the backend's verdict on the case does not pass (as `fuzz replay` decides
its exit code); a pass whose disabling breaks the compile in another way counts as
reproducing, so a required pass is never named.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fuzzer import verdicts
from fuzzer.backends import kind_path
from fuzzer.backend_names import BackendName
from fuzzer.errors import UserError
from fuzzer.ir import Case

XLA_PATH = "jax/xla"
# A pass dump's file name: module_0003.jit_graph.0012.simplification.after_algsimp.before_dce.txt
_DUMPED_PASS = re.compile(r"\.after_([A-Za-z0-9_-]+)\.before_([A-Za-z0-9_-]+)\.txt$")
_PIPELINE_MARKS = {"pipeline-start", "pipeline-end"}


@dataclass
class PassVerdict:
    """What `fuzz localize` found for one backend of one case."""

    backend: str
    compiler: str  # "xla"
    passes: list[str] = field(default_factory=list)  # the smallest set whose disabling makes it agree
    candidates: int = 0  # how many passes the case's compile ran
    trials: int = 0
    summary: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def localizable_backend(findings: list[dict]) -> str:
    """The first finding backend of a case whose compiler `fuzz localize` can bisect, or a UserError."""
    for finding in findings:
        name = finding.get("backend", "")
        if kind_path(BackendName.parse(name)) == XLA_PATH:
            return name
    names = ", ".join(sorted({f.get("backend", "?") for f in findings})) or "none"
    raise UserError(f"Pass localization covers the XLA kinds (jax-jit and its variants); this case's findings are on {names}.")


def localize_xla(case: Case, backend: str, plugins: list[str], timeout: float) -> PassVerdict:
    """The smallest set of HLO passes whose disabling makes `backend` agree on `case` (see the module docstring)."""
    result = PassVerdict(backend, "xla")
    with tempfile.TemporaryDirectory(prefix="fuzz-xla-dump-") as dump:
        reproduces = _trial(case, backend, plugins, timeout, f"--xla_dump_to={dump} --xla_dump_hlo_pass_re=.*", result)
        passes = ran_passes(Path(dump))
    result.candidates = len(passes)
    if not reproduces:
        result.summary = "The finding does not reproduce here; nothing to localize."
        return result
    if not passes or _trial(case, backend, plugins, timeout, disabled_flag(passes), result):
        result.summary = (f"Disabling all {len(passes)} HLO passes the compile ran does not remove it: the cause is "
                          "outside the HLO passes (emitter, runtime or a pass XLA does not let us disable).")
        return result
    culprits = _halve(passes, lambda subset: not _trial(case, backend, plugins, timeout, disabled_flag(subset), result))
    result.passes = culprits
    result.summary = (f"Disabling the HLO pass '{culprits[0]}' alone makes it agree (--xla_disable_hlo_passes={culprits[0]})."
                      if len(culprits) == 1 else
                      f"No single pass explains it: disabling these {len(culprits)} together makes it agree, no half of them does.")
    return result


def _halve(passes: list[str], agrees_without) -> list[str]:
    """The smallest set found by halving `passes` (whose disabling makes the case agree) while one half still does."""
    while len(passes) > 1:
        first, second = passes[: len(passes) // 2], passes[len(passes) // 2:]
        if agrees_without(first):
            passes = first
        elif agrees_without(second):
            passes = second
        else:
            break
    return passes


def ran_passes(dump: Path) -> list[str]:
    """The HLO passes named in an `--xla_dump_hlo_pass_re=.*` dump, in the order they first ran."""
    seen: dict[str, None] = {}
    for path in sorted(dump.glob("module_*.txt")):
        match = _DUMPED_PASS.search(path.name)
        if match:
            for name in match.groups():
                if name not in _PIPELINE_MARKS:
                    seen.setdefault(name, None)
    return list(seen)


def disabled_flag(passes: list[str]) -> str:
    return "--xla_disable_hlo_passes=" + ",".join(passes)


def _trial(case: Case, backend: str, plugins: list[str], timeout: float, flags: str, result: PassVerdict) -> bool:
    """Does the finding reproduce with these XLA flags (a fresh worker, which reads them at start)?"""
    from fuzzer.replay import replay_case

    result.trials += 1
    with _xla_flags(flags):
        reply = replay_case(case, [backend], plugins, timeout)
    return not verdicts.passes(reply.verdict)


@contextlib.contextmanager
def _xla_flags(flags: str):
    """XLA_FLAGS for the workers started inside (the user's own kept in front), and no persistent jax
    cache there: its key leaves the dump flags out, so a cached executable would compile nothing."""
    saved = {name: os.environ.get(name) for name in ("XLA_FLAGS", "FUZZ_JAX_CACHE")}
    os.environ["XLA_FLAGS"] = f"{saved['XLA_FLAGS']} {flags}" if saved["XLA_FLAGS"] else flags
    os.environ["FUZZ_JAX_CACHE"] = ""
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value
