"""XLA:CPU aborts the process compiling a transposed convolution (lhs_dilation 2, kernel 3x2, padding
(1, 1) x (0, 0)): the algebraic simplifier swaps the conv's operands into an invalid window. It is the
input gradient of a plain conv2d (3x4 input, 3x2 kernel, stride 2, padding 1), so jax.grad hits it too.
Exit 1 while the bug is there (the compile aborts), 0 once fixed."""
import subprocess
import sys

import jax
import jaxlib.version

CASES = {
    "transposed conv (lhs_dilation)": """
import jax, jax.numpy as jnp
from jax import lax
g, w = jnp.zeros((1, 1, 2, 3), jnp.float32), jnp.zeros((1, 1, 3, 2), jnp.float32)
jax.jit(lambda g: lax.conv_general_dilated(g, w, (1, 1), ((1, 1), (0, 0)), lhs_dilation=(2, 2)))(g).block_until_ready()
""",
    "jax.grad of a stride-2 conv2d": """
import jax, jax.numpy as jnp
from jax import lax
x, w = jnp.zeros((1, 1, 3, 4), jnp.float32), jnp.zeros((1, 1, 3, 2), jnp.float32)
jax.grad(lambda x: lax.conv_general_dilated(x, w, (2, 2), ((1, 1), (1, 1))).sum())(x).block_until_ready()
""",
}

print(f"jax {jax.__version__}, jaxlib {jaxlib.version.__version__}")
aborted = []
for name, code in CASES.items():  # each in its own process: the bug kills the interpreter (SIGABRT)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    failure = next((line for line in done.stderr.splitlines() if "Check failed" in line), done.stderr.strip()[-200:])
    print(f"{name}: {'ok' if done.returncode == 0 else f'exit {done.returncode}: {failure[:160]}'}")
    if done.returncode != 0:
        aborted.append(name)
sys.exit(1 if aborted else 0)
