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

1. Screening: every candidate, one turn of a few runs each, interleaved, one
   session open at a time: each candidate's session is closed when its turn
   ends (a session holds the model's weights: every candidate's session open
   through screening took 2.9 GiB for an 85 MB transformer, and each variant's
   best kept open, 2.4x a plain run). Its turn measures what its session held
   once settled and the most it took while it opened and ran
   (:class:`ProcessMemory`).
2. Final rounds: the finalists, opened again and interleaved, as many rounds
   as the budget allows (up to :data:`MAX_ROUNDS`). The finalists are the
   defaults and each variant's best settings (:data:`KEEP`) that can still
   win: one whose screening median is more than :data:`FAR_SLOWER` times the
   fastest candidate's is not one. They are taken fastest first while the
   sessions open together stay within :data:`PEAK_ROOM` times what a plain
   ``mgerun`` of the bundle takes above the idle process (what verifying the
   variants took, or the defaults' session in its screening turn, whichever
   is more): a finalist that would take the memory beyond it is not one
   (:func:`select_finalists`).
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

import contextlib
import math
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..base.cpus import usable_cpus
from ..base.limits import peak_rss_mib, release_memory, rss_mib
from ..model.session import EXECUTION_MODES, SessionSettings

GRAPH_OPTS = ("basic", "extended", "all")  # onnxruntime's levels fitting tries (disable never wins)
KEEP = 1  # settings per variant that go on to the final rounds (each finalist's session holds the weights)
FAR_SLOWER = 1.5  # a variant whose best screening median is this far above the fastest's cannot win: not a finalist
PEAK_ROOM = 2.0  # the finalists' sessions take at most this many times what a plain run takes above the idle process
MIN_ROOM_MIB = 32.0  # and at least this much (an allocator's own noise must not turn a finalist of a small model away)
WATCH_S = 0.001  # how often the memory is read while a session opens and runs its warm-up
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
        held_mib: what its session held once settled, above what was held before it opened; ``peak_mib``: the most
            it took while it opened and ran (MiB, measured in the turn that opened it; None: not measured);
            ``open_s``: how long opening and the warm-up took (a finalist is opened again for the final rounds).
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
    held_mib: float | None = None
    peak_mib: float | None = None
    open_s: float = 0.0
    _run: Callable[[], None] | None = field(default=None, repr=False)

    def time(self, runs: int, clock: Callable[[], float], *, final: bool = False, memory: Memory | None = None) -> None:
        """One warm-up run, ``runs`` timed runs (``final``: in a final round), then the run's ``settle``, if it has
        one (untimed: the session hands back the memory it holds free, so an open finalist holds its weights and not
        its largest run). The turn that opens the session measures, with ``memory``, the most the session takes while
        it opens and runs (watched while it opens and runs its warm-up; after the timed runs, what its arena grew to:
        the timed runs themselves are not watched, a thread reading the memory would slow them) and what it holds
        once settled."""
        if self.error is not None:
            return
        try:
            opening = self._run is None
            run = self._run
            if run is None:
                before = memory.rss() if memory is not None else 0.0
                began = clock()
                with memory.watch() if memory is not None else contextlib.nullcontext(Watch()) as seen:
                    self._run = run = self.start()
                    release_memory()  # what opening the session took and freed (the model parsed, its weights copied)
                    run()
                self.open_s = clock() - began
            else:
                run()
            turn = []
            for _ in range(runs):
                began = clock()
                run()
                turn.append((clock() - began) * 1000)
            if opening and memory is not None:  # its arena grows over the runs until the settle hands it back
                self.peak_mib = max(0.0, seen.high - before, memory.rss() - before)
            settle = getattr(run, "settle", None)
            if settle is not None:  # a run, untimed, that hands back what the session holds free between turns
                settle()
                release_memory()
            if opening and memory is not None:
                self.held_mib = max(0.0, memory.rss() - before)
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
            release_memory()

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
    memory: Memory | None = None,
) -> Fitting:
    """Time the candidates in interleaved rounds within ``budget_s`` seconds and choose one (see the module).

    Args:
        candidates: every variant under every setting, in a fixed order (the order decides nothing but ties).
        clock: seconds, monotonic (a test's fake clock); ``pause``: waits that many seconds on it.
        progress: called as ``progress(label, done, total)`` after each candidate's turn.
        memory: this process's memory (:func:`process_memory`): what a plain run takes above the idle process (its
            peak when the search starts is what verifying the variants took; the defaults' session is the same run,
            measured in its screening turn) bounds the finalists' sessions (None: no bound but what they can still
            win).
    """
    began = clock()

    def spent() -> float:
        return clock() - began

    release_memory()  # what verifying the variants freed
    verified = memory.peak() - memory.rss() if memory is not None else 0.0  # above the idle process
    pool = _interleaved(candidates)
    for k, candidate in enumerate(pool):
        if spent() > budget_s / 2 and any(c.samples_ms for c in pool):
            break
        pause(SETTLE_S)
        candidate.time(SCREEN_RUNS, clock, memory=memory)
        candidate.release()  # one session open at a time: a finalist is opened again for the final rounds
        if progress is not None:
            progress(f"fitting: screening {candidate.variant} ({candidate.settings.text()})", k + 1, len(pool))
    room = float("inf")
    if memory is not None:  # a plain run's: what verifying took, or what the defaults' session took (the same run)
        plain = max([verified] + [c.peak_mib for c in pool if c.defaults and c.peak_mib is not None])
        room = PEAK_ROOM * max(plain, MIN_ROOM_MIB)
    finalists = select_finalists(pool, room)
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
    if chosen is not None and chosen.defaults and not why:
        why = _none_could_win(pool)
    return Fitting(ranked, chosen, why, spent(), rounds, budget_s)


def _none_could_win(pool: Sequence[Candidate]) -> str:
    """Why onnxruntime's defaults were kept with no other finalist ("" when no other candidate was timed)."""
    timed = [c for c in pool if c.error is None and c.samples_ms]
    others = [c for c in timed if not c.defaults]
    if not others:
        return ""
    fastest = min(c.median_ms for c in timed)
    if all(c.median_ms > FAR_SLOWER * fastest for c in others):
        return (
            f"onnxruntime's defaults were kept: every other candidate ran more than {FAR_SLOWER:g}x the fastest's "
            "median in screening, too slow to win"
        )
    return (
        f"onnxruntime's defaults were kept: every other candidate that could win would have taken the memory beyond "
        f"{PEAK_ROOM:g}x what a plain run takes"
    )


def select_finalists(pool: Sequence[Candidate], room: float = float("inf")) -> list[Candidate]:
    """The candidates that go on to the final rounds: onnxruntime's defaults, then each variant's best :data:`KEEP`
    settings by screening median, fastest first, but for one that cannot win (its median more than
    :data:`FAR_SLOWER` times the fastest candidate's) or whose session would take the memory the finalists open
    together take beyond ``room`` MiB (:func:`_fits`)."""
    timed = [c for c in pool if c.error is None and c.samples_ms]
    if not timed:
        return []
    fastest = min(c.median_ms for c in timed)
    chosen = [c for c in timed if c.defaults]
    seen: dict[str, int] = {}
    for candidate in sorted((c for c in timed if not c.defaults), key=lambda c: c.median_ms):
        if candidate.median_ms > FAR_SLOWER * fastest:
            break
        seen[candidate.variant] = seen.get(candidate.variant, 0) + 1
        if seen[candidate.variant] <= KEEP and _fits([*chosen, candidate], room):
            chosen.append(candidate)
    return chosen


def _fits(group: Sequence[Candidate], room: float) -> bool:
    """Whether sessions open together stay within ``room`` MiB: while any one of them opens or runs (what its first
    turn took at most) the others hold what they held once settled."""
    held = [c.held_mib or 0.0 for c in group]
    took = [c.peak_mib or 0.0 for c in group]
    return all(sum(held) - h + t <= room for h, t in zip(held, took, strict=True))


class Watch:
    """The most memory seen while a block ran (MiB)."""

    def __init__(self, high: float = 0.0) -> None:
        self.high = high


class Memory(Protocol):
    """A process's resident memory, in MiB: now, its peak so far, and the most it reaches while a block runs."""

    def rss(self) -> float: ...

    def peak(self) -> float: ...

    def watch(self) -> contextlib.AbstractContextManager[Watch]: ...


class ProcessMemory:
    """This process's memory: ``/proc/self/statm`` read every :data:`WATCH_S` on a thread of its own while a block
    runs (onnxruntime lets the thread run while it opens a session and while it runs one)."""

    def rss(self) -> float:
        return rss_mib() or 0.0

    def peak(self) -> float:
        return peak_rss_mib()

    @contextlib.contextmanager
    def watch(self) -> Iterator[Watch]:
        seen = Watch(self.rss())
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(WATCH_S):
                seen.high = max(seen.high, self.rss())

        thread = threading.Thread(target=sample, name="mgedump-memory", daemon=True)
        thread.start()
        try:
            yield seen
        finally:
            stop.set()
            thread.join()
            seen.high = max(seen.high, self.rss())


def process_memory() -> ProcessMemory | None:
    """This process's memory, where the system says it (``/proc``); None elsewhere (fitting's finalists then have
    no bound but what they can still win)."""
    return ProcessMemory() if rss_mib() is not None else None


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
    ends its turn, and opening it again where it is closed (the first round)."""
    return sum(
        SETTLE_S + (FINAL_RUNS + 2) * c.median_ms / 1000 + (0.0 if c.open else c.open_s)
        for c in finalists
        if c.samples_ms
    )


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
