"""float16 for inference (docs/bundle.md#float16-what-stays-float32): one pass for ``--enable-ioc16`` and ``--enable-io16xc32``.

Every float tensor has a *storage* type (float16 or float32) and every node a
*compute* type:

- ``ioc16``: a node computes in float16 when onnxruntime's CPU provider has a
  float16 kernel for it and it is not kept float32; its float outputs are then
  stored float16. Other nodes compute in float32 and their outputs stay
  float32. Weights are stored float16 (the model is about half the size)
  unless float16 cannot hold them or a node kept float32 reads them.
- ``io16xc32``: every node computes in float32, and the float tensors between
  operators are stored float16, except the outputs of nodes kept float32 and
  values an operator needs exact (Resize scales, TopK, Range, ...); weights
  stay float32.
- In both, the model's float inputs and outputs are float16.

A Cast is inserted wherever a tensor's storage differs from what its reader
needs: one per (tensor, type), named after the tensor, right before its first
reader, so the graph stays topologically sorted and every name unique. Which
inputs and outputs of a node follow its float type comes from the operator's
ONNX schema (a float input with a fixed type, such as Resize's scales, stays
float32).

Control flow (If, Loop, Scan) is converted consistently: its subgraphs are
converted as graphs whose inputs, outputs and outer-scope reads stay float32,
and a control-flow node kept float32 keeps its subgraphs float32 whole.

:func:`convert` takes the nodes to keep float32 (by name, with the reason);
the mixed-precision search of :mod:`mgedump.optimize.autocast` decides them
from the test data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.errors import ModelError, UsageError
from ..measure.assertion import FLOAT16_MAX
from .float16_slots import Slots, node_slots, opsets_of, outer_reads
from .float16_weights import WeightFiles, largest
from .nodes import all_nodes, name_nodes, subgraphs, unique_name
from .passes import check_model

FLOAT16_TINY = 2.0**-24  # the smallest float16 (subnormal): a weight entirely below it (an epsilon) becomes zero
IOC16, IO16XC32 = "ioc16", "io16xc32"
CONTROL_FLOW = ("If", "Loop", "Scan")
# ops whose values must stay exact whatever the kernels say (indices, scales, sizes, counts)
FLOAT32_ONLY_OPS = (
    "Resize",
    "Upsample",
    "TopK",
    "NonMaxSuppression",
    "Range",
    "CumSum",
    "RoiAlign",
    "RandomUniformLike",
    "RandomNormalLike",
)
# ops whose float output type is not the type of a float input (so computing them "in float16" means nothing)
_NOT_ELEMENTWISE_TYPED = ("Cast", "CastLike", "Shape", "Size", "ConstantOfShape", "EyeLike", "Constant")
_FLOAT, _FLOAT16 = 1, 10  # onnx.TensorProto.FLOAT, FLOAT16


def cpu_float16_ops() -> set[str]:
    """Ops of the default domain that have a float16 kernel in onnxruntime's CPU provider."""
    from onnxruntime.capi import _pybind_state as C  # type: ignore[import-untyped]

    ops = set()
    for kernel in C.get_all_opkernel_def():
        on_cpu = kernel.provider == "CPUExecutionProvider" and kernel.domain in ("", "ai.onnx")
        if on_cpu and any("tensor(float16)" in types for types in kernel.type_constraints.values()):
            ops.add(kernel.op_name)
    return ops


def is_float16_model(model: Any) -> bool:
    """Whether the model's float inputs and outputs are float16 already."""
    io = list(model.graph.input) + list(model.graph.output)
    floats = [v for v in io if v.type.tensor_type.elem_type in (_FLOAT, _FLOAT16)]
    return bool(floats) and all(v.type.tensor_type.elem_type == _FLOAT16 for v in floats)


QUANTIZED_OPS = (
    "DynamicQuantizeLinear",
    "MatMulInteger",
    "ConvInteger",
    "QLinearConv",
    "QLinearMatMul",
    "QuantizeLinear",
    "DequantizeLinear",
)


def check_not_quantized(
    model: Any,
    flag: str,
    because: str = "float16 would not touch its integer paths and would round what they dequantize",
    without: str | None = None,
) -> None:
    """Refuse float16 (or static int8, ``because`` saying why) on a model that holds quantized (integer) paths:
    converting around them would change what its quantization means, and leaving them is what the model's author
    chose.

    Raises:
        UsageError: naming the quantized ops found.
    """
    ops = sorted(
        {n.op_type for n in all_nodes(model.graph) if n.op_type in QUANTIZED_OPS and n.domain in ("", "ai.onnx")}
    )
    if ops:
        raise UsageError(
            f"{flag}: the model is quantized already ({', '.join(ops)}); {because}",
            hint=f"pack it without {without or flag}",
        )


def float16_tensors(model: Any) -> int:
    """How many float16 tensors the model holds (subgraphs included): weights, inputs, outputs and typed values,
    Casts to float16, float16 Constants. None: nothing in it is float16."""
    graphs = [model.graph, *(node_graph for node in all_nodes(model.graph) for node_graph in subgraphs(node))]
    count = 0
    for graph in graphs:
        count += sum(1 for init in graph.initializer if init.data_type == _FLOAT16)
        values = [*graph.input, *graph.output, *graph.value_info]
        count += sum(1 for v in values if v.type.tensor_type.elem_type == _FLOAT16)
    for node in all_nodes(model.graph):
        for attr in node.attribute:
            if (
                node.op_type == "Cast"
                and attr.name == "to"
                and attr.i == _FLOAT16
                or node.op_type == "Constant"
                and attr.name == "value"
                and attr.t.data_type == _FLOAT16
            ):
                count += 1
    return count


def float_types(model: Any) -> list[str]:
    """The floating-point element types of the model's inputs, outputs and weights (ONNX's names: ``"double"``,
    ``"float"``, ...)."""
    import onnx

    graph = model.graph
    types = {v.type.tensor_type.elem_type for v in [*graph.input, *graph.output]}
    types |= {init.data_type for init in graph.initializer}
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}
    return sorted(onnx.TensorProto.DataType.Name(t).lower() for t in types & floats)


# ---------------------------------------------------------------- the conversion


@dataclass
class Conversion:
    """What :func:`convert` did."""

    mode: str
    computes16: list[str] = field(default_factory=list)  # nodes that compute in float16
    weights16: int = 0  # weights stored float16
    weights32: dict[str, str] = field(default_factory=dict)  # weights kept float32, and why
    casts: int = 0


class _Scope:
    """A graph being converted: storage of its tensors, the Casts made in it, and its parent scope."""

    def __init__(self, graph: Any, parent: _Scope | None) -> None:
        self.graph = graph
        self.parent = parent
        self.storage: dict[str, int] = {}  # float tensor -> _FLOAT or _FLOAT16
        self.casts: dict[tuple[str, int], str] = {}  # (tensor, type) -> the name holding it in that type

    def lookup(self, name: str) -> int | None:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.storage:
                return scope.storage[name]
            scope = scope.parent
        return None

    def cast_of(self, name: str, to: int) -> str | None:
        scope: _Scope | None = self
        while scope is not None:
            found = scope.casts.get((name, to))
            if found is not None:
                return found
            scope = scope.parent
        return None


class _Converter:
    def __init__(
        self,
        model: Any,
        mode: str,
        keep32: Mapping[str, str],
        compute16_ops: set[str],
        keep_io: bool = False,
        weights: WeightFiles | None = None,
    ) -> None:
        import onnx

        self.model = model
        self.weights = weights
        self.mode = mode
        self.keep_io = keep_io  # the model's float inputs and outputs stay float32
        self.keep32 = keep32
        self.compute16_ops = compute16_ops - set(FLOAT32_ONLY_OPS) - set(CONTROL_FLOW) - set(_NOT_ELEMENTWISE_TYPED)
        self.opsets = opsets_of(model)
        inferred = onnx.shape_inference.infer_shapes(model)
        self.types: dict[str, int] = {}
        self._collect_types(inferred.graph)
        self.names = self._all_names(model.graph)
        self.result = Conversion(mode)
        self._slot_cache: dict[tuple[Any, ...], Slots | None] = {}
        self.demoted: set[str] = set()  # nodes that could compute in float16 but join their float32 neighbours

    def demote_islands(self, graph: Any, keep_all: bool) -> None:
        """ioc16: nodes that could compute in float16 form islands between float32 ones (a Reshape or a Clip
        between two Convs on a CPU whose Conv has no float16 kernel). An island computes in float32 with its
        neighbours when that needs no more Casts than float16 would (a Cast in and one out for every tensor that
        crosses its edge): runs of float32 ops share one Cast in and one out instead of a pair around each."""
        if self.mode != IOC16 or keep_all:
            return
        nodes = list(graph.node)
        able = {
            n.name for n in nodes if n.op_type != "Constant" and self._could16(n, self.slots(n), n.name in self.keep32)
        }
        producer = {o: n for n in nodes for o in n.output if o}
        readers: dict[str, list[Any]] = {}
        for n in nodes:
            for name in n.input:
                if name:
                    readers.setdefault(name, []).append(n)
        weights = {init.name for init in graph.initializer} | {n.output[0] for n in nodes if n.op_type == "Constant"}
        outputs = {v.name for v in graph.output}
        inputs = {v.name for v in graph.input} - weights
        parent = {name: name for name in able}

        def root(name: str) -> str:
            while parent[name] != name:
                parent[name] = parent[parent[name]]
                name = parent[name]
            return name

        for n in nodes:
            if n.name not in able:
                continue
            for name in n.input:
                source = producer.get(name)
                if source is not None and source.name in able:
                    parent[root(source.name)] = root(n.name)
        islands: dict[str, list[Any]] = {}
        for n in nodes:
            if n.name in able:
                islands.setdefault(root(n.name), []).append(n)
        for members in islands.values():
            names = {n.name for n in members}
            as16, as32 = set(), set()  # the tensors a Cast would carry across the island's edge, each way
            for n in members:
                for name in n.input:
                    if not name or not self.is_float(name) or name in weights:
                        continue
                    source = producer.get(name)
                    if source is not None and source.name not in names:
                        as16.add(name)  # a float32 neighbour's output, read in float16
                    elif name in inputs and not self.keep_io:
                        as32.add(name)  # a float16 model input, read in float32
                for name in n.output:
                    if not name or not self.is_float(name):
                        continue
                    if any(r.name not in names for r in readers.get(name, [])):
                        as16.add(name)  # read by float32 neighbours
                    if name in outputs and not self.keep_io:
                        as32.add(name)  # a float16 model output
            if len(as32) <= len(as16):
                self.demoted |= names

    def slots(self, node: Any) -> Slots | None:
        key = (node.name, node.op_type, node.domain, len(node.input), len(node.output))
        if key not in self._slot_cache:
            self._slot_cache[key] = node_slots(node, self.opsets)
        return self._slot_cache[key]

    # -- bookkeeping

    def _collect_types(self, graph: Any) -> None:
        for value in list(graph.input) + list(graph.output) + list(graph.value_info):
            if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
                self.types[value.name] = value.type.tensor_type.elem_type
        for init in graph.initializer:
            self.types[init.name] = init.data_type
        for node in graph.node:
            for attr in node.attribute:
                if node.op_type == "Constant" and attr.name == "value" and attr.HasField("t"):
                    self.types[node.output[0]] = attr.t.data_type
                if attr.HasField("g"):
                    self._collect_types(attr.g)
                for sub in attr.graphs:
                    self._collect_types(sub)

    def _all_names(self, graph: Any) -> set[str]:
        names = {v.name for v in list(graph.input) + list(graph.output)} | {i.name for i in graph.initializer}
        for node in graph.node:
            names.update(node.input)
            names.update(node.output)
            names.add(node.name)
            for attr in node.attribute:
                if attr.HasField("g"):
                    names |= self._all_names(attr.g)
                for sub in attr.graphs:
                    names |= self._all_names(sub)
        return names

    def fresh(self, base: str) -> str:
        return unique_name(self.names, base)

    def is_float(self, name: str) -> bool:
        return self.types.get(name) == _FLOAT

    # -- casts

    def read_as(self, scope: _Scope, name: str, wanted: int, out: list[Any]) -> str:
        """The name under which ``name`` can be read as ``wanted``; adds a Cast to ``out`` if needed."""
        have = scope.lookup(name)
        if have is None or have == wanted:
            return name
        found = scope.cast_of(name, wanted)
        if found is not None:
            return found
        from onnx import helper

        suffix = "f16" if wanted == _FLOAT16 else "f32"
        target = self.fresh(f"{name}__{suffix}")
        out.append(helper.make_node("Cast", [name], [target], name=self.fresh(f"{name}__cast_{suffix}"), to=wanted))
        scope.casts[(name, wanted)] = target
        self.result.casts += 1
        return target

    def store_as(self, scope: _Scope, node: Any, k: int, made: int, stored: int, out: list[Any]) -> None:
        """Output k of node is computed as ``made`` and must be stored as ``stored`` under its own name."""
        name = node.output[k]
        if made == stored:
            scope.storage[name] = stored
            return
        from onnx import helper

        suffix = "f16" if made == _FLOAT16 else "f32"
        inner = self.fresh(f"{name}__{suffix}")
        node.output[k] = inner
        scope.storage[inner] = made
        out.append(helper.make_node("Cast", [inner], [name], name=self.fresh(f"{name}__cast_store"), to=stored))
        scope.storage[name] = stored
        scope.casts[(name, made)] = inner  # readers that want it as computed read it before the rounding
        if self.mode == IO16XC32:  # ... except in io16xc32, where readers must see the stored float16
            scope.casts.pop((name, made))
        self.result.casts += 1

    # -- weights

    def weight_storage(
        self, graph: Any, readers: Mapping[str, list[tuple[Any, int]]], keep_all: bool
    ) -> dict[str, int]:
        """float16 or float32 for each float initializer of the graph."""
        storage = {}
        for init in graph.initializer:
            if init.data_type != _FLOAT:
                continue
            if keep_all:
                storage[init.name] = _FLOAT
            else:
                storage[init.name] = self._weight_type(init.name, self.largest(init), readers.get(init.name, []))
        return storage

    def largest(self, init: Any) -> Any:
        """The largest finite magnitude of a float32 weight: read from the search's files when they hold it."""
        from onnx import numpy_helper

        if self.weights is not None and self.weights.holds(init):
            return self.weights.largest(init)
        return largest(numpy_helper.to_array(init))

    def to_float16(self, init: Any) -> None:
        """Store a float32 weight as float16: in place, or pointed at its float16 copy in the search's files."""
        from onnx import numpy_helper

        if self.weights is not None and self.weights.holds(init):
            self.weights.to_float16(init)
        else:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name))

    def _weight_type(self, name: str, top: Any, readers: list[tuple[Any, int]]) -> int:
        """float16, unless float16 cannot hold the weight (``top``: its largest finite magnitude) or one of its readers
        needs it exact or float32."""
        if self.mode != IOC16:
            return _FLOAT
        why = None
        if top > FLOAT16_MAX:
            why = f"values up to {top:.4g}, beyond float16's {FLOAT16_MAX:g}"
        elif 0 < top < FLOAT16_TINY:
            why = f"values all below {FLOAT16_TINY:.3g} (largest {top:.3g}): float16 stores them as zero"
        else:
            for node, k in readers:
                if node.name in self.keep32:
                    why = f"read by {node.name!r}, kept float32"
                    break
                if k < 0:  # read inside a subgraph: converted with it (as float32 there, if the node is kept)
                    continue
                slots = self.slots(node)
                if node.op_type in FLOAT32_ONLY_OPS or slots is None or slots.inputs[k] is None:
                    why = f"read by {node.op_type} {node.name!r} as an exact float32 value"
                    break
        if why is not None:
            self.result.weights32[name] = why
            return _FLOAT
        self.result.weights16 += 1
        return _FLOAT16

    # -- graphs

    def _readers(self, graph: Any) -> dict[str, list[tuple[Any, int]]]:
        """Who reads each tensor, at which input; a subgraph's reads of the enclosing graph's tensors count as
        reads by its node, at input -1."""
        readers: dict[str, list[tuple[Any, int]]] = {}
        for node in graph.node:
            for k, name in enumerate(node.input):
                if name:
                    readers.setdefault(name, []).append((node, k))
            for name in outer_reads(node):
                readers.setdefault(name, []).append((node, -1))
        return readers

    def _needs_exact(self, name: str, readers: Mapping[str, list[tuple[Any, int]]]) -> bool:
        """A value some reader needs as an exact float32 (a fixed-type slot, an op that must stay float32)."""
        for node, k in readers.get(name, []):
            if node.op_type in FLOAT32_ONLY_OPS or node.op_type in CONTROL_FLOW or k < 0:
                return True
            slots = self.slots(node)
            if slots is None or slots.inputs[k] is None:
                return True
        return False

    def convert_graph(self, graph: Any, parent: _Scope | None, keep_all: bool) -> None:
        """Convert one graph in place; a subgraph (parent given) keeps float32 at its boundary."""
        scope = _Scope(graph, parent)
        main = parent is None
        readers = self._readers(graph)
        for name, stored in self.weight_storage(graph, readers, keep_all).items():
            scope.storage[name] = stored
        for init in graph.initializer:
            if scope.storage.get(init.name) == _FLOAT16:
                self.to_float16(init)
        weight_names = {init.name for init in graph.initializer}
        for value in graph.input:
            if value.name in weight_names:  # a weight also listed as an input (IR 3): its declared type follows it
                if scope.storage.get(value.name) == _FLOAT16 and value.type.HasField("tensor_type"):
                    value.type.tensor_type.elem_type = _FLOAT16
                continue
            if not self.is_float(value.name):
                continue
            if main and not self.keep_io:
                value.type.tensor_type.elem_type = _FLOAT16
                scope.storage[value.name] = _FLOAT16
            else:
                scope.storage[value.name] = _FLOAT
        outputs = {v.name for v in graph.output}
        nodes: list[Any] = []
        self.demote_islands(graph, keep_all)
        for node in list(graph.node):
            self.convert_node(node, scope, keep_all, main, outputs, readers, nodes)
        # the graph's outputs: float16 for the model; float32 at a subgraph's boundary (renamed where a Cast is needed:
        # a subgraph's outputs bind by position, and one may pass on a tensor of the enclosing graph)
        for value in graph.output:
            have = scope.lookup(value.name)
            if have is None:
                continue
            if main:
                wanted = _FLOAT if self.keep_io else _FLOAT16
                if have != wanted:
                    raise ModelError(f"float16 conversion left the output {value.name!r} in the wrong type")
                value.type.tensor_type.elem_type = wanted
            elif have != _FLOAT:
                value.name = self.read_as(scope, value.name, _FLOAT, nodes)
        del graph.node[:]
        graph.node.extend(nodes)
        del graph.value_info[:]

    def _stored16(
        self, name: str, main: bool, graph_outputs: set[str], kept: bool, readers: Mapping[str, list[tuple[Any, int]]]
    ) -> bool:
        """Whether a float tensor is stored float16: an output of the model, or (io16xc32) any tensor passed
        between nodes that convert, unless a reader needs it exact."""
        if main and name in graph_outputs:
            return not self.keep_io
        return self.mode == IO16XC32 and not kept and not self._needs_exact(name, readers)

    def convert_node(
        self,
        node: Any,
        scope: _Scope,
        keep_all: bool,
        main: bool,
        graph_outputs: set[str],
        readers: Mapping[str, list[tuple[Any, int]]],
        out: list[Any],
    ) -> None:
        kept = keep_all or node.name in self.keep32
        if node.op_type == "Constant":
            self._convert_constant(node, scope, kept, main, graph_outputs, readers, out)
            return
        slots = self.slots(node)
        compute16 = self._computes16(node, slots, kept)
        # inputs: float16 at the float-typed slots of a node computing in float16, float32 everywhere else
        for k, name in enumerate(node.input):
            if not name or scope.lookup(name) is None:
                continue
            wanted = _FLOAT16 if compute16 and slots is not None and slots.inputs[k] is not None else _FLOAT
            node.input[k] = self.read_as(scope, name, wanted, out)
        # subgraphs: float32 at their boundary, converted inside (or kept whole)
        for sub in subgraphs(node):
            self.convert_graph(sub, scope, keep_all=kept)
        out.append(node)
        for k, name in enumerate(node.output):
            if not name or not self.is_float(name):
                continue
            made = _FLOAT16 if compute16 and slots is not None and slots.outputs[k] is not None else _FLOAT
            stored = made
            if self._stored16(name, main, graph_outputs, kept, readers):
                stored = _FLOAT16
            elif (made == _FLOAT16 and self._needs_exact(name, readers)) or (main and name in graph_outputs):
                stored = _FLOAT  # an exact value, or a model output kept float32 (keep_io)
            self.store_as(scope, node, k, made, stored, out)
        if compute16:
            self.result.computes16.append(node.name)

    def _computes16(self, node: Any, slots: Slots | None, kept: bool) -> bool:
        return node.name not in self.demoted and self._could16(node, slots, kept)

    def _could16(self, node: Any, slots: Slots | None, kept: bool) -> bool:
        if kept or self.mode != IOC16 or node.op_type not in self.compute16_ops or node.domain not in ("", "ai.onnx"):
            return False
        if slots is None or any(name and name not in self.types for name in list(node.input) + list(node.output)):
            return False  # an op onnx does not know, or a tensor whose type shape inference could not tell
        float_in = {slots.inputs[k] for k, name in enumerate(node.input) if name and self.is_float(name)} - {None}
        # every float output must take the type of a float input: then computing in float16 means float16 out
        return bool(float_in) and all(
            slots.outputs[k] in float_in for k, name in enumerate(node.output) if name and self.is_float(name)
        )

    def _convert_constant(
        self,
        node: Any,
        scope: _Scope,
        kept: bool,
        main: bool,
        graph_outputs: set[str],
        readers: Mapping[str, list[tuple[Any, int]]],
        out: list[Any],
    ) -> None:
        """A Constant node holds a weight: stored as a weight is, and its value converted in place."""
        from onnx import numpy_helper

        out.append(node)
        name = node.output[0]
        if not self.is_float(name):
            return
        value = next((a for a in node.attribute if a.name == "value" and a.HasField("t")), None)
        stored = _FLOAT
        if value is not None and not kept:
            stored = self._weight_type(name, largest(numpy_helper.to_array(value.t)), readers.get(name, []))
            if stored == _FLOAT16:
                value.t.CopyFrom(
                    numpy_helper.from_array(numpy_helper.to_array(value.t).astype(np.float16), value.t.name)
                )
        final = stored
        if self._stored16(name, main, graph_outputs, kept, readers):
            final = _FLOAT16
        elif main and name in graph_outputs:
            final = _FLOAT
        self.store_as(scope, node, 0, stored, final, out)


def convert(
    model: Any,
    mode: str,
    keep32: Mapping[str, str] | None = None,
    compute16_ops: set[str] | None = None,
    keep_io: bool = False,
    weights: WeightFiles | None = None,
) -> Conversion:
    """Convert a float32 model to float16 in place, as ``mode`` says, keeping ``keep32``'s nodes float32.

    Args:
        model: an ONNX ModelProto with named nodes (:func:`name_nodes`).
        mode: ``"ioc16"`` or ``"io16xc32"``.
        keep32: node name -> why it stays float32.
        compute16_ops: ops that may compute in float16 (ioc16). Defaults to
            those with a float16 kernel in onnxruntime's CPU provider.
        keep_io: the model's float inputs and outputs keep their float32 type (``--keep-io-types``).
        weights: the files that hold the model's float32 weights (the search's candidates): a weight stored float16
            points at its float16 copy there, and the model, whose weights lie in files, is not checked here (its
            caller checks it by path once saved).

    Returns:
        What was converted.

    Raises:
        ModelError: the result fails ``onnx.checker``.
    """

    if mode not in (IOC16, IO16XC32):
        raise ValueError(f"mode must be {IOC16!r} or {IO16XC32!r}, got {mode!r}")
    name_nodes(model)
    ops = cpu_float16_ops() if compute16_ops is None else compute16_ops
    converter = _Converter(model, mode, keep32 or {}, ops, keep_io, weights)
    converter.convert_graph(model.graph, None, keep_all=False)
    if weights is None:  # past protobuf's 2 GiB: checked by path once saved (the pipeline)
        check_model(model, "the float16 model")
    return converter.result
