"""Which compiler pass breaks a finding: `fuzz localize ID`.

A maintainer's first question about a compiler bug is "which pass?". For a torch.compile kind (the
"torch/inductor" path) the answer is torch's own CompilerBisector, the tool PyTorch's issue intake
runs: it tries dynamo alone (backend "eager"), then aot_eager, aot_eager_decomp_partition and
inductor, and inside the first that fails bisects its subsystems (pre/joint/post-grad passes,
lowerings, config switches) down to the first bad one; our check of the case is its test function,
run in a child process (a compile that crashes the process ends the bisection, not the command).
For an XLA kind (the
"jax/xla" path: jax-jit and its variants, vmap, grad) the answer is searched the way XLA's own
developers work around a bad pass: the case is run again with `--xla_disable_hlo_passes=...`
until the smallest set of HLO passes whose disabling makes it agree is found, by halving the
passes the case's compile actually ran (read from an `--xla_dump_hlo_pass_re=.*` dump). Each
trial is a fresh worker (XLA reads XLA_FLAGS once, at start), so a pass that aborts the process
(a CHECK failure) is a trial that reproduces, not our crash. The halving assumes one culprit;
where disabling no half of a set helps but disabling the set does, the set is the answer, and
the result says that no single pass explains it.
For an ONNX Runtime kind (the "onnx/ort" path) the case is run again, each time in a fresh worker,
at ORT's graph optimization levels from ORT_DISABLE_ALL up (fuzzer/backends/ort.py reads the level
from $FUZZ_ORT_OPTIMIZATION); the lowest level at which it reproduces names the kind of
optimization that breaks it, and ORT_DISABLE_ALL means no optimizer pass: the exported model or a
kernel.

A trial reproduces when the backend's verdict on the case does not pass (as `fuzz replay` decides
its exit code); a pass whose disabling breaks the compile in another way counts as
reproducing, so a required pass is never named.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fuzzer import verdicts
from fuzzer.backends import kind_path
from fuzzer.backend_names import BackendName
from fuzzer.errors import UserError
from fuzzer.ir import Case

XLA_PATH, INDUCTOR_PATH, ORT_PATH = "jax/xla", "torch/inductor", "onnx/ort"
LOCALIZABLE_PATHS = (XLA_PATH, INDUCTOR_PATH, ORT_PATH)
# A pass dump's file name: module_0003.jit_graph.0012.simplification.after_algsimp.before_dce.txt
_DUMPED_PASS = re.compile(r"\.after_([A-Za-z0-9_-]+)\.before_([A-Za-z0-9_-]+)\.txt$")
_PIPELINE_MARKS = {"pipeline-start", "pipeline-end"}


@dataclass
class PassVerdict:
    """What `fuzz localize` found for one backend of one case."""

    backend: str
    compiler: str  # "xla", "inductor" or "ort"
    # XLA: the smallest set of passes whose disabling makes it agree; inductor: one "backend/subsystem"
    # (and the bisected item, e.g. "inductor/lowerings: var"), or none; ORT: the lowest optimization level
    # that shows it ("ORT_ENABLE_EXTENDED"; "ORT_DISABLE_ALL": no optimizer pass)
    passes: list[str] = field(default_factory=list)
    candidates: int = 0  # how many passes the case's compile ran (ORT: optimization levels)
    trials: int = 0
    summary: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def stored(self, versions: dict) -> dict:
        """The form a bucket keeps (Corpus.record_localization): this result, the versions it ran on, and when."""
        from fuzzer.corpus.connection import utc_now

        return {**self.to_dict(), "versions": versions, "checked_at": utc_now()}


def stored_localization(text: str | None) -> dict | None:
    """A bucket's stored localization read back, or None; one sentence where the row was tampered with."""
    if text is None:
        return None
    try:
        data = json.loads(text)
        fine = (isinstance(data, dict) and isinstance(data.get("summary"), str) and isinstance(data.get("backend"), str)
                and isinstance(data.get("passes"), list) and all(isinstance(name, str) for name in data["passes"])
                and isinstance(data.get("versions"), dict) and isinstance(data.get("checked_at"), str))
    except ValueError:
        fine = False
    if not fine:
        raise UserError(f"A bucket's stored pass localization is damaged ({text[:80]!r}); the corpus was changed by "
                        "something other than the fuzzer: run `fuzz localize` on the bucket again.")
    return data


def localization_phrase(data: dict) -> str:
    """'Pass: <summary> (on torch-compile:cpu:float32, torch 2.13.0+cpu, 2026-12-02)' for `fuzz show` and issue reports."""
    versions = ", ".join(f"{name} {version}" for name, version in sorted(data["versions"].items())
                         if name in ("torch", "jax", "jaxlib") and version)
    return f"Pass: {data['summary']} (on {data['backend']}{', ' + versions if versions else ''}, {data['checked_at'][:10]})"


def localizable_backend(findings: list[dict], bucket_backend: str | None = None) -> str:
    """The first finding backend of a case whose compiler `fuzz localize` can bisect (the named bucket's
    own first, where the case is in several buckets), or a UserError."""
    findings = sorted(findings, key=lambda finding: finding.get("backend") != bucket_backend)
    for finding in findings:
        name = finding.get("backend", "")
        if kind_path(BackendName.parse(name)) in LOCALIZABLE_PATHS:
            return name
    names = ", ".join(sorted({f.get("backend", "?") for f in findings})) or "none"
    raise UserError("Pass localization covers the torch.compile (inductor), XLA and ONNX Runtime kinds; "
                    f"this case's findings are on {names}.")


def localize(case: Case, backend: str, plugins: list[str], timeout: float) -> PassVerdict:
    """localize_xla, localize_ort or localize_inductor, by the backend's compiler path."""
    if kind_path(BackendName.parse(backend)) == XLA_PATH:
        return localize_xla(case, backend, plugins, timeout)
    if kind_path(BackendName.parse(backend)) == ORT_PATH:
        return localize_ort(case, backend, plugins, timeout)
    return localize_inductor(case, backend, plugins, timeout)


# torch's CompilerBisector calls the test function about 20 times; the child gets that many trials' time.
INDUCTOR_TRIALS = 30


def localize_inductor(case: Case, backend: str, plugins: list[str], timeout: float) -> PassVerdict:
    """torch's CompilerBisector over `backend`'s compile of `case`, in a child process (see the module docstring)."""
    from fuzzer.case_folder import write_case

    result = PassVerdict(backend, "inductor")
    with tempfile.TemporaryDirectory(prefix="fuzz-inductor-bisect-") as folder:
        root = Path(folder)
        write_case(case, root)
        command = [sys.executable, "-m", "fuzzer.pass_bisect", str(root), backend, *plugins]
        try:
            child = subprocess.run(command, capture_output=True, text=True, timeout=timeout * INDUCTOR_TRIALS)
        except subprocess.TimeoutExpired:
            result.summary = f"torch's CompilerBisector did not finish within {timeout * INDUCTOR_TRIALS:g} s."
            return result
        answer = root / "bisection.json"
        if child.returncode != 0 or not answer.exists():
            last = (child.stderr.strip().splitlines() or ["no output"])[-1]
            result.summary = f"torch's CompilerBisector ended its process (exit {child.returncode}: {last[:200]})."
            return result
        found = json.loads(answer.read_text())
    result.trials = found["trials"]
    if not found["reproduces"]:
        result.summary = "The finding does not reproduce here; nothing to localize."
    elif found["backend"] is None:
        result.summary = "torch's CompilerBisector found no stage of torch.compile that fails it."
    elif found["backend"] == "eager":
        result.passes = ["eager"]
        result.summary = "Already wrong with dynamo alone (backend='eager'): tracing, not an inductor pass."
    else:
        where = "/".join(part for part in (found["backend"], found["subsystem"]) if part)
        result.passes = [f"{where}: {found['debug']}" if found["debug"] and found["debug"] != found["subsystem"] else where]
        result.summary = (f"torch's CompilerBisector: first bad at {result.passes[0]} "
                          f"(TORCH_BISECT_BACKEND={found['backend']}, subsystem {found['subsystem'] or '-'}, "
                          f"bisect number {found['number']}).")
    return result


def _bisect_inductor_here(root: Path, backend_name: str, plugins: list[str]) -> None:
    """The child of localize_inductor: CompilerBisector with our check of the case as its test."""
    import torch
    from torch._inductor.compiler_bisector import CompilerBisector

    from fuzzer.backends import get_backend
    from fuzzer.backends.torch_compile import COMPILED
    from fuzzer.backends.torch_module import TRACED
    from fuzzer.case_folder import read_case
    from fuzzer.check import check_case
    from fuzzer.plugins import load_plugins

    load_plugins(plugins)
    case, backend = read_case(root), get_backend(backend_name)
    trials = []

    def agrees() -> bool:
        COMPILED.entries.clear()  # every trial compiles again, under the bisector's current settings
        TRACED.entries.clear()
        torch._dynamo.reset()
        trials.append(check_case(case, [backend]).verdict)
        return verdicts.passes(trials[-1])

    reproduces = not agrees()
    found = CompilerBisector.do_bisect(agrees) if reproduces else None
    (root / "bisection.json").write_text(json.dumps({
        "reproduces": reproduces, "trials": len(trials),
        "backend": found.backend if found else None, "subsystem": found.subsystem if found else None,
        "number": found.bisect_number if found else None, "debug": found.debug_info if found else None}))


def localize_xla(case: Case, backend: str, plugins: list[str], timeout: float) -> PassVerdict:
    """The smallest set of HLO passes whose disabling makes `backend` agree on `case` (see the module docstring)."""
    result = PassVerdict(backend, "xla")
    with tempfile.TemporaryDirectory(prefix="fuzz-xla-dump-") as dump:
        reproduces = _trial(case, backend, plugins, timeout, _xla_environment(f"--xla_dump_to={dump} --xla_dump_hlo_pass_re=.*"),
                            result)
        passes = ran_passes(Path(dump))
    result.candidates = len(passes)
    if not reproduces:
        result.summary = "The finding does not reproduce here; nothing to localize."
        return result
    if not passes or _trial(case, backend, plugins, timeout, _xla_environment(disabled_flag(passes)), result):
        result.summary = (f"Disabling all {len(passes)} HLO passes the compile ran does not remove it: the cause is "
                          "outside the HLO passes (emitter, runtime or a pass XLA does not let us disable).")
        return result
    culprits = _halve(passes, lambda subset: not _trial(case, backend, plugins, timeout,
                                                          _xla_environment(disabled_flag(subset)), result))
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


def localize_ort(case: Case, backend: str, plugins: list[str], timeout: float) -> PassVerdict:
    """The lowest ORT graph optimization level at which `backend` fails on `case` (see the module docstring)."""
    from fuzzer.backends.ort import INSTALL_HINT, OPTIMIZATION_ENV, OPTIMIZATION_LEVELS, available_levels

    result = PassVerdict(backend, "ort")
    try:
        levels = available_levels()
    except ImportError:
        raise UserError(f"Localizing {backend}'s finding needs onnxruntime here; `{INSTALL_HINT}` installs it.") from None
    result.candidates = len(levels)
    first = next((level for level in levels
                  if _trial(case, backend, plugins, timeout, {OPTIMIZATION_ENV: level}, result)), None)
    if first is None:
        result.summary = "The finding does not reproduce here at any graph optimization level; nothing to localize."
        return result
    result.passes = [first]
    if first == levels[0]:
        result.summary = (f"There even with {OPTIMIZATION_LEVELS[first]} ({first}): the exported model or an ORT kernel, "
                          "not an optimizer pass.")
    else:
        below = levels[levels.index(first) - 1]
        result.summary = (f"Appears at {first}: {OPTIMIZATION_LEVELS[first]} ({below} agrees; "
                          f"SessionOptions.graph_optimization_level={below} avoids it).")
    return result


def _trial(case: Case, backend: str, plugins: list[str], timeout: float, environment: dict[str, str],
           result: PassVerdict) -> bool:
    """Does the finding reproduce with these environment variables (a fresh worker, which reads them at start)?"""
    from fuzzer.replay import replay_case

    result.trials += 1
    with _environment(environment):
        reply = replay_case(case, [backend], plugins, timeout)
    return not verdicts.passes(reply.verdict)


def _xla_environment(flags: str) -> dict[str, str]:
    """XLA_FLAGS for a trial's worker (the user's own kept in front), and no persistent jax cache there:
    its key leaves the dump flags out, so a cached executable would compile nothing."""
    user = os.environ.get("XLA_FLAGS")
    return {"XLA_FLAGS": f"{user} {flags}" if user else flags, "FUZZ_JAX_CACHE": ""}


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    """These environment variables for the workers started inside; the previous values back after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


if __name__ == "__main__":
    _bisect_inductor_here(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
