"""torch.compile with inductor's batch_invariant=True: f(x)[:k] promised bitwise equal to f(x[:k]).
Its agreeing verdicts are judged against that promise where the release documents it
(fuzzer/judging/contract_scope.json: Triton kernels, not the CPU's; not yet reductions or library kernels)."""

from __future__ import annotations

from fuzzer.backends.torch_compile_contract import ContractCompile


class TorchCompileBatchInvariant(ContractCompile):
    kind = "torch-compile-batch-invariant"
    description = "torch.compile (inductor) with batch_invariant=True: f(x)[:k] == f(x[:k]) bitwise, judged so where documented"
    compile_options = {"batch_invariant": True}
    contract = "batch-invariance"
    reproducer_resizes_batch = True  # its script calls `graph` on the first rows too: no shape written in


BACKENDS = [TorchCompileBatchInvariant]
