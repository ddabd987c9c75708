"""The two kinds of failure: the user's input is wrong, or we have a bug."""


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
