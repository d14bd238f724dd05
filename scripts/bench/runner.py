"""The benchmarks' command line: run the sections asked for, in order, and write the document; or, with
``--worker``, run one worker function of a section in this fresh process and write its JSON result."""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .common import DEFAULT_OUT, Context, Table, log
from .document import changed_files, general_notes, machine, render, source_fingerprint, write_atomic

# the sections, one module of this folder each; this order is the order in the document
ORDER = (
    "overhead",
    "pack",
    "rss",
    "startup",
    "load",
    "jobs",
    "report",
    "optimize",
    "trace",
    "zip",
    "iodump",
    "float16",
    "int8",
    "needs",
    "fitting",
    "native",
    "big",
    "gates",
)
SHARED = ("models",)  # modules with workers that are no section


def _module(name: str) -> Any:
    """A module of this folder, by name: a section (its ``section``, its ``WORKERS``) or shared models."""
    return importlib.import_module(f".{name}", __package__)


def workers() -> dict[str, Callable[..., Any]]:
    """Worker name -> the function that runs in a worker process, from every section (names are unique)."""
    found: dict[str, Callable[..., Any]] = {}
    for name in ORDER + SHARED:
        for worker, function in getattr(_module(name), "WORKERS", {}).items():
            if worker in found:
                raise RuntimeError(f"two workers are called {worker!r}")
            found[worker] = function
    return found


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Benchmark mgedump against baselines measured in the same run.")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few runs: a smoke test")
    parser.add_argument(
        "--runs", type=int, default=None, help="timed runs (rounds) per measurement (default 5, or 2 with --quick)"
    )
    parser.add_argument(
        "--sections",
        default=",".join(ORDER),
        help=f"comma list of sections (default all: {','.join(ORDER)}); SECTION:PART[+PART] runs only those parts "
        "of a section that has parts (big: gib, many, float16)",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="Markdown file to write (default docs/benchmarks.md)"
    )
    parser.add_argument("--keep-tmp", action="store_true", help="keep the temporary folder (models, bundles)")
    parser.add_argument("--worker", nargs=3, metavar=("NAME", "KWARGS", "RESULT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return args
    asked = [s.strip() for s in args.sections.split(",") if s.strip()]
    args.sections = [s.partition(":")[0] for s in asked]
    unknown = [s for s in args.sections if s not in ORDER]
    if unknown or not args.sections:
        parser.error(f"unknown section(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(ORDER)}")
    args.parts = {}
    for name, _, parts in (s.partition(":") for s in asked if ":" in s):
        known = getattr(_module(name), "PARTS", ())
        chosen = tuple(p.strip() for p in parts.split("+") if p.strip())
        wrong = [p for p in chosen if p not in known]
        if wrong or not chosen:
            choose = f"choose from {', '.join(known)}" if known else "it has none"
            parser.error(f"unknown part(s) of section {name}: {', '.join(wrong) or '(none given)'}; {choose}")
        args.parts[name] = chosen
    if args.runs is None:
        args.runs = 2 if args.quick else 5
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    return args


def worker_main(name: str, kwargs: str, result: str) -> int:
    value = workers()[name](**json.loads(kwargs))
    Path(result).write_text(json.dumps(value))
    return 0


def run_sections(ctx: Context, names: Sequence[str]) -> tuple[dict[str, Table], dict[str, str]]:
    """Run each section; a section that raises is reported in the document, and the others still run."""
    tables: dict[str, Table] = {}
    errors: dict[str, str] = {}
    for name in ORDER:
        if name not in names:
            continue
        log(f"section {name}")
        try:
            tables[name] = _module(name).section(ctx)
        except Exception as exc:  # keep the other sections' results
            errors[name] = f"{type(exc).__name__}: {exc}"
            log(f"section {name} failed: {errors[name]}")
    return tables, errors


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker_main(*args.worker)
    started = time.perf_counter()
    header = machine()
    fingerprint = source_fingerprint()
    tmp = Path(tempfile.mkdtemp(prefix="mgedump-bench-"))
    ctx = Context(quick=args.quick, runs=args.runs, tmp=tmp, parts=args.parts)
    try:
        tables, errors = run_sections(ctx, args.sections)
    finally:
        if args.keep_tmp:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.perf_counter() - started
    meta = {
        "args": " ".join(argv if argv is not None else sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "duration": f"{int(elapsed // 60)} min {elapsed % 60:.0f} s",
        "notes": general_notes(ctx, changed_files(fingerprint, source_fingerprint())),
    }
    text = render(header, tables, errors, meta)
    write_atomic(args.out, text)
    sys.stdout.write(text)
    log(f"wrote {args.out}")
    return 1 if errors else 0
