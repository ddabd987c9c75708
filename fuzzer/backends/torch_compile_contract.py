"""What the inductor kinds that promise bits share (torch-compile-strict, torch-compile-batch-invariant):
their setting patched around every compile and run (and into the reproducer, by TorchCompile), a
release without the setting refused in one sentence, and the contract their agreeing verdicts are
judged against (fuzzer/judging/contracts.py)."""

from __future__ import annotations

from typing import ClassVar

from fuzzer.backends.torch_compile import TorchCompile
from fuzzer.judging.contracts import contract


class ContractCompile(TorchCompile):
    contract: ClassVar[str] = ""  # a name in fuzzer/judging/contract_scope.json
    # No programs (`runs_programs` is not inherited): a contract compares whole runs of a pure graph.

    def unavailable_reason(self) -> str | None:
        reason = super().unavailable_reason()
        if reason:
            return reason
        import torch
        import torch._inductor.config

        setting = next(iter(self.compile_options))
        if not hasattr(torch._inductor.config, setting):
            terms = contract(self.contract)
            return (f"inductor's {setting} setting ({terms.title}) was added in torch {terms.added_in}; "
                    f"this torch is {torch.__version__}.")
        return None
