"""The two kinds of failure: the user's input is wrong, or we have a bug; the text of errors, and the
errors that leave a device unusable."""

import contextlib
import difflib
import errno
import os
import re


class UserError(Exception):
    """Bad input from the user: one sentence saying what is wrong and what to do.

    The CLI prints the message alone and exits with status 2.
    """

    exit_code = 2


def did_you_mean(name: str, choices) -> str:
    """' (did you mean 'relu'?)' for the closest of `choices` to a mistyped `name`; '' when none is close."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


class InternalError(Exception):
    """An invariant of ours was broken: a bug in the fuzzer, never the user's fault."""


class ForeignError(Exception):
    """An error raised in another process, carrying that error's own text ("Type: message"),
    which is what findings show and signatures are made of."""


class OpUnsupported(Exception):
    """A backend cannot run an op of this case (an older release lacks the API it needs):
    that backend gives no verdict on the case, and it is not a finding."""


@contextlib.contextmanager
def documented_gaps(gaps: tuple[str, ...]):
    """Turns an error that says one of `gaps` (phrases of a framework's documented limitations, each
    declared with its reason where it is used) into OpUnsupported with the line that says it."""
    try:
        yield
    except Exception as exc:  # eager raises its own error; a compile wraps it in one of dynamo's
        line = next((line for line in str(exc).splitlines() if any(gap in line for gap in gaps)), None)
        if line is None:
            raise
        raise OpUnsupported(line.strip()) from None


class OutsideDomain(ValueError):
    """An op's reference refuses the case's values, as the op itself does (a derived op whose torch run checks
    them: gaussian_nll_loss's negative var). The case is invalid: no finding, and no bug of ours."""


class IllTyped(Exception):
    """The graph applies an op to a value of a dtype it does not take (or, for an op whose exact reference is torch's
    eager run, to values torch refuses there): no backend is judged on it. Here, below the ops and the oracle, since
    both raise it."""


class ShapeError(ValueError):
    """An op cannot accept these attributes / input shapes (raised by shape rules)."""


# Errors that leave a process's device context unusable: CUDA makes them sticky, so every later
# call in the process fails with the same error, whatever it runs (the CUDA runtime API's list).
# torch raises them as `RuntimeError` or `torch.AcceleratorError: CUDA error: <description>`
# (triton: `Triton Error [CUDA]: <description>`), jax/XLA as `INTERNAL: ... CUDA_ERROR_<NAME>:
# <description>`, so the descriptions and both spellings of the names are matched.
_STICKY_DEVICE_ERROR = re.compile(
    r"an illegal memory access was encountered|misaligned address|device-side assert triggered"
    r"|unspecified launch failure|an illegal instruction was encountered|hardware stack error|invalid program counter"
    r"|operation not supported on global/shared address space|the launch timed out and was terminated"
    r"|uncorrectable ECC error encountered"
    r"|cudaError(?:IllegalAddress|MisalignedAddress|Assert|LaunchFailure|IllegalInstruction|HardwareStackError"
    r"|InvalidPc|InvalidAddressSpace|LaunchTimeout|ECCUncorrectable)"
    r"|CUDA_ERROR_(?:ILLEGAL_ADDRESS|MISALIGNED_ADDRESS|ASSERT|LAUNCH_FAILED|ILLEGAL_INSTRUCTION|HARDWARE_STACK_ERROR"
    r"|INVALID_PC|INVALID_ADDRESS_SPACE|LAUNCH_TIMEOUT|ECC_UNCORRECTABLE)"
    # Not the device but the process: a torch.compile trace of torch.func.jvp that raised left its forward-mode
    # level open (torch 2.11 CUDA), and every later jvp in the process fails alike.
    r"|Nested forward mode AD is not supported at the moment")


# "No space left on device", "Disk quota exceeded": a write that failed for want of room, not of a bug.
FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def fills_disk(error_text: str) -> bool:
    """Did this error (a backend's, as text) come from a write that found its disk full?"""
    return any(f"[Errno {number}]" in error_text or os.strerror(number) in error_text for number in FULL_DISK_ERRNOS)


class DiskFull(UserError):
    """Raised in a worker when a backend's run failed on a full disk (fills_disk): no finding of the
    backend, and every later write would fail alike, so the request ends with this one sentence."""

    def __init__(self, backend: str, error: str):
        super().__init__(f"{backend} could not write a file: its disk is full ({error_headline(error)[:200]}); free some "
                         "space and run again (a campaign continues with `fuzz run --resume ID`).")


def poisons_device(error_text: str) -> bool:
    """Does this error leave the process that raised it unable to use its device again?"""
    return bool(_STICKY_DEVICE_ERROR.search(error_text))


class DevicePoisoned(Exception):
    """Raised in a worker when a backend's error poisons its device context (poisons_device): every
    later run there would fail alike, and be taken for findings. The worker ends; its parent
    starts a fresh one and re-runs the work there (fuzzer/running/workers.py, fuzzer/running/campaign.py).
    `source`: the pipeline.CaseSource (as a list) of the case; `culprit`: the op whose node alone
    poisoned the device, where a recheck ran the nodes alone (Pipeline.recheck)."""

    def __init__(self, backend: str, error: str, source: list | None = None, culprit: str = "-"):
        super().__init__(error)
        self.backend, self.error, self.source, self.culprit = backend, error, source, culprit

    def reply(self) -> tuple:
        """The worker's message to its parent."""
        return ("poisoned", self.backend, self.error, self.source, self.culprit)


def error_headline(text: str) -> str:
    """The first line of an error ("Type: message"): later lines are context, such as the
    "Set TORCH_LOGS=..." advice that ends every dynamo error. Where dynamo wraps the op's own
    error, the wrapped error joins the headline: the wrapper alone names no cause, and every op's
    failure would share it. Two wrappers: "RuntimeError when making fake tensor call", then "...: got
    ValueError('Cannot view a tensor ...')" on a later line; and a compiler's "BackendCompilerFailed:
    backend='inductor' raised:", the error it raised on the next line (GuardOnDataDependentSymNode, an
    AssertionError, a lowering's own message: as many bugs as causes)."""
    if not text or not text.strip():
        return ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if lines[0].rstrip().endswith(" raised:") and len(lines) > 1:
        return f"{lines[0].rstrip()} {lines[1].strip()}"
    wrapped = _DYNAMO_WRAPPED.search(text) if "making fake tensor call" in lines[0] else None
    return f"{lines[0]}: {wrapped.group(1)}" if wrapped else lines[0]


_DYNAMO_WRAPPED = re.compile(r"\): got (\w+\(.*?\))$", re.MULTILINE)


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
