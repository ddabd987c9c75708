"""A known bug's `error` pattern (fuzzer/triaging/known.py): a small subset of regular-expression syntax,
matched in time linear in the text, so that no registry entry can stall a campaign or an import.

Python's `re` backtracks: "(a+)+$" searched in 60 a's and a '!' never ends, and the registry is
data a pull request can change. The subset is what error texts need:

    literal text         any character but . ^ $ * + ? { } [ ] ( ) | and backslash
    \\ punctuation       that character itself ("\\(", "\\.", "\\ "): what re.escape writes
    .                    any one character
    .*                   any text, empty included
    ^ at the start, $ at the end of an alternative: anchored there
    |                    alternatives, at the top level only

It means what `re.search` means for the same pattern on one line (a normalized error is one).
Anything else (groups, classes, other quantifiers, "\\d") is refused when the registry is read,
in one sentence naming the entry.

Matching: an alternative is pieces of fixed length (with single-character wildcards) separated by
`.*`; taking each piece at its leftmost place after the previous one finds a match whenever one
exists, and never revisits a place: at most len(text) x len(pattern) character comparisons.
"""

from __future__ import annotations

from dataclasses import dataclass

SPECIAL = set(".^$*+?{}[]()|\\")
ANY = None  # a piece's character that '.' matches: any one


class UnsafePattern(ValueError):
    """What in a pattern is outside the subset (fuzzer/triaging/known.py names the entry)."""


@dataclass(frozen=True)
class _Alternative:
    pieces: tuple[tuple[str | None, ...], ...]  # at least one; separated by `.*` in the pattern
    at_start: bool
    at_end: bool

    def search(self, text: str) -> bool:
        position = 0
        last = len(self.pieces) - 1
        for index, piece in enumerate(self.pieces):
            only_at = 0 if index == 0 and self.at_start else None
            if index == last and self.at_end:
                start = len(text) - len(piece)
                return start >= position and only_at in (None, start) and _fits(piece, text, start)
            found = _find(piece, text, position, only_at)
            if found is None:
                return False
            position = found + len(piece)
        return True


def _fits(piece: tuple[str | None, ...], text: str, start: int) -> bool:
    return start + len(piece) <= len(text) and all(c is ANY or c == text[start + i] for i, c in enumerate(piece))


def _find(piece: tuple[str | None, ...], text: str, start: int, only_at: int | None) -> int | None:
    """The leftmost place at or after `start` (or only `only_at`) where `piece` fits in `text`."""
    if only_at is not None:
        return only_at if _fits(piece, text, only_at) else None
    if ANY not in piece:
        found = text.find("".join(piece), start)
        return None if found < 0 else found
    return next((place for place in range(start, len(text) - len(piece) + 1) if _fits(piece, text, place)), None)


@dataclass(frozen=True)
class ErrorPattern:
    text: str  # as the registry has it
    alternatives: tuple[_Alternative, ...]

    def search(self, text: str) -> bool:
        """Whether the pattern occurs in `text`, as `re.search(pattern, text)` would find it."""
        return any(alternative.search(text) for alternative in self.alternatives)


def compile_pattern(pattern: str) -> ErrorPattern:
    """The pattern, checked; UnsafePattern saying what is outside the subset (module docstring)."""
    alternatives, pieces, piece, index = [], [], [], 0
    at_start = at_end = False

    def close_alternative():
        nonlocal pieces, piece, at_start, at_end
        pieces.append(tuple(piece))
        if not any(pieces) and not (pieces == [()] and at_start and at_end):
            raise UnsafePattern("an alternative that matches every error")
        alternatives.append(_Alternative(tuple(pieces), at_start, at_end))
        pieces, piece, at_start, at_end = [], [], False, False

    while index < len(pattern):
        char = pattern[index]
        if at_end and char != "|":
            raise UnsafePattern(f"'$' before the end of an alternative, at character {index}")
        if char == "\\":
            escaped = pattern[index + 1:index + 2]
            if not escaped or escaped.isalnum():
                raise UnsafePattern(f"the escape '\\{escaped}' (only punctuation may follow a backslash)")
            piece.append(escaped)
            index += 2
            continue
        if char == "." and pattern[index + 1:index + 2] == "*":
            pieces.append(tuple(piece))
            piece = []
            index += 2
            continue
        if char == ".":
            piece.append(ANY)
        elif char == "^" and not pieces and not piece and not at_start:
            at_start = True
        elif char == "$":
            at_end = True
        elif char == "|":
            close_alternative()
        elif char in SPECIAL:
            raise UnsafePattern(f"'{char}' at character {index}")
        else:
            piece.append(char)
        index += 1
    close_alternative()
    return ErrorPattern(pattern, tuple(alternatives))
