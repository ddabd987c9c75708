"""JSON forms of records read back exactly as they were written.

A record's `to_dict()` is its JSON form and `from_dict()` reads it. A dict another release
wrote (or a person, in a regression file) may lack keys this release has, or carry keys it does
not know; the corpus stores imported and merged findings as they came. So a record made by
`from_dict(data)` remembers `data`, and `to_dict()` gives it back key for key, in its order:
a key it lacked stays absent while its field holds the default, an unknown key is kept, and a
field changed since (or a record made anew, e.g. by `dataclasses.replace`) is written as it is now.
This module imports nothing of the fuzzer, so every record type can use it.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any, TypeVar

_READ_FROM = "_read_from"  # an instance attribute, not a field: equality, repr and replace ignore it

T = TypeVar("T")


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
