"""The fitting of a bundle as the reports show it: every variant verified, the ranked candidates, the choice.

:class:`FittingRecord` is built from :class:`mgedump.commands.fitting.FittingResult` (``of``) and from a saved
JSON report (``from_json``); the console, JUnit and HTML render its :meth:`~FittingRecord.table`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base.jsontypes import JsonObject
from ..model.session import SessionSettings
from .jsonvalues import optional

COLUMNS = ["rank", "variant", "settings", "median ms", "p90 ms", "speed vs fp32", "certified err", "runs", "timed in"]
FLOAT32 = "fp32"


@dataclass
class FittingRow:
    """One candidate timed: a variant under one choice of settings."""

    variant: str
    session: SessionSettings
    median_ms: float | None
    p90_ms: float | None
    runs: int
    speedup: float | None = None  # float32's finalist's median over this one's (None: no float32 finalist)
    certified: dict[str, float | None] = field(default_factory=dict)
    error: str | None = None
    finalist: bool = False  # timed in the final rounds (the others: one screening turn)
    chosen: bool = False  # the choice (not in the JSON row: the record's ``chosen`` says it)

    @property
    def settings(self) -> str:
        return self.session.text()

    def cells(self, rank: int) -> list[str]:
        number = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
        certified = ", ".join(f"{k} {number(v, '.3g')}" for k, v in self.certified.items()) or "-"
        return [
            str(rank),
            self.variant,
            self.settings,
            number(self.median_ms, ".4g"),
            number(self.p90_ms, ".4g"),
            "-" if self.speedup is None else f"{self.speedup:.2f}x",
            certified,
            str(self.runs) if self.error is None else f"not timed: {self.error}",
            ("final rounds, chosen" if self.chosen else "final rounds") if self.finalist else "screening",
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            **self.session.to_json(),
            "median_ms": self.median_ms,
            "p90_ms": self.p90_ms,
            "runs": self.runs,
            "speedup": self.speedup,
            "certified": dict(self.certified),
            "error": self.error,
            "finalist": self.finalist,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FittingRow:
        return cls(
            variant=str(data["variant"]),
            session=SessionSettings.from_json(data),
            median_ms=optional(data.get("median_ms")),
            p90_ms=optional(data.get("p90_ms")),
            runs=int(data.get("runs") or 0),
            speedup=optional(data.get("speedup")),
            certified={str(k): optional(v) for k, v in (data.get("certified") or {}).items()},
            error=None if data.get("error") is None else str(data["error"]),
            finalist=data.get("finalist") is True,
        )


@dataclass
class FittingRecord:
    """A bundle's fitting.

    Attributes:
        variants: each variant's verification: ``{"name", "passed", "error"}``.
        rows: the candidates timed, fastest first (the finalists, then the others).
        chosen: the choice as ``--fitting-out`` writes it (None: no variant passed).
        why: why a simpler variant was chosen over a faster one, if it was.
        budget_s, seconds, rounds: the search's budget, how long it took, the final rounds it ran.
    """

    variants: list[JsonObject]
    rows: list[FittingRow]
    chosen: JsonObject | None
    why: str = ""
    budget_s: float = 0.0
    seconds: float = 0.0
    rounds: int = 0

    @classmethod
    def of(cls, result: Any) -> FittingRecord:
        """The record of a :class:`~mgedump.commands.fitting.FittingResult`."""
        found = result.fitting
        certified = {c.name: c.certified for c in result.checks}
        rows = []
        for candidate in found.ranked if found is not None else []:
            median = candidate.median_ms if candidate.samples_ms else None
            rows.append(
                FittingRow(
                    candidate.variant,
                    candidate.settings,
                    median,
                    candidate.p90_ms if candidate.samples_ms else None,
                    len(candidate.samples_ms),
                    certified=dict(certified.get(candidate.variant, {})),
                    error=candidate.error,
                    finalist=candidate.finalist,
                    chosen=found is not None and candidate is found.chosen,
                )  # fmt: skip
            )
        speedups(rows)
        return cls(
            variants=[{"name": c.name, "passed": c.passed, "error": c.error} for c in result.checks],
            rows=rows,
            chosen=result.chosen,
            why=found.why if found is not None else "",
            budget_s=found.budget_s if found is not None else 0.0,
            seconds=found.seconds if found is not None else 0.0,
            rounds=found.rounds if found is not None else 0,
        )

    def table(self) -> list[list[str]]:
        """The ranked table: a header, then a row per candidate."""
        return [COLUMNS, *(row.cells(k) for k, row in enumerate(self.rows, 1))]

    def choice_line(self) -> str:
        if self.chosen is None:
            return "fitting: no variant passed its checks: nothing to choose"
        c = self.chosen
        line = (
            f"fitting: chose {c['variant']} ({SessionSettings.from_json(c).text()}): median {c['median_ms']:.4g} ms, p90 "
            f"{c['p90_ms']:.4g} ms; {len(self.rows)} candidate(s), {self.rounds} final round(s) in {self.seconds:.1f} s "
            f"of a {self.budget_s:g} s budget"
        )
        return f"{line}; {self.why}" if self.why else line

    def to_json(self) -> dict[str, Any]:
        return {
            "variants": [dict(v) for v in self.variants],
            "rows": [row.to_json() for row in self.rows],
            "chosen": None if self.chosen is None else dict(self.chosen),
            "why": self.why,
            "budget_s": self.budget_s,
            "seconds": self.seconds,
            "rounds": self.rounds,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FittingRecord:
        chosen = None if data.get("chosen") is None else dict(data["chosen"])
        rows = [FittingRow.from_json(row) for row in data.get("rows") or []]
        mark = next((r for r in rows if chosen is not None and r.finalist and _is(r, chosen)), None)
        if mark is not None:
            mark.chosen = True
        return cls(
            variants=[dict(v) for v in data.get("variants") or []],
            rows=rows,
            chosen=chosen,
            why=str(data.get("why") or ""),
            budget_s=float(data.get("budget_s") or 0.0),
            seconds=float(data.get("seconds") or 0.0),
            rounds=int(data.get("rounds") or 0),
        )


def speedups(rows: list[FittingRow]) -> None:
    """Each row's speed against float32: float32's finalist's median over the row's. The finalist timed in the
    final rounds, not a screening turn of a few runs (the best of those is luck as often as speed): the chosen row
    when it is float32, else the one float32's screening kept, else onnxruntime's defaults when they are float32."""
    finalists = [r for r in rows if r.variant == FLOAT32 and r.finalist and r.median_ms]
    base = next((r for r in finalists if r.chosen), None) or next(
        (r for r in finalists if r.session.threads is not None), finalists[0] if finalists else None
    )
    base_ms = base.median_ms if base is not None else None
    for row in rows:
        row.speedup = None if base_ms is None or not row.median_ms else base_ms / row.median_ms


def _is(row: FittingRow, chosen: dict[str, Any]) -> bool:
    """The row of the choice: its variant and settings."""
    return row.variant == chosen.get("variant") and row.session == SessionSettings.from_json(chosen)
