"""`fuzz report`: one self-contained static HTML file (and a Markdown summary) for a corpus.

The HTML has its CSS inline and its plots inline as base64 PNG data URIs, so it
opens anywhere without a network. It shows the campaigns, one row per finding
bucket (bugs apart from precision-policy findings, which are a GPU precision
setting, not a bug), each bucket's representative (shrunk) case as a standalone
reproducer, and plots when matplotlib is importable (`pip install 'fuzzer[report]'`):
the discovery curve, error magnitude per backend, an op x backend coverage
matrix and throughput.

Everything read from the corpus is untrusted: every piece of it goes through
html.escape (or md_cell for the Markdown) and nothing from it becomes a link,
an attribute name or a file to import.
"""

from __future__ import annotations

import base64
import datetime
import html
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuzzer.corpus import Corpus
from fuzzer.errors import UserError

from fuzzer import verdicts

NO_PLOTS = "plots need matplotlib: pip install 'fuzzer[report]'"
SCRIPT_LIMIT = 60_000  # characters of one reproducer shown; the rest is `fuzz export`'s job
VERSION_KEYS = ("python", "torch", "jax", "numpy", "cuda", "device")


# ---------------------------------------------------------------- small helpers


def esc(value: Any) -> str:
    """Corpus text -> safe HTML text (quotes too, so it is safe in attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def md_cell(value: Any) -> str:
    """Corpus text -> one Markdown table cell: no pipes, newlines or raw HTML."""
    text = "" if value is None else str(value)
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(text.split()) or "-"


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


def _duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _number(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:.{digits}g}"


def _short_time(text: Any) -> str:
    """'2026-11-23T07:41:34+00:00' -> '2026-11-23 07:41:34' (UTC); other text as it is."""
    moment = _time(text)
    if moment is None:
        return "" if text is None else str(text)
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _error_text(finding: dict | None) -> str:
    """'3.1 (allowed 2e-05, 1.6e+05x)' from a stored finding; '-' when it has no error numbers."""
    if not finding:
        return "-"
    error, allowed = _float(finding.get("max_error")), _float(finding.get("allowed"))
    if error is None or (error == 0 and not allowed):
        return "-"
    if allowed is None:
        return _number(error)
    if allowed <= 0:
        return f"{_number(error)} (allowed {_number(allowed)})"
    return f"{_number(error)} (allowed {_number(allowed)}, {_number(error / allowed, 2)}x)"


# ---------------------------------------------------------------- gathering the data


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
    backend_seconds: dict[str, float]


@dataclass
class BucketRow:
    index: int
    bucket: dict
    finding: dict | None = None  # the representative case's finding with the bucket's signature
    case_id: int | None = None
    shrunk_from: int | None = None
    op_sequence: str = ""
    script: str | None = None
    fallback: str | None = None  # graph JSON, when no script could be built
    why_no_script: str | None = None

    @property
    def precision_policy(self) -> bool:
        """Explained as no bug (a precision policy, a derived backend's inherited finding): kept apart."""
        return not verdicts.is_bug(str(self.bucket.get("verdict")))


@dataclass
class ReportData:
    db: str
    generated: str
    campaigns: list[CampaignRow]
    buckets: list[BucketRow]
    cases: list[dict]
    plots: dict[str, str] = field(default_factory=dict)  # title -> base64 PNG
    plots_missing: str | None = None


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
    backend_seconds = checkpoint.get("backend_seconds") if isinstance(checkpoint.get("backend_seconds"), dict) else {}
    backends = config.get("backends") if isinstance(config.get("backends"), list) else []
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
        backend_seconds={str(k): _float(v) or 0.0 for k, v in backend_seconds.items()},
    )


def _reproducer(corpus: Corpus, row: BucketRow) -> None:
    """Fill in the row's representative case, its finding and its reproducer (or the graph and why not)."""
    from fuzzer.backends import get_backend
    from fuzzer.plugins import canaries_for, load_plugins
    from fuzzer.reproducer import build_script

    representative = row.bucket.get("representative")
    if representative is None:
        row.why_no_script = "the bucket has no representative case stored."
        return
    try:
        stored = corpus.get_case(int(representative))
    except UserError as exc:
        row.why_no_script = str(exc)
        return
    row.case_id, row.shrunk_from, row.op_sequence = stored.id, stored.shrunk_from, stored.op_sequence
    row.finding = next((f for f in stored.findings if isinstance(f, dict) and f.get("signature") == row.bucket["signature"]), None)
    name = str(row.bucket.get("backend"))
    try:
        load_plugins(canaries_for([name]))  # shipped canaries only: a corpus never makes us import a file
        script = build_script(stored.case, get_backend(name), str(row.bucket["signature"]))
    except Exception as exc:  # noqa: BLE001 - one bucket without a script must not cost the whole report
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        row.why_no_script = f"building a script for backend '{name}' failed: {type(exc).__name__}: {message}"[:500]
        row.fallback = json.dumps(stored.case.graph.to_dict(), indent=1, sort_keys=True)
        return
    if len(script) > SCRIPT_LIMIT:
        script = (script[:SCRIPT_LIMIT] + f"\n\n# ... truncated at {SCRIPT_LIMIT} characters: "
                  f"fuzz export {stored.id} --format script -o repro.py writes the whole file.\n")
    row.script = script


def gather(corpus: Corpus, with_plots: bool = True, reproducers: bool = True) -> ReportData:
    campaigns = [_campaign_row(row) for row in corpus.campaigns()]
    cases = corpus.list_cases(limit=10**9)
    if not campaigns and not cases:
        raise UserError(f"The corpus '{corpus.path}' has no campaigns or cases yet; run `fuzz run` first.")
    cases.sort(key=lambda c: c["id"])
    rows = [BucketRow(i, bucket) for i, bucket in enumerate(corpus.buckets(), start=1)]
    for row in rows:
        if reproducers:
            _reproducer(corpus, row)
    data = ReportData(
        db=str(corpus.path),
        generated=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        campaigns=campaigns,
        buckets=rows,
        cases=cases,
    )
    if with_plots:
        data.plots, data.plots_missing = make_plots(data)
    else:
        data.plots_missing = NO_PLOTS
    return data


# ---------------------------------------------------------------- plots


def _original_findings(cases: list[dict]):
    """(case, finding) for every finding of every generated (not shrunk) case."""
    for case in cases:
        if case.get("shrunk_from") is None:
            for finding in case.get("findings") or []:
                if isinstance(finding, dict):
                    yield case, finding


def _png(fig) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _plot_discovery(data: ReportData, Figure):
    starts = [c.started for c in data.campaigns if c.started] + [t for t in (_time(c["created"]) for c in data.cases) if t]
    if not starts:
        return None
    origin = min(starts)
    bug_times, bucket_times, policy_times, seen = [], [], [], set()
    for case in data.cases:
        moment = _time(case.get("created"))
        if moment is None:
            continue
        t = (moment - origin).total_seconds()
        findings = [f for f in case.get("findings") or [] if isinstance(f, dict)]
        if case.get("shrunk_from") is None and case.get("signature") is not None:
            bug_times.append(t)
        for finding in findings:
            signature = finding.get("signature")
            if signature not in seen:
                seen.add(signature)
                (bucket_times if verdicts.is_bug(str(finding.get("verdict"))) else policy_times).append(t)
    end = max([0.0] + bug_times + [((c.started - origin).total_seconds() + (c.seconds or 0)) for c in data.campaigns if c.started])
    span = max(end, 1.0)
    unit, scale = ("h", 3600) if span > 7200 else ("min", 60) if span > 120 else ("s", 1)
    fig = Figure(figsize=(6.4, 3.4))
    ax = fig.add_subplot()
    for times, label, style in ((bug_times, "cases with findings", "-"), (bucket_times, "buckets (bugs)", "-"),
                                (policy_times, "precision-policy buckets", "--")):
        if times or label != "precision-policy buckets":
            xs = [0.0] + sorted(times) + [end]
            ys = [0] + list(range(1, len(times) + 1)) + [len(times)]
            ax.step([x / scale for x in xs], ys, where="post", linestyle=style, label=f"{label} ({len(times)})")
    for campaign in data.campaigns:
        if campaign.started:
            ax.axvline((campaign.started - origin).total_seconds() / scale, color="0.75", linewidth=0.8, zorder=0)
    ax.set_xlabel(f"time since the first campaign started ({unit}); grey lines: campaign starts")
    ax.set_ylabel("cumulative count")
    ax.set_title("Discovery: findings and buckets over time")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def _plot_errors(data: ReportData, Figure):
    by_backend: dict[str, list[tuple[float, str]]] = {}
    infinite: dict[str, int] = {}
    for _, finding in _original_findings(data.cases):
        backend = str(finding.get("backend"))
        error, allowed = _float(finding.get("max_error")), _float(finding.get("allowed"))
        if error is None or not allowed or allowed <= 0:
            if error is not None and math.isinf(error):
                infinite[backend] = infinite.get(backend, 0) + 1
            continue
        if math.isinf(error):
            infinite[backend] = infinite.get(backend, 0) + 1
        elif error > 0:
            by_backend.setdefault(backend, []).append((error / allowed, str(finding.get("verdict"))))
    names = sorted(set(by_backend) | set(infinite))
    if not names:
        return None
    fig = Figure(figsize=(6.4, max(2.4, 0.45 * len(names) + 1.4)))
    ax = fig.add_subplot()
    verdicts = sorted({v for points in by_backend.values() for _, v in points})
    colors = {v: f"C{i}" for i, v in enumerate(verdicts)}
    labelled: set[str] = set()
    for row, name in enumerate(names):
        points = by_backend.get(name, [])
        for verdict in verdicts:
            xs = [x for x, v in points if v == verdict]
            if xs:
                jitter = [row + 0.25 * math.sin(7.3 * i) for i in range(len(xs))]  # deterministic spread
                ax.scatter(xs, jitter, s=16, alpha=0.7, color=colors[verdict],
                           label=None if verdict in labelled else verdict)
                labelled.add(verdict)
    ax.set_xscale("log")
    ax.axvline(1.0, color="k", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(names)), [f"{n}" + (f"  (+{infinite[n]} inf)" if n in infinite else "") for n in names], fontsize=8)
    ax.set_ylim(-0.6, len(names) - 0.4)
    ax.invert_yaxis()
    ax.set_xlabel("max error / allowed error (log; dashed: the tolerance)")
    ax.set_title("Error magnitude per backend (findings of generated cases)")
    ax.grid(alpha=0.3, axis="x")
    if verdicts:
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=min(4, len(verdicts)), frameon=False)
    return fig


def coverage(data: ReportData) -> tuple[list[str], list[str], dict, dict]:
    """(ops, backends, graphs[(op, backend)], findings[(op, backend)]).

    graphs: graphs containing the op in campaigns that ran the backend (checkpoint op_counts);
    findings: findings of generated cases whose culprit is the op, by the finding's backend.
    """
    graphs: dict[tuple[str, str], int] = {}
    findings: dict[tuple[str, str], int] = {}
    backends: list[str] = []
    for campaign in data.campaigns:
        for backend in campaign.backends:
            if backend not in backends:
                backends.append(backend)
            for op, count in campaign.op_counts.items():
                graphs[(op, backend)] = graphs.get((op, backend), 0) + count
    for _, finding in _original_findings(data.cases):
        key = (str(finding.get("culprit")), str(finding.get("backend")))
        findings[key] = findings.get(key, 0) + 1
        if key[1] not in backends:
            backends.append(key[1])
    ops = sorted({op for op, _ in graphs} | {op for op, _ in findings})
    return ops, backends, graphs, findings


def _plot_coverage(data: ReportData, Figure):
    import numpy as np
    from matplotlib.colors import LogNorm

    ops, backends, graphs, findings = coverage(data)
    if not ops or not backends:
        return None
    matrix = np.ma.masked_equal(np.array([[graphs.get((o, b), 0) for o in ops] for b in backends], dtype=float), 0)
    fig = Figure(figsize=(max(7.0, 0.36 * len(ops) + 3.5), max(2.6, 0.32 * len(backends) + 1.9)))
    ax = fig.add_subplot()
    if matrix.count():
        image = ax.imshow(matrix, aspect="auto", cmap="Blues", norm=LogNorm(vmin=1, vmax=max(2, matrix.max())))
        fig.colorbar(image, ax=ax, label="graphs with the op", pad=0.015, fraction=0.03)
    else:
        ax.imshow(np.zeros((len(backends), len(ops))), aspect="auto", cmap="Greys", vmin=0, vmax=1)
    for i, backend in enumerate(backends):
        for j, op in enumerate(ops):
            count = findings.get((op, backend))
            if count:
                ax.text(j, i, str(count), ha="center", va="center", fontsize=7, color="white", fontweight="bold",
                        bbox={"boxstyle": "round,pad=0.15", "facecolor": "#c0392b", "edgecolor": "none"})
    ax.set_xticks(range(len(ops)), [o if o != "-" else "(no culprit)" for o in ops], rotation=55, ha="right", fontsize=8)
    ax.set_yticks(range(len(backends)), backends, fontsize=8)
    ax.set_title("Coverage: graphs per op x backend (blue); findings by culprit op (red)")
    return fig


def _plot_throughput(data: ReportData, Figure):
    campaigns = [c for c in data.campaigns if c.graphs_per_second is not None]
    seconds: dict[str, float] = {}
    for campaign in data.campaigns:
        for backend, value in campaign.backend_seconds.items():
            seconds[backend] = seconds.get(backend, 0.0) + value
    if not campaigns and not seconds:
        return None
    fig = Figure(figsize=(9.5, max(2.6, 0.3 * len(seconds) + 1.4)))
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.6]})
    labels = [f"#{c.id}" for c in campaigns]
    values = [c.graphs_per_second for c in campaigns]
    bars = left.bar(labels, values, color="C0", width=0.5)
    left.bar_label(bars, [f"{v:.2f}" for v in values], fontsize=8)
    left.set_ylabel("graphs / s")
    left.set_xlabel("campaign")
    left.set_title("Throughput per campaign")
    left.margins(x=0.3 if len(labels) < 3 else 0.05, y=0.15)
    names = sorted(seconds, key=seconds.get)
    right.barh(names, [seconds[n] for n in names], color="C1")
    right.set_xlabel("seconds spent running the backend (all campaigns)")
    right.tick_params(axis="y", labelsize=8)
    right.set_title("Time per backend")
    fig.tight_layout()
    return fig


PLOTS = (
    ("Discovery curve", _plot_discovery),
    ("Error magnitude per backend", _plot_errors),
    ("Coverage: op x backend", _plot_coverage),
    ("Throughput", _plot_throughput),
)


def make_plots(data: ReportData) -> tuple[dict[str, str], str | None]:
    """({title: base64 PNG}, None), or ({}, why) when matplotlib is not importable."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return {}, NO_PLOTS
    plots = {}
    for title, draw in PLOTS:
        fig = draw(data, Figure)
        if fig is not None:
            plots[title] = _png(fig)
    return plots, None


# ---------------------------------------------------------------- HTML

CSS = """
:root { --fg:#1f2328; --muted:#656d76; --line:#d0d7de; --bg2:#f6f8fa; --bug:#c0392b; --warn:#b7791f; --ok:#2f855a; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color: var(--fg);
       margin: 0 auto; padding: 20px 28px 60px; max-width: 1500px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 34px 0 10px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 0 0 6px; }
.muted { color: var(--muted); } .small { font-size: 12px; }
nav a { margin-right: 14px; }
a { color: #0969da; text-decoration: none; } a:hover { text-decoration: underline; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; margin: 14px 0; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 8px 14px; min-width: 120px; background: #fff; }
.card b { display: block; font-size: 22px; } .card span { color: var(--muted); font-size: 12px; }
.table-wrap { overflow-x: auto; border: 1px solid var(--line); border-radius: 6px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 5px 6px; text-align: left; vertical-align: top; border-bottom: 1px solid var(--line); }
th { background: var(--bg2); font-weight: 600; white-space: nowrap; position: sticky; top: 0; }
tr:nth-child(even) td { background: #fbfcfd; } tr:target td { background: #fff8c5; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.nowrap { white-space: nowrap; }
td.sig { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; overflow-wrap: anywhere; min-width: 170px; max-width: 260px; }
td.note { min-width: 170px; max-width: 320px; overflow-wrap: anywhere; font-size: 13px; }
td.versions { font-size: 12px; white-space: nowrap; }
.badge { display: inline-block; padding: 1px 7px; border-radius: 10px; font-size: 12px; font-weight: 600; color: #fff; background: var(--bug); white-space: nowrap; }
.badge.precision-policy { background: var(--warn); } .badge.crash, .badge.hang { background: #6f42c1; }
.badge.status { background: #eaeef2; color: var(--fg); font-weight: 500; }
.badge.status.new { background: #ddf4ff; } .badge.status.confirmed, .badge.status.reported { background: #fff1c2; }
.badge.status.fixed { background: #dafbe1; } .badge.status.wontfix, .badge.status.flaky { background: #eaeef2; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 16px; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 8px; background: #fff; }
figure.wide { grid-column: 1 / -1; }
figure img { display: block; max-width: 100%; height: auto; margin: 0 auto; }
figcaption { font-size: 12px; color: var(--muted); margin-top: 4px; }
.noplots { padding: 14px; border: 1px dashed var(--line); border-radius: 6px; background: var(--bg2); }
.repro { border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; margin: 14px 0; }
.repro:target { border-color: #d4a72c; box-shadow: 0 0 0 2px #fff1c2; }
pre { background: var(--bg2); border: 1px solid var(--line); border-radius: 6px; padding: 10px; margin: 8px 0 0;
      overflow: auto; max-height: 420px; font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre; tab-size: 4; }
.why { color: var(--warn); }
details > summary { cursor: pointer; color: var(--muted); }
.empty { color: var(--muted); font-style: italic; }
"""


def _verdict_badge(verdict: Any) -> str:
    return f'<span class="badge {esc(verdict)}">{esc(verdict)}</span>'


def _status_badge(status: Any) -> str:
    return f'<span class="badge status {esc(status)}">{esc(status)}</span>'


def _campaign_table(data: ReportData) -> str:
    if not data.campaigns:
        return '<p class="empty">No campaigns: the cases were imported.</p>'
    head = ("id", "status", "versions", "duration", "graphs", "cases", "finding cases", "graphs/s", "workers", "backends")
    rows = []
    for c in data.campaigns:
        versions = "<br>".join(f"{esc(k)} {esc(c.versions.get(k) if c.versions.get(k) is not None else '-')}" for k in VERSION_KEYS)
        started = c.started.strftime("%Y-%m-%d %H:%M:%S UTC") if c.started else "-"
        rows.append(
            f"<tr><td class=num>#{esc(c.id)}</td><td>{esc(c.status)}<div class='muted small'>{esc(started)}</div></td>"
            f"<td class=versions>{versions}</td><td class=num>{esc(_duration_text(c.seconds))}</td>"
            f"<td class=num>{c.graphs}</td><td class=num>{c.cases}</td><td class=num>{c.finding_cases}</td>"
            f"<td class=num>{esc(_number(c.graphs_per_second))}</td><td class=num>{esc(c.workers)}</td>"
            f"<td class=small>{'<br>'.join(esc(b) for b in c.backends) or '-'}</td></tr>"
        )
    return _table(head, rows)


def _table(head, rows) -> str:
    return ("<div class=table-wrap><table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head)
            + "</tr></thead><tbody>" + "\n".join(rows) + "</tbody></table></div>")


def _bucket_table(rows: list[BucketRow], empty: str) -> str:
    if not rows:
        return f'<p class="empty">{esc(empty)}</p>'
    head = ("#", "verdict", "backend", "culprit", "signature", "count", "first / last seen (UTC)", "status", "note",
            "max error", "reproducer")
    out = []
    for row in rows:
        b = row.bucket
        link = (f'<a href="#repro-{row.index}">case {esc(row.case_id)} &darr;</a>' if row.case_id is not None
                else '<span class="muted">none</span>')
        out.append(
            f'<tr id="bucket-{row.index}"><td class=num>{row.index}</td><td>{_verdict_badge(b.get("verdict"))}</td>'
            f"<td class=nowrap>{esc(b.get('backend'))}</td><td class=nowrap><code>{esc(b.get('culprit'))}</code></td>"
            f"<td class=sig>{esc(b.get('signature'))}</td><td class=num>{esc(b.get('count'))}</td>"
            f"<td class='nowrap small'>{esc(_short_time(b.get('first_seen')))}<br>{esc(_short_time(b.get('last_seen')))}</td>"
            f"<td>{_status_badge(b.get('status'))}</td><td class=note>{esc(b.get('note') or '')}</td>"
            f"<td class='num small'>{_error_html(row.finding)}</td><td class=nowrap>{link}</td></tr>"
        )
    return _table(head, out)


def _error_html(finding: dict | None) -> str:
    """The error on one line, what was allowed and the ratio under it (all numbers we format)."""
    text = _error_text(finding)
    if " (" not in text:
        return esc(text)
    error, rest = text.split(" (", 1)
    allowed, _, ratio = rest.rstrip(")").partition(", ")
    ratio_html = f" <span class=muted>({esc(ratio)})</span>" if ratio else ""
    return f"<b>{esc(error)}</b>{ratio_html}<br><span class=muted>{esc(allowed)}</span>"


def _reproducer_section(row: BucketRow) -> str:
    b = row.bucket
    origin = f", shrunk from case {esc(row.shrunk_from)}" if row.shrunk_from is not None else ""
    parts = [
        f'<div class="repro" id="repro-{row.index}">',
        f'<h3>#{row.index} {_verdict_badge(b.get("verdict"))} <code>{esc(b.get("signature"))}</code></h3>',
        f'<div class="small muted">case {esc(row.case_id)}{origin}; graph: <code>{esc(row.op_sequence or "-")}</code>; '
        f'backend under test: <code>{esc(b.get("backend"))}</code> &middot; <a href="#bucket-{row.index}">&uarr; back to the table</a></div>',
    ]
    if row.finding and row.finding.get("detail"):
        parts.append(f'<div class="small">{esc(row.finding.get("detail"))}</div>')
    if row.script is not None:
        parts.append(f'<div class="small muted">Standalone reproducer (exit 1 while the bug is present); '
                     f'<code>fuzz export {esc(row.case_id)} --format script -o repro.py</code> writes it to a file.</div>')
        parts.append(f"<pre><code>{esc(row.script)}</code></pre>")
    else:
        parts.append(f'<div class="small why">No standalone script: {esc(row.why_no_script)}</div>')
        if row.fallback is not None:
            parts.append('<div class="small muted">The case\'s graph instead (<code>fuzz export '
                         f'{esc(row.case_id)} --format json</code> adds its arrays):</div>')
            parts.append(f"<pre><code>{esc(row.fallback)}</code></pre>")
    parts.append("</div>")
    return "\n".join(parts)


def _plots_section(data: ReportData) -> str:
    if data.plots_missing:
        return f'<p class="noplots">{esc(data.plots_missing)}</p>'
    if not data.plots:
        return '<p class="empty">Nothing to plot yet.</p>'
    captions = {
        "Discovery curve": "Cumulative generated cases with findings and distinct buckets, from the cases' creation times.",
        "Error magnitude per backend": "Each dot is one finding's max error divided by the error the tolerance model allows for it.",
        "Coverage: op x backend": "Blue: how many generated graphs contained the op in campaigns that ran the backend "
                                  "(from the checkpoints). Red numbers: findings localized to the op on that backend.",
        "Throughput": "Graphs per second per campaign, and the worker time spent in each backend.",
    }
    figures = []
    for title, png in data.plots.items():
        wide = " wide" if title in ("Coverage: op x backend", "Throughput") else ""
        figures.append(f'<figure class="{wide.strip()}"><img alt="{esc(title)}" src="data:image/png;base64,{png}">'
                       f"<figcaption>{esc(captions.get(title, title))}</figcaption></figure>")
    return '<div class="plots">' + "\n".join(figures) + "</div>"


def _coverage_table(data: ReportData) -> str:
    ops, backends, graphs, findings = coverage(data)
    if not ops:
        return ""
    rows = []
    for op in ops:
        cells = []
        for backend in backends:
            g, f = graphs.get((op, backend), 0), findings.get((op, backend), 0)
            text = f"{g}" + (f' / <b style="color:var(--bug)">{f}</b>' if f else "")
            cells.append(f"<td class=num>{text if g or f else '<span class=muted>0</span>'}</td>")
        rows.append(f"<tr><td><code>{esc(op)}</code></td>{''.join(cells)}</tr>")
    return ("<details><summary>Coverage as a table (graphs / findings)</summary>"
            + _table(["op"] + backends, rows) + "</details>")


def _case_counts(data: ReportData) -> tuple[int, int]:
    """(generated cases with a finding, shrunk reproducers) among the stored cases."""
    generated = sum(1 for c in data.cases if c.get("shrunk_from") is None and c.get("signature") is not None)
    return generated, sum(1 for c in data.cases if c.get("shrunk_from") is not None)


def render_html(data: ReportData) -> str:
    bugs = [r for r in data.buckets if not r.precision_policy]
    policy = [r for r in data.buckets if r.precision_policy]
    generated, shrunk = _case_counts(data)
    open_bugs = sum(1 for r in bugs if r.bucket.get("status") in ("new", "confirmed", "reported"))
    cards = [
        (len(data.campaigns), "campaigns"),
        (sum(c.graphs for c in data.campaigns), "graphs generated"),
        (generated, f"cases with findings (+{shrunk} shrunk)"),
        (len(bugs), f"bug buckets ({open_bugs} open)"),
        (len(policy), "precision-policy buckets"),
    ]
    body = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>fuzzer report: {esc(Path(data.db).name)}</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>Differential fuzzing report</h1>",
        f'<div class="muted">corpus <code>{esc(data.db)}</code> &middot; generated {esc(data.generated)}</div>',
        '<nav class="small" style="margin-top:8px"><a href="#campaigns">Campaigns</a><a href="#bugs">Bugs</a>'
        '<a href="#precision">Precision policy</a><a href="#plots">Plots</a><a href="#reproducers">Reproducers</a></nav>',
        '<div class="cards">' + "".join(f"<div class=card><b>{esc(n)}</b><span>{esc(label)}</span></div>" for n, label in cards) + "</div>",
        '<h2 id="campaigns">Campaigns</h2>',
        _campaign_table(data),
        f'<h2 id="bugs">Bugs: {len(bugs)} buckets</h2>',
        '<p class="small muted">One row per finding signature (verdict | backend | culprit op). Count: generated cases in '
        "the bucket; the reproducer is the bucket's smallest (shrunk) case.</p>",
        _bucket_table(bugs, "No bug buckets."),
        f'<h2 id="precision">Precision policy: {len(policy)} buckets</h2>',
        '<p class="small muted">Outputs that are wrong only under a backend\'s reduced-precision default (TF32, fast '
        "reductions on GPUs) and right once it is turned off: a precision setting, not a bug. Kept apart from the bugs.</p>",
        _bucket_table(policy, "No precision-policy findings."),
        '<h2 id="plots">Plots</h2>',
        _plots_section(data),
        _coverage_table(data),
        '<h2 id="reproducers">Reproducers</h2>',
        "\n".join(_reproducer_section(r) for r in bugs + policy) or '<p class="empty">No buckets, no reproducers.</p>',
        "</body></html>",
    ]
    return "\n".join(body) + "\n"


# ---------------------------------------------------------------- Markdown


def _md_table(head, rows) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def render_markdown(data: ReportData, html_name: str = "report.html") -> str:
    bugs = [r for r in data.buckets if not r.precision_policy]
    policy = [r for r in data.buckets if r.precision_policy]
    generated, shrunk = _case_counts(data)
    lines = [
        "# Differential fuzzing report",
        "",
        f"Corpus `{md_cell(Path(data.db).name)}`, generated {md_cell(data.generated)}. "
        f"Campaigns: {len(data.campaigns)}; cases with findings: {generated} (+{shrunk} shrunk reproducers); "
        f"bug buckets: {len(bugs)}; precision-policy buckets: {len(policy)}. "
        f"Plots and reproducers: [{html_name}]({html_name}).",
        "",
        "## Campaigns",
        "",
    ]
    if data.campaigns:
        lines += _md_table(
            ("id", "status", "versions", "duration", "graphs", "cases", "graphs/s", "workers", "backends"),
            [
                [str(c.id), md_cell(c.status),
                 md_cell(", ".join(f"{k} {c.versions.get(k)}" for k in VERSION_KEYS if c.versions.get(k) is not None)),
                 _duration_text(c.seconds), str(c.graphs), str(c.cases), _number(c.graphs_per_second), md_cell(c.workers),
                 md_cell(", ".join(c.backends))]
                for c in data.campaigns
            ],
        )
    else:
        lines.append("No campaigns: the cases were imported.")
    for title, rows in (("Bugs", bugs), ("Precision policy (not bugs)", policy)):
        lines += ["", f"## {title}", ""]
        if not rows:
            lines.append("None.")
            continue
        lines += _md_table(
            ("#", "verdict", "backend", "culprit", "signature", "count", "first seen", "last seen", "status", "note",
             "max error", "case"),
            [
                [str(r.index), md_cell(r.bucket.get("verdict")), md_cell(r.bucket.get("backend")), md_cell(r.bucket.get("culprit")),
                 md_cell(r.bucket.get("signature")), md_cell(r.bucket.get("count")), md_cell(r.bucket.get("first_seen")),
                 md_cell(r.bucket.get("last_seen")), md_cell(r.bucket.get("status")), md_cell(r.bucket.get("note") or ""),
                 md_cell(_error_text(r.finding)), md_cell(r.case_id)]
                for r in rows
            ],
        )
    lines += ["", f"Reproduce a bucket: `fuzz export CASE --format script -o repro.py && python repro.py` "
              f"(the reproducers are also in {html_name})."]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- entry point


def write_report(corpus: Corpus, out_dir: str | Path, with_plots: bool = True) -> dict:
    """Write report.html and summary.md into out_dir; returns {"html", "markdown", "buckets"}."""
    data = gather(corpus, with_plots=with_plots)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"'{out}' is a file; pass -o with a folder for the report.")
    try:
        out.mkdir(parents=True, exist_ok=True)
        html_path, md_path = out / "report.html", out / "summary.md"
        html_path.write_text(render_html(data), encoding="utf-8")
        md_path.write_text(render_markdown(data, html_path.name), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"Cannot write the report into '{out}' ({exc.strerror or exc}); pass -o with a writable folder.") from None
    return {"html": str(html_path), "markdown": str(md_path), "buckets": len(data.buckets)}
