"""A whole new backend class from a plugin file: the ops' numpy references run in float32."""

import numpy as np

from fuzzer.backends import Backend
from fuzzer.ir import interpret


class NumpyFloat32(Backend):
    kind = "plugin-numpy32"
    family = "numpy"
    dtypes = ("float32",)
    description = "numpy references in float32 (a plugin)"

    def _execute(self, graph, inputs, params):
        cast = lambda a: np.asarray(a, dtype=np.float32)  # noqa: E731
        with np.errstate(all="ignore"):
            outputs = interpret(
                graph,
                {k: cast(v) for k, v in inputs.items()},
                {n: {k: cast(v) for k, v in ps.items()} for n, ps in params.items()},
                lambda op: (lambda xs, ps, attrs, fn=self.impl_for(op): cast(fn(xs, ps, attrs))),
            )
        return [np.asarray(o, dtype=np.float64) for o in outputs]


def register(api):
    api.add_backend(NumpyFloat32)
