"""The latency gate (``mgerun --max-latency [CASE:]MS``, ``--baseline REPORT --max-slowdown R``): each timed test
case's percentile against a limit, or against the same bundle, variant and test case of an earlier report, decided
with the tests of :mod:`mgedump.measure.gate` so that the noise of a shared machine does not fail it
(docs/verify.md#latency-gates). A test case too slow fails the gate: exit code 3, unless something worse happened
(docs/exit-codes.md). A test case too slow is timed again, in more rounds, before it fails
(:func:`mgedump.measure.gate.judge_rounds`): ``retime`` times it (the caller knows how the bundle ran).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..base.errors import MgeError
from ..base.naming import option_name
from ..measure.gate import ROUNDS, SIGNIFICANCE, Round, judge_baseline, judge_limit, too_slow
from ..options import GateOptions
from ..report.schema import RunReport

_KEYS = {"p50": "median", "p90": "p90", "p99": "p99"}  # each percentile's key in a test case's latency_ms

Retime = Callable[[str, "str | None", int], Sequence[float]]
"""``retime(source, variant, index)``: test case ``index`` of the bundle at ``source`` (its variant) timed again, as
it was timed: its new runs (ms)."""


def _figure(case: Any, percentile: str) -> float | None:
    value = case.timing.latency.to_json().get(_KEYS[percentile])
    return float(value) if isinstance(value, (int, float)) else None


def baseline_cases(path: str) -> dict[tuple[str, int], Any]:
    """An earlier report's timed test cases, by (bundle name, test case index).

    Raises:
        ReportError: a report that cannot be read.
    """
    from ..report.checked import read_report

    report, _ = read_report(path, f"{option_name('baseline')} report")
    return {(bundle.name, case.index): case for bundle in report.bundles for case in bundle.test_cases}


def apply_gate(report: RunReport, gate: GateOptions, retime: Retime | None = None) -> dict[str, Any] | None:
    """The gate's verdict on every timed test case of ``report`` (none: no gate asked for); the record goes into
    the report as ``latency_gate`` (docs/reports.md#the-latency-gate). A test case too slow is timed again with
    ``retime`` (none: its runs decide alone)."""
    if not gate.active:
        return None
    base = baseline_cases(gate.baseline) if gate.baseline else {}
    checks: list[dict[str, Any]] = []
    unmatched = 0
    for bundle in report.bundles:
        for case in bundle.test_cases:
            runs = list(case.timing.latencies_ms)
            figure = _figure(case, gate.latency_percentile)
            if case.error is not None or not runs or figure is None:
                continue
            where = f"{bundle.name} test case {case.index}"
            limit = gate.limit_for(case.index)
            again = None if retime is None else _again(retime, bundle.source, bundle.variant, case.index)
            if limit is not None:
                checks.append(
                    _against_limit(where, bundle.name, case.index, runs, figure, limit, gate.latency_percentile, again)
                )
            if gate.baseline:
                earlier = base.get((bundle.name, case.index))
                then = None if earlier is None else _figure(earlier, gate.latency_percentile)
                if earlier is None or then is None or not earlier.timing.latencies_ms:
                    unmatched += 1
                    continue
                checks.append(
                    _against_baseline(where, bundle.name, case.index, runs, figure, earlier, then, gate, again)
                )  # fmt: skip
    return {
        "percentile": gate.latency_percentile,
        "max_latency": [{"test_case": case, "ms": ms} for case, ms in gate.max_latency],
        "baseline": gate.baseline,
        "max_slowdown": gate.max_slowdown if gate.baseline else None,
        "significance": SIGNIFICANCE,
        "passed": all(check["passed"] for check in checks),
        "no_baseline": unmatched,
        "checks": checks,
    }


def _again(retime: Retime, source: str, variant: str | None, index: int) -> Callable[[], Sequence[float]]:
    """One more round of a test case's runs; none when it cannot be timed again (the rounds timed then decide)."""

    def again() -> Sequence[float]:
        try:
            return retime(source, variant, index)
        except MgeError:  # the bundle went away or broke since it ran: the rounds timed decide
            return []

    return again


def _against_limit(
    where: str,
    name: str,
    index: int,
    runs: Sequence[float],
    figure: float,
    limit: float,
    percentile: str,
    again: Callable[[], Sequence[float]] | None = None,
) -> dict[str, Any]:
    rounds = judge_limit(runs, limit, percentile, again, figure)
    failed = too_slow(rounds)
    first = rounds[0]
    line = (
        f"{where}: {percentile} {figure:.4g} ms, limit {limit:.4g} ms ({first.over} of {first.runs} runs over it, "
        f"p = {first.p:.2g})"
    )
    line += _more_rounds(rounds, lambda r: f"{percentile} {r.ms:.4g} ms ({r.over} of {r.runs} over, p = {r.p:.2g})")
    return {
        "bundle": name, "test_case": index, "kind": "limit", "ms": figure, "limit_ms": limit, "p": first.p,
        "rounds": [r.to_json() for r in rounds], "passed": not failed,
        "line": f"{line}: {'TOO SLOW' if failed else 'ok'}",
    }  # fmt: skip


def _more_rounds(rounds: Sequence[Round], said: Callable[[Round], str]) -> str:
    """What the line adds of the rounds timed again (nothing: one round)."""
    if len(rounds) < 2:
        return ""
    return f"; timed again (up to {ROUNDS} rounds, too slow if most are): {'; '.join(map(said, rounds[1:]))}"


def _rank_test(chance: float | None) -> str:
    return "too few runs for the rank test" if chance is None else f"rank test p = {chance:.2g}"


def _against_baseline(
    where: str,
    name: str,
    index: int,
    runs: Sequence[float],
    figure: float,
    earlier: Any,
    then: float,
    gate: GateOptions,
    again: Callable[[], Sequence[float]] | None = None,
) -> dict[str, Any]:
    factor = gate.max_slowdown or 1.0
    percentile = gate.latency_percentile
    rounds = judge_baseline(runs, earlier.timing.latencies_ms, then, factor, percentile, again, figure)
    failed = too_slow(rounds)
    first = rounds[0]
    ratio = first.ratio if first.ratio is not None else float("inf")
    line = (
        f"{where}: {percentile} {figure:.4g} ms, baseline {then:.4g} ms: {ratio:.2f}x, at most {factor:g}x "
        f"({_rank_test(first.p)})"
    )
    line += _more_rounds(rounds, lambda r: f"{percentile} {r.ms:.4g} ms: {r.ratio:.2f}x ({_rank_test(r.p)})")
    return {
        "bundle": name, "test_case": index, "kind": "baseline", "ms": figure, "baseline_ms": then, "ratio": ratio,
        "p": first.p, "rounds": [r.to_json() for r in rounds], "passed": not failed,
        "line": f"{line}: {'TOO SLOW' if failed else 'ok'}",
    }  # fmt: skip


def gate_lines(gate: dict[str, Any] | None, verbose: bool) -> list[str]:
    """What the console says of the gate: every check with ``verbose``, else the failed ones; then the total."""
    if not gate:
        return []
    checks = gate["checks"]
    lines = [f"latency gate: {c['line']}" for c in checks if verbose or not c["passed"]]
    failed = sum(not c["passed"] for c in checks)
    total = f"latency gate ({gate['percentile']}): {len(checks)} check(s), {failed} too slow"
    if gate.get("no_baseline"):
        total += f"; {gate['no_baseline']} test case(s) not in the baseline, not compared"
    if not checks and not gate.get("no_baseline"):  # timed test cases the baseline lacks are said above
        total += (
            f" (no timed test case: with {option_name('jobs')} over 1, give {option_name('jobs_timing', 'serial')})"
        )
    return [*lines, total]
