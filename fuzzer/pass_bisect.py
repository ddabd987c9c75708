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
the result says that no single pass explains it. Where disabling every pass leaves it, one more
trial turns the backend's own optimizations off (`--xla_backend_optimization_level=0`: LLVM's, on
the CPU and GPU); agreeing there names them, else the cause is outside the optimizations.
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
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fuzzer import verdicts
from fuzzer.backend_names import BackendName
from fuzzer.backends import kind_path
from fuzzer.errors import UserError
from fuzzer.ir import Case
from fuzzer.triaging.buckets import pass_label

XLA_PATH, INDUCTOR_PATH, ORT_PATH = "jax/xla", "torch/inductor", "onnx/ort"
# Where no HLO pass explains an XLA finding: the backend's own optimizations (LLVM's, on the CPU and GPU) off.
BACKEND_OPTIMIZATION_OFF = "--xla_backend_optimization_level=0"
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

    @property
    def label(self) -> str | None:
        """The pass as part of a bucket's identity (fuzzer/triaging/buckets.py): the pass, or the two or three passes
        that only together explain it; None where nothing was named or the set is too large to be a cause."""
        return pass_label(self.passes)

    def stored(self, versions: dict, case_id: int | None = None) -> dict:
        """The form a bucket keeps (Corpus.record_localization): this result, the case it ran on, the
        versions it ran on, and when."""
        from fuzzer.corpus.connection import utc_now

        return {**self.to_dict(), "case": case_id, "versions": versions, "checked_at": utc_now()}




def stored_localization(text: str | None) -> dict | None:
    """A bucket's stored localization read back, or None; one sentence where the row was tampered with."""
    if text is None:
        return None
    try:
        data = json.loads(text)
        fine = (isinstance(data, dict) and isinstance(data.get("summary"), str) and isinstance(data.get("backend"), str)
                and isinstance(data.get("passes"), list) and all(isinstance(name, str) for name in data["passes"])
                and isinstance(data.get("versions"), dict) and isinstance(data.get("checked_at"), str)
                and (data.get("case") is None or type(data["case"]) is int))
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
        if is_localizable(name):
            return name
    names = ", ".join(sorted({f.get("backend", "?") for f in findings})) or "none"
    raise UserError("Pass localization covers the torch.compile (inductor), XLA and ONNX Runtime kinds; "
                    f"this case's findings are on {names}.")


def localize(case: Case, backend: str, plugins: list[str], timeout: float, seconds: float | None = None) -> PassVerdict:
    """localize_xla, localize_ort or localize_inductor, by the backend's compiler path. `timeout` bounds
    one trial; `seconds`, where given, the whole localization (a campaign's budget): past it, the
    result says so."""
    path = kind_path(BackendName.parse(backend))
    localizer = {XLA_PATH: localize_xla, ORT_PATH: localize_ort}.get(path, localize_inductor)
    return localizer(case, backend, plugins, timeout, seconds)


def is_localizable(backend: str) -> bool:
    """Does `fuzz localize` know how to bisect this backend's compiler?"""
    return kind_path(BackendName.parse(backend)) in LOCALIZABLE_PATHS


# torch's CompilerBisector calls the test function about 20 times; the child gets that many trials' time.
INDUCTOR_TRIALS = 30


def localize_inductor(case: Case, backend: str, plugins: list[str], timeout: float,
                      seconds: float | None = None) -> PassVerdict:
    """torch's CompilerBisector over `backend`'s compile of `case`, in a child process (see the module docstring)."""
    from fuzzer.running.case_folder import write_case

    result = PassVerdict(backend, "inductor")
    limit = timeout * INDUCTOR_TRIALS if seconds is None else min(seconds, timeout * INDUCTOR_TRIALS)
    with tempfile.TemporaryDirectory(prefix="fuzz-inductor-bisect-") as folder:
        root = Path(folder)
        write_case(case, root)
        command = [sys.executable, "-m", "fuzzer.triaging.pass_bisect", str(root), backend, *plugins]
        try:
            child = subprocess.run(command, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired:
            result.summary = f"torch's CompilerBisector did not finish within {limit:g} s."
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
    from fuzzer.judging.check import check_case
    from fuzzer.plugins import load_plugins
    from fuzzer.running.case_folder import read_case

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


# A trial with less than this left before its localization's deadline is not started: a fresh worker's
# imports and compile take several seconds.
LEAST_TRIAL_SECONDS = 10.0


class _OutOfTime(Exception):
    """A localization's whole time (`seconds`) ran out before its next trial."""


def _out_of_time(result: PassVerdict, seconds: float) -> PassVerdict:
    result.summary = f"The localization ran out of its {seconds:g} s after {result.trials} trials; nothing named."
    return result


def localize_xla(case: Case, backend: str, plugins: list[str], timeout: float, seconds: float | None = None) -> PassVerdict:
    """The smallest set of HLO passes whose disabling makes `backend` agree on `case` (see the module docstring)."""
    result = PassVerdict(backend, "xla")
    deadline = None if seconds is None else time.monotonic() + seconds

    def trial(flags: str) -> bool:
        return _trial(case, backend, plugins, timeout, _xla_environment(flags), result, deadline)

    try:
        with tempfile.TemporaryDirectory(prefix="fuzz-xla-dump-") as dump:
            reproduces = trial(f"--xla_dump_to={dump} --xla_dump_hlo_pass_re=.*")
            passes = ran_passes(Path(dump))
        result.candidates = len(passes)
        if not reproduces:
            result.summary = "The finding does not reproduce here; nothing to localize."
            return result
        if not passes or trial(disabled_flag(passes)):
            if not trial(BACKEND_OPTIMIZATION_OFF):  # past the HLO passes, the backend's own (LLVM) optimizations
                result.passes = [BACKEND_OPTIMIZATION_OFF.removeprefix("--")]
                result.summary = (f"Not an HLO pass (disabling all {len(passes)} leaves it), but the backend's optimizations: "
                                  f"with {BACKEND_OPTIMIZATION_OFF} it agrees.")
                return result
            result.summary = (f"Disabling all {len(passes)} HLO passes the compile ran does not remove it, nor does "
                              f"{BACKEND_OPTIMIZATION_OFF}: the cause is outside the optimizations (emitter, runtime, a "
                              "kernel, or a pass XLA does not let us disable).")
            return result
        culprits = _halve(passes, lambda subset: not trial(disabled_flag(subset)))
    except _OutOfTime:
        return _out_of_time(result, seconds)
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


def localize_ort(case: Case, backend: str, plugins: list[str], timeout: float, seconds: float | None = None) -> PassVerdict:
    """The lowest ORT graph optimization level at which `backend` fails on `case` (see the module docstring)."""
    from fuzzer.backends.ort import INSTALL_HINT, OPTIMIZATION_ENV, OPTIMIZATION_LEVELS, available_levels

    result = PassVerdict(backend, "ort")
    deadline = None if seconds is None else time.monotonic() + seconds
    try:
        levels = available_levels()
    except ImportError:
        raise UserError(f"Localizing {backend}'s finding needs onnxruntime here; `{INSTALL_HINT}` installs it.") from None
    result.candidates = len(levels)
    try:
        first = next((level for level in levels
                      if _trial(case, backend, plugins, timeout, {OPTIMIZATION_ENV: level}, result, deadline)), None)
    except _OutOfTime:
        return _out_of_time(result, seconds)
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
           result: PassVerdict, deadline: float | None = None) -> bool:
    """Does the finding reproduce with these environment variables (a fresh worker, which reads them at
    start)? A trial gets `timeout`, or what is left before `deadline` (time.monotonic); one that has
    too little left to compile, or that the deadline cut short, is _OutOfTime, not an answer."""
    from fuzzer.running.replay import replay_case

    cut = deadline is not None and deadline - time.monotonic() < timeout
    if cut:
        timeout = deadline - time.monotonic()
        if timeout < LEAST_TRIAL_SECONDS:
            raise _OutOfTime
    result.trials += 1
    with _environment(environment):
        reply = replay_case(case, [backend], plugins, timeout)
    if cut and reply.verdict == verdicts.HANG:
        raise _OutOfTime
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
