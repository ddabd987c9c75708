"""torch.compile with dynamo capturing what it otherwise graph-breaks on (issue 55).

A program that reads a tensor as a Python number (`x.addcmul_(a, b, value=s.item())`, fuzzer/programs/program.py)
is a graph break at `.item()` under torch-compile, as in users' loops. With `capture_scalar_outputs`
dynamo keeps it in the graph as an unbacked symbol instead, and with `capture_dynamic_output_shape_ops`
an op whose output size depends on values (nonzero) gets an unbacked size: another path through dynamo,
the symbolic shapes and inductor than the break. Both settings are dynamo's config, patched around every
compile and call and into the reproducer (`dynamo_options`, fuzzer/backends/torch_compile.py).
"""

from __future__ import annotations

from fuzzer.backends.torch_compile import TorchCompile


class TorchCompileCapture(TorchCompile):
    kind = "torch-compile-capture"
    description = ("torch.compile (inductor), fullgraph=True, dynamo capturing .item() as an unbacked symbol and "
                   "data-dependent output sizes")
    dynamo_options = {"capture_scalar_outputs": True, "capture_dynamic_output_shape_ops": True}
    runs_programs = True  # what it captures is what programs read (fuzzer/programs/program.py)


BACKENDS = [TorchCompileCapture]
