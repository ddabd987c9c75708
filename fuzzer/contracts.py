"""Zero-tolerance contracts a compiler configuration promises, judged where its release documents them.

Two inductor settings promise bits, not closeness: `numerics="strict"` (results bitwise equal to
torch eager on the same device and dtype) and `batch_invariant=True` (f(x)[:k] equals f(x[:k])
bitwise). A backend kind that compiles under one names it (`contract = "strict-numerics"`), and a
verdict of that backend that agrees with the reference is then judged against the promise too,
with no tolerance: one ulp is a `contract` finding (check.py's `contract` gate).

Only where the release documents the promise: its scope is data, `contract_scope.json` (the
release that added the setting, the devices and dtypes whose code generator honours it, the ops
it does not cover yet, each with its reason and source). Outside it the backend is judged like
torch-compile by the oracle alone, and its verdict's detail says the contract was not judged there
and why. `FUZZ_CONTRACT_SCOPE` names another scope file (a maintainer checking a branch that
widens the scope; the tests, which have no CUDA device).

Batch invariance needs a batch: the inputs share a leading dim of 2 or more, the graph is valid on
its first k rows (no shape attribute fixes the batch size), and every output keeps the leading dim.
Whether rows map to rows is asked of the math, not of op declarations: the float64 reference of the
first k rows must equal the first k rows of the reference of the whole, so an op that mixes rows (a
sum or softmax over the batch dim, batch_norm's batch statistics, a transpose or reshape that moves
it) leaves the case unjudged. k is 1 (the one-request batch, where kernels switch most: a gemv)
and half the batch.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from fuzzer import verdicts
from fuzzer.errors import UserError
from fuzzer.ir import Case, infer_shapes, split_arrays
from fuzzer.ops import get_op
from fuzzer.records import BackendVerdict
from fuzzer.running.execute import OK, Runner

SCOPE_FILE = Path(__file__).with_name("contract_scope.json")
SCHEMA = 1


@dataclass(frozen=True)
class Exclusion:
    """Ops a contract does not cover yet: names, or `family:NAME` for an op family (fuzzer/ops/NAME.py)."""

    ops: tuple[str, ...]
    reason: str
    source: str

    def covers(self, op_name: str) -> bool:
        return op_name in self.ops or f"family:{get_op(op_name).family}" in self.ops


@dataclass(frozen=True)
class Contract:
    name: str
    title: str  # "strict numerics": how details name it
    violation: str  # what a finding's detail says after the title
    added_in: str
    added_source: str
    devices: tuple[str, ...]
    devices_reason: str
    dtypes: tuple[str, ...]
    dtypes_reason: str
    excluded: tuple[Exclusion, ...]

    def not_judged_reason(self, device: str, dtype: str, op_names: list[str]) -> str | None:
        """Why this contract is not judged for a backend on `device` and `dtype` running these ops; None where it is."""
        if device not in self.devices:
            return f"{self.title} not judged on {device}: {self.devices_reason}"
        if dtype not in self.dtypes:
            return f"{self.title} not judged in {dtype}: {self.dtypes_reason}"
        for op_name in op_names:
            for exclusion in self.excluded:
                if exclusion.covers(op_name):
                    return f"{self.title} not judged on {op_name}: {exclusion.reason}"
        return None


class NotJudged(Exception):
    """The case gives the contract nothing to compare (no batch dim, eager did not run); its text says why."""


def _checked(data: dict, key: str, kind: type, where: str):
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, kind) or (kind is str and not value):
        raise UserError(f"{where} needs '{key}' as a {'non-empty string' if kind is str else kind.__name__}; "
                        f"fix the file or unset FUZZ_CONTRACT_SCOPE.")
    return value


def _read_contract(name: str, data: dict, where: str) -> Contract:
    where = f"{where}, contract '{name}',"
    added, devices, dtypes = (_checked(data, key, dict, where) for key in ("added_in", "devices", "dtypes"))
    excluded = []
    for index, entry in enumerate(_checked(data, "excluded", list, where)):
        at = f"{where} exclusion {index}"
        ops = _checked(entry, "ops", list, at)
        if not all(isinstance(op, str) and op for op in ops):
            raise UserError(f"{at} lists an op that is not a name; fix the file or unset FUZZ_CONTRACT_SCOPE.")
        excluded.append(Exclusion(tuple(ops), _checked(entry, "reason", str, at), _checked(entry, "source", str, at)))
    return Contract(
        name=name, title=_checked(data, "title", str, where), violation=_checked(data, "violation", str, where),
        added_in=_checked(added, "release", str, where), added_source=_checked(added, "source", str, where),
        devices=tuple(_checked(devices, "names", list, where)), devices_reason=_checked(devices, "reason", str, where),
        dtypes=tuple(_checked(dtypes, "names", list, where)), dtypes_reason=_checked(dtypes, "reason", str, where),
        excluded=tuple(excluded))


@functools.lru_cache(maxsize=4)
def load_scope(path: str) -> dict[str, Contract]:
    """The contracts a scope file declares, checked: a file that is not one is refused in one sentence."""
    where = f"The contract scope {path}"
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{where} cannot be read as JSON ({exc}); fix it or unset FUZZ_CONTRACT_SCOPE.") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise UserError(f"{where} is not scope schema {SCHEMA}; fix it or unset FUZZ_CONTRACT_SCOPE.")
    declared = _checked(data, "contracts", dict, where)
    contracts = {name: _read_contract(name, entry, where) for name, entry in declared.items()}
    if set(contracts) != set(JUDGES):
        raise UserError(f"{where} declares {sorted(contracts)} where the fuzzer judges {sorted(JUDGES)}; "
                        "fix it or unset FUZZ_CONTRACT_SCOPE.")
    return contracts


def contract(name: str) -> Contract:
    """The contract `name` as the scope in use declares it (FUZZ_CONTRACT_SCOPE, else the shipped file)."""
    return load_scope(os.environ.get("FUZZ_CONTRACT_SCOPE") or str(SCOPE_FILE))[name]


def judged(backend, case: Case, verdict: BackendVerdict, outcome, runner: Runner) -> BackendVerdict:
    """`verdict` (an agreeing one) judged against `backend`'s contract too: a `contract` finding where
    it is broken, else the verdict with a detail that says whether the contract held or why it was not judged."""
    terms = contract(backend.contract)
    reason = terms.not_judged_reason(backend.device, backend.dtype, case.graph.op_names())
    if reason is not None:
        return replace(verdict, detail=reason)
    try:
        broken = JUDGES[terms.name](backend, case, outcome.outputs, runner)
    except NotJudged as exc:
        return replace(verdict, detail=f"{terms.title} not judged: {exc}")
    if broken is None:
        return replace(verdict, detail=f"{terms.title}: held (bitwise)")
    return replace(verdict, verdict=verdicts.CONTRACT, detail=f"{terms.title}: {terms.violation}: {broken}"[:300])


def violates(backend, case: Case, runner: Runner) -> bool:
    """Does `backend` break its contract on `case` (run afresh)? For localization."""
    outcome = runner(backend, case)
    if outcome.status != OK:
        return False
    try:
        return JUDGES[backend.contract](backend, case, outcome.outputs, runner) is not None
    except NotJudged:
        return False


def localize_violation(backend, case: Case, runner: Runner) -> str:
    """The op of the first node, in graph order, whose own cut of the graph (its ancestors, it the
    output) breaks the contract; `OP@fused` (the failing output's op) where no cut does alone."""
    from fuzzer.shrinking.shrink import rebuild

    for node in case.graph.nodes:
        cut = rebuild(case, replace(case.graph, outputs=(node.name,)))
        if cut is not None and violates(backend, cut, runner):
            return node.op
    return f"{case.graph.node(case.graph.outputs[0]).op}@fused"


def _difference(ours: list[np.ndarray], theirs: list[np.ndarray], dtype: str) -> str | None:
    """Where two runs' outputs differ in any bit (a NaN equals any NaN; -0 is not +0): the first such
    output, how many entries differ and, where both are finite, by how many units in the last place
    of `dtype`; None where none does."""
    for index, (a, b) in enumerate(zip(ours, theirs)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return f"output {index} has shape {a.shape} against {b.shape}"
        same = (a == b) & (np.signbit(a) == np.signbit(b)) | (np.isnan(a) & np.isnan(b))
        if same.all():
            continue
        finite = ~same & np.isfinite(a) & np.isfinite(b)
        ulps = ""
        if finite.any() and dtype in ("float16", "float32", "float64"):
            spacing = np.spacing(np.abs(b[finite]).astype(dtype)).astype(np.float64)
            ulps = f", by up to {np.max(np.abs(a[finite] - b[finite]) / spacing):.3g} ulp"
        return f"output {index}: {int((~same).sum())} of {a.size} entries differ{ulps}"
    return None


def _strict_numerics(backend, case: Case, outputs: list[np.ndarray], runner: Runner) -> str | None:
    """The compiled outputs against torch eager's on the same device and dtype, with the same op
    implementations (a plugin's kernels run eagerly too)."""
    from fuzzer.backends.torch_eager import TorchEager

    eager = TorchEager(backend.device, backend.dtype, backend.overrides,
                       name=f"{backend.name}/eager" if backend.overrides else None)
    eager_outcome = runner(eager, case)
    if eager_outcome.status != OK:
        raise NotJudged(f"torch eager did not run the case ({eager_outcome.status})")
    return _difference(outputs, eager_outcome.outputs, backend.dtype)


def batch_slices(case: Case) -> list[tuple[int, Case]]:
    """(k, the case on the first k rows of every input) for k = 1 and half the batch, where the graph
    maps rows to rows (module docstring); NotJudged says why not."""
    from fuzzer.judging.reference import evaluate_all
    from fuzzer.shrinking.shrink import rebuild

    graph = case.graph
    leading = {spec.shape[0] if spec.shape else None for spec in graph.inputs}
    if len(leading) != 1 or None in leading or next(iter(leading)) < 2:
        raise NotJudged("its inputs share no leading (batch) dim of 2 rows or more")
    batch = leading.pop()
    shapes = infer_shapes(graph)
    if any(not shapes[name] or shapes[name][0] != batch for name in graph.outputs):
        raise NotJudged(f"an output does not keep the batch dim of {batch} rows")
    inputs, params = split_arrays(case)
    whole = evaluate_all(graph, inputs, params)
    slices = []
    for k in sorted({1, batch // 2}):
        specs = tuple(replace(spec, shape=(k, *spec.shape[1:])) for spec in graph.inputs)
        sliced = rebuild(case, replace(graph, inputs=specs))
        if sliced is None or sliced.graph.inputs != specs or sliced.graph.outputs != graph.outputs:
            raise NotJudged(f"the graph is not valid on its first {k} rows (a shape attribute fixes the batch size)")
        part = evaluate_all(sliced.graph, *split_arrays(sliced))
        for name in graph.outputs:
            expected, got = np.asarray(whole[name])[:k], np.asarray(part[name])
            scale = float(np.max(np.abs(expected[np.isfinite(expected)]), initial=0.0))
            tolerance = {"rtol": 1e-9, "atol": 1e-12 * scale, "equal_nan": True}  # float64's own reordering only
            if got.shape != expected.shape or not np.allclose(got, expected, **tolerance):
                raise NotJudged(f"its rows are not independent: the float64 reference of the first {k} rows is not "
                                "the first rows of the whole (an op mixes rows)")
        slices.append((k, sliced))
    return slices


def _batch_invariance(backend, case: Case, outputs: list[np.ndarray], runner: Runner) -> str | None:
    """The first k rows of the compiled whole against the compiled run of the first k rows."""
    for k, sliced in batch_slices(case):
        sliced_outcome = runner(backend, sliced)
        if sliced_outcome.status != OK:
            raise NotJudged(f"the run on the first {k} rows did not finish ({sliced_outcome.status})")
        difference = _difference([np.asarray(out)[:k] for out in outputs], sliced_outcome.outputs, backend.dtype)
        if difference is not None:
            return f"k={k} of {case.graph.inputs[0].shape[0]} rows, {difference}"
    return None


# Each contract's judge: (backend, case, its outputs, runner) -> what differs, or None.
JUDGES = {"strict-numerics": _strict_numerics, "batch-invariance": _batch_invariance}


# The script's comparison of two lists of float64 arrays, `ours` against `theirs`, bit for bit (as _difference).
_SCRIPT_COMPARE = [
    "for index, (got, want) in enumerate(zip(ours, theirs)):",
    "    if got.shape != want.shape:",
    "        raise SystemExit(f'{BROKEN}: output {index} has shape {got.shape}, not {want.shape}')",
    "    same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))",
    "    if not same.all():",
    "        raise SystemExit(f'{BROKEN}: output {index}, {(~same).sum()} of {same.size} entries differ')",
]


def reproducer_check(backend, case: Case) -> list[str]:
    """The minimal reproducer's last lines for a contract finding: the promise checked bit for bit
    after the script computed `outputs` from `program(*args)` (fuzzer/reproducers/minimal_reproducer.py)."""
    from fuzzer.backends.torch_compile import with_inductor_config
    from fuzzer.reproducers.op_source import Source

    terms = contract(backend.contract)
    context = with_inductor_config("torch.no_grad()", backend.compile_options, Source())
    as_numpy = "[o.detach().to('cpu', torch.float64).numpy() for o in {}]"  # float64 holds every lower dtype's bits
    broken = f"BROKEN = {f'{terms.title}: {terms.violation}'.upper()!r}"
    if terms.name == "strict-numerics":
        eager = as_numpy.format("graph(*args)")
        return [broken, "with torch.no_grad():", f"    eager = {eager}  # torch eager, same device and dtype",
                "ours, theirs = outputs, eager", *_SCRIPT_COMPARE, "print('OK: bitwise equal to torch eager')"]
    try:
        sizes = [k for k, _ in batch_slices(case)]
    except NotJudged:
        sizes = [1]
    return [broken, f"for k in {sizes}:  # f(x)[:k] against f(x[:k]), compiled alike",
            f"    with {context}:", f"        part = {as_numpy.format('program(*[a[:k] for a in args])')}",
            "    ours, theirs = [o[:k] for o in outputs], part", *("    " + line for line in _SCRIPT_COMPARE),
            "print('OK: every slice of the batch bitwise equal to the same rows of the whole')"]
