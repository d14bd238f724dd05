"""``io16xc32``: float16 tensors between operators and at the model's inputs and outputs, float32 arithmetic
(MegEngine's ``enable_io16xc32``).

Each operator casts its inputs to float32, computes in float32 and casts its outputs back: it saves memory, not
time, on a CPU whose kernels compute in float32, and a pack says how much slower it runs here.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Mapping
from typing import Any

from ...model.modelfile import data_files
from ...model.runtime import open_session
from ..offline import save
from . import Job
from .float16_modes import float16_mode

LATENCY_ROUNDS, LATENCY_RUNS = 3, 5
ONE_AT_A_TIME = 256 << 20  # a model past this size (its data files included) is timed one session at a time


def _size(path: str) -> int:
    """A model's bytes, its external data files included."""
    return sum(os.path.getsize(file) for file in [path, *data_files(path)])


def _round(session: Any, feeds: Mapping[str, Any], times: list[float]) -> None:
    """One round: a warm-up run, then :data:`LATENCY_RUNS` timed runs."""
    session.run(None, feeds)
    for _ in range(LATENCY_RUNS):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)


def latency_note(float32_path: str, found: Any, job: Job) -> list[str]:
    """io16xc32 against the float32 model on this CPU, on the first test case (alternated rounds, medians; a model
    past :data:`ONE_AT_A_TIME` one session after the other, never both holding its weights): onnxruntime's CPU
    kernels compute in float32, so every float16 tensor between them costs Casts."""
    import numpy as np

    path = found.path
    if not path or not os.path.exists(path):
        path = os.path.join(job.scratch, "latency16.onnx")
        save(found.model, path, False)
    files = {"float32": float32_path, "io16xc32": path}
    half = {v.name for v in found.model.graph.input if v.type.tensor_type.elem_type == 10}
    feeds: Mapping[str, Any] = job.test_inputs[0]
    inputs = {
        "float32": dict(feeds),
        "io16xc32": {k: (v.astype(np.float16) if k in half else v) for k, v in feeds.items()},
    }
    times: dict[str, list[float]] = {"float32": [], "io16xc32": []}
    if _size(float32_path) > ONE_AT_A_TIME:  # two sessions would hold the weights twice: one, then the other
        for label, file in files.items():
            session = open_session(file, label=f"the {label} model")
            for _ in range(LATENCY_ROUNDS):
                _round(session, inputs[label], times[label])
            del session
    else:
        sessions = {label: open_session(file, label=f"the {label} model") for label, file in files.items()}
        for _ in range(LATENCY_ROUNDS):
            for label, session in sessions.items():
                _round(session, inputs[label], times[label])
    ratio = statistics.median(times["io16xc32"]) / max(statistics.median(times["float32"]), 1e-9)
    why = (
        "onnxruntime computes in float32 here and every float16 tensor between its kernels costs Casts; it saves "
        "memory, not time"
        if ratio > 1.05
        else "no slower here, the model being mostly float32 (elsewhere io16xc32 runs slower than float32 on a CPU)"
    )
    return [
        f"io16xc32: {ratio:.2f}x the float32 model's latency on this CPU (test case 0, medians of "
        f"{LATENCY_ROUNDS * LATENCY_RUNS} runs): {why}"
    ]


MODE = float16_mode(
    "io16xc32", "float16 tensors between operators and at inputs/outputs; float32 arithmetic", after=latency_note
)
