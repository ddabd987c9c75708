"""What the report shows, read from the corpus into plain dataclasses.

Everything the plots and the pages need is counted here, once, so that plots.py only draws
and render.py only formats. Values read from the corpus are kept as they are stored (a
corpus may hold text of any kind); render.py escapes them.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
from dataclasses import dataclass
from typing import Any

from fuzzer import verdicts
from fuzzer.corpus import Corpus
from fuzzer.drawing.regions import coverage
from fuzzer.errors import UserError

SCRIPT_LIMIT = 60_000  # characters of one reproducer shown whole; a longer one is left to `fuzz export`


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _time(text: Any) -> datetime.datetime | None:
    """An ISO timestamp from the corpus, as aware UTC; None if it is not one."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)


@dataclass
class CampaignRow:
    id: int
    status: str
    versions: dict
    started: datetime.datetime | None
    seconds: float | None
    graphs: int
    cases: int
    finding_cases: int
    graphs_per_second: float | None
    workers: Any
    backends: list[str]
    op_counts: dict[str, int]
    # Per backend, op -> graphs with the op that it ran; None for campaigns from before it was
    # recorded (their coverage credits every backend with every graph).
    backend_op_counts: dict[str, dict[str, int]] | None
    backend_seconds: dict[str, float]
    # Region keys (fuzzer/drawing/regions.py): {"declared", "covered", "never_reached"}; None before they were recorded.
    regions: dict | None = None
    pairs: dict | None = None  # the same for the pairs of keys of one node (fuzzer/drawing/region_pairs.py)


@dataclass
class BucketRow:
    """One bucket, its representative case and that case's reproducer (or the graph and why not)."""

    index: int
    verdict: Any
    backend: Any
    culprit: Any
    signature: Any
    count: Any
    first_seen: Any  # as stored; first_seen_at is the same moment parsed (None if it is no timestamp)
    first_seen_at: datetime.datetime | None
    last_seen: Any
    last_seen_at: datetime.datetime | None
    status: Any
    note: Any
    compiler_pass: str | None = None  # what `fuzz localize` named for a compiler bucket (fuzzer/triaging/pass_bisect.py)
    case_id: int | None = None
    shrunk_from: int | None = None
    op_sequence: str = ""
    max_error: float | None = None  # of the representative case's finding with the bucket's signature
    allowed: float | None = None
    detail: Any = None
    script: str | None = None
    fallback: str | None = None  # graph JSON, when no script could be built
    why_no_script: str | None = None

    @property
    def precision_policy(self) -> bool:
        """Explained as no bug (a precision policy, a derived backend's inherited finding): kept apart."""
        return not verdicts.is_bug(str(self.verdict))


@dataclass
class Discovery:
    """When findings and buckets appeared, in seconds since the first campaign or case."""

    finding_cases: list[float]  # generated cases with a finding
    bug_buckets: list[float]  # each bucket's first_seen, split as the page splits them (BucketRow.precision_policy)
    policy_buckets: list[float]
    campaign_starts: list[float]
    end: float


@dataclass
class ErrorRatios:
    """Per backend, the findings of generated cases: max error / allowed with the verdict, and how many were inf."""

    finite: dict[str, list[tuple[float, str]]]
    infinite: dict[str, int]


@dataclass
class Coverage:
    """graphs: graphs containing the op that the backend ran (checkpoint backend_op_counts; campaigns
    from before it was recorded: every graph of a campaign that listed the backend, op_counts);
    findings: findings of generated cases whose culprit is the op, by the finding's backend."""

    ops: list[str]
    backends: list[str]
    graphs: dict[tuple[str, str], int]
    findings: dict[tuple[str, str], int]


@dataclass
class ReportData:
    db: str
    generated: str
    campaigns: list[CampaignRow]
    buckets: list[BucketRow]
    finding_cases: int  # generated cases with a finding
    shrunk_cases: int
    stats: dict  # Corpus.stats(), what `fuzz stats` prints: the page's totals are these
    discovery: Discovery | None  # None when nothing has a timestamp
    error_ratios: ErrorRatios
    coverage: Coverage


def _campaign_row(row: dict) -> CampaignRow:
    config = row.get("config") if isinstance(row.get("config"), dict) else {}
    checkpoint = row.get("checkpoint") if isinstance(row.get("checkpoint"), dict) else {}
    versions = row.get("versions") if isinstance(row.get("versions"), dict) else {}
    started, ended = _time(row.get("started")), _time(row.get("ended"))
    seconds = _float(checkpoint.get("elapsed"))
    if seconds is None and started and ended:
        seconds = (ended - started).total_seconds()
    graphs = int(_float(checkpoint.get("graphs")) or _float(row.get("cases_run")) or 0)
    rate = graphs / seconds if seconds else None
    op_counts = checkpoint.get("op_counts") if isinstance(checkpoint.get("op_counts"), dict) else {}
    per_backend = checkpoint.get("backend_op_counts")
    backend_op_counts = None
    if isinstance(per_backend, dict):
        backend_op_counts = {str(name): {str(op): int(_float(n) or 0) for op, n in ops.items()}
                             for name, ops in per_backend.items() if isinstance(ops, dict)}
    backend_seconds = checkpoint.get("backend_seconds") if isinstance(checkpoint.get("backend_seconds"), dict) else {}
    backends = config.get("backends") if isinstance(config.get("backends"), list) else []
    regions, pairs = (_coverage_of(checkpoint.get(declared), checkpoint.get(counts))
                      for declared, counts in (("regions_declared", "region_counts"), ("pairs_declared", "pair_counts")))
    return CampaignRow(
        id=row["id"],
        status=str(row.get("status")),
        versions=versions,
        started=started,
        seconds=seconds,
        graphs=graphs,
        cases=int(_float(checkpoint.get("checked")) or 0),
        finding_cases=int(_float(checkpoint.get("finding_cases")) or _float(row.get("findings")) or 0),
        graphs_per_second=rate,
        workers=config.get("workers", "-"),
        backends=[str(b) for b in backends],
        op_counts={str(k): int(_float(v) or 0) for k, v in op_counts.items()},
        backend_op_counts=backend_op_counts,
        backend_seconds={str(k): _float(v) or 0.0 for k, v in backend_seconds.items()},
        regions=regions,
        pairs=pairs,
    )


def _coverage_of(declared, covered) -> dict | None:
    """A checkpoint's declared keys (or pairs) and their counts as coverage; None where it recorded none."""
    if not (isinstance(declared, list) and declared and isinstance(covered, dict)):
        return None
    return coverage([str(k) for k in covered], [str(k) for k in declared])


def _bucket_row(index: int, bucket: dict) -> BucketRow:
    return BucketRow(
        index=index,
        verdict=bucket.get("verdict"),
        backend=bucket.get("backend"),
        culprit=bucket.get("culprit"),
        signature=bucket.get("signature"),
        count=bucket.get("count"),
        first_seen=bucket.get("first_seen"),
        first_seen_at=_time(bucket.get("first_seen")),
        last_seen=bucket.get("last_seen"),
        last_seen_at=_time(bucket.get("last_seen")),
        status=bucket.get("status"),
        note=bucket.get("note"),
        compiler_pass=_compiler_pass(bucket.get("localization")),
    )


def _compiler_pass(localization: Any) -> str | None:
    """The pass a bucket's stored localization names; None for none, or for a row the report cannot read."""
    from fuzzer.triaging.buckets import pass_label
    from fuzzer.triaging.pass_bisect import stored_localization

    try:
        stored = stored_localization(localization if isinstance(localization, str) else None)
    except UserError:
        return None
    return pass_label(stored["passes"]) if stored else None


def _add_reproducer(corpus: Corpus, row: BucketRow, representative: Any, members: set[str], bounded) -> None:
    """Fill in the row's representative case, its finding (one of the bucket's `members`: it may be
    on another dtype than the bucket's first finding) and its reproducer (or the graph and why not).

    The script is the minimal reproducer that `fuzz export` writes (fuzzer.reproducers.minimal_reproducer), so
    the report never shows a reproducer that the export would not give. It computes the float64
    reference in-process, so that runs first in `bounded` (a replay.Replayer): one the bounds stop
    gets no script. One too long to show whole (its inputs embedded) is not shown cut.
    """
    from fuzzer.backends import get_backend
    from fuzzer.plugins import canaries_for, load_plugins
    from fuzzer.reproducers.minimal_reproducer import build_minimal_script
    from fuzzer.running.replay import reference_failure

    if representative is None:
        row.why_no_script = "the bucket has no representative case stored."
        return
    try:
        stored = corpus.get_case(int(representative))
    except UserError as exc:
        row.why_no_script = str(exc)
        return
    row.case_id, row.shrunk_from, row.op_sequence = stored.id, stored.shrunk_from, stored.op_sequence
    finding = next((f for f in stored.findings if isinstance(f, dict) and f.get("signature") in members), None)
    if finding:
        row.max_error, row.allowed, row.detail = _float(finding.get("max_error")), _float(finding.get("allowed")), finding.get("detail")
    name = str(finding.get("backend") if finding else row.backend)
    try:
        load_plugins(canaries_for([name]))  # shipped canaries only: a corpus never makes us import a file
        why_not, by_limits = reference_failure(bounded, stored.case, extra_of=name)
        if by_limits:
            why_not += f"; `fuzz export {stored.id} --timeout SECONDS` gives it more time"
        if not why_not:
            script = build_minimal_script(stored.case, get_backend(name), str(row.signature), finding)
    except Exception as exc:  # noqa: BLE001 - one bucket without a script must not cost the whole report
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        why_not = f"building a script for backend '{name}' failed: {type(exc).__name__}: {message}"[:500]
    if why_not:
        row.why_no_script = why_not
        row.fallback = json.dumps(stored.case.graph.to_dict(), indent=1, sort_keys=True)
        return
    if len(script) > SCRIPT_LIMIT:
        row.why_no_script = (f"the reproducer is {len(script)} characters long (its inputs are embedded); "
                             f"`fuzz export {stored.id} -o repro.py` writes it.")
        return
    row.script = script


def _original_findings(cases: list[dict]):
    """(case, finding) for every finding of every generated (not shrunk) case."""
    for case in cases:
        if case.get("shrunk_from") is None:
            for finding in case.get("findings") or []:
                if isinstance(finding, dict):
                    yield case, finding


def _discovery(campaigns: list[CampaignRow], cases: list[dict], buckets: list[BucketRow]) -> Discovery | None:
    """The curves, counted as the page counts: each bucket once, at its first_seen (one without a
    timestamp at the start), a bug or a precision-policy bucket as its row says."""
    starts = [c.started for c in campaigns if c.started] + [t for t in (_time(c["created"]) for c in cases) if t]
    if not starts:
        return None
    origin = min(starts)
    finding_cases = [(moment - origin).total_seconds() for moment in (_time(c.get("created")) for c in cases
                     if c.get("shrunk_from") is None and c.get("signature") is not None) if moment]
    firsts = {row.index: max(0.0, (row.first_seen_at - origin).total_seconds()) if row.first_seen_at else 0.0 for row in buckets}
    bug_buckets = [firsts[row.index] for row in buckets if not row.precision_policy]
    policy_buckets = [firsts[row.index] for row in buckets if row.precision_policy]
    runs = [((c.started - origin).total_seconds(), c.seconds) for c in campaigns if c.started]
    end = max([0.0] + finding_cases + list(firsts.values()) + [start + (seconds or 0) for start, seconds in runs])
    return Discovery(finding_cases, bug_buckets, policy_buckets, [start for start, _ in runs], end)


def _error_ratios(cases: list[dict]) -> ErrorRatios:
    finite: dict[str, list[tuple[float, str]]] = {}
    infinite: dict[str, int] = {}
    for _, finding in _original_findings(cases):
        backend = str(finding.get("backend"))
        error, allowed = _float(finding.get("max_error")), _float(finding.get("allowed"))
        if error is None or not allowed or allowed <= 0:
            if error is not None and math.isinf(error):
                infinite[backend] = infinite.get(backend, 0) + 1
            continue
        if math.isinf(error):
            infinite[backend] = infinite.get(backend, 0) + 1
        elif error > 0:
            finite.setdefault(backend, []).append((error / allowed, str(finding.get("verdict"))))
    return ErrorRatios(finite, infinite)


def _coverage(campaigns: list[CampaignRow], cases: list[dict]) -> Coverage:
    graphs: dict[tuple[str, str], int] = {}
    findings: dict[tuple[str, str], int] = {}
    backends: list[str] = []
    for campaign in campaigns:
        for backend in campaign.backends:
            if backend not in backends:
                backends.append(backend)
            ran = campaign.op_counts if campaign.backend_op_counts is None else campaign.backend_op_counts.get(backend, {})
            for op, count in ran.items():
                graphs[(op, backend)] = graphs.get((op, backend), 0) + count
    for _, finding in _original_findings(cases):
        key = (str(finding.get("culprit")), str(finding.get("backend")))
        findings[key] = findings.get(key, 0) + 1
        if key[1] not in backends:
            backends.append(key[1])
    ops = sorted({op for op, _ in graphs} | {op for op, _ in findings})
    return Coverage(ops, backends, graphs, findings)


def gather(corpus: Corpus, reference_timeout: float = 300.0) -> ReportData:
    """Everything the report shows; UserError when the corpus has neither campaigns nor cases.
    A bucket's reference that runs past `reference_timeout` seconds gets no script."""
    from fuzzer.running.replay import REFERENCE_BACKEND, Replayer

    campaigns = [_campaign_row(row) for row in corpus.campaigns()]
    cases = corpus.list_cases(limit=10**9)
    if not campaigns and not cases:
        raise UserError(f"The corpus '{corpus.path}' has no campaigns or cases yet; run `fuzz run` first.")
    cases.sort(key=lambda c: c["id"])
    rows = []
    buckets = corpus.buckets()
    with contextlib.ExitStack() as stack:
        bounded = stack.enter_context(Replayer([REFERENCE_BACKEND], [], reference_timeout)) if buckets else None
        for index, bucket in enumerate(buckets, start=1):
            row = _bucket_row(index, bucket)
            _add_reproducer(corpus, row, bucket.get("representative"), {m["signature"] for m in bucket["members"]}, bounded)
            rows.append(row)
    return ReportData(
        db=str(corpus.path),
        generated=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        campaigns=campaigns,
        buckets=rows,
        finding_cases=sum(1 for c in cases if c.get("shrunk_from") is None and c.get("signature") is not None),
        shrunk_cases=sum(1 for c in cases if c.get("shrunk_from") is not None),
        stats=corpus.stats(),
        discovery=_discovery(campaigns, cases, rows),
        error_ratios=_error_ratios(cases),
        coverage=_coverage(campaigns, cases),
    )
