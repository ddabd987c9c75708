"""jax eager (op by op dispatch). x64 is switched on once so float64 backends are real float64;
every impl casts explicitly, so float32 stays float32."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np

from fuzzer.backends import Backend
from fuzzer.complex_dtypes import COMPLEX_DTYPES
from fuzzer.exact_dtypes import EXACT_DTYPES, result_array
from fuzzer.ir import Case, Graph, infer_shapes, interpret
from fuzzer.programs.program import functional_step, run_steps
from fuzzer.reproducers.program_source import JAX_VERSIONS, jax_program


_CONFIGURED = False


def import_jax():
    """jax, configured once per process: x64 on, and a persistent compilation cache.

    jax compiles every primitive (eager) and every graph (jit) per new shape; the disk
    cache lets workers, resumed campaigns and later campaigns reuse each other's work
    (measured: jax-eager 366 -> 91 ms and jax-jit 82 -> 16 ms per new case when warm).
    Set FUZZ_JAX_CACHE to choose the folder, or to "" to switch it off.
    """
    global _CONFIGURED
    # Several workers share a GPU: jax must not grab 75% of its memory per process.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax

    if not _CONFIGURED:
        jax.config.update("jax_enable_x64", True)
        cache = os.environ.get("FUZZ_JAX_CACHE", str(Path.home() / ".cache" / "fuzzer" / "jax"))
        if cache:
            with contextlib.suppress(AttributeError):  # releases before 0.4.2x lack these options: no cache
                jax.config.update("jax_compilation_cache_dir", cache)
                jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
                jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        _CONFIGURED = True
    return jax


class JaxEager(Backend):
    kind = "jax-eager"
    path = "jax/eager"
    in_sets = {"cpu": {40: "cpu:float32"}, "gpu": {60: "gpu:float32"}}
    family = "jax"
    devices = ("cpu", "gpu")
    dtypes = ("float32", "float64", "bfloat16", "float16", *EXACT_DTYPES, *COMPLEX_DTYPES)
    description = "jax, op by op (no jit)"
    computes_every_node = True
    versions_source = JAX_VERSIONS
    runs_programs = True
    # Every primitive compiles once per new shape: ~0.5 s for a new graph (measured, see
    # bench/). It takes a share of the compile budget (fuzzer/running/budget.py), like torch.compile.
    expensive = True

    def unavailable_reason(self) -> str | None:
        try:
            jax = import_jax()
        except ImportError as exc:
            return f"jax cannot be imported ({exc})."
        try:
            jax.devices(self.device)
        except RuntimeError:
            return f"jax sees no '{self.device}' device (install jax with its CUDA plugin for gpu)."
        return None

    def has_precision_policy(self) -> bool:
        return self.device == "gpu"

    def precision_context(self, graph: Graph):
        """Strict: float32 matmuls/convs at full precision (jax's GPU default is TF32-like)."""
        if not self.strict:
            return contextlib.nullcontext()
        return import_jax().default_matmul_precision("highest")

    def running_context(self, graph: Graph):
        """This backend's device as jax's default, and its precision: a jitted function that takes no
        argument (jax-jit-const closing over every input) would otherwise run on jax's default
        device, the GPU where there is one, and be judged as this CPU backend."""
        jax = import_jax()
        stack = contextlib.ExitStack()
        stack.enter_context(jax.default_device(jax.devices(self.device)[0]))
        stack.enter_context(self.precision_context(graph))
        return stack

    def supports_graph(self, graph: Graph) -> bool:
        # The translation's index maps are made for the program's one set of shapes: a program whose inputs change
        # size between steps (ir.Resize, a torch guard's region) is not translated yet.
        return graph.resized is None and super().supports_graph(graph)

    def _graph_fn(self, graph: Graph):
        return self._body(graph)

    def _body(self, graph: Graph):
        """The function of (inputs, params) this backend runs: the graph, or a program's step, translated
        without views or in-place writes (fuzzer/programs/program.py), which returns the state it leaves too."""
        if graph.steps:
            step = functional_step(graph, self.impl_for, infer_shapes(graph))
            return lambda state, params: step(state)
        return lambda inputs, params: interpret(graph, inputs, params, self.impl_for)

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        return jax_program(case, self, [], "graph(*args)")

    def put(self, array):
        """A case's array as a jax array of this backend's dtype on its device."""
        jax = import_jax()
        return jax.device_put(np.asarray(array).astype(getattr(jax.numpy, self.dtype)), jax.devices(self.device)[0])

    def _execute(self, graph: Graph, inputs: dict, params: dict) -> list[np.ndarray]:
        jax = import_jax()
        with self.running_context(graph):
            fn, arrays = self._graph_fn(graph), {k: self.put(v) for k, v in inputs.items()}
            if graph.steps:
                # Each step's outputs copied out as it returns them: a later step may donate their buffers.
                outputs = run_steps(graph, lambda state: fn(state, {}), arrays, jax.device_get)
            else:
                outputs = fn(arrays, {node: {k: self.put(v) for k, v in ps.items()} for node, ps in params.items()})
        return [result_array(jax.device_get(out), self.dtype) for out in outputs]


BACKENDS = [JaxEager]
