"""`fuzz export --format issue`: a stored finding as a bug report in the form PyTorch's and jax's
issue templates ask for (the bug, a minimal snippet, expected vs actual, versions, how it was found).

`gather_issue` reads the corpus and re-runs the case once, the float64 reference and the backend
under test, for the expected-vs-actual table (the entries beyond the allowance only);
`render_issue` turns that data into Markdown and does nothing else. The snippet is the minimal
reproducer (fuzzer/minimal_reproducer.py). Nothing of this machine is shown: `export_issue` puts
LOCAL_PATH for every path of it that the report could meet (`local_paths`: the corpus's, the
environments', the home directory), which an error text can hold (an ImportError names its file,
a dying worker its runner's). Every value read from the corpus is data: inline text goes through
`inline` (no Markdown, no HTML, no line breaks), blocks sit in a fence longer than any backtick run
they hold, and nothing from the corpus becomes a link or is run.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import fuzzer
from fuzzer import envs, verdicts
from fuzzer.backends import Backend
from fuzzer.corpus import Corpus, StoredCase
from fuzzer.corpus.releases import OUTCOMES
from fuzzer.errors import UserError, error_headline
from fuzzer.ir import infer_shapes
from fuzzer.minimal_reproducer import build_minimal_script
from fuzzer.reproducer import ENVIRONMENT_KEYS
from fuzzer.oracle import allowed_error, compute_reference, nonfinite_class
from fuzzer.report.render import md_cell
from fuzzer.release_checks import check_phrase
from fuzzer.replay import Replayer

WORST_ENTRIES = 5
RERUN_TIMEOUT = 300.0  # seconds for the one re-run that fills the expected-vs-actual table
INLINE_SCRIPT_LIMIT = 20_000  # characters; a longer script (large inputs as base64) goes beside the README
# Verdicts whose backend is not re-run for the table: the stored error text is the actual result.
NOT_RERUN = (verdicts.CRASH, verdicts.HANG)


@dataclass
class IssueData:
    """Everything the report shows, gathered from the corpus and one re-run of the case."""

    case_id: int
    finding: dict  # the reported finding: backend, verdict, culprit, max_error, allowed, detail
    family: str  # "torch" or "jax": which template's headings to use
    graph_lines: list[str]
    regime: str
    case_seed: int
    campaign: dict | None  # None for an imported case: no versions or campaign seed were recorded
    script: str | None
    script_note: str = ""  # why there is no inline script, or where it is
    entries: list[dict] = field(default_factory=list)  # worst entries: output, index, expected, actual
    rerun_error: str = ""  # the backend raised when re-run for the table
    triage: dict | None = None  # the bucket: its status and note, its release checks
    shrink: str = ""  # "shrunk from case N, 6 nodes to 2"


# ---------------------------------------------------------------- gathering


def worst_entries(expected: list[np.ndarray], actual: list[np.ndarray], defined: list[np.ndarray],
                  allowed: list[float], limit: int = WORST_ENTRIES) -> list[dict]:
    """The `limit` entries where `actual` is furthest from `expected`, worst first, among the entries the
    reference defines and only those off by more than their output's `allowed` error (the wrong ones);
    a different non-finite class (nan where 0 is right, inf vs finite) ranks above any finite error.
    Outputs of the wrong shape have no entries to compare (the finding's detail says so)."""
    rows = []
    for output, (e, a, judged, allowance) in enumerate(zip(expected, actual, defined, allowed)):
        if e.shape != a.shape:
            continue
        with np.errstate(invalid="ignore"):
            gap = np.abs(a - e)
        gap = np.where(nonfinite_class(a) != nonfinite_class(e), np.inf, np.where(np.isnan(gap), 0.0, gap))
        gap = np.where(judged, gap, 0.0)
        flat = gap.reshape(-1)
        for position in np.argsort(-flat, kind="stable")[:limit]:
            if flat[position] > allowance:
                index = tuple(int(i) for i in np.unravel_index(position, e.shape))
                rows.append({"output": output, "index": list(index), "expected": float(e[index]),
                             "actual": float(a[index]), "gap": float(flat[position])})
    rows.sort(key=lambda row: -row["gap"])
    return rows[:limit]


def _finding_on(stored: StoredCase, backend_name: str) -> dict:
    for finding in stored.findings:
        if finding.get("backend") == backend_name:
            return finding
    on = ", ".join(sorted({str(f.get("backend")) for f in stored.findings})) or "none"
    raise UserError(f"Case {stored.id} has no finding on backend '{backend_name}' (its findings are on: {on}); "
                    "pass one of those with --backend.")


def _graph_lines(stored: StoredCase) -> list[str]:
    shapes = infer_shapes(stored.case.graph)
    lines = []
    for spec in stored.case.graph.inputs:
        layout = f"  (stored {spec.layout} in torch)" if spec.layout != "contiguous" else ""
        lines.append(f"{spec.name} = input {list(spec.shape)}{layout}")
    for node in stored.case.graph.nodes:
        lines.append(f"{node.name} = {node.op}({', '.join(node.inputs)}) -> {list(shapes[node.name])}  "
                     f"{json.dumps(node.attrs, sort_keys=True)}")
    lines.append(f"outputs: {', '.join(stored.case.graph.outputs)}")
    return lines


def _rerun(stored: StoredCase, backend: Backend, finding: dict, plugins: list[str],
           replayer: Replayer | None) -> tuple[list[dict], str]:
    """(worst entries, error text) of one run of `backend` against the float64 reference, in an
    isolated worker (`replayer`'s, or one started for it): a backend that segfaults or hangs gives
    its error text, not a dead export."""
    if finding.get("verdict") in NOT_RERUN:
        return [], ""
    reference = compute_reference(stored.case, {backend.dtype})
    defined = [reference.judged[backend.dtype][i] | reference.defined_nonfinite[backend.dtype][i]
               for i in range(len(reference.outputs))]
    allowed = [allowed_error(reference, i, backend.dtype) for i in range(len(reference.outputs))]
    with contextlib.nullcontext(replayer) if replayer else Replayer([backend.name], plugins, timeout=RERUN_TIMEOUT) as worker:
        reply = worker.outputs(stored.case, backend.name)
    if "error" in reply:
        return [], error_headline(reply["error"])
    actual = [np.asarray(y, dtype=np.float64) for y in reply["outputs"]]
    return worst_entries(reference.outputs, actual, defined, allowed), ""


def _script(stored: StoredCase, backend: Backend, title: str, finding: dict) -> tuple[str | None, str]:
    try:
        return build_minimal_script(stored.case, backend, title, finding), ""
    except UserError as exc:
        return None, str(exc)


def gather_issue(corpus: Corpus, case_id: int, backend: Backend, plugins: list[str] = (),
                 replayer: Replayer | None = None) -> IssueData:
    """Read case `case_id` and re-run it once on `backend`, which must be the backend of one of its
    findings (`plugins` as the campaign loaded them, for the worker that re-runs it; `replayer`: a
    worker to re-run it in, for several reports)."""
    stored = corpus.get_case(case_id)
    finding = _finding_on(stored, backend.name)
    script, script_note = _script(stored, backend, stored.signature or f"case {case_id}", finding)
    entries, rerun_error = _rerun(stored, backend, finding, list(plugins), replayer)
    log = stored.shrink_log if isinstance(stored.shrink_log, dict) else {}
    shrink = (f"shrunk from case {stored.shrunk_from}, {log.get('original_nodes', '?')} nodes to {log.get('final_nodes', '?')}"
              if stored.shrunk_from else "")
    return IssueData(
        case_id=case_id, finding=finding, family=backend.family, graph_lines=_graph_lines(stored),
        regime=stored.case.graph.regime or "small", case_seed=stored.case.seed,
        campaign=corpus.campaign(stored.campaign_id) if stored.campaign_id else None, script=script,
        script_note=script_note, entries=entries, rerun_error=rerun_error,
        triage=corpus.bucket(stored.signature) if stored.signature else None, shrink=shrink,
    )


# ---------------------------------------------------------------- rendering


_LINK_AND_EMPHASIS = str.maketrans({c: "\\" + c for c in "[]*_~"})


def inline(value) -> str:
    """Corpus text -> inline Markdown that shows exactly that text: md_cell's escapes (HTML, pipes, code,
    line breaks) plus brackets and emphasis marks, so it can never become a link, an image or formatting."""
    return md_cell(value).translate(_LINK_AND_EMPHASIS)


def fenced(text: str, language: str = "") -> str:
    """`text` as a fenced code block that ends where we say: the fence is longer than any backtick run inside."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def _number(value: float) -> str:
    return f"{value:.9g}"  # 'nan', 'inf' and '-inf' as Python writes them


def _template(family: str) -> dict[str, str]:
    """Section headings as the framework's bug template names them."""
    if family == "jax":
        return {"bug": "Description", "versions": "System info (python version, jaxlib version, accelerator, etc.)"}
    return {"bug": "🐛 Describe the bug", "versions": "Versions"}


def _title(data: IssueData) -> str:
    f = data.finding
    return f"# {inline(f.get('verdict'))}: {inline(f.get('culprit'))} on {inline(f.get('backend'))}"


def _description(data: IssueData) -> str:
    f = data.finding
    backend, culprit, verdict = inline(f.get("backend")), inline(f.get("culprit")), inline(f.get("verdict"))
    meaning = inline(verdicts.get(str(f.get("verdict"))).meaning)
    text = (f"On {backend}, the graph below (culprit op: {culprit}) gives a **{verdict}** result: {meaning}. "
            "The judge is a float64 NumPy reference written from the math")
    if f.get("allowed"):
        text += (f"; the largest error is {inline(_number(float(f['max_error'])))} where a correct "
                 f"implementation may be off by {inline(_number(float(f['allowed'])))}")
    text += "."
    if f.get("detail"):
        text += f" The fuzzer reported: {inline(f['detail'])}."
    return text


def _snippet(data: IssueData) -> list[str]:
    lines = ["## To reproduce", ""]
    if data.script is None:
        return lines + [f"No standalone script: {inline(data.script_note)}", ""]
    if data.script_note:
        return lines + [inline(data.script_note), ""]
    return lines + ["The script needs only numpy and the framework, computes the expected values in float64 "
                    "and exits 1 while the bug is present:", "", fenced(data.script, "python"), ""]


def _expected_vs_actual(data: IssueData) -> list[str]:
    lines = ["## Expected vs actual", "", "The minimal graph:", "", fenced("\n".join(data.graph_lines)), ""]
    if data.entries:
        lines += [f"The worst wrong entries, float64 reference (expected) vs {inline(data.finding.get('backend'))} (actual):", "",
                  "| output | index | expected | actual |", "|---|---|---|---|"]
        lines += [f"| {row['output']} | {inline(row['index'])} | {inline(_number(row['expected']))} | "
                  f"{inline(_number(row['actual']))} |" for row in data.entries]
    elif data.rerun_error or data.finding.get("verdict") in NOT_RERUN:
        error = data.rerun_error or str(data.finding.get("detail") or "")
        lines += ["Expected: the same values as the float64 reference. Actual: the backend raised", "", fenced(error)]
    else:
        lines.append("Re-run now, the backend agreed with the reference on every entry: the bug may be fixed in "
                     "this release, or depend on something the re-run did not repeat.")
    return lines + [""]


def _versions(data: IssueData) -> list[str]:
    if data.campaign is None:
        return ["Not recorded: the case was imported, not found by a campaign of this corpus."]
    v = data.campaign.get("versions") or {}
    rows = [("PyTorch version", v.get("torch")), ("CUDA used to build PyTorch", v.get("cuda")),
            ("JAX version", v.get("jax")), ("jaxlib version", v.get("jaxlib")), ("NumPy version", v.get("numpy")),
            ("Python version", v.get("python")), ("OS", v.get("platform")), ("Device", v.get("device")),
            ("fuzzer version", v.get("fuzzer"))]
    text = [f"{name}: {value}" for name, value in rows if value is not None]
    for name, other in (v.get("environments") or {}).items():
        if isinstance(other, dict):
            text.append(f"environment {name}: " + ", ".join(f"{k} {other[k]}" for k in sorted(other) if k in ENVIRONMENT_KEYS))
    return ["As recorded with the campaign that found it:", "", fenced("\n".join(text))]


def _checked_on(data: IssueData) -> list[str]:
    """'Checked on: present in torch 2.13.0 / jax 0.10.2 on Python 3.11.7 (2026-03-01); not reproduced in jax 0.4.28 on
    Python 3.10.14 (2026-03-01).': the recorded release checks (`fuzz replay --on`), without the environments'
    local names."""
    checks = sorted((data.triage or {}).get("release_checks") or [], key=lambda check: OUTCOMES.index(check["outcome"]))
    phrases = dict.fromkeys(f"{check_phrase(check, python=True)} ({str(check['checked_at'])[:10]})" for check in checks)
    return [f"Checked on: {inline('; '.join(phrases))}.", ""] if phrases else []


def _how_found(data: IssueData) -> list[str]:
    lines = ["## How it was found", ""]
    campaign = data.campaign
    if campaign:
        backends = ", ".join((campaign.get("config") or {}).get("backends") or [])
        lines.append(f"- a differential fuzzing campaign (id {inline(campaign.get('id'))}, seed "
                     f"{inline(campaign.get('seed'))}) on {inline(backends)}")
    lines.append(f"- regime {inline(data.regime)}, case seed {inline(data.case_seed)}")
    if data.shrink:
        lines.append(f"- {inline(data.shrink)}")
    if data.triage and (data.triage.get("status") != "new" or data.triage.get("note")):
        lines.append(f"- triage: {inline(data.triage.get('status'))}; {inline(data.triage.get('note'))}")
    lines += ["", "Replay it from the corpus that holds it:", "",
              fenced(f"fuzz replay {data.case_id} --backends {data.finding.get('backend')}", "sh"), ""]
    return lines


def render_issue(data: IssueData) -> str:
    """The Markdown report; a pure function of `data`."""
    headings = _template(data.family)
    lines = [_title(data), "", f"## {headings['bug']}", "", _description(data), ""]
    lines += _snippet(data) + _expected_vs_actual(data)
    lines += [f"## {headings['versions']}", "", *_versions(data), "", *_checked_on(data)]
    lines += _how_found(data)
    return "\n".join(lines)


def export_issue(corpus: Corpus, case_id: int, backend: Backend, output: Path | None, plugins: list[str] = (),
                 replayer: Replayer | None = None) -> str:
    """The report's Markdown. A script too long to show inline is written beside `output` (and named there);
    without `output` the report says how to write it."""
    data = gather_issue(corpus, case_id, backend, plugins, replayer)
    if data.script is not None and len(data.script) > INLINE_SCRIPT_LIMIT:
        if output is not None:
            script_path = output.with_name(f"case{case_id}_repro.py")
            script_path.write_text(data.script)
            data.script_note = (f"The reproducer is in the adjacent file {script_path.name} ({len(data.script)} characters: "
                                "its inputs are embedded); it exits 1 while the bug is present.")
        else:
            data.script_note = (f"The reproducer is {len(data.script)} characters long (its inputs are embedded); write it "
                                f"with: fuzz export {case_id} -o repro.py")
    return without_local_paths(render_issue(data), local_paths(corpus.path))


LOCAL_PATH = "[local path]"  # no angle brackets: Markdown would take <local path> for an HTML tag and hide it


def local_paths(corpus_path: Path) -> list[str]:
    """The paths of this machine a report could meet, longest first: the corpus and its folder, each
    registered environment's interpreter and venv, the environments' home, this Python and this
    package, and the home directory."""
    places = [Path(corpus_path).absolute(), Path(corpus_path).absolute().parent, envs.home(), Path(sys.prefix),
              Path(sys.executable), Path(fuzzer.__file__).parent.parent, Path.home()]
    for environment in envs.load_all().values():
        places += [Path(environment.python), Path(environment.python).parent.parent]
    return sorted({str(place) for place in places if len(place.parts) > 1}, key=len, reverse=True)


def without_local_paths(text: str, paths: list[str]) -> str:
    """`text` with each of `paths`, and whatever path goes on below it, as LOCAL_PATH."""
    for path in paths:
        text = re.sub(r"(?<![\w.-])" + re.escape(path) + r"(?![\w.-])(?:/[\w.+@-]+)*", LOCAL_PATH, text)
    return text
