"""The oracle: is a backend's output right? Verdicts, the tolerance model, and signatures.

The docstrings of its modules are its specification, each next to the code it describes:

    dtypes.py     the dtype table (unit roundoff, RTOL, largest and smallest normal value)
    reference.py  a case's float64 Reference, its scales and sensitivities; gradients' Reference
    models.py     the registry of honest models (MODELS: r_d, rounding, flush-to-zero, float16
                  opmath, directed, flush in range; the longdouble overflow run), counted and
                  timed per case; which entries are judged, defined non-finite or undefined
    rounding.py   the rounding runs (random and directed), op by op
    rules.py      the registry of entry rules that make an entry undefined or move its value
                  (signed zeros, integers, quarter periods, conventions, near zero, near overflow)
    undeclared.py what the rounding runs measure of an op that declares no numerics (a plugin's)
    flush.py      the flush-to-zero runs
    fast.py       the same models, bit for bit, in less time (paths.FAST)
    paths.py      the FAST and LAZY switches, and why the lazy path gives the same verdicts
    compare.py    judging: the tolerance model (per output, then per entry), compare_output, judge_outputs, signature
    entry_scale.py  each output entry's own scale, propagated through the graph (the per-entry allowance)
    indices.py    judging an output that is an index (argmax): exactly, or by the values at a tie

What an op contributes (its float64 reference, sensitivity, forward and intermediate errors, the
facts the rules read) is the op's declaration in fuzzer/ops/; the oracle reads nothing else of it.
The names other modules use are importable from fuzzer.oracle itself.
"""

from fuzzer.oracle import paths
from fuzzer.oracle.compare import (K_SAME, allowed_error, compare_at_floor, compare_output, entry_allowance, floor_allowance,
                                   judge_outputs, signature)
from fuzzer.oracle.dtypes import (DTYPES, LARGEST, ROUNDING_SLACK, RTOL, TINY, UNIT_ROUNDOFF, flushed, nonfinite_class,
                                  round_to_dtype)
from fuzzer.oracle.models import MODELS, HonestModels
from fuzzer.oracle.reference import Reference, compute_reference, extended, framework_reference
from fuzzer.oracle.rounding import NOISY_RUNS
from fuzzer.oracle.rules import UNDEFINED_RULES, VALUE_RULES
from fuzzer.records import BackendVerdict

__all__ = ["paths", "K_SAME", "allowed_error", "compare_at_floor", "compare_output", "entry_allowance", "floor_allowance",
           "judge_outputs", "signature", "DTYPES", "LARGEST", "ROUNDING_SLACK", "RTOL", "TINY", "UNIT_ROUNDOFF", "flushed", "nonfinite_class",
           "round_to_dtype", "MODELS", "HonestModels", "Reference", "compute_reference", "extended", "framework_reference",
           "NOISY_RUNS", "UNDEFINED_RULES", "VALUE_RULES", "BackendVerdict"]
