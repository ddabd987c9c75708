"""Every value an op's declaration can draw is drawn, in graphs drawn the way campaigns draw them.

An op declares its attributes as the hypothesis strategies its `draw_attrs` / `draw_operands`
draw from (`fuzzer/ops/*.py`, through `fuzzer.ops._common.st`). While the sample below is drawn,
that `st` notes the values each strategy it makes can give (a short integer range, `sampled_from`,
`booleans`, `lists` of those), and each op's draw functions get a draw that records, for every
draw, the op, the declaration line that drew (with the helper lines in between, e.g. conv's
stride drawn through `per_dim`), those possible values and the value drawn. Nothing is replaced:
the op's own code draws from hypothesis as in a campaign; the test only watches.

A value is *expected* at a line when uniform draws over its possible values would have given it
at least EXPECTED_HITS times there (summed over draws with different ranges, e.g. a dim of ranks
2 to 5); every expected value must have been drawn at least once. hypothesis 6.130 to 6.169
never draw the top of a short integer range from seeded bytes (`st.integers(1, 2)` is always 1,
`st.integers(-4, 3)` never negative), which fails this test; so does a new op whose declaration
can draw a value it never does.
"""

from __future__ import annotations

import os
import random
import sys
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hypothesis_strategies

import fuzzer.drawing.generate as generate
from fuzzer.drawing.generate import weak_hypothesis_warning
from fuzzer.ops import _common, registry
from fuzzer.running.pipeline import seed_for

SEED = 0
# Each op's graphs (`fuzz run --ops OP`) are drawn until the op drew its attributes this often,
DRAWS_PER_OP = 120
MAX_GRAPHS_PER_OP = 150  # or this many graphs were drawn (conv3d: rank-5 inputs are rare),
NOTHING_TRACKED_AFTER = 20  # or it drew this often without a tracked draw (relu: nothing to check).
# A value uniform draws would give this often must appear (missed by chance: e^-17): 7 choices
# at one line are all checked in DRAWS_PER_OP draws.
EXPECTED_HITS = 17
WIDEST_RANGE = 64  # integer ranges wider than this (roll shifts, gather indices) are not tracked
OPS_FOLDER = str(Path(_common.__file__).parent)
# Attributes that name a dim of the input: each op taking one must draw it negative too.
DIM_ATTRIBUTES = ("dim", "dims", "dim0", "dim1", "start_dim", "end_dim", "perm")


def possible_values(factory: str, args: tuple, kwargs: dict) -> dict[str, float] | None:
    """{repr of a value: its probability under a uniform draw} for the strategy
    `st.<factory>(*args, **kwargs)`; None where that set is not small and finite."""
    if factory == "booleans":
        return {"False": 0.5, "True": 0.5}
    if factory == "integers":
        low, high = (*args, *(kwargs[k] for k in ("min_value", "max_value") if k in kwargs))
        if high - low >= WIDEST_RANGE:
            return None
        return {repr(v): 1 / (high - low + 1) for v in range(low, high + 1)}
    if factory == "sampled_from":
        elements = list(args[0])
        return {value: count / len(elements) for value, count in Counter(map(repr, elements)).items()}
    return None


class Tag(NamedTuple):
    strategy: object  # kept alive here, so that its id is never reused for another strategy
    values: dict[str, float]  # possible_values
    per_element: bool  # a list strategy: each element is one draw from `values`


class DrawLog:
    """What the ops drew: per (op, declaration site), each value's expected count and draws."""

    def __init__(self):
        self.tags: dict[int, Tag] = {}  # by id(strategy)
        self.expected: dict[tuple, Counter] = defaultdict(Counter)
        self.drawn: dict[tuple, Counter] = defaultdict(Counter)
        self.attrs: dict[str, list[dict]] = defaultdict(list)  # op -> every attribute dict it drew
        self.tracked_ops: set[str] = set()  # ops that drew from a tagged strategy

    def make_strategy(self, factory: str):
        """st.<factory>, noting the possible values of what it makes."""
        make = getattr(hypothesis_strategies, factory)

        def tagged(*args, **kwargs):
            strategy = make(*args, **kwargs)
            elements = self.tags.get(id(args[0])) if factory == "lists" else None
            if elements is not None and not elements.per_element:
                self.tags[id(strategy)] = Tag(strategy, elements.values, per_element=True)
            elif values := possible_values(factory, args, kwargs):
                self.tags[id(strategy)] = Tag(strategy, values, per_element=False)
            return strategy

        return tagged

    def watching(self, op_name: str, draw):
        """`draw`, recording every draw of a tagged strategy for `op_name`."""

        def recorded(strategy):
            value = draw(strategy)
            tag = self.tags.get(id(strategy))
            if tag is not None and tag.strategy is strategy:
                key = (op_name, declaration_site(sys._getframe(1)))
                self.tracked_ops.add(op_name)
                for item in value if tag.per_element else [value]:
                    self.expected[key].update(tag.values)
                    self.drawn[key][repr(item)] += 1
            return value

        return recorded

    def watched(self, op):
        """`op` with draw functions that record through `watching`."""

        def draw_attrs(draw, shapes):
            attrs = op.draw_attrs(self.watching(op.name, draw), shapes)
            self.attrs[op.name].append(attrs)
            return attrs

        def draw_operands(draw, first, attrs):
            return op.draw_operands(self.watching(op.name, draw), first, attrs)

        return replace(op, draw_attrs=draw_attrs, draw_operands=op.draw_operands and draw_operands)

    def drawn_enough(self, op_name: str) -> bool:
        draws = len(self.attrs[op_name])
        return draws >= DRAWS_PER_OP or (draws >= NOTHING_TRACKED_AFTER and op_name not in self.tracked_ops)

    def never_drawn(self) -> list[str]:
        """One line per (op, site) with an expected value that was never drawn."""
        lines = []
        for key, expected in sorted(self.expected.items()):
            missing = [value for value, count in expected.items() if count >= EXPECTED_HITS and not self.drawn[key][value]]
            if missing:
                op_name, site = key
                counts = ", ".join(f"{v} ({self.drawn[key][v]})" for v in sorted(self.drawn[key]))
                lines.append(f"{op_name} at {site}: never drew {', '.join(missing)} "
                             f"(expected ~{min(expected[v] for v in missing):.0f} times); drew {counts}")
        return lines


def declaration_site(frame) -> str:
    """The op-declaration lines on the stack, innermost first: 'conv.py:35 per_dim < conv.py:105 _draw_conv'."""
    lines = []
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == OPS_FOLDER:
        lines.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} {frame.f_code.co_name}")
        frame = frame.f_back
    return " < ".join(lines)


def draw_graphs(op_name: str, log: DrawLog) -> None:
    """Graphs of `fuzz run --seed SEED --ops OP` until the op has drawn enough: the bytes of
    seed_for's stream (fuzzer/running/pipeline.py) fed to the graph strategy as CaseGenerator feeds them
    (fuzzer/drawing/generate.py), without drawing arrays (a case draws its graph first). A draw the
    generator rejects moves on to the next seed, where CaseGenerator would retry from the same
    one. Graphs of one op draw each op as often as the others; in the default campaign's mix,
    conv3d, where_threshold or argmax come once in hundreds of graphs."""

    @settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(generate.graphs((op_name,)))
    def draw_one(graph):
        pass

    for index in range(MAX_GRAPHS_PER_OP):
        if log.drawn_enough(op_name):
            return
        draw_one.hypothesis.fuzz_one_input(random.Random(seed_for(SEED, index)).randbytes(generate.CaseGenerator.BUFFER_BYTES))


@pytest.fixture(scope="module")
def draw_log():
    log = DrawLog()
    ops = {name: log.watched(op) for name, op in registry().items()}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_common._Strategies, "__getattr__", lambda self, factory: log.make_strategy(factory))
        patch.setattr(generate, "get_op", lambda name: ops[name])
        for name in sorted(ops):
            draw_graphs(name, log)
    return log


@pytest.mark.slow
def test_every_op_is_drawn_often_enough_to_judge(draw_log):
    """An op drawn this rarely has inputs the generator seldom makes: too few draws to judge its values."""
    short = {name: len(draw_log.attrs[name]) for name in registry() if len(draw_log.attrs[name]) < NOTHING_TRACKED_AFTER}
    assert not short, f"ops drawn fewer than {NOTHING_TRACKED_AFTER} times in {MAX_GRAPHS_PER_OP} single-op graphs: {short}"


@pytest.mark.slow
def test_every_declared_attribute_value_is_drawn(draw_log):
    assert draw_log.expected, "no draw was recorded: the ops no longer draw through fuzzer.ops._common.st"
    missing = draw_log.never_drawn()
    assert not missing, "declared values never drawn:\n" + "\n".join(missing)


@pytest.mark.slow
def test_every_dim_attribute_is_drawn_negative_and_non_negative(draw_log):
    """torch and jax take negative dims on other code paths (normalization, view logic); each
    op that takes a dim draws both spellings."""
    one_sided = []
    for name, drawn in sorted(draw_log.attrs.items()):
        for attribute in DIM_ATTRIBUTES:
            dims = [d for attrs in drawn for d in _as_list(attrs.get(attribute))]
            if dims and not (min(dims) < 0 <= max(dims)):
                one_sided.append(f"{name}.{attribute}: drew only {sorted(set(dims))}")
    assert not one_sided, "\n".join(one_sided)


def _as_list(value) -> list[int]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def test_a_hypothesis_release_whose_seeded_draws_miss_values_gets_a_one_sentence_warning():
    sentence = weak_hypothesis_warning("6.155.2")
    assert sentence.endswith(".") and ". " not in sentence
    assert "6.155.2" in sentence and "pip install 'hypothesis>=6.170'" in sentence
    for good in ("6.120.0", "6.170.17", "7.0"):
        assert weak_hypothesis_warning(good) is None


@pytest.mark.slow
def test_every_op_draws_exactly_the_attributes_it_declares(draw_log):
    """A graph read from a file is held to an op's declared `attrs` (fuzzer/ir.py): every attribute an op
    draws is declared, every declared one is drawn, and one without "?" every time."""
    wrong = []
    for name, op in sorted(registry().items()):
        drawn = draw_log.attrs[name]
        assert op.attrs is not None, f"{name} declares no attrs"
        seen = set().union(*map(set, drawn)) if drawn else set()
        always = set.intersection(*map(set, drawn)) if drawn else set()
        if seen != op.taken_attrs() or not op.required_attrs() <= always:
            wrong.append(f"{name}: declares {op.attrs}, drew {sorted(seen)} ({sorted(always)} every time)")
    assert not wrong, "\n".join(wrong)
