"""`fuzz export --format issue`: a stored finding as a bug report in the form PyTorch's and jax's
issue templates ask for, in the framework's terms: a title saying what the op does wrong on which
input, the minimal snippet, expected vs actual, the framework's own environment report
(`python -m torch.utils.collect_env`, `jax.print_environment_info()`), and the fuzzer's own words
(campaign, regime, case seed, `fuzz replay`) only in a collapsed "How it was found" at the end,
after the upstream searches that decide whether it is new and the nearest known bugs (fuzzer/triaging/novelty.py).

`gather_issue` reads the corpus and re-runs the case once, the float64 reference and the backend
under test, for the expected-vs-actual table (the entries beyond the allowance only), and runs
the environment tool; `render_issue` turns that data into Markdown and does nothing else. The
snippet is the minimal reproducer (fuzzer/reproducers/minimal_reproducer.py). A finding that is no bug to
report (a precision policy, a registry entry of status `convention`) is refused unless forced
(`refuse_unless_forced`), and then says so at the top. Nothing of this machine is shown: `export_issue` puts
LOCAL_PATH for every path of it that the report could meet (`local_paths`: the corpus's, the
environments', the home directory), which an error text can hold (an ImportError names its file,
a dying worker its runner's). Every value read from the corpus is data: inline text goes through
`inline` (no Markdown, no HTML, no line breaks), blocks sit in a fence longer than any backtick run
they hold, and nothing from the corpus becomes a link or is run (a search link is a tracker's fixed address
with the query URL-encoded).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import fuzzer
from fuzzer import verdicts
from fuzzer.backends import Backend
from fuzzer.corpus import Corpus, StoredCase
from fuzzer.corpus.releases import OUTCOMES
from fuzzer.errors import UserError, error_headline
from fuzzer.ir import infer_shapes
from fuzzer.oracle import allowed_error, compute_reference, nonfinite_class
from fuzzer.report.render import md_cell
from fuzzer.reproducers.minimal_reproducer import build_minimal_script, failing_part
from fuzzer.reproducers.reproducer import ENVIRONMENT_KEYS
from fuzzer.running import envs
from fuzzer.running.replay import Replayer
from fuzzer.triaging.known import Registry, load_registry
from fuzzer.triaging.novelty import NoveltyChecks, novelty_checks
from fuzzer.triaging.pass_bisect import localization_phrase, stored_localization
from fuzzer.triaging.release_checks import check_phrase

WORST_ENTRIES = 5
RERUN_TIMEOUT = 300.0  # seconds for the one re-run that fills the expected-vs-actual table
INLINE_SCRIPT_LIMIT = 20_000  # characters; a longer script (large inputs as base64) goes beside the README
# Verdicts whose backend is not re-run for the table: the stored error text is the actual result.
NOT_RERUN = (verdicts.CRASH, verdicts.HANG)
# The framework's own environment report, as its bug template asks for it (run by the backend's Python).
ENVIRONMENT_TOOLS = {"torch": ("python -m torch.utils.collect_env", ["-m", "torch.utils.collect_env"]),
                     "jax": ("jax.print_environment_info()", ["-c", "import jax; jax.print_environment_info()"])}
ENVIRONMENT_TIMEOUT = 120.0  # seconds; past it the report shows the versions the campaign recorded
DEVICE_WORDS = {"cpu": "CPU", "cuda": "CUDA GPU", "gpu": "GPU"}


@dataclass
class IssueData:
    """Everything the report shows, gathered from the corpus and one re-run of the case."""

    case_id: int
    finding: dict  # the reported finding: backend, verdict, culprit, max_error, allowed, detail
    family: str  # "torch" or "jax": which template's headings to use
    backend: dict  # the backend under test in words: description, device, dtype
    culprit_inputs: list[list[int]]  # the shapes the culprit op was given in the minimal graph
    ops: list[str]  # the minimal graph's ops, in order
    regime: str
    case_seed: int
    campaign: dict | None  # None for an imported case: no versions or campaign seed were recorded
    script: str | None
    script_note: str = ""  # why there is no inline script, or where it is
    entries: list[dict] = field(default_factory=list)  # worst entries: output, index, expected, actual
    rerun_error: str = ""  # the backend raised when re-run for the table
    triage: dict | None = None  # the bucket: its status and note, its release checks
    shrink: str = ""  # "shrunk from case N, 6 nodes to 2"
    environment: str = ""  # the framework's own environment report, run when the report was written
    environment_failure: str = ""  # why there is none ("did not finish within 120 s")
    not_a_bug: str = ""  # exported anyway (--force): why this is no bug to report
    script_command: str = ""  # how to write a script too long to show inline
    novelty: NoveltyChecks | None = None  # the upstream searches and nearest registry entries that decide "new"


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


def _culprit_inputs(stored: StoredCase, finding: dict) -> tuple[list[list[int]], list[str]]:
    """(the shapes the culprit op was given, the ops) in the part of the graph the finding is about."""
    graph = failing_part(stored.case, finding).graph
    shapes = {**{spec.name: spec.shape for spec in graph.inputs}, **infer_shapes(graph)}
    culprit_op = str(finding.get("culprit") or "").partition("@")[0]
    node = next((node for node in graph.nodes if node.op == culprit_op), None)
    return [list(shapes[name]) for name in node.inputs] if node else [], graph.op_names()


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


@functools.lru_cache(maxsize=None)
def environment_report(family: str, python: str, timeout: float = ENVIRONMENT_TIMEOUT) -> tuple[str, str]:
    """(the output of `family`'s own environment tool run by `python`, "") or ("", why there is none:
    "did not finish within 120 s"). Bounded: the tool's process group is killed after `timeout`
    seconds (collect_env starts pip and nvidia-smi, which could hold its pipes open). Cached:
    the reports of one process (tests, several exports) run it once."""
    arguments = ENVIRONMENT_TOOLS[family][1]
    try:
        process = subprocess.Popen([python, *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
    except OSError as exc:
        return "", f"could not start ({exc.strerror or exc})"
    try:
        output, errors = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return "", f"did not finish within {timeout:g} s"
    if process.returncode != 0 or not output.strip():
        last = (errors.strip().splitlines() or ["no output"])[-1]
        return "", f"failed ({last[:200]})"
    return re.sub(r"node='[^']*'", "node='[hostname]'", output.strip()), ""  # jax prints uname's node name


def _environment_python(backend: Backend) -> str:
    """The interpreter the backend runs in: another registered environment's, or ours."""
    other = backend.other_environment()
    return envs.resolve(other[0]).python if other else sys.executable


def not_a_bug(corpus: Corpus, case_id: int, backend: Backend, registry: Registry) -> str:
    """Why case `case_id`'s finding on `backend` is no bug to report upstream, in one sentence, or "":
    a verdict that is no bug (a precision policy, a derived backend's inherited finding), or a bucket
    that the known-bug registry lists as a `convention` (a result the framework documents)."""
    stored = corpus.get_case(case_id)
    finding = _finding_on(stored, backend.name)
    verdict = str(finding.get("verdict"))
    if not verdicts.is_bug(verdict):
        return f"Case {case_id}'s finding on {backend.name} is {verdict} ({verdicts.get(verdict).meaning}), not a bug"
    bucket = corpus.bucket(str(finding.get("signature") or stored.signature or ""))
    entry = registry.entry(bucket["known_bug"]) if bucket and bucket.get("known_bug") else None
    if entry is not None and entry.status == "convention":
        return (f"Case {case_id} is the known-bug registry's entry '{entry.id}' ({entry.entry.get('title')}), whose status is "
                f"convention: a result {backend.family} documents, not a bug")
    return ""


def refuse_unless_forced(corpus: Corpus, case_id: int, backend: Backend, registry: Registry, force: bool) -> str:
    """`not_a_bug`'s reason where `force` exports it anyway ("" for a bug); a UserError where not."""
    reason = not_a_bug(corpus, case_id, backend, registry)
    if reason and not force:
        raise UserError(f"{reason}; pass --force to export it as an issue anyway.")
    return reason


def gather_issue(corpus: Corpus, case_id: int, backend: Backend, plugins: list[str] = (),
                 replayer: Replayer | None = None, registry: Registry | None = None) -> IssueData:
    """Read case `case_id` and re-run it once on `backend`, which must be the backend of one of its
    findings (`plugins` as the campaign loaded them, for the worker that re-runs it; `replayer`: a
    worker to re-run it in, for several reports), and run the framework's environment tool;
    `registry` (default: the shipped one) gives the nearest known bugs."""
    stored = corpus.get_case(case_id)
    finding = _finding_on(stored, backend.name)
    script, script_note = _script(stored, backend, stored.signature or f"case {case_id}", finding)
    entries, rerun_error = _rerun(stored, backend, finding, list(plugins), replayer)
    log = stored.shrink_log if isinstance(stored.shrink_log, dict) else {}
    shrink = (f"shrunk from case {stored.shrunk_from}, {log.get('original_nodes', '?')} nodes to {log.get('final_nodes', '?')}"
              if stored.shrunk_from else "")
    culprit_inputs, ops = _culprit_inputs(stored, finding)
    environment, environment_failure = (environment_report(backend.family, _environment_python(backend))
                                        if backend.family in ENVIRONMENT_TOOLS else ("", ""))
    triage = corpus.bucket(stored.signature) if stored.signature else None
    novelty = novelty_checks(finding, stored.case.graph, stored_localization((triage or {}).get("localization")),
                             registry or load_registry())
    return IssueData(
        case_id=case_id, finding=finding, family=backend.family,
        backend={"description": backend.description, "device": backend.device, "dtype": backend.dtype},
        culprit_inputs=culprit_inputs, ops=ops, regime=stored.case.graph.regime or "small", case_seed=stored.case.seed,
        campaign=corpus.campaign(stored.campaign_id) if stored.campaign_id else None, script=script,
        script_note=script_note, entries=entries, rerun_error=rerun_error,
        triage=triage, shrink=shrink, environment=environment, environment_failure=environment_failure,
        novelty=novelty,
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


def _op_words(culprit: str) -> str:
    """`sin@grad` as "the gradient of sin", `layer_norm@fused` as "layer_norm (fused)"."""
    op, _, where = culprit.partition("@")
    if op in ("", "-"):
        return "the graph"
    return f"the gradient of {op}" if where == "grad" else f"{op} ({where})" if where else op


def _what_is_wrong(data: IssueData) -> str:
    """"returns nan where 0.3369 is expected": the worst wrong entry, or the verdict in words."""
    f = data.finding
    verdict = f.get("verdict")
    if verdict == verdicts.CRASH:
        return f"raises {error_headline(str(f.get('error') or f.get('detail') or ''))[:160]}".rstrip()
    if verdict == verdicts.HANG:
        return "hangs"
    if verdict == verdicts.NONDETERMINISTIC:
        return "returns different values on identical runs"
    if data.entries:
        worst = data.entries[0]
        return f"returns {worst['actual']:.4g} where {worst['expected']:.4g} is expected"
    return {verdicts.ALL_ZEROS: "returns all zeros", verdicts.CONSTANT: "returns one value everywhere"}.get(
        str(verdict), "returns wrong values")


def _on_what(data: IssueData) -> str:
    """"for a float32 input of shape [4, 17, 16] on the CPU (torch eager, op by op)"."""
    b = data.backend
    shapes = data.culprit_inputs
    given = (f"for a {b['dtype']} input of shape {shapes[0]}" if len(shapes) == 1
             else f"for {b['dtype']} inputs of shapes {', '.join(map(str, shapes[:-1]))} and {shapes[-1]}" if shapes
             else f"in {b['dtype']}")
    return f"{given} on the {DEVICE_WORDS.get(b['device'], b['device'])} ({b['description']})"


def _headline(data: IssueData) -> str:
    """What the op does wrong on which input: the title, and the description's first sentence."""
    return f"{_op_words(str(data.finding.get('culprit') or '-'))} {_what_is_wrong(data)} {_on_what(data)}"


def _title(data: IssueData) -> str:
    return f"# {inline(_headline(data))}"


def _description(data: IssueData) -> str:
    f = data.finding
    text = _headline(data) + "."
    if f.get("detail") and f.get("verdict") not in NOT_RERUN:
        text += f" Observed: {f['detail']}."
    if f.get("allowed"):
        text += (f" The expected values are the math computed in float64; a correct {data.backend['dtype']} "
                 f"implementation may be off by {_number(float(f['allowed']))} here, and the largest error is "
                 f"{_number(float(f['max_error']))}.")
    if len(data.ops) > 1:
        text += f" The smallest graph that shows it: {' > '.join(data.ops)}."
    return inline(text)


def _snippet(data: IssueData) -> list[str]:
    lines = ["## To reproduce", ""]
    if data.script is None:
        return lines + [f"No standalone script: {inline(data.script_note)}", ""]
    if data.script_note:
        return lines + [inline(data.script_note), ""]
    return lines + ["The script needs only numpy and the framework, computes the expected values in float64 "
                    "and exits 1 while the bug is present:", "", fenced(data.script, "python"), ""]


def _expected_vs_actual(data: IssueData) -> list[str]:
    lines = ["## Expected vs actual", ""]
    if data.entries:
        lines += [f"The worst wrong entries, expected (the float64 result) vs actual ({inline(data.backend['description'])}):", "",
                  "| output | index | expected | actual |", "|---|---|---|---|"]
        lines += [f"| {row['output']} | {inline(row['index'])} | {inline(_number(row['expected']))} | "
                  f"{inline(_number(row['actual']))} |" for row in data.entries]
    elif data.rerun_error or data.finding.get("verdict") in NOT_RERUN:
        error = data.rerun_error or str(data.finding.get("error") or data.finding.get("detail") or "")
        lines += ["Expected: the same values as in float64. Actual: it raised", "", fenced(error)]
    else:
        lines.append("Re-run now, every entry agreed with the float64 result: the bug may be fixed in "
                     "this release, or depend on something the re-run did not repeat.")
    return lines + [""]


def _recorded_versions(data: IssueData) -> list[str]:
    if data.campaign is None:
        return ["No versions were recorded: the case was imported, not found by a campaign of this corpus."]
    v = data.campaign.get("versions") or {}
    rows = [("PyTorch version", v.get("torch")), ("CUDA used to build PyTorch", v.get("cuda")),
            ("JAX version", v.get("jax")), ("jaxlib version", v.get("jaxlib")), ("NumPy version", v.get("numpy")),
            ("Python version", v.get("python")), ("OS", v.get("platform")), ("Device", v.get("device"))]
    text = [f"{name}: {value}" for name, value in rows if value is not None]
    for name, other in (v.get("environments") or {}).items():
        if isinstance(other, dict):
            text.append(f"environment {name}: " + ", ".join(f"{k} {other[k]}" for k in sorted(other) if k in ENVIRONMENT_KEYS))
    return ["The versions recorded with the run that found it:", "", fenced("\n".join(text))]


def _versions(data: IssueData) -> list[str]:
    """The framework's own environment report; the recorded versions where it could not run."""
    if data.environment:
        return [f"Output of `{ENVIRONMENT_TOOLS[data.family][0]}`, run when this report was written:", "",
                fenced(data.environment)]
    failure = ([f"`{ENVIRONMENT_TOOLS[data.family][0]}` {inline(data.environment_failure)}.", ""]
               if data.environment_failure else [])
    return failure + _recorded_versions(data)


def _checked_on(data: IssueData) -> list[str]:
    """'Checked on: present in torch 2.13.0 / jax 0.10.2 on Python 3.11.7 (2026-03-01); not reproduced in jax 0.4.28 on
    Python 3.10.14 (2026-03-01).': the recorded release checks (`fuzz replay --on`), without the environments'
    local names."""
    checks = sorted((data.triage or {}).get("release_checks") or [], key=lambda check: OUTCOMES.index(check["outcome"]))
    phrases = dict.fromkeys(f"{check_phrase(check, python=True)} ({str(check['checked_at'])[:10]})" for check in checks)
    return [f"Checked on: {inline('; '.join(phrases))}.", ""] if phrases else []


def _localized(data: IssueData) -> list[str]:
    """The compiler pass `fuzz localize` named for the bucket, the question a compiler's maintainer asks first."""
    stored = stored_localization((data.triage or {}).get("localization"))
    return [inline(localization_phrase(stored)), ""] if stored else []


NOT_RUN_YET = "not run yet"  # tests/test_bug_report_status.py refuses `Status: new` while a search says so
TITLE_SHOWN = 120  # characters of a registry entry's title


def _upstream_searches(data: IssueData) -> list[str]:
    """The searches that decide whether this is new, as links to run, each NOT_RUN_YET until the filer
    writes what it returned: a maintainer reads which searches found nothing. The links are ours: a fixed
    tracker address and a query with every character URL-encoded."""
    checks = data.novelty
    if checks is None or not checks.searches:
        return []
    return ["## Upstream searches", "", f"Open and closed issues; replace each \"{NOT_RUN_YET}\" with what the search returned:", "",
            *(f"- by {search.by}, {search.repository}: [{inline(search.query)}]({search.url}): {NOT_RUN_YET}"
              for search in checks.searches), ""]


def _novelty_notes(data: IssueData) -> list[str]:
    """For the filer, in the fuzzer's words: why there is no search by pass, and the nearest known bugs."""
    checks = data.novelty
    if checks is None:
        return []
    lines = [] if checks.searches else ["- no issue tracker is known for this backend's framework: search its own"]
    if checks.no_pass_search:
        lines.append(f"- no search by pass: {inline(checks.no_pass_search)}")
    for entry in checks.nearest:
        title = entry.title if len(entry.title) <= TITLE_SHOWN else entry.title[:TITLE_SHOWN - 1] + "…"
        lines.append(f"- near known bug {inline(entry.id)} ({inline(entry.status)}; same {', '.join(entry.shares)}): "
                     f"{inline(title)}; {inline(entry.link or 'not reported upstream')}")
    return lines


def _how_found(data: IssueData) -> list[str]:
    """The fuzzer's own words, collapsed at the end: a maintainer needs none of them."""
    f = data.finding
    lines = ["<details><summary>How it was found</summary>", ""]
    campaign = data.campaign
    if campaign:
        backends = ", ".join((campaign.get("config") or {}).get("backends") or [])
        lines.append(f"- a differential fuzzing campaign (id {inline(campaign.get('id'))}, seed "
                     f"{inline(campaign.get('seed'))}, fuzzer {inline((campaign.get('versions') or {}).get('fuzzer'))}) "
                     f"on {inline(backends)}")
    lines.append(f"- finding: {inline(f.get('verdict'))} on {inline(f.get('backend'))}, culprit op {inline(f.get('culprit'))}")
    lines.append(f"- regime {inline(data.regime)}, case seed {inline(data.case_seed)}")
    if data.shrink:
        lines.append(f"- {inline(data.shrink)}")
    if data.triage and (data.triage.get("status") != "new" or data.triage.get("note")):
        lines.append(f"- triage: {inline(data.triage.get('status'))}; {inline(data.triage.get('note'))}")
    lines += _novelty_notes(data)
    commands = [f"fuzz replay {data.case_id} --backends {f.get('backend')}", data.script_command]
    lines += ["", "From the corpus that holds it:", "",
              fenced("\n".join(command for command in commands if command), "sh"), "", "</details>", ""]
    return lines


def render_issue(data: IssueData) -> str:
    """The Markdown report; a pure function of `data`."""
    headings = _template(data.family)
    lines = [_title(data), ""]
    if data.not_a_bug:
        lines += [f"> **Warning:** {inline(data.not_a_bug)}; exported anyway (--force). Check the documentation before filing it.", ""]
    lines += [f"## {headings['bug']}", "", _description(data), ""]
    lines += _snippet(data) + _expected_vs_actual(data) + _localized(data)
    lines += [f"## {headings['versions']}", "", *_versions(data), "", *_checked_on(data)]
    lines += _upstream_searches(data) + _how_found(data)
    return "\n".join(lines)


def export_issue(corpus: Corpus, case_id: int, backend: Backend, output: Path | None, plugins: list[str] = (),
                 replayer: Replayer | None = None, not_a_bug_reason: str = "", registry: Registry | None = None) -> str:
    """The report's Markdown; `not_a_bug_reason` (`refuse_unless_forced`'s) is said at its top. A script
    too long to show inline is written beside `output` (and named there); without `output` the report
    says how to write it."""
    data = gather_issue(corpus, case_id, backend, plugins, replayer, registry)
    data.not_a_bug = not_a_bug_reason
    if data.script is not None and len(data.script) > INLINE_SCRIPT_LIMIT:
        if output is not None:
            script_path = output.with_name(f"case{case_id}_repro.py")
            script_path.write_text(data.script)
            data.script_note = (f"The reproducer is in the adjacent file {script_path.name} ({len(data.script)} characters: "
                                "its inputs are embedded); it exits 1 while the bug is present.")
        else:
            data.script_note = (f"The reproducer is {len(data.script)} characters long (its inputs are embedded): attach it "
                                "to the issue as a file.")
            data.script_command = f"fuzz export {case_id} -o repro.py"
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
