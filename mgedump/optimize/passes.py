"""Graph rewrites of our own that ``--optimize-for-inference`` and ``--discard-var-name`` apply around onnxruntime's optimiser."""

from __future__ import annotations

from typing import Any

PROTOBUF_LIMIT = (1 << 31) - (64 << 20)  # beyond this a model keeps its weights outside (protobuf's 2 GiB)


def too_big(model: Any) -> bool:
    """Whether the model, held in memory, is past what protobuf serialises (:data:`PROTOBUF_LIMIT`): it is then
    checked and saved by path, its weights in external data, never serialised whole."""
    return int(model.ByteSize()) > PROTOBUF_LIMIT


def check_model(model: Any, what: str) -> None:
    """``onnx.checker`` on a model in memory (one within :data:`PROTOBUF_LIMIT`; a bigger one is checked by path
    once saved, :func:`check_saved`).

    Raises:
        ModelError: it fails the checker.
    """
    if not too_big(model):
        _checked(model, what)


def check_saved(path: str, what: str) -> None:
    """``onnx.checker`` on a saved model, by path: its external data is read where it is, never loaded whole."""
    _checked(path, what)


def _checked(model: Any, what: str) -> None:
    import onnx

    from ..base.errors import ModelError

    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        raise ModelError(f"{what} fails onnx.checker: {' '.join(str(exc).split())[:300]}") from None


def batchnorm_to_affine(model: Any, folder: str = "") -> int:
    """Rewrite inference BatchNormalization nodes whose parameters are constants as Mul + Add.

    onnxruntime folds a BatchNorm into the Conv before it; one that follows
    something else (a Concat, an Add) stays. As ``x * s + b`` with
    ``s = scale / sqrt(var + eps)`` and ``b = B - mean * s`` it is standard ONNX
    that any runtime computes, and that later Conv folding can absorb.

    Args:
        folder: where the model's external data lies (its weights may be read from there).

    Returns:
        How many nodes were rewritten.
    """
    import numpy as np
    from onnx import helper, numpy_helper

    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    count = 0
    nodes = []
    for node in graph.node:
        params = node.input[1:5]
        if (
            node.op_type != "BatchNormalization"
            or len(node.output) != 1
            or len(params) != 4
            or not all(p in weights for p in params)
        ):
            nodes.append(node)
            continue
        scale, bias, mean, var = (numpy_helper.to_array(weights[p], folder).astype(np.float64) for p in params)
        eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
        mul = scale / np.sqrt(var + eps)
        add = bias - mean * mul
        dtype = numpy_helper.to_array(weights[params[0]], folder).dtype
        rank = _rank_of(model, node.input[0])
        shape = (-1,) + (1,) * max(rank - 2, 0)
        base = node.output[0]
        mul_name, add_name, mid = f"{base}__bn_scale", f"{base}__bn_bias", f"{base}__bn_mul"
        graph.initializer.extend(
            [
                numpy_helper.from_array(mul.astype(dtype).reshape(shape), mul_name),
                numpy_helper.from_array(add.astype(dtype).reshape(shape), add_name),
            ]
        )
        nodes.append(
            helper.make_node("Mul", [node.input[0], mul_name], [mid], name=f"{node.name}__mul" if node.name else "")
        )
        nodes.append(helper.make_node("Add", [mid, add_name], [base], name=f"{node.name}__add" if node.name else ""))
        count += 1
    if count:
        del graph.node[:]
        graph.node.extend(nodes)
    return count


def _rank_of(model: Any, name: str) -> int:
    """A tensor's rank from the model's value infos (shape inference); 4 when unknown."""
    import onnx

    for value in list(model.graph.input) + list(model.graph.value_info):
        if value.name == name and value.type.tensor_type.HasField("shape"):
            return len(value.type.tensor_type.shape.dim)
    inferred = onnx.shape_inference.infer_shapes(model)
    for value in inferred.graph.value_info:
        if value.name == name and value.type.tensor_type.HasField("shape"):
            return len(value.type.tensor_type.shape.dim)
    return 4


def restore_ir(model: Any, source: Any) -> None:
    """Give an IR v3 model back its weights-as-inputs after onnxruntime saved it.

    onnxruntime drops initializers from graph.input (IR v3 requires them there,
    so onnx.checker fails) and keeps inputs for the initializers it folded away
    (so the model would ask for them): list exactly the real inputs, then every
    initializer.
    """
    model.ir_version = source.ir_version
    if source.ir_version >= 4:
        return
    from onnx import helper

    source_inits = {init.name for init in source.graph.initializer}
    real = [value for value in model.graph.input if value.name not in source_inits]
    current = {value.name: value for value in model.graph.input}
    weights = [
        current.get(init.name) or helper.make_tensor_value_info(init.name, init.data_type, list(init.dims))
        for init in model.graph.initializer
    ]
    del model.graph.input[:]
    model.graph.input.extend(real + weights)


def _used_domains(graph: Any, out: set[str]) -> None:
    for node in graph.node:
        out.add(node.domain or "")
        for attr in node.attribute:
            if attr.HasField("g"):
                _used_domains(attr.g, out)
            for sub in attr.graphs:
                _used_domains(sub, out)


def strip_opsets(model: Any) -> None:
    """Drop the opset imports no node uses (onnxruntime adds a dozen); keep the default domain."""
    used: set[str] = {""}
    _used_domains(model.graph, used)
    for function in model.functions:
        used.add(function.domain)
        for node in function.node:
            used.add(node.domain or "")
    keep = [op for op in model.opset_import if (op.domain or "") in used]
    del model.opset_import[:]
    model.opset_import.extend(keep)


def discard_names(model: Any) -> None:
    """Rename internal tensors and initializers, drop node names and doc strings; keep graph input/output names."""
    graph = model.graph
    keep = {v.name for v in graph.input} - {i.name for i in graph.initializer} | {v.name for v in graph.output}
    mapping: dict[str, str] = {}
    counter = [0]

    def rename(name: str) -> str:
        if not name or name in keep:
            return name
        if name not in mapping:
            while True:
                new = f"t{counter[0]}"
                counter[0] += 1
                if new not in keep:
                    break
            mapping[name] = new
        return mapping[name]

    model.doc_string = ""
    _rename_graph(graph, rename, top=True)
    del model.metadata_props[:]


def _rename_graph(graph: Any, rename: Any, top: bool) -> None:
    graph.doc_string = ""
    graph.name = "main" if top else "sub"
    for init in graph.initializer:
        init.name = rename(init.name)
        init.doc_string = ""
    for sparse in graph.sparse_initializer:
        sparse.values.name = rename(sparse.values.name)
        sparse.indices.name = rename(sparse.indices.name)
    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        value.name = rename(value.name)
        value.doc_string = ""
    for node in graph.node:
        node.name = ""
        node.doc_string = ""
        for i, name in enumerate(node.input):
            node.input[i] = rename(name)
        for i, name in enumerate(node.output):
            node.output[i] = rename(name)
        for attr in node.attribute:
            attr.doc_string = ""
            if attr.HasField("t"):
                attr.t.name = rename(attr.t.name) if attr.t.name else ""
            if attr.HasField("g"):
                _rename_graph(attr.g, rename, top=False)
            for sub in attr.graphs:
                _rename_graph(sub, rename, top=False)


# integer weights that the model dequantizes: element types narrower than float32
_NARROW_INTS = (2, 3, 4, 5, 21, 22)  # onnx.TensorProto UINT8, INT8, UINT16, INT16, UINT4, INT4
_DEQUANTIZERS = ("Cast", "DequantizeLinear")
MIN_PROTECTED = 16  # elements: smaller integer constants fold harmlessly (shapes, indices)


def dequantized_weights(model: Any) -> list[str]:
    """The main graph's narrow integer weights that a Cast or DequantizeLinear reads: folding them would store them
    dequantized, larger than they are."""
    readers: dict[str, set[str]] = {}
    for node in model.graph.node:
        for name in node.input[:1]:
            readers.setdefault(name, set()).add(node.op_type)
    found = []
    for init in model.graph.initializer:
        count = 1
        for dim in init.dims:
            count *= dim
        if (
            init.data_type in _NARROW_INTS
            and count >= MIN_PROTECTED
            and readers.get(init.name, set()) & set(_DEQUANTIZERS)
        ):
            found.append(init.name)
    return found


def hide_weights(model: Any, names: list[str]) -> list[Any]:
    """Turn these initializers into graph inputs (so no optimiser can fold them); return them, to put back."""
    from onnx import helper

    wanted = set(names)
    hidden = [init for init in model.graph.initializer if init.name in wanted]
    kept = [init for init in model.graph.initializer if init.name not in wanted]
    listed = {v.name for v in model.graph.input}
    for init in hidden:
        if init.name not in listed:
            model.graph.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    copies = [type(init)() for init in hidden]
    for copy, init in zip(copies, hidden, strict=True):
        copy.CopyFrom(init)
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    return copies


def restore_weights(model: Any, weights: list[Any]) -> None:
    """Put hidden weights back as initializers, in place of the graph inputs that stood for them."""
    names = {init.name for init in weights}
    listed = {v.name for v in model.graph.input}
    model.graph.initializer.extend(init for init in weights if init.name in listed)
    inputs = [v for v in model.graph.input if v.name not in names]
    del model.graph.input[:]
    model.graph.input.extend(inputs)
