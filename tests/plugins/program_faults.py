"""Test plugin: faults that live only in programs (fuzzer/programs/program.py), each torch eager with one
statement overridden by name, so that a test can show a short campaign of programs finds them.

- `fault-copy-first`: copy_ into a view (a tensor with a `_base`) writes only its first element.
- `fault-lost-update`: the third add_ into the same tensor (through any view of it) is lost: in a
  program of one add_ a step, the third call's update.
- `fault-stale-diagonal`: diagonal returns a copy, not a view: a read of it after a write into its
  base sees the value from before the write (and a write through it is lost).
- `fault-recompiled-add`: torch.compile(dynamic=True) whose add_ drops its alpha where the target has more
  than 16 rows: dynamo guards on that size, so only the recompile for such a size (a shape variant: programs
  draw at most 7 rows) computes the wrong value.
- `fault-addcdiv-value`: addcdiv_ ignores its `value` (adds t1 / t2 once), as a kernel that drops a scalar would.
- `fault-stale-branch`: branch_ keeps the arm its first call took (per target), as a compiled branch without a
  guard on the number read with `.item()` would: wrong only where a later step's condition changes sign.
- `fault-few-rows`: nonzero_rows_sum sums every row where nonzero picks none or one, as a kernel whose size-0 and size-1
  selections (the sizes dynamo specializes) take another path would.
- `fault-half-scalar`: addcmul_ rounds its scalar to float16 first, as a kernel that passed the number read with
  `.item()` in the wrong dtype would: the programs' constant values (1, -0.5, 2) are float16 numbers, so only a
  value read at run time shows it. `fault-broken-half-scalar`: the same in torch-compile-breaks, where that value
  is the number a resumed graph takes after the `.item()` graph break (as a constant baked in the wrong dtype).
- `fault-half-correction`: the Python arithmetic `bias_correction` (c / (1 - d ** (1 + |s|)), on a number read with
  `.item()`) rounds its result to float16, as a resumed graph that baked the computed number in the wrong dtype would:
  only a write whose scalar goes through that arithmetic shows it.
- `fault-slight-scalar`: addcmul_ takes its number 0.1% too large, as a kernel that rounds the number read with `.item()`
  through a coarser type would: a small error the oracle must still see where a state grows across steps.
- `fault-rotated-list`: `.tolist()` gives its numbers rotated by one (element 0 is the tensor's element 1), as a read at
  the wrong offset would: only a write whose number is an element of `.tolist()` shows it.
"""

from fuzzer.programs.statements import STATEMENTS


def copy_first(xs, ps, attrs):
    target, source = xs
    if target._base is None:
        return target.copy_(source)
    first = (0,) * target.dim()
    target[first].copy_(source.broadcast_to(target.shape)[first])
    return target


def lost_update(xs, ps, attrs):
    target = xs[0]
    base = target if target._base is None else target._base
    base.fuzz_adds = getattr(base, "fuzz_adds", 0) + 1
    if base.fuzz_adds == 3:
        return target
    return STATEMENTS["add_"].torch(xs, ps, attrs)


def stale_diagonal(xs, ps, attrs):
    return STATEMENTS["diagonal"].torch(xs, ps, attrs).clone()


def add_past_16_rows(xs, ps, attrs):
    target = xs[0]
    if target.shape[0] > 16:
        return target.add_(xs[1])
    return STATEMENTS["add_"].torch(xs, ps, attrs)


def addcdiv_without_value(xs, ps, attrs):
    return xs[0].addcdiv_(xs[1], xs[2])


def addcmul_with_half_scalar(xs, ps, attrs):
    import torch

    value = torch.tensor(attrs.get("value", 1.0), dtype=torch.float16).item()
    return xs[0].addcmul_(xs[1], xs[2], value=value)


def branch_of_the_first_step(xs, ps, attrs):
    target = xs[0]
    base = target if target._base is None else target._base
    if not hasattr(base, "fuzz_arm"):
        base.fuzz_arm = "then" if attrs["condition"] > 0 else "otherwise"
    return STATEMENTS[attrs[base.fuzz_arm]].torch(xs, ps, {})


def rows_sum_ignoring_few_rows(xs, ps, attrs):
    import torch

    rows = torch.nonzero(xs[1] > 0).squeeze(1)
    if rows.numel() <= 1:
        rows = torch.arange(xs[0].shape[0])
    return torch.index_select(xs[0], 0, rows).sum(0).reshape(xs[0].shape[1:] or (1,))


def half_bias_correction(xs, ps, attrs):
    import numpy as np

    return float(np.float16(attrs["c"] / (1 - attrs["d"] ** (1 + abs(xs[0])))))


def addcmul_with_slight_scalar(xs, ps, attrs):
    return xs[0].addcmul_(xs[1], xs[2], value=attrs.get("value", 1.0) * 1.001)


def rotated_list(xs, ps, attrs):
    numbers = xs[0].tolist()
    return numbers[1:] + numbers[:1]


def register(api):
    base = "torch-eager:cpu:float32"
    api.derive_backend("fault-copy-first", base=base, overrides={"copy_": copy_first})
    api.derive_backend("fault-lost-update", base=base, overrides={"add_": lost_update})
    api.derive_backend("fault-stale-diagonal", base=base, overrides={"diagonal": stale_diagonal})
    api.derive_backend("fault-addcdiv-value", base=base, overrides={"addcdiv_": addcdiv_without_value})
    api.derive_backend("fault-stale-branch", base=base, overrides={"branch_": branch_of_the_first_step})
    api.derive_backend("fault-few-rows", base=base, overrides={"nonzero_rows_sum": rows_sum_ignoring_few_rows})
    api.derive_backend("fault-half-scalar", base=base, overrides={"addcmul_": addcmul_with_half_scalar})
    api.derive_backend("fault-broken-half-scalar", base="torch-compile-breaks:cpu:float32",
                       overrides={"addcmul_": addcmul_with_half_scalar})
    api.derive_backend("fault-recompiled-add", base="torch-compile-dynamic:cpu:float32", overrides={"add_": add_past_16_rows})
    api.derive_backend("fault-half-correction", base=base, overrides={"bias_correction": half_bias_correction})
    api.derive_backend("fault-slight-scalar", base=base, overrides={"addcmul_": addcmul_with_slight_scalar})
    api.derive_backend("fault-rotated-list", base=base, overrides={"tolist": rotated_list})
