"""Two models run on the same test cases and compared tensor by tensor: the pack-time self-check's diagnosis,
``mgerun``'s with an embedded dump, and ``mgediff`` of models."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..model.session import SessionSettings
from .divergence import DiffReport, diff_dumps
from .exposed import ModelDumper, dump_to_scratch
from .iodump import IoDump

Cases = Sequence[tuple[int, Mapping[str, np.ndarray]]]


def inputs_for(model_inputs: Mapping[str, str], feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Feeds cast to a model's input dtypes (float32 data for a float16 model, and back)."""
    out = {}
    for name, value in feeds.items():
        dtype = model_inputs.get(name)
        out[name] = (
            value.astype(dtype)
            if dtype and isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.dtype != np.dtype(dtype)
            else value
        )
    return out


def dump_model(
    path: str, sha256: str, cases: Cases, scratch: str, settings: SessionSettings | None = None, *, label: str
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
    settings: SessionSettings | None = None,
    labels: tuple[str, str] = ("A", "B"),
) -> DiffReport:
    """Run models A and B (each a (path, sha256)) on the same test cases and compare every tensor they share."""
    dump_a = dump_model(*a, cases, scratch, settings, label=labels[0])
    dump_b = dump_model(*b, cases, scratch, settings, label=labels[1])
    return diff_dumps(dump_a, dump_b, maxerr=maxerr, label_a=labels[0], label_b=labels[1])
