"""The two kinds of failure: the user's input is wrong, or we have a bug; and the text of errors."""

import re


class UserError(Exception):
    """Bad input from the user: one sentence saying what is wrong and what to do.

    The CLI prints the message alone and exits with status 2.
    """

    exit_code = 2


class InternalError(Exception):
    """An invariant of ours was broken: a bug in the fuzzer, never the user's fault."""


class ForeignError(Exception):
    """An error raised in another process, carrying that error's own text ("Type: message"),
    which is what findings show and signatures are made of."""


class OpUnsupported(Exception):
    """A backend cannot run an op of this case (an older release lacks the API it needs):
    that backend gives no verdict on the case, and it is not a finding."""


class ShapeError(ValueError):
    """An op cannot accept these attributes / input shapes (raised by shape rules)."""


def error_headline(text: str) -> str:
    """The first line of an error ("Type: message"): later lines are context, such as the
    "Set TORCH_LOGS=..." advice that ends every dynamo error."""
    return text.strip().splitlines()[0] if text and text.strip() else ""


_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_PATH = re.compile(r"(/[\w.\-]+)+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")  # 3, 2.5, 1e-05; digits inside names too (float32)
_DIMS = re.compile(r"N(?: ?[x×] ?N)+")  # "2x3", "2 x 3 x 4"
_ITEM = r"\s*(?:[-+]?N|\*|\.\.\.|None|\?)?\s*"
_SEQUENCE = re.compile(rf"\((?:{_ITEM},)*{_ITEM}\)|\[(?:{_ITEM},)*{_ITEM}\]")  # "(2, 3)", "[*, 4]", "(3,)", "[]"


def _collapse_sequence(match: re.Match) -> str:
    """A shape, tuple or list of numbers, whatever its length, as "(...)" or "[...]"; an empty "()"
    right after a name is a call ("input.dim()"), kept."""
    text, start, found = match.string, match.start(), match.group(0)
    if found[0] == "(" and found[1:-1].strip() == "" and start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        return found
    return found[0] + "..." + found[-1]


def normalize_error(text: str) -> str:
    """An error's headline without numbers, shapes, addresses or paths, for dedup: one cause gives
    one text whatever the sizes and ranks it met ("(N, N)" and "(N, N, N)" are both "(...)")."""
    first = error_headline(text)
    first = _ADDRESS.sub("<addr>", first)
    first = _PATH.sub("<path>", first)
    first = _NUMBER.sub("N", first)
    first = _DIMS.sub("NxN", first)
    first = _SEQUENCE.sub(_collapse_sequence, first)
    return first[:160]
