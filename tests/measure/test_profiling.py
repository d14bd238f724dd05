"""The time per operator type, summed from onnxruntime's profile events."""

from __future__ import annotations

import pytest

from mgedump.measure.profiling import op_table, op_table_of


def _kernel(node: str, op: str, micros: float) -> dict:
    return {"cat": "Node", "name": f"{node}_kernel_time", "dur": micros, "args": {"op_name": op}}


def test_kernel_times_summed_per_operator_type():
    runs = [{"cat": "Session", "name": "model_run", "dur": 500}] * 2
    events = runs + [
        _kernel("conv1", "Conv", 100), _kernel("conv2", "Conv", 200), _kernel("relu", "Relu", 50),
        _kernel("conv1", "Conv", 110), _kernel("conv2", "Conv", 190), _kernel("relu", "Relu", 50),
        {"cat": "Node", "name": "conv1_fence_before", "dur": 999, "args": {"op_name": "Conv"}},  # not a kernel
    ]  # fmt: skip
    table = op_table_of(events)
    assert [row["op_type"] for row in table] == ["Conv", "Relu"]
    conv = table[0]
    assert conv["calls"] == 4 and conv["nodes"] == 2 and conv["total_ms"] == pytest.approx(0.6)
    assert conv["ms_per_run"] == pytest.approx(0.3) and conv["share"] == pytest.approx(600 / 700)
    assert sum(row["share"] for row in table) == pytest.approx(1.0)


def test_no_kernel_events_give_an_empty_table():
    assert op_table_of([{"cat": "Session", "name": "model_run", "dur": 5}]) == []


def test_a_real_profile(tmp_path):
    import numpy as np

    from mgedump.model.runtime import open_session
    from tests.support import SAMPLES

    session = open_session(str(SAMPLES / "cnn.onnx"), profile=str(tmp_path / "p"))
    for _ in range(3):
        session.run(None, {"data": np.zeros((1, 3, 32, 32), np.float32)})
    table = op_table(session.end_profiling())
    assert {"Conv", "Gemm", "Softmax"} <= {row["op_type"] for row in table}
    assert all(row["calls"] % 3 == 0 for row in table)  # every kernel, once per run
