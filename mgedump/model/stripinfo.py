"""Strip info (docs/bundle.md#strip-info): what a runtime must contain to run a model.

``write_strip_info`` writes a JSON file (format ``mgedump-strip-info``, version
1) with the model's sha256, the operators it uses (domain, op type, opset of
that domain, subgraphs included) and the tensor dtypes it computes with; and,
beside it, an onnxruntime reduced-build operator config in the format of
onnxruntime's ``create_reduced_build_config.py`` (lines ``domain;opset;Op1,Op2``,
the default domain written ``ai.onnx``), from which a minimal onnxruntime with
only those kernels can be built (``build.sh --include_ops_by_config FILE``).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from typing import Any

from ..base import text
from ..base.errors import OutputError
from ..base.fileio import hash_files, write_bytes_atomic
from .valuetype import ELEMENT_TYPES

FORMAT = "mgedump-strip-info"
VERSION = 1

_DTYPE_NAMES = {number: name for number, (_, name) in ELEMENT_TYPES.items()}


def _checked_entry(model: Any) -> dict[str, Any]:
    """One model of a strip-info file read to append to, its fields' types checked (a file from elsewhere).

    Raises:
        ValueError: naming what is wrong.
    """
    operators = model.get("operators")
    if (
        not isinstance(model.get("model"), str)
        or not isinstance(operators, list)
        or not all(
            isinstance(op, dict)
            and isinstance(op.get("domain"), str)
            and isinstance(op.get("op_type"), str)
            and isinstance(op.get("opset"), int)
            and not isinstance(op.get("opset"), bool)
            for op in operators
        )
        or not isinstance(model.get("dtypes"), list)
        or not all(isinstance(d, str) for d in model["dtypes"])
    ):
        raise ValueError("a model entry is not a model's name, operators and dtypes")
    return {**model, "model": text.json(model["model"])}


def strip_info_paths(json_path: str) -> tuple[str, str]:
    """The strip-info JSON and, beside it, onnxruntime's reduced-build config (``X.json`` -> ``X.required_operators.config``)."""
    return json_path, f"{json_path.removesuffix('.json')}.required_operators.config"


def _walk(graph: Any, opsets: dict[str, int], ops: set[tuple[str, int, str]], dtypes: set[str]) -> None:
    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        if value.type.HasField("tensor_type"):
            dtypes.add(_DTYPE_NAMES.get(value.type.tensor_type.elem_type, str(value.type.tensor_type.elem_type)))
    for init in graph.initializer:
        dtypes.add(_DTYPE_NAMES.get(init.data_type, str(init.data_type)))
    for node in graph.node:
        domain = node.domain or "ai.onnx"
        ops.add((domain, opsets.get(domain, 0), node.op_type))
        for attr in node.attribute:
            if attr.HasField("t"):
                dtypes.add(_DTYPE_NAMES.get(attr.t.data_type, str(attr.t.data_type)))
            if attr.HasField("g"):
                _walk(attr.g, opsets, ops, dtypes)
            for sub in attr.graphs:
                _walk(sub, opsets, ops, dtypes)


def model_strip_info(model_path: str, *, model_sha256: str | None = None) -> dict[str, Any]:
    """The operators and dtypes of one model (weights are not loaded)."""
    import onnx

    model = onnx.load(model_path, load_external_data=False)
    with contextlib.suppress(Exception):  # shape inference is best effort: the ops do not depend on it
        model = onnx.shape_inference.infer_shapes(model)  # dtypes of intermediate tensors
    opsets = {(op.domain or "ai.onnx"): op.version for op in model.opset_import}
    ops: set[tuple[str, int, str]] = set()
    dtypes: set[str] = set()
    _walk(model.graph, opsets, ops, dtypes)
    return {
        "sha256": model_sha256 or hash_files([model_path]).sha256,
        "operators": [{"domain": d, "opset": v, "op_type": t} for d, v, t in sorted(ops)],
        "dtypes": sorted(dtypes),
    }


def reduced_build_config(operators: list[dict[str, Any]], model_names: list[str]) -> str:
    """onnxruntime's reduced-build config text for these operators."""
    by_domain: dict[tuple[str, int], set[str]] = {}
    for op in operators:
        by_domain.setdefault((op["domain"], op["opset"]), set()).add(op["op_type"])
    lines = ["# Generated from ONNX model/s:"] + [f"# - {name}" for name in model_names]
    lines += [f"{domain};{opset};{','.join(sorted(names))}" for (domain, opset), names in sorted(by_domain.items())]
    return "\n".join(lines) + "\n"


def write_strip_info(
    model_path: str,
    json_path: str,
    *,
    append: bool = False,
    model_sha256: str | None = None,
    inputs: Sequence[str] = (),
    label: str | None = None,
    others: Sequence[tuple[str, str, str | None]] = (),
) -> dict[str, Any]:
    """Write the strip-info JSON and the reduced-build config beside it.

    Args:
        model_path: the model (as it will run).
        json_path: the JSON to write; the config goes to ``X.required_operators.config``.
        append: merge into an existing strip-info JSON (its models, operators
            and dtypes are kept), as MegEngine's ``append_json`` does.
        model_sha256: the model's hash, when the caller has it.
        inputs: files the strip info must not overwrite.
        label: what the model is called in the JSON (default: its file name).
        others: more models the same build must run, as (path, label, sha256 or None): a bundle's variants.

    Returns:
        The JSON written.

    Raises:
        OutputError: the JSON to append to is not a strip-info file, or a file cannot be written.
    """
    info = model_strip_info(model_path, model_sha256=model_sha256)
    info["model"] = text.json(label or os.path.basename(model_path))  # a file name may hold bytes not UTF-8
    more = []
    for path, name, sha256 in others:
        more.append(model_strip_info(path, model_sha256=sha256))
        more[-1]["model"] = text.json(name)
    models = []
    if append and os.path.exists(json_path):
        try:
            with open(json_path, encoding="utf-8") as f:
                previous = json.load(f)
            if previous.get("format") != FORMAT:
                raise ValueError("not a strip-info file")
            models = [_checked_entry(m) for m in previous["models"] if m.get("sha256") != info["sha256"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise OutputError(f"cannot append strip info to {json_path}: {exc}") from None
    models += [info, *more]
    operators = sorted({(op["domain"], op["opset"], op["op_type"]) for m in models for op in m["operators"]})
    listed = [{"domain": d, "opset": v, "op_type": t} for d, v, t in operators]
    document = {
        "format": FORMAT,
        "version": VERSION,
        "models": models,
        "operators": listed,
        "dtypes": sorted({d for m in models for d in m["dtypes"]}),
    }
    _, config_path = strip_info_paths(json_path)
    write_bytes_atomic(json_path, (json.dumps(document, indent=1, sort_keys=True) + "\n").encode(), inputs)
    write_bytes_atomic(config_path, reduced_build_config(listed, [m["model"] for m in models]).encode(), inputs)
    return document
