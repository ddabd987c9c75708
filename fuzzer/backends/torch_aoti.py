"""torch.export of the nested nn.Module, compiled ahead of time by AOTInductor into a package
(torch._inductor.aoti_compile_and_package: generated C++ and a shared library, weights
included) and loaded back with aoti_load_package: the path a model takes to a C++ deployment.
Each case compiles its own package (its weights are in it): tens of seconds."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from fuzzer.backends.torch_compile import inductor_config, with_inductor_config
from fuzzer.backends.torch_module import ModuleBackend
from fuzzer.reproducers.op_source import Source


class TorchAOTInductor(ModuleBackend):
    kind = "torch-aoti"
    path = "torch/inductor"
    description = "torch.export -> AOTInductor (aoti_compile_and_package) -> aoti_load_package"
    expensive = True
    # Measured on this project's CPU machine: 21 s for a first, one-matmul model in a fresh
    # process, 7 s for each next one; a C++ compile of the whole graph per case.
    compile_weight = 3.0  # as torch-compile: inductor's seconds per structure
    compile_options: dict = {}  # inductor config patched around the AOT compile
    transform_imports = ("import os", "import tempfile")
    context_source = "torch.no_grad()"

    def unavailable_reason(self) -> str | None:
        reason = super().unavailable_reason()
        if reason:
            return reason
        import torch

        if not hasattr(torch._inductor, "aoti_compile_and_package"):
            return f"torch {torch.__version__} has no torch._inductor.aoti_compile_and_package (torch 2.6 or later has)."
        if not any(shutil.which(compiler) for compiler in ("c++", "g++", "clang++")):
            return "AOTInductor compiles C++, and no C++ compiler (c++, g++ or clang++) is on PATH."
        return None

    def transform(self, module, args, fresh):
        import torch

        with torch.no_grad():
            exported = torch.export.export(module, tuple(args))
        with tempfile.TemporaryDirectory(prefix="fuzz-aoti-") as folder, inductor_config(self.compile_options):
            package = torch._inductor.aoti_compile_and_package(exported, package_path=str(Path(folder) / "model.pt2"))
            return torch._inductor.aoti_load_package(package)

    def run_context(self):
        import torch

        return torch.no_grad()

    def reproducer_transform(self, source: Source) -> list[str]:
        return [f"with {with_inductor_config('torch.no_grad()', self.compile_options, source)}:",
                "    exported = torch.export.export(model, tuple(inputs))",
                "    package = torch._inductor.aoti_compile_and_package(exported, package_path=os.path.join(tempfile.mkdtemp(), 'model.pt2'))",
                "program = torch._inductor.aoti_load_package(package)"]


BACKENDS = [TorchAOTInductor]
