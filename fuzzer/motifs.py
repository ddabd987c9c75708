"""Motifs: the fragments compilers rewrite, declared once each as data, drawn whole and keyed.

Fusion and rewrite bugs need a specific neighbour after a specific op: a column bias (M, 1) added to
a matmul, a scale then a row bias, a product with a constant vector, conv -> batch_norm -> relu.
Drawn op by op from the whole table, the op after a matmul is seldom that neighbour (issue 53: in
3,000 graphs of the big-contraction regime none was), so a compiler's rewriter was never handed its own pattern.
Here each pattern of the compilers' pattern libraries (inductor's torch/_inductor/fx_passes/, XLA:CPU's
oneDNN rewriters) is a Motif: a head (the contraction it starts from) and a chain of Steps after it,
with its variants (row versus column bias, a runtime input versus a constant operand: an op's weight
or a scalar attribute, which freezing and jax-jit-const make compile-time constants; with and
without an activation; scale before or after the bias), as WhiteFox and OATest draw them.

Where motifs are drawn (fuzzer/drawing/regimes.py: `Regime.motifs`): the `motifs` regime (4 percent of the
default mix, taken from small) starts its graphs with a motif of small dims, and the big-contraction
regime continues its large contraction as a motif's head in half of its graphs (where a variant has
that head). A motif graph is a graph like any other: stored, shrunk, replayed and exported as one.

Each variant is a region key `HEAD:motif=NAME/VARIANT` (`matmul:motif=addmm/column`), held by the
head node of every chain that matches it (`matched`), however it was drawn: a shrunk case keeps the
key while it keeps the chain. A campaign whose regimes draw motifs declares the keys of the variants
its ops can build (fuzzer/drawing/regions.py), counts them and steers to those not covered yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from hypothesis import strategies as st

from fuzzer.ops._common import DIMS

PREFIX = "motif="

# A second operand's shape, from the shape s of the value the step reads: a bias or factor that
# broadcasts along rows, along columns, per channel of a conv's output, or one of the same shape.
OPERANDS: dict[str, Callable[[tuple[int, ...]], tuple[int, ...]]] = {
    "row": lambda s: (1,) * (len(s) - 1) + s[-1:],  # (1, N): one bias per output feature
    "vector": lambda s: s[-1:],  # (N,): the same, as a 1-d tensor
    "column": lambda s: s[:-1] + (1,),  # (M, 1): one bias per row
    "channel": lambda s: (s[1],) + (1,) * (len(s) - 2),  # (C, 1, 1): per output channel of a conv
    "full": lambda s: s,
    "product": lambda s: s,  # the result of another matmul (mm + mm)
}
ACTIVATIONS = ("relu", "gelu", "silu", "tanh", "sigmoid", "hardswish")  # mkldnn_fusion.py's unary fusions
SCALES = ("mul_scalar", "div_scalar")
EVAL_BATCH_NORM = {"training": False, "eps": 1e-5}


@dataclass(frozen=True)
class Step:
    """One op after the chain so far, reading it as its first operand: one of `ops` (drawn), its
    second operand of the class `operand` (OPERANDS) as a new graph input, or the op's own operands
    where None; `attrs` fixed where given, else drawn."""

    ops: tuple[str, ...]
    operand: str | None = None
    attrs: dict | None = None


@dataclass(frozen=True)
class Variant:
    name: str
    head: str  # a key of HEADS
    steps: tuple[Step, ...]
    head_attrs: dict = field(default_factory=dict)  # fixed attributes of the head (linear's bias)


@dataclass(frozen=True)
class Motif:
    name: str
    mirrors: str  # the compiler pattern it mirrors: file and pattern
    variants: tuple[Variant, ...]


def _add(operand: str) -> Step:
    return Step(("add",), operand)


def _mul(operand: str) -> Step:
    return Step(("mul",), operand)


ACTIVATION = Step(ACTIVATIONS)
SCALE = Step(SCALES)

MOTIFS = (
    Motif("addmm", "inductor fx_passes/post_grad.py `addmm` (add(mm(a, b), inp) -> aten.addmm, is_valid_addmm_fusion) "
          "and pad_mm.py's addmm; XLA:CPU onednn_contraction_rewriter.cc: dot + bias add", (
              Variant("row", "matmul", (_add("row"),)),
              Variant("vector", "matmul", (_add("vector"),)),
              Variant("column", "matmul", (_add("column"),)),
              Variant("full", "matmul", (_add("full"),)),
              Variant("linear-column", "linear", (_add("column"),), {"bias": False}),
          )),
    Motif("addmm-activation", "inductor fx_passes/mkldnn_fusion.py _register_unary_fusion (linear + relu, gelu, silu, "
          "tanh, sigmoid, hardswish); XLA:CPU onednn_contraction_rewriter.cc: dot + bias + activation", (
              Variant("row", "matmul", (_add("row"), ACTIVATION)),
              Variant("column", "matmul", (_add("column"), ACTIVATION)),
              Variant("constant-bias", "linear", (ACTIVATION,), {"bias": True}),
          )),
    Motif("scaled-addmm", "XLA:CPU onednn_contraction_rewriter.cc: dot * constant scale (the LINEAR fusion) then "
          "bias; inductor fx_passes/binary_folding.py: mm followed by a mul or div by a constant", (
              Variant("scale-bias", "matmul", (SCALE, _add("row"))),
              Variant("bias-scale", "matmul", (_add("row"), SCALE)),
              Variant("linear-scale", "linear", (SCALE,)),
          )),
    Motif("mm-vector-product", "inductor fx_passes/binary_folding.py: a mm or addmm times a constant vector, folded "
          "into its weight under freezing; a runtime vector stays a pointwise epilogue", (
              Variant("runtime-row", "linear", (_mul("row"),)),
              Variant("runtime-column", "matmul", (_mul("column"),)),
              # batch_norm in eval on (M, N): x * scale + shift with constant per-feature vectors
              Variant("constant", "linear", (Step(("batch_norm",), None, EVAL_BATCH_NORM),)),
          )),
    Motif("bmm-bias", "inductor fx_passes/post_grad.py unfuse_bias_baddbmm_to_pointwise (baddbmm) and "
          "decompose_mem_bound_mm.py's bmm", (
              Variant("row", "bmm", (_add("row"),)),
              Variant("column", "bmm", (_add("column"),)),
          )),
    Motif("mm-plus-mm", "inductor fx_passes/post_grad.py mm_plus_mm (add(mm(a, b), mm(c, d)) -> one kernel)", (
              Variant("sum", "matmul", (_add("product"),)),
          )),
    Motif("sdpa", "inductor fx_passes/fuse_attention.py: _sfdp_pattern_1 (div), _sfdp_pattern_2 (mul), "
          "_sfdp_pattern_5 (div + mask): matmul(q, k^T) scaled, softmax(-1), matmul v -> sdpa", (
              Variant("div", "scores", (Step(("div_scalar",)), Step(("softmax",), None, {"dim": -1}), Step(("matmul",)))),
              Variant("mul", "scores", (Step(("mul_scalar",)), Step(("softmax",), None, {"dim": -1}), Step(("matmul",)))),
              Variant("mask", "scores", (Step(("div_scalar",)), _add("full"), Step(("softmax",), None, {"dim": -1}),
                                         Step(("matmul",)))),
          )),
    Motif("conv-bn", "inductor fx_passes/efficient_conv_bn_eval.py (conv + batch_norm in eval) and freezing's "
          "conv-bn folding; mkldnn_fusion.py's conv + relu after it", (
              Variant("plain", "conv2d", (Step(("batch_norm",), None, EVAL_BATCH_NORM),)),
              Variant("relu", "conv2d", (Step(("batch_norm",), None, EVAL_BATCH_NORM), Step(("relu",)))),
          )),
    Motif("conv-unary", "inductor fx_passes/mkldnn_fusion.py _register_unary_fusion (convolution + relu, gelu, "
          "silu, tanh, sigmoid, hardswish)", (
              Variant("activation", "conv2d", (ACTIVATION,)),
          )),
    Motif("conv-binary", "inductor fx_passes/mkldnn_fusion.py _register_binary_fusion (convolution + add of a "
          "tensor of its shape) and _register_binary_unary_fusion (+ relu)", (
              Variant("add", "conv2d", (_add("full"),)),
              Variant("add-relu", "conv2d", (_add("full"), Step(("relu",)))),
          )),
    Motif("conv-scale", "inductor fx_passes/binary_folding.py: convolution followed by mul or add of a "
          "per-channel or scalar constant, folded into its weight and bias", (
              Variant("runtime-mul", "conv2d", (_mul("channel"),)),
              Variant("runtime-add", "conv2d", (_add("channel"),)),
              Variant("constant-scale", "conv2d", (SCALE,)),
          )),
    Motif("conv-attention", "a vision transformer's patch embedding: conv2d -> flatten -> transpose to "
          "(N, HW, C) -> scaled_dot_product_attention (layout propagation into the sdpa kernel)", (
              Variant("sdpa", "conv2d", (Step(("flatten",), None, {"start_dim": 2, "end_dim": -1}),
                                         Step(("transpose",), None, {"dim0": 1, "dim1": 2}),
                                         Step(("scaled_dot_product_attention",)))),
          )),
)
VARIANTS = tuple((motif, variant) for motif in MOTIFS for variant in motif.variants)


def region(motif: Motif, variant: Variant) -> str:
    return f"{PREFIX}{motif.name}/{variant.name}"


# ---- drawing ------------------------------------------------------------------------------------
# A head: (its op, how a builder (fuzzer/drawing/generate.py's _Builder) adds it at sizes m, k, n).

def _sizes(builder) -> tuple[int, int, int]:
    """M, K, N: the regime's contraction dims where it has them, else small dims of 2 or more (a
    column bias of one row is a row bias)."""
    sizes = builder.regime.contraction_dims or tuple(d for d in DIMS if d >= 2)
    return tuple(builder.draw(st.sampled_from(sizes)) for _ in range(3))


def _matmul_head(builder, attrs):
    m, k, n = _sizes(builder)
    return builder.try_add("matmul", builder.new_input((m, k)), {}, [builder.new_input((k, n))])


def _linear_head(builder, attrs):
    m, k, n = _sizes(builder)
    return builder.try_add("linear", builder.new_input((m, k)), {"out_features": n, "bias": builder.draw(st.booleans()), **attrs})


def _bmm_head(builder, attrs):
    m, k, n = _sizes(builder)
    batch = builder.draw(st.sampled_from((1, 2, 3)))
    return builder.try_add("bmm", builder.new_input((batch, m, k)), {}, [builder.new_input((batch, k, n))])


def _conv2d_head(builder, attrs):
    cin, cout, side = _sizes(builder)
    shape = (builder.draw(st.sampled_from((1, 2))), cin, side, side)
    conv = builder.ops["conv2d"]
    if not conv.accepts(shape):
        return None
    return builder.try_add("conv2d", builder.new_input(shape), {**conv.draw_attrs(builder.draw, [shape]), "groups": 1, "out_channels": cout})


def _scores_head(builder, attrs):
    """q @ k^T as models write attention: q (B, L, D), k (B, S, D) transposed."""
    length, width, keys = _sizes(builder)
    batch = builder.draw(st.sampled_from((1, 2)))
    k_t = builder.try_add("transpose", builder.new_input((batch, keys, width)), {"dim0": 1, "dim1": 2})
    return k_t and builder.try_add("matmul", builder.new_input((batch, length, width)), {}, [k_t])


HEADS = {"matmul": ("matmul", _matmul_head), "linear": ("linear", _linear_head), "bmm": ("bmm", _bmm_head),
         "conv2d": ("conv2d", _conv2d_head), "scores": ("matmul", _scores_head)}


def head_op(variant: Variant) -> str:
    return HEADS[variant.head][0]


def _step_ops(step: Step, ops) -> list[str]:
    return [name for name in step.ops if name in ops]


def buildable(variant: Variant, ops) -> bool:
    """Can a campaign of `ops` build `variant`: its head and an op of each step (mm + mm: matmul)?"""
    needed = [head_op(variant)] + ["matmul" for step in variant.steps if step.operand == "product"]
    return all(name in ops for name in needed) and all(_step_ops(step, ops) for step in variant.steps)


def declared(ops) -> list[str]:
    """The region keys of the variants a campaign of `ops` can build."""
    return [f"{head_op(variant)}:{region(motif, variant)}" for motif, variant in VARIANTS if buildable(variant, ops)]


def find(region_key: str) -> Variant | None:
    """The variant a key `HEAD:motif=NAME/VARIANT` names; None for any other key."""
    _, _, name = region_key.partition(":")
    return next((variant for motif, variant in VARIANTS if region(motif, variant) == name), None)


def _continue(builder, variant: Variant, value: str) -> str | None:
    """The variant's steps after its head `value`; None where a step does not fit (its nodes so far stay)."""
    for step in variant.steps:
        op = builder.draw(st.sampled_from(_step_ops(step, builder.ops)))
        shape = builder.shapes[value]
        others = None
        if step.operand == "product":
            m, k = shape[-2], builder.draw(st.sampled_from(DIMS))
            other = builder.try_add("matmul", builder.new_input((*shape[:-2], m, k)), {}, [builder.new_input((*shape[:-2], k, shape[-1]))])
            if other is None:
                return None
            others = [other]
        elif step.operand is not None:
            others = [builder.new_input(OPERANDS[step.operand](shape))]
        value = builder.try_add(op, value, dict(step.attrs) if step.attrs is not None else None, others)
        if value is None:
            return None
    return value


def start(builder, variant: Variant | None = None) -> str | None:
    """A graph's start: `variant` (a steered key's), else a motif drawn uniformly among those the
    campaign's ops can build, then one of its variants; None where none can be built or its head
    does not fit."""
    if variant is None:
        motifs = [m for m in MOTIFS if any(buildable(v, builder.ops) for v in m.variants)]
        if not motifs:
            return None
        motif = builder.draw(st.sampled_from(motifs))
        variant = builder.draw(st.sampled_from([v for v in motif.variants if buildable(v, builder.ops)]))
    head = HEADS[variant.head][1](builder, variant.head_attrs)
    return head and (_continue(builder, variant, head) or builder.nodes[-1].name)


def splice(builder, head: str) -> str:
    """The big-contraction regime's contraction `head` continued as a motif's head, in half its
    graphs, by a variant drawn among those with that head (and its fixed attributes); `head` itself
    otherwise."""
    node = builder.nodes[-1]
    fitting = [v for _, v in VARIANTS if head_op(v) == node.op and v.head_attrs.items() <= node.attrs.items()
               and buildable(v, builder.ops)]
    if not fitting or not builder.draw(st.booleans()):
        return head
    return _continue(builder, builder.draw(st.sampled_from(fitting)), head) or builder.nodes[-1].name


# ---- matching -----------------------------------------------------------------------------------

def matched(graph, shapes: dict) -> dict[str, set[str]]:
    """Per head node name: the motif regions (`motif=NAME/VARIANT`) whose chain follows it in `graph`
    (`shapes`: every value's shape, ir.infer_shapes)."""
    readers: dict[str, list] = {}
    for node in graph.nodes:
        for name in dict.fromkeys(node.inputs):
            readers.setdefault(name, []).append(node)
    producers = {node.name: node.op for node in graph.nodes}

    def fits(step: Step, node, value: str) -> bool:
        if node.op not in step.ops or (step.attrs and not step.attrs.items() <= node.attrs.items()):
            return False
        others = [name for name in node.inputs if name != value]
        if step.operand is None:
            return True
        wanted = OPERANDS[step.operand](tuple(shapes[value]))
        return any(tuple(shapes[o]) == wanted and (step.operand != "product" or producers.get(o) == "matmul") for o in others)

    def follows(steps: tuple[Step, ...], value: str) -> bool:
        return not steps or any(fits(steps[0], node, value) and follows(steps[1:], node.name) for node in readers.get(value, ()))

    found: dict[str, set[str]] = {}
    for node in graph.nodes:
        for motif, variant in VARIANTS:
            if (head_op(variant) == node.op and variant.head_attrs.items() <= node.attrs.items()
                    and follows(variant.steps, node.name)):
                found.setdefault(node.name, set()).add(region(motif, variant))
    return found

