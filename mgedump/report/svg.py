"""The plots of the HTML report, drawn as inline SVG: a latency histogram, a per-run timeline, the batch-sweep
curves and the operator-time bars.

Each plot is a few dozen SVG elements, made in well under a millisecond, so a
report of hundreds of test cases costs nothing next to the runs it reports
(matplotlib, measured for this, took 0.4 s to import and 35 ms a test case).
Every mark carries its numbers: a ``<title>`` a browser shows on hover, and
``data-*`` attributes that the tests compare with the JSON report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import numpy as np

WIDTH, HEIGHT = 460, 200
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 30, 34
TIMED, WARMUP, ACCENT, GRID, INK = "#3b6fb6", "#e08a1e", "#c0392b", "#e4e7eb", "#333"
MAX_MARKS = 2000  # beyond this many runs, a timeline draws bands per bucket of runs instead of one dot per run


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


def _open(kind: str, title: str, frame: Frame, **data: object) -> list[str]:
    attrs = "".join(f' data-{k.replace("_", "-")}="{escape(str(v))}"' for k, v in data.items())
    return [
        f'<svg class="plot" data-plot="{kind}"{attrs} viewBox="0 0 {frame.width} {frame.height}" '
        f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}">',
        f'<text x="{LEFT}" y="14" class="title">{escape(title)}</text>',
    ]


def _axes(frame: Frame, xticks: Sequence[float], yticks: Sequence[float], xlabel: str, ylabel: str) -> list[str]:
    out = []
    for value in yticks:
        y = frame.y(value)
        out.append(f'<line x1="{LEFT}" x2="{frame.width - frame.right}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
        out.append(f'<text x="{LEFT - 4}" y="{y + 3:.1f}" text-anchor="end" class="tick">{number(value)}</text>')
    base = frame.height - BOTTOM
    out.append(f'<line x1="{LEFT}" x2="{frame.width - frame.right}" y1="{base}" y2="{base}" stroke="{INK}"/>')
    for value in xticks:
        x = frame.x(value)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{base}" y2="{base + 4}" stroke="{INK}"/>')
        out.append(f'<text x="{x:.1f}" y="{base + 15}" text-anchor="middle" class="tick">{number(value)}</text>')
    out.append(
        f'<text x="{(LEFT + frame.width - frame.right) / 2:.0f}" y="{frame.height - 4}" text-anchor="middle" '
        f'class="label">{escape(xlabel)}</text>'
    )
    out.append(
        f'<text x="12" y="{(TOP + frame.height - BOTTOM) / 2:.0f}" text-anchor="middle" class="label" '
        f'transform="rotate(-90 12 {(TOP + frame.height - BOTTOM) / 2:.0f})">{escape(ylabel)}</text>'
    )
    return out


def histogram(latencies_ms: Sequence[float], title: str = "latency histogram") -> str:
    """Timed runs per latency bin, with the median and p99 marked."""
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
            f'<rect class="bar" x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" height="{frame.y(0) - y:.2f}" '
            f'fill="{TIMED}" data-count="{int(count)}" data-from="{left:.6g}" data-to="{right:.6g}">'
            f"<title>{left:.4g} to {right:.4g} ms: {int(count)} run(s)</title></rect>"
        )
    for name, value in (("median", median), ("p99", p99)):
        x = frame.x(value)
        out.append(
            f'<line class="marker" data-name="{name}" data-ms="{value:.6g}" x1="{x:.2f}" x2="{x:.2f}" '
            f'y1="{TOP}" y2="{frame.y(0)}" stroke="{ACCENT}" stroke-dasharray="3 2"><title>{name} {value:.4g} ms'
            f"</title></line>"
        )
        out.append(f'<text x="{x + 3:.1f}" y="{TOP + 9}" class="tick" fill="{ACCENT}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out)


def timeline(latencies_ms: Sequence[float], warmup_ms: Sequence[float] = (), title: str = "every run") -> str:
    """Each run's latency in the order it ran: the warm-up runs first (in their own colour), then the timed ones.
    Beyond :data:`MAX_MARKS` runs, each bucket of runs is drawn as its min-to-max band and median."""
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
    for k, ms in enumerate(warm, start=1):
        clipped = ms > frame.y1
        y = frame.y(min(ms, frame.y1))
        out.append(
            f'<circle class="warmup" cx="{frame.x(k):.2f}" cy="{y:.2f}" r="2.6" fill="{WARMUP}" '
            f'data-run="{k}" data-ms="{ms:.6g}"><title>warm-up run {k}: {ms:.4g} ms</title></circle>'
        )
        if clipped:
            out.append(
                f'<text x="{frame.x(k) + 4:.1f}" y="{y + 3:.1f}" class="tick" fill="{WARMUP}">{ms:.3g} ms ↑</text>'
            )
    start = int(warm.size) + 1
    if timed.size <= MAX_MARKS:
        points = " ".join(f"{frame.x(start + k):.2f},{frame.y(ms):.2f}" for k, ms in enumerate(timed))
        out.append(f'<polyline points="{points}" fill="none" stroke="{TIMED}" stroke-width="0.8" opacity="0.6"/>')
        for k, ms in enumerate(timed):
            out.append(
                f'<circle class="timed" cx="{frame.x(start + k):.2f}" cy="{frame.y(ms):.2f}" r="1.6" fill="{TIMED}" '
                f'data-run="{start + k}" data-ms="{ms:.6g}"><title>run {start + k}: {ms:.4g} ms</title></circle>'
            )
    else:
        buckets = np.array_split(np.arange(timed.size), MAX_MARKS // 4)
        band_top, band_bottom, middle = [], [], []
        for bucket in buckets:
            chunk = timed[bucket]
            x = frame.x(start + float(bucket.mean()))
            band_top.append(f"{x:.2f},{frame.y(float(chunk.max())):.2f}")
            band_bottom.append(f"{x:.2f},{frame.y(float(chunk.min())):.2f}")
            middle.append(f"{x:.2f},{frame.y(float(np.median(chunk))):.2f}")
        out.append(
            f'<polygon class="band" points="{" ".join(band_top + band_bottom[::-1])}" fill="{TIMED}" '
            f'opacity="0.25"><title>min to max of every {len(buckets[0])} runs</title></polygon>'
        )
        out.append(f'<polyline class="median" points="{" ".join(middle)}" fill="none" stroke="{TIMED}"/>')
    if warm.size:
        x = frame.x(start - 0.5)
        out.append(f'<line x1="{x:.2f}" x2="{x:.2f}" y1="{TOP}" y2="{frame.y(0)}" stroke="{WARMUP}"/>')
        out.append(f'<text x="{x + 3:.1f}" y="{frame.y(0) - 4:.1f}" class="tick" fill="{WARMUP}">timed runs →</text>')
    out.append("</svg>")
    return "\n".join(out)


def sweep(points: Sequence[dict], title: str = "batch sweep") -> str:
    """Samples per second and ms per sample against the batch size (``--repeat-sweep``), one point per batch."""
    rows = [p for p in points if p.get("median_ms") is not None]
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
    out += _axes(rate, [], rate_ticks, "batch", "samples/s")
    base = HEIGHT - BOTTOM
    for k, p in enumerate(rows):
        x = rate.x(k)
        out.append(f'<text x="{x:.1f}" y="{base + 15}" text-anchor="middle" class="tick">{p["batch"]}</text>')
    for ms in ms_ticks:  # the right-hand axis: ms per sample
        out.append(
            f'<text x="{WIDTH - right + 4}" y="{per.y(ms) + 3:.1f}" class="tick" fill="{ACCENT}">{number(ms)}</text>'
        )
    for series, scale, colour, key in (
        ("rate", rate, TIMED, "samples_per_s"),
        ("per-sample", per, ACCENT, "ms_per_sample"),
    ):
        coords = " ".join(f"{scale.x(k):.2f},{scale.y(p[key]):.2f}" for k, p in enumerate(rows))
        out.append(f'<polyline class="{series}" points="{coords}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        for k, p in enumerate(rows):
            out.append(
                f'<circle class="{series}" cx="{scale.x(k):.2f}" cy="{scale.y(p[key]):.2f}" r="3" fill="{colour}" '
                f'data-batch="{p["batch"]}" data-samples-per-s="{p["samples_per_s"]:.6g}" '
                f'data-ms-per-sample="{p["ms_per_sample"]:.6g}"><title>batch {p["batch"]}: '
                f"{p['samples_per_s']:.1f} samples/s, {p['ms_per_sample']:.4g} ms/sample</title></circle>"
            )
    out.append(
        f'<text x="{WIDTH - 4}" y="14" text-anchor="end" class="tick"><tspan fill="{TIMED}">samples/s</tspan> '
        f'<tspan fill="{ACCENT}">ms/sample (right)</tspan></text>'
    )
    out.append("</svg>")
    return "\n".join(out)


def op_bars(rows: Sequence[dict], title: str = "time per operator type") -> str:
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
        out.append(
            f'<text x="{label_width - 6}" y="{y + 11}" text-anchor="end" class="tick">{escape(row["op_type"])}</text>'
        )
        out.append(
            f'<rect class="bar" x="{label_width}" y="{y + 2}" width="{w:.2f}" height="{bar_height - 4}" '
            f'fill="{TIMED}" data-op-type="{escape(row["op_type"])}" data-share="{row["share"]:.6g}" '
            f'data-total-ms="{row["total_ms"]:.6g}"><title>{escape(row["op_type"])}: {row["share"]:.1%}, '
            f"{row['total_ms']:.4g} ms in {row['calls']} call(s)</title></rect>"
        )
        out.append(f'<text x="{label_width + w + 4:.1f}" y="{y + 11}" class="tick">{row["share"]:.1%}</text>')
    out.append("</svg>")
    return "\n".join(out)
