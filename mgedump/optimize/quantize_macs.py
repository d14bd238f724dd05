"""How much of a model the nodes kept float carry: each heavy node's multiply-accumulates (MACs) on the first test
case's shapes, the figure by which an int8 model that keeps most of its arithmetic float is left out (docs/int8.md,
"How much may stay float")."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

HEAVY_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm", "Attention", "LSTM", "GRU")  # where int8 saves time
MAX_FLOAT_SHARE = 0.5  # int8 is left out when the nodes kept float carry more than this share of the model's MACs


@dataclass
class Share:
    """The share of the model's arithmetic that the nodes kept float carry.

    Attributes:
        share: their MACs over every heavy node's (0..1); ``None`` when the model's MACs are unknown.
        kept_heavy, heavy: the heavy nodes kept float, and every heavy node.
    """

    share: float | None
    kept_heavy: int
    heavy: int

    @property
    def too_much(self) -> bool:
        """Beyond :data:`MAX_FLOAT_SHARE` (or, MACs unknown, every heavy node float): int8 is pointless."""
        if self.share is None:
            return self.heavy > 0 and self.kept_heavy == self.heavy
        return self.share > MAX_FLOAT_SHARE

    def text(self) -> str:
        """``"62% of the model's multiply-accumulates (3 of 5 heavy nodes)"``."""
        nodes = f"{self.kept_heavy} of {self.heavy} heavy node(s)"
        if self.share is None:
            return nodes
        return f"{self.share:.0%} of the model's multiply-accumulates ({nodes})"


def float_share(model: Any, feeds: Mapping[str, np.ndarray], kept: Iterable[str]) -> Share:
    """The share of the model's MACs (its heavy nodes', on these inputs' shapes) that the nodes ``kept`` carry."""
    macs = node_macs(model, feeds)
    kept = set(kept)
    total = sum(macs.values())
    held = sum(value for name, value in macs.items() if name in kept)
    share = held / total if total > 0 else None
    return Share(share, sum(1 for name in macs if name in kept), len(macs))


@dataclass
class Ceiling:
    """What the search may still win: each heavy node's MACs, to judge a candidate's kept-float set before it is run
    (docs/int8.md, "How much may stay float"). A set over :data:`MAX_FLOAT_SHARE` would be left out whatever its
    error, so the search never runs one; ``None`` from :meth:`of` when the model's MACs are unknown."""

    macs: dict[str, float]
    total: float

    @classmethod
    def of(cls, model: Any, feeds: Mapping[str, np.ndarray]) -> Ceiling | None:
        macs = node_macs(model, feeds)
        total = sum(macs.values())
        return cls(macs, total) if total > 0 else None

    def share(self, kept: Iterable[str]) -> float:
        return sum(self.macs.get(name, 0.0) for name in set(kept)) / self.total

    def allows(self, kept: Iterable[str]) -> bool:
        """The nodes ``kept`` float carry no more than :data:`MAX_FLOAT_SHARE` of the model's MACs."""
        return self.share(kept) <= MAX_FLOAT_SHARE

    def largest(self, kept: Mapping[str, str], order: Iterable[tuple[str, str]]) -> dict[str, str]:
        """The nodes kept float already, and every node of ``order`` (name, why) the share allows, in that order:
        every light node, and each heavy node that still fits."""
        chosen = dict(kept)
        for name, why in order:
            if name not in chosen and self.allows([*chosen, name]):
                chosen[name] = why
        return chosen

    def longest(self, keep: Callable[[int], Mapping[str, str]], length: int) -> int:
        """The longest prefix of a ranking (``keep(k)``: its first k nodes kept float) the share allows: the share
        grows with the prefix, so bisected."""
        low, high = 0, length
        while low < high:
            middle = (low + high + 1) // 2
            if self.allows(keep(middle)):
                low = middle
            else:
                high = middle - 1
        return low


def node_macs(model: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Each heavy node of the main graph -> its multiply-accumulates for one run on ``feeds``' shapes: from the
    shapes ONNX infers (Conv: output elements x weight elements per output channel; MatMul, Gemm: output elements x
    the inner dimension); a node whose shapes are unknown counts its weights' elements."""
    shapes = _shapes(model, feeds)
    found: dict[str, float] = {}
    for node in model.graph.node:
        if node.op_type not in HEAVY_OPS:
            continue
        found[node.name] = _macs(node, shapes)
    return found


def _macs(node: Any, shapes: Mapping[str, list[int | None]]) -> float:
    def dims(k: int, of: Any) -> list[int | None] | None:
        return shapes.get(of[k]) if len(of) > k and of[k] else None

    def known(values: list[int | None] | None) -> bool:
        return values is not None and all(isinstance(d, int) and d >= 0 for d in values)

    out, a, w = dims(0, node.output), dims(0, node.input), dims(1, node.input)
    op = node.op_type
    if op == "Conv" and known(out) and known(w) and w:
        return float(math.prod(out) * math.prod(w[1:]))  # type: ignore[arg-type]
    if op == "ConvTranspose" and known(a) and known(w) and w:
        return float(math.prod(a) * math.prod(w[1:]))  # type: ignore[arg-type]
    if op in ("MatMul", "Gemm") and known(out) and known(a) and a:
        trans = any(attr.name == "transA" and attr.i for attr in node.attribute)
        inner = a[0] if op == "Gemm" and trans else a[-1]
        return float(math.prod(out) * inner)  # type: ignore[arg-type, operator]
    counts = []
    for name in node.input[1:]:
        dims_of = shapes.get(name) if name else None
        if dims_of is not None and known(dims_of):
            counts.append(math.prod(int(d or 0) for d in dims_of))
    return float(sum(counts))


def _shapes(model: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, list[int | None]]:
    """Every tensor's shape ONNX infers with the model's inputs fixed to ``feeds``' shapes (weights included)."""
    import onnx

    graph = onnx.GraphProto()
    graph.CopyFrom(model.graph)
    del graph.initializer[:]  # shapes need the weights' dims only
    for init in model.graph.initializer:
        graph.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type or 1, list(init.dims)))
    for value in graph.input:
        if value.name in feeds:
            tensor_type = value.type.tensor_type
            del tensor_type.shape.dim[:]
            for size in np.shape(feeds[value.name]):
                tensor_type.shape.dim.add().dim_value = int(size)
    light = onnx.helper.make_model(graph, opset_imports=model.opset_import, ir_version=model.ir_version)
    try:
        inferred = onnx.shape_inference.infer_shapes(light).graph
    except Exception:  # shapes unknown: every node counts its weights
        inferred = light.graph
    found: dict[str, list[int | None]] = {}
    for value in [*inferred.input, *inferred.value_info, *inferred.output]:
        if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape"):
            found[value.name] = [
                d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim
            ]
    return found
