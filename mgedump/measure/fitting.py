"""Fitting: the fastest proven variant on this machine, under the settings it offers (docs/fitting.md).

Each candidate is a variant of the model under one choice of session
settings (execution provider, intra-op threads, graph optimisation level,
sequential or parallel execution). Timing them one after the other on a
shared machine compares noise: here the candidates are timed in interleaved
rounds, so that a slow spell of the machine falls on all of them alike. Each
turn starts after a pause (:data:`SETTLE_S`): onnxruntime's thread pools
spin a while after a run, and the last candidate's spinning threads would
otherwise slow the next one (a 2-thread session timed 12 ms alone ran up to
26 ms right after another session's turn).

1. Screening: every candidate, a few runs each, in interleaved rounds; each
   variant keeps its best settings (:data:`KEEP` of them).
2. Final rounds: the finalists, interleaved again, as many rounds as the
   budget allows (up to :data:`MAX_ROUNDS`).
3. The choice: the fastest by median, unless a simpler variant (float32 over
   float16 over int8: :attr:`Candidate.rank`) is as fast within the noise.
   The two are compared turn by turn, each turn's median against the other's
   in the same round: the faster wins when it won enough of the rounds both
   ran that chance is ruled out (a one-sided sign test at
   :data:`SIGNIFICANCE`: 5 of 5 rounds, 13 of 17) and by :data:`MARGIN` at
   the median of those rounds' ratios. With fewer than :data:`MIN_ROUNDS`
   such rounds (where no count of wins passes the test) it wins only when
   the 90th percentile of its runs is below the simpler one's median.

The budget bounds the whole search, sessions included: screening (in an
order that times every variant under its first settings before any variant
under its second) stops when half of it is spent, and a final round starts
only when it fits in what is left; a candidate's turn that has started ends
(one warm-up and a few runs). Only variants that passed verification are
candidates: this module times, it never proves.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..model.session import EXECUTION_MODES, SessionSettings

GRAPH_OPTS = ("basic", "extended", "all")  # onnxruntime's levels fitting tries (disable never wins)
KEEP = 2  # settings per variant that go on to the final rounds
SCREEN_RUNS = 3  # timed runs per candidate and screening round
SCREEN_ROUNDS = 2
FINAL_RUNS = 5  # timed runs per finalist and final round
MAX_ROUNDS = 15
MIN_ROUNDS = 5  # rounds both candidates ran before they are compared round by round (5 of 5 wins: p = 1/32)
SIGNIFICANCE = 0.05  # the chance of winning that many rounds by luck alone a faster variant must stay under
MARGIN = 0.03  # and by how much, at the median of its per-round ratios
DEFAULT_BUDGET_S = 60.0
SETTLE_S = 0.05  # a pause before each turn: the last candidate's idle threads stop spinning (docs/benchmarks.md)


def settings_space(providers: Sequence[str], cores: int | None = None) -> list[SessionSettings]:
    """Every choice of settings this machine offers: each provider, 1, half and all cores, each graph
    optimisation level, sequential and parallel execution."""
    cores = cores or os.cpu_count() or 1
    threads = sorted({1, max(1, cores // 2), cores})
    return [
        SessionSettings(provider=provider, threads=n, graph_opt=level, execution_mode=mode)
        for provider in providers
        for n in threads
        for level in GRAPH_OPTS
        for mode in EXECUTION_MODES
    ]


@dataclass
class Candidate:
    """A variant under one choice of settings, with the runs timed so far.

    Attributes:
        variant: the variant's name; ``rank``: how far from float32 (0 float32, 1 float16, 2 int8).
        settings: the session settings (every field given: what ``mgerun --config`` reproduces).
        start: makes the session and returns one run of the first test case (a callable that returns nothing);
            called once, when the candidate is first timed.
        samples_ms: every timed run; ``turns_ms``: the median of each turn (screening, then one per final round).
        error: why it could not be timed (the session failed to open or to run), if it could not.
    """

    variant: str
    rank: int
    settings: SessionSettings
    start: Callable[[], Callable[[], None]]
    samples_ms: list[float] = field(default_factory=list)
    turns_ms: list[float] = field(default_factory=list)
    error: str | None = None
    _run: Callable[[], None] | None = field(default=None, repr=False)

    def time(self, runs: int, clock: Callable[[], float]) -> None:
        """One warm-up run, then ``runs`` timed runs."""
        if self.error is not None:
            return
        try:
            if self._run is None:
                self._run = self.start()
            self._run()
            turn = []
            for _ in range(runs):
                began = clock()
                self._run()
                turn.append((clock() - began) * 1000)
            self.samples_ms += turn
            self.turns_ms.append(statistics.median(turn))
        except Exception as exc:  # a setting onnxruntime refuses here is not a candidate
            self.error = " ".join(str(exc).split())[:300] or type(exc).__name__
            self._run = None

    def release(self) -> None:
        self._run = None

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms) if self.samples_ms else float("inf")

    @property
    def p90_ms(self) -> float:
        if not self.samples_ms:
            return float("inf")
        ordered = sorted(self.samples_ms)
        return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


@dataclass
class Fitting:
    """What the search measured and chose.

    Attributes:
        ranked: the finalists, fastest first (by median), then the other candidates timed.
        chosen: the candidate to ship; ``why``: how it was chosen over a faster one, if it was.
        seconds: how long the search took; ``rounds``: final rounds run; ``budget_s``: the budget.
    """

    ranked: list[Candidate]
    chosen: Candidate | None
    why: str = ""
    seconds: float = 0.0
    rounds: int = 0
    budget_s: float = DEFAULT_BUDGET_S


def fit(
    candidates: Sequence[Candidate],
    budget_s: float = DEFAULT_BUDGET_S,
    *,
    clock: Callable[[], float] = time.perf_counter,
    pause: Callable[[float], None] = time.sleep,
    progress: Callable[[str, int, int], None] | None = None,
) -> Fitting:
    """Time the candidates in interleaved rounds within ``budget_s`` seconds and choose one (see the module).

    Args:
        candidates: every variant under every setting, in a fixed order (the order decides nothing but ties).
        clock: seconds, monotonic (a test's fake clock); ``pause``: waits that many seconds on it.
        progress: called as ``progress(label, done, total)`` after each candidate's turn.
    """
    began = clock()

    def spent() -> float:
        return clock() - began

    pool = _interleaved(candidates)
    for _ in range(SCREEN_ROUNDS):
        for k, candidate in enumerate(pool):
            if spent() > budget_s / 2 and any(c.samples_ms for c in pool):
                break
            pause(SETTLE_S)
            candidate.time(SCREEN_RUNS, clock)
            if progress is not None:
                progress(f"fitting: screening {candidate.variant} ({candidate.settings.text()})", k + 1, len(pool))
    finalists = _finalists(pool)
    for candidate in pool:
        if candidate not in finalists:
            candidate.release()
    rounds = 0
    while rounds < MAX_ROUNDS and spent() + _round_cost(finalists) <= budget_s:
        for k, candidate in enumerate(finalists if rounds % 2 == 0 else finalists[::-1]):
            pause(SETTLE_S)
            candidate.time(FINAL_RUNS, clock)
            if progress is not None:
                progress(f"fitting: round {rounds + 1}, {candidate.variant}", k + 1, len(finalists))
        rounds += 1
    for candidate in finalists:
        candidate.release()
    ranked = sorted(finalists, key=lambda c: c.median_ms) + sorted(
        (c for c in pool if c not in finalists), key=lambda c: c.median_ms
    )
    chosen, why = choose([c for c in finalists if c.error is None and c.samples_ms])
    return Fitting(ranked, chosen, why, spent(), rounds, budget_s)


def _interleaved(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Every variant's first settings, then every variant's second, ...: a screening cut short by the budget has
    timed every variant."""
    by_variant: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        by_variant.setdefault(candidate.variant, []).append(candidate)
    columns = list(by_variant.values())
    return [c[k] for k in range(max(map(len, columns), default=0)) for c in columns if k < len(c)]


def _finalists(pool: Sequence[Candidate]) -> list[Candidate]:
    """Each variant's best :data:`KEEP` settings by screening median."""
    kept: list[Candidate] = []
    for variant in dict.fromkeys(c.variant for c in pool):
        timed = sorted(
            (c for c in pool if c.variant == variant and c.error is None and c.samples_ms), key=lambda c: c.median_ms
        )
        kept += timed[:KEEP]
    return kept


def _round_cost(finalists: Sequence[Candidate]) -> float:
    """Seconds one final round takes, from the medians so far."""
    return sum(SETTLE_S + (FINAL_RUNS + 1) * c.median_ms / 1000 for c in finalists if c.samples_ms)


def choose(candidates: Sequence[Candidate]) -> tuple[Candidate | None, str]:
    """The fastest candidate by median, unless a simpler variant is as fast within the noise (see the module)."""
    if not candidates:
        return None, ""
    fastest = min(candidates, key=lambda c: (c.median_ms, c.rank))
    best_simpler: dict[int, Candidate] = {}
    for candidate in sorted((c for c in candidates if c.rank < fastest.rank), key=lambda c: c.median_ms):
        best_simpler.setdefault(candidate.rank, candidate)
    for rank in sorted(best_simpler):
        candidate = best_simpler[rank]
        doubt = _doubt(fastest, candidate)
        if doubt:
            return candidate, f"{doubt}: the simpler {candidate.variant}"
    return fastest, ""


def _doubt(fast: Candidate, simple: Candidate) -> str:
    """Why ``fast`` is not clearly faster than ``simple`` ("" when it is)."""
    said = f"{fast.variant} runs {fast.median_ms:.3g} ms and {simple.variant} {simple.median_ms:.3g} ms"
    rounds = min(len(fast.turns_ms), len(simple.turns_ms))
    if rounds < MIN_ROUNDS:
        if fast.p90_ms >= simple.median_ms:
            return f"{said}, within the spread of {fast.variant}'s runs (p90 {fast.p90_ms:.3g})"
        return ""
    pairs = list(zip(fast.turns_ms[-rounds:], simple.turns_ms[-rounds:], strict=True))
    won = sum(f < s for f, s in pairs)
    ratio = statistics.median(f / s for f, s in pairs)
    chance = sign_test(won, rounds)
    if chance > SIGNIFICANCE:
        return (
            f"{said}, but {fast.variant} was faster in only {won} of {rounds} interleaved rounds (as many by chance "
            f"alone: p = {chance:.2g} > {SIGNIFICANCE:g})"
        )
    if ratio > 1 - MARGIN:
        return f"{said}, {fast.variant} faster by only {1 - ratio:.1%} round by round"
    return ""


def sign_test(won: int, rounds: int) -> float:
    """The chance of winning at least ``won`` of ``rounds`` paired rounds when both are equally fast (each round a
    coin toss): the one-sided sign test."""
    return float(sum(math.comb(rounds, k) for k in range(won, rounds + 1)) / 2**rounds)
