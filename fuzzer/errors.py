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


def normalize_error(text: str) -> str:
    """An error's headline without numbers, addresses or paths, for dedup."""
    first = error_headline(text)
    first = re.sub(r"0x[0-9a-fA-F]+", "<addr>", first)
    first = re.sub(r"(/[\w.\-]+)+", "<path>", first)
    first = re.sub(r"\d+", "N", first)
    return first[:160]
