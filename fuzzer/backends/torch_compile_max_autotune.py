"""torch.compile with mode="max-autotune-no-cudagraphs": inductor benchmarks Triton (and
cuBLAS/ATen) kernel choices for matmuls and convolutions and keeps the fastest, so the
kernels run are other kernels than torch.compile's default picks. CUDA only."""

from __future__ import annotations

from fuzzer.backends.torch_compile import TorchCompile


class TorchCompileMaxAutotune(TorchCompile):
    kind = "torch-compile-max-autotune"
    description = "torch.compile (inductor), mode='max-autotune-no-cudagraphs', whole graph (CUDA only)"
    compile_mode = "max-autotune-no-cudagraphs"

    def unavailable_reason(self) -> str | None:
        if self.device != "cuda":
            return "max-autotune tunes GPU kernels, so this kind runs on CUDA only: name it torch-compile-max-autotune:cuda."
        return super().unavailable_reason()


BACKENDS = [TorchCompileMaxAutotune]
