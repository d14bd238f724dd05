"""The plots of the HTML report, drawn as inline SVG: a latency histogram, a per-run timeline, the batch-sweep
curves, the latency of every test case of a bundle, and the operator-time bars.

Each plot is a few dozen SVG elements, made in well under a millisecond, so a
report of hundreds of test cases costs nothing next to the runs it reports
(matplotlib, measured for this, took 0.4 s to import and 35 ms a test case).
Colours and strokes are classes styled once by the page (:data:`STYLE`), so
each mark is short. Every mark carries its numbers: a ``<title>`` a browser
shows on hover, and ``data-*`` attributes that the tests compare with the JSON
report. Labels sit where nothing else is drawn: marker names in the margin
above the plot (moved apart when two would touch), tick labels kept inside the
picture.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base import text

WIDTH, HEIGHT = 460, 200
LEFT, RIGHT, TOP, BOTTOM = 52, 14, 36, 34
TIMED, WARMUP, ACCENT, GRID, INK = "#3b6fb6", "#e08a1e", "#c0392b", "#e4e7eb", "#333"
MAX_MARKS = 2000  # beyond this many runs, a timeline draws bands per bucket of runs instead of one dot per run
CHAR = 5.6  # the width of one character of a 10px label, for keeping labels apart and inside the picture

STYLE = f"""
svg text {{ font: 10px system-ui, sans-serif; fill: #444; }} svg text.title {{ font-size: 11px; font-weight: 600; }}
svg text.label {{ fill: #666; }} svg .grid {{ stroke: {GRID}; }} svg .axis {{ stroke: {INK}; }}
svg .timed {{ fill: {TIMED}; }} svg .warmup {{ fill: {WARMUP}; }} svg text.warmup {{ fill: {WARMUP}; }}
svg .accent {{ fill: {ACCENT}; }} svg text.accent {{ fill: {ACCENT}; }}
svg .marker {{ stroke: {ACCENT}; stroke-dasharray: 3 2; }} svg .split {{ stroke: {WARMUP}; }}
svg .line {{ fill: none; stroke: {TIMED}; stroke-width: 0.8; opacity: 0.6; }}
svg .curve {{ fill: none; stroke-width: 1.5; }} svg .curve.rate {{ stroke: {TIMED}; }}
svg .curve.per-sample {{ stroke: {ACCENT}; }} svg .range {{ stroke: {TIMED}; opacity: 0.45; }}
svg .bar:hover, svg circle:hover {{ opacity: 0.7; }}
"""


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values (steps of 1, 2 or 5 times a power of ten) covering [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0]
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if (high - low) / (m * power) <= count + 1e-9)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 12))
    return ticks


def number(value: float) -> str:
    """A tick label: short, no trailing zeros (``150k``, ``2.5M``, ``0.05``)."""
    if value == 0:
        return "0"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if abs(value) >= scale:
            shown = value / (1e3 if suffix == "k" else scale)
            return f"{shown:.4g}{'k' if suffix == 'k' else suffix}"
    if abs(value) < 1e-3:
        return f"{value:.1e}"
    return f"{value:.4g}"


@dataclass
class Frame:
    """Plot coordinates: data ranges mapped onto the drawing area of one SVG."""

    x0: float
    x1: float
    y0: float
    y1: float
    width: int = WIDTH
    height: int = HEIGHT
    right: int = RIGHT  # the margin on the right: wider where a second axis is labelled there

    def x(self, value: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return LEFT + (value - self.x0) / span * (self.width - LEFT - self.right)

    def y(self, value: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return self.height - BOTTOM - (value - self.y0) / span * (self.height - TOP - BOTTOM)


def _n(value: float) -> str:
    """A coordinate: one decimal, none when it is whole (``166``, ``91.4``)."""
    text_ = f"{value:.1f}"
    return text_[:-2] if text_.endswith(".0") else text_


def _width(label: str) -> float:
    return len(label) * CHAR


def _label(x: float, y: float, label: str, css: str = "", width: int = WIDTH, anchor: str = "middle") -> str:
    """A text kept inside the picture: its anchor moves to ``start`` or ``end`` where it would be cut."""
    half = _width(label) / 2
    if anchor == "middle" and x - half < 1:
        anchor = "start"
        x = max(x, 1.0)
    elif anchor == "middle" and x + half > width - 1:
        anchor = "end"
        x = min(x, width - 1.0)
    elif anchor == "start" and x + 2 * half > width - 1:
        anchor, x = "end", width - 1.0
    extra = ("" if anchor == "start" else f' text-anchor="{anchor}"') + (f' class="{css}"' if css else "")
    return f'<text x="{_n(x)}" y="{_n(y)}"{extra}>{text.html(label)}</text>'


def _open(kind: str, title: str, frame: Frame, **data: object) -> list[str]:
    attrs = "".join(f' data-{k.replace("_", "-")}="{text.html(v)}"' for k, v in data.items())
    return [
        f'<svg class="plot" data-plot="{kind}"{attrs} viewBox="0 0 {frame.width} {frame.height}" '
        f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{text.html(title)}">',
        f'<text x="{LEFT}" y="13" class="title">{text.html(title)}</text>',
    ]


def _axes(
    frame: Frame,
    xticks: Sequence[float],
    yticks: Sequence[float],
    xlabel: str,
    ylabel: str,
    xnames: Sequence[str] | None = None,
) -> list[str]:
    out = []
    for value in yticks:
        y = frame.y(value)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{frame.width - frame.right}" y1="{_n(y)}" y2="{_n(y)}"/>')
        out.append(_label(LEFT - 4, y + 3, number(value), anchor="end"))
    base = frame.height - BOTTOM
    out.append(f'<line class="axis" x1="{LEFT}" x2="{frame.width - frame.right}" y1="{base}" y2="{base}"/>')
    for k, value in enumerate(xticks):
        x = frame.x(value)
        out.append(f'<line class="axis" x1="{_n(x)}" x2="{_n(x)}" y1="{base}" y2="{base + 4}"/>')
        out.append(_label(x, base + 15, xnames[k] if xnames else number(value), width=frame.width))
    middle = (LEFT + frame.width - frame.right) / 2
    out.append(f'<text x="{middle:.0f}" y="{frame.height - 4}" text-anchor="middle" class="label">{xlabel}</text>')
    centre = (TOP + frame.height - BOTTOM) / 2
    out.append(
        f'<text x="12" y="{centre:.0f}" text-anchor="middle" class="label" '
        f'transform="rotate(-90 12 {centre:.0f})">{ylabel}</text>'
    )
    return out


def _marker_labels(marks: Sequence[tuple[str, float]], y: float, width: int = WIDTH) -> list[str]:
    """Names of vertical markers, in the margin above the plot: the left one ends at its line and the right one
    starts at its line when the two would touch."""
    placed = sorted(marks, key=lambda m: m[1])
    out = []
    for k, (name, x) in enumerate(placed):
        anchor = "middle"
        if len(placed) > 1:
            other = placed[1 - k][1] if len(placed) == 2 else None
            close = other is not None and abs(other - x) < (_width(name) + _width(placed[1 - k][0])) / 2 + 6
            if close:
                anchor = "end" if k == 0 else "start"
                x = x - 2 if k == 0 else x + 2
        out.append(_label(x, y, name, "accent", width, anchor))
    return out


def histogram(latencies_ms: Sequence[float], title: str = "latency histogram") -> str:
    """Timed runs per latency bin, with the median and p99 marked (their names above the plot)."""
    values = np.asarray(latencies_ms, dtype=np.float64)
    if not values.size:
        return ""
    lo, hi = float(values.min()), float(values.max())
    if hi <= lo:
        hi = lo + max(abs(lo) * 0.01, 1e-6)
    bins = int(min(40, max(5, math.ceil(math.sqrt(values.size)))))
    counts, edges = np.histogram(values, bins=bins, range=(lo, hi))
    xticks = nice_ticks(lo, hi, 5)
    yticks = nice_ticks(0, float(counts.max()), 4)
    frame = Frame(min(lo, xticks[0]), max(hi, xticks[-1]), 0, yticks[-1])
    median, p99 = float(np.median(values)), float(np.percentile(values, 99))
    out = _open("histogram", title, frame, count=int(values.size), bins=bins)
    out += _axes(frame, xticks, yticks, "latency (ms)", "runs")
    for count, left, right in zip(counts, edges[:-1], edges[1:], strict=True):
        x, w = frame.x(left), max(frame.x(right) - frame.x(left) - 0.5, 0.5)
        y = frame.y(count)
        out.append(
            f'<rect class="bar timed" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{frame.y(0) - y:.1f}" '
            f'data-count="{int(count)}" data-from="{left:.6g}" data-to="{right:.6g}">'
            f"<title>{left:.4g} to {right:.4g} ms: {int(count)} run(s)</title></rect>"
        )
    for name, value in (("median", median), ("p99", p99)):
        x = frame.x(value)
        out.append(
            f'<line class="marker" data-name="{name}" data-ms="{value:.6g}" x1="{x:.1f}" x2="{x:.1f}" '
            f'y1="{TOP - 6}" y2="{frame.y(0)}"><title>{name} {value:.4g} ms</title></line>'
        )
    out += _marker_labels([("median", frame.x(median)), ("p99", frame.x(p99))], TOP - 9)
    out.append("</svg>")
    return "\n".join(out)


def timeline(
    latencies_ms: Sequence[float], warmup_ms: Sequence[float] = (), title: str = "every run", marks: bool = True
) -> str:
    """Each run's latency in the order it ran: the warm-up runs first (in their own colour), then the timed ones.

    Args:
        marks: one dot per timed run, each with its number and latency; without, the timed runs are one line
            (every latency in its ``data-ms``), a quarter of the size. Beyond :data:`MAX_MARKS` runs, each bucket
            of runs is drawn as its min-to-max band and median either way.
    """
    timed = np.asarray(latencies_ms, dtype=np.float64)
    warm = np.asarray(warmup_ms, dtype=np.float64)
    if not timed.size and not warm.size:
        return ""
    every = np.concatenate([warm, timed])
    # a cold first run can be ten times the others: past 1.5x the slowest timed run, it is drawn clipped
    ceiling = float(every.max())
    if timed.size and ceiling > 1.5 * float(timed.max()):
        ceiling = 1.5 * float(timed.max())
    yticks = nice_ticks(0, ceiling, 4)
    total = int(every.size)
    frame = Frame(1, max(total, 2), 0, max(yticks[-1], ceiling))
    out = _open("timeline", title, frame, count=int(timed.size), warmup=int(warm.size))
    out += _axes(frame, [t for t in nice_ticks(1, max(total, 2), 5) if 1 <= t <= total], yticks, "run", "latency (ms)")
    clipped_labels = []
    for k, ms in enumerate(warm, start=1):
        y = frame.y(min(ms, frame.y1))
        out.append(
            f'<circle class="warmup" cx="{frame.x(k):.1f}" cy="{y:.1f}" r="2.6" data-run="{k}" data-ms="{ms:.6g}">'
            f"<title>warm-up run {k}: {ms:.4g} ms</title></circle>"
        )
        if ms > frame.y1:
            clipped_labels.append(f"run {k}: {ms:.3g} ms ↑")
    start = int(warm.size) + 1
    if timed.size > MAX_MARKS:
        buckets = np.array_split(np.arange(timed.size), MAX_MARKS // 4)
        band_top, band_bottom, middle = [], [], []
        for bucket in buckets:
            chunk = timed[bucket]
            x = frame.x(start + float(bucket.mean()))
            band_top.append(f"{x:.1f},{frame.y(float(chunk.max())):.1f}")
            band_bottom.append(f"{x:.1f},{frame.y(float(chunk.min())):.1f}")
            middle.append(f"{x:.1f},{frame.y(float(np.median(chunk))):.1f}")
        out.append(
            f'<polygon class="band timed" points="{" ".join(band_top + band_bottom[::-1])}" opacity="0.25">'
            f"<title>min to max of every {len(buckets[0])} runs</title></polygon>"
        )
        out.append(f'<polyline class="median line" points="{" ".join(middle)}"/>')
    elif timed.size:
        points = " ".join(f"{frame.x(start + k):.1f},{frame.y(ms):.1f}" for k, ms in enumerate(timed))
        every_ms = "" if marks else f' data-first-run="{start}" data-ms="{" ".join(f"{ms:.6g}" for ms in timed)}"'
        out.append(f'<polyline class="line runs" points="{points}"{every_ms}/>')
        if marks:
            for k, ms in enumerate(timed):
                out.append(
                    f'<circle class="timed" cx="{frame.x(start + k):.1f}" cy="{frame.y(ms):.1f}" r="1.6" '
                    f'data-run="{start + k}" data-ms="{ms:.6g}"><title>run {start + k}: {ms:.4g} ms</title></circle>'
                )
    if warm.size:
        x = frame.x(start - 0.5)
        out.append(f'<line class="split" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP - 6}" y2="{frame.y(0)}"/>')
        # above the plot, where no run is drawn: the warm-up runs to the left of the split, the timed to its right
        notes = [("warm-up", x - 3, "end"), ("timed runs →", x + 3, "start")]
        if clipped_labels:
            notes[0] = (f"warm-up ({', '.join(clipped_labels)})", x - 3, "end")
            if x - 3 - _width(notes[0][0]) < LEFT:  # no room to the left: the clipped run's value to the right
                notes = [("timed runs →", x + 3, "start"), (", ".join(clipped_labels), WIDTH - RIGHT, "end")]
        for label, at, anchor in notes:
            out.append(_label(at, TOP - 9, label, "warmup", WIDTH, anchor))
    out.append("</svg>")
    return "\n".join(out)


def sweep(points: Sequence[dict[str, Any]], title: str = "batch sweep") -> str:
    """Samples per second and ms per sample against the batch size (``--repeat-sweep``), one point per batch: both
    from one statistic (ms per sample is 1000 / samples per second), so the two curves are mirror images.

    Each point: ``batch``, ``samples_per_s``, ``ms_per_sample``.
    """
    rows = [p for p in points if p.get("samples_per_s")]
    if not rows:
        return ""
    right = 46  # room for the ms/sample axis
    last = len(rows) - 1 or 1
    frame = Frame(0, last, 0, 1, right=right)
    top_rate = max(p["samples_per_s"] for p in rows)
    top_ms = max(p["ms_per_sample"] for p in rows)
    rate_ticks, ms_ticks = nice_ticks(0, top_rate, 4), nice_ticks(0, top_ms, 4)
    rate = Frame(0, last, 0, rate_ticks[-1], right=right)
    per = Frame(0, last, 0, ms_ticks[-1], right=right)
    out = _open("sweep", title, frame, points=len(rows))
    out += _axes(rate, list(range(len(rows))), rate_ticks, "batch", "samples/s", [str(p["batch"]) for p in rows])
    for ms in ms_ticks:  # the right-hand axis: ms per sample
        out.append(f'<text x="{WIDTH - right + 4}" y="{per.y(ms) + 3:.1f}" class="accent">{number(ms)}</text>')
    for series, scale, css, key in (
        ("rate", rate, "timed", "samples_per_s"),
        ("per-sample", per, "accent", "ms_per_sample"),
    ):
        coords = " ".join(f"{scale.x(k):.1f},{scale.y(p[key]):.1f}" for k, p in enumerate(rows))
        out.append(f'<polyline class="curve {series}" points="{coords}"/>')
        for k, p in enumerate(rows):
            out.append(
                f'<circle class="{series} {css}" cx="{scale.x(k):.1f}" cy="{scale.y(p[key]):.1f}" r="3" '
                f'data-batch="{p["batch"]}" data-samples-per-s="{p["samples_per_s"]:.6g}" '
                f'data-ms-per-sample="{p["ms_per_sample"]:.6g}"><title>batch {p["batch"]}: '
                f"{p['samples_per_s']:.1f} samples/s, {p['ms_per_sample']:.4g} ms/sample</title></circle>"
            )
    out.append(
        f'<text x="{WIDTH - 4}" y="{TOP - 9}" text-anchor="end"><tspan class="timed">samples/s</tspan> '
        f'<tspan class="accent">ms/sample (right)</tspan></text>'
    )
    out.append("</svg>")
    return "\n".join(out)


def cases(rows: Sequence[dict[str, Any]], title: str = "latency of each test case") -> str:
    """Each test case's median latency (a dot) and its min-to-p99 range (a line), against the test case's number:
    a bundle of many test cases at a glance. Each row: ``index``, ``median``, ``min``, ``p99``, ``passed``."""
    rows = [r for r in rows if r.get("median") is not None]
    if len(rows) < 2:
        return ""
    top = max(r["p99"] for r in rows)
    yticks = nice_ticks(0, top, 4)
    first, last = rows[0]["index"], rows[-1]["index"]
    frame = Frame(first - 0.5, last + 0.5, 0, yticks[-1])
    out = _open("cases", title, frame, points=len(rows))
    xticks = [t for t in nice_ticks(first, last, 6) if first <= t <= last and float(t).is_integer()]
    out += _axes(frame, xticks, yticks, "test case", "latency (ms)")
    for r in rows:
        x = frame.x(r["index"])
        css = "timed" if r.get("passed", True) else "accent"
        out.append(
            f'<line class="range" x1="{x:.1f}" x2="{x:.1f}" y1="{frame.y(r["min"]):.1f}" y2="{frame.y(r["p99"]):.1f}"/>'
        )
        out.append(
            f'<circle class="{css}" cx="{x:.1f}" cy="{frame.y(r["median"]):.1f}" r="2" data-case="{r["index"]}" '
            f'data-median="{r["median"]:.6g}"><title>test case {r["index"]}: median {r["median"]:.4g} ms, '
            f"min {r['min']:.4g}, p99 {r['p99']:.4g}</title></circle>"
        )
    out.append("</svg>")
    return "\n".join(out)


def op_bars(rows: Sequence[dict[str, Any]], title: str = "time per operator type") -> str:
    """The share of kernel time of each operator type (the ten most expensive), as horizontal bars."""
    if not rows:
        return ""
    label_width, bar_height = 130, 16
    height = TOP + bar_height * len(rows) + 10
    frame = Frame(0, max(r["share"] for r in rows) or 1.0, 0, 1, width=WIDTH, height=height)
    out = _open("op-profile", title, frame, bars=len(rows))
    span = WIDTH - label_width - 60
    for k, row in enumerate(rows):
        y = TOP + k * bar_height
        w = max(row["share"] / (frame.x1 or 1.0) * span, 0.5)
        name = text.html(row["op_type"])
        out.append(f'<text x="{label_width - 6}" y="{y + 11}" text-anchor="end">{name}</text>')
        out.append(
            f'<rect class="bar timed" x="{label_width}" y="{y + 2}" width="{w:.1f}" height="{bar_height - 4}" '
            f'data-op-type="{name}" data-share="{row["share"]:.6g}" data-total-ms="{row["total_ms"]:.6g}">'
            f"<title>{name}: {row['share']:.1%}, {row['total_ms']:.4g} ms in {row['calls']} call(s)</title></rect>"
        )
        out.append(f'<text x="{label_width + w + 4:.1f}" y="{y + 11}">{row["share"]:.1%}</text>')
    out.append("</svg>")
    return "\n".join(out)


def fitting_bars(rows: Sequence[dict[str, Any]], title: str = "fitting: median latency of each candidate") -> str:
    """Each candidate's median latency (the ranked finalists first), its p90 as a whisker, the chosen one marked."""
    rows = [r for r in rows if r.get("median_ms")]
    if not rows:
        return ""
    label_width, bar_height = 260, 16
    height = TOP + bar_height * len(rows) + 10
    top = max(max(r["median_ms"], r.get("p90_ms") or 0) for r in rows) or 1.0
    frame = Frame(0, top, 0, 1, width=WIDTH, height=height)
    out = _open("fitting", title, frame, bars=len(rows))
    span = WIDTH - label_width - 70
    for k, row in enumerate(rows):
        y = TOP + k * bar_height
        w = max(row["median_ms"] / top * span, 0.5)
        p90 = (row.get("p90_ms") or row["median_ms"]) / top * span
        name = text.html(f"{row['variant']}: {row['settings']}")
        css = "bar chosen" if row.get("chosen") else "bar timed"
        out.append(f'<text x="{label_width - 6}" y="{y + 11}" text-anchor="end">{name}</text>')
        out.append(
            f'<rect class="{css}" x="{label_width}" y="{y + 2}" width="{w:.1f}" height="{bar_height - 4}" '
            f'data-variant="{text.html(row["variant"])}" data-median-ms="{row["median_ms"]:.6g}">'
            f"<title>{name}: median {row['median_ms']:.4g} ms, p90 {row.get('p90_ms') or 0:.4g} ms</title></rect>"
        )
        out.append(
            f'<line class="whisker" x1="{label_width + w:.1f}" x2="{label_width + p90:.1f}" y1="{y + 8}" y2="{y + 8}"/>'
        )
        out.append(f'<text x="{label_width + max(w, p90) + 4:.1f}" y="{y + 11}">{row["median_ms"]:.3g} ms</text>')
    out.append("</svg>")
    return "\n".join(out)
