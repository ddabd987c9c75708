"""The `fuzz` command: a thin skin over the library. Parse, call one function, print (text or --json).

Exit codes, enforced in one place (FuzzGroup.invoke) and tabled in README.md:
0 all good; 1 a finding / reproduced discrepancy / regression surprise; 2 bad usage or
input, including what the operating system refused (a missing folder, a permission, a
read-only or foreign database): one sentence on stderr; 3 an internal error (a bug in
fuzzer, with a pointer to report it); 130 interrupted (Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sqlite3
import sys
import tempfile
import traceback
from pathlib import Path

import click

from fuzzer import DISTRIBUTION, jsonform, verdicts
from fuzzer.errors import FULL_DISK_ERRNOS, InternalError, UserError
from fuzzer.ops.derived import DEFAULT_SHARE as DERIVED_SHARE
from fuzzer.running.budget import CROSS_RELEASE_SHARE, DEFAULT_SHARE, default_share, parse_shares
from fuzzer.running.campaign_config import CONFIG_FIELDS
from fuzzer.running.dtype_families import DEFAULT_COMPLEX_SHARE, DEFAULT_INTEGER_SHARE
from fuzzer.running.progress_line import LEGEND as PROGRESS_LEGEND
from fuzzer.running.workers import MEMORY_LIMIT_VARIABLE, default_memory_limit_mb, require_within_hard_limit
from fuzzer.verdicts import BY_NAME as VERDICT_NAMES

DEFAULT_DB = "corpus/fuzz.db"
DEFAULT_REGRESSION_DIR = "corpus/regression"
REPORT_HINT = "please report it with the output of `fuzz --version` and the command you ran"
EXIT_FINDING, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 1, 2, 3, 130


# -- shared options and output ------------------------------------------------------------

def db_option(fn):
    return click.option(
        "--db", "db_path", default=lambda: os.environ.get("FUZZ_DB", DEFAULT_DB), show_default=f"$FUZZ_DB or {DEFAULT_DB}",
        help="The corpus sqlite file.",
    )(fn)


def json_option(fn):
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON instead of text.")(fn)


def bounded(name: str) -> click.ParamType:
    """The type of a `fuzz run` option, from the bound a stored campaign config is checked against on
    resume (fuzzer/running/campaign_config.py), so the command line and the corpus accept the same values."""
    number = CONFIG_FIELDS[name].kind
    number = getattr(number, "kind", number)  # Nullable(Number): unset is the option's absence
    if number.whole:
        return click.IntRange(number.low, number.high)
    return click.FloatRange(number.low, number.high, min_open=number.low_open)


def stored_text(ctx, param, value: str | None) -> str | None:
    """Free text a command stores (a note, a title): refused if the shell passed bytes that are not UTF-8
    (Python holds them as lone surrogates, which no corpus or output stream can write)."""
    try:
        value is None or value.encode("utf-8")
    except UnicodeEncodeError:
        raise UserError(f"{param.opts[0]} {value!r} holds bytes that are not UTF-8 text; pass it in UTF-8.") from None
    return value


def _plugins_tried_in_child(ctx, param, specs: tuple[str, ...]) -> tuple[str, ...]:
    from fuzzer.plugins import check_plugins_in_child

    check_plugins_in_child(specs)  # one that crashes, exits or hangs while loading is refused before we load it
    return specs


def plugin_option(fn):
    return click.option(
        "--plugin", "plugins", multiple=True, metavar="FILE|CANARY", callback=_plugins_tried_in_child,
        help="A plugin .py file, or a shipped canary name (see `fuzz selftest --list`). Repeatable.",
    )(fn)


def memory_limit_option(fn):
    """--memory-limit of the commands that replay a case in one worker (its backends and the reference)."""
    def callback(ctx, param, value):
        if value is not None:
            require_within_hard_limit(value)
            os.environ[MEMORY_LIMIT_VARIABLE] = str(value)  # read by workers.replay_memory_limit_mb
        return value

    return click.option(
        "--memory-limit", type=click.IntRange(min=0), metavar="MB", expose_value=False, callback=callback,
        help="Address-space limit of the worker that runs the backends and the reference, at most the shell's hard "
             "limit (ulimit -Hv); 0 for none of ours. [default: 80% of this machine's memory, within the hard "
             "limit; none with GPU backends]")(fn)


def reference_timeout_option(fn):
    """--timeout of the commands that compute a case's float64 reference in-process (export, report): it runs
    in a bounded worker first, so that a case asking for hours of work is refused instead of hanging."""
    return click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=300.0, show_default=True,
                        metavar="SECONDS", help="How long a case's float64 reference may run.")(fn)


def known_bugs_option(fn):
    return click.option(
        "--known-bugs", "known_bugs", metavar="FILE",
        help="The known-bug registry [default: $FUZZ_KNOWN_BUGS or the shipped corpus/known-bugs.json].",
    )(fn)


def emit(as_json: bool, data, text: str) -> None:
    click.echo(jsonform.dumps(data, indent=2, default=str) if as_json else text)  # strict JSON: "inf", never Infinity


def open_corpus(db_path: str, create: bool = False):
    from fuzzer.corpus import Corpus

    if create:
        Path(db_path).parent.mkdir(parents=True, exist_ok=True)
    return Corpus(db_path, create=create)


def parse_duration(text: str | None) -> float | None:
    """'90', '90s', '10m', '2h' -> seconds."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not match:
        raise UserError(f"Cannot read duration '{text}'; write e.g. 90s, 10m or 2h.")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def _checked_lines(rows: list[dict], findings: list[dict]) -> list[str]:
    """One line per backend a stored case was checked on, with one verdict: the worst of its row's
    and its findings' (a case run again with other backends may have found another finding on it),
    each finding below it with its culprit and error."""
    found: dict[str, list[dict]] = {}
    for f in findings:
        found.setdefault(f["backend"], []).append(f)
    backends = list(dict.fromkeys([row["backend"] for row in rows] + list(found)))
    row_of = {row["backend"]: row for row in rows}
    lines = []
    for name in backends:
        row = row_of.get(name) or found[name][0]
        worst = verdicts.worst([row["verdict"]] + [f["verdict"] for f in found.get(name, [])])
        lines += _verdict_lines([{**row, "verdict": worst}])
        for f in found.get(name, []):
            error = f" error {f['max_error']:.3g} > allowed {f['allowed']:.3g}" if f.get("allowed") else ""
            lines.append(f"      finding: {f['verdict']}, culprit {f['culprit']}{error}"
                         + (f"; {f['detail']}" if f.get("detail") and f["detail"] != row.get("detail") else ""))
    return lines


def _os_error_sentence(exc: OSError) -> str:
    where = f" '{exc.filename}'" if exc.filename else ""
    if exc.errno in FULL_DISK_ERRNOS:  # neither the path nor its permissions are wrong
        return f"Cannot write{where or ' the output'}: its disk is full ({exc.strerror}); free some space and run the command again."
    return f"Cannot use{where} ({exc.strerror or exc}); check that the path exists and that you may read and write it."


class FuzzGroup(click.Group):
    """The exit-code contract, in one place: every exception becomes one line and its exit code."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise  # click's own: usage errors exit 2, --help and --version exit 0
        except UserError as exc:
            self._fail(ctx, EXIT_BAD_INPUT, f"Error: {exc}")
        except OSError as exc:
            self._fail(ctx, EXIT_BAD_INPUT, f"Error: {_os_error_sentence(exc)}")
        except sqlite3.Error as exc:
            self._fail(ctx, EXIT_BAD_INPUT, f"Error: the corpus database refused the operation ({exc}); check that --db "
                                            "is a fuzzer corpus you may write.")
        except KeyboardInterrupt:
            self._fail(ctx, EXIT_INTERRUPTED, "Interrupted.")
        except InternalError as exc:
            self._fail(ctx, EXIT_INTERNAL, f"Internal error (a bug in fuzzer, {REPORT_HINT}): {exc}")
        except Exception:  # noqa: BLE001 - anything unexpected is a bug of ours: say so, with the traceback to report
            click.echo(traceback.format_exc().rstrip(), err=True)
            self._fail(ctx, EXIT_INTERNAL, f"Internal error (a bug in fuzzer): {REPORT_HINT}, and the traceback above.")

    @staticmethod
    def _fail(ctx, code: int, line: str):
        clear = "\r\x1b[K" if sys.stderr.isatty() else ""  # over a live line (`fuzz run`'s), not after it
        click.echo(clear + line, err=True)
        ctx.exit(code)


def _set_element_limit(variable: str):
    def callback(ctx, param, value):
        if value is not None:
            os.environ[variable] = str(value)  # read by ir.element_limits, here and in every worker we start
        return value

    return callback


@click.group(cls=FuzzGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name=DISTRIBUTION)
@click.option("--max-tensor-elements", type=click.IntRange(min=1), metavar="N", expose_value=False, is_eager=True,
              callback=_set_element_limit("FUZZ_MAX_TENSOR_ELEMENTS"),
              help="Refuse a case with a tensor (value or weight) above N elements, before allocating it "
                   "[default: $FUZZ_MAX_TENSOR_ELEMENTS or 50,000,000].")
@click.option("--max-case-elements", type=click.IntRange(min=1), metavar="N", expose_value=False, is_eager=True,
              callback=_set_element_limit("FUZZ_MAX_CASE_ELEMENTS"),
              help="The same for all the values and weights of a case together [default: $FUZZ_MAX_CASE_ELEMENTS or 200,000,000].")
def main():
    """Differential fuzzer for deep-learning operators.

    Generates random operator graphs, runs them on torch, jax, a float64 numpy
    reference and plugged-in backends, shrinks every disagreement to a minimal
    reproducer and stores it in a sqlite corpus.

    \b
    Example:
      fuzz run --time 10m            # a campaign on the default CPU backends
      fuzz list                      # what it found
      fuzz show 3                    # one finding: graph, errors, versions
      fuzz replay 3                  # does it still reproduce? (exit 1 if so)
      fuzz export 3 -o repro.py      # a standalone reproducer script

    \b
    Exit codes: 0 all good; 1 a finding, a reproduced discrepancy or a regression
    surprise; 2 bad usage or input (also a missing folder, a permission, a read-only
    corpus); 3 an internal error (a bug in fuzzer); 130 interrupted (Ctrl-C, SIGTERM).
    The corpus is corpus/fuzz.db unless --db or $FUZZ_DB says otherwise.
    """


# -- run -------------------------------------------------------------------------------

@main.command(epilog=PROGRESS_LEGEND)
@db_option
@click.option("--time", "time_text", metavar="DURATION", help="Stop after this long (90s, 10m, 2h).")
@click.option("--max-cases", type=bounded("max_cases"), help="Stop after this many generated graphs.")
@click.option("--backends", help="Comma-separated backends or sets: cpu (the default), gpu; see `fuzz backends`.")
@click.option("--ops", help="Comma-separated ops to draw from (default: all; see `fuzz ops`).")
@click.option("--derived-share", type=bounded("derived_share"), default=DERIVED_SHARE, show_default=True, metavar="FRACTION",
              help="Without --ops: the share of graphs that may also draw the ops derived from torch's op database, where "
                   "this torch release's table is here (`fuzz ops --rebuild-derived` builds it); 0 leaves them out.")
@click.option("--integer-share", type=bounded("integer_share"), metavar="FRACTION",
              help="Of a campaign with float backends: the share of graphs drawn in int8, int16, int32, int64, uint8 "
                   "and bool in turn, from the integer regimes and the ops that declare integer semantics, and run on "
                   "that dtype's variants of the campaign's kinds (torch-eager:cpu:int32, torch-compile:cpu:int32, "
                   "jax-eager, jax-jit), whose compilers take that share of their float peers' compile time, judged "
                   "exactly; 0 leaves them out. A "
                   "listed integer backend (a plugin's, derived from torch-eager:cpu:int32) runs on its dtype's graphs, "
                   f"which take every other turn. [default: {DEFAULT_INTEGER_SHARE}; 0 with --ops or a plugin's float "
                   "backend, unless an integer backend is listed]")
@click.option("--complex-share", type=bounded("complex_share"), metavar="FRACTION",
              help="The same for complex64 and complex128, each component judged by the float model. "
                   f"[default: {DEFAULT_COMPLEX_SHARE}; 0 with --ops or a plugin's float backend, unless a complex backend is listed]")
@click.option("--max-nodes", type=bounded("max_nodes"), default=8, show_default=True, help="Largest graph drawn.")
@click.option("--regimes", metavar="NAMES",
              help="Comma-separated regimes to draw cases from, at their stated shares (default: all; see `fuzz regimes`).")
@click.option("--seed", type=bounded("seed"), envvar="FUZZ_SEED",
              help="Campaign seed (env FUZZ_SEED): the same seed draws the same graphs.  [default: a fresh random "
                   "one, printed at the start and stored with the campaign]")
@click.option("--workers", type=bounded("workers"), default=lambda: os.cpu_count() or 1, show_default="CPU count",
              help="Isolated worker processes.")
@click.option("--timeout", type=bounded("timeout"), default=60.0, show_default=True,
              help="Seconds one backend run may take before it is a hang; also the bound on the fuzzer's own work "
                   "on a case (reference, oracle, localization), past which the case is left unchecked.")
@click.option("--compile-timeout", type=bounded("compile_timeout"), default=600.0, show_default=True,
              help="The same for compiling backends (torch.compile), whose first graph takes tens of seconds.")
@click.option("--shrink-time", type=bounded("shrink_time"), default=60.0, show_default=True,
              help="Seconds to shrink each new finding.")
@click.option("--compiled-inputs", type=bounded("compiled_inputs"), default=8, show_default=True,
              help="Further input sets (special values, magnitudes, plain) each compiler runs a graph it compiled on: "
                   "compile once, test many. A dynamic-shape compiler (torch-compile-dynamic) then runs half as "
                   "many shape variants of the graph (size 1, sizes off powers of two, past block sizes) on its one compile.")
@click.option("--inputs-per-graph", type=bounded("inputs_per_graph"), default=2, show_default=True,
              help="Input/weight sets per graph (compiled code is reused across them).")
@click.option("--compile-share", metavar="SHARES",
              help=f"Worker time for the backends that compile per new graph (jax-jit, torch.compile, torch.export, "
                   f"jax eager), spent on each op alone first, then small and drawn graphs [default: {DEFAULT_SHARE}; "
                   f"{CROSS_RELEASE_SHARE} where the other backends are only this release's eager peers of other "
                   f"releases' compilers, as in torch-eager,torch-compile@torch-2.3.1; torch-compile-grad takes a declared "
                   f"0.1 of it]: a total split by "
                   "each kind's weight (torch.compile's structures cost most: 3 slices on CUDA, 6 on the CPU), and/or NAME=SHARE per "
                   "backend, kind or KIND@ENV (jax-jit=0.2,torch-compile@torch-2.3.1=0.3).")
@click.option("--threads", type=bounded("threads"), default=1, show_default=True, envvar="FUZZ_WORKER_THREADS",
              help="Intra-op threads per worker for torch and XLA's CPU client (env FUZZ_WORKER_THREADS); "
                   "0 keeps the libraries' defaults. Use more workers rather than more threads.")
@click.option("--memory-limit", type=bounded("memory_limit_mb"), metavar="MB",
              help="Address-space limit per worker, at most the shell's hard limit (ulimit -Hv); 0 for none of ours. "
                   "[default: 80% of this machine's memory divided by --workers, at least 4096 + 512 a core (threads' malloc arenas), within the hard "
                   "limit; none with GPU backends, whose drivers reserve address space]")
@click.option("--recycle-memory", type=bounded("recycle_rss_mb"), default=3000, show_default=True, metavar="MB",
              help="Replace a worker whose peak memory passed this (compiled-graph caches grow over long campaigns).")
@plugin_option
@click.option("--resume", type=int, metavar="CAMPAIGN",
              help="Continue an interrupted campaign from its checkpoint, with the --plugin files it used and the "
                   "--ray given here (a stored config never loads a file or joins a cluster).")
@click.option("--fail-on", type=click.Choice(["new", "any"]), default="new", show_default=True,
              help="Exit 1 for a finding that is not a known bug nor in a bucket triaged wontfix or known (new), "
                   "or for any finding (any).")
@click.option("--fail-on-finding", is_flag=True, hidden=True, help="The old name of --fail-on any.")
@known_bugs_option
@click.option("--ray", "ray_address", metavar="ADDRESS",
              help="Run the workers as Ray actors: 'local' starts a local Ray instance; 'auto' or ray://host:port joins a cluster.")
@click.option("--localize-time", "localize_text", metavar="DURATION",
              help="Time after the campaign to name the compiler pass of each new torch.compile, XLA or ONNX Runtime bucket, as "
                   "`fuzz localize` does (one bucket after another, each trial within --compile-timeout); 0 for none. "
                   "[default: a quarter of --time, at least 2 minutes; 5 minutes with --max-cases alone]")
@click.option("--steer/--no-steer", default=True, show_default=True,
              help="Draw one graph in four toward a region key (op attribute value, regime, layout, special value, "
                   "size) and two toward a pair of keys of one node the campaign has not covered yet, or only the plain mix.")
@json_option
def run(db_path, time_text, max_cases, backends, ops, derived_share, integer_share, complex_share, max_nodes, regimes, seed, workers, timeout, compile_timeout, shrink_time,
        compiled_inputs, inputs_per_graph,
        compile_share, threads, memory_limit, recycle_memory, plugins, resume, fail_on, fail_on_finding, known_bugs,
        ray_address, localize_text, steer, as_json):
    """Run a fuzz campaign and store every finding, shrunk, in the corpus.

    Progress goes to stderr (a JSON line per update with --json); the summary to stdout.
    A finding of a bug in the known-bug registry (`fuzz known list`) is stored in a bucket
    with status `known` and gets no new-bucket line. Exit 1 if the campaign stored a finding
    that is neither known nor in a bucket triaged wontfix or known (--fail-on any: any
    finding), 0 otherwise; 130 if it was interrupted (Ctrl-C or SIGTERM: the summary is
    printed and `--resume` continues it).

    \b
    Example:
      fuzz run --time 10m --seed 1
      fuzz run --max-cases 200 --plugin layout-layernorm --backends torch-eager,canary-layout-layernorm
    """
    from fuzzer.backends import name_backend_list, require_available
    from fuzzer.drawing.generate import weak_hypothesis_warning
    from fuzzer.drawing.regimes import parse_regime_list
    from fuzzer.judging.check import eager_peer
    from fuzzer.judging.judged_share import low_judged, low_judged_summary
    from fuzzer.ops import parse_op_list
    from fuzzer.plugins import load_plugins
    from fuzzer.programs.generate import require_program_runners, require_programs
    from fuzzer.running import envs
    from fuzzer.running.campaign import CampaignOptions, run_campaign
    from fuzzer.running.campaign_config import resumed_options
    from fuzzer.running.dtype_families import check_shares, default_shares, float_backends
    from fuzzer.running.progress_line import progress_line
    from fuzzer.triaging.known import load_registry
    from fuzzer.triaging.new_bucket_passes import NewBucketPasses, localize_new_buckets
    from fuzzer.triaging.pass_bisect import is_localizable

    # Every option is checked before torch or jax is imported (tens of seconds on a loaded machine).
    if resume is None and max_cases is None and time_text is None:
        raise UserError("A campaign needs a limit: pass --time (e.g. 10m) or --max-cases.")
    time_limit = parse_duration(time_text)
    if time_limit == 0:
        raise UserError(f"--time {time_text} leaves the campaign no time; pass a longer one (e.g. 90s or 10m).")
    localize_seconds = (parse_duration(localize_text) if localize_text is not None
                        else max(120.0, time_limit / 4) if time_limit else 300.0)
    if resume is not None:
        open_corpus(db_path).campaign(resume)  # a campaign that is not there is refused now
    op_names = parse_op_list(ops) if ops and not plugins else None  # a plugin's ops are known once it is loaded
    regime_names = [r.name for r in parse_regime_list(regimes)] if regimes else None
    if seed is None:  # as libFuzzer and AFL++ do: each campaign draws new graphs; the header says how to repeat it
        seed = secrets.randbelow(2**32)
    registry = load_registry(known_bugs)  # a malformed registry fails here, before the corpus is created
    load_plugins(list(plugins))  # fail fast, in this process, on a bad plugin or backend (a canary imports torch)
    op_names = parse_op_list(ops) if ops else None
    require_programs(op_names, regime_names)
    envs.trust_command_line([b.strip() for b in (backends or "").split(",")])
    parsed = name_backend_list(backends)
    require_program_runners(regime_names, parsed)
    defaults = default_shares(parsed, op_names is not None)
    integer_share = defaults[0] if integer_share is None else integer_share
    complex_share = defaults[1] if complex_share is None else complex_share
    if resume is None:
        check_shares(parsed, integer_share, complex_share)
    compiling = [b for b in float_backends(parsed) if b.expensive]  # a family lane's compilers spend their float peers' share
    if compile_share is None:
        compile_share = default_share([b.name for b in parsed if not b.expensive], [eager_peer(b) for b in compiling],
                                      [b.name for b in compiling])
    compile_shares = {} if resume is not None else parse_shares(  # a resumed campaign's are its stored ones
        compile_share, [b.name for b in compiling], {b.name: b.compile_weight for b in compiling})
    interactive = sys.stderr.isatty()
    if interactive and not as_json:  # a first line at once: importing the frameworks takes tens of seconds under load
        frameworks = sorted({b.family for b in parsed if b.family not in ("", "numpy")})
        starting = (f"Starting: importing {', '.join(frameworks) or 'the backends'} to check {len(parsed)} backends, then "
                    f"starting {workers} workers...")
        click.echo(starting[:terminal_width() - 1], err=True, nl=False)  # a live line: the header or an error replaces it
    if ray_address is None and memory_limit is None:  # those workers do not fork from the template
        from fuzzer.running.workers import warm_template

        warm_template(threads)
    if ray_address is not None:  # joined before the campaign starts: a cluster it cannot join is a UserError
        from fuzzer.running.ray_workers import start_ray

        start_ray(ray_address)
    require_available(parsed)
    backend_list = [b.name for b in parsed]
    if memory_limit is None:
        memory_limit = default_memory_limit_mb(workers, parsed)
    else:
        require_within_hard_limit(memory_limit)
    options = CampaignOptions(
        backends=backend_list, ops=op_names, max_nodes=max_nodes, regimes=regime_names, seed=seed,
        max_cases=max_cases, time_limit=time_limit, workers=workers, timeout=timeout, compile_timeout=compile_timeout,
        shrink_time=shrink_time, inputs_per_graph=inputs_per_graph, compiled_inputs=compiled_inputs,
        compile_share=compile_share, threads=threads,
        plugins=list(plugins), memory_limit_mb=memory_limit or None, recycle_rss_mb=recycle_memory, ray=ray_address,
        steer=steer, derived_share=derived_share, integer_share=integer_share, complex_share=complex_share,
    )
    corpus = open_corpus(db_path, create=True)
    weak_draws = weak_hypothesis_warning()  # a hypothesis release whose seeded draws miss values: said once
    derived_skipped, derived_drawn = _derived_lines(op_names if resume is None else None, derived_share if resume is None else 0)

    last_line: list[float | None] = [None]  # elapsed seconds at the last line printed; None before the header
    last_new_bucket: list[float | None] = [None]  # elapsed seconds at this run's last new bucket

    def on_progress(p):
        if last_line[0] is None:  # the campaign's first call, before its workers start
            last_line[0] = p.elapsed
            stored_seed = corpus.campaign(p.campaign_id)["seed"]  # a resumed campaign's is its own, not --seed's
            if as_json:
                click.echo(jsonform.dumps({"event": "start", "seed": stored_seed, **p.event_dict()}), err=True)
            else:
                click.echo(("\r\x1b[K" if interactive else "") + _campaign_header(p, options, resume, stored_seed), err=True)
            if weak_draws:
                click.echo(jsonform.dumps({"event": "warning", "message": weak_draws}) if as_json else f"Warning: {weak_draws}", err=True)
            if derived_skipped:
                click.echo(jsonform.dumps({"event": "warning", "message": derived_skipped}) if as_json else derived_skipped, err=True)
            elif derived_drawn and not as_json:
                click.echo(derived_drawn, err=True)
            return
        if as_json:
            click.echo(jsonform.dumps({"event": "progress", **p.event_dict()}), err=True)
            return
        if interactive:  # redrawn in place, so it must fit the terminal (the width is read again: it may change)
            line = progress_line(p, options.time_limit, last_new_bucket[0], width=terminal_width())
            click.echo(f"\r\x1b[K{line}", err=True, nl=False)
        elif p.elapsed - last_line[0] >= 30 or p.status != "running":  # a log, not a screen: one line per 30 s
            last_line[0] = p.elapsed
            click.echo(progress_line(p, options.time_limit, last_new_bucket[0]), err=True)

    new_compiler_buckets: list[str] = []  # localized after the campaign (fuzzer/triaging/new_bucket_passes.py)

    def on_new_bucket(p, finding, case_id):
        bucket = corpus.bucket(finding.signature)
        bucket_id = bucket["id"]  # the handle `fuzz show` and `fuzz triage` take
        if is_localizable(finding.backend):
            new_compiler_buckets.append(bucket["signature"])
        if as_json:
            click.echo(jsonform.dumps({"event": "new-bucket", "campaign_id": p.campaign_id, "signature": finding.signature,
                                   "bucket_id": bucket_id, "case": case_id, "graphs": p.graphs,
                                   "elapsed": round(p.elapsed, 1)}), err=True)
            return
        last_new_bucket[0] = p.elapsed
        if interactive:  # over the live progress line, short enough to stay one line (the header named the campaign)
            click.echo(f"\r\x1b[Knew bucket B{bucket_id}: {finding.signature} (case {case_id}, {p.elapsed:.0f}s)", err=True)
        else:
            click.echo(f"[campaign {p.campaign_id}] new bucket B{bucket_id} after {p.graphs} graphs, {p.elapsed:.0f}s: "
                       f"{finding.signature} (case {case_id})", err=True)

    progress = run_campaign(corpus, options, on_progress, resume=resume, on_new_bucket=on_new_bucket, known_bugs=registry)
    if interactive and not as_json:
        click.echo("", err=True)
    passes = NewBucketPasses()
    if new_compiler_buckets and localize_seconds and progress.status != "interrupted":
        if not as_json:
            click.echo(f"Naming the compiler pass of {len(new_compiler_buckets)} new bucket(s), within {localize_seconds:.0f} s "
                       "(--localize-time)...", err=True)
        passes = localize_new_buckets(
            corpus, new_compiler_buckets, list(plugins), options.compile_timeout, localize_seconds,
            on_result=lambda item: click.echo(jsonform.dumps({"event": "localized", **item}), err=True) if as_json else None)
    stored = corpus.stored_by_campaign(progress.campaign_id)
    summary = {**progress.event_dict(), "seed": corpus.campaign(progress.campaign_id)["seed"],
               "region_coverage": progress.region_coverage(), "pair_coverage": progress.pair_coverage(),
               "motif_coverage": progress.motif_coverage(), "db": db_path,
               "stored_cases": stored, "low_judged": low_judged(progress.judged_share), "passes": passes.to_dict()}
    shares = ", ".join(f"{name} {share:.0%}" for name, share in progress.backend_time_share().items())
    if resume is not None:  # the resumed campaign's own backends and shares, not this command line's defaults
        options = CampaignOptions(**resumed_options(corpus.campaign(resume), list(plugins))[0], plugins=list(plugins))
        compiling = [b for b in name_backend_list(",".join(options.backends)) if b.expensive]
        compile_shares = parse_shares(options.compile_share, [b.name for b in compiling],
                                      {b.name: b.compile_weight for b in compiling})
    text = (
        f"Campaign {progress.campaign_id} {progress.status}: {progress.graphs} graphs ({progress.checked} cases) in "
        f"{progress.elapsed:.0f}s, {progress.graphs_per_second:.1f} graphs/s; {progress.finding_cases} cases with "
        f"findings (stored: {stored['found']} of them and {stored['shrunk']} shrunk reproducers, as `fuzz stats` counts; "
        f"a bucket keeps a few cases and counts the rest), {progress.new_buckets} new buckets ({progress.known_findings} findings of known bugs, "
        f"{progress.triaged_findings} in buckets triaged wontfix), {progress.explained_cases} explained as no bug (a "
        f"TF32-style default, or a finding of the backend a plugin derives from), {progress.invalid} invalid (the "
        f"reference defines no entry), {progress.abandoned} abandoned at "
        f"the deadline.\n{_what_ran(progress, options.backends, compile_shares)}\nShare of worker time: {shares}.\n"
        f"{_region_summary(progress.region_coverage())}\n{_region_summary(progress.pair_coverage(), PAIRS)}\n"
        f"{_region_summary(progress.motif_coverage(), MOTIFS)}\n"
        f"{low_judged_summary(progress.judged_share)}"
        + (passes.text(f" --db {db_path}" if db_path != DEFAULT_DB else "") + "\n" if passes.localized or passes.left else "")
        + f"Next: fuzz list --db {db_path}"
    )
    if progress.poisoned_restarts:
        text += (f"\n{progress.poisoned_restarts} poisoned worker restart(s): a backend's error left a worker's device "
                 "unusable (a CUDA sticky error); its cases ran again in a fresh worker.")
    if progress.unrepeated_deaths:
        text += (f"\n{progress.unrepeated_deaths} worker death(s) from outside (SIGKILL, a dead fork server, or none in a backend) "
                 "that a fresh worker did not repeat: not findings; the OOM killer or a scheduler makes them.")
    if progress.unrepeated_hangs:
        text += (f"\n{progress.unrepeated_hangs} hang(s) a fresh worker did not repeat (the case ran within its "
                 "time there): not findings; a loaded machine makes them.")
    if progress.slow_checks:
        text += (f"\n{progress.slow_checks} case(s) not checked: the fuzzer's own work on them (a float64 reference, the "
                 f"oracle's models or a localization) ran past the campaign's --timeout; not findings, raise --timeout to check such cases.")
    if progress.lost_nodes:
        text += (f"\n{len(progress.lost_nodes)} Ray node(s) lost ({', '.join(progress.lost_nodes)}): not findings; "
                 "the cases they were checking went back to the queue.")
    if progress.internal_errors:
        text += (f"\nWarning: {progress.internal_errors} case(s) hit an internal error (a bug in fuzzer, please report it); "
                 f"the last one:\n{progress.last_internal_error}")
    if progress.status == "interrupted":  # with the plugin files and cluster of this command line
        summary["resume"] = (resume_command(db_path, progress.campaign_id) + "".join(f" --plugin {p}" for p in plugins)
                             + (f" --ray {ray_address}" if ray_address else ""))
        text += f"\nResume it with: {summary['resume']}"
    emit(as_json, summary, text)
    if progress.status == "interrupted":
        sys.exit(EXIT_INTERRUPTED)
    failing = progress.finding_cases if fail_on == "any" or fail_on_finding else progress.unknown_finding_cases
    # A case we failed to check is not a clean one: exit 3 (after the summary) unless a finding says more.
    sys.exit(EXIT_FINDING if failing else EXIT_INTERNAL if progress.internal_errors else 0)


def resume_command(db_path: str, campaign_id: int) -> str:
    return f"fuzz run --db {db_path} --resume {campaign_id}"


def _what_ran(progress, backends: list[str], compile_shares: dict[str, float]) -> str:
    """Per backend, the graphs and cases it really ran (compilers: structures compiled, cases per
    structure); a warning for each backend asked for that ran rarely (Progress.rarely_run)."""
    lines = ["What ran (graphs, cases; compilers: structures compiled, cases per structure, ops compiled alone, "
             "motif variants compiled):"]
    per_structure = progress.cases_per_structure()
    # then the integer and complex lanes' backends (--integer-share, --complex-share), which the campaign added
    lanes = sorted(name for name in progress.backend_graphs if name not in backends)
    for name in [*backends, *lanes]:
        line = f"  {name}: {progress.backend_graphs.get(name, 0)} graphs, {progress.backend_cases.get(name, 0)} cases"
        if name in progress.compiled_structures or name in progress.budget_skipped:
            from fuzzer.drawing.motifs import PREFIX  # imported by the campaign that ran; the CLI's start stays light

            covered = progress.alone_op_counts.get(name, {})
            chains = sum(PREFIX in item for item in covered)
            line += (f"; {progress.compiled_structures.get(name, 0)} structures, "
                     f"{per_structure.get(name, 0):g} cases each, {len(covered) - chains} ops alone, {chains} motif variants")
        lines.append(line)
    for name in progress.rarely_run(backends, compile_shares):
        lines.append(f"Warning: {name} ran on under 5% of the cases; give it more worker time with "
                     f"--compile-share {name.split(':')[0]}=0.3 (or run it alone with --backends).")
    return "\n".join(lines)


def terminal_width() -> int:
    """Columns of the terminal the progress line is drawn on: stderr's, since stdout may be a file."""
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns  # 0 on a terminal that was given no size
    except OSError:
        columns = 0
    return columns or shutil.get_terminal_size().columns  # $COLUMNS, or stdout's terminal, or 80


def _derived_lines(op_names: list[str] | None, share: float) -> tuple[str | None, str | None]:
    """(why a default campaign draws no derived ops, how many it draws at which share): one of them for a
    campaign not given --ops, said once at its start; neither otherwise."""
    from fuzzer.ops import derived

    if op_names or not share:
        return None, None
    names = derived.default_ops()
    if not names:
        return f"Derived ops skipped: {derived.problem()}", None
    return None, f"Derived ops: {len(names)} from torch's op database, in {share:.0%} of graphs (--derived-share 0 leaves them out)."


def _campaign_header(progress, options, resume: int | None, seed: int) -> str:
    if resume is not None:
        return (f"[campaign {progress.campaign_id}] resumed after {progress.graphs} graphs, seed {seed}; one line per new bucket, "
                f"progress every 30 s (live on a terminal)")
    limits = [f"{options.max_cases} graphs" if options.max_cases else "",
              f"{options.time_limit:.0f}s" if options.time_limit else ""]
    return (f"[campaign {progress.campaign_id}] started: {len(options.backends)} backends ({', '.join(options.backends)}), "
            f"seed {seed} (--seed {seed} repeats it), up to {' or '.join(l for l in limits if l)}, {options.workers} workers; "
            f"one line per new bucket, progress every 30 s (live on a terminal)")




# -- browsing the corpus --------------------------------------------------------------------

def _short_time(stamp: str | None) -> str:
    """'2026-03-01T12:00:07+00:00' -> '2026-03-01 12:00'."""
    return (stamp or "-")[:16].replace("T", " ")


def _with_pass(rows: list[dict]) -> list[dict]:
    """Bucket rows with `pass`: the compiler pass `fuzz localize` named for the bucket, or None."""
    from fuzzer.triaging.buckets import pass_label
    from fuzzer.triaging.pass_bisect import stored_localization

    for row in rows:
        localized = stored_localization(row.get("localization"))
        row["pass"] = pass_label(localized["passes"]) if localized else None
    return rows


def _bucket_lines(rows: list[dict]) -> list[str]:
    lines = [f"{'bucket':>6} {'case':>5}  {'status':<9} {'count':>5} {'nodes':>5} {'elements':>9}  {'first seen':<16}  "
             f"{'last seen':<16}  signature"]
    for row in rows:
        named_pass = row["pass"] and f"[pass {row['pass']}]" not in row["signature"]  # a split bucket's says it already
        lines.append(f"{'B' + str(row['id']):>6} {row['representative'] or '-':>5}  {row['status']:<9} {row['count']:>5} {row['nodes'] or '-':>5} "
                     f"{row['elements'] if row['elements'] is not None else '-':>9}  {_short_time(row['first_seen']):<16}  "
                     f"{_short_time(row['last_seen']):<16}  {row['signature']}"
                     + (f" [pass {row['pass']}]" if named_pass else "")
                     + (f"  [known bug {row['known_bug']}]" if row.get("known_bug") else ""))
        if len(row["members"]) > 1:
            lines.append(f"{'':>14}members: {_members_text(row['members'])}")
    return lines


def _members_text(members: list[dict]) -> str:
    """'torch-eager:cpu:float32 12, torch-eager:cpu:float16 3, torch-module:cpu:float32 (inherited) 12'."""
    return ", ".join(f"{m['backend']}{' (inherited)' if m['verdict'] == verdicts.INHERITED else ''} {m['count']}"
                     for m in members)


def _case_lines(rows: list[dict]) -> list[str]:
    lines = [f"{'id':>5}  {'verdict':<16} {'status':<9} {'nodes':>5}  {'from':>5}  signature / ops"]
    for row in rows:
        lines.append(
            f"{row['id']:>5}  {row['verdict']:<16} {row['status'] or '-':<9} {row['node_count']:>5}  "
            f"{row['shrunk_from'] or '':>5}  {row['signature'] or '-'}\n{'':>7}{row['op_sequence']}"
        )
    return lines


@main.command(name="list")
@db_option
@click.option("--cases", "per_case", is_flag=True, help="One entry per stored case, newest first, instead of one per bucket.")
@click.option("--status", help="Triage status of the bucket (new, confirmed, reported, fixed, wontfix, flaky, known).")
@click.option("--verdict", help=f"One of: {', '.join(VERDICT_NAMES)}.")
@click.option("--backend", help="A backend's full name or its kind (jax-jit finds jax-jit:cpu:float32).")
@click.option("--op", help="Cases whose graph contains this op (buckets: with such a case).")
@click.option("--limit", type=click.IntRange(min=1), help="Show at most this many.  [default: 50; with --json, all]")
@click.option("--all", "show_all", is_flag=True,
              help="Also the buckets that are not bugs (precision-policy, ...), which the bucket view leaves out.")
@json_option
def list_cases(db_path, per_case, status, verdict, backend, op, limit, show_all, as_json):
    """List the corpus's bug buckets (one per cause: verdict, backend kind and device, op and
    error), last seen first: its id (B7: what `fuzz show`, `triage`, `export` and `known add`
    take), the smallest case, triage status, case count, first and last seen,
    and the members of a bucket found on several backends (dtypes, releases, and a derived
    backend's `inherited` copies of the bug). Buckets that are not bugs (a TF32-style
    `precision-policy`) are counted on stderr and listed with --all or --verdict (`--verdict
    inherited`: buckets with inherited members). --cases lists the cases instead, newest first;
    shrunk reproducers show the case they came from. A filter naming no verdict, status, op or
    stored backend is an error (exit 2), not an empty list.

    \b
    Example:
      fuzz list --verdict mismatch --op layer_norm
      fuzz list --cases --status new --limit 200
    """
    corpus = open_corpus(db_path)
    if limit is None:  # a script reading --json must not lose rows to a limit it did not ask for
        limit = sys.maxsize if as_json else 50
    filters = {"status": status, "verdict": verdict, "backend": backend, "op": op}
    bugs_only = not (per_case or show_all or verdict)
    if per_case:
        rows, total = corpus.list_cases(**filters, limit=limit), corpus.count_cases(**filters)
        noun, lines = "cases", _case_lines(rows)
    else:
        bug_verdicts = tuple(v.name for v in verdicts.TABLE if v.is_bug) if bugs_only else None
        rows, total = corpus.list_buckets(**filters, limit=limit, verdicts_in=bug_verdicts)
        noun, lines = "buckets", _bucket_lines(_with_pass(rows))
    emit(as_json, rows, "\n".join(lines) if rows else f"No {noun} match." + ("" if per_case else " (`fuzz list --cases` lists every stored case.)"))
    if total > len(rows):
        click.echo(f"showing {len(rows)} of {total} {noun}; use --limit to see more", err=True)
    if bugs_only and not (status or backend or op):
        left_out = {name: n for name, n in sorted(corpus.bucket_verdict_counts().items()) if not verdicts.is_bug(name)}
        if left_out:
            counts = ", ".join(f"{n} {name}" for name, n in left_out.items())
            click.echo(f"not listed: {counts} bucket(s), which are not bugs; --all lists them", err=True)


def _reproduce_hints(case_id: int, db_path: str, plugins: list[str]) -> list[str]:
    """The commands that re-run the case, with --db and --plugin where they are not the defaults."""
    extra = (f" --db {db_path}" if db_path != DEFAULT_DB else "") + "".join(f" --plugin {p}" for p in plugins)
    return [f"fuzz replay {case_id}{extra}", f"fuzz export {case_id}{extra} -o repro.py"]


@main.command()
@db_option
@click.argument("handle", metavar="ID")
@click.option("--rerun", is_flag=True, help="Also run the case now on every default backend available here and those "
                                            "it was found on, and say where the bug lives (eager only, one compiler, "
                                            "one framework, every float32 backend).")
@plugin_option
@memory_limit_option
@json_option
def show(db_path, handle, rerun, plugins, as_json):
    """Show one case (ID 7) or a bucket's smallest case (ID B7): the triage of its buckets and the
    releases each was checked on (`fuzz replay --on`), the compiler pass `fuzz localize` named, the upstream searches
    that decide whether it is new and the nearest known bugs, graph, shapes, how it was shrunk, each
    backend's verdict and error vs the reference, versions, and the commands that reproduce it.

    \b
    Example:
      fuzz show B3
      fuzz show 13 --rerun      # where the bug lives: every default backend on the shrunk case
    """
    from fuzzer.ir import infer_shapes
    from fuzzer.programs.program import written_inputs
    from fuzzer.triaging.known import load_registry
    from fuzzer.triaging.novelty import bucket_novelty
    from fuzzer.triaging.pass_bisect import localization_phrase, stored_localization
    from fuzzer.triaging.triage import campaign_plugins, require_backends, shrink_history

    corpus = open_corpus(db_path)
    case_id, named = corpus.named_case(handle)
    stored = corpus.get_case(case_id)
    campaign = corpus.campaign(stored.campaign_id) if stored.campaign_id else None
    buckets = corpus.case_buckets(case_id)
    bucket = named or (corpus.bucket(stored.signature) if stored.signature else None)
    original = corpus.get_case(stored.shrunk_from) if stored.shrunk_from else None
    history = shrink_history(corpus, stored)
    rerun_reply, location, left_out = None, None, []
    if rerun:  # with the --plugin files given here only: a stored plugin name is never loaded
        from fuzzer.running.replay import replay_case
        from fuzzer.triaging.bug_location import locate, rerun_backends

        found_on = original.backends if original else stored.backends
        require_backends(corpus, stored, found_on, list(plugins))
        names, left_out = rerun_backends(found_on, stored.case.graph)
        rerun_reply = replay_case(stored.case, names, list(plugins))
        location = locate(rerun_reply.to_dict()["verdicts"])
    shapes = infer_shapes(stored.case.graph)
    reproduce = _reproduce_hints(stored.id, db_path, list(plugins) or campaign_plugins(corpus, stored))
    data = {
        "id": stored.id, "verdict": stored.verdict, "signature": stored.signature, "findings": stored.findings,
        "triage": {"status": bucket["status"], "note": bucket["note"], "known_bug": bucket["known_bug"],
                   "bucket": bucket["signature"], "bucket_id": bucket["id"], "members": bucket["members"]} if bucket else None,
        "buckets": [{key: b[key] for key in ("id", "signature", "status", "note", "known_bug", "count", "representative")}
                    for b in buckets],
        "backends": stored.backends, "verdicts": stored.verdicts, "shrunk_from": stored.shrunk_from,
        "shrink_log": stored.shrink_log, "shrink_history": history,
        "original_verdicts": original.verdicts if original else None,
        "rerun": rerun_reply.to_dict() if rerun_reply else None, "where": location, "not_rerun": left_out,
        "graph": stored.case.graph.to_dict(), "shapes": {k: list(v) for k, v in shapes.items()},
        "values": {name: array.tolist() for name, array in sorted(stored.case.arrays.items()) if array.size <= VALUES_SHOWN},
        "versions": campaign["versions"] if campaign else None, "seed": stored.case.seed, "reproduce": reproduce,
        "release_checks": bucket["release_checks"] if bucket else [],
        "localization": stored_localization(bucket["localization"]) if bucket else None,
    }
    novelty = bucket_novelty(stored, bucket, load_registry()) if bucket else None
    data["novelty"] = novelty.to_dict() if novelty else None
    lines = [f"Case {stored.id}: {stored.verdict}  {stored.signature or ''}"]
    for shown in ([named] if named else buckets):  # each bucket of the case, with the handle that triages it
        lines.append(f"Triage: {shown['status']}" + (f" (known bug {shown['known_bug']})" if shown["known_bug"] else "")
                     + (f", note: {shown['note']}" if shown["note"] else "") + f" (bucket B{shown['id']} "
                     f"'{shown['signature']}' of {shown['count']} cases, smallest case {shown['representative']})")
        lines.append(f"Bucket members (findings): {_members_text(shown['members'])}")
        lines += _release_check_lines(shown["release_checks"])
        localized = stored_localization(shown.get("localization"))
        if localized:
            lines.append(localization_phrase(localized))
    lines += novelty.lines() if novelty else []
    if history:
        lines.append(history[0].upper() + history[1:] + ".")
    lines.append(f"Graph (regime {stored.case.graph.regime or 'small'}):")
    for spec in stored.case.graph.inputs:
        layout = f"  stored {spec.layout} in torch" if spec.layout != "contiguous" else ""
        lines.append(f"  {spec.name:<12} input{'':<13} -> {list(spec.shape)}{layout}")
    for node in stored.case.graph.nodes:
        lines.append(f"  {node.name:<12} {node.op:<12} {', '.join(node.inputs):<8} -> {list(shapes[node.name])}  {json.dumps(node.attrs)}")
    lines.append(f"  outputs: {', '.join(stored.case.graph.outputs)}")
    if stored.case.graph.steps:  # a program (fuzzer/programs/program.py)
        lines.append(f"  called {stored.case.graph.steps} times on the same inputs; then the inputs it writes: "
                     f"{', '.join(written_inputs(stored.case.graph)) or 'none'}")
    resize = stored.case.graph.resized
    if resize is not None:
        lines.append(f"  each step on the leading rows {list(resize.rows)} of {', '.join(resize.inputs)}, dim 0 marked {resize.mark}")
    lines += _value_lines(stored.case.arrays)
    lines.append("Every backend it was checked on, against the float64 reference, and its findings:")
    lines += _checked_lines(stored.verdicts, stored.findings)
    if rerun_reply:
        lines.append("Every default backend and those it was found on, run on this case now:")
        lines += _verdict_lines(data["rerun"]["verdicts"])
        lines += [f"  not run: {why}" for why in left_out]
        lines.append(f"Where the bug lives: {location['summary']}.")
    elif original and len(original.backends) > len(stored.backends):
        lines.append(f"Before shrinking, on case {original.id} (`fuzz show {stored.id} --rerun` runs them all on this case):")
        lines += _verdict_lines(original.verdicts)
    if campaign:
        v = campaign["versions"]
        lines.append(f"Versions: torch {v.get('torch')}, jax {v.get('jax')}, numpy {v.get('numpy')}, cuda {v.get('cuda')}, "
                     f"python {v.get('python')} on {v.get('device')}")
        for name, other in v.get("environments", {}).items():
            lines.append(f"  environment {name}: torch {other.get('torch')}, jax {other.get('jax')}, "
                         f"numpy {other.get('numpy')}, python {other.get('python')}")
    lines.append(f"Reproduce: {reproduce[0]}   |   {reproduce[1]}")
    emit(as_json, data, "\n".join(lines))


VALUES_SHOWN = 16  # an input or weight this small is shown whole; a larger one by its range (`fuzz export` has all)


def _value_lines(arrays: dict) -> list[str]:
    """'Values (float64, ...):' and one line per input and weight: its values, each as it reads back exactly."""
    import numpy as np

    lines = ["Values (float64, as stored; `fuzz export --format json` holds every one):"]
    for name, array in sorted(arrays.items()):
        if array.size <= VALUES_SHOWN:
            shown = str(array.tolist())  # Python's float repr: the shortest text that reads back the same float64
        else:
            finite = array[np.isfinite(array)]
            shown = f"{array.size} values" + (f" in [{finite.min():.6g}, {finite.max():.6g}]" if finite.size else "")
            shown += f", {array.size - finite.size} not finite" if finite.size < array.size else ""
        lines.append(f"  {name:<12} {shown}")
    return lines


def _release_check_lines(checks: list[dict]) -> list[str]:
    """'Checked on releases:' and one line per recorded check (`fuzz replay --on`), newest first."""
    from fuzzer.triaging.release_checks import check_phrase

    return ["Checked on releases:"] * bool(checks) + [
        f"  {check_phrase(c)} (env {c['environment']}), checked {_short_time(c['checked_at'])} UTC on case {c['case_id'] or '-'}"
        for c in checks]


REGION_KEYS_SHOWN = 40  # never-reached region keys (or pairs) listed in text; --json lists them all
KEYS, PAIRS, MOTIFS = "Region keys", "Pairs of keys of one node", "Motifs (compiler rewrite patterns)"


def _region_summary(coverage: dict, what: str = KEYS) -> str:
    """Region coverage in words, with the keys (or pairs: fuzzer/drawing/region_pairs.py) never reached (fuzzer/drawing/regions.py)."""
    if not coverage["declared"]:
        return f"{what}: none declared."
    missing = coverage["never_reached"]
    shown = ", ".join(missing[:REGION_KEYS_SHOWN]) + (f" and {len(missing) - REGION_KEYS_SHOWN} more (--json lists them)"
                                                       if len(missing) > REGION_KEYS_SHOWN else "")
    text = f"{what} covered: {coverage['covered']}/{coverage['declared']} ({coverage['covered'] / coverage['declared']:.0%})"
    return text + (f"; never reached: {shown}." if missing else ".")


JUDGED_ROWS_SHOWN = 20  # least-judged (op, dtype, kind) rows listed in text; --json lists them all


@main.command()
@db_option
@json_option
def stats(db_path, as_json):
    """Counts of cases, findings and buckets by verdict and triage status, and what the oracle judged per op.

    \b
    Example:
      fuzz stats --json
    """
    data = open_corpus(db_path).stats()
    lines = [f"{data['cases']} stored cases ({data['cases_with_findings']} with findings, {data['shrunk_cases']} shrunk "
             f"reproducers among them; a bucket keeps a few cases and counts the rest, which `fuzz campaigns` counts too), "
             f"{data['buckets']} buckets, {data['campaigns']} campaigns"]
    lines += [f"  verdict {k:<16} {v}" for k, v in data["cases_by_verdict"].items()]
    lines += [f"  status  {k:<16} {v}" for k, v in data["buckets_by_status"].items()]
    for regime in sorted(set(data["graphs_by_regime"]) | set(data["findings_by_regime"])):
        lines.append(f"  regime  {regime:<30} {data['graphs_by_regime'].get(regime, 0)} graphs, "
                     f"{data['findings_by_regime'].get(regime, 0)} cases with findings")
    for campaign_id, coverage in data["region_coverage"].items():
        lines.append(f"  campaign {campaign_id}: {_region_summary(coverage)}")
        if campaign_id in data["pair_coverage"]:
            lines.append(f"  campaign {campaign_id}: {_region_summary(data['pair_coverage'][campaign_id], PAIRS)}")
        if data["motif_coverage"].get(campaign_id, {}).get("declared"):
            lines.append(f"  campaign {campaign_id}: {_region_summary(data['motif_coverage'][campaign_id], MOTIFS)}")
    if data["judged_share"]:  # fuzzer/judging/judged_share.py: u is the dtype's unit roundoff, the allowance relative to the output's scale
        from fuzzer.judging.judged_share import describe

        lines.append(f"  judged share, least judged first ({min(JUDGED_ROWS_SHOWN, len(data['judged_share']))} of "
                     f"{len(data['judged_share'])} op/dtype/kind rows; --json lists them all):")
        lines += [f"    {describe(row)}" for row in data["judged_share"][:JUDGED_ROWS_SHOWN]]
    emit(as_json, data, "\n".join(lines))


@main.command()
@db_option
@json_option
def campaigns(db_path, as_json):
    """List campaigns: id, uuid, status, start, duration, graphs, findings, and how to resume each.

    A campaign that used plugins names them: pass each again with --plugin PATH when resuming
    (a resume never loads a file the corpus names).

    \b
    Example:
      fuzz campaigns --db corpus/fuzz.db
    """
    rows = open_corpus(db_path).campaign_summaries()
    for row in rows:
        row["resume"] = None if row["status"] == "finished" else resume_command(db_path, row["id"])
    lines = [f"{'id':>4}  {'status':<11} {'started':<25} {'duration':>9} {'graphs':>7} {'findings':>8}  resume"]
    for row in rows:
        duration = "-" if row["seconds"] is None else f"{row['seconds']:.0f}s"
        # Stored plugin names are shown, never put in the command: resuming loads only the files the user passes.
        plugins = (f", with --plugin PATH for each of its plugins {', '.join(repr(p) for p in row['plugins'])}"
                   if row["resume"] and row["plugins"] else "")
        shown = {key: "-" if row[key] is None else row[key] for key in ("status", "started", "graphs", "findings")}
        lines.append(f"{row['id']:>4}  {shown['status']:<11} {shown['started']:<25} {duration:>9} {shown['graphs']:>7} "
                     f"{shown['findings']:>8}  {row['resume'] or '-'}{plugins}")
        if row["stopped_because"]:
            lines.append(f"      stopped because: {row['stopped_because']}")
    emit(as_json, rows, "\n".join(lines) if rows else f"No campaigns in {db_path} yet; start one with `fuzz run`.")


@main.command()
@db_option
@click.argument("handle", metavar="ID")
@click.option("--status", required=True, help="new, confirmed, reported, fixed, wontfix, flaky or known "
                                                "(wontfix and known buckets do not make `fuzz run` exit 1).")
@click.option("--note", callback=stored_text, help="Free text kept with the bucket (e.g. an upstream issue link).")
@json_option
def triage(db_path, handle, status, note, as_json):
    """Set the triage status of a bucket (ID B7, as `fuzz list` shows it; or 7: the bucket of case
    7, refused when the case is in several): every member of it (each dtype, release and
    inherited copy) shares it, and `fuzz export --format json` / `fuzz import` and `fuzz merge`
    carry it to other corpora.

    \b
    Example:
      fuzz triage B3 --status reported --note "pytorch/pytorch#12345"
    """
    bucket = open_corpus(db_path).triage(handle, status, note)
    emit(as_json, bucket, f"Bucket B{bucket['id']} '{bucket['signature']}' is now {bucket['status']} "
                          f"({len(bucket['members'])} member{'' if len(bucket['members']) == 1 else 's'}: "
                          f"{_members_text(bucket['members'])}).")


@main.command()
@db_option
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@json_option
def rebucket(db_path, dry_run, as_json):
    """Recompute every stored finding's signature and bucket with this release's rules (one cause,
    one bucket: a bug's dtypes and inherited copies are members of one bucket), and merge the
    buckets that now share one, so a corpus made by an older release converges. A corpus of
    schema 5 or older is grouped this way when it is first opened.

    Merged buckets keep their triage: every note is kept, and an open status (reported,
    confirmed) wins over a closed one (fixed, wontfix), which the note then records. What is
    recomputed is what the corpus stores: the verdict a finding is bucketed under (all-zeros
    and constant are bucketed as mismatch) and the normalized error text of a crash. The culprit
    op is kept as stored: localizing it again needs the backends (`fuzz shrink ID` re-runs them).

    \b
    Example:
      fuzz rebucket --dry-run && fuzz rebucket
    """
    from fuzzer.triaging.triage import rebucket as rebucket_corpus

    result = rebucket_corpus(open_corpus(db_path), dry_run)
    verb = "would change" if dry_run else "changed"
    lines = [f"{result['cases_changed']} of {result['cases']} cases {verb}; buckets: {result['buckets_before']} -> "
             f"{result['buckets_after']}."]
    for change in result["changes"]:
        lines.append(f"  {change['signature']}  ({change['status']})")
        lines += [f"      from {old}" for old in change["from"]]
    emit(as_json, result, "\n".join(lines))


# -- known bugs ------------------------------------------------------------------------------------

@main.group()
def known():
    """The known-bug registry: bugs shipped as data (corpus/known-bugs.json). A campaign stores
    their findings in buckets with status `known`, prints no new-bucket line for them and does
    not exit 1 for them. Entries say `convention` for a result the framework documents.

    \b
    Example:
      fuzz known list
      fuzz known check                     # which known bugs this installation still has
      fuzz known add B7 --id torch-foo-nan --link https://github.com/pytorch/pytorch/issues/123
    """


def _match_text(match: dict) -> str:
    """'nan-inf of asinh on torch/inductor (cpu; float32), torch >=2.11,<2.13'."""
    what = ", ".join(match["verdicts"]) + (f" of {', '.join(match['ops'])}" if match.get("ops") else "")
    where = ", ".join(match.get("paths", []) + match.get("kinds", []) + match.get("frameworks", [])) or "any backend"
    where += f" except {', '.join(match['except_kinds'])}" if match.get("except_kinds") else ""
    details = "; ".join(", ".join(match[key]) for key in ("devices", "dtypes") if match.get(key))
    error = f", error like '{match['error']}'" if match.get("error") else ""
    releases = "".join(f", {package} {spec}" for package, spec in match.get("releases", {}).items())
    return f"{what} on {where}" + (f" ({details})" if details else "") + error + releases


@known.command(name="list")
@known_bugs_option
@json_option
def known_list(known_bugs, as_json):
    """List the known bugs: id, status, title, upstream link, and which findings each one is.

    \b
    Example:
      fuzz known list --json
    """
    from fuzzer.triaging.known import load_registry

    registry = load_registry(known_bugs)
    lines = []
    for bug in registry.bugs:
        lines.append(f"{bug.id:<40} {bug.status:<11} {bug.entry['title']}")
        lines.append(f"{'':<4}{bug.entry.get('link') or 'not reported upstream'}; matches {_match_text(bug.entry['match'])}")
    empty = f"No known bugs in {registry.path}." if registry.path else "No known-bug registry here; pass --known-bugs FILE."
    emit(as_json, [bug.entry for bug in registry.bugs], "\n".join(lines) or empty)


@known.command(name="check")
@known_bugs_option
@plugin_option
@click.option("--timeout", type=float, default=120.0, show_default=True)
@json_option
def known_check(known_bugs, plugins, timeout, as_json):
    """Replay every known bug's stored cases on this installation and say which still reproduce
    and which look fixed here (every backend agrees now). Exit 0 whatever it finds; 2 if the
    registry is malformed.

    \b
    Example:
      fuzz known check --json
    """
    from fuzzer.running.replay import check_known_bugs
    from fuzzer.triaging.known import load_registry

    results = check_known_bugs(load_registry(known_bugs), list(plugins), timeout)
    lines = [f"{r.outcome:<11} {r.bug:<40} {Path(r.case).name if r.case else '-':<40} {r.detail}" for r in results]
    counts = {outcome: sum(r.outcome == outcome for r in results)
              for outcome in ("reproduces", "fixed here", "differs", "not run", "no case")}
    lines.append(f"{len(results)} cases: " + ", ".join(f"{n} {outcome}" for outcome, n in counts.items()))
    emit(as_json, [r.to_dict() for r in results], "\n".join(lines))


@known.command(name="add")
@db_option
@click.argument("handle", metavar="ID")
@click.option("--id", "bug_id", required=True, help="The entry's id: lowercase letters, digits, '.' and '-'.")
@click.option("--link", required=True, help="The upstream issue (an http or https address).")
@click.option("--status", "bug_status", default="open", show_default=True, help="open, convention, or 'fixed-in RELEASE'.")
@click.option("--title", callback=stored_text, help="One line saying what is wrong [default: the bucket's signature].")
@known_bugs_option
@json_option
def known_add(db_path, handle, bug_id, link, bug_status, title, known_bugs, as_json):
    """Turn a triaged bucket (ID B7, or 7: the one bucket of case 7) into a known-bug entry. The
    entry matches what the bucket is (verdict, culprit op, compiler path, device, dtype, error
    text, the finding's release on); the case (case 7, or the bucket's smallest) is exported beside the registry as
    known/ID.json; the bucket becomes `known`.

    \b
    Example:
      fuzz triage B7 --status reported --note "pytorch/pytorch#123"
      fuzz known add B7 --id torch-foo-nan --link https://github.com/pytorch/pytorch/issues/123
    """
    from fuzzer.triaging.known import add_bug, entry_for_bucket, registry_path, release_of

    corpus = open_corpus(db_path)
    bucket = corpus.named_bucket(handle)
    case_id = corpus.named_case(handle)[0]
    stored = corpus.get_case(case_id)
    if bucket["status"] == "new":
        raise UserError(f"Bucket B{bucket['id']} is not triaged yet; triage it first (e.g. `fuzz triage B{bucket['id']} "
                        "--status confirmed`), then add it.")
    versions = corpus.campaign(stored.campaign_id)["versions"] if stored.campaign_id else {}
    release = release_of(bucket["backend"], versions or {})
    affected = " ".join(release) if release else None
    entry = entry_for_bucket(bucket, bug_id, link, bug_status, title, affected, release)
    path = registry_path(known_bugs)
    case_file = add_bug(path, entry, jsonform.dumps(corpus.export_case(case_id, expect="disagree"), indent=1, sort_keys=True))
    corpus.mark_known(bucket["signature"], bug_id, keep_triage=False)
    emit(as_json, {**entry, "cases": [str(case_file)], "registry": str(path)},
         f"Added known bug '{bug_id}' to {path} (case {case_file}); its findings are known from now on.")


# -- re-running --------------------------------------------------------------------------------

def _verdict_lines(verdicts: list[dict]) -> list[str]:
    """One line per backend verdict, in its JSON form (a stored row's, or a reply's `to_dict()`)."""
    lines = []
    for v in verdicts:
        error = f" max error {v['max_error']:.3g} (allowed {v['allowed']:.3g})" if v.get("allowed") else ""
        lines.append(f"  {v['backend']:<28} {v['verdict']:<16}{error} {v.get('detail') or ''}".rstrip())
    return lines


def _replay_text(reply: dict) -> str:
    return "\n".join([f"Verdict: {reply['verdict']}", *_verdict_lines(reply["verdicts"])])


def _release_check_text(report) -> str:
    from fuzzer.triaging.release_checks import releases_text

    lines = [f"Case {report.case_id}, bucket '{report.bucket}', checked on releases (recorded on the bucket):"]
    for check in report.checks:
        lines.append(f"  {check.environment:<16} {check.outcome:<10} {releases_text(check.versions, python=True)}: {check.detail}")
    return "\n".join(lines)


@main.command()
@db_option
@click.argument("handle", metavar="ID")
@click.option("--backends", help="Comma-separated backends to run instead of the stored ones.")
@click.option("--on", "environments", metavar="ENV[,ENV...]",
              help="Run the case's finding backends in these registered environments (`fuzz env list`; `here` is this "
                   "interpreter) instead, and record on its bucket whether the bug is present, fixed, differs or "
                   "cannot run there.")
@plugin_option
@memory_limit_option
@click.option("--timeout", type=float, default=120.0, show_default=True)
@json_option
def replay(db_path, handle, backends, environments, plugins, timeout, as_json):
    """Re-run a stored case (ID 7) or a bucket's smallest case (ID B7). Exit 0 if every backend now agrees (or differs only by a GPU precision
    policy such as TF32), 1 if the discrepancy reproduces.

    With --on, the backends of the case's findings run as KIND@ENV in each environment named,
    and each environment's outcome, with the torch, jax and python versions it reports, is
    printed and recorded on the case's bucket (`fuzz show`, `fuzz export --format issue`):
    present (the same finding again), fixed (every such backend agrees), differs (it fails
    another way) or cannot-run (the release lacks the framework, device, op or API). Exit 1 if
    it is present or differs anywhere, else 0.

    \b
    Example:
      fuzz replay 3 --backends torch-eager:cpu:float32,jax-jit
      fuzz replay B2 --on here,latest,jax-0.4.28   # still in the latest release? since when?
    """
    from fuzzer import verdicts
    from fuzzer.running import envs
    from fuzzer.running.replay import replay_case
    from fuzzer.triaging.triage import require_backends

    corpus = open_corpus(db_path)
    case_id, _ = corpus.named_case(handle)
    if environments is not None:
        from fuzzer.triaging.release_checks import check_on_releases

        if backends:
            raise UserError("Pass --backends or --on, not both: --on runs the case's finding backends in each environment.")
        names = [name.strip() for name in environments.split(",") if name.strip()]
        if not names:
            raise UserError("--on needs environment names, e.g. --on here,latest (`fuzz env list` shows them).")
        report = check_on_releases(corpus, case_id, names, list(plugins), timeout)
        emit(as_json, report.to_dict(), _release_check_text(report))
        sys.exit(1 if report.reproduces else 0)
    stored = corpus.get_case(case_id)
    if backends:
        names = [b.strip() for b in backends.split(",")]
        envs.trust_command_line(names)
    else:
        names = stored.backends
    require_backends(corpus, stored, names, list(plugins))
    reply = replay_case(stored.case, names, list(plugins), timeout)
    data = reply.to_dict()
    emit(as_json, data, _replay_text(data))
    sys.exit(0 if verdicts.passes(reply.verdict) else 1)


@main.command()
@db_option
@click.argument("handle", metavar="ID")
@plugin_option
@click.option("--timeout", type=float, default=120.0, show_default=True, help="Seconds one trial run may take.")
@json_option
def localize(db_path, handle, plugins, timeout, as_json):
    """Name the compiler pass that breaks a stored case (ID 7) or a bucket's smallest case (ID B7).

    For a torch.compile kind: torch's own CompilerBisector (dynamo alone, aot_eager, decompositions,
    then inductor's passes, lowerings and switches), our check of the case as its test, in a child
    process. For an XLA kind (jax-jit and its variants, jax-vmap, jax-grad): the smallest set of HLO passes
    whose disabling (--xla_disable_hlo_passes) makes the case agree, found by halving the passes its
    compile ran; each trial runs in a fresh worker, so a pass that aborts is a trial, not our crash.
    For an ONNX Runtime kind: the lowest graph optimization level (ORT_DISABLE_ALL, then BASIC,
    EXTENDED, ALL) at which the case fails, each in a fresh worker.
    The result is kept on the case's bucket (`fuzz list`, `fuzz show`, `fuzz export --format issue`), and
    the pass is part of a compiler bucket's identity: localizing another case of a bucket (fuzz localize 12)
    that names another pass moves that case to a bucket of its own. A campaign localizes each new
    compiler bucket itself (`fuzz run --localize-time`). Exit 0 when one pass explains it, 1 when none or
    several do (or it no longer reproduces).

    \b
    Example:
      fuzz localize B4     # Disabling the HLO pass 'algsimp' alone makes it agree (...)
      fuzz localize B9     # torch's CompilerBisector: first bad at inductor/lowerings: var
      fuzz localize B2     # Appears at ORT_ENABLE_EXTENDED: an extended graph optimization (...)
    """
    from fuzzer.plugins import load_plugins
    from fuzzer.running.environment import versions
    from fuzzer.triaging.pass_bisect import localizable_backend, localize

    load_plugins(list(plugins))  # a plugin's backend is on its base's compiler path
    corpus = open_corpus(db_path)
    case_id, bucket = corpus.named_case(handle)
    stored = corpus.get_case(case_id)
    backend = localizable_backend(stored.findings, bucket["backend"] if bucket else None)
    if bucket is None:  # a case: the bucket its finding on that backend is in (its own, once split off)
        bucket = next((b for b in corpus.case_buckets(case_id) if any(m["backend"] == backend for m in b["members"])), None)
    result = localize(stored.case, backend, list(plugins), timeout)
    kept = None
    if bucket is not None and result.trials:
        kept = corpus.record_localization(bucket["signature"], result.stored(versions(), case_id))
    moved = kept is not None and kept != bucket["signature"]
    emit(as_json, {"case": case_id, **result.to_dict(), "bucket": kept and corpus.bucket(kept)["id"], "split": moved},
         f"Case {case_id} on {backend}: {result.summary} ({result.trials} trials"
         + (f" over {result.candidates} passes.)" if result.compiler == "xla" else ".)")
         + (f"\nIts bucket B{bucket['id']} names another pass: the case now has a bucket of its own, "
            f"B{corpus.bucket(kept)['id']} ({kept})." if moved else ""))
    sys.exit(0 if len(result.passes) == 1 else 1)


@main.command()
@db_option
@click.argument("handle", metavar="ID")
@click.option("--shrink-time", type=float, default=60.0, show_default=True)
@plugin_option
@memory_limit_option
@known_bugs_option
@json_option
def shrink(db_path, handle, shrink_time, plugins, known_bugs, as_json):
    """Shrink a stored case (ID 7) or a bucket's smallest case (ID B7) again (e.g. after a shrinker change); stores the result linked to it.
    A result that is a known bug (the registry, as a campaign applies it) lands in a bucket marked
    known.

    \b
    Example:
      fuzz shrink 12 --shrink-time 120
    """
    from fuzzer.running.replay import reshrink_stored
    from fuzzer.triaging.known import load_registry, mark_known_cases

    registry = load_registry(known_bugs)
    corpus = open_corpus(db_path)
    case_id, _ = corpus.named_case(handle)
    result = reshrink_stored(corpus, case_id, list(plugins), shrink_time)
    result["known_bugs"] = sorted(set(mark_known_cases(corpus, registry, [result["id"]]).values()))
    log = result["log"]
    known = f" It is the known bug {', '.join(result['known_bugs'])}." if result["known_bugs"] else ""
    emit(as_json, result, f"Case {case_id} shrunk to case {result['id']}: {log['original_nodes']} -> {log['final_nodes']} nodes, "
         f"{log['final_elements']} elements, {log['calls']} checks in {log['seconds']} s.{known}")


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_REGRESSION_DIR)
@plugin_option
@memory_limit_option
@click.option("--timeout", type=float, default=120.0, show_default=True)
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Also write the results as JUnit XML, one test case per file, for CI systems.")
@json_option
def regress(directory, plugins, timeout, junit_path, as_json):
    """Replay every JSON case in DIRECTORY against its recorded expectation; exit 1 on any surprise.

    A case's "expect" is "agree" (a fixed bug must stay fixed) or "disagree" (a known open
    bug must still be found, as the same bucket: every recorded finding's signature, under
    this release's rules, must come back). Without "expect", the recorded verdict says which.
    Only regular files are read: a *.json that is a FIFO, a device or a link leading out of
    DIRECTORY is skipped with a warning.

    \b
    Example:
      fuzz regress corpus/regression --junit regress.xml
    """
    from fuzzer.running.replay import regress as run_regress, write_junit

    if not directory.is_dir():
        raise UserError(f"Regression folder '{directory}' does not exist.")
    results = run_regress(directory, list(plugins), timeout, warn=lambda sentence: click.echo(f"Warning: {sentence}", err=True))
    lines = []
    for r in results:
        lines.append(f"{'SURPRISE' if r.surprise else 'ok':<9} {Path(r.path).name:<40} expect {r.expect:<9} got {r.verdict}")
        if r.surprise:
            lines.append(f"{'':<10}{r.why}")
    surprises = sum(r.surprise for r in results)
    lines.append(f"{len(results)} cases, {surprises} surprises")
    if junit_path:
        write_junit(results, junit_path)
        lines.append(f"Wrote {junit_path}")
    emit(as_json, [r.to_dict() for r in results], "\n".join(lines))
    sys.exit(1 if surprises else 0)


# -- moving cases in and out --------------------------------------------------------------

@main.command(name="export")
@db_option
@click.argument("handle", metavar="ID")
@click.option("--format", "fmt", type=click.Choice(["minimal", "script", "pytest", "json", "issue"]), default="minimal",
              show_default=True, help="minimal: the short public-API script for upstream; script: the full harness "
                                      "(stored inputs and expected values, worst entries); issue: a Markdown bug report "
                                      "in the form the framework's issue template asks for.")
@click.option("--backend", help="Backend to reproduce (default: the bucket's, or the case's first finding's).")
@click.option("--expect", type=click.Choice(["agree", "disagree"]), help="JSON only: the expectation for `fuzz regress`.")
@plugin_option
@memory_limit_option
@reference_timeout_option
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file instead of stdout.")
@known_bugs_option
@click.option("--force", is_flag=True, help="Issue only: export a finding that is no bug to report (a precision policy, "
                                            "a known-bug registry entry of status convention), with a warning.")
def export_case(db_path, handle, fmt, backend, expect, plugins, timeout, output, known_bugs, force):
    """Export a case (ID 7) or a bucket's smallest case (ID B7) as a standalone script, a pytest
    file, JSON (for import / regress) or a Markdown bug report.

    The scripts need only numpy and torch or jax, and exit 1 while the bug is present, 0 once it
    is fixed, 2 where the device they need (CUDA) is missing.

    \b
    Example:
      fuzz export B3 -o repro.py && python repro.py    # the minimal reproducer of bucket B3
      fuzz export 3 --format script -o harness.py
      fuzz export 3 --format json --expect disagree -o corpus/regression/layernorm.json
      fuzz export 3 --format issue -o bug/README.md
    """
    from fuzzer.backends import get_backend
    from fuzzer.plugins import canaries_for, load_plugins
    from fuzzer.reproducers.minimal_reproducer import build_minimal_script
    from fuzzer.reproducers.reproducer import build_script, killed_its_process
    from fuzzer.running import envs
    from fuzzer.running.replay import require_bounded_reference

    envs.trust_command_line([backend or ""])
    corpus = open_corpus(db_path)
    case_id, bucket = corpus.named_case(handle)
    stored = corpus.get_case(case_id)  # an unknown id is refused before a folder is made
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)  # a missing folder is made, as `run` and `report` make theirs
    if fmt == "json":
        text = jsonform.dumps(corpus.export_case(case_id, expect), indent=1, sort_keys=True)
    else:
        if not stored.findings and not backend:
            choices = f"one of the backends it was checked on ({', '.join(stored.backends)})" if stored.backends else \
                "a backend from `fuzz backends`"
            raise UserError(f"Case {case_id} has no finding; pass --backend with {choices} to choose what the script runs.")
        # A bucket's own finding on its case: case 4 may be in torch-eager's bucket and torch-layout's.
        own = [f["backend"] for f in sorted(stored.findings, key=lambda f: f["verdict"] == verdicts.INHERITED)
               if bucket and f["signature"] in {m["signature"] for m in bucket["members"]}]
        name = backend or (own or [stored.findings[0]["backend"]])[0]
        load_plugins(list(plugins) + canaries_for([name]))
        finding = next((f for f in stored.findings if f.get("backend") == name), None)
        if fmt == "issue":  # refused before any work: a convention or a precision policy is no upstream bug
            from fuzzer.reproducers.issue_report import refuse_unless_forced
            from fuzzer.triaging.known import load_registry

            registry = load_registry(known_bugs)
            reason = refuse_unless_forced(corpus, case_id, get_backend(name), registry, force)
            if reason:
                click.echo(f"Warning: {reason}; exporting it as an issue anyway (--force).", err=True)
        # The scripts compute the reference in-process; a minimal script of a crash or hang needs none
        # of the backend's own (its gradients' float64 run may abort on the case that found the abort).
        crashed = (finding or {}).get("verdict") in (verdicts.CRASH, verdicts.HANG) and fmt in ("minimal", "issue")
        require_bounded_reference(stored.case, case_id, list(plugins), timeout, extra_of=None if crashed else name)
        if fmt == "issue":
            from fuzzer.reproducers.issue_report import export_issue

            text = export_issue(corpus, case_id, get_backend(name), output, list(plugins), not_a_bug_reason=reason,
                                registry=registry)
        else:
            title = stored.signature or f"case {case_id}"
            if fmt == "minimal":
                text = build_minimal_script(stored.case, get_backend(name), title, finding)
            else:
                text = build_script(stored.case, get_backend(name), title, pytest_style=fmt == "pytest",
                                    verdict=(finding or {}).get("verdict", ""),
                                    in_child=fmt == "script" and killed_its_process(finding))
    if output:
        output.write_text(text + ("" if text.endswith("\n") else "\n"))
        click.echo(f"Wrote {output}", err=True)
    else:
        click.echo(text)


@main.command(name="import")
@db_option
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@known_bugs_option
@json_option
def import_cases(db_path, files, known_bugs, as_json):
    """Import exported JSON cases. Every file is validated before anything is written. A case
    of a known bug (the registry, as a campaign applies it) lands in a bucket marked known.

    \b
    Example:
      fuzz import --db team.db findings/*.json
    """
    from fuzzer.corpus import case_from_export, load_case_file
    from fuzzer.triaging.known import load_registry, mark_known_cases

    registry = load_registry(known_bugs)
    loaded = [load_case_file(path) for path in files]
    for data in loaded:
        case_from_export(data)  # validate all before creating a corpus
    corpus = open_corpus(db_path, create=True)
    result = corpus.import_cases(loaded)
    result["known_bugs"] = sorted(set(mark_known_cases(corpus, registry, result["imported"]).values()))
    text = f"Imported {len(result['imported'])} case(s): {', '.join(map(str, result['imported'])) or '-'}"
    if result["known_bugs"]:
        text += f"; known bugs: {', '.join(result['known_bugs'])}"
    if result["already_here"]:
        text += f"; already here, not stored again: {', '.join(map(str, result['already_here']))}"
    emit(as_json, result, text)


@main.command()
@db_option
@click.argument("others", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True, path_type=Path))
@json_option
def merge(db_path, others, as_json):
    """Merge corpora from other campaigns or machines into --db (cases, shrink links, triage, release checks).

    Campaigns are matched by uuid and cases by content, so merging again, merging a renamed
    copy or merging a corpus into itself adds nothing. All files merge in one transaction:
    a refused file leaves --db as it was.

    \b
    Example:
      fuzz merge --db team.db gpu-node1.db gpu-node2.db
    """
    from fuzzer.corpus import Corpus

    others = [Corpus(path, create=False) for path in others]  # refuse a bad file before writing anything
    for other in others:
        other.check_mergeable()
    corpus = open_corpus(db_path, create=True)
    results = corpus.merge_all(others)
    lines = [f"{path}: {r['cases_added']} cases added, {r['cases_already_here']} already here, {r['campaigns_added']} campaigns added, "
             f"{r['buckets_triaged']} buckets took its triage" for path, r in results.items()]
    emit(as_json, results, "\n".join(lines))


# -- what is available ---------------------------------------------------------------------

@main.command()
@plugin_option
@json_option
def backends(plugins, as_json):
    """List backends (kind:device:dtype) and whether each can run here, and why not.

    \b
    Example:
      fuzz backends --plugin my_kernel.py
    """
    from fuzzer.backends import default_backends, table
    from fuzzer.plugins import load_plugins

    load_plugins(list(plugins))
    defaults = default_backends()
    rows = []
    for kind in table().kinds():
        cls = table().classes[kind]
        for device in cls.devices:
            for dtype in cls.dtypes:
                backend = cls(device, dtype)
                reason = backend.unavailable_reason()
                rows.append({"name": backend.name, "available": reason is None, "why_not": reason,
                             "default": backend.name in defaults, "description": cls.description, "path": cls.path})
    for name, backend in sorted(table().derived.items()):
        reason = backend.unavailable_reason()
        rows.append({"name": name, "available": reason is None, "why_not": reason, "default": False,
                     "description": f"plugin, derived from {type(backend).__name__}", "path": None})
    lines = [f"{'yes' if r['available'] else 'no ':<4} {'*' if r['default'] else ' '} {r['name']:<30} "
             f"{r['description'] if r['available'] else r['why_not']}" for r in rows]
    lines.append("(* = in the default set of `fuzz run`; any built-in one runs under another Python environment as "
                 "NAME@ENV, see `fuzz env --help`)")
    emit(as_json, rows, "\n".join(lines))


@main.command()
@click.option("--numerics", "numerics_of", metavar="NAME",
              help="Print op NAME's numerics declaration instead: each fact beyond the generic models, with its reason.")
@click.option("--rebuild-derived", is_flag=True,
              help="Build the table of ops derived from the installed torch's op database again (needs expecttest; a few minutes).")
@json_option
def ops(numerics_of, rebuild_derived, as_json):
    """List the ops the generator draws from, by family, with where each comes from: hand-written,
    or derived from torch's op database (`--ops derived` draws those) with a numpy ref or torch's float64 run.

    \b
    Example:
      fuzz ops --json
      fuzz ops --numerics layer_norm
    """
    from fuzzer.ops import get_op, registry
    from fuzzer.ops.derived.listing import derived_rows, rebuild_table

    if rebuild_derived:
        click.echo(rebuild_table(), err=True)
    if numerics_of:
        facts = get_op(numerics_of).numerics.describe()
        emit(as_json, facts, "\n".join(f"{f['fact']} = {f['value']}: {f['why']}" for f in facts)
             or f"{numerics_of} declares nothing: the generic models judge it.")
        return
    rows = [{"name": op.name, "family": op.family, "arity": list(op.arity), "sensitivity": op.numerics.sensitivity,
             "numerics": op.numerics.describe(), "notes": op.notes,
             "source": "plugin" if op.family == "plugin" else "hand-written"}
            for op in sorted(registry().values(), key=lambda o: (o.family, o.name))] + derived_rows()
    emit(as_json, rows, "\n".join(f"{r['family']:<12} {r['name']:<14} {r['source']:<20} {r['notes']}".rstrip() for r in rows))


@main.command()
@json_option
def regimes(as_json):
    """List the regimes cases are drawn from, with each one's share of a campaign.

    `fuzz run --regimes large-op,special-values` draws from some of them only (keeping their
    relative shares); a name "a+b" is a composition of two, with the features of both. Every
    case records its regime, and `fuzz stats` counts per regime.

    \b
    Example:
      fuzz regimes --json
    """
    from fuzzer.drawing.regimes import MIX

    rows = [{"name": r.name, "percent": r.weight, "description": r.description, "max_elements": r.max_elements,
             "value_profiles": sorted(set(r.value_profiles))} for r in MIX]
    emit(as_json, rows, "\n".join(f"{r['name']:<30} {r['percent']:>3}%  {r['description']}" for r in rows))


@main.command()
@click.option("--db", "db_path", help="Keep the canaries' findings in this corpus [default: a temporary one, deleted "
                                      "afterwards, so they never mix with real findings].")
@click.option("--max-cases", type=click.IntRange(min=1), default=300, show_default=True, help="Give up on a canary after this many graphs.")
@click.option("--list", "list_only", is_flag=True, help="Only list the canaries.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="Run the canaries derived from torch on this device.")
@json_option
def selftest(db_path, max_cases, list_only, seed, device, as_json):
    """Prove the fuzzer finds each seed bug class: run a short campaign against every canary.

    Exit 1 if any canary is not found (and shrunk) within --max-cases graphs.

    \b
    Example:
      fuzz selftest --db /tmp/selftest.db
    """
    from fuzzer.plugins import canary_names
    from fuzzer.running.selftest import run_selftest

    if list_only:
        emit(as_json, canary_names(), "\n".join(canary_names()))
        return
    if device == "cuda":
        from fuzzer.backends.torch_eager import cuda_unavailable_reason

        reason = cuda_unavailable_reason()
        if reason:
            raise UserError(f"Cannot run the canaries on CUDA: {reason}")
    def print_result(r):
        if as_json:
            return
        if not r["found"]:
            click.echo(f"MISSED  {r['canary']:<22} not found in {r['graphs']} graphs, {r['seconds']:.1f}s")
        else:
            shrunk = (f"shrunk to {r['shrunk_nodes']} nodes: {r['shrunk_ops']} (case {r['shrunk_case']})" if r["shrunk_case"]
                      else "no shrunk case stored")
            click.echo(f"found   {r['canary']:<22} after {r['graphs']} graphs, {r['seconds']:.1f}s; {shrunk}")

    with tempfile.TemporaryDirectory(prefix="fuzz-selftest-") as folder:
        corpus = open_corpus(db_path or str(Path(folder) / "selftest.db"), create=True)
        try:
            results = run_selftest(corpus, max_cases, seed, device=device, on_result=print_result)
        finally:
            corpus.close()
    found = sum(r["found"] for r in results)
    emit(as_json, results, f"{found} of {len(results)} canaries found" + ("" if db_path else " (their cases were in a temporary "
                                                                           "corpus; pass --db to keep them)."))
    sys.exit(0 if found == len(results) else 1)


@main.command()
@db_option
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False, path_type=Path), default="reports/latest",
              show_default=True, help="Folder for report.html and summary.md.")
@plugin_option
@memory_limit_option
@reference_timeout_option
@json_option
def report(db_path, out_dir, plugins, timeout, as_json):
    """Write a self-contained HTML report (plots, buckets, reproducers) and a Markdown summary.

    Plots need matplotlib (pip install 'opdiff-fuzz[report]'); without it the report says so in their place.

    \b
    Example:
      fuzz report --db corpus/fuzz.db -o reports/nightly && xdg-open reports/nightly/report.html
      fuzz report --db plugin.db --plugin my_kernel.py   # scripts for a plugin's backends
    """
    from fuzzer.report import write_report
    from fuzzer.triaging.triage import missing_bucket_backends

    corpus = open_corpus(db_path)
    for sentence in missing_bucket_backends(corpus, list(plugins)):  # the report says "no script" for those buckets
        click.echo(f"Warning: {sentence}", err=True)
    result = write_report(corpus, out_dir, reference_timeout=timeout)
    emit(as_json, result, f"Wrote {result['html']} and {result['markdown']} ({result['buckets']} buckets).")


# -- other Python environments and bisect ------------------------------------------------

@main.group()
def env():
    """Python environments with other torch/jax releases, for backends named KIND@ENV.

    A backend runs in another environment when its name ends in @ENV: ENV is a name
    registered here, or the path of a venv or a Python interpreter. The interpreter
    needs numpy and the framework, nothing else of ours. Environments live under
    $FUZZ_ENV_HOME (default ~/.cache/fuzzer/envs).

    \b
    Example:
      fuzz env create jax-0.4.30 'jax==0.4.30' 'jaxlib==0.4.30'
      fuzz run --backends jax-jit,jax-jit@jax-0.4.30 --time 10m    # new release vs old
      fuzz replay 3 --backends jax-jit,jax-jit@jax-0.4.30
    """


def _env_row(environment) -> dict:
    from dataclasses import asdict

    return asdict(environment)


@env.command(name="create")
@click.argument("name")
@click.argument("requirements", nargs=-1, required=True)
@click.option("--python", default=sys.executable, show_default="this interpreter",
              help="The base interpreter of the venv (Python 3.10 or newer).")
@click.option("--pip-arg", "pip_args", multiple=True, metavar="ARG",
              help="Passed to pip install, e.g. --pip-arg=--index-url=https://download.pytorch.org/whl/cpu (repeatable).")
@json_option
def env_create(name, requirements, python, pip_args, as_json):
    """Make a venv with REQUIREMENTS (pip syntax) and numpy, and register it as NAME.

    \b
    Example:
      fuzz env create torch-2.4 'torch==2.4.1' 'numpy<2' --pip-arg=--index-url=https://download.pytorch.org/whl/cpu
    """
    from fuzzer.running import envs

    created = envs.create(name, list(requirements), python, list(pip_args), progress=lambda line: click.echo(line, err=True))
    emit(as_json, _env_row(created), f"Created {created.describe()}")


@env.command(name="add")
@click.argument("name")
@click.argument("python")
@json_option
def env_add(name, python, as_json):
    """Register an existing interpreter (a venv's bin/python, a conda env's python) as NAME.

    \b
    Example:
      fuzz env add nightly ~/venvs/torch-nightly/bin/python
    """
    from fuzzer.running import envs

    added = envs.add(name, python)
    emit(as_json, _env_row(added), f"Registered {added.describe()}")


@env.command(name="list")
@click.option("--check", is_flag=True, help="Start each interpreter and report the versions it has now.")
@json_option
def env_list(check, as_json):
    """List registered environments and the versions recorded for them.

    \b
    Example:
      fuzz env list --check
    """
    from fuzzer.running import envs

    rows, lines, broken = [], [], 0
    for environment in envs.load_all().values():
        row, line = _env_row(environment), environment.describe()
        if check:
            try:
                row["versions_now"] = envs.probe(environment.python)
            except UserError as exc:
                row["broken"], line, broken = str(exc), f"{environment.name}: BROKEN: {exc}", broken + 1
        rows.append(row)
        lines.append(line)
    emit(as_json, rows, "\n".join(lines) or f"No environments yet (under {envs.home()}); see `fuzz env create --help`.")
    sys.exit(1 if broken else 0)


@env.command(name="remove")
@click.argument("name")
@json_option
def env_remove(name, as_json):
    """Unregister NAME; a venv that `fuzz env create` made is deleted too.

    \b
    Example:
      fuzz env remove jax-0.4.30
    """
    from fuzzer.running import envs

    removed = envs.remove(name)
    emit(as_json, _env_row(removed), f"Removed {removed.name}{' and its venv' if removed.created else ''}.")


@main.command()
@db_option
@click.argument("handle", metavar="ID")
@click.option("--package", required=True, help="The package whose releases are searched: torch, jax, jaxlib, numpy...")
@click.option("--from", "low", required=True, metavar="VERSION", help="An older release, where the case passes.")
@click.option("--to", "high", required=True, metavar="VERSION", help="A newer release, where it fails.")
@click.option("--find-fix", is_flag=True, help="Look for the release that fixed the case instead: it fails at --from "
                                                "and passes at --to.")
@click.option("--backend", help="The backend to run in each release (default: the one of the stored finding).")
@click.option("--with", "extra", multiple=True, metavar="REQUIREMENT",
              help="Also install this in each environment; {version} is replaced, e.g. --with 'jaxlib=={version}' "
                   "or --with 'numpy<2' for torch before 2.3 (repeatable).")
@click.option("--versions", "listed", help="Comma-separated versions to search instead of asking pip.")
@click.option("--python", default=sys.executable, show_default="this interpreter", help="Base interpreter of the environments.")
@click.option("--pip-arg", "pip_args", multiple=True, metavar="ARG", help="Passed to pip install (repeatable).")
@json_option
def bisect(db_path, handle, package, low, high, find_fix, backend, extra, listed, python, pip_args, as_json):
    """Find the first release of a package that gets a stored case (ID 7) or a bucket's smallest case
    (ID B7) wrong (or right, with --find-fix).

    Each release between --from and --to that pip can install gets its own cached
    environment (`fuzz env list` shows them); the stored case runs there on the backend
    and is judged against the float64 reference as in a campaign. Untestable releases
    are skipped. Progress goes to stderr.

    \b
    Exit codes: 0 the release is found; 1 the range does not bracket a change (for a
    regression: --from already fails, or --to passes); 2 bad input.

    \b
    Example:
      fuzz bisect 3 --package jax --from 0.4.26 --to 0.4.38 --backend jax-jit
    """
    from fuzzer.backend_names import BackendName
    from fuzzer.triaging.bisect import available_versions, bisect_case

    corpus = open_corpus(db_path)
    case_id, _ = corpus.named_case(handle)
    stored = corpus.get_case(case_id)
    if backend is None:
        if not stored.findings:
            raise UserError(f"Case {case_id} has no finding to take the backend from; pass --backend.")
        backend = str(BackendName.parse(stored.findings[0]["backend"]).here)
    candidates = available_versions(package, low, high, listed.split(",") if listed else None, python)
    click.echo(f"Bisecting {len(candidates)} releases of {package} ({', '.join(candidates)}) on {backend}", err=True)
    result = bisect_case(stored.case, backend, package, candidates, list(extra), python, list(pip_args), find_fix,
                         progress=lambda line: click.echo(line, err=True))
    old, new = ("bad", "good") if find_fix else ("good", "bad")
    data = {"case": case_id, "package": package, "backend": backend, "looking_for": "fix" if find_fix else "regression",
            f"last_{old}": result.last_old, f"first_{new}": result.first_new, **result.to_dict()}
    if result.problem:
        text = f"Cannot bisect: {result.problem}"
        if result.steps and result.steps[-1].outcome == "skip":
            text += "\n(an old release may need older companions: pin them with --with, e.g. --with 'numpy<2')"
    else:
        text = f"Last {old}: {package} {result.last_old}\nFirst {new}: {package} {result.first_new}"
        if result.skipped_between:
            text += (f"\n(untestable in between: {', '.join(result.skipped_between)}; the change is in one of them "
                     f"or in {result.first_new})")
    emit(as_json, data, text)
    sys.exit(1 if result.problem else 0)


if __name__ == "__main__":
    main()
