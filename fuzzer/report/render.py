"""The report's pages: HTML and Markdown from a ReportData (data.py) and the plots (plots.py).

The HTML has its CSS inline and its plots inline as base64 PNG data URIs, so it opens anywhere
without a network. Everything read from the corpus is untrusted: every piece of it goes through
esc (html.escape) or md_cell for the Markdown, and nothing from it becomes a link, an attribute
name or a file to import. Like plots.py, this module reads the data by its fields and imports
nothing from fuzzer.report, so the package's __init__ can import all three without an import circle.
"""

from __future__ import annotations

import datetime
import html
import math
from pathlib import Path
from typing import Any

VERSION_KEYS = ("python", "torch", "jax", "numpy", "cuda", "device")


# ---------------------------------------------------------------- text


def esc(value: Any) -> str:
    """Corpus text -> safe HTML text (quotes too, so it is safe in attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def md_cell(value: Any) -> str:
    """Corpus text -> one Markdown table cell: no pipes, newlines or raw HTML."""
    text = "" if value is None else str(value)
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(text.split()) or "-"


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


def _short_time(moment: datetime.datetime | None, text: Any) -> str:
    """'2026-11-23 07:41:34' (UTC) for a parsed timestamp; the stored text as it is when it was none."""
    if moment is None:
        return "" if text is None else str(text)
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _error_text(row) -> str:
    """'3.1 (allowed 2e-05, 1.6e+05x)' for a bucket's finding; '-' when it has no error numbers."""
    error, allowed = row.max_error, row.allowed
    if error is None or (error == 0 and not allowed):
        return "-"
    if allowed is None:
        return _number(error)
    if allowed <= 0:
        return f"{_number(error)} (allowed {_number(allowed)})"
    return f"{_number(error)} (allowed {_number(allowed)}, {_number(error / allowed, 2)}x)"


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
.coverage { max-height: 640px; overflow: auto; width: fit-content; max-width: 100%; } .coverage table { width: auto; }
.coverage td { padding: 2px 6px; font-size: 12px; }
.coverage th.vertical { vertical-align: bottom; padding: 6px 2px; } .coverage th.vertical span { writing-mode: vertical-rl; transform: rotate(180deg); font-size: 12px; }
.found { color: var(--bug); }
td.nowrap { white-space: nowrap; }
td.sig { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; overflow-wrap: anywhere; min-width: 130px; max-width: 200px; }
td.note { min-width: 110px; max-width: 320px; overflow-wrap: anywhere; font-size: 13px; }
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


def _table(head, rows) -> str:
    return ("<div class=table-wrap><table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head)
            + "</tr></thead><tbody>" + "\n".join(rows) + "</tbody></table></div>")


def _campaign_table(campaigns) -> str:
    if not campaigns:
        return '<p class="empty">No campaigns: the cases were imported.</p>'
    head = ("id", "status", "versions", "duration", "graphs", "cases", "findings", "graphs/s", "workers", "backends")  # as `fuzz campaigns`
    rows = []
    for c in campaigns:
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


def _region_section(campaigns) -> str:
    """Per campaign that recorded them: region keys and pairs of keys (fuzzer/drawing/region_pairs.py) covered
    of those declared, and those never reached."""
    def never_reached(coverage: dict | None) -> str:
        missing = coverage["never_reached"] if coverage else []
        return (f"<details><summary>{len(missing)} never reached</summary><code class=small>"
                f"{'<br>'.join(esc(k) for k in missing)}</code></details>") if missing else "-"

    rows = []
    for c in campaigns:
        if c.regions is None:
            continue
        pairs = f"{c.pairs['covered']}/{c.pairs['declared']}" if c.pairs else "-"
        rows.append(f"<tr><td class=num>#{esc(c.id)}</td><td class=num>{c.regions['covered']}/{c.regions['declared']}</td>"
                    f"<td>{never_reached(c.regions)}</td><td class=num>{pairs}</td><td>{never_reached(c.pairs)}</td></tr>")
    if not rows:
        return '<p class="empty">No campaign recorded region keys.</p>'
    return _table(("campaign", "region keys covered", "never reached", "pairs covered", "pairs never reached"), rows)


def _pass_html(row) -> str:
    return f"<br><span class=small>pass {esc(row.compiler_pass)}</span>" if row.compiler_pass else ""


def _bucket_table(rows, empty: str) -> str:
    if not rows:
        return f'<p class="empty">{esc(empty)}</p>'
    head = ("#", "verdict", "backend", "culprit", "signature", "count", "first / last seen (UTC)", "status", "note",
            "max error", "reproducer")
    out = []
    for row in rows:
        link = (f'<a href="#repro-{row.index}">case {esc(row.case_id)} &darr;</a>' if row.case_id is not None
                else '<span class="muted">none</span>')
        out.append(
            f'<tr id="bucket-{row.index}"><td class=num>{row.index}</td><td>{_verdict_badge(row.verdict)}</td>'
            f"<td class=nowrap>{esc(row.backend)}</td><td class=nowrap><code>{esc(row.culprit)}</code>{_pass_html(row)}</td>"
            f"<td class=sig>{esc(row.signature)}</td><td class=num>{esc(row.count)}</td>"
            f"<td class='nowrap small'>{esc(_short_time(row.first_seen_at, row.first_seen))}<br>"
            f"{esc(_short_time(row.last_seen_at, row.last_seen))}</td>"
            f"<td>{_status_badge(row.status)}</td><td class=note>{esc(row.note or '')}</td>"
            f"<td class='num small'>{_error_html(row)}</td><td class=nowrap>{link}</td></tr>"
        )
    return _table(head, out)


def _error_html(row) -> str:
    """The error on one line, what was allowed and the ratio under it (all numbers we format)."""
    text = _error_text(row)
    if " (" not in text:
        return esc(text)
    error, rest = text.split(" (", 1)
    allowed, _, ratio = rest.rstrip(")").partition(", ")
    ratio_html = f" <span class=muted>({esc(ratio)})</span>" if ratio else ""
    return f"<b>{esc(error)}</b>{ratio_html}<br><span class=muted>{esc(allowed)}</span>"


def _reproducer_section(row) -> str:
    origin = f", shrunk from case {esc(row.shrunk_from)}" if row.shrunk_from is not None else ""
    parts = [
        f'<div class="repro" id="repro-{row.index}">',
        f'<h3>#{row.index} {_verdict_badge(row.verdict)} <code>{esc(row.signature)}</code></h3>',
        f'<div class="small muted">case {esc(row.case_id)}{origin}; graph: <code>{esc(row.op_sequence or "-")}</code>; '
        f'backend under test: <code>{esc(row.backend)}</code> &middot; <a href="#bucket-{row.index}">&uarr; back to the table</a></div>',
    ]
    if row.detail:
        parts.append(f'<div class="small">{esc(row.detail)}</div>')
    if row.script is not None:
        parts.append(f'<div class="small muted">Minimal standalone reproducer (exit 1 while the bug is present); '
                     f'<code>fuzz export {esc(row.case_id)} -o repro.py</code> writes it to a file, <code>--format script</code> '
                     'the full harness.</div>')
        parts.append(f"<pre><code>{esc(row.script)}</code></pre>")
    else:
        parts.append(f'<div class="small why">No standalone script: {esc(row.why_no_script)}</div>')
        if row.fallback is not None:
            parts.append('<div class="small muted">The case\'s graph instead (<code>fuzz export '
                         f'{esc(row.case_id)} --format json</code> adds its arrays):</div>')
            parts.append(f"<pre><code>{esc(row.fallback)}</code></pre>")
    parts.append("</div>")
    return "\n".join(parts)


CAPTIONS = {
    "Discovery curve": "Cumulative generated cases with findings (their creation times) and buckets (each once, at its "
                       "first finding), split as the tables above split them.",
    "Error magnitude per backend": "Each dot is one finding's max error divided by the error the tolerance model allows for it.",
    "Throughput": "Graphs per second per campaign, and the worker time spent in each backend.",
}
WIDE_PLOTS = ("Throughput",)


def _plots_section(plots: dict[str, str], why_no_plots: str | None) -> str:
    if why_no_plots:
        return f'<p class="noplots">{esc(why_no_plots)}</p>'
    if not plots:
        return '<p class="empty">Nothing to plot yet.</p>'
    figures = []
    for title, png in plots.items():
        wide = " wide" if title in WIDE_PLOTS else ""
        figures.append(f'<figure class="{wide.strip()}"><img alt="{esc(title)}" src="data:image/png;base64,{png}">'
                       f"<figcaption>{esc(CAPTIONS.get(title, title))}</figcaption></figure>")
    return '<div class="plots">' + "\n".join(figures) + "</div>"


def _coverage_table(coverage) -> str:
    """Op x backend as a table a reader can scan: graphs with the op that the backend ran, shaded by
    their number (log scale), and in red the findings whose culprit is the op on that backend."""
    if not coverage.ops:
        return '<p class="empty">No coverage recorded.</p>'
    most = max(coverage.graphs.values(), default=1) or 1
    rows = []
    for op in coverage.ops:
        cells = []
        for backend in coverage.backends:
            g, f = coverage.graphs.get((op, backend), 0), coverage.findings.get((op, backend), 0)
            shade = f' style="background:rgba(9,105,218,{0.5 * math.log1p(g) / math.log1p(most):.2f})"' if g else ""
            text = (f"{g}" if g else '<span class=muted>0</span>') + (f'<b class=found> / {f}</b>' if f else "")
            cells.append(f"<td class=num{shade}>{text}</td>")
        rows.append(f"<tr><td><code>{esc(op)}</code></td>{''.join(cells)}</tr>")
    head = "<th>op</th>" + "".join(f"<th class=vertical><span>{esc(b)}</span></th>" for b in coverage.backends)
    return (f"<div class='table-wrap coverage'><table><thead><tr>{head}</tr></thead><tbody>"
            + "\n".join(rows) + "</tbody></table></div>")


def _judged_share_table(rows: list[dict]) -> str:
    """Corpus.stats()'s judged-share table (fuzzer/judging/judged_share.py), least judged first, as `fuzz stats` lists it."""
    if not rows:
        return '<p class="empty">No campaign recorded what the oracle judged.</p>'
    body = []
    for r in rows:
        share = "-" if r["share"] is None else f"{r['share']:.0%}"
        median = "-" if r["median_allowance_u"] is None else f"{r['median_allowance_u']:.3g}"
        body.append(f"<tr><td><code>{esc(r['op'])}</code></td><td>{esc(r['dtype'])}</td><td>{esc(r['kind'])}</td>"
                    f"<td class=num>{share}</td><td class=num>{r['entries']}</td><td class=num>{r['cases']}</td>"
                    f"<td class=num>{median}</td></tr>")
    head = ("op", "dtype", "backend kind", "judged", "entries", "cases", "median allowance (u)")
    return ("<div class='table-wrap coverage'><table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head)
            + "</tr></thead><tbody>" + "\n".join(body) + "</tbody></table></div>")


def render_html(data, plots: dict[str, str], why_no_plots: str | None) -> str:
    """The whole page for a fuzzer.report.data.ReportData and make_plots' answer."""
    bugs = [r for r in data.buckets if not r.precision_policy]
    policy = [r for r in data.buckets if r.precision_policy]
    open_bugs = sum(1 for r in bugs if r.status in ("new", "confirmed", "reported"))
    cards = [  # the totals `fuzz stats` prints, from the same query
        (data.stats["campaigns"], "campaigns"),
        (sum(c.graphs for c in data.campaigns), "graphs generated"),
        (data.stats["cases_with_findings"], f"cases with findings ({data.finding_cases} found, "
                                            f"{data.stats['cases_with_findings'] - data.finding_cases} shrunk)"),
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
        '<a href="#precision">Precision policy</a><a href="#plots">Plots</a><a href="#coverage">Coverage</a><a href="#reproducers">Reproducers</a></nav>',
        '<div class="cards">' + "".join(f"<div class=card><b>{esc(n)}</b><span>{esc(label)}</span></div>" for n, label in cards) + "</div>",
        '<h2 id="campaigns">Campaigns</h2>',
        _campaign_table(data.campaigns),
        '<p class="small muted">Region keys (an op\'s attribute value, regime, input layout, special value or size '
        "class that its kernels switch on), and pairs of them held by one node: those each campaign covered, of those "
        "its op set declares.</p>",
        _region_section(data.campaigns),
        f'<h2 id="bugs">Bugs: {len(bugs)} buckets</h2>',
        '<p class="small muted">One row per finding signature (verdict | backend | culprit op). Count: generated cases in '
        "the bucket; the reproducer is the bucket's smallest (shrunk) case.</p>",
        _bucket_table(bugs, "No bug buckets."),
        f'<h2 id="precision">Precision policy: {len(policy)} buckets</h2>',
        '<p class="small muted">Outputs that are wrong only under a backend\'s reduced-precision default (TF32, fast '
        "reductions on GPUs) and right once it is turned off: a precision setting, not a bug. Kept apart from the bugs.</p>",
        _bucket_table(policy, "No precision-policy findings."),
        '<h2 id="plots">Plots</h2>',
        _plots_section(plots, why_no_plots),
        '<h2 id="coverage">Coverage: op x backend</h2>',
        '<p class="small muted">Graphs containing the op that each backend ran (the campaigns\' checkpoints; darker: '
        'more, log scale) <b class=found>/ findings</b> of generated cases whose culprit is the op on that backend.</p>',
        _coverage_table(data.coverage),
        '<h3 id="judged">What the oracle judged: op x dtype x backend kind</h3>',
        '<p class="small muted">The share of output entries judged (finite in every honest model, not undefined, '
        'the allowance at most a few floors), least judged first, and the median allowance in units of the dtype\'s '
        'unit roundoff u, relative to the output\'s scale (fuzzer/judging/judged_share.py).</p>',
        _judged_share_table(data.stats.get("judged_share", [])),
        '<h2 id="reproducers">Reproducers</h2>',
        "\n".join(_reproducer_section(r) for r in bugs + policy) or '<p class="empty">No buckets, no reproducers.</p>',
        "</body></html>",
    ]
    return "\n".join(body) + "\n"


# ---------------------------------------------------------------- Markdown


def _md_table(head, rows) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def render_markdown(data, html_name: str = "report.html") -> str:
    """The summary for a fuzzer.report.data.ReportData: tables only, pointing to html_name for the rest."""
    bugs = [r for r in data.buckets if not r.precision_policy]
    policy = [r for r in data.buckets if r.precision_policy]
    lines = [
        "# Differential fuzzing report",
        "",
        f"Corpus `{md_cell(Path(data.db).name)}`, generated {md_cell(data.generated)}. "
        f"Campaigns: {data.stats['campaigns']}; cases with findings: {data.stats['cases_with_findings']} "
        f"({data.finding_cases} found, {data.stats['cases_with_findings'] - data.finding_cases} shrunk); "
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
                [str(r.index), md_cell(r.verdict), md_cell(r.backend),
                 md_cell(f"{r.culprit} (pass {r.compiler_pass})" if r.compiler_pass else r.culprit),
                 md_cell(r.signature), md_cell(r.count), md_cell(r.first_seen),
                 md_cell(r.last_seen), md_cell(r.status), md_cell(r.note or ""),
                 md_cell(_error_text(r)), md_cell(r.case_id)]
                for r in rows
            ],
        )
    lines += ["", f"Reproduce a bucket: `fuzz export CASE -o repro.py && python repro.py` "
              f"(the reproducers are also in {html_name})."]
    return "\n".join(lines) + "\n"
