"""A model for the onnxruntime the target has (``PackOptions.target_runtime``: ``"X.Y"``).

An onnxruntime release loads models up to one IR version and implements the
``ai.onnx`` and ``ai.onnx.ml`` opsets up to one version each
(:data:`RUNTIMES`, from onnxruntime's compatibility table). A model saved by a
newer onnx is written down to what the target loads:

- the IR version is lowered, unless the model uses what that IR lacks (a
  float8 or int4 element type, a function overload), which is refused naming it;
- the ``ai.onnx`` opset is lowered by onnx's version converter; an operator
  that the target's opset does not have at all (``RMSNormalization`` is opset
  23) is refused by name, before any conversion;
- the ``ai.onnx.ml`` opset is lowered when none of its operators changed in
  between, else the operator is refused by name;
- other domains (``com.microsoft``) are left as they are.

The caller proves the result on the packing machine as it proves any rewrite:
it must meet its bound (``maxerr``) against the model as given on every test case.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..base.deps import require
from ..base.errors import ModelError, UsageError
from ..base.log import warn_once
from ..base.naming import option_name
from ..base.numbers import parse_version


@dataclass(frozen=True)
class Runtime:
    """What one onnxruntime release loads: the newest IR version and the newest opsets of ai.onnx and ai.onnx.ml."""

    version: str
    ir_version: int
    opset: int
    ml_opset: int

    def to_json(self) -> dict[str, Any]:
        return {
            "onnxruntime": self.version,
            "ir_version": self.ir_version,
            "opset": self.opset,
            "ml_opset": self.ml_opset,
        }


# onnxruntime's compatibility table (onnxruntime.ai/docs/reference/compatibility.html): release -> IR, opset, ML opset
RUNTIMES: dict[tuple[int, int], tuple[int, int, int]] = {
    (1, 10): (8, 15, 2),
    (1, 11): (8, 16, 2),
    (1, 12): (8, 17, 3),
    (1, 13): (8, 17, 3),
    (1, 14): (8, 18, 3),
    (1, 15): (9, 19, 3),
    (1, 16): (9, 19, 3),
    (1, 17): (9, 20, 4),
    (1, 18): (10, 21, 4),
    (1, 19): (10, 21, 4),
    (1, 20): (10, 21, 4),
    (1, 21): (10, 22, 4),
}

# element types an IR version introduced (TensorProto.DataType): float8 in IR 9, int4 in IR 10, float4 in IR 11
_TYPES_SINCE = {17: 9, 18: 9, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11}
_DEFAULT, _ML = ("", "ai.onnx"), "ai.onnx.ml"


def parse_target(text: str) -> tuple[int, int]:
    """``1.17`` (or ``1.17.3``: what onnxruntime loads changes with its minor version only) as (1, 17).

    Raises:
        UsageError: not MAJOR.MINOR[.PATCH] in ASCII digits.
    """
    major, minor, *_ = parse_version(text, option_name("target_runtime"))
    return major, minor


def runtime_for(text: str, installed: str | None = None) -> Runtime | None:
    """What the onnxruntime ``text`` loads; None when it is at least the installed onnxruntime (whatever this one
    loads, that one loads too).

    Raises:
        UsageError: a version the table does not know, older than the installed one.
    """
    wanted = parse_target(text)
    if text.strip().count(".") == 2:
        warn_once(
            f"{option_name('target_runtime')} {text.strip()}: packing for onnxruntime {wanted[0]}.{wanted[1]} (what "
            "onnxruntime loads changes with its minor version only)"
        )
    if installed is not None and wanted >= parse_target(installed):
        return None
    limits = RUNTIMES.get(wanted)
    if limits is None:
        known = f"{'.'.join(map(str, min(RUNTIMES)))} to {'.'.join(map(str, max(RUNTIMES)))}"
        raise UsageError(
            f"{option_name('target_runtime')} {text}: mgedump does not know what onnxruntime {wanted[0]}.{wanted[1]} loads "
            f"(it knows {known}, and any version at least the installed {installed})"
        )
    return Runtime(f"{wanted[0]}.{wanted[1]}", *limits)


def _graphs(graph: Any) -> Iterator[Any]:
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _graphs(attr.g)
            for sub in attr.graphs:
                yield from _graphs(sub)


def _nodes(model: Any) -> Iterator[Any]:
    """Every node: the graph's, its subgraphs', and the model-local functions'."""
    for graph in _graphs(model.graph):
        yield from graph.node
    for function in model.functions:
        yield from function.node


def _elem_types(model: Any) -> Iterator[int]:
    for graph in _graphs(model.graph):
        yield from (t.data_type for t in graph.initializer)
        for value in [*graph.input, *graph.output, *graph.value_info]:
            if value.type.HasField("tensor_type"):
                yield value.type.tensor_type.elem_type
    for node in _nodes(model):
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t.data_type
            if attr.name == "to" and attr.type == attr.INT:  # Cast, CastLike's target
                yield attr.i


def _check_ir(model: Any, runtime: Runtime) -> None:
    """Refuse a model that needs a newer IR than the target's: what it uses that the target's IR lacks."""
    onnx = require("onnx", purpose=option_name("target_runtime"))
    for elem in sorted(set(_elem_types(model))):
        since = _TYPES_SINCE.get(elem, 0)
        if since > runtime.ir_version:
            name = onnx.TensorProto.DataType.Name(elem)
            raise ModelError(
                f"the model uses element type {name}, which IR version {since} introduced; onnxruntime "
                f"{runtime.version} loads IR {runtime.ir_version} at most"
            )
    overloads = [n.op_type for n in _nodes(model) if getattr(n, "overload", "")]
    overloads += [f.name for f in model.functions if getattr(f, "overload", "")]
    if overloads and runtime.ir_version < 10:
        raise ModelError(
            f"the model uses a function overload ({overloads[0]!r}), which IR version 10 introduced; onnxruntime "
            f"{runtime.version} loads IR {runtime.ir_version} at most"
        )


def _check_ops(model: Any, domain: str, have: int, want: int, runtime: Runtime) -> bool:
    """Refuse an operator the target's opset does not have; return whether any operator changed in between."""
    defs = require("onnx.defs", purpose=option_name("target_runtime"))
    changed = False
    what = "ai.onnx" if domain in _DEFAULT else domain
    for node in _nodes(model):
        if (node.domain or "") not in ((domain,) if domain == _ML else _DEFAULT):
            continue
        try:
            old = defs.get_schema(node.op_type, want, node.domain or "")
        except defs.SchemaError:
            first = _since(defs, node, have)
            where = f" (node {node.name!r})" if node.name else ""
            raise ModelError(
                f"operator {node.op_type}{where} is {what} opset {first or have}, newer "
                f"than onnxruntime {runtime.version} has ({what} opset {want})",
                hint=f"pack for a newer onnxruntime, or export the model without {node.op_type}",
            ) from None
        try:
            new = defs.get_schema(node.op_type, have, node.domain or "")
        except defs.SchemaError:
            continue  # not an operator onnx knows: onnxruntime says
        changed |= new.since_version != old.since_version
    return changed


def _since(defs: Any, node: Any, have: int) -> int | None:
    try:
        return int(defs.get_schema(node.op_type, have, node.domain or "").since_version)
    except defs.SchemaError:
        return None


def _opset(model: Any, domains: tuple[str, ...]) -> int | None:
    return next((int(o.version) for o in model.opset_import if o.domain in domains), None)


def _set_opset(model: Any, domains: tuple[str, ...], version: int) -> None:
    for entry in model.opset_import:
        if entry.domain in domains:
            entry.version = version


def retarget(model: Any, runtime: Runtime) -> list[str]:
    """Lower the model, in place, to what ``runtime`` loads; return what changed (empty: nothing needed).

    Raises:
        ModelError: an operator or a feature the target does not have (named), or a conversion that failed.
    """
    changes = []
    _check_ir(model, runtime)
    ml = _opset(model, (_ML,))
    if ml is not None and ml > runtime.ml_opset:
        if _check_ops(model, _ML, ml, runtime.ml_opset, runtime):
            raise ModelError(
                f"an ai.onnx.ml operator of the model changed after ai.onnx.ml opset {runtime.ml_opset}, the newest "
                f"onnxruntime {runtime.version} has; mgedump converts the ai.onnx opset only"
            )
        _set_opset(model, (_ML,), runtime.ml_opset)
        changes.append(f"ai.onnx.ml opset {ml} -> {runtime.ml_opset}")
    opset = _opset(model, _DEFAULT)
    if opset is not None and opset > runtime.opset:
        _check_ops(model, "", opset, runtime.opset, runtime)
        model = _convert(model, runtime)
        changes.append(f"ai.onnx opset {opset} -> {runtime.opset}")
    if model.ir_version > runtime.ir_version:
        changes.append(f"IR version {model.ir_version} -> {runtime.ir_version}")
        model.ir_version = runtime.ir_version
    return changes


def _convert(model: Any, runtime: Runtime) -> Any:
    """onnx's version converter, into ``model`` itself."""
    converter = require("onnx.version_converter", purpose=option_name("target_runtime"))
    try:
        converted = converter.convert_version(model, runtime.opset)
    except Exception as exc:  # the converter raises RuntimeError, ValueError or its C++ errors
        text = " ".join(str(exc).split())[:300]
        raise ModelError(
            f"onnx's version converter cannot write the model at ai.onnx opset {runtime.opset} for onnxruntime "
            f"{runtime.version}: {text}"
        ) from None
    model.CopyFrom(converted)
    return model


@dataclass(frozen=True)
class Retargeted:
    """A model written for a target runtime: its file (None: the model loads there as it is) and what changed."""

    runtime: Runtime | None
    path: str | None
    changes: list[str]

    def to_json(self, wanted: str) -> dict[str, Any]:
        limits = self.runtime.to_json() if self.runtime else {"onnxruntime": wanted}
        return {**limits, "onnxruntime": wanted, "converted": list(self.changes)}


def retarget_file(src: str, dst: str, wanted: str) -> Retargeted:
    """Write src for the onnxruntime ``wanted`` to dst, when anything must change (with its weights embedded, or
    as external data beside dst when they pass protobuf's 2 GiB).

    Raises:
        UsageError: an unknown target version.
        ModelError: what the target cannot load, named.
    """
    installed = require("onnxruntime", purpose=option_name("target_runtime")).__version__
    runtime = runtime_for(wanted, installed)
    if runtime is None:
        return Retargeted(None, None, [])
    onnx = require("onnx", purpose=option_name("target_runtime"))
    try:
        model = onnx.load(src, load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise ModelError(f"{src}: not a valid ONNX model ({type(exc).__name__})") from None
    external = os.path.dirname(os.path.abspath(src))
    changes = retarget(model, runtime)
    if not changes:
        return Retargeted(runtime, None, [])
    onnx.external_data_helper.load_external_data_for_model(model, external)
    large = model.ByteSize() >= (1 << 31) - 1
    onnx.save_model(model, dst, save_as_external_data=large, location=os.path.basename(dst) + ".data")
    return Retargeted(runtime, dst, changes)
