"""The ``native`` section: ``mgerun-native`` (docs/native.md) against ``mgerun`` and against the floors of what it
does, on this machine, every comparison alternated. The program is built from this tree with CMake into
``build/bench-native`` (incremental; ``MGERUN_NATIVE`` names another binary), together with the bare C API loop
of ``native/bench/bare_loop.cpp``; both open the onnxruntime library of the wheel ``mgerun`` imports.

- Start to verdict: wall time of ``mgerun-native`` and ``mgerun`` on the sample bundle (``samples/cnn.onnx``, two
  test cases; ``--iter 1 --warmup-iter 0``), process spawn to reap, 3 x ``--runs`` alternated runs each, and the
  peak RSS of the same runs. Targets: native / mgerun <= 0.2 (time) and <= 0.5 (memory).
- Timing loop: the median latency of test case 0 as ``mgerun-native --iter 300 --warmup-iter 10`` reports it
  (``--report-json``) against the bare loop's (the same model, input bytes, default session options, 10 untimed
  and 300 timed ``Run`` calls), one process each per round, alternated, 3 x ``--runs`` rounds.
  Target: median ratio <= 1.02.
- Hashing: a bundle of the sample with one more member of 1 GiB (hashed, never read by the model) against the
  same bundle without it, so that the difference of their wall times is what reading and hashing the member
  costs; against ``sha256sum`` of the same bytes as a file, alternated, ``--runs`` rounds, each round's ratio.
  Target: median ratio <= 2.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import (
    ROOT,
    Check,
    Context,
    Table,
    alternate,
    at_most,
    console_script,
    fmt,
    fmt_ratio,
    log,
    median,
    mib,
    ratio,
    ratio_rows,
    run_process,
    run_worker,
)

BUILD = ROOT / "build" / "bench-native"
BARE = ROOT / "native" / "bench" / "bare_loop.cpp"


def build_native() -> tuple[str, str]:
    """mgerun-native and the bare loop (mgerun-probe), built from this tree with CMake."""
    configure = ["cmake", "-S", ROOT / "native", "-B", BUILD, "-DCMAKE_BUILD_TYPE=Release", f"-DMGERUN_PROBE={BARE}"]
    if shutil.which("ninja") and not (BUILD / "CMakeCache.txt").exists():
        configure += ["-G", "Ninja"]
    for argv in (configure, ["cmake", "--build", BUILD]):
        done = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, argv[:2]))} failed: {(done.stdout + done.stderr)[-2000:]}")
    native = os.environ.get("MGERUN_NATIVE") or str(BUILD / "mgerun-native")
    return native, str(BUILD / "mgerun-probe")


def onnxruntime_library() -> str:
    """The shared library of the onnxruntime wheel mgerun imports, found without importing it here."""
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or not spec.origin:
        raise RuntimeError("onnxruntime is not installed")
    found = sorted((Path(spec.origin).parent / "capi").glob("libonnxruntime.so*"))
    if not found:
        raise RuntimeError("the onnxruntime wheel holds no libonnxruntime.so")
    return str(found[-1])


def input_worker(bundle: str, out: str) -> dict[str, Any]:
    """Test case 0's only input of a bundle, written as raw bytes; its name and dims."""
    from mgedump.bundle import Bundle

    with Bundle(bundle) as opened:
        manifest = opened.manifest
        info = manifest.inputs[0]
        array = opened.tensor(manifest.test_cases[0].inputs[0], info["name"])
    Path(out).write_bytes(array.astype("float32").tobytes())
    return {"name": info["name"], "dims": list(array.shape), "model": manifest.model.member}


def weights_worker(bundle: str, size: int, weights: str, big: str, small: str) -> None:
    """``weights``: ``size`` bytes (one random MiB repeated); ``big``: the bundle's members plus that file as the
    member ``weights.bin``; ``small``: the same bundle without it. Both by mgedump's own writer."""
    import random

    from mgedump.bundle import Bundle, Manifest, Member, write_bundle

    block = random.Random(0).randbytes(1 << 20)
    with open(weights, "wb") as f:
        for _ in range(size >> 20):
            f.write(block)
    with Bundle(bundle) as opened:
        document = opened.document
        members = [Member(entry["name"], opened.read(entry["name"])) for entry in document["members"]]
    manifest = Manifest.from_json(document)
    write_bundle(small, manifest, members)
    write_bundle(big, manifest, [*members, Member("weights.bin", paths=(weights,))])


def _report_median(path: Path) -> float:
    document = json.loads(path.read_text(encoding="utf-8"))
    return float(document["bundles"][0]["test_cases"][0]["latency_ms"]["median"])


def section(ctx: Context) -> Table:
    native, bare = build_native()
    library = onnxruntime_library()
    env_native = [native, "--ort-lib", library]
    bundle = ctx.tmp / "native-cnn.mgetest"
    packed = run_process([*console_script("mgedump"), ROOT / "samples" / "cnn.onnx", "-d", "#rand(0,1)", "-d",
                          "#rand(0,2)", "-o", bundle])  # fmt: skip
    if not packed.ok:
        raise RuntimeError(f"mgedump could not pack samples/cnn.onnx ({packed.failure()})")
    table = Table(
        "mgerun-native",
        "`mgerun-native` (docs/native.md), built from this tree, against `mgerun` and against the floors of what it "
        "does; every comparison alternated, medians. Targets: start to verdict on the sample bundle <= 0.2x "
        "`mgerun`'s wall time and <= 0.5x its peak memory; the timing loop <= 1.02x a bare C API loop; hashing a "
        "1 GiB member <= 2x `sha256sum`.",
        ["measure", "mgerun-native", "baseline", "baseline is", "native / baseline"],
    )

    # -- start to verdict, and peak memory
    runs = 3 * ctx.runs
    commands = {
        "mgerun": [*console_script("mgerun"), bundle, "--iter", "1", "--warmup-iter", "0"],
        "native": [*env_native, bundle, "--iter", "1", "--warmup-iter", "0"],
    }
    for argv in commands.values():
        warm = run_process(argv)  # page cache, .pyc
        if not warm.ok:
            raise RuntimeError(f"{argv[0]} failed on the sample bundle ({warm.failure()})")
    log(f"native: {runs} alternated runs of mgerun and mgerun-native to the verdict")
    walls: dict[str, list[float]] = {name: [] for name in commands}
    peaks: dict[str, list[float]] = {name: [] for name in commands}
    for _, name in alternate(list(commands), runs):
        result = run_process(commands[name])
        if not result.ok:
            raise RuntimeError(f"{name} failed ({result.failure()})")
        walls[name].append(result.wall_s)
        peaks[name].append(result.maxrss_kib * 1024.0)
    wall = {name: median(values) for name, values in walls.items()}
    peak = {name: median(values) for name, values in peaks.items()}
    wall_ratio, peak_ratio = ratio(wall["native"], wall["mgerun"]), ratio(peak["native"], peak["mgerun"])
    table.rows.append(["start to verdict (s)", fmt(wall["native"]), fmt(wall["mgerun"]), "`mgerun`",
                       fmt_ratio(wall_ratio)])  # fmt: skip
    table.rows.append(["peak memory", mib(peak["native"] or 0), mib(peak["mgerun"] or 0), "`mgerun`",
                       fmt_ratio(peak_ratio)])  # fmt: skip
    table.checks.append(Check("native: start to verdict / mgerun's", "<= 0.2", fmt_ratio(wall_ratio),
                              at_most(wall_ratio, 0.2)))  # fmt: skip
    table.checks.append(Check("native: peak memory / mgerun's", "<= 0.5", fmt_ratio(peak_ratio),
                              at_most(peak_ratio, 0.5)))  # fmt: skip

    # -- the timing loop against a bare C API loop
    iters, warmup = (50, 5) if ctx.quick else (300, 10)
    raw = ctx.tmp / "native-input.bin"
    feed = run_worker("native_input", ctx.tmp, bundle=str(bundle), out=str(raw))
    model = ctx.tmp / "native-model.onnx"
    model.write_bytes((ROOT / "samples" / "cnn.onnx").read_bytes())  # the bundled model is the file given
    report = ctx.tmp / "native-report.json"

    def with_native() -> float:
        done = run_process([*env_native, bundle, "--iter", iters, "--warmup-iter", warmup, "--report-json", report])
        if not done.ok:
            raise RuntimeError(f"mgerun-native failed ({done.failure()})")
        return _report_median(report)

    def with_bare() -> float:
        argv = [bare, library, model, feed["name"], raw, ",".join(map(str, feed["dims"])), iters, warmup]
        done = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"the bare loop failed: {done.stderr.strip()}")
        return float(done.stdout.strip())

    loops = {"native": with_native, "bare": with_bare}
    rounds: list[dict[str, float]] = [{} for _ in range(runs)]
    log(f"native: {runs} rounds of {iters} runs, mgerun-native and the bare C API loop")
    for run, name in alternate(list(loops), runs):
        rounds[run][name] = loops[name]()
    loop_table = Table("", "", [])
    loop_ratio = ratio_rows(loop_table, rounds, "native", "bare", digits=4)
    medians = loop_table.rows[-1]
    table.rows.append([f"timing loop, median of {iters} runs (ms)", medians[1], medians[2], "a bare C API loop",
                       fmt_ratio(loop_ratio)])  # fmt: skip
    table.checks.append(Check("native: timing loop / bare C API loop", "<= 1.02", fmt_ratio(loop_ratio),
                              at_most(loop_ratio, 1.02)))  # fmt: skip
    table.notes.append(
        "Timing loop rounds (median ms of test case 0, native / bare): "
        + "; ".join(f"{r['native']:.4f} / {r['bare']:.4f}" for r in rounds)
        + "."
    )

    # -- hashing a 1 GiB member
    size = (64 if ctx.quick else 1024) << 20
    weights, big, small = ctx.tmp / "weights.bin", ctx.tmp / "native-big.mgetest", ctx.tmp / "native-small.mgetest"
    run_worker("native_weights", ctx.tmp, bundle=str(bundle), size=size, weights=str(weights), big=str(big),
               small=str(small))  # fmt: skip
    hashing = {
        "sha256sum": ["sha256sum", weights],
        "big": [*env_native, big, "--iter", "1", "--warmup-iter", "0"],
        "small": [*env_native, small, "--iter", "1", "--warmup-iter", "0"],
    }
    for argv in hashing.values():
        run_process(argv)  # the page cache holds both files from here on
    log(f"native: {ctx.runs} rounds of hashing {mib(size)}")
    times: list[dict[str, float]] = [{} for _ in range(ctx.runs)]
    for run, name in alternate(list(hashing), ctx.runs):
        result = run_process(hashing[name])
        if not result.ok:
            raise RuntimeError(f"{name} failed ({result.failure()})")
        times[run][name] = result.wall_s
    per_round = [{"native": t["big"] - t["small"], "sha256sum": t["sha256sum"]} for t in times]
    hash_ratio = median([r["native"] / r["sha256sum"] for r in per_round])
    table.rows.append([f"hashing a {mib(size)} member (s)", fmt(median([r["native"] for r in per_round])),
                       fmt(median([r["sha256sum"] for r in per_round])), "`sha256sum` of the same bytes",
                       fmt_ratio(hash_ratio)])  # fmt: skip
    table.checks.append(Check(f"native: hashing {mib(size)} / sha256sum", "<= 2", fmt_ratio(hash_ratio),
                              at_most(hash_ratio, 2.0)))  # fmt: skip
    table.notes.append(
        f"Hashing is the wall time of `mgerun-native` on the bundle with the {mib(size)} member less that on the same "
        "bundle without it (median of "
        + ", ".join(f"{t['big']:.3f} - {t['small']:.3f} s" for t in times)
        + "); `sha256sum` reads the member's bytes as a file. Both files stay in the page cache."
    )
    for path in (weights, big, small):
        path.unlink(missing_ok=True)
    return table


# the functions of this file that run in a worker process (python scripts/bench.py --worker NAME ...)
WORKERS: dict[str, Callable[..., Any]] = {
    "native_input": input_worker,
    "native_weights": weights_worker,
}
