"""JSON forms of records read back exactly as they were written.

A record's `to_dict()` is its JSON form and `from_dict()` reads it. A dict another release
wrote (or a person, in a regression file) may lack keys this release has, or carry keys it does
not know; the corpus stores imported and merged findings as they came. So a record made by
`from_dict(data)` remembers `data`, and `to_dict()` gives it back key for key, in its order:
a key it lacked stays absent while its field holds the default, an unknown key is kept, and a
field changed since (or a record made anew, e.g. by `dataclasses.replace`) is written as it is now.
Text from outside is read with `unique_keys`: an object giving a key twice is refused, not read as its last.
This module imports nothing of the fuzzer, so every record type can use it.

Non-finite numbers. Strict JSON parsers (JavaScript's JSON.parse, Go's encoding/json) refuse the
`NaN` and `Infinity` tokens Python writes by default, so every JSON text the fuzzer writes (`--json`
outputs, exported cases and regression files, the corpus's JSON columns) goes through `dumps`,
which writes a non-finite float as the string "nan", "inf" or "-inf". A reader turns such a string
back into the float where a number is expected (`number`; a record's float fields in `read`), and
text an older release wrote with the bare tokens still reads: Python's json accepts them. A string
field keeps the text: a norm's `p` attribute is the string "inf" and stays one.
"""

from __future__ import annotations

import dataclasses
import json
import math
from functools import cache
from typing import Any, TypeVar

_READ_FROM = "_read_from"  # an instance attribute, not a field: equality, repr and replace ignore it

T = TypeVar("T")

NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}  # the JSON form of each non-finite float


class DuplicateKey(ValueError):
    """A JSON object that gives one key twice: Python's json keeps the last silently, another parser
    the first, so the text means different things to different readers."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """json.loads's object_pairs_hook that refuses a key given twice in one object (DuplicateKey)."""
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        repeated = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise DuplicateKey(f"an object gives the key {repeated!r} twice")
    return data


def dumps(value: Any, **options: Any) -> str:
    """json.dumps for strict parsers: non-finite floats as "nan", "inf", "-inf" (never a bare NaN token)."""
    return json.dumps(finite_form(value), allow_nan=False, **options)


def finite_form(value: Any) -> Any:
    """`value` with every non-finite float in it (in dicts, lists and tuples) written as its string."""
    if isinstance(value, float):
        return value if math.isfinite(value) else ("nan" if math.isnan(value) else "inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: finite_form(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_form(item) for item in value]
    return value


def number(value: Any) -> Any:
    """A number read from JSON: "nan", "inf" or "-inf" as the float; anything else as it is."""
    return NON_FINITE.get(value, value) if isinstance(value, str) else value


def read(cls: type[T], data: dict) -> T:
    """The record of dataclass `cls` that `data` describes: its keys that are fields (a float field's
    "nan", "inf" or "-inf" as the float), remembering `data` for `written`."""
    names = {f.name for f in dataclasses.fields(cls)}
    return remember(cls(**{key: value for key, value in read_numbers(data, cls).items() if key in names}), data)


def read_numbers(data: Any, cls: type) -> Any:
    """A dict in `cls`'s JSON form with its float fields read as floats (a dict a person or another
    release wrote, kept as it is otherwise); anything else as it is."""
    if not isinstance(data, dict):
        return data
    return {key: number(value) if key in _float_fields(cls) else value for key, value in data.items()}


@cache
def _float_fields(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls) if f.type in (float, "float"))


def remember(record: T, data: dict) -> T:
    """`record`, made from `data`, remembering it for `written`."""
    object.__setattr__(record, _READ_FROM, dict(data))
    return record


def written(record: Any, current: dict) -> dict:
    """The JSON form of `record`: `current` (its fields, as this release writes them), or for a
    record made by from_dict, the dict it was read from with what changed since put in."""
    source = record.__dict__.get(_READ_FROM)
    if source is None:
        return current
    data = dict(source)
    defaults = _defaults(type(record))
    for key, value in current.items():
        if key in data:
            if not _same(data[key], value):
                data[key] = value
        elif key not in defaults or not _same(value, defaults[key]):
            data[key] = value
    return data


def _same(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b)


@cache
def _defaults(cls: type) -> dict:
    return {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
