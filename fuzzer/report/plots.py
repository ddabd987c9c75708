"""The report's plots: matplotlib figures drawn from a ReportData (data.py), as base64 PNGs.

matplotlib is optional (`pip install 'opdiff-fuzz[report]'`): without it make_plots says so, and
the report shows that sentence where the plots would be. The figures only draw what data.py
counted. Like render.py, this module reads the data by its fields and imports nothing from
fuzzer.report, so the package's __init__ can import all three without an import circle.
"""

from __future__ import annotations

import base64
import io
import math

NO_PLOTS = "plots need matplotlib: pip install 'opdiff-fuzz[report]'"


def _png(fig) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _plot_discovery(data, Figure):
    discovery = data.discovery
    if discovery is None:
        return None
    end = discovery.end
    span = max(end, 1.0)
    unit, scale = ("h", 3600) if span > 7200 else ("min", 60) if span > 120 else ("s", 1)
    fig = Figure(figsize=(6.4, 3.4))
    ax = fig.add_subplot()
    for times, label, style in ((discovery.finding_cases, "generated cases with findings", "-"),
                                (discovery.bug_buckets, "bug buckets", "-"),
                                (discovery.policy_buckets, "precision-policy buckets", "--")):
        if times or label != "precision-policy buckets":
            xs = [0.0] + sorted(times) + [end]
            ys = [0] + list(range(1, len(times) + 1)) + [len(times)]
            ax.step([x / scale for x in xs], ys, where="post", linestyle=style, label=f"{label} ({len(times)})")
    for start in discovery.campaign_starts:
        ax.axvline(start / scale, color="0.75", linewidth=0.8, zorder=0)
    ax.set_xlabel(f"time since the first campaign started ({unit}); grey lines: campaign starts")
    ax.set_ylabel("cumulative count")
    ax.set_title("Discovery: findings and buckets over time")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def _plot_errors(data, Figure):
    by_backend, infinite = data.error_ratios.finite, data.error_ratios.infinite
    names = sorted(set(by_backend) | set(infinite))
    if not names:
        return None
    fig = Figure(figsize=(6.4, max(2.4, 0.45 * len(names) + 1.4)))
    ax = fig.add_subplot()
    verdict_names = sorted({v for points in by_backend.values() for _, v in points})
    colors = {v: f"C{i}" for i, v in enumerate(verdict_names)}
    labelled: set[str] = set()
    for row, name in enumerate(names):
        points = by_backend.get(name, [])
        for verdict in verdict_names:
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
    if verdict_names:
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=min(4, len(verdict_names)), frameon=False)
    return fig


def _plot_throughput(data, Figure):
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
    ("Throughput", _plot_throughput),
)


def make_plots(data) -> tuple[dict[str, str], str | None]:
    """({title: base64 PNG}, None) for the plots that have something to show, or ({}, why) when
    matplotlib is not importable. `data` is a fuzzer.report.data.ReportData."""
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
