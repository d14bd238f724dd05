"""The int8 search: which nodes to keep float for every output to meet its bound (docs/int8.md, "The search: what stays float").

Every candidate is one quantization (the calibration reused) opened *and run* in the child
(:class:`~mgedump.optimize.isolate.Opener`); a candidate that crashes onnxruntime or gives no answer in time is
skipped and named, unless it is the first (everything int8) or the last (every node float). The search:

1. ranks the nodes by the error each *introduces* (its output's error beyond what its inputs carry in, from one
   run of both models with every tensor exposed), and keeps float the shortest prefix of those that introduce a
   tenth of the bound or more that passes: 1, 2, 4, ... nodes, then bisected. A candidate that destroys the outputs
   (:attr:`~mgedump.optimize.quantize_stats.OutputStats.destroyed`) skips this step;
2. otherwise ranks them by what keeping each float *buys on the outputs*: each node, most error introduced first,
   is kept float alone and the candidate run, as long as the budget allows (:class:`Budget`); the ranking is the
   drop of the worst output's error against its bound, then of the mean absolute error over every output (which
   credits a node that mends one branch of several). The nodes not measured follow in the order of step 1, then
   those that bought nothing, then every other node: the ranking holds every node. The shortest prefix that
   passes is kept: 1, 2, 4, ..., then bisected; when the budget is spent before any passes, the last candidate
   (the caller's) is run.

The run with every tensor exposed is made in the child too; when it is lost (a crash, a hang), step 1 has nothing
to rank and step 2 measures the nodes alone in graph order.

How much of the model may stay float is judged by the caller (:mod:`.quantize_macs`): a candidate beyond it is
never run (:attr:`Searcher.allows`), and the caller's largest set within it runs once a candidate misses
(:attr:`Searcher.on_miss`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.bounds import Bounds
from ..base.errors import ModelError, OptimizeError
from .isolate import CandidateFailed
from .quantize_blame import NodeErr
from .quantize_stats import Measure

MAX_RUNS = 32  # candidate runs one search may make (the last candidate, every node float, runs whatever the budget)
MAX_SECONDS = 600.0  # seconds one search may take, its diagnosis included
ALL_FLOAT_WHY = "every node float: the budget ran out before a smaller set was found to pass"


@dataclass
class Budget:
    """What a search may spend: candidate runs and seconds. ``stopped_by`` says which ran out, if one did."""

    runs: int = MAX_RUNS
    seconds: float = MAX_SECONDS
    used: int = 0
    started: float = field(default_factory=time.monotonic)
    stopped_by: str | None = None

    def left(self) -> int:
        """Runs left (0 once the seconds are spent)."""
        if time.monotonic() - self.started > self.seconds:
            self.stopped_by = self.stopped_by or "seconds"
            return 0
        if self.used >= self.runs:
            self.stopped_by = self.stopped_by or "runs"
        return max(self.runs - self.used, 0)

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "seconds": self.seconds, "stopped_by": self.stopped_by}


@dataclass
class Outcome:
    """One candidate, run: the nodes it keeps float (with why), its file, its outputs and their errors."""

    kept: dict[str, str]
    path: str
    measure: Measure
    got: list[list[np.ndarray]]
    mean_abs: float  # the mean absolute error over every float output and test case

    def passes(self, bounds: Bounds) -> bool:
        return self.measure.passes(bounds)

    def over(self, bounds: Bounds) -> float:
        """The worst output's error over its bound (1 or less: it passes)."""
        return max(
            (err / max(bounds.of(name).maxerr, 1e-30) for case in self.measure.errs for name, err in case.items()),
            default=0.0,
        )


Probe = Callable[[Mapping[str, str]], Outcome]


@dataclass
class Searcher:
    """Runs candidates for one search within its budget; a candidate that fails in the child is skipped and noted.

    Attributes:
        probe: quantizes with these nodes kept float, runs the candidate in the child and measures it.
        bounds: what every output must meet.
        skipped: the candidates skipped, each said in a line.
    """

    probe: Probe
    bounds: Bounds
    budget: Budget
    skipped: list[str] = field(default_factory=list)
    allows: Callable[[Mapping[str, str]], bool] | None = None  # a kept-float set the share allows (else not run)
    on_miss: Callable[[], None] | None = None  # called once, after the first candidate run that misses the bounds
    _seen: dict[frozenset[str], Outcome | None] = field(default_factory=dict)

    def run(self, keep: Mapping[str, str], *, last: bool = False) -> Outcome | None:
        """The candidate keeping these nodes float (cached), or None when the budget is spent (unless ``last``),
        when it keeps more float than :attr:`allows` (unless ``last``: never run), or when the child failed on it.
        A ``last`` candidate skipped before is run again: its failure is a refusal."""
        key = frozenset(keep)
        if key in self._seen and (self._seen[key] is not None or not last):
            return self._seen[key]
        if not last and self.allows is not None and not self.allows(keep):
            return None
        if not last and not self.budget.left():
            return None
        self.budget.used += 1
        try:
            outcome: Outcome | None = self.probe(keep)
        except (OptimizeError, ModelError) as exc:  # a crash, a hang, a quantizer or a run that fails
            if last:
                raise
            cause = exc.cause if isinstance(exc, CandidateFailed) else exc.message
            self.skipped.append(f"int8: a candidate with {len(keep)} node(s) kept float was skipped: {cause}")
            outcome = None
        self._seen[key] = outcome
        if outcome is not None and self.on_miss is not None and not outcome.passes(self.bounds):
            on_miss, self.on_miss = self.on_miss, None
            on_miss()
        return outcome

    def passes(self, outcome: Outcome | None) -> bool:
        return outcome is not None and outcome.passes(self.bounds)


def keep_introducing(kept: Mapping[str, str], nodes: Sequence[NodeErr], maxerr: float) -> dict[str, str]:
    """The nodes kept float already, and these, each with the error it introduces."""
    chosen = dict(kept)
    for node in nodes:
        chosen[node.name] = (
            f"int8 err {node.err:.3g} at its output against {node.carried:.3g} at its inputs on test case "
            f"{node.case} (maxerr {maxerr:g})"
        )
    return chosen


def shortest_prefix(
    searcher: Searcher, keep: Callable[[int], dict[str, str]], length: int, *, complete: bool
) -> tuple[dict[str, str], Outcome] | None:
    """The shortest prefix (of a ranking ``length`` long) whose nodes kept float pass: 1, 2, 4, ... then bisected.

    Args:
        keep: the nodes kept float for a prefix of that length.
        complete: the whole ranking is every node: it is the last candidate, run whatever the budget.

    Returns:
        (kept, outcome), or None when no prefix tried passes.
    """
    low, high, best = 0, 1, None
    while best is None:
        high = min(high, length)
        outcome = searcher.run(keep(high))
        if searcher.passes(outcome):
            best = (high, outcome)
        elif high == length or (outcome is None and not searcher.budget.left()):
            if not complete:
                return None
            high = length
            outcome = searcher.run(keep(length), last=True)
            if not searcher.passes(outcome):
                return None
            best = (length, outcome)
        else:
            low, high = high, high * 2
    while best[0] - low > 1 and searcher.budget.left():
        middle = (low + best[0]) // 2
        outcome = searcher.run(keep(middle))
        if searcher.passes(outcome):
            best = (middle, outcome)
        else:
            low = middle
    assert best[1] is not None
    return keep(best[0]), best[1]


def benefit_ranking(
    searcher: Searcher, kept: Mapping[str, str], proxy: Sequence[NodeErr], others: Sequence[str], first: Outcome
) -> tuple[list[tuple[str, str]], int, tuple[dict[str, str], Outcome] | None]:
    """Every node not kept float, ranked by what keeping it float alone buys on the outputs (the module's
    docstring), each with why; how many were measured alone; and a single node that passes alone, if one did.

    Args:
        proxy: the nodes ranked by the error they introduce, most first (none when the diagnosis was lost: the
            nodes are then measured alone in graph order).
        others: the nodes the ranking must also hold (every other touched node), in graph order.
        first: the candidate with everything int8.
    """
    bounds, maxerr = searcher.bounds, searcher.bounds.default.maxerr
    reserve = 2 * math.ceil(math.log2(len(proxy) + len(others) + 1)) + 2  # runs kept for the prefix search
    base_over, base_mean = first.over(bounds), first.mean_abs
    gains: dict[str, tuple[float, float, float]] = {}
    measured: list[str] = []
    for name in [node.name for node in proxy] or [name for name in others if name not in kept]:
        if searcher.budget.left() <= reserve:
            break
        outcome = searcher.run({**kept, name: ""})
        if outcome is None:  # skipped (it failed in the child): ranked as if not measured
            continue
        measured.append(name)
        over = outcome.over(bounds)
        drop = (base_over - over) / base_over if base_over > 0 else 0.0
        mean_drop = (base_mean - outcome.mean_abs) / base_mean if base_mean > 0 else 0.0
        gains[name] = (round(drop, 2), mean_drop, over)
        if outcome.passes(bounds):
            why = f"kept float alone, it brings the worst err to {_of_bound(over)}"
            return [], len(measured), ({**kept, name: why}, outcome)
    ranked = sorted((n for n in gains if gains[n][:2] > (0.0, 0.0)), key=lambda n: gains[n][:2], reverse=True)
    order = [(name, _bought(gains[name][2], base_over, k + 1)) for k, name in enumerate(ranked)]
    introducing = {n.name: n for n in proxy}
    for node in proxy:
        if node.name not in measured:
            order.append((node.name, _introduces(node, maxerr)))
    chosen = {name for name, _ in order}
    for node in proxy:
        if node.name not in chosen and node.name in measured:
            order.append((node.name, "kept float with the nodes ranked above it (alone it buys nothing measurable)"))
    chosen = {name for name, _ in order}
    for name in others:
        if name not in chosen and name not in kept:
            why = _introduces(introducing[name], maxerr) if name in introducing else "kept float with the rest"
            order.append((name, why))
    return order, len(measured), None


def _of_bound(over: float) -> str:
    return f"{over:.0%} of its bound"


def _bought(over: float, base_over: float, place: int) -> str:
    return (
        f"kept float alone, it brings the worst err from {_of_bound(base_over)} to {_of_bound(over)} (ranked {place} "
        "by what it buys on the outputs)"
    )


def _introduces(node: NodeErr, maxerr: float) -> str:
    return (
        f"int8 err {node.err:.3g} at its output against {node.carried:.3g} at its inputs on test case {node.case} "
        f"(maxerr {maxerr:g}; ranked by the error it introduces, not measured alone within the budget)"
    )
