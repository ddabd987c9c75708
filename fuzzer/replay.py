"""Re-running stored or exported cases in an isolated worker: `fuzz replay`, `fuzz regress` and
`fuzz known check`."""

from __future__ import annotations

import contextlib
import os
import stat
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable
from xml.etree import ElementTree

from fuzzer import verdicts
from fuzzer.backends import get_backend, name_backend_list
from fuzzer.corpus import Corpus, case_from_export, file_kind, is_finding, load_case_file
from fuzzer.errors import UserError
from fuzzer.ir import Case
from fuzzer.judging.check import Finding
from fuzzer.plugins import canaries_for, load_plugins
from fuzzer.records import CheckReply, ShrinkReply
from fuzzer.running.pipeline import WorkerConfig
from fuzzer.running.workers import SlowCheck, Worker, WorkerDied, WorkerPoisoned, died_in_worker, replay_memory_limit_mb
from fuzzer.shrinking.death_shrink import name_death, shrink_death
from fuzzer.triaging.known import KnownBug, Registry
from fuzzer.triaging.triage import current_signature, same_bucket

EXPECTATIONS = ("agree", "disagree")
NOT_CHECKED = "not-checked"  # a regression file's verdict where NotChecked: neither expectation


class NotChecked(UserError):
    """A case the fuzzer's own work (its reference, oracle or localization) could not check within --timeout:
    not a finding of any backend (a regression run reports it as that file's surprise)."""

    def __init__(self, slow: SlowCheck, done: str = "checked"):
        super().__init__(f"The case was not {done}: {slow.message}; raise --timeout to wait longer.")
        self.why = f"not {done}: {slow.message}"


class Replayer:
    """One warm worker that checks given cases, under the memory limit of a campaign's worker
    (workers.replay_memory_limit_mb); a crash or hang is a result, not an error."""

    def __init__(self, backends: list[str], plugins: list[str], timeout: float = 120.0, reruns: int = 2):
        plugins = list(dict.fromkeys(list(plugins) + canaries_for(backends)))
        load_plugins(plugins)  # the backends' devices decide the default limit
        self.timeout = timeout
        # Named, not imported, here: the worker imports the frameworks the backends need (and refuses one
        # that is not available), this process none of them.
        self.config = WorkerConfig(backends=list(backends), plugins=plugins, reruns=reruns,
                                   memory_limit_mb=replay_memory_limit_mb(name_backend_list(",".join(backends))))
        self.worker = Worker(self.config, spawned=True)

    def request(self, message: tuple):
        """The worker's reply. A request that poisons the worker's device (WorkerPoisoned) runs once more
        in the fresh worker that replaced it, since an earlier request may have left the poison:
        only a second poisoning is the case's own."""
        try:
            return self.worker.request(message, self.timeout, compile_timeout=600.0)
        except WorkerPoisoned:
            return self.worker.request(message, self.timeout, compile_timeout=600.0)

    def check(self, case: Case, backends: list[str]) -> CheckReply:
        """A crash or hang is named after the node that does it alone, as the campaign named it;
        NotChecked where the fuzzer's own work on the case ran past the timeout."""
        try:
            return self.request(("check", case, list(backends)))
        except SlowCheck as slow:
            raise NotChecked(slow) from None
        except WorkerDied as died:
            return CheckReply.died(name_death(self.worker, case, died, self.timeout, compile_timeout=600.0))

    def outputs(self, case: Case, backend: str) -> dict:
        """{"outputs": arrays} or {"error": text}: a crash or hang is the error, never ours."""
        try:
            return self.request(("outputs", case, backend))
        except WorkerDied as died:
            return {"error": f"the backend {'crashed' if died.kind == verdicts.CRASH else 'hung'}: {died.message}"}

    def shrink(self, case: Case, finding: Finding, seconds: float) -> ShrinkReply:
        """The shrink result for one finding of `case` (see Pipeline.shrink); the worker must not die meanwhile."""
        try:
            return self.request(("shrink", case, finding, seconds))
        except SlowCheck as slow:
            raise NotChecked(slow, "shrunk") from None
        except WorkerDied as died:
            verb = "crashed" if died.kind == "crash" else "hung"
            raise UserError(f"Backend {died.backend} {verb} while shrinking ({died.message}); such cases are stored unshrunk.") from None

    def close(self) -> None:
        self.worker.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# The float64 reference as a backend: what `reference_failure` runs in a bounded worker.
REFERENCE_BACKEND = "numpy-ref:cpu:float64"


def reference_failure(replayer: Replayer, case: Case, extra_of: str | None = None) -> tuple[str, bool]:
    """(why the float64 reference of `case` cannot be computed within `replayer`'s time and memory bounds,
    whether those bounds are the cause rather than the framework's own death) or ('', False) when it
    can, found by running it there once; with `extra_of`, that backend's reference of
    its extra outputs too (a gradient's is the framework's own float64 run, which may abort on the
    very case it found: XLA's CHECK failures). The commands that compute it in-process (export,
    report) ask first: a case within the element bounds can still ask for hours of work (a 100x100
    kernel slid over a padding of 3000)."""
    requests = [("its float64 reference", ("outputs", case, REFERENCE_BACKEND))]
    if extra_of is not None and hasattr(get_backend(extra_of), "extra_reference"):
        requests.append((f"the float64 reference of {extra_of}'s extra outputs", ("extra-reference", case, extra_of)))
    for what, request in requests:
        try:
            reply = replayer.request(request)
        except WorkerDied as died:
            if died.kind == verdicts.HANG:
                return f"{what} did not finish within {replayer.timeout:g} s", True
            return f"{what} ended its worker ({died.message})", False
        if reply.get("error", "").startswith("MemoryError"):
            return f"{what} needs more memory than the limit of {replayer.config.memory_limit_mb} MB", True
    return "", False  # another error is the case's own: the command reports it as it would have


def require_bounded_reference(case: Case, case_id: int, plugins: list[str], timeout: float,
                              extra_of: str | None = None) -> None:
    """Raise a UserError when the float64 reference of stored case `case_id` (and `extra_of`'s reference
    of its extra outputs) does not finish within `timeout` seconds and the replaying memory limit
    (see reference_failure)."""
    if extra_of is not None and not hasattr(get_backend(extra_of), "extra_reference"):
        extra_of = None  # no extra outputs: the worker runs numpy alone, without importing the backend's framework
    backends = [REFERENCE_BACKEND] + ([extra_of] if extra_of else [])
    with Replayer(backends, plugins, timeout) as replayer:
        why, by_limits = reference_failure(replayer, case, extra_of)
    if why:
        advice = "raise --timeout or --memory-limit, or" if by_limits else "the minimal script (the default format) needs none for a crash;"
        raise UserError(f"Case {case_id} cannot be exported: {why}; {advice} export it with --format json.")


def replay_case(case: Case, backends: list[str], plugins: list[str], timeout: float = 120.0) -> CheckReply:
    with Replayer(backends, plugins, timeout) as replayer:
        return replayer.check(case, backends)


@dataclass
class RegressionResult:
    path: str
    expect: str
    observed: str
    verdict: str
    signatures: list[str]
    expected_signatures: list[str]  # the recorded findings' buckets, under this release's rules
    seconds: float
    not_checked: str = ""  # why the case could not be checked (NotChecked): a surprise of its own

    @property
    def lost_signatures(self) -> list[str]:
        """Recorded buckets that did not come back (a known bug now found as another bug)."""
        if self.expect != "disagree":
            return []
        return [s for s in self.expected_signatures if not any(same_bucket(s, seen) for seen in self.signatures)]

    @property
    def surprise(self) -> bool:
        return self.expect != self.observed or bool(self.lost_signatures)

    @property
    def why(self) -> str:
        """What the surprise is, in one sentence ('' if none)."""
        if self.not_checked:
            return self.not_checked
        if self.expect != self.observed:
            found = f" ({', '.join(self.signatures)})" if self.signatures else ""
            return f"expected {self.expect}, got {self.verdict}{found}"
        if self.lost_signatures:
            return (f"disagrees, but not as recorded: expected {', '.join(self.lost_signatures)}; "
                    f"got {', '.join(self.signatures) or 'no finding'}")
        return ""

    def to_dict(self) -> dict:
        return {**self.__dict__, "surprise": self.surprise, "why": self.why}


@dataclass
class RegressionCase:
    case: Case
    backends: list[str]
    expect: str
    expected_signatures: list[str]


def load_regression_case(path: Path) -> RegressionCase:
    data = load_case_file(path)
    case = case_from_export(data)
    recorded = data.get("verdict")
    expect = data.get("expect")
    if expect is None and isinstance(recorded, str):
        expect = "agree" if verdicts.passes(recorded) else "disagree"
    if expect not in EXPECTATIONS:
        raise UserError(f"Regression case '{path}' has expect={expect!r} and no recorded verdict to take it from; "
                        "set it to 'agree' or 'disagree'.")
    backends = data.get("backends")
    if not isinstance(backends, list) or not backends or not all(isinstance(b, str) for b in backends):
        raise UserError(f"Regression case '{path}' lists no backends; export it with `fuzz export ID --format json`.")
    findings = data.get("findings", [])
    if not isinstance(findings, list) or not all(is_finding(f) for f in findings):
        raise UserError(f"Regression case '{path}' has malformed 'findings'; export it again with `fuzz export ID --format json`.")
    expected = list(dict.fromkeys(current_signature(f) for f in findings if verdicts.is_bug(f["verdict"])))
    return RegressionCase(case, backends, expect, expected)


def regression_files(directory: Path, warn: Callable[[str], None]) -> list[Path]:
    """The *.json regular files in `directory`, links included if they stay inside it. Anything else
    is never opened: /dev/zero would be read until memory runs out, a FIFO would block for ever."""
    inside = directory.resolve()
    files = []
    for path in sorted(directory.glob("*.json")):
        try:
            target = path.resolve(strict=True)  # through every link
        except (OSError, RuntimeError):  # RuntimeError: a link loop, before Python 3.13
            warn(f"skipped '{path}': a link that leads to no file.")
            continue
        mode = os.lstat(target).st_mode
        if not target.is_relative_to(inside):
            warn(f"skipped '{path}': a link leading out of the folder (to '{target}').")
        elif not stat.S_ISREG(mode):
            warn(f"skipped '{path}': {file_kind(mode)}, not a regular file.")
        else:
            files.append(path)
    return files


def regress(directory: Path, plugins: list[str], timeout: float = 120.0,
            warn: Callable[[str], None] = lambda sentence: None) -> list[RegressionResult]:
    """Check every regression case in `directory` against its expectation; `warn` hears of files skipped."""
    files = regression_files(directory, warn)
    if not files:
        raise UserError(f"No regression cases (*.json) in '{directory}'; export some with `fuzz export ID --format json --expect agree`.")
    loaded = [(path, load_regression_case(path)) for path in files]
    all_backends = sorted({b for _, item in loaded for b in item.backends})
    results = []
    with Replayer(all_backends, plugins, timeout) as replayer:
        for path, item in loaded:
            start = time.perf_counter()
            try:
                reply = replayer.check(item.case, item.backends)
            except NotChecked as slow:  # the other files are still checked
                results.append(RegressionResult(str(path), item.expect, NOT_CHECKED, NOT_CHECKED, [], item.expected_signatures,
                                                round(time.perf_counter() - start, 3), slow.why))
                continue
            observed = "agree" if verdicts.passes(reply.verdict) else "disagree"
            results.append(RegressionResult(str(path), item.expect, observed, reply.verdict,
                                            [f.signature for f in reply.findings], item.expected_signatures,
                                            round(time.perf_counter() - start, 3)))
    return results


def write_junit(results: list[RegressionResult], path: Path) -> None:
    """JUnit XML, one <testcase> per regression file; a surprise is a <failure> saying what differs."""
    suite = ElementTree.Element("testsuite", name="fuzz regress", tests=str(len(results)),
                                failures=str(sum(r.surprise for r in results)), errors="0",
                                time=f"{sum(r.seconds for r in results):.3f}")
    for result in results:
        case = ElementTree.SubElement(suite, "testcase", classname="fuzz.regress", name=Path(result.path).name,
                                      time=f"{result.seconds:.3f}")
        if result.surprise:
            ElementTree.SubElement(case, "failure", message=result.why, type="surprise").text = \
                f"{result.path}: {result.why}"
        ElementTree.SubElement(case, "system-out").text = f"verdict {result.verdict}; signatures: {', '.join(result.signatures) or '-'}"
    ElementTree.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


@dataclass
class KnownCheck:
    """One stored case of a known bug, replayed here: `outcome` is "reproduces" (the entry matches a
    finding), "fixed here" (every backend agrees), "differs" (another finding), "not run" (a backend
    cannot run here, or the check ran past the timeout: NotChecked) or "no case" (the entry stores none, or its case file is not there)."""

    bug: str
    case: str | None
    outcome: str
    detail: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def check_known_bugs(registry: Registry, plugins: list[str], timeout: float = 120.0) -> list[KnownCheck]:
    """Replay every stored case of every entry of `registry` in one worker, in registry order, on the
    case's backends and the backends they derive from: a derived backend that gives its base's wrong
    answer is only `inherited`, and the base's own finding is the bug coming back."""
    planned: list[tuple[KnownBug, Path | None, RegressionCase | None, str]] = []
    for bug in registry.bugs:
        if not bug.cases:
            planned.append((bug, None, None, "the entry stores no case"))
        for path in bug.cases:
            if not path.is_file():  # a registry copied without its folder
                planned.append((bug, path, None, f"its case file {path} is not there"))
                continue
            item = load_regression_case(path)
            backends, why = with_bases(item.backends, plugins)
            planned.append((bug, path, replace(item, backends=backends), why))
    runnable = sorted({b for _, _, item, why in planned if item is not None and not why for b in item.backends})
    results = []
    with contextlib.ExitStack() as stack:
        replayer = stack.enter_context(Replayer(runnable, plugins, timeout)) if runnable else None
        for bug, path, item, why in planned:
            case = str(path) if path else None
            if item is None or why:
                results.append(KnownCheck(bug.id, case, "no case" if item is None else "not run", why))
                continue
            try:
                reply = replayer.check(item.case, item.backends)
            except NotChecked as slow:
                results.append(KnownCheck(bug.id, case, "not run", slow.why))
                continue
            signatures = ", ".join(f.signature for f in reply.findings if verdicts.is_bug(f.verdict))
            if any(bug.matches(f, item.case.graph) for f in reply.findings):
                results.append(KnownCheck(bug.id, case, "reproduces", signatures))
            elif verdicts.passes(reply.verdict):
                results.append(KnownCheck(bug.id, case, "fixed here", f"every backend agrees now ({', '.join(item.backends)})"))
            else:
                results.append(KnownCheck(bug.id, case, "differs", f"not as the entry says: {signatures}"))
    return results


def with_bases(backends: list[str], plugins: list[str]) -> tuple[list[str], str]:
    """(`backends` and the backends they derive from, why one of them cannot run here or '')."""
    from fuzzer.backends import get_backend
    from fuzzer.plugins import load_plugins

    load_plugins(list(plugins) + canaries_for(backends))
    names = list(backends)
    for name in names:  # grows while it runs: a base's own base
        try:
            backend = get_backend(name)
            reason = backend.unavailable_reason()
        except UserError as exc:
            backend, reason = None, str(exc)
        if reason:
            return names, f"{name}: {reason}"
        if backend.derived_from and backend.derived_from not in names:
            names.append(backend.derived_from)
    return names, ""


def reshrink_stored(corpus: Corpus, case_id: int, plugins: list[str], seconds: float) -> dict:
    """Shrink a stored case again for its primary finding and store the result linked to it.

    The case is checked again first and shrunk for the finding as this release sees it: one
    stored by an older release, under other localization rules (a fused backend's culprit was
    once named after its fused prefix, `softmax@fused`), would otherwise keep an old signature
    that no smaller case can match, and not shrink at all."""
    stored = corpus.get_case(case_id)
    recorded = next((f for f in stored.findings if f["signature"] == stored.signature), None)
    if recorded is None:
        raise UserError(f"Case {case_id} has no finding to shrink for; pick a case listed with a verdict by `fuzz list`.")
    finding = Finding.from_dict(recorded)
    with Replayer([finding.backend], plugins) as replayer:
        if died_in_worker(finding):  # shrunk from here, each candidate in a fresh worker with a short hang timeout
            died = WorkerDied(finding.verdict, finding.backend, finding.error)
            death = shrink_death(replayer.worker, stored.case, died, seconds, replayer.timeout, compile_timeout=600.0)
            result = death.shrunk if death else None
        else:
            now = replayer.check(stored.case, [finding.backend]).findings
            finding = next((f for f in now if f.backend == finding.backend), finding)
            result = replayer.shrink(stored.case, finding, seconds)
    if result is None or not result.findings:
        raise UserError(f"Case {case_id} no longer reproduces on {finding.backend}; nothing to shrink.")
    new_id = corpus.add_case(result.record(campaign_id=stored.campaign_id, shrunk_from=case_id))
    # `fuzz shrink --json` prints this as it is
    return {"id": new_id, "shrunk_from": case_id, "log": result.log, "ops": result.case.graph.op_names()}
