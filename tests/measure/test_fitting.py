"""Fitting's search and choice (mgedump.measure.fitting), on candidates whose runs move a fake clock: the choice
is deterministic, noise-aware, and the budget holds."""

from __future__ import annotations

import itertools

import pytest

from mgedump.measure.fitting import Candidate, Settings, choose, fit, settings_space


class Clock:
    """A clock that only runs move."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def candidate(clock: Clock, variant: str, rank: int, latencies_ms: list[float], threads: int = 1) -> Candidate:
    """A candidate whose runs take these latencies in turn (cycling), on the fake clock."""
    cycle = itertools.cycle(latencies_ms)

    def run() -> None:
        clock.now += next(cycle) / 1000

    return Candidate(variant, rank, Settings(threads=threads), start=lambda: run)


def test_the_fastest_wins_beyond_the_spread_of_its_runs():
    clock = Clock()
    fp32 = candidate(clock, "fp32", 0, [10.0, 10.2, 9.9])
    int8 = candidate(clock, "int8", 2, [6.0, 6.1, 5.9, 6.3])
    result = fit([fp32, int8], budget_s=5, clock=clock)
    assert result.chosen is int8 and result.why == ""
    assert [c.variant for c in result.ranked] == ["int8", "fp32"]


def test_a_simpler_variant_within_the_spread_is_preferred():
    clock = Clock()
    fp32 = candidate(clock, "fp32", 0, [10.0])
    noisy = candidate(clock, "int8", 2, [7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 14.0, 14.0])  # p90 above fp32
    result = fit([fp32, noisy], budget_s=5, clock=clock)
    assert noisy.median_ms < fp32.median_ms <= noisy.p90_ms
    assert result.chosen is fp32 and "within the spread of int8's runs" in result.why


def test_a_candidate_that_cannot_run_is_never_chosen():
    clock = Clock()

    def broken():
        raise RuntimeError("the provider refuses this setting")

    bad = Candidate("int8", 2, Settings(threads=2), start=broken)
    fp32 = candidate(clock, "fp32", 0, [10.0])
    result = fit([bad, fp32], budget_s=5, clock=clock)
    assert result.chosen is fp32 and bad.error == "the provider refuses this setting" and not bad.samples_ms


def test_the_budget_bounds_the_search():
    clock = Clock()
    pool = [candidate(clock, f"v{k % 3}", k % 3, [50.0 + k], threads=1 + k // 3) for k in range(12)]
    result = fit(pool, budget_s=4, clock=clock)
    # screening stops at half the budget, a final round starts only when it fits: a turn that started ends
    turn = 4 * 0.061  # one warm-up and three runs of the slowest candidate
    assert result.seconds <= 4 + turn and result.chosen is not None
    assert all(any(c.samples_ms for c in pool if c.variant == v) for v in {c.variant for c in pool})


def test_each_variant_keeps_its_two_best_settings_for_the_final_rounds():
    clock = Clock()
    pool = [candidate(clock, "fp32", 0, [float(ms)], threads=ms) for ms in (30, 10, 20)]
    result = fit(pool, budget_s=2, clock=clock)
    finalists = result.ranked[:2]
    assert [c.settings.threads for c in finalists] == [10, 20] and result.ranked[2].settings.threads == 30


def test_the_settings_this_machine_offers():
    space = settings_space(["CPUExecutionProvider"], cores=8)
    assert {s.threads for s in space} == {1, 4, 8} and len(space) == 3 * 3 * 2
    assert settings_space(["CPUExecutionProvider"], cores=1)[0] == Settings("CPUExecutionProvider", 1, "basic")


@pytest.mark.parametrize("empty", [[], [Candidate("x", 0, Settings(), start=lambda: lambda: None)]])
def test_nothing_timed_chooses_nothing(empty):
    assert choose([c for c in empty if c.samples_ms]) == (None, "")
