"""Fitting's search and choice (mgedump.measure.fitting), on candidates whose runs move a fake clock: the choice
is deterministic, noise-aware, and the budget holds."""

from __future__ import annotations

import contextlib
import itertools

import pytest

from mgedump.measure.fitting import (
    FAR_SLOWER,
    KEEP,
    SCREEN_RUNS,
    Candidate,
    Watch,
    choose,
    fit,
    settings_space,
    sign_test,
)
from mgedump.model.session import SessionSettings as Settings


class Clock:
    """A clock that only runs and pauses move."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pauses = 0

    def __call__(self) -> float:
        return self.now

    def pause(self, seconds: float) -> None:
        self.now += seconds
        self.pauses += 1


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
    result = fit([fp32, int8], budget_s=5, clock=clock, pause=clock.pause)
    assert result.chosen is int8 and result.why == ""
    assert [c.variant for c in result.ranked] == ["int8", "fp32"]


def test_a_faster_variant_must_win_the_interleaved_rounds():
    clock = Clock()
    fp32 = candidate(clock, "fp32", 0, [10.0])
    # a turn is one warm-up and five runs: two fast turns, then a slow one (a variant that is fast only at times)
    uneven = candidate(clock, "int8", 2, [7.0] * 12 + [14.0] * 6)
    result = fit([fp32, uneven], budget_s=5, clock=clock, pause=clock.pause)
    assert uneven.median_ms < fp32.median_ms and result.rounds >= 5
    assert result.chosen is fp32
    assert result.why.startswith("the simpler fp32 was chosen: int8 runs in ") and "but int8 was faster in only" in (
        result.why
    )


def test_a_tail_of_slow_runs_does_not_hide_a_variant_faster_in_every_round():
    clock = Clock()
    fp32 = candidate(clock, "fp32", 0, [10.0])
    tailed = candidate(clock, "int8", 2, [7.0, 7.0, 7.0, 7.0, 14.0])  # each turn's median 7, its p90 14
    result = fit([fp32, tailed], budget_s=5, clock=clock, pause=clock.pause)
    assert tailed.p90_ms > fp32.median_ms
    assert result.chosen is tailed and result.why == ""


def test_a_variant_faster_by_less_than_the_margin_loses_to_the_simpler():
    clock = Clock()
    fp32 = candidate(clock, "fp32", 0, [10.0])
    close = candidate(clock, "ioc16", 1, [9.9])  # faster in every round, by 1%
    result = fit([fp32, close], budget_s=5, clock=clock, pause=clock.pause)
    assert result.chosen is fp32 and "and ioc16 was faster by only 1.0% round by round (under 3%)" in result.why


def paired(variant: str, rank: int, turns_ms: list[float]) -> Candidate:
    """A candidate already timed: one run per turn, these turns."""
    return Candidate(
        variant,
        rank,
        Settings(),
        start=lambda: lambda: None,
        samples_ms=turns_ms,
        turns_ms=turns_ms,
        rounds_ms=turns_ms,
    )


@pytest.mark.parametrize("won, chosen", [(13, "int8"), (12, "fp32")])
def test_the_faster_must_win_more_rounds_than_chance_would(won, chosen):
    # 17 paired rounds: winning 13 happens by luck 2.5% of the time (chosen), 12 happens 7.2% (not)
    fp32 = paired("fp32", 0, [10.0] * 17)
    int8 = paired("int8", 2, [8.0] * won + [10.5] * (17 - won))
    picked, why = choose([fp32, int8])
    assert picked is not None and picked.variant == chosen
    assert (why == "") == (chosen == "int8")
    if chosen == "fp32":
        assert f"int8 was faster in only {won} of 17 final rounds (as many by chance alone: p = 0.072 > 0.05)" in why


def test_the_sign_test():
    assert sign_test(5, 5) == 1 / 32 and sign_test(0, 9) == 1.0
    assert sign_test(13, 17) < 0.05 < sign_test(12, 17)
    assert sign_test(4, 4) > 0.05  # too few rounds: no count of wins rules chance out


def test_with_too_few_rounds_the_faster_must_beat_the_spread_of_its_runs():
    fp32 = Candidate("fp32", 0, Settings(), start=lambda: lambda: None, samples_ms=[10.0] * 6, turns_ms=[10.0, 10.0])
    noisy = Candidate(
        "int8", 2, Settings(), start=lambda: lambda: None, samples_ms=[7.0] * 8 + [14.0] * 2, turns_ms=[7.0, 7.0]
    )
    chosen, why = choose([fp32, noisy])
    assert chosen is fp32 and why == (
        "the simpler fp32 was chosen: int8 runs in 7 ms at the median and fp32 in 10 ms, and int8's p90 (14 ms) is "
        "not below fp32's median: within the spread of its runs, it is not clearly faster"
    )


def test_a_candidate_that_cannot_run_is_never_chosen():
    clock = Clock()

    def broken():
        raise RuntimeError("the provider refuses this setting")

    bad = Candidate("int8", 2, Settings(threads=2), start=broken)
    fp32 = candidate(clock, "fp32", 0, [10.0])
    result = fit([bad, fp32], budget_s=5, clock=clock, pause=clock.pause)
    assert result.chosen is fp32 and bad.error == "the provider refuses this setting" and not bad.samples_ms


def test_the_budget_bounds_the_search():
    clock = Clock()
    pool = [candidate(clock, f"v{k % 3}", k % 3, [50.0 + k], threads=1 + k // 3) for k in range(12)]
    result = fit(pool, budget_s=4, clock=clock, pause=clock.pause)
    # screening stops at half the budget, a final round starts only when it fits: a turn that started ends
    turn = (SCREEN_RUNS + 1) * 0.061  # one warm-up and the screening runs of the slowest candidate
    assert result.seconds <= 4 + turn and result.chosen is not None
    assert all(any(c.samples_ms for c in pool if c.variant == v) for v in {c.variant for c in pool})
    # every turn starts after a pause (the last candidate's threads settle), counted in the budget
    assert clock.pauses == sum(len(c.turns_ms) for c in pool) > 0


def test_each_variant_keeps_its_best_settings_for_the_final_rounds():
    clock = Clock()
    pool = [candidate(clock, "fp32", 0, [float(ms)], threads=ms) for ms in (30, 10, 20)]
    result = fit(pool, budget_s=2, clock=clock, pause=clock.pause)
    assert [c.settings.threads for c in result.ranked[:KEEP]] == [10, 20][:KEEP]
    assert [c.settings.threads for c in result.ranked[KEEP:]] == [20, 30][KEEP - 1 :]
    assert all(c.rounds_ms for c in result.ranked[:KEEP]) and not any(c.rounds_ms for c in result.ranked[KEEP:])


def test_the_settings_this_machine_offers():
    space = settings_space(["CPUExecutionProvider"], cores=8)
    assert {s.threads for s in space} == {1, 4, 8} and len(space) == 3 * 3 * 2
    assert settings_space(["CPUExecutionProvider"], cores=1)[0] == Settings(
        "CPUExecutionProvider", threads=1, graph_opt="basic", execution_mode="sequential"
    )


@pytest.mark.parametrize("empty", [[], [Candidate("x", 0, Settings(), start=lambda: lambda: None)]])
def test_nothing_timed_chooses_nothing(empty):
    assert choose([c for c in empty if c.samples_ms]) == (None, "")


def test_screening_holds_one_session_at_a_time_and_opens_each_finalist_once_more():
    """A session holds the model's weights (every session open through screening took 2.9 GiB, each variant's best
    kept open 2.4x a plain run): screening closes each candidate's session when its turn ends, and only the
    finalists are opened again, once, for the final rounds."""
    import weakref

    clock = Clock()
    opened: list[str] = []
    live: set[int] = set()
    live_at_open: list[int] = []

    def counted(variant: str, rank: int, ms: float, threads: int) -> Candidate:
        def start():
            def run() -> None:
                clock.now += ms / 1000

            key = id(run)
            opened.append(f"{variant}/{threads}")
            live.add(key)
            live_at_open.append(len(live))
            weakref.finalize(run, live.discard, key)
            return run

        return Candidate(variant, rank, Settings(threads=threads), start=start)

    pool = [counted(v, r, ms + t, t) for v, r, ms in (("fp32", 0, 10.0), ("int8", 2, 8.0)) for t in range(1, 9)]
    result = fit(pool, budget_s=30, clock=clock, pause=clock.pause)
    finalists = [c for c in pool if c.finalist]
    assert [(c.variant, c.settings.threads) for c in finalists] == [("fp32", 1), ("int8", 1)][: 2 * KEEP]
    assert live_at_open[: len(pool)] == [1] * len(pool)  # screening: one session open at a time
    assert len(opened) == len(pool) + len(finalists) and sorted(opened[len(pool) :]) == sorted(
        f"{c.variant}/{c.settings.threads}" for c in finalists
    )  # each finalist opened once more, the others never again
    assert not live  # every session closed at the end
    assert result.rounds >= 5 and finalists == [c for c in pool if c.rounds_ms]  # the finalists are marked


@pytest.mark.parametrize("int8_ms, finalist", [(6.0, False), (7.5, True)])
def test_a_variant_far_slower_in_screening_is_not_a_finalist(int8_ms, finalist):
    """A variant whose best screening median is more than FAR_SLOWER times the fastest candidate's cannot win: it
    takes no session and no time in the final rounds (on an 85 MB transformer int8-dynamic ran in a fifth of
    float32's time); the defaults are a finalist all the same, as the choice must beat them."""
    clock = Clock()
    defaults = candidate(clock, "fp32", 0, [10.0])
    defaults.defaults = True
    fp32 = candidate(clock, "fp32", 0, [10.0], threads=2)
    int8 = candidate(clock, "int8", 2, [int8_ms])
    ioc16 = candidate(clock, "ioc16", 1, [int8_ms * 1.2])
    assert 10 / 6.0 > FAR_SLOWER > 10 / 7.5
    result = fit([fp32, ioc16, int8, defaults], budget_s=5, clock=clock, pause=clock.pause)
    assert fp32.finalist is finalist and bool(fp32.rounds_ms) is finalist and not fp32.open
    assert defaults.finalist and int8.finalist and ioc16.finalist and result.chosen is int8


def test_the_defaults_kept_with_no_other_finalist_say_why():
    clock = Clock()
    defaults = candidate(clock, "fp32", 0, [10.0])
    defaults.defaults = True
    slow = candidate(clock, "int8", 2, [16.0])
    result = fit([slow, defaults], budget_s=5, clock=clock, pause=clock.pause)
    assert result.chosen is defaults and not slow.finalist
    assert result.why == (
        "onnxruntime's defaults were kept: every other candidate ran more than 1.5x the fastest's median in "
        "screening, too slow to win"
    )


class FakeMemory:
    """A process's memory that the fake sessions below move (MiB): idle, and the peak verifying took."""

    def __init__(self, idle: float, peak: float) -> None:
        self.now, self.high = idle, peak
        self.watches: list[Watch] = []

    def rss(self) -> float:
        return self.now

    def peak(self) -> float:
        return self.high

    @contextlib.contextmanager
    def watch(self):
        seen = Watch(self.now)
        self.watches.append(seen)
        yield seen
        self.watches.remove(seen)

    def add(self, mib: float) -> None:
        self.now += mib
        self.high = max(self.high, self.now)
        for seen in self.watches:
            seen.high = max(seen.high, self.now)


def weighed(memory: FakeMemory, clock: Clock, variant: str, rank: int, ms: float, held: float, took: float):
    """A candidate whose session takes ``took`` MiB while it opens and holds ``held`` MiB until it is closed."""
    import weakref

    def start():
        def run() -> None:
            clock.now += ms / 1000

        memory.add(took)
        memory.add(held - took)
        weakref.finalize(run, memory.add, -held)
        return run

    return Candidate(variant, rank, Settings(threads=1), start=start)


def test_the_finalists_sessions_stay_within_twice_what_verifying_took():
    """Sessions whose weights outweigh the rest of the process: the finalists are taken fastest first while the
    sessions open together take at most twice what verifying took above the idle process (here 2 x 200 MiB); a
    finalist that would take more is turned away (float32 here), and the peak of the whole search stays within it."""
    for bounded in (True, False):
        clock, memory = Clock(), FakeMemory(idle=100.0, peak=300.0)
        defaults = weighed(memory, clock, "fp32", 0, 10.0, held=100.0, took=200.0)
        defaults.defaults = True
        ioc16 = weighed(memory, clock, "ioc16", 1, 9.0, held=120.0, took=250.0)
        fp32 = weighed(memory, clock, "fp32", 0, 9.5, held=120.0, took=250.0)
        int8 = weighed(memory, clock, "int8", 2, 10.0, held=30.0, took=60.0)
        result = fit(
            [fp32, ioc16, int8, defaults], 5, clock=clock, pause=clock.pause, memory=memory if bounded else None
        )
        assert [c for c in result.ranked if c.finalist] == (
            [ioc16, defaults, int8] if bounded else [ioc16, fp32, defaults, int8]
        )
        assert (ioc16.held_mib, ioc16.peak_mib) == ((120.0, 250.0) if bounded else (None, None))
        if bounded:
            assert memory.high <= 100 + 2 * (300 - 100), memory.high
        else:
            assert memory.high > 100 + 2 * (300 - 100)  # float32 opening beside two: 470 MiB above idle
        assert memory.now == 100.0  # every session closed


def test_onnxruntimes_defaults_are_kept_unless_the_choice_beats_them():
    for ms, kept in ((9.9, True), (9.0, False)):
        clock = Clock()
        defaults = candidate(clock, "fp32", 0, [10.0])
        defaults.defaults = True
        tuned = candidate(clock, "fp32", 0, [ms], threads=2)
        result = fit([tuned, defaults], budget_s=5, clock=clock, pause=clock.pause)
        assert (result.chosen is defaults) is kept, result.why
        if kept:
            assert result.why.startswith("onnxruntime's defaults were kept: fp32 runs in ")
            assert "fp32 was faster by only 1.0% round by round" in result.why
        assert result.ranked[0] in (defaults, tuned) and defaults in result.ranked


def test_the_rounds_the_choice_counts_are_the_final_rounds_it_reports():
    """ "N final round(s)" and "faster in only W of N final rounds" count the same rounds (screening is not one)."""
    clock = Clock()
    fp32 = candidate(clock, "fp32", 0, [10.0])
    uneven = candidate(clock, "int8", 2, [7.0] * 12 + [14.0] * 6)
    result = fit([fp32, uneven], budget_s=5, clock=clock, pause=clock.pause)
    assert f"of {result.rounds} final rounds" in result.why
