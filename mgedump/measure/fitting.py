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

1. Screening: every candidate, one turn of a few runs each, interleaved; each
   variant keeps its best settings (:data:`KEEP` of them) as it goes. Only
   they keep their sessions open: a candidate screened out (slower than the
   variant's best :data:`KEEP` so far, or pushed out of them by a faster one)
   closes its session at once and is never opened again, so the search holds
   at most :data:`KEEP` sessions a variant, and one more being screened (a
   session holds the model's weights: every candidate's session open through
   screening took 2.9 GiB for an 85 MB transformer).
2. Final rounds: the finalists, interleaved again, as many rounds as the
   budget allows (up to :data:`MAX_ROUNDS`).
3. The choice: the fastest by median, unless a simpler variant (float32 over
   float16 over int8: :attr:`Candidate.rank`) is as fast within the noise.
   The two are compared turn by turn, each final round's median against the
   other's in the same round: the faster wins when it won enough of the final
   rounds that chance is ruled out (a one-sided sign test at
   :data:`SIGNIFICANCE`: 5 of 5 rounds, 13 of 17) and by :data:`MARGIN` at
   the median of those rounds' ratios. With fewer than :data:`MIN_ROUNDS`
   final rounds (where no count of wins passes the test) it wins only when
   the 90th percentile of its runs is below the simpler one's median.
4. Doing nothing: onnxruntime's defaults (the session ``mgerun`` opens with no
   flags: :attr:`Candidate.defaults`) are a candidate, screened first and
   always a finalist, and the choice must beat them by the same test, or the
   defaults are kept.

The budget bounds the whole search, sessions included: screening (in an
order that times every variant under its first settings before any variant
under its second) stops when half of it is spent, and a final round starts
only when it fits in what is left; a candidate's turn that has started ends
(one warm-up and a few runs). Only variants that passed verification are
candidates: this module times, it never proves.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base.cpus import usable_cpus
from ..model.session import EXECUTION_MODES, SessionSettings

GRAPH_OPTS = ("basic", "extended", "all")  # onnxruntime's levels fitting tries (disable never wins)
KEEP = 1  # settings per variant that go on to the final rounds, their sessions open (each holds the weights)
SCREEN_RUNS = 5  # timed runs per candidate in its screening turn (one turn: a candidate screened out is closed)
FINAL_RUNS = 5  # timed runs per finalist and final round
MAX_ROUNDS = 15
MIN_ROUNDS = 5  # rounds both candidates ran before they are compared round by round (5 of 5 wins: p = 1/32)
SIGNIFICANCE = 0.05  # the chance of winning that many rounds by luck alone a faster variant must stay under
MARGIN = 0.03  # and by how much, at the median of its per-round ratios
DEFAULT_BUDGET_S = 60.0
SETTLE_S = 0.05  # a pause before each turn: the last candidate's idle threads stop spinning (docs/benchmarks.md)


def settings_space(providers: Sequence[str], cores: int | None = None) -> list[SessionSettings]:
    """Every choice of settings this machine offers: each provider, 1, half and all the cores this process may use
    (:func:`mgedump.base.cpus.usable_cpus`: its affinity and its cgroup's quota), each graph optimisation level,
    sequential and parallel execution."""
    cores = cores or usable_cpus()
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
        samples_ms: every timed run; ``turns_ms``: the median of each turn (screening, then one per final round);
            ``rounds_ms``: those of the final rounds only (what the choice compares round by round).
        error: why it could not be timed (the session failed to open or to run), if it could not.
        defaults: onnxruntime's defaults, doing nothing: the choice must beat it (see the module).
        finalist: it went on to the final rounds (the others were timed in one screening turn only).
    """

    variant: str
    rank: int
    settings: SessionSettings
    start: Callable[[], Callable[[], None]]
    samples_ms: list[float] = field(default_factory=list)
    turns_ms: list[float] = field(default_factory=list)
    error: str | None = None
    defaults: bool = False
    rounds_ms: list[float] = field(default_factory=list)
    finalist: bool = False
    _run: Callable[[], None] | None = field(default=None, repr=False)

    def time(self, runs: int, clock: Callable[[], float], *, final: bool = False) -> None:
        """One warm-up run, ``runs`` timed runs (``final``: in a final round), then the run's ``settle``, if it has
        one (untimed: the session hands back the memory it holds free, so an open finalist holds its weights and not
        its largest run)."""
        if self.error is not None:
            return
        try:
            if self._run is None:
                self._run = self.start()
                give_back()  # what opening the session took and freed (the model parsed, its weights copied)
            self._run()
            turn = []
            for _ in range(runs):
                began = clock()
                self._run()
                turn.append((clock() - began) * 1000)
            settle = getattr(self._run, "settle", None)
            if settle is not None:  # a run, untimed, that hands back what the session holds free between turns
                settle()
                give_back()
            self.samples_ms += turn
            self.turns_ms.append(statistics.median(turn))
            if final:
                self.rounds_ms.append(self.turns_ms[-1])
        except Exception as exc:  # a setting onnxruntime refuses here is not a candidate
            self.error = " ".join(str(exc).split())[:300] or type(exc).__name__
            self._run = None

    def release(self) -> None:
        """Close the session (what it holds goes back at once)."""
        if self._run is not None:
            self._run = None
            give_back()

    @property
    def open(self) -> bool:
        return self._run is not None

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

    give_back()  # what verifying the variants freed
    pool = _interleaved(candidates)
    kept: list[Candidate] = []  # the sessions open: each variant's best KEEP so far, and the defaults
    for k, candidate in enumerate(pool):
        if spent() > budget_s / 2 and any(c.samples_ms for c in pool):
            break
        pause(SETTLE_S)
        candidate.time(SCREEN_RUNS, clock)
        if progress is not None:
            progress(f"fitting: screening {candidate.variant} ({candidate.settings.text()})", k + 1, len(pool))
        kept = _screened(kept, candidate)
    finalists = kept
    for candidate in finalists:
        candidate.finalist = True
    rounds = 0
    while rounds < MAX_ROUNDS and spent() + _round_cost(finalists) <= budget_s:
        for k, candidate in enumerate(finalists if rounds % 2 == 0 else finalists[::-1]):
            pause(SETTLE_S)
            candidate.time(FINAL_RUNS, clock, final=True)
            if progress is not None:
                progress(f"fitting: round {rounds + 1}, {candidate.variant}", k + 1, len(finalists))
        rounds += 1
    for candidate in finalists:
        candidate.release()
    ranked = sorted(finalists, key=lambda c: c.median_ms) + sorted(
        (c for c in pool if c not in finalists), key=lambda c: c.median_ms
    )
    timed = [c for c in finalists if c.error is None and c.samples_ms]
    defaults = next((c for c in timed if c.defaults), None)
    chosen, why = choose([c for c in timed if not c.defaults], defaults)
    return Fitting(ranked, chosen, why, spent(), rounds, budget_s)


def _screened(kept: list[Candidate], candidate: Candidate) -> list[Candidate]:
    """The sessions kept open once ``candidate`` was screened: the defaults, and each variant's best :data:`KEEP`
    by screening median; every other is closed, for good."""
    if candidate.error is not None or not candidate.samples_ms:
        candidate.release()
        return kept
    if candidate.defaults:
        return [*kept, candidate]
    rivals = sorted(
        (c for c in [*kept, candidate] if c.variant == candidate.variant and not c.defaults), key=lambda c: c.median_ms
    )
    for out in rivals[KEEP:]:
        out.release()
    return [c for c in [*kept, candidate] if c.defaults or c.variant != candidate.variant or c in rivals[:KEEP]]


def give_back() -> None:
    """Hand the memory a closed session freed back to the system (glibc keeps freed blocks for the process, so
    each session closed would still count in its peak); nothing where the C library is not glibc."""
    global _trim
    if _trim is None:
        import ctypes
        import ctypes.util

        try:
            _trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _trim = False
    if _trim:
        _trim(0)


_trim: Any = None


def _interleaved(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Every variant's first settings, then every variant's second, ...: a screening cut short by the budget has
    timed every variant."""
    by_variant: dict[str, list[Candidate]] = {}
    first = [c for c in candidates if c.defaults]  # doing nothing is timed before anything
    for candidate in (c for c in candidates if not c.defaults):
        by_variant.setdefault(candidate.variant, []).append(candidate)
    columns = list(by_variant.values())
    return first + [c[k] for k in range(max(map(len, columns), default=0)) for c in columns if k < len(c)]


def _round_cost(finalists: Sequence[Candidate]) -> float:
    """Seconds one final round takes, from the medians so far: each finalist's warm-up, timed runs and the run that
    ends its turn."""
    return sum(SETTLE_S + (FINAL_RUNS + 2) * c.median_ms / 1000 for c in finalists if c.samples_ms)


def choose(candidates: Sequence[Candidate], defaults: Candidate | None = None) -> tuple[Candidate | None, str]:
    """The fastest candidate by median, unless a simpler variant is as fast within the noise, or the ``defaults``
    (onnxruntime's, doing nothing) are (see the module)."""
    if not candidates:
        return defaults, ""
    fastest = min(candidates, key=lambda c: (c.median_ms, c.rank))
    best_simpler: dict[int, Candidate] = {}
    for candidate in sorted((c for c in candidates if c.rank < fastest.rank), key=lambda c: c.median_ms):
        best_simpler.setdefault(candidate.rank, candidate)
    chosen, why = fastest, ""
    for rank in sorted(best_simpler):
        candidate = best_simpler[rank]
        doubt = _doubt(fastest, candidate)
        if doubt:
            chosen, why = candidate, f"the simpler {candidate.variant} was chosen: {doubt}"
            break
    if defaults is not None:
        doubt = _doubt(chosen, defaults, "onnxruntime's defaults")
        if doubt:
            return defaults, f"onnxruntime's defaults were kept: {doubt}"
    return chosen, why


def _doubt(fast: Candidate, simple: Candidate, simple_name: str = "") -> str:
    """Why ``fast`` is not clearly faster than ``simple`` ("" when it is), counting the final rounds both ran."""
    name = simple_name or simple.variant
    said = f"{fast.variant} runs in {fast.median_ms:.3g} ms at the median and {name} in {simple.median_ms:.3g} ms"
    rounds = min(len(fast.rounds_ms), len(simple.rounds_ms))
    if rounds < MIN_ROUNDS:
        if fast.p90_ms >= simple.median_ms:
            return (
                f"{said}, and {fast.variant}'s p90 ({fast.p90_ms:.3g} ms) is not below {name}'s median: within the "
                f"spread of its runs, it is not clearly faster"
            )
        return ""
    pairs = list(zip(fast.rounds_ms[-rounds:], simple.rounds_ms[-rounds:], strict=True))
    won = sum(f < s for f, s in pairs)
    ratio = statistics.median(f / s for f, s in pairs)
    chance = sign_test(won, rounds)
    if chance > SIGNIFICANCE:
        return (
            f"{said}, but {fast.variant} was faster in only {won} of {rounds} final rounds (as many by chance "
            f"alone: p = {chance:.2g} > {SIGNIFICANCE:g})"
        )
    if ratio > 1 - MARGIN:
        return f"{said}, and {fast.variant} was faster by only {1 - ratio:.1%} round by round (under {MARGIN:.0%})"
    return ""


def sign_test(won: int, rounds: int) -> float:
    """The chance of winning at least ``won`` of ``rounds`` paired rounds when both are equally fast (each round a
    coin toss): the one-sided sign test."""
    return float(sum(math.comb(rounds, k) for k in range(won, rounds + 1)) / 2**rounds)
