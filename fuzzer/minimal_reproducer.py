"""The minimal reproducer, `fuzz export`'s default: the script an upstream maintainer reads, about
twenty lines for a finding of one or two ops (the full harness is `--format script`,
fuzzer/reproducer.py).

It runs the same program as the full harness (the backend's `reproducer_program`: public torch /
jax calls, the transformation under test, the hang timer, the device check) and differs in what
surrounds it:

* the inputs are written compactly: one value, one value but for a few entries, a short literal,
  a draw from the campaign's seed, or base64 `.npy` (program_source.compact_arrays);
* the expected values are computed in the script in float64 on the CPU, by a framework whose
  float64 result on this very case the fuzzer judged equal to its numpy reference while writing
  the script (`choose_reference`): the framework under test with its stock ops first, else the
  other one (torch's sign(nan) is 0 in float64 too, jax's float64 max drops a nan as its float32
  one does). Where neither agrees, and for outputs only a transformation defines (gradients,
  vmapped copies), the fuzzer's reference values are written in; a comment says which;
* one check, `np.testing.assert_allclose` with the oracle's allowance (3 significant digits) as
  `atol`, on the entries the reference defines. A crash's script only runs the program.

Choosing the reference runs the stock float64 CPU backends on the case, never the backend under
test or a plugin's code.
"""

from __future__ import annotations

import re

import numpy as np

from fuzzer import verdicts
from fuzzer.backends import Backend, get_backend
from fuzzer.check import reference_for
from fuzzer.ir import Case
from fuzzer.op_source import Source
from fuzzer.oracle import Reference, allowed_error, compute_reference, judge_outputs
from fuzzer.ops import get_op
from fuzzer.program_source import JAX_X64, compact_array, compact_arrays, graph_arguments, graph_function, with_readable_names
from fuzzer.reproducer import docstring, environment_note, program_under_test, standard_imports

REFERENCE_FAMILIES = ("torch", "jax")
# How each family's reference function is called on the script's variables, in float64 on the CPU.
REFERENCE_CALLS = {
    "torch": "[o.numpy() for o in {function}(*[torch.as_tensor(a, dtype=torch.float64) for a in ({arguments},)])]",
    "jax": "[np.asarray(o) for o in {function}(*[jax.device_put(np.asarray(a, np.float64), jax.devices('cpu')[0]) "
           "for a in ({arguments},)])]",
}
REFERENCE_IMPORTS = {"torch": ["import torch"], "jax": ["import jax", JAX_X64]}


def choose_reference(case: Case, backend: Backend) -> str | None:
    """The framework ("torch" or "jax") whose stock float64 CPU ops give this case's numpy reference
    within the float64 tolerance, trying `backend`'s own first; None if neither does."""
    reference = compute_reference(case, {"float64"})
    same_computation = (backend.kind == f"{backend.family}-eager" and backend.device == "cpu"
                        and backend.dtype == "float64" and not backend.overrides)
    for family in sorted(REFERENCE_FAMILIES, key=lambda name: name != backend.family):
        if family == backend.family and same_computation:
            continue  # the backend under test would be its own judge
        candidate = get_backend(f"{family}-eager:cpu:float64")
        if candidate.unavailable_reason():
            continue
        try:
            with np.errstate(all="ignore"):
                outputs = candidate.run(case)
        except Exception:  # noqa: BLE001 - a framework that raises on the case is no reference for it
            continue
        if judge_outputs(candidate.name, "float64", outputs, reference).verdict == verdicts.AGREE:
            return family
    return None


def _computed_expected(case: Case, backend: Backend, family: str, program: str) -> tuple[list[str], list[str]]:
    """(imports, lines) computing `expected` with `family`'s stock ops: the program's own `graph`
    when it is that, else a `reference` function written here."""
    imports, lines = list(REFERENCE_IMPORTS[family]), []
    function = "graph"
    if family != backend.family or backend.overrides or not re.search(r"^def graph\(", program, re.M):
        source = Source(imports=list(imports))
        written = graph_function(case, lambda op: get_op(op).impl(family), source, name="reference")
        imports, function = source.imports, "reference"
        helpers = [text for text in source.definitions.values() if text not in program]  # the program's are there
        lines = ["", "", "\n\n\n".join([*helpers, written]), "", ""]
    call = REFERENCE_CALLS[family].format(function=function, arguments=", ".join(graph_arguments(case)))
    return imports, [*lines, f"expected = {call}  # float64 reference: {family} on the CPU"]


def _written_expected(reference: Reference) -> list[str]:
    """Lines setting `expected` to the fuzzer's reference values (no framework computes them right)."""
    lines = []
    for index, values in enumerate(reference.outputs):
        lines += compact_array(f"expected{index}", values, "float64", "numpy")
    names = ", ".join(f"expected{index}" for index in range(len(reference.outputs)))
    return [*lines, f"expected = [{names}]  # float64 reference: the fuzzer's numpy code, computed when this was written"]


def _check_lines(reference: Reference, dtype: str) -> list[str]:
    """One assert_allclose per output, `atol` the oracle's allowance, on the entries the math defines."""
    allowed = [f"{allowed_error(reference, index, dtype):.3g}" for index in range(len(reference.outputs))]
    masks = [reference.judged[dtype][index] | reference.defined_nonfinite[dtype][index] for index in range(len(allowed))]
    lines = []
    for index, mask in enumerate(masks):
        if not mask.all():
            lines += compact_array(f"defined{index}", mask, "bool", "numpy")
    picks = [f"[defined{index}]" if not mask.all() else "" for index, mask in enumerate(masks)]
    why = f"the largest error a correct {dtype} implementation may make here (the fuzzer's tolerance model)"
    if lines:
        lines[-1] += "  # the entries whose value the math defines in " + dtype
    for index, pick in enumerate(picks):
        lines.append(f"np.testing.assert_allclose(outputs[{index}]{pick}, expected[{index}]{pick}, rtol=0, "
                     f"atol={allowed[index]})" + (f"  # atol: {why}" if index == 0 else ""))
    return lines


def _summary(case: Case, backend: Backend, finding: dict) -> str:
    """The docstring's first sentence: what is wrong, where."""
    ops = " > ".join(case.graph.op_names())
    if not finding:
        return f"{backend.name} ({backend.description}) on {ops}, checked against a float64 reference."
    verdict, culprit = finding.get("verdict", ""), finding.get("culprit") or ops
    if finding.get("detail") and verdict not in (verdicts.CRASH, verdicts.HANG):  # a crash's detail is the title's error
        what = finding["detail"]
    else:
        what = verdicts.get(verdict).meaning if verdict in verdicts.BY_NAME else verdict
    return f"{culprit} on {backend.name} ({backend.description}), graph {ops}: {what}."


def build_minimal_script(case: Case, backend: Backend, title: str, finding: dict | None = None) -> str:
    """The minimal reproducer of `finding` (a stored finding of `backend` on `case`; None: check the
    case on `backend`)."""
    finding = finding or {}
    verdict = finding.get("verdict", "")
    framework, program = program_under_test(case, backend, verdict)
    data = compact_arrays(case, backend.family)
    after: list[str] = []
    if verdict in (verdicts.CRASH, verdicts.HANG):
        after = ["print('It ran: fixed.')"]
    else:
        graph_reference = compute_reference(case, {backend.dtype})
        reference = reference_for(backend, case, graph_reference)
        family = choose_reference(case, backend) if len(reference.outputs) == len(graph_reference.outputs) else None
        if family is None:
            after = _written_expected(reference)
        else:
            more, after = _computed_expected(case, backend, family, program)
            framework += [line for line in more if line not in framework]
        after += _check_lines(reference, backend.dtype)
    fixed = "0 once fixed" + (", 2 where the device it needs is missing" if "sys.exit(2)" in program else "")
    header = docstring(f"{_summary(case, backend, finding)}\n\n{title}\nWritten by `fuzz export`: "
                       f"exit 1 while the bug is there, {fixed}.") + environment_note(backend)
    text = "\n".join(data + after) + program
    lines = [header, *standard_imports(text, verdict), *(["import sys"] if "sys." in program else []),
             *(["from math import inf, nan"] if re.search(r"\b(nan|inf)\b", "\n".join(data + after)) else []),
             "", "import numpy as np", *framework, "", *data, backend.versions_source, "print(VERSIONS)", "", "",
             program, *after]
    return with_readable_names("\n".join(lines) + "\n")
