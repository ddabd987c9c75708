"""Standalone reproducers: one Python file, needing only numpy and the framework under test,
that runs exactly the transformation the finding is about and exits 1 while the bug is there.
This is the full harness (`fuzz export --format script`); the minimal reproducer, the default,
is fuzzer/reproducers/minimal_reproducer.py, built on the same program, header and imports (below).

The script is assembled from parts:

* the case's arrays, as literals (small) or base64 `.npy` (large; never pickle);
* the backend's program (`Backend.reproducer_program`): the graph as a function of public
  torch / jax calls, written from the op declarations (fuzzer/reproducers/op_source.py), and the
  transformation under test applied to it (`torch.compile(graph, ...)`, `jax.jit(graph)`, a
  module through save/load or torch.export, ...), leaving `outputs`; the environment
  (`Backend.versions_source`) is printed before it runs;
* the check, which is the oracle's verdict in a few lines: every entry the float64
  reference defines must match it (finite entries within `ALLOWED`, non-finite ones in kind),
  printing the worst entries, the error, the allowance and the environment.

A crash finding's script raises the framework's error (Python exits 1); a hang finding's
runs under `faulthandler`'s timer, which dumps where it hangs and exits 1. Either exits 0
once fixed (and the values are right).

Text from a case (its title, which is a stored signature, and names) is data: it reaches the
script only through `repr`, an escaped docstring or a comment with its line breaks removed,
and names are identifiers checked on load (fuzzer/ir.py), so a hostile corpus cannot put code
into a reproducer.
"""

from __future__ import annotations

import re
import textwrap

from fuzzer import verdicts
from fuzzer.backends import Backend
from fuzzer.errors import UserError
from fuzzer.exact_dtypes import is_exact
from fuzzer.ir import Case
from fuzzer.judging.backend_verdict import reference_for
from fuzzer.oracle import allowed_error, compute_reference
from fuzzer.reproducers.program_source import argument_names, array_literal, device_guard, variable_name, with_readable_names
from fuzzer.running.workers import ended_its_process

HANG_SECONDS = 60  # a hang reproducer gives up (exit 1) after this long
WORST_SHOWN = 5
# What a reproducer's header says of another environment (its record holds paths and more).
ENVIRONMENT_KEYS = ("python", "numpy", "torch", "jax", "jaxlib", "cuda")


# Control characters but the line break and tab: Python refuses a NUL anywhere in a source file.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _escaped_controls(text: str) -> str:
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def docstring(text: str) -> str:
    """`text` as a triple-quoted literal that ends where we say: backslashes, quotes and control characters escaped."""
    return '"""' + _escaped_controls(text.replace("\\", "\\\\").replace('"', '\\"')) + '"""'


def comment(text: str) -> str:
    """`text` as one comment line: a line break inside would start a line of code, a NUL end the file for Python."""
    return "# " + _escaped_controls(" ".join(text.splitlines()))


CHECK = textwrap.dedent(
    """\
    def check(outputs):
        \"\"\"True when every entry the reference defines is right: finite ones within ALLOWED,
        non-finite ones (inf, -inf, nan) the same kind. Prints the worst entries.\"\"\"
        ok = True
        for i, (actual, expected, allowed, defined) in enumerate(zip(outputs, EXPECTED, ALLOWED, DEFINED)):
            defined = np.ones(expected.shape, bool) if defined is None else defined
            if actual.shape != expected.shape:
                print(f'output {i}: shape {actual.shape}, expected {expected.shape}')
                ok = False
                continue
            with np.errstate(invalid='ignore'):
                gap = np.abs(actual - expected)  # nan or inf where either is
            same_nonfinite = (np.isnan(actual) & np.isnan(expected)) | (actual == expected)
            gap = np.where(np.isfinite(expected), np.nan_to_num(gap, nan=np.inf), np.where(same_nonfinite, 0.0, np.inf))
            gap = np.where(defined, gap, 0.0)
            error = float(gap.max(initial=0.0))
            print(f'output {i}: max abs error {error:.3g} (allowed {allowed:.3g})')
            for flat in np.argsort(-gap, axis=None)[:WORST_SHOWN]:
                at = np.unravel_index(flat, gap.shape)
                if gap[at] > allowed:
                    print(f'  at {[int(k) for k in at]}: got {float(actual[at])!r}, expected {float(expected[at])!r}')
            ok &= error <= allowed
        return ok
    """
)


def _data_lines(case: Case) -> list[str]:
    return [f"{variable_name(name)} = {array_literal(case.arrays[name], 'float32')}" for name in argument_names(case)]


def _expected_lines(case: Case, backend: Backend) -> list[str]:
    """EXPECTED, ALLOWED, DEFINED: what the campaign judged `backend`'s outputs against, extra
    outputs (gradients, vmapped copies) included."""
    dtype = backend.dtype
    graph_reference = compute_reference(case, {dtype})
    reference = reference_for(backend, case, graph_reference)
    origin = "float64, from the math"
    if len(reference.outputs) > len(graph_reference.outputs):
        origin += f"; outputs {len(graph_reference.outputs)}.. are {backend.transformation}'s, judged as the campaign did"
    allowed, defined = [], []
    for index, expected in enumerate(reference.outputs):
        allowed.append(float(f"{allowed_error(reference, index, dtype):.3g}"))
        mask = reference.judged[dtype][index] | reference.defined_nonfinite[dtype][index]
        defined.append("None" if mask.all() else array_literal(mask, "bool"))
    return [
        f"EXPECTED = [{', '.join(array_literal(e, 'float64') for e in reference.outputs)}]  # {origin}",
        f"ALLOWED = {allowed}  # max abs error a correct {dtype} implementation may have (the fuzzer's tolerance model)",
        f"DEFINED = [{', '.join(defined)}]  # None: every entry; else where the math defines the value",
    ]


# A program that killed its worker (an abort, a segfault) would kill the script too, which then exits
# with the signal's code, not 1: the script runs itself again as a child and says what the child did.
IN_CHILD = ("if sys.argv[1:] != ['--in-child']:  # it killed its process in the campaign: run it in a child\n"
            "    code = subprocess.run([sys.executable, __file__, '--in-child']).returncode\n"
            "    sys.exit(code if code in (0, 2) else 1)  # 2: the device it needs is missing")


def killed_its_process(finding: dict | None) -> bool:
    """Is `finding` (as stored) a crash that ended its worker process, by a signal or an exit?"""
    return bool(finding) and ended_its_process(str(finding.get("verdict", "")), str(finding.get("error", "")))


def program_under_test(case: Case, backend: Backend, verdict: str, in_child: bool = False) -> tuple[list[str], str]:
    """(framework imports, code leaving `outputs`): the backend's program, a hang's under
    faulthandler's timer, after the lines that exit 2 where its device is missing; `in_child`: run
    in a child process (IN_CHILD)."""
    imports, program = backend.reproducer_program(case)
    if in_child:
        program = f"{IN_CHILD}\n\n\n{program}"
    if verdict == verdicts.HANG:
        program = (f"faulthandler.dump_traceback_later({HANG_SECONDS}, exit=True)  # a hang: exit 1 after {HANG_SECONDS} s\n"
                   f"{program}\nfaulthandler.cancel_dump_traceback_later()")
    guard = device_guard(backend)
    if guard:
        program = "\n".join(guard) + "\n\n" + program
    return [line for line in imports if line != "import numpy as np"], program  # a helper may import numpy too


def environment_note(backend: Backend) -> str:
    """The header's line naming the other Python environment the backend runs in, or ''."""
    environment = backend.other_environment()
    if environment is None:
        return ""
    versions = ", ".join(f"{k} {v}" for k, v in sorted(environment[1].items()) if k in ENVIRONMENT_KEYS and v)
    return "\n" + comment(f"Run it in environment {environment[0]!r} ({versions}), where the campaign ran it.")


def standard_imports(text: str, verdict: str) -> list[str]:
    """The standard-library imports a script's `text` uses (besides sys and math)."""
    return (["import faulthandler"] * (verdict == verdicts.HANG) + (["import base64", "import io"] if "base64.b64decode" in text else [])
            + ["import subprocess"] * ("subprocess.run(" in text))


def build_script(case: Case, backend: Backend, title: str, pytest_style: bool = False, verdict: str = "",
                 in_child: bool = False) -> str:
    """The full harness for `backend` on `case` (normally the shrunk case of a finding with
    `verdict`; a hang runs under a timeout): inputs and expected values as stored, every output
    judged entry by entry as the campaign judged it."""
    if is_exact(backend.dtype):
        raise UserError(f"The full harness (--format script or pytest) judges float backends by the tolerance model; "
                        f"export this {backend.dtype} case with the minimal script (the default format) or as JSON.")
    framework, program = program_under_test(case, backend, verdict, in_child)
    data = _data_lines(case)
    expected = _expected_lines(case, backend)
    header = docstring(
        f"Reproducer: {title}\n\nGraph: {' > '.join(case.graph.op_names())}.\n"
        f"Backend under test: {backend.name} ({backend.description}).\n"
        f"Written by `fuzz export`; needs numpy and {backend.family}. Exit 1 while the bug is present, 0 once fixed."
    ) + environment_note(backend)
    lines = [header, *standard_imports("\n".join(data + expected) + program, verdict), "import platform", "import sys",
             "from math import inf, nan", "", "import numpy as np", *framework, "",
             comment("The case's inputs and weights, as the campaign stored them."),
             *data, "", backend.versions_source,
             "print(VERSIONS, f'Python {platform.python_version()}', platform.platform(), sep='; ')", "", "",
             program, "", "", *expected, f"WORST_SHOWN = {WORST_SHOWN}", "", "", CHECK,
             "passed = check(outputs)"]
    if pytest_style:
        lines += ["", "", "def test_reproducer():", "    assert passed, 'outputs differ from the float64 reference'"]
    else:
        lines += ["sys.exit(0 if passed else 1)"]
    return with_readable_names("\n".join(lines) + "\n")

