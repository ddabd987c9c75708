"""One cause, one bucket: errors.normalize_error gives real torch and jax errors of one cause the
same text whatever the shapes, ranks, sizes, numbers and addresses they name."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
import torch
import torch.nn.functional as F

from fuzzer.errors import error_headline, normalize_error, poisons_device


def raised(call) -> str:
    """The error `call` raises, as a finding keeps it ("Type: message")."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - any framework error is the subject here
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError("it did not raise")


@pytest.mark.parametrize("first, second, normalized", [
    (lambda: F.layer_norm(torch.ones(2, 3), (4,)), lambda: F.layer_norm(torch.ones(2, 3, 5), (6, 7)),
     "RuntimeError: Given normalized_shape=[...], expected input with shape [...], but got input of size[...]"),
    (lambda: torch.ones(2, 3) @ torch.ones(4, 5), lambda: F.linear(torch.ones(7, 3), torch.ones(4, 5)),
     "RuntimeError: matN and matN shapes cannot be multiplied (NxN and NxN)"),
    (lambda: torch.ones(6).view(7), lambda: torch.ones(2, 3, 4).view(5, 7),
     "RuntimeError: shape '[...]' is invalid for input of size N"),
    (lambda: F.conv2d(torch.ones(1, 2, 5, 5), torch.ones(4, 3, 3, 3)),
     lambda: F.conv2d(torch.ones(2, 2, 6, 6), torch.ones(4, 5, 3, 3)),
     "RuntimeError: Given groups=N, weight of size [...], expected input[...] to have N channels, but got N channels instead"),
    (lambda: torch.ones(2, 3) + torch.ones(4), lambda: torch.ones(2, 3, 5) + torch.ones(4),
     "RuntimeError: The size of tensor a (...) must match the size of tensor b (...) at non-singleton dimension N"),
    (lambda: jnp.ones((2, 3)).reshape(7, 1), lambda: jnp.ones((2, 3, 4)).reshape(5, 7),
     "TypeError: cannot reshape array of shape (...) (size N) into shape (...) (size N)"),
], ids=["layer_norm-rank-2-and-3", "matmul", "view", "conv2d", "broadcast", "jax-reshape"])
def test_one_cause_of_any_rank_and_size_gives_one_text(first, second, normalized):
    texts = raised(first), raised(second)
    assert texts[0] != texts[1]
    assert normalize_error(texts[0]) == normalize_error(texts[1]) == normalized


def test_addresses_paths_and_numbers_are_dropped_and_calls_kept():
    assert (normalize_error("RuntimeError: bad stride 1e-05 at 0x7f3a9c00 in /usr/lib/libtorch.so\n  more context")
            == "RuntimeError: bad stride N at <addr> in <path>")
    assert normalize_error("RuntimeError: input.dim() = 3 is not equal to len(dims) = 2") == \
        "RuntimeError: input.dim() = N is not equal to len(dims) = N"
    assert normalize_error("ValueError: got () and (3,) and size[]") == "ValueError: got (...) and (...) and size[...]"
    text = "RuntimeError: view size is not compatible with input tensor's size and stride. Use .reshape(...) instead."
    assert normalize_error(normalize_error(text)) == normalize_error(text) == text, "normalizing twice changes nothing"


# Texts as torch, triton and jax/XLA raise them (their issue trackers), and errors that leave the device usable.
@pytest.mark.parametrize("text, sticky", [
    ("torch.AcceleratorError: CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be "
     "asynchronously reported at some other API call, so the stacktrace below might be incorrect.", True),
    ("RuntimeError: CUDA error: misaligned address\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.", True),
    ("RuntimeError: CUDA error: device-side assert triggered", True),
    ("RuntimeError: CUDA error: unspecified launch failure", True),
    ("RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered", True),
    ("XlaRuntimeError: INTERNAL: Failed to launch CUDA kernel: fusion_1 with block dimensions: 160x1x1: "
     "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered", True),
    ("XlaRuntimeError: INTERNAL: CUDA error: Could not synchronize CUDA stream: CUDA_ERROR_MISALIGNED_ADDRESS", True),
    ("RuntimeError: cudaErrorIllegalAddress", True),
    # a compiled jvp's failed trace left its forward-mode level open: every later jvp in the process fails
    ("torch._dynamo.exc.InternalTorchDynamoError: RuntimeError: Nested forward mode AD is not supported at the moment", True),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", False),
    ("RuntimeError: CUDA error: invalid configuration argument", False),
    ("RuntimeError: CUDA error: too many resources requested for launch", False),
    ("RuntimeError: shape '[2, 3]' is invalid for input of size 7", False),
])
def test_errors_that_leave_the_device_unusable_are_told_apart(text, sticky):
    assert poisons_device(text) is sticky


def test_a_dynamo_fake_tensor_failure_is_named_by_the_error_it_wraps():
    # The wrapper's headline is the same for every op that fails under fake tensors; the wrapped
    # error names the cause (torch-compile:cpu case 196 of the 2026-11-25 1-hour campaign).
    def wrapped(inner: str) -> str:
        return ("torch._dynamo.exc.TorchRuntimeError: RuntimeError when making fake tensor call\n"
                "  Explanation: Dynamo failed to run FX node with fake tensors: call_function <function f at 0x7f4a>"
                f"(*(FakeTensor(..., size=(1, 2)),), **{{}}): got {inner}\n  Hint: Your code may result in an error")
    view = normalize_error(wrapped("ValueError('Cannot view a tensor with shape torch.Size([1, 2]) and strides (2, 1)!')"))
    index = normalize_error(wrapped("IndexError('Dimension out of range (expected to be in range of [-2, 1], but got 3)')"))
    assert "Cannot view a tensor" in view and "Dimension out of range" in index and view != index
    assert error_headline("RuntimeError: plain\n  context") == "RuntimeError: plain"


def test_a_compiler_failure_is_named_by_the_error_the_compiler_raised():
    # Every inductor failure begins "BackendCompilerFailed: backend='inductor' raised:", the cause on the next
    # line: one bucket per op for every cause until the cause joined the headline (a known-bug entry of
    # sub_'s data-dependent guard swallowed every other compile crash of sub_).
    def failed(cause: str) -> str:
        return (f"torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n{cause}\n\n"
                "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace")
    guard = normalize_error(failed("GuardOnDataDependentSymNode: Could not guard on data-dependent expression Ne(zuf0, 1.0)"))
    view = normalize_error(failed("ValueError: Cannot view a tensor with shape torch.Size([2, 5]) and strides (1, 2)"))
    assert guard.startswith("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: GuardOnDataDependentSymNode")
    assert "Cannot view a tensor" in view and guard != view
    assert error_headline("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:") == \
        "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:"
