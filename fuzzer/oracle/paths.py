"""The oracle's two shortcuts, each a switch that tests turn off to compare it with the plain path:
FAST (fast.py) computes the honest models with the plain functions' bits in less time, and LAZY
judges a backend at the floor before any honest model is computed. Read them here, at call time
(`paths.FAST`), so that a test's switch reaches every module of the oracle.

Cost
----
The honest models run every op about ten times a case, which made them most of the cheap tier's
time. `FAST` (on) computes them with the same bits as the plain functions (rounding.rounding_runs,
flush.flush_to_zero_run), which stay as their specification: the rounding runs of all dtypes go
node by node together and share their random draws (the same generator seeds, so the same
numbers); an op whose operands have no sign bit set gets its magnitude from its own output
instead of a second call; the flush-to-zero run takes the float64 run's value wherever flushing
changes nothing; masks and maxima avoid copies. Each shortcut is taken only where it provably
gives the plain path's arrays, values and memory layout alike (see "equivalent" in
fast.py), so no verdict, error or allowance can change; tests/test_oracle_fast.py compares
the two paths bit for bit on generated cases of every regime.

Most cases need no honest model at all (`LAZY`, on): `allowed` is K_SAME * e_same plus the floor
sens * (RTOL[d] * scale + TINY[d]), and e_same >= 0, so a backend finite wherever r64 is finite,
within the floor of r64 there, and of r64's non-finite class (nan, +inf, -inf) everywhere else,
agrees whatever the models say: the full comparison judges a subset of r64's finite entries
against an allowance no smaller, skips the non-finite entries the models leave undefined, and
asks the others to have r64's class. check.check_case judges each backend that way first
(judge_outputs' `at_floor`); such a verdict records the floor as its `allowed`, with `at_floor`
set. The Reference computes its honest models (r_d, the rounding and flush-to-zero runs) the
first time anything asks for them: a non-finite entry of another class than r64's, an error above
the floor, localization, reproducers, and a floor verdict that accuracy-regression compares across
releases (check_case judges it again in full). The longdouble overflow run waits longer: it only
removes entries from the defined non-finite ones, so it runs when a backend gives another class at
one of them (HonestModels.nonfinite_candidates), or when the mask itself is asked for (reproducers,
and `defines_anything` for a case with no judged entry); in the torch-jit-trace tier it ran on 4%
of cases and took 6% of a graph's time. One verdict
differs from computing every model: a case whose every entry some honest model leaves undefined
(a computed zero into atan2 or a negative power, float16 overflow, a nan whose class an honest
model does not share) is `invalid` with the models, and `agree` at the floor when every backend
agrees at the floor (knowing it would take the very models the floor spares; check_case asks once
some verdict is not at the floor, and is exact then). Each such case is a pass either way;
tests/test_oracle_lazy.py compares the two paths on generated cases and counts them.
"""

# The fast path; off, the plain functions compute every model.
FAST = True
# The lazy path; off, check.check_case agrees no verdict at the floor and every case computes its
# honest models.
LAZY = True
