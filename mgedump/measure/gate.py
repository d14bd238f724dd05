"""The latency gate's statistics: is a test case too slow, given the noise of its runs (docs/verify.md#latency-gates)?

Both gates compare a percentile (``p50``, ``p90`` or ``p99``) and decide with a test, so that a machine's noise
does not fail them:

- against a limit (``--max-latency MS``): the percentile is over the limit, and more runs than the percentile
  allows went over it than chance explains: a one-sided binomial test of the count of runs over the limit (the
  sign test's generalisation; ``p90`` allows one run in ten over it) at :data:`SIGNIFICANCE`; and so it stays
  in most rounds of runs timed again, up to :data:`ROUNDS` (:func:`judge_limit`);
- against an earlier report (``--baseline``, ``--max-slowdown R``): the percentile is over R times the baseline's,
  and the runs are slower than the baseline's runs scaled by R beyond chance: a one-sided Mann-Whitney rank test
  (normal approximation, ties corrected) at :data:`SIGNIFICANCE`; and so it stays in most rounds of runs timed
  again, up to :data:`ROUNDS` (:func:`judge_baseline`).

Why a rank test and not fitting's interleaved rounds (:mod:`.fitting`): the baseline ran earlier, elsewhere; there
are no rounds to pair. The rank test compares the two samples as they are, needs no assumption about their shape
(latencies have long right tails) and is not moved by one stalled run.

Why a check is confirmed in more rounds: the tests take the runs as independent, and a shared machine's
noise is not: another process holding the core for a while slows a stretch of runs together, and no count of runs
within that stretch tells it from a slower model. Noise only ever adds time and comes and goes; a slower model is
slower in every round. A round too slow is therefore timed again (each round as many runs as the first, up to
:data:`ROUNDS`), and the test case fails when most rounds are too slow, the first among them: a second round too
slow fails it, a second fast enough leaves a third to decide. A model fast enough then fails only when noise
fails the first round and one of two more, about 2 x :data:`SIGNIFICANCE` squared when the rounds' noise is
independent; a slower model that each round finds with chance ``c`` fails with chance ``c (1 - (1 - c)^2)``
(0.89 for 0.9), so detection loses little. Asking every round to be too slow would cost more (``c^3``: 0.73).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..base.quantiles import quantile

SIGNIFICANCE = 0.05  # the chance of failing a test case that is fast enough, at most, per test
PERCENTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99}
MIN_RUNS = 5  # runs on each side below which the rank test cannot tell: the gate then reads the percentiles alone
ROUNDS = 3  # the most rounds of runs a check times: the runs asked for, then as many again, twice at most


def binomial_tail(count: int, runs: int, chance: float) -> float:
    """The chance of at least ``count`` of ``runs`` events, each of chance ``chance``."""
    if count <= 0:
        return 1.0
    return min(1.0, sum(math.comb(runs, k) * chance**k * (1 - chance) ** (runs - k) for k in range(count, runs + 1)))


def over_limit(latencies_ms: Sequence[float], limit_ms: float, percentile: str) -> float:
    """The chance that a test case whose ``percentile`` is at the limit has as many runs over it as these: small
    means the percentile is over the limit beyond the noise."""
    above = sum(ms > limit_ms for ms in latencies_ms)
    return binomial_tail(above, len(latencies_ms), 1 - PERCENTILES[percentile])


def slower(current_ms: Sequence[float], baseline_ms: Sequence[float], factor: float) -> float | None:
    """The chance that runs no slower than ``factor`` times the baseline's rank as high as these (the one-sided
    Mann-Whitney U test of ``current_ms`` against ``baseline_ms`` scaled by ``factor``); none: too few runs."""
    if len(current_ms) < MIN_RUNS or len(baseline_ms) < MIN_RUNS:
        return None
    a, b = list(current_ms), [ms * factor for ms in baseline_ms]
    n, m = len(a), len(b)
    ranked = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(ranked)
    ties = 0.0
    k = 0
    while k < len(ranked):
        j = k
        while j + 1 < len(ranked) and ranked[j + 1][0] == ranked[k][0]:
            j += 1
        for i in range(k, j + 1):
            ranks[i] = (k + j) / 2 + 1
        t = j - k + 1
        ties += t**3 - t
        k = j + 1
    u = sum(r for r, (_, side) in zip(ranks, ranked, strict=True) if side == 0) - n * (n + 1) / 2
    total = n + m
    variance = n * m / 12 * ((total + 1) - ties / (total * (total - 1)))
    if variance <= 0:
        return 1.0 if u <= n * m / 2 else 0.0
    z = (u - n * m / 2 - 0.5) / math.sqrt(variance)  # continuity-corrected
    return 0.5 * math.erfc(z / math.sqrt(2))


def percentile(latencies_ms: Sequence[float], which: str) -> float:
    """The percentile (``p50``, ``p90``, ``p99``) of runs, interpolated between the two nearest runs as the reports'
    figures are (``numpy.percentile``'s default)."""
    return quantile(sorted(latencies_ms), PERCENTILES[which])


@dataclass(frozen=True)
class Round:
    """One round of a test case's runs, judged: its percentile, its runs, the test's chance (none: too few runs for
    the rank test), whether it is too slow beyond the noise, and against a limit the runs over it, against a
    baseline its figure over the baseline's."""

    ms: float
    runs: int
    p: float | None
    too_slow: bool
    over: int | None = None
    ratio: float | None = None

    def to_json(self) -> dict[str, float | int | bool | None]:
        found: dict[str, float | int | bool | None] = {"ms": self.ms, "runs": self.runs, "p": self.p}
        if self.over is not None:
            found["over"] = self.over
        if self.ratio is not None:
            found["ratio"] = self.ratio
        return {**found, "too_slow": self.too_slow}


def limit_round(latencies_ms: Sequence[float], limit_ms: float, which: str, figure: float | None = None) -> Round:
    """A round of runs against a limit: too slow when its percentile (``figure``, else computed) is over the limit
    and the binomial test says so at :data:`SIGNIFICANCE`."""
    ms = percentile(latencies_ms, which) if figure is None else figure
    chance = over_limit(latencies_ms, limit_ms, which)
    above = sum(run > limit_ms for run in latencies_ms)
    return Round(ms, len(latencies_ms), chance, ms > limit_ms and chance < SIGNIFICANCE, over=above)


def baseline_round(
    latencies_ms: Sequence[float],
    baseline_ms: Sequence[float],
    then: float,
    factor: float,
    which: str,
    figure: float | None = None,
) -> Round:
    """A round of runs against a baseline's (whose percentile is ``then``): too slow when its percentile is over
    ``factor`` times ``then`` and the rank test says so at :data:`SIGNIFICANCE` (or cannot tell: too few runs)."""
    ms = percentile(latencies_ms, which) if figure is None else figure
    ratio = ms / then if then > 0 else math.inf
    chance = slower(latencies_ms, baseline_ms, factor)
    return Round(
        ms, len(latencies_ms), chance, ratio > factor and (chance is None or chance < SIGNIFICANCE), ratio=ratio
    )


def judge_rounds(
    latencies_ms: Sequence[float],
    judge: Callable[[Sequence[float]], Round],
    again: Callable[[], Sequence[float]] | None = None,
    first: Round | None = None,
    rounds: int = ROUNDS,
) -> list[Round]:
    """Every round a check timed: the runs given (``first``: already judged), then, while the first round is too
    slow and more than half of ``rounds`` neither are nor are not, the runs ``again()`` times, each judged by
    ``judge`` (no ``again``, or a round of no runs: the rounds there are decide). So a round fast enough first ends
    the check; a second round too slow fails it; a second fast enough leaves a third to decide (:func:`too_slow`)."""
    judged = [first or judge(latencies_ms)]
    while again is not None and judged[0].too_slow and len(judged) < rounds:
        slow = sum(r.too_slow for r in judged)
        if 2 * slow > rounds or 2 * (len(judged) - slow) > rounds:
            break
        more = again()
        if not more:
            break
        judged.append(judge(more))
    return judged


def judge_limit(
    latencies_ms: Sequence[float],
    limit_ms: float,
    which: str,
    again: Callable[[], Sequence[float]] | None = None,
    figure: float | None = None,
) -> list[Round]:
    """A limit check's rounds (:func:`judge_rounds` of :func:`limit_round`); ``figure``: the first round's
    percentile as reported."""
    first = limit_round(latencies_ms, limit_ms, which, figure)
    return judge_rounds(latencies_ms, lambda runs: limit_round(runs, limit_ms, which), again, first)


def judge_baseline(
    latencies_ms: Sequence[float],
    baseline_ms: Sequence[float],
    then: float,
    factor: float,
    which: str,
    again: Callable[[], Sequence[float]] | None = None,
    figure: float | None = None,
) -> list[Round]:
    """A baseline check's rounds (:func:`judge_rounds` of :func:`baseline_round`)."""
    first = baseline_round(latencies_ms, baseline_ms, then, factor, which, figure)
    return judge_rounds(latencies_ms, lambda runs: baseline_round(runs, baseline_ms, then, factor, which), again, first)


def too_slow(rounds: Sequence[Round]) -> bool:
    """Too slow beyond the noise: the first round is, and more than half the rounds timed are (one round: it
    decides; two split: not too slow)."""
    return bool(rounds) and rounds[0].too_slow and 2 * sum(r.too_slow for r in rounds) > len(rounds)
