"""The minimal reproducer, `fuzz export`'s default: the script an upstream maintainer reads, about
twenty lines for a finding of one or two ops (the full harness is `--format script`,
fuzzer/reproducers/reproducer.py).

It runs the same program as the full harness (the backend's `reproducer_program`: public torch /
jax calls, the transformation under test, the hang timer, the device check) and differs in what
surrounds it:

* the inputs are written compactly: one value, one value but for a few entries, a short literal,
  a draw from the campaign's seed, or base64 `.npy` (program_source.compact_arrays);
* the expected values are computed in the script in float64 on the CPU, by a framework whose
  float64 result on this very case the fuzzer judged equal to its numpy reference while writing
  the script (`choose_reference`): the framework under test with its stock ops first, else the
  other one (torch's sign(nan) is 0 in float64 too, jax's float64 max drops a nan as its float32
  one does), written into one line where the graph is one expression of the inputs. Where neither agrees, and for outputs only a transformation defines (gradients,
  vmapped copies), the fuzzer's reference values are written in; a comment says which;
* one check, `np.isclose` with the oracle's allowance (3 significant digits) as `atol`, on the
  entries the reference defines, ending in one line: `MISMATCH: ...` (exit 1) or `OK: ...`. A
  crash's script only runs the program;
* only the part of the graph the finding is about (`failing_part`), shapes a helper computes
  written out (fuzzer/reproducers/op_source.py), and only the imports the script uses (`used_imports`);
* the order a hand-written report has: a one-line docstring, the imports, `def graph`, the
  versions in one printed line, the inputs, the run, the check.

Choosing the reference runs the stock float64 CPU backends on the case, never the backend under
test or a plugin's code.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import replace

import numpy as np

from fuzzer import verdicts
from fuzzer.backends import Backend, get_backend
from fuzzer.complex_dtypes import is_complex
from fuzzer.errors import UserError
from fuzzer.exact_dtypes import is_exact
from fuzzer.ir import Case
from fuzzer.judging.backend_verdict import reference_for
from fuzzer.judging.contracts import reproducer_check
from fuzzer.ops import get_op
from fuzzer.oracle import Reference, allowed_error, compute_reference, entry_allowance, judge_outputs
from fuzzer.reproducers.op_source import Source
from fuzzer.reproducers.program_source import JAX_X64, compact_array, compact_arrays, graph_arguments, graph_function, with_readable_names
from fuzzer.reproducers.reproducer import docstring, environment_note, killed_its_process, program_under_test, standard_imports
from fuzzer.shrinking.shrink import prune, rebuild

# How each family's reference takes the script's arrays (in float64, on the CPU) and gives numpy arrays.
REFERENCE_INPUTS = {"torch": "torch.as_tensor({}, dtype=torch.float64)",
                    "jax": "jax.device_put(np.asarray({}, np.float64), jax.devices('cpu')[0])"}
REFERENCE_OUTPUTS = {"torch": "{}.numpy()", "jax": "np.asarray({})"}
REFERENCE_IMPORTS = {"torch": ["import torch"], "jax": ["import jax", JAX_X64]}


def choose_reference(case: Case, backend: Backend) -> str | None:
    """`backend`'s framework ("torch" or "jax") when its stock float64 CPU ops give this case's numpy
    reference within the float64 tolerance, else None (the script then holds the expected values).
    Never the other framework: a maintainer runs a torch bug's script without jax, and the reverse."""
    if backend.family not in REFERENCE_INPUTS:
        return None
    same_computation = (backend.kind == f"{backend.family}-eager" and backend.device == "cpu"
                        and backend.dtype == "float64" and not backend.overrides)
    candidate = get_backend(f"{backend.family}-eager:cpu:float64")
    if same_computation or candidate.unavailable_reason():
        return None  # the backend under test would be its own judge
    try:
        with np.errstate(all="ignore"):
            outputs = candidate.run(case)
    except Exception:  # noqa: BLE001 - a framework that raises on the case is no reference for it
        return None
    agrees = judge_outputs(candidate.name, "float64", outputs, compute_reference(case, {"float64"})).verdict == verdicts.AGREE
    return backend.family if agrees else None


def _computed_expected(case: Case, backend: Backend, family: str, program: str) -> tuple[list[str], str, str] | None:
    """(imports, definitions, line) computing `expected` with `family`'s stock ops: the program's
    own `graph` when it is that, else the graph's calls written into the line where they fit one
    expression, else a `reference` function (the definitions); None where a helper it needs has
    the name of a different one of the program's."""
    imports, definitions, function = list(REFERENCE_IMPORTS[family]), "", "graph"
    arguments = graph_arguments(case)
    if backend.overrides or not re.search(r"^def graph\(", program, re.M):
        source = Source(imports=list(imports))
        written = graph_function(case, lambda op: get_op(op).impl(family), source, name="reference")
        imports, function = source.imports, "reference"
        helpers = {name: text for name, text in source.definitions.items() if text not in program}  # the program's are there
        if any(re.search(rf"^(def {re.escape(name)}\(|{re.escape(name)} = )", program, re.M) for name in helpers):
            return None  # e.g. torch's `run_1 = _torch_reduce_run('amax')` beside jax's `run_1`
        one_expression = not helpers and _as_one_expression(written, family)
        if one_expression:
            return imports, "", f"expected = {one_expression}  # float64 reference: {family} on the CPU"
        definitions = "\n\n\n".join([*helpers.values(), written])
    inputs = REFERENCE_INPUTS[family].format("a")
    outputs = REFERENCE_OUTPUTS[family].format("o")
    call = f"[{outputs} for o in {function}(*[{inputs} for a in ({', '.join(arguments)},)])]"
    return imports, definitions, f"expected = {call}  # float64 reference: {family} on the CPU"


def _as_one_expression(function: str, family: str) -> str | None:
    """`def reference(x): return [torch.sinh(x)]` as the list it computes from the script's
    arrays, `[torch.sinh(torch.as_tensor(x, dtype=torch.float64)).numpy()]`; None where the
    function is more than its return, or uses an argument twice."""
    (tree,) = ast.parse(function).body
    returned = tree.body[0].value if len(tree.body) == 1 and isinstance(tree.body[0], ast.Return) else None
    if not isinstance(returned, ast.List):
        return None
    uses = [node.id for node in ast.walk(returned) if isinstance(node, ast.Name)]
    arguments = [argument.arg for argument in tree.args.args]
    if any(uses.count(argument) > 1 for argument in arguments):
        return None
    inputs = {name: ast.parse(REFERENCE_INPUTS[family].format(name), mode="eval").body for name in arguments}

    class PutInputs(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name):
            return inputs.get(node.id, node)

    computed = PutInputs().visit(returned)
    return "[" + ", ".join(REFERENCE_OUTPUTS[family].format(ast.unparse(item)) for item in computed.elts) + "]"


def _written_expected(outputs: list, what: str) -> list[str]:
    """Lines setting `expected` to the fuzzer's reference values `outputs` (no framework computes them right),
    as float64 (the script compares float64 copies of the outputs: exact for integers up to 2^53)."""
    lines = []
    for index, values in enumerate(outputs):
        lines += compact_array(f"expected{index}", np.asarray(values, dtype=np.float64), "float64", "numpy")
    names = ", ".join(f"expected{index}" for index in range(len(outputs)))
    return [*lines, f"expected = [{names}]  # {what}, computed when this was written"]


def _check_lines(reference: Reference, dtype: str, exact: bool = False) -> list[str]:
    """The oracle's verdict in a few lines: every entry the math defines within the oracle's
    allowance (3 significant digits) of `expected`, non-finite ones the same kind; else one
    MISMATCH line and exit 1 (SystemExit with a message: no traceback). `exact`: an integer or
    bool dtype, every entry equal (fuzzer/oracle/exact.py)."""
    count = len(reference.exact.outputs(dtype)) if exact else len(reference.outputs)
    masks = [np.ones(1, dtype=bool) if exact else reference.judged[dtype][index] | reference.defined_nonfinite[dtype][index]
             for index in range(count)]
    allowed, lines = [], []
    for index in range(count):
        per_entry = None if exact else _per_entry_allowance(reference, index, dtype)
        if per_entry is None:
            allowed.append("0" if exact else f"{allowed_error(reference, index, dtype):.3g}")
        else:
            lines += compact_array(f"allowed{index}", per_entry, "float64", "numpy")
            lines[-1] += "  # each entry's own allowance (the fuzzer's per-entry tolerance), where tighter than the output's"
            allowed.append(f"allowed{index}")
    for index, mask in enumerate(masks):
        if not mask.all():
            lines += compact_array(f"defined{index}", mask, "bool", "numpy")
    defined = any(not mask.all() for mask in masks)
    if defined:
        lines[-1] += "  # the entries whose value the math defines in " + dtype
    columns = ["got", "want", "allowed"] + ["defined"] * defined
    zipped = f"zip(outputs, expected, [{', '.join(allowed)}]"
    if defined:
        zipped += f", [{', '.join(f'defined{index}' if not mask.all() else 'True' for index, mask in enumerate(masks))}]"
    loop = f"for {', '.join(columns)} in {zipped})"
    which = ""
    if len(masks) > 1:  # name the output
        loop, which = f"for i, ({', '.join(columns)}) in enumerate({zipped}))", "output {i}: "
    return [*lines,
            f"{loop}:  # allowed: the largest error of a correct {dtype} implementation here (the fuzzer's tolerance model)",
            "    if got.shape != want.shape:",
            f"        raise SystemExit(f'MISMATCH: {which}shape {{got.shape}}, float64 reference {{want.shape}}')",
            f"    wrong = ~np.isclose(got, want, rtol=0, atol=allowed, equal_nan=True){' & defined' if defined else ''}"
            "  # inf == inf, nan == nan",
            "    if wrong.any():",
            "        at = np.unravel_index(np.argmax(np.nan_to_num(abs(np.subtract(got, want, where=wrong, out=np.zeros(got.shape))), "
            "nan=np.inf)), got.shape)",
            # A non-finite entry has no error to allow: it is the wrong kind, said in words.
            f"        raise SystemExit(f'MISMATCH: {which}{{wrong.sum()}} of {{wrong.size}} entries differ, worst at {{[int(k) for k in at]}}: ' + "
            "(f'got {float(got[at])}, float64 reference {float(want[at])} (allowed error {float(np.broadcast_to(allowed, got.shape)[at]):.3g})' "
            "if np.isfinite([got[at], want[at]]).all() else f'expected {float(want[at])}, got {float(got[at])}'))",
            "print('OK: every entry within the allowed error of the float64 reference')"]


def _per_entry_allowance(reference: Reference, index: int, dtype: str) -> np.ndarray | None:
    """Output `index`'s per-entry allowances (compare.py "Per entry"), each rounded up to 3 significant
    digits so the script is never stricter than the oracle; None where none is tighter than the output's."""
    per_entry = entry_allowance(reference, index, dtype)
    output = float(f"{allowed_error(reference, index, dtype):.3g}")
    if per_entry is None or not np.any(per_entry < output):
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        step = 10.0 ** (np.floor(np.log10(per_entry)) - 2)
        rounded = np.where(per_entry > 0, np.ceil(per_entry / step) * step, per_entry)
    return np.minimum(np.array([float(f"{value:.3g}") for value in rounded.reshape(-1)]).reshape(np.shape(per_entry)), output)


def _printed_versions(versions_source: str) -> tuple[list[str], list[str]]:
    """(import lines, code) printing a backend's VERSIONS (`Backend.versions_source`) in one
    line: `print(f'torch {torch.__version__}, ...')`, its imports at the top."""
    statements = ast.parse(versions_source).body
    imports = [ast.unparse(s) for s in statements if isinstance(s, (ast.Import, ast.ImportFrom))]
    rest = [s for s in statements if not isinstance(s, (ast.Import, ast.ImportFrom))]
    if len(rest) == 1 and isinstance(rest[0], ast.Assign) and ast.unparse(rest[0].targets[0]) == "VERSIONS":
        return imports, [f"print({ast.unparse(rest[0].value)})"]
    return [], [versions_source, "print(VERSIONS)"]  # a plugin's own: as it is


def _summary(case: Case, backend: Backend, finding: dict) -> str:
    """The docstring's first sentence: what is wrong, where."""
    ops = " > ".join(case.graph.op_names())
    where = f"{backend.dtype} on {backend.device.upper()} ({backend.description})"  # the framework's words, not a backend name
    if not finding:
        return f"{where} on {ops}, checked against a float64 reference."
    verdict, culprit = finding.get("verdict", ""), finding.get("culprit") or ops
    if finding.get("detail") and verdict not in (verdicts.CRASH, verdicts.HANG):  # a crash's detail is the title's error
        what = finding["detail"]
    else:
        what = verdicts.get(verdict).meaning if verdict in verdicts.BY_NAME else verdict
    return f"{culprit} in {where}, graph {ops}: {what}."


def failing_part(case: Case, finding: dict) -> Case:
    """The part of `case` a wrong-value finding is about: the graph outputs that depend on a node
    of the culprit's op (all of them where none does), and only the nodes those need. A crash or
    hang keeps every output (the compiler may need the whole graph to fail)."""
    graph = case.graph
    if finding.get("verdict") not in (verdicts.CRASH, verdicts.HANG):
        culprit_op = (finding.get("culprit") or "").partition("@")[0]
        culprits = {node.name for node in graph.nodes if node.op == culprit_op}
        outputs = tuple(name for name in graph.outputs if graph.ancestors([name]) & culprits) or graph.outputs
        graph = replace(graph, outputs=outputs)
    graph = prune(graph)
    return case if graph == case.graph else (rebuild(case, graph) or case)


def used_imports(imports: list[str], code: str) -> list[str]:
    """`imports` without repeats and without the lines whose names `code` never uses; other
    statements among them (jax's x64 switch) stay where their module stays."""
    used_names = _used_names(code)
    kept: list[str] = []
    for line in dict.fromkeys(imports):
        match = re.fullmatch(r"import ([\w.]+)(?: as (\w+))?|from [\w.]+ import (.+)", line)
        if match is None:
            names = {line.partition(".")[0]}  # a statement: `jax.config.update(...)` needs jax
        else:
            module, alias, imported = match.groups()
            names = {alias or module.partition(".")[0]} if imported is None else {n.strip() for n in imported.split(",")}
        if names & used_names:
            kept.append(line)
    return kept


def _used_names(code: str) -> set[str]:
    """The names `code` looks up: not an attribute (`np.inf` uses no `inf`), not a keyword or an
    assignment target (`nan=np.inf`), in code or in an f-string (one token before Python 3.12)."""
    tokens = [token for token in tokenize.generate_tokens(io.StringIO(code).readline)
              if token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)]
    names = set()
    for before, token, after in zip([None, *tokens], tokens, [*tokens[1:], None]):
        if token.type == tokenize.NAME and not (before and before.string == ".") and not (after and after.string == "="):
            names.add(token.string)
        elif token.type == tokenize.STRING and token.string.lstrip("rbRB").lower().startswith("f"):
            names |= set(re.findall(r"(?<![\w.])\w+", token.string))
    return names


def build_minimal_script(case: Case, backend: Backend, title: str, finding: dict | None = None) -> str:
    """The minimal reproducer of `finding` (a stored finding of `backend` on `case`; None: check the
    case on `backend`)."""
    finding = finding or {}
    verdict = finding.get("verdict", "")
    if is_complex(backend.dtype) and verdict not in (verdicts.CRASH, verdicts.HANG):
        raise UserError(f"The minimal script of a {backend.dtype} finding's values is not written yet: `fuzz replay` "
                        "reproduces it, and `fuzz export ID --format json` keeps the case.")
    case = failing_part(case, finding)
    framework, program = program_under_test(case, backend, verdict, killed_its_process(finding))
    definitions, run = _split_after_graph(program)
    data = compact_arrays(case, backend.family)
    after: list[str] = []
    if verdict in (verdicts.CRASH, verdicts.HANG):
        after = ["print('OK: it ran')"]
    elif verdict == verdicts.CONTRACT:  # no tolerance: the promise itself, bit for bit
        after = reproducer_check(backend, case)
    else:
        graph_reference = compute_reference(case, {backend.dtype})
        if is_exact(backend.dtype):  # jax eager's run where it is a jax backend's reference (ExactReference.expected_of)
            after = [*_written_expected(graph_reference.exact.expected_of(backend.name, backend.dtype), "the exact reference"),
                     *_check_lines(graph_reference, backend.dtype, exact=True)]
            return _assembled(case, backend, finding, framework, program, definitions, data, run, after)
        reference = reference_for(backend, case, graph_reference)
        # A program's expected values are the reference's, written in (no framework's float64 run is its judge here).
        same_outputs = len(reference.outputs) == len(graph_reference.outputs) and not case.graph.steps
        family = choose_reference(case, backend) if same_outputs else None
        computed = family and _computed_expected(case, backend, family, program)
        if computed:
            more_imports, more_definitions, expected = computed
            framework += more_imports
            definitions = "\n\n\n".join(part for part in (definitions, more_definitions) if part)
            after = [expected]
        else:
            after = _written_expected(reference.outputs, "float64 reference: the fuzzer's numpy code")
        after += _check_lines(reference, backend.dtype)
    return _assembled(case, backend, finding, framework, program, definitions, data, run, after)


def _assembled(case: Case, backend: Backend, finding: dict, framework: list, program: str, definitions: str, data: list,
               run: str, after: list) -> str:
    """The script: docstring, imports, the graph's definitions, then its data, run and check lines."""
    verdict = finding.get("verdict", "")
    fixed = "0 once fixed" + (", 2 where the device it needs is missing" if "sys.exit(2)" in program else "")
    header = docstring(f"{_summary(case, backend, finding)} Exit 1 while the bug is there, {fixed}.") + environment_note(backend)
    version_imports, versions = _printed_versions(backend.versions_source)
    body = "\n\n\n".join(part for part in (definitions, "\n".join([*versions, *data, run, *after])) if part)
    imports = [*standard_imports(body, verdict), "import sys", "from math import inf, nan", "import numpy as np",
               *framework, *version_imports]
    imports = used_imports([line for line in imports if line], body)
    standard = [line for line in imports if line.split()[1] in ("sys", "math", "base64", "io", "faulthandler", "subprocess")]
    others = sorted(line for line in imports if line not in standard and line.startswith(("import ", "from ")))
    others += [line for line in imports if not line.startswith(("import ", "from "))]  # jax's x64 switch, after them
    blank = [""] * (2 if definitions else 1)  # two before a def
    # A shrunk case's inputs carry the node they replaced in their name (x2_n0): x, or x0, x1, ... instead.
    inputs = [spec.name for spec in case.graph.inputs]
    preferred = {name: "x" if len(inputs) == 1 else f"x{index}" for index, name in enumerate(inputs)}
    return with_readable_names("\n".join([header, *standard, *[""] * bool(standard), *others, *blank, body]) + "\n", preferred)


def _split_after_graph(program: str) -> tuple[str, str]:
    """(the program up to the end of its `def graph`, the rest): the script's inputs go between,
    where the reader meets them just before they are used."""
    graph = [node for node in ast.parse(program).body if isinstance(node, ast.FunctionDef) and node.name == "graph"]
    if not graph:
        return "", program
    lines = program.splitlines()
    return "\n".join(lines[:graph[0].end_lineno]), "\n".join(lines[graph[0].end_lineno:]).strip("\n")
