"""The latency gate's false alarms and detections on this machine (docs/benchmarks.md, "Latency gate").

A model of 10 MatMuls of [64, 256] x [256, 256] (one intra-op thread) is packed as ``base/m.mgetest``; the same
model with 3 more MatMuls (about 30% slower, the same bundle name) as ``slow/m.mgetest``. One baseline report is
taken of the first; then, alternated run by run, each bundle is checked ``--runs`` times (20) with
``--baseline baseline.json --max-slowdown 1.10`` and with ``--max-latency`` set 15% over the baseline's figure.
A false alarm is exit 3 for the unchanged bundle; a detection is exit 3 for the slower one. Targets: false alarms
at most 1 of 20 (under 5%), detections at least 19 of 20.

    python scripts/bench_gates.py [--runs 20] [--iter 30] [--percentile p90]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def model(path: Path, layers: int) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, last = [], [], "x"
    for k in range(layers):
        weight = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
        inits.append(numpy_helper.from_array(weight, f"w{k}"))
        out = "y" if k == layers - 1 else f"h{k}"
        nodes.append(helper.make_node("MatMul", [last, f"w{k}"], [out], name=f"mm{k}"))
        last = out
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 256])],
        initializer=inits,
    )
    made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    made.ir_version = 8
    onnx.save(made, str(path))


def mgerun(*args: str) -> int:
    script = shutil.which("mgerun", path=str(Path(sys.executable).parent)) or "mgerun"
    return subprocess.run([script, *args], capture_output=True, text=True).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--iter", type=int, default=30)
    parser.add_argument("--percentile", default="p90", choices=("p50", "p90", "p99"))
    args = parser.parse_args()
    common = ["--iter", str(args.iter), "--warmup-iter", "3", "--thread", "1", "-q"]
    with tempfile.TemporaryDirectory(prefix="bench-gates-") as folder:
        tmp = Path(folder)
        for name, layers in (("base", 10), ("slow", 13)):
            model(tmp / f"{name}.onnx", layers)
            (tmp / name).mkdir()
            packed = subprocess.run(
                [shutil.which("mgedump", path=str(Path(sys.executable).parent)) or "mgedump",
                 str(tmp / f"{name}.onnx"), "-d", "#rand(0,1)", "-o", str(tmp / name / "m.mgetest"), "-q"],
                capture_output=True, text=True,
            )  # fmt: skip
            assert packed.returncode == 0, packed.stderr
        baseline = tmp / "baseline.json"
        assert mgerun(str(tmp / "base" / "m.mgetest"), *common, "--report-json", str(baseline)) == 0
        document = json.loads(baseline.read_text())
        key = {"p50": "median", "p90": "p90", "p99": "p99"}[args.percentile]
        figure = document["bundles"][0]["test_cases"][0]["latency_ms"][key]
        limit = figure * 1.15
        gates = {
            "baseline": ["--baseline", str(baseline), "--max-slowdown", "1.10"],
            "max-latency": ["--max-latency", f"{limit:.6f}"],
        }
        counts = {(gate, name): 0 for gate in gates for name in ("base", "slow")}
        for _ in range(args.runs):
            for gate, flags in gates.items():
                for name in ("base", "slow"):
                    code = mgerun(
                        str(tmp / name / "m.mgetest"), *common, "--latency-percentile", args.percentile, *flags
                    )
                    assert code in (0, 3), code
                    counts[gate, name] += code == 3
        print(f"baseline {args.percentile} {figure:.3f} ms; --max-latency {limit:.3f} ms; {args.runs} runs each")
        print("| gate | unchanged bundle: false alarms | 30% slower bundle: detected |")
        print("|---|---|---|")
        for gate in gates:
            print(f"| `{gate}` | {counts[gate, 'base']} of {args.runs} | {counts[gate, 'slow']} of {args.runs} |")
        ok = all(
            counts[g, "base"] <= args.runs // 20 and counts[g, "slow"] >= args.runs - args.runs // 20 for g in gates
        )
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
