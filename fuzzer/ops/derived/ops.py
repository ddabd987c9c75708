"""The derived-op table's entries as registry ops (OpDef, family "derived").

Each op calls its torch function by name with the template's keyword arguments; its shapes are
those its templates allow (first-operand dims within the sizes the build saw work, the
other operands following the first as in the template), checked and inferred on CPU tensors; its
attributes are its templates' keyword arguments, perturbed among the values its samples show. Its
reference is the named numpy/scipy function where the table has one, else torch's own float64 run
on the CPU (`reference_source` says which); its jax implementation is the checked twin, or
OpUnsupported. It declares no numerics: the oracle's generic models judge it (oracle/undeclared.py).
"""

from __future__ import annotations

import functools
import importlib
import math
import warnings

import numpy as np
from hypothesis import assume

from fuzzer.complex_dtypes import COMPLEX_DTYPES
from fuzzer.errors import IllTyped, OpUnsupported, OutsideDomain
from fuzzer.exact_dtypes import EXACT_DTYPES
from fuzzer.ops import API_KEYWORDS, API_PATH, OpDef
from fuzzer.ops._common import DIMS, check, like, st
from fuzzer.ops.derived.conventions import convention
from fuzzer.ops.elementwise import jax_function, torch_function
from fuzzer.ops.numerics import Numerics

# A derived op may be a deprecated alias (nn.functional.upsample_nearest): torch warns at every call, and dynamo and
# fx warn again while they trace it, which reached a campaign's terminal once a worker. Filtered by that message
# (torch's for its functional aliases), so that no traced function holds a catch_warnings.
warnings.filterwarnings("ignore", message=r"`nn\.functional\.\w+` is deprecated")

NUMPY, TORCH_FLOAT64 = "derived: numpy ref", "derived: torch f64"
# A derived op runs in the integer, bool and complex dtypes its op-database entry lists for the CPU
# (`dtypes`), judged exactly against torch eager's run (DerivedOp.torch_exact) or per component against
# torch's complex128 run; its jax twin was checked against the reference on float samples only, so jax
# backends are judged against jax eager's run there.
UNCHECKED_JAX = ("its jax twin was checked on float samples only (fuzzer/ops/derived/build.py): jax's integer "
                 "promotion and complex conventions may be its own")
FREE = frozenset(DIMS)  # a template dim that took every one of these sizes (at build time) takes any size
FAMILY = "derived"
# Keyword arguments that place a result rather than compute it: the op database's samples run on the CPU
# (ones_like(x, device="cpu")), and kept they pin a CUDA backend's result to the CPU, a crash of ours.
PLACEMENT = ("device", "pin_memory")
# Ops that read their operand's storage, not its values: as_strided's storage_offset counts from the start
# of the storage, which a view (a slice, a transpose) shares with its base, so a result would depend on how
# a backend laid the operand out. They get a fresh contiguous copy, whose storage holds its values alone,
# as the reference's operands do.
STORAGE_READERS = ("torch.as_strided", "torch.as_strided_copy", "torch.as_strided_scatter")


def resolve(call: str):
    """The torch function named `call` (validated by table.check_call when the table was read)."""
    import torch

    target = torch
    for part in call.split(".")[1:]:
        target = getattr(target, part, None)
    if not callable(target):
        raise OpUnsupported(f"torch {torch.__version__} has no {call}")
    return target


@functools.lru_cache(maxsize=65536)
def _probe_shape(call: str, shapes: tuple, items: tuple) -> tuple[int, ...] | str:
    import torch

    attrs = {key: list(value) if isinstance(value, tuple) else value for key, _, value in items}
    generator = torch.Generator().manual_seed(0)
    results = []
    # On seeded random numbers, zeros and nans: an op that raises on some values (linalg.solve of a singular
    # matrix, svdvals of a nan) would fail its reference on a graph's values, so zeros and nans refuse it.
    # Not on meta tensors: their kernels check less (conv_transpose2d's groups against the weight), and the
    # first one imports torch's Python decompositions, 5 to 20 s before a campaign's first graph.
    for make in (lambda shape: torch.randn(shape, generator=generator), torch.zeros,
                 lambda shape: torch.full(shape, math.nan)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # std of one element, and such: a probe's, not the graph's
                result = resolve(call)(*[make(shape) for shape in shapes], **attrs)
        except Exception as exc:  # noqa: BLE001 - any refusal means these shapes do not fit
            return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
        if not isinstance(result, torch.Tensor) or result.dtype != torch.float32 or result.dim() == 0 or result.numel() == 0:
            return "not one non-empty float tensor of rank >= 1"
        results.append(tuple(result.shape))
    return results[0] if len(set(results)) == 1 else "a result whose shape depends on the operands' values"


def probe_shape(call: str, shapes, attrs: dict) -> tuple[int, ...] | str:
    """The output shape of `call` on CPU operands of `shapes` (seeded random numbers, zeros, nans), or
    the reason torch refuses them. Cached: the generator asks at every step; the type is part of the
    key, since 1, 1.0 and True hash alike."""
    shapes = tuple(tuple(int(d) for d in shape) for shape in shapes)
    items = tuple(sorted((key, type(value).__name__, tuple(value) if isinstance(value, list) else value)
                         for key, value in attrs.items()))
    return _probe_shape(call, shapes, items)


def following(shapes: list, first) -> list[tuple[int, ...]]:
    """`shapes` (a template's operands) with the first one replaced by `first`: a dim of another
    operand that lines up with a dim of the first (from the right, as broadcasting does) and has its
    size in the template follows it."""
    result = [list(shape) for shape in shapes]
    result[0] = list(first)
    for dim, size in enumerate(first):
        offset = len(first) - dim
        for other in range(1, len(shapes)):
            at = len(shapes[other]) - offset
            if at >= 0 and shapes[other][at] == shapes[0][dim]:
                result[other][at] = size
    return [tuple(shape) for shape in result]


class DerivedOp:
    """The callables of one table entry (an OpDef holds its bound methods)."""

    def __init__(self, entry: dict):
        self.entry = entry
        self.call = entry["call"]
        self.templates = [{**template, "kwargs": {key: value for key, value in template["kwargs"].items() if key not in PLACEMENT}}
                          for template in entry["templates"]]
        self.dtypes = frozenset(entry["dtypes"])
        self._function = None

    # -- shapes -------------------------------------------------------------------------
    def operand_shapes(self, template: dict, first: tuple[int, ...]) -> list[tuple[int, ...]] | None:
        """The template's operand shapes for the first operand `first`; None where `first` is not
        within the template's sizes (a dim that took every size of DIMS takes any)."""
        shapes = template["shapes"]
        if len(first) != len(shapes[0]) or any(size not in allowed and not FREE.issubset(allowed)
                                               for size, allowed in zip(first, template["sizes"])):
            return None
        return following(shapes, first)

    def fitting(self, first: tuple[int, ...], attrs: dict | None = None, among: list | None = None):
        """(template, operand shapes) of the templates (or those `among`) that run on `first` (with `attrs`,
        else their own), probed one by one as asked for."""
        for template in self.templates if among is None else among:
            shapes = self.operand_shapes(template, first)
            if shapes is not None and not isinstance(probe_shape(self.call, shapes, template["kwargs"] if attrs is None else attrs), str):
                yield template, shapes

    def accepts(self, shape) -> bool:
        """By the table's sizes alone: asked of every op at every step, it runs nothing (draw_attrs probes)."""
        return any(self.operand_shapes(template, tuple(shape)) is not None for template in self.templates)

    def infer(self, attrs: dict, shapes: list) -> tuple[int, ...]:
        shape = probe_shape(self.call, shapes, attrs)
        check(not isinstance(shape, str), f"{self.call} refuses operands {[list(s) for s in shapes]} with {attrs}: {shape}")
        return shape

    # -- attributes ---------------------------------------------------------------------
    def seen_values(self) -> dict[str, list]:
        """Each keyword argument's values over the templates, in their order."""
        seen: dict[str, list] = {}
        for template in self.templates:
            for key, value in template["kwargs"].items():
                if value not in seen.setdefault(key, []):
                    seen[key].append(value)
        return seen

    def draw_attrs(self, draw, shapes: list) -> dict:
        """A fitting template's arguments, half the time with some values swapped for others its
        samples show (floats also anywhere between the smallest and largest seen); kept only where
        the op still runs on these shapes."""
        # The first template that runs, from a drawn one on (each probe runs the op: the census of
        # fuzzer/drawing/regions.py draws every op 8 times before a campaign's first graph).
        sized = [t for t in self.templates if self.operand_shapes(t, tuple(shapes[0])) is not None]
        start = draw(st.integers(0, max(0, len(sized) - 1)))
        # `accepts` read the sizes each dim took alone; dims together may still not fit: a rare redraw.
        chosen = next(self.fitting(tuple(shapes[0]), among=sized[start:] + sized[:start]), None)
        assume(chosen is not None)
        template, operands = chosen
        attrs = dict(template["kwargs"])
        if attrs and draw(st.booleans()):
            seen = self.seen_values()
            for key in attrs:
                choices = seen[key]
                floats = [v for v in choices if isinstance(v, float)]
                if len(floats) >= 2 and draw(st.booleans()):
                    attrs[key] = round(draw(st.floats(min(floats), max(floats))), 4)
                else:
                    attrs[key] = draw(st.sampled_from(choices))
            if isinstance(probe_shape(self.call, operands, attrs), str):
                attrs = dict(template["kwargs"])
        return attrs

    def draw_operands(self, draw, first, attrs: dict) -> list[tuple[int, ...]]:
        """The other operands of the first template that runs on `first` with `attrs` (draw_attrs made sure one does)."""
        template, shapes = next(self.fitting(tuple(first), attrs))
        return shapes[1:]

    def attr_names(self) -> tuple[str, ...]:
        return tuple(f"{key}?" for key in self.seen_values())

    def choices(self) -> dict[str, tuple]:
        """The values a case file may give: those seen, for every argument but the floats drawn from a range."""
        return {key: tuple(values) for key, values in self.seen_values().items()
                if sum(isinstance(v, float) for v in values) < 2}

    # -- implementations ----------------------------------------------------------------
    def function(self):
        """The torch function, looked up once (a plain attribute afterwards, which torch.compile traces through)."""
        if self._function is None:
            self._function = resolve(self.call)
        return self._function

    def torch(self, xs, ps, attrs):
        dtype = str(xs[0].dtype).removeprefix("torch.")
        if dtype not in self.dtypes:
            raise OpUnsupported(f"{self.call} has no {dtype} kernel on the CPU in torch's op database")
        if self.call in STORAGE_READERS:
            xs = [x.contiguous().clone() for x in xs]
        return self.function()(*xs, **attrs)

    def torch_float64(self, xs, ps, attrs):
        """torch's own run on the CPU: float64 for float64 operands, else float32 rounded to their dtype;
        on complex operands (the complex oracle's r64 and r_d) complex128 for complex128, else complex64,
        its result in the dtype torch gives it (abs of a complex value is real)."""
        import torch

        if any(np.iscomplexobj(x) for x in xs):
            wide = any(np.asarray(x).dtype in (np.complex128, np.float64) for x in xs)
            tensors = [torch.from_numpy(np.array(x, dtype=np.complex128 if wide else np.complex64)) for x in xs]
            return self.function()(*tensors, **attrs).resolve_conj().resolve_neg().numpy()
        dtype = np.float64 if np.asarray(xs[0]).dtype == np.float64 else np.float32
        tensors = [torch.from_numpy(np.array(x, dtype=dtype)) for x in xs]
        try:
            result = self.function()(*tensors, **attrs)
        except ValueError as exc:  # a check of the values (gaussian_nll_loss's negative var) the draw's probe passed by chance
            raise OutsideDomain(f"{self.call}: {exc}") from exc
        return like(xs[0], result.numpy())

    def torch_exact(self, xs, ps, attrs):
        """The exact reference (OpDef.exact_reference): torch's own eager run on the CPU on the operands as
        they are (int8 stays int8), its result in the dtype torch gives it. Not the entry's numpy ref, whose
        integer semantics differ from torch's: np.sin of int8 is float16 where torch's is float32, an integer
        division by zero is 0 with a warning where torch raises. A value torch refuses (a remainder by 0)
        makes the graph ill-typed there, as in torch: no backend is judged on it."""
        import torch

        try:
            result = self.function()(*[torch.from_numpy(np.array(x)) for x in xs], **attrs)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise IllTyped(f"{self.call} refuses these operands in torch eager, its reference: "
                           f"{str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__}") from exc
        return result.numpy()

    def numpy(self, xs, ps, attrs):
        if any(np.iscomplexobj(x) for x in xs):
            return self.torch_float64(xs, ps, attrs)  # the numpy ref agreed with torch on real samples only
        reference = self.entry["reference"]
        function = getattr(importlib.import_module(reference["module"]), reference["name"])
        return like(xs[0], function(*xs, **attrs))

    def jax_unsupported(self, xs, ps, attrs):
        raise OpUnsupported(f"{self.call} has no jax twin: none agreed with its reference when the derived table was built, "
                            "or fuzzer/ops/derived/conventions.py drops one that computes another function")


def reference_source(op: OpDef) -> str:
    """Which reference judges a derived op: a numpy/scipy function, or torch's own float64 run."""
    return NUMPY if getattr(op.reference, "__func__", None) is DerivedOp.numpy else TORCH_FLOAT64


def make_op(entry: dict, hand_written_twin: str | None = None) -> OpDef:
    derived = DerivedOp(entry)
    reference = entry["reference"]
    settled = convention(entry["name"])
    twin = None if settled and settled.drop_jax else entry["jax"]
    run_reference = derived.numpy if reference["kind"] == "numpy" else derived.torch_float64
    numerics = Numerics()
    if settled and settled.undefined:
        def undefined_operands(xs, ps, attrs):
            return settled.marks(xs)

        undefined_operands.__qualname__ = settled.rules_text()  # what `fuzz ops --numerics` prints
        numerics = Numerics(undefined_operands=undefined_operands, why={"undefined_operands": settled.why})
    counts = [len(t["shapes"]) for t in entry["templates"]]
    exact_dtypes = tuple(dtype for dtype in EXACT_DTYPES if dtype in derived.dtypes)
    takes_complex = bool(derived.dtypes & set(COMPLEX_DTYPES))
    where = f"{reference['module']}.{reference['name']}" if reference["kind"] == "numpy" else "torch float64 on the CPU"
    return OpDef(
        name=entry["name"],
        infer=derived.infer,
        reference=run_reference,
        torch=_marked(derived.torch, torch_function(entry["call"].removeprefix("torch."))),
        jax=derived.jax_unsupported if twin is None else _floats_only(jax_function(twin["path"].removeprefix("jax."),
                                                                                   twin["keywords"] or None)),
        accepts=derived.accepts,
        draw_attrs=derived.draw_attrs,
        attrs=derived.attr_names(),
        choices=derived.choices(),
        draw_operands=derived.draw_operands if max(counts) > 1 else None,
        arity=(min(counts), max(counts)),
        numerics=numerics,
        declares_numerics=False,
        family=FAMILY,
        exact_dtypes=exact_dtypes,
        exact_reference=derived.torch_exact if exact_dtypes else None,
        jax_exact_differs=UNCHECKED_JAX if exact_dtypes and twin else "",
        complex_dtypes="complex" if takes_complex else "",
        jax_complex_differs=UNCHECKED_JAX if takes_complex and twin else "",
        notes=f"from torch's op database ({', '.join(entry['entries'])}); reference: {where}; "
              f"jax: {twin['path'] if twin else 'none'}"
              + (f"; convention: {settled.why}" if settled else "")
              + (f"; hand-written twin: {hand_written_twin}" if hand_written_twin else ""),
    )


def _with_marks(call, written):
    """`call` carrying `written`'s marks (the public call a reproducer writes)."""
    for mark in (API_PATH, API_KEYWORDS):
        setattr(call, mark, getattr(written, mark))
    return call


def _marked(run, written):
    """`run` (which checks the dtype first) carrying `written`'s marks, so a reproducer writes the plain call."""

    def call(xs, ps, attrs):
        return run(xs, ps, attrs)

    return _with_marks(call, written)


def _floats_only(written):
    """`written` (a jax twin, checked on the op database's float samples only), where jax refusing an integer, bool or
    complex operand's dtype with a TypeError (lax.lgamma of int32, which torch.lgamma promotes) is no verdict on the
    case, as a release that cannot express it (OpUnsupported): not a crash finding of jax's."""

    def call(xs, ps, attrs):
        try:
            return written(xs, ps, attrs)
        except TypeError as exc:
            import jax.numpy as jnp

            if all(jnp.issubdtype(x.dtype, jnp.floating) for x in xs):
                raise
            raise OpUnsupported(f"{getattr(written, API_PATH)} refuses this dtype: {str(exc).splitlines()[0][:160]}") from exc

    return _with_marks(call, written)


def derived_ops(entries: list[dict], hand_written: dict[str, OpDef]) -> tuple[dict[str, OpDef], dict[str, str]]:
    """({name: OpDef}, {derived name: hand-written name} where both call one function). A derived op is
    named by its function (`torch.add`), so it never takes a hand-written op's name: `add` stays the
    hand-written op with its reviewed numerics, `torch.add` is the op database's, judged by the generic
    models, with its own samples' arguments (alpha)."""
    by_call = {getattr(op.torch, API_PATH, None): op.name for op in hand_written.values()}
    ops, twins = {}, {}
    for entry in entries:
        short = entry["call"].rsplit(".", 1)[1]
        twin = by_call.get(entry["call"]) or (short if short in hand_written else None)
        if twin:
            twins[entry["name"]] = twin
        ops[entry["name"]] = make_op(entry, twin)
    return ops, twins

