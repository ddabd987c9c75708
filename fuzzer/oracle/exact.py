"""Exact judging of integer and bool backends (fuzzer/exact_dtypes.py).

The reference of a backend of exact dtype d runs the graph in numpy on the inputs cast to d, each op's
`exact_reference` (or its `reference`, where that already has torch's integer semantics), every value
in the dtype torch gives it (int32 + int32 is int32 and wraps; sum of int32 is int64; int32 + 1.5 is
float32). Then:

    an integer or bool output   equals the reference entry for entry, and is of the same kind (an
                                integer result where torch gives a bool, or a float where torch gives
                                an integer, is a type-promotion bug); the verdict names the first
                                differing entry and both values
    a float output (a mixed     finite where the reference is, of its non-finite class where it is
    graph's)                    not, and within sens * RTOL[float32] * scale of it (the float model's
                                floor, with scale the largest magnitude the output depends on); an
                                agreeing float output is reported with error 0, so no accuracy
                                regression is measured on it

An op applied to a value of a dtype it does not declare (a bitwise op on the float32 an int tensor
plus a float scalar gave; neg of a comparison's bool) makes the graph ill-typed, as torch refuses it:
the backend's verdict is `unsupported`, never a finding.

Every backend, jax's too, has this one reference: the jax functions compute in torch's dtypes where
jax's own would differ (jnp.sum of uint8 is uint64: it is given dtype=int64).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fuzzer.errors import IllTyped
from fuzzer.exact_dtypes import is_exact
from fuzzer.ir import Case, split_arrays
from fuzzer.ops import get_op
from fuzzer.oracle.dtypes import RTOL, nonfinite_class
from fuzzer.records import BackendVerdict
from fuzzer.verdicts import AGREE, MISMATCH, NAN_INF, UNSUPPORTED


def evaluate_exact(case: Case, dtype: str) -> dict:
    """Every value of the case's graph by name, in torch's integer semantics, from inputs cast to `dtype`."""
    inputs, params = split_arrays(case)
    cast = lambda array: np.asarray(array).astype(dtype)  # noqa: E731 - keeps the low bits, as torch's .to does
    env = {name: cast(array) for name, array in inputs.items()}
    with np.errstate(all="ignore"):
        for node in case.graph.nodes:
            op = get_op(node.op)
            operands = [env[name] for name in node.inputs]
            for operand in operands:
                allowed = op.float_dtypes if operand.dtype.kind == "f" else operand.dtype.name in op.exact_dtypes
                if not allowed:
                    raise IllTyped(f"node '{node.name}' applies {node.op} to a {operand.dtype.name} value, which it does not take")
            reference = op.exact_reference or op.reference
            node_params = {k: cast(v) for k, v in params.get(node.name, {}).items()}
            env[node.name] = np.asarray(reference(operands, node_params, node.attrs))
    return env


@dataclass
class TypedReference:
    """A case's references per dtype, computed when first asked, each an env or the sentence saying why
    the graph is ill-typed there (`evaluate`). Subclasses: exact (integer and bool) and complex
    (fuzzer/oracle/complex.py)."""

    case: Case
    envs: dict = field(default_factory=dict)  # dtype -> env, or the IllTyped sentence
    jax_runs: dict = field(default_factory=dict)  # backend name -> jax eager's outputs, or its failure

    def evaluate(self, dtype: str) -> dict:
        raise NotImplementedError

    def env(self, dtype: str):
        if dtype not in self.envs:
            try:
                self.envs[dtype] = self.evaluate(dtype)
            except IllTyped as exc:
                self.envs[dtype] = str(exc)
        return self.envs[dtype]

    def outputs(self, dtype: str):
        """The reference outputs in `dtype`, or the sentence saying why the graph is ill-typed."""
        env = self.env(dtype)
        return env if isinstance(env, str) else [env[name] for name in self.case.graph.outputs]

    def jax_eager_outputs(self, device: str, dtype: str):
        """jax eager's own outputs of the case (the reference of jax backends where jax's semantics may
        differ from torch's: OpDef.jax_exact_differs, jax_complex_differs), or the sentence why there are none."""
        key = f"jax-eager:{device}:{dtype}"
        if key not in self.jax_runs:
            from fuzzer.backends import get_backend

            try:
                self.jax_runs[key] = get_backend(key).run(self.case)
            except Exception as exc:  # noqa: BLE001 - jax refusing the graph judges nothing
                self.jax_runs[key] = f"jax eager, its reference here, raised {type(exc).__name__}"
        return self.jax_runs[key]


class ExactReference(TypedReference):
    """A case's exact references, per exact dtype."""

    def evaluate(self, dtype: str) -> dict:
        return evaluate_exact(self.case, dtype)

    def jax_differs(self) -> list[str]:
        """The case's ops whose integer semantics jax may define otherwise than torch (OpDef.jax_exact_differs)."""
        return sorted({node.op for node in self.case.graph.nodes if get_op(node.op).jax_exact_differs})

    def expected_of(self, backend: str, dtype: str):
        """What `backend`'s outputs must equal: the reference outputs in `dtype`, or jax eager's where the graph
        holds an op whose integer semantics jax may define otherwise (a jax backend; jax eager itself is then
        not judged); or the sentence saying why nothing is expected."""
        from fuzzer.backend_names import BackendName
        from fuzzer.backends import kind_family

        expected, name, differs = self.outputs(dtype), BackendName.parse(backend), self.jax_differs()
        if isinstance(expected, str) or not differs or kind_family(name) != "jax":
            return expected
        if name.kind == "jax-eager":
            return f"jax's integer semantics may differ from torch's in {', '.join(differs)}: jax eager is its own reference"
        expected = self.jax_eager_outputs(name.device or "cpu", dtype)
        return expected if isinstance(expected, str) else [np.asarray(value) for value in expected]

    def ill_typed(self, dtype: str) -> str | None:
        """Why the graph is ill-typed in `dtype` (an op given a dtype it does not take), or None."""
        env = self.env(dtype)
        return env if isinstance(env, str) else None

    def scale(self, dtype: str, index: int) -> tuple[float, float]:
        """(scale, sens) of output `index`: its ancestors' largest finite magnitude, and 1 + their node count."""
        env, graph = self.env(dtype), self.case.graph
        ancestors = graph.ancestors([graph.outputs[index]])
        magnitudes = [float(np.max(np.abs(env[name][np.isfinite(env[name])]), initial=0.0))
                      for name in ancestors if np.asarray(env[name]).dtype.kind == "f"]
        return max(magnitudes, default=0.0), 1.0 + sum(1 for node in graph.nodes if node.name in ancestors)


def _kind(array: np.ndarray) -> str:
    return {"b": "bool", "f": "float"}.get(array.dtype.kind, "integer")


def compare_exact(y, index: int, expected: np.ndarray, exact: ExactReference, dtype: str) -> tuple[str, float, float, str]:
    """(verdict, error, allowed, detail) of one output of an exact backend against `expected`."""
    y, expected = np.asarray(y), np.asarray(expected)
    if y.shape != expected.shape:
        return MISMATCH, float("inf"), 0.0, f"shape {list(y.shape)} != reference {list(expected.shape)}"
    if _kind(y) != _kind(expected):
        return MISMATCH, float("inf"), 0.0, f"a {_kind(y)} result where the reference is {_kind(expected)} ({expected.dtype})"
    if _kind(y) != "float":
        wrong = y.astype(np.int64) != expected.astype(np.int64)
        if not np.any(wrong):
            return AGREE, 0.0, 0.0, ""
        at = tuple(int(i) for i in np.argwhere(wrong)[0])
        error = float(abs(int(y[at]) - int(expected[at])))
        return MISMATCH, error, 0.0, (f"{int(wrong.sum())} entries differ, e.g. at {list(at)}: {y[at].item()!r} where the "
                                      f"reference is {expected[at].item()!r} ({expected.dtype})")
    y, expected = y.astype(np.float64), expected.astype(np.float64)
    classes = nonfinite_class(expected)
    wrong_class = nonfinite_class(y) != classes
    if np.any(wrong_class):
        at = tuple(int(i) for i in np.argwhere(wrong_class)[0])
        return NAN_INF, float("inf"), 0.0, f"{int(wrong_class.sum())} entries differ in kind, e.g. at {list(at)}: {y[at]} where the reference is {expected[at]}"
    scale, sens = exact.scale(dtype, index)
    allowed = sens * RTOL["float32"] * max(scale, 1.0)
    with np.errstate(invalid="ignore"):
        distance = np.where(classes == 0, np.abs(y - expected), 0.0)
    if float(np.max(distance, initial=0.0)) <= allowed:
        return AGREE, 0.0, 0.0, ""
    at = tuple(int(i) for i in np.unravel_index(np.argmax(distance), y.shape))
    return MISMATCH, float(distance[at]), allowed, f"worst at {list(at)}: {y[at]:.9g} where the reference is {expected[at]:.9g}"


def judge_exact(backend: str, dtype: str, outputs: list, exact: ExactReference) -> BackendVerdict:
    """The verdict of an exact backend: that of its first wrong output (agree: every output is right)."""
    expected = exact.expected_of(backend, dtype)
    if isinstance(expected, str):
        return BackendVerdict(backend, UNSUPPORTED, detail=expected)
    if len(outputs) != len(expected):
        return BackendVerdict(backend, MISMATCH, detail=f"{len(outputs)} outputs, the reference has {len(expected)}")
    for index, (y, reference) in enumerate(zip(outputs, expected)):
        verdict, error, allowed, detail = compare_exact(y, index, reference, exact, dtype)
        if verdict != AGREE:
            return BackendVerdict(backend, verdict, error, allowed, index, detail)
    return BackendVerdict(backend, AGREE, at_floor=True)


__all__ = ["ExactReference", "IllTyped", "compare_exact", "evaluate_exact", "is_exact", "judge_exact"]
