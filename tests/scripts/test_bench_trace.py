"""scripts/bench_trace.py runs in quick mode and reports numbers for every variant."""

from __future__ import annotations

import subprocess
import sys

from tests.support import ROOT


def test_bench_trace_quick_prints_a_table():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_trace.py"), "--quick", "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and not line.startswith("| variant")]
    assert [r.split("|")[1].strip().split(":")[0] for r in rows] == ["eager (numpy)", "compiled", "compiled", "direct"]
    for row in rows:
        float(row.split("|")[2])  # ms per call
    assert "eager / compiled: **" in done.stdout and "compiled - direct onnxruntime: **" in done.stdout
