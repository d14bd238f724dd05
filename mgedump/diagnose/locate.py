"""Two models run on the same test cases and compared tensor by tensor: the pack-time self-check's diagnosis,
``mgerun``'s with an embedded dump, and ``mgediff`` of models."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .diff import DiffReport, NodeDiff, diff_dumps
from .iodump import IoDump
from .run import ModelDumper, RunSettings, dump_to_scratch

Cases = Sequence[tuple[int, Mapping[str, np.ndarray]]]


def inputs_for(model_inputs: Mapping[str, str], feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Feeds cast to a model's input dtypes (float32 data for a float16 model, and back)."""
    out = {}
    for name, value in feeds.items():
        dtype = model_inputs.get(name)
        out[name] = (
            value.astype(dtype) if dtype and value.dtype.kind == "f" and value.dtype != np.dtype(dtype) else value
        )
    return out


def dump_model(
    path: str, sha256: str, cases: Cases, scratch: str, settings: RunSettings | None = None, *, label: str
) -> IoDump:
    """Run a model with every tensor exposed on test cases; the dump goes under ``scratch``."""
    with ModelDumper(path, sha256, settings, label=label) as dumper:
        dtypes = _input_dtypes(dumper.runner.model)
        return dump_to_scratch(dumper, [(k, inputs_for(dtypes, feeds)) for k, feeds in cases], scratch)


def _input_dtypes(model: object) -> dict[str, str]:
    from onnx.helper import tensor_dtype_to_np_dtype

    dtypes = {}
    for value in model.graph.input:  # type: ignore[attr-defined]
        elem = value.type.tensor_type.elem_type
        if elem:
            dtypes[value.name] = str(np.dtype(tensor_dtype_to_np_dtype(elem)))
    return dtypes


def compare_models(
    a: tuple[str, str],
    b: tuple[str, str],
    cases: Cases,
    scratch: str,
    *,
    maxerr: float | None = None,
    settings: RunSettings | None = None,
    labels: tuple[str, str] = ("A", "B"),
) -> DiffReport:
    """Run models A and B (each a (path, sha256)) on the same test cases and compare every tensor they share."""
    dump_a = dump_model(*a, cases, scratch, settings, label=labels[0])
    dump_b = dump_model(*b, cases, scratch, settings, label=labels[1])
    return diff_dumps(dump_a, dump_b, maxerr=maxerr, label_a=labels[0], label_b=labels[1])


def describe(node: NodeDiff) -> str:
    """One node that introduces error, as people read it."""
    out = node.output
    where = ""
    if out.index is not None:
        where = f" (worst element at {list(out.index)}: A={_text(out.a_value)}, B={_text(out.b_value)})"
    elif out.reason:
        where = f" ({out.reason})"
    inputs = ", ".join(f"{name} {err:.3g}" for name, err in node.inputs.items())
    carried = f"; its inputs carry err {inputs}" if inputs else ""
    cause = f"; {node.cause}" if node.cause else ""
    return (
        f"node {node.node.name!r} ({node.node.op_type}), output {out.name!r} err {node.err:.3g}{where}{carried}{cause}"
    )


def _text(value: object) -> str:
    return repr(value) if isinstance(value, (str, bytes)) else str(value)
