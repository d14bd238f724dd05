"""Benchmark of mgedump.jit.trace: eager vs compiled, and the compiled call's overhead over onnxruntime.

The network is a small CNN written with ``mgedump.module`` (two Conv2d +
BatchNorm2d + relu blocks with max and average pooling, Linear, softmax) on a
batch of 8 images of 3x32x32. Measured in this process, alternated round by
round (eager, compiled, compiled with weights fed, direct, then rotated), each
figure the median over rounds of the median time per call within a round:

- eager: the module called on a Tensor (numpy);
- compiled: a ``trace(capture_as_const=True)`` of it, after its first call
  (the Python function is replayed, the graph runs on onnxruntime);
- compiled, weights fed: the same with ``capture_as_const=False`` (weights are
  graph inputs fed on every call);
- direct: ``InferenceSession.run`` on the model ``trace.dump`` wrote, with the
  same session options (graph optimisation ``extended``, the trace's default
  ``opt_level=2``) and the same input array.

Targets: eager / compiled >= 2 (compiled wins clearly), and compiled - direct
<= 0.5 ms per call: the overhead of a compiled call (replaying the Python
function to check it, feeding and wrapping) grows with the number of operations
the function issues, not with their size, so it is given in ms; the ratio
compiled / direct is reported beside it.

Run from the repository root, in the project's venv::

    python scripts/bench_trace.py                # prints a Markdown table
    python scripts/bench_trace.py --quick        # fewer calls per round
    python scripts/bench_trace.py --runs 9

``section_trace(runs, quick)`` returns the rows, for the ``trace`` section of ``scripts/bench/``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import mgedump.functional as F
import mgedump.module as M
from mgedump import Tensor, tensor
from mgedump.jit import trace
from mgedump.model.runtime import open_session
from mgedump.model.session import SessionSettings

BATCH = 8
TARGET_SPEEDUP = 2.0
TARGET_OVERHEAD_MS = 0.5


class BenchCNN(M.Module):
    """Conv2d, BatchNorm2d, relu, pooling, Linear, softmax on 3x32x32 images."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = M.Conv2d(3, 16, 3, padding=1)
        self.bn1 = M.BatchNorm2d(16)
        self.conv2 = M.Conv2d(16, 32, 3, padding=1)
        self.bn2 = M.BatchNorm2d(32)
        self.fc = M.Linear(32 * 8 * 8, 10)

    def forward(self, x: Tensor) -> Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.avg_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return F.softmax(self.fc(F.flatten(x, 1)))


def make_net(seed: int = 0) -> BenchCNN:
    np.random.seed(seed)
    net = BenchCNN().eval()
    for bn in (net.bn1, net.bn2):
        n = bn.num_features
        bn.running_mean = tensor(np.random.randn(n) * 0.1)
        bn.running_var = tensor(np.random.rand(n) + 0.5)
    return net


def _per_call_ms(fn: Callable[[], Any], calls: int) -> float:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def section_trace(runs: int, quick: bool) -> list[dict[str, Any]]:
    """Eager vs compiled time per call of the CNN at batch 8, and compiled vs direct onnxruntime.

    Args:
        runs: rounds (each measures every variant once, in rotated order).
        quick: fewer calls per round (a smoke test).

    Returns:
        One row per variant: ``variant``, ``ms_per_call`` (median over rounds),
        ``rounds_ms`` (each round's median), ``vs_direct`` (ratio to direct
        onnxruntime), ``speedup_vs_eager``; then a summary row ``variant ==
        "checks"`` with ``eager_over_compiled``, ``compiled_over_direct`` and
        whether each target is met.
    """
    net = make_net()
    x = tensor(np.random.default_rng(1).random((BATCH, 3, 32, 32), dtype=np.float32))
    compiled = trace(lambda inp: net(inp), capture_as_const=True)
    fed = trace(lambda inp: net(inp), capture_as_const=False)
    expect = net(x).numpy()
    for f in (compiled, fed):
        f(x)
        np.testing.assert_allclose(f(x).numpy(), expect, atol=1e-5)
    with tempfile.TemporaryDirectory(prefix="mgedump-bench-trace-") as tmp:
        path = os.path.join(tmp, "cnn.onnx")
        compiled.dump(path)
        session = open_session(path, settings=SessionSettings(graph_opt="extended"))
    name = session.get_inputs()[0].name
    array = x.numpy()
    np.testing.assert_allclose(session.run(None, {name: array})[0], expect, atol=1e-5)

    eager_calls, fast_calls = (3, 20) if quick else (10, 200)
    variants: dict[str, tuple[Callable[[], Any], int]] = {
        "eager (numpy)": (lambda: net(x), eager_calls),
        "compiled: trace(capture_as_const=True)": (lambda: compiled(x), fast_calls),
        "compiled: trace(), weights fed as inputs": (lambda: fed(x), fast_calls),
        "direct: onnxruntime on the dumped model": (lambda: session.run(None, {name: array}), fast_calls),
    }
    names = list(variants)
    for fn, _ in variants.values():  # warm up every path once
        fn()
    rounds: dict[str, list[float]] = {n: [] for n in names}
    for r in range(max(1, runs)):
        for n in names[r % len(names) :] + names[: r % len(names)]:
            fn, calls = variants[n]
            rounds[n].append(_per_call_ms(fn, calls))
    medians = {n: statistics.median(v) for n, v in rounds.items()}
    direct = medians[names[3]]
    eager = medians[names[0]]
    rows: list[dict[str, Any]] = []
    for n in names:
        rows.append(
            {
                "variant": n,
                "ms_per_call": medians[n],
                "rounds_ms": rounds[n],
                "vs_direct": medians[n] / direct,
                "speedup_vs_eager": eager / medians[n],
            }
        )
    speedup = eager / medians[names[1]]
    overhead = medians[names[1]] / direct
    overhead_ms = medians[names[1]] - direct
    rows.append(
        {
            "variant": "checks",
            "batch": BATCH,
            "eager_over_compiled": speedup,
            "speedup_target": TARGET_SPEEDUP,
            "speedup_met": speedup >= TARGET_SPEEDUP,
            "compiled_over_direct": overhead,
            "overhead_ms": overhead_ms,
            "overhead_ms_target": TARGET_OVERHEAD_MS,
            "overhead_met": overhead_ms <= TARGET_OVERHEAD_MS,
        }
    )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table and a checks line."""
    lines = [
        f"CNN of `mgedump.module` at batch {BATCH} (3x32x32), ms per call, median over rounds:",
        "",
        "| variant | ms per call | / direct | eager / this |",
        "|---|---|---|---|",
    ]
    checks = rows[-1]
    for row in rows[:-1]:
        lines.append(
            f"| {row['variant']} | {row['ms_per_call']:.3f} | {row['vs_direct']:.2f} | {row['speedup_vs_eager']:.1f} |"
        )
    lines += [
        "",
        (
            f"- eager / compiled: **{checks['eager_over_compiled']:.1f}x** (target >= {checks['speedup_target']}: "
            f"{'met' if checks['speedup_met'] else 'NOT met'})"
        ),
        (
            f"- compiled - direct onnxruntime: **{checks['overhead_ms']:.3f} ms** per call, ratio "
            f"{checks['compiled_over_direct']:.2f} (target <= {checks['overhead_ms_target']} ms: "
            f"{'met' if checks['overhead_met'] else 'NOT met'})"
        ),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--quick", action="store_true", help="fewer calls per round")
    args = parser.parse_args(argv)
    sys.stdout.write(markdown(section_trace(args.runs, args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
