"""Where the time goes: onnxruntime's profile (``--profile``) summed per operator type.

onnxruntime writes one Chrome-trace event per node and run (category ``Node``,
name ``<node>_kernel_time``, ``args.op_name``, ``dur`` in microseconds) and one
``model_run`` event per run. :func:`op_table` sums the kernel times per
operator type, as MegEngine's load_and_run prints its profile: how many nodes
of the type run in one model run, their time in all and per run, and their
share of all kernel time.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any


def op_table(profile_path: str) -> list[dict[str, Any]]:
    """Time per operator type from an onnxruntime profile file, the most expensive first.

    Returns:
        One dict per operator type: ``op_type``, ``nodes`` (kernel calls per
        model run), ``calls``, ``total_ms``, ``ms_per_run`` and ``share`` (of all
        kernel time, 0 to 1). Empty when the profile holds no kernel events.
    """
    with open(profile_path, encoding="utf-8") as f:
        events = json.load(f)
    return op_table_of(events)


def op_table_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`op_table` for events already read."""
    runs = sum(1 for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
    calls: dict[str, int] = defaultdict(int)
    micros: dict[str, float] = defaultdict(float)
    for event in events:
        if event.get("cat") != "Node" or not str(event.get("name", "")).endswith("_kernel_time"):
            continue
        op_type = str((event.get("args") or {}).get("op_name", "?"))
        calls[op_type] += 1
        micros[op_type] += float(event.get("dur", 0))
    total = sum(micros.values())
    rows = [
        {
            "op_type": op_type,
            "calls": calls[op_type],
            "nodes": calls[op_type] / runs if runs else None,
            "total_ms": micros[op_type] / 1e3,
            "ms_per_run": micros[op_type] / 1e3 / runs if runs else None,
            "share": micros[op_type] / total if total else 0.0,
        }
        for op_type in micros
    ]
    return sorted(rows, key=lambda row: (-row["total_ms"], row["op_type"]))
