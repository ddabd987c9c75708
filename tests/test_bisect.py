"""The bisect search over made-up version outcomes, and the version list it searches.

The real thing, over real jax releases, is in test_envs.py (slow)."""

from __future__ import annotations

import math

import pytest

from fuzzer import oracle, verdicts
from fuzzer.errors import UserError
from fuzzer.triaging.bisect import NEW, OLD, SKIP, Step, available_versions, bisect_versions, outcome_of

VERSIONS = [f"1.{minor}.0" for minor in range(20)]


def fake(first_new: str, skips: set[str] = frozenset()):
    """A test function: versions from `first_new` on behave new; `skips` cannot be tested.
    Records the order in which versions were asked for."""
    asked: list[str] = []

    def test(version: str) -> Step:
        asked.append(version)
        if version in skips:
            return Step(version, SKIP, "no wheel")
        return Step(version, NEW if VERSIONS.index(version) >= VERSIONS.index(first_new) else OLD)

    return test, asked


@pytest.mark.parametrize("first_new", VERSIONS[1:])
def test_finds_every_possible_boundary_in_logarithmic_steps(first_new):
    test, asked = fake(first_new)
    result = bisect_versions(VERSIONS, test)
    assert (result.last_old, result.first_new, result.problem) == (VERSIONS[VERSIONS.index(first_new) - 1], first_new, "")
    assert asked[:2] == [VERSIONS[0], VERSIONS[-1]]  # both ends first
    assert len(asked) <= 2 + math.ceil(math.log2(len(VERSIONS)))
    assert len(set(asked)) == len(asked)  # nothing tested twice


def test_an_untestable_version_is_skipped_for_its_neighbour():
    test, asked = fake("1.13.0", skips={"1.10.0", "1.9.0"})
    result = bisect_versions(VERSIONS, test)
    assert (result.last_old, result.first_new, result.skipped_between) == ("1.12.0", "1.13.0", [])
    assert "1.10.0" in asked and "1.11.0" in asked  # the middle was skipped, the next nearest tried


def test_only_untestable_versions_between_gives_the_range():
    test, _ = fake("1.6.0", skips={"1.5.0", "1.4.0"})
    result = bisect_versions(VERSIONS, test)
    assert (result.last_old, result.first_new) == ("1.3.0", "1.6.0")
    assert result.skipped_between == ["1.4.0", "1.5.0"]
    assert result.to_dict()["skipped_between"] == ["1.4.0", "1.5.0"]


@pytest.mark.parametrize("overrides, needle", [
    ({"1.0.0": NEW}, "--from 1.0.0: detail"),  # already new at the old end
    ({"1.19.0": OLD}, "--to 1.19.0: detail"),  # still old at the new end
    ({"1.0.0": SKIP}, "--from 1.0.0: detail"),  # an end that cannot be tested
])
def test_a_range_that_does_not_bracket_a_change_is_a_problem_not_an_answer(overrides, needle):
    def test(version: str) -> Step:
        usual = NEW if VERSIONS.index(version) >= 5 else OLD
        return Step(version, overrides.get(version, usual), "detail")

    result = bisect_versions(VERSIONS, test)
    assert result.last_old is None and result.first_new is None
    assert needle in result.problem


def test_fewer_than_two_versions():
    result = bisect_versions(["1.0.0"], lambda v: Step(v, OLD))
    assert result.problem and not result.steps


def test_version_list_keeps_final_releases_in_range_oldest_first():
    listed = ["2.13.0+cpu", "2.13.0", "2.14.0rc1", "2.4.1", "2.10.0", "2.1.0", "2.0.1", "2.15.0", "2.2.0.dev20240101", "garbage"]
    assert available_versions("torch", "2.1.0", "2.14.1", listed) == ["2.1.0", "2.4.1", "2.10.0", "2.13.0"]


@pytest.mark.parametrize("low, high, needle", [("2.4", "2.1", "older"), ("two", "2.1", "Invalid version")])
def test_version_range_errors(low, high, needle):
    with pytest.raises(UserError, match=needle):
        available_versions("torch", low, high, ["2.1.0"])


def test_outcome_maps_verdicts_for_regressions_and_fixes():
    passing = oracle.BackendVerdict("b", verdicts.AGREE)
    failing = oracle.BackendVerdict("b", verdicts.CONSTANT, max_error=0.5, allowed=1e-4, detail="every value is 1")
    unsupported = oracle.BackendVerdict("b", verdicts.UNSUPPORTED, detail="op 'gru' is unsupported")
    assert outcome_of(passing, find_fix=False)[0] == OLD and outcome_of(failing, find_fix=False)[0] == NEW
    assert outcome_of(passing, find_fix=True)[0] == NEW and outcome_of(failing, find_fix=True)[0] == OLD
    assert outcome_of(unsupported, find_fix=False)[0] == SKIP
    assert "fails: constant (error 0.5, allowed 0.0001): every value is 1" == outcome_of(failing, False)[1]
