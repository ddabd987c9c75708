"""`fuzz report`: one self-contained static HTML file (and a Markdown summary) for a corpus.

The HTML shows the campaigns and the totals `fuzz stats` prints, one row per finding bucket
(bugs apart from precision-policy findings, which are a GPU precision setting, not a bug), each
bucket's representative (shrunk) case as its minimal reproducer, an op x backend coverage table,
and plots when matplotlib is importable: the discovery curve, error magnitude per backend and
throughput.

One job per module: data.py reads the corpus into dataclasses, plots.py draws them, render.py
writes the pages; write_report, here, runs the three and writes the files.
"""

from __future__ import annotations

from pathlib import Path

from fuzzer.corpus import Corpus
from fuzzer.errors import UserError
from fuzzer.report.data import gather
from fuzzer.report.plots import NO_PLOTS, make_plots
from fuzzer.report.render import render_html, render_markdown

__all__ = ["write_report"]


def write_report(corpus: Corpus, out_dir: str | Path, with_plots: bool = True, reference_timeout: float = 300.0) -> dict:
    """Write report.html and summary.md into out_dir; returns {"html", "markdown", "buckets"}. A bucket
    whose float64 reference runs past `reference_timeout` seconds is shown without a script."""
    data = gather(corpus, reference_timeout)
    plots, why_no_plots = make_plots(data) if with_plots else ({}, NO_PLOTS)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"'{out}' is a file; pass -o with a folder for the report.")
    try:
        out.mkdir(parents=True, exist_ok=True)
        html_path, md_path = out / "report.html", out / "summary.md"
        html_path.write_text(render_html(data, plots, why_no_plots), encoding="utf-8")
        md_path.write_text(render_markdown(data, html_path.name), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"Cannot write the report into '{out}' ({exc.strerror or exc}); pass -o with a writable folder.") from None
    return {"html": str(html_path), "markdown": str(md_path), "buckets": len(data.buckets)}
