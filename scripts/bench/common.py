"""What every section shares: the results a section returns (:class:`Table`, :class:`Check`), the invocation's
:class:`Context`, child processes measured from spawn to reap (:func:`run_process`, :func:`run_worker`), runs
alternated (:func:`alternate`), and the figures' formatting."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
RUNNER = SCRIPTS / "bench.py"  # the command line; workers run through it too


DEFAULT_OUT = ROOT / "docs" / "benchmarks.md"


MIB = 1 << 20


def log(message: str) -> None:
    """Progress on stderr (stdout carries the Markdown)."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


@dataclass
class Check:
    """One target: what it is about, the target, what was measured, whether it was met (None: not measured)."""

    what: str
    target: str
    measured: str
    met: bool | None


@dataclass
class Table:
    """What a section returns: one Markdown table plus its targets and notes."""

    title: str
    about: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Context:
    """Settings and shared state of one invocation, handed to every section."""

    quick: bool
    runs: int
    tmp: Path
    cache: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, tuple[str, ...]] = field(default_factory=dict)  # section -> the parts asked for (none: all)

    def wants(self, section: str, part: str) -> bool:
        """Whether to run this part of a section (``--sections big:many`` runs only that part of ``big``)."""
        return part in self.parts.get(section, (part,))

    def once(self, key: str, make: Callable[[], Any]) -> Any:
        """make() the first time key is asked for; its result (or exception) after that, e.g. the pack runs that
        sections pack and rss share."""
        if key not in self.cache:
            try:
                self.cache[key] = (True, make())
            except Exception as exc:
                self.cache[key] = (False, exc)
        done, value = self.cache[key]
        if not done:
            raise value
        return value


@dataclass
class ProcResult:
    """A finished child process: wall time, its own peak RSS, exit code, the end of its stderr, its CPU time."""

    wall_s: float
    maxrss_kib: int
    returncode: int
    stderr_tail: str
    cpu_s: float = 0.0  # its own user + system time: on a busy machine, what a wall time grows with

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def failure(self) -> str:
        lines = [line for line in self.stderr_tail.splitlines() if line.strip()]
        return f"exit code {self.returncode}: {lines[-1] if lines else '(no stderr)'}"


def run_process(argv: Sequence[str | Path], *, cwd: Path | None = None) -> ProcResult:
    """Run a command (stdout discarded); time it from spawn to reap and read its own peak RSS with os.wait4."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [str(a) for a in argv], cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait again
        err.seek(0)
        tail = err.read()[-4000:].decode("utf-8", "replace")
    return ProcResult(wall, usage.ru_maxrss, proc.returncode, tail, usage.ru_utime + usage.ru_stime)


def console_script(name: str) -> list[str]:
    """The installed console script next to this interpreter (as a user runs it), else an equivalent python -c."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return [str(here)]
    found = shutil.which(name)
    if found:
        return [found]
    return [sys.executable, "-c", f"import sys; from mgedump.cli import {name}_main; sys.exit({name}_main())"]


def polygraphy_command() -> list[str] | None:
    """The polygraphy console script, or None when it is not installed."""
    here = Path(sys.executable).parent / "polygraphy"
    if here.exists():
        return [str(here)]
    found = shutil.which("polygraphy")
    return [found] if found else None


def run_worker(name: str, tmp: Path, **kwargs: Any) -> Any:
    """Run WORKERS[name](**kwargs) in a fresh interpreter and return its JSON result.

    Anything heavy (numpy, onnx, onnxruntime) is imported there, never here:
    this process's peak RSS is the floor of every child's ru_maxrss.
    """
    result = tmp / f"worker-{name}-{time.monotonic_ns()}.json"
    proc = run_process([sys.executable, RUNNER, "--worker", name, json.dumps(kwargs), result], cwd=ROOT)
    if not proc.ok:
        raise RuntimeError(f"worker {name} failed ({proc.failure()})\n{proc.stderr_tail}")
    value = json.loads(result.read_text())
    result.unlink()
    return value


def alternate(names: Sequence[str], runs: int) -> Iterator[tuple[int, str]]:
    """(run, name) in rotated order: A B C, B C A, C A B, ... so no one always goes first."""
    for run in range(runs):
        shift = run % len(names)
        for name in list(names[shift:]) + list(names[:shift]):
            yield run, name


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


@dataclass(frozen=True)
class Spread:
    """Ratios taken pair by pair (a run of one command over the other's run in the same round): how many, their
    median, quartiles and extremes. A ratio of medians hides how far single pairs wander on a shared machine."""

    n: int
    median: float
    q1: float
    q3: float
    low: float
    high: float

    @classmethod
    def of(cls, ratios: Sequence[float]) -> Spread | None:
        if not ratios:
            return None
        ordered = sorted(ratios)
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else ordered * 3
        return cls(len(ordered), statistics.median(ordered), q1, q3, ordered[0], ordered[-1])

    def text(self) -> str:
        """``1.093 (IQR 1.071-1.120, min-max 1.02-1.21, 15 pairs)``."""
        return (
            f"{self.median:.3f} (IQR {self.q1:.3f}-{self.q3:.3f}, min-max {self.low:.3f}-{self.high:.3f}, "
            f"{self.n} pairs)"
        )


def pair_ratios(a: Sequence[ProcResult], b: Sequence[ProcResult], key: Callable[[ProcResult], float]) -> list[float]:
    """a / b round by round (one run of each a round), for the rounds where both ran and b is not 0."""
    return [key(x) / key(y) for x, y in zip(a, b, strict=True) if x.ok and y.ok and key(y)]


def fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def fmt_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def verdict(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "not measured"}[met]


def at_most(value: float | None, limit: float) -> bool | None:
    return None if value is None else value <= limit


def mib(n_bytes: float) -> str:
    if n_bytes >= 1 << 30:
        return f"{n_bytes / (1 << 30):.2f} GiB"
    if n_bytes >= MIB:
        return f"{n_bytes / MIB:.1f} MiB"
    return f"{n_bytes / 1024:.0f} KiB"


def ratio_rows(
    table: Table, rounds: list[dict[str, float]], a: str, b: str, digits: int, swap: bool = False
) -> float | None:
    """A row per round (its two figures and a / b), then the medians; return the median ratio.

    With ``swap``, the columns show b before a (the table's order), the ratio is still a / b.
    """
    ratios = []
    first, second = (b, a) if swap else (a, b)
    for index, entry in enumerate(rounds, 1):
        ratios.append(entry[a] / entry[b])
        table.rows.append([str(index), fmt(entry[first], digits), fmt(entry[second], digits), fmt_ratio(ratios[-1])])
    overall = median(ratios)
    table.rows.append(
        [
            "**median**",
            fmt(median([e[first] for e in rounds]), digits),
            fmt(median([e[second] for e in rounds]), digits),
            f"**{fmt_ratio(overall)}**",
        ]
    )
    return overall


def run_fresh(argv: Sequence[str | Path], out: Path) -> ProcResult:
    """Run a pack command into an empty output folder, then delete what it wrote."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    try:
        return run_process(argv, cwd=out)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def ok_values(results: list[ProcResult], key: Callable[[ProcResult], float]) -> list[float]:
    return [key(r) for r in results if r.ok]


def failure_notes(label: str, results: dict[str, list[ProcResult]]) -> list[str]:
    notes = []
    for name, runs in results.items():
        failed = [r for r in runs if not r.ok]
        if failed:
            notes.append(
                f"{label}: {name} failed in {len(failed)} of {len(runs)} runs ({failed[0].failure()}); "
                "medians use the runs that passed."
            )
    return notes


def read_first(path: str, prefix: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip() if ":" in line else line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return None
