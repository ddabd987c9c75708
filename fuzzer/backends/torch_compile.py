"""torch.compile (inductor) of the whole graph, fullgraph=True; compiled once per graph structure and reused.

The compile configuration is data on the class, which the run and the reproducer writer both
read, so a configured kind (torch-compile-dynamic, torch-compile-max-autotune, a plugin's) is
a few class attributes: `compile_mode` (torch.compile's mode), `dynamic` (torch.compile's
dynamic), `compile_options` (inductor config, patched around every call, compile included:
torch.compile(options=...) reaches only inductor, while some settings, e.g. `freezing`, are
read by dynamo as it traces) and `dynamo_options` (dynamo's config, patched the same way).
"""

from __future__ import annotations

import contextlib
import types
from typing import ClassVar

from fuzzer.backends import CompiledCache
from fuzzer.backends.inductor_setup import prepare_inductor
from fuzzer.backends.torch_eager import TorchEager, dynamo_marks
from fuzzer.errors import OpUnsupported
from fuzzer.ir import Case, Graph, interpret
from fuzzer.programs.program import scalar_reads
from fuzzer.reproducers.op_source import Source, literal
from fuzzer.reproducers.program_source import torch_program

# Compiled graphs by (backend name, graph structure), kept for the life of the process
# (a campaign worker) and bounded so a long campaign does not grow without limit.
COMPILED = CompiledCache(limit=256)
# Graph structures dynamo could not capture whole: not traced again for their other input sets.
BROKEN: dict = {}


class GraphBreak(OpUnsupported):
    """dynamo cannot capture the graph whole (a graph break): the backend gives no verdict on it.

    Compiling with fullgraph=False instead would compile the op functions shared by every graph
    as frames of their own after the break; each code object holds at most `recompile_limit` (8)
    variants, and then dynamo runs it *eagerly*, silently: those graphs would no longer test
    inductor. A campaign counts these outcomes per backend (the `not_compiled` statistic).
    """


def _own_code_object(fn, name: str):
    """A copy of `fn` with a code object of its own: dynamo keeps its compiled variants per code
    object (at most `recompile_limit`), so one shared function would stop compiling after 8 graphs."""
    return types.FunctionType(fn.__code__.replace(co_name=name), fn.__globals__, name, fn.__defaults__, fn.__closure__)


def inductor_config(options: dict):
    """The context inductor compiles and runs in: its config patched by `options` (nothing to patch
    when there are none), in a process set up for it once (inductor_setup)."""
    prepare_inductor()
    if not options:
        return contextlib.nullcontext()
    import torch._inductor.config

    return torch._inductor.config.patch(options)


def dynamo_config(options: dict):
    """The context dynamo traces in: its config patched by `options` (torch-compile-capture's)."""
    if not options:
        return contextlib.nullcontext()
    import torch._dynamo.config

    return torch._dynamo.config.patch(options)


def with_dynamo_config(context: str, options: dict) -> str:
    """A reproducer's `context` with dynamo's config patched by `options`, as the campaign ran it."""
    if not options:
        return context
    return f"{context}, torch._dynamo.config.patch({literal(options)})"


def with_inductor_config(context: str, options: dict, source: Source) -> str:
    """A reproducer's `context` (source of a context manager) with inductor's config patched by
    `options`; a function among them (a custom pass) is written out into `source`."""
    if not options:
        return context
    return f"{context}, torch._inductor.config.patch({source.value_source(options, 'options')})"


class TorchCompile(TorchEager):
    derives_from_kind = "torch-eager"
    kind = "torch-compile"
    path = "torch/inductor"
    in_sets = {"cpu": {20: "cpu:float32"}, "gpu": {50: "cuda:float32"}}
    description = "torch.compile (inductor), whole graph, fullgraph=True, dynamic=False"
    expensive = True
    computes_every_node = False
    # Its slice of the compile share against jax.jit's (~0.1-0.3 s a new structure; budget.py): on
    # CUDA a triton build, ~1-2 s, three slices; on the CPU a g++ build per kernel, twice that (H200
    # machine, 14 workers, 3 slots each, 5 minutes: 152 CPU structures against 338 CUDA; 2.8 s a
    # CPU structure with a cold cache on 2 cores), six.
    compile_weight = 3.0
    runs_programs = True  # a program's step compiled once, called for every step
    marks_resized_dims = True
    cpu_compile_weight: ClassVar[float] = 6.0

    def __init__(self, device="cpu", dtype=None, overrides=None, name=None):
        super().__init__(device, dtype, overrides, name)
        if self.device == "cpu":
            self.compile_weight = self.cpu_compile_weight
    compile_mode: ClassVar[str | None] = None
    compile_options: ClassVar[dict] = {}
    # dynamo's config, patched around every call as compile_options is (what dynamo captures, torch-compile-capture)
    dynamo_options: ClassVar[dict] = {}
    # False only where a graph break is what is tested (torch-compile-breaks: see GraphBreak for why not elsewhere)
    fullgraph: ClassVar[bool] = True

    def supports_graph(self, graph: Graph) -> bool:
        # Python control flow on a value read with .item() (a program's branch_) is no one graph: dynamo's documented
        # limit under fullgraph=True, where only a graph break (torch-compile-breaks) takes it.
        if self.fullgraph and any(node.op == "branch_" for node in graph.nodes):
            return False
        if graph.resized is not None and not hasattr(dynamo_marks(), f"mark_{graph.resized.mark}"):
            return False  # mark_unbacked came with torch 2.3
        return super().supports_graph(graph)

    def cache_key(self, graph: Graph) -> tuple:
        """Graphs with one key share one compiled function (one code object: see _own_code_object)."""
        return (self.name, graph.structure_key())

    def _graph_fn(self, graph: Graph):
        import torch

        key = self.cache_key(graph)
        if key in BROKEN:
            raise GraphBreak(BROKEN[key])

        def build():
            # Looked up outside the traced function: dynamo need not trace the op registry
            # (older releases fail to, e.g. torch 2.1 on its first, registry-filling call).
            impls = {op: self._traced_impl(op) for op in graph.op_names()}
            return torch.compile(_own_code_object(self._traced_function(graph, impls), f"fuzz_graph_{key[1]}"),
                                 mode=self.compile_mode, dynamic=self.dynamic, fullgraph=self.fullgraph)

        compiled = COMPILED.get(key, build)

        def run(*args):  # (inputs, params), and what a subclass's traced function takes besides
            try:
                with inductor_config(self.compile_options), dynamo_config(self.dynamo_options):
                    return compiled(*args)
            except torch._dynamo.exc.FailOnRecompileLimitHit:
                # This function was compiled for more shape variants than dynamo keeps per code
                # object (recompile_limit): start a new one rather than fail the case.
                COMPILED.entries.pop(key, None)
                return self._graph_fn(graph)(*args)
            except torch._dynamo.exc.Unsupported as exc:
                BROKEN[key] = f"graph break under fullgraph=True: {str(exc).strip().splitlines()[0]}"
                raise GraphBreak(BROKEN[key]) from None

        return run

    def _traced_impl(self, op: str):
        """What the traced function calls for `op`: its implementation, reading its scalar with `.item()`."""
        return scalar_reads(self.impl_for)(op)

    def _traced_function(self, graph: Graph, impls: dict):
        """The function torch.compile traces: (inputs, params) -> what the backend returns."""

        def run_graph(inputs, params):
            return interpret(graph, inputs, params, impls.__getitem__)

        return run_graph

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        source = Source(imports=["import torch"])
        context = with_inductor_config("torch.no_grad()", self.compile_options, source)
        context = with_dynamo_config(context, self.dynamo_options)
        return torch_program(case, self, [self.compile_source()], "program(*args)", context, source=source)

    def compile_source(self) -> str:
        """The reproducer's line that compiles `graph` into `program` as the campaign does."""
        mode = "" if self.compile_mode is None else f"mode={self.compile_mode!r}, "
        return f'program = torch.compile(graph, backend="inductor", {mode}fullgraph={self.fullgraph}, dynamic={self.dynamic})'


BACKENDS = [TorchCompile]
