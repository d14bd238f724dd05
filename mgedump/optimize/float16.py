"""float16 for inference: ``--enable-ioc16`` and ``--enable-io16xc32``.

- ``--enable-ioc16``: onnxruntime's float16 converter
  (``onnxruntime.transformers.float16``), with every op that has no float16 CPU
  kernel in onnxruntime (and the ops that must stay float32: Resize, TopK,
  Range, CumSum, NMS, ...) kept float32 behind Casts; weights stored as float16.
  The converter's known breakage is repaired (duplicate Cast names on unnamed
  nodes, topological order).
- ``--enable-io16xc32``: our own pass: every float tensor between operators and
  at the model's inputs and outputs is float16; each operator casts its inputs
  to float32, computes in float32 and casts its outputs back.
"""

from __future__ import annotations

from typing import Any

from ..errors import ModelError
from ..log import warn_once

# ops that must stay float32 whatever the kernels say (their inputs are indices, scales or sizes)
FLOAT32_ONLY_OPS = (
    "Resize",
    "Upsample",
    "TopK",
    "NonMaxSuppression",
    "Range",
    "CumSum",
    "RoiAlign",
    "RandomUniformLike",
)


def _cpu_float16_ops() -> set[str]:
    """Ops of the default domain that have a float16 kernel in onnxruntime's CPU provider."""
    from onnxruntime.capi import _pybind_state as C

    ops = set()
    for kernel in C.get_all_opkernel_def():
        on_cpu = kernel.provider == "CPUExecutionProvider" and kernel.domain in ("", "ai.onnx")
        if on_cpu and any("tensor(float16)" in types for types in kernel.type_constraints.values()):
            ops.add(kernel.op_name)
    return ops


def _all_op_types(graph: Any, out: set[str]) -> set[str]:
    for node in graph.node:
        out.add(node.op_type)
        for attr in node.attribute:
            if attr.HasField("g"):
                _all_op_types(attr.g, out)
            for sub in attr.graphs:
                _all_op_types(sub, out)
    return out


def _warn_clamped(model: Any) -> None:
    """float16 converters clamp out-of-range weights silently: say how many and the worst."""
    import numpy as np
    from onnx import numpy_helper

    count, worst = 0, 0.0
    for init in model.graph.initializer:
        if init.data_type != 1:  # FLOAT
            continue
        values = numpy_helper.to_array(init)
        big = np.abs(values[np.isfinite(values)]) > 65504
        if big.any():
            count += int(big.sum())
            worst = max(worst, float(np.abs(values[np.isfinite(values)]).max()))
    if count:
        warn_once(
            f"float16 conversion clamps {count} weight value(s) beyond float16's range (largest magnitude {worst:g}) to 65504"
        )


def _is_float16_model(model: Any) -> bool:
    from onnx import TensorProto

    io = list(model.graph.input) + list(model.graph.output)
    floats = [v for v in io if v.type.tensor_type.elem_type in (TensorProto.FLOAT, TensorProto.FLOAT16)]
    return bool(floats) and all(v.type.tensor_type.elem_type == TensorProto.FLOAT16 for v in floats)


def ioc16(model: Any, notes: list[str]) -> Any:
    """float16 storage and arithmetic; ops without a float16 CPU kernel stay float32 behind Casts."""
    if _is_float16_model(model):
        notes.append("the model is float16 already")
        return model
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    _warn_clamped(model)
    name_nodes(model.graph)  # the converter names its Casts after nodes: unnamed nodes would collide
    supported = _cpu_float16_ops()
    present = _all_op_types(model.graph, set())
    block = sorted(set(DEFAULT_OP_BLOCK_LIST) | set(FLOAT32_ONLY_OPS) | {op for op in present if op not in supported})
    converted = convert_float_to_float16(model, keep_io_types=False, op_block_list=block, force_fp16_initializers=True)
    check_topology(converted)
    return converted


def name_nodes(graph: Any) -> None:
    """Give every node a unique name (keeping unique ones as they are)."""
    seen: set[str] = set()
    for index, node in enumerate(graph.node):
        if not node.name or node.name in seen:
            node.name = f"{node.op_type}_{index}"
            while node.name in seen:
                node.name += "_"
        seen.add(node.name)


def io16xc32(model: Any, notes: list[str]) -> Any:
    """float16 tensors between operators and at the inputs and outputs; float32 arithmetic inside each operator."""
    import onnx
    from onnx import TensorProto, helper

    if _is_float16_model(model):
        notes.append("the model is float16 already")
        return model
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = model.graph
    types = {
        v.name: v.type.tensor_type.elem_type
        for v in list(inferred.graph.value_info) + list(graph.input) + list(graph.output)
    }
    initializers = {i.name for i in graph.initializer}
    is_float = lambda name: types.get(name) == TensorProto.FLOAT and name not in initializers  # noqa: E731
    used = {n for node in graph.node for n in list(node.input) + list(node.output)} | {v.name for v in graph.input}
    counter = [0]

    def fresh(base: str) -> str:
        while True:
            counter[0] += 1
            name = f"{base}__io16_{counter[0]}"
            if name not in used:
                used.add(name)
                return name

    nodes = []
    as32: dict[str, str] = {}
    for value in graph.input:
        if is_float(value.name):
            value.type.tensor_type.elem_type = TensorProto.FLOAT16
            as32[value.name] = fresh(value.name)
            nodes.append(
                helper.make_node("Cast", [value.name], [as32[value.name]], name=fresh("cast32"), to=TensorProto.FLOAT)
            )
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in as32:
                node.input[i] = as32[name]
        outs = list(node.output)
        nodes.append(node)
        for i, name in enumerate(outs):
            if not is_float(name):
                continue
            wide = fresh(name)
            node.output[i] = wide
            nodes.append(helper.make_node("Cast", [wide], [name], name=fresh("cast16"), to=TensorProto.FLOAT16))
            as32[name] = fresh(name)
            nodes.append(helper.make_node("Cast", [name], [as32[name]], name=fresh("cast32"), to=TensorProto.FLOAT))
    # drop the float32 Casts nobody reads (after the last use of a tensor, or of a graph output)
    outputs = {v.name for v in graph.output}
    consumed = {name for node in nodes for name in node.input} | outputs
    del graph.node[:]
    graph.node.extend(
        n for n in nodes if not (n.op_type == "Cast" and "__io16_" in n.output[0] and n.output[0] not in consumed)
    )
    for value in graph.output:
        if types.get(value.name) == TensorProto.FLOAT:
            value.type.tensor_type.elem_type = TensorProto.FLOAT16
    del graph.value_info[:]
    check_topology(model)
    return model


def check_topology(model: Any) -> None:
    """Sort nodes so each comes after what it reads, and make node names unique (float16 converters break both).

    Raises:
        ModelError: a node reads a tensor nothing produces.
    """
    graph = model.graph
    known = {v.name for v in graph.input} | {i.name for i in graph.initializer} | {""}
    # The converter names the Cast before a float32-only node after its input, so a tensor read by two such
    # nodes gets two identical Casts with one output name: keep the first.
    producers: dict[str, Any] = {}
    unique = []
    for node in graph.node:
        twin = next((producers[o] for o in node.output if o in producers), None)
        if twin is not None:
            if (
                node.op_type == "Cast"
                and twin.op_type == "Cast"
                and list(node.input) == list(twin.input)
                and list(node.output) == list(twin.output)
                and node.attribute == twin.attribute
            ):
                continue
            raise ModelError(f"float16 conversion broke the graph: two nodes write {node.output[0]!r}")
        producers.update((o, node) for o in node.output)
        unique.append(node)
    producer_count = dict.fromkeys(producers, 1)
    pending = unique
    ordered = []
    while pending:
        ready = [n for n in pending if all(i in known or i not in producer_count for i in n.input)]
        if not ready:
            raise ModelError(
                f"float16 conversion broke the graph: node {pending[0].name or pending[0].op_type!r} is in a cycle"
            )
        ready_ids = {id(n) for n in ready}
        pending = [n for n in pending if id(n) not in ready_ids]
        for node in ready:
            known.update(node.output)
        ordered.extend(ready)
    names: set[str] = set()
    for index, node in enumerate(ordered):
        if node.name:
            if node.name in names:
                node.name = f"{node.name}_{index}"
            names.add(node.name)
    copies = [type(n)() for n in ordered]
    for copy, node in zip(copies, ordered, strict=True):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(copies)
