"""Which nodes the float16 search keeps float32: those whose values float16 cannot hold, the nodes that introduce
error (the culprits), and the regions above them whose float16 storage they amplify; the float16 model's nodes
and tensors mapped back to the float32 model's."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..diagnose.divergence import CaseDiff
from ..diagnose.iodump import IoDump, MemoryDump
from .float16 import FLOAT16_MAX

SIGNIFICANT = 0.1  # a node whose output err reaches this fraction of the aim may be a culprit ...
AMPLIFIES = 2.0  # ... when its err is at least this many times what its inputs carry in
ALL_WHY = "kept with the rest of the model: the nodes that introduce error, with the regions above them, did not do"


def range_rule(ref: IoDump | MemoryDump, model: Any) -> dict[str, str]:
    """Nodes whose float32 outputs on the test cases go beyond float16's range."""
    kept = {}
    for node in model.graph.node:
        worst = 0.0
        for case in ref.cases.values():
            for name in node.output:
                entry = case.by_name.get(name)
                if entry and entry["dtype"] == "float32" and entry["max"] is not None:
                    worst = max(worst, abs(entry["max"]), abs(entry["min"]))
        if worst > FLOAT16_MAX:
            kept[node.name] = f"float32 values reach {worst:.4g} on the test data, beyond float16's {FLOAT16_MAX:g}"
    return kept


def producers_of(model: Any) -> dict[str, Any]:
    """Each tensor of the main graph -> the node that produces it."""
    return {o: node for node in model.graph.node for o in node.output}


class Origins:
    """Maps the float16 model's nodes and tensors back to the float32 model's: the Casts the conversion added carry
    another node's tensor (``x__f32`` is ``x``; ``x__cast_store`` writes ``x`` for x's producer)."""

    def __init__(self, base: Any) -> None:
        self.producers = producers_of(base)
        self.base_nodes = {node.name: node for node in base.graph.node}
        self.order = {node.name: k for k, node in enumerate(base.graph.node)}
        self._casts: dict[str, str] = {}  # a Cast's output -> its input

    def learn(self, nodes: Sequence[Any]) -> None:
        for node in nodes:
            if node.name not in self.base_nodes and node.op_type == "Cast" and node.inputs:
                for out in node.outputs:
                    self._casts[out] = node.inputs[0]

    def tensor(self, name: str) -> str:
        seen = set()
        while name in self._casts and name not in seen and name not in self.producers:
            seen.add(name)
            name = self._casts[name]
        return name

    def node(self, node: Any) -> Any | None:
        """The float32 model's node that a float16 model's node stands for."""
        if node.name in self.base_nodes:
            return self.base_nodes[node.name]
        for out in node.outputs:
            producer = self.producers.get(self.tensor(out))
            if producer is not None:
                return producer
        return None


def find_culprits(diffs: Sequence[CaseDiff], origins: Origins, kept: Mapping[str, str], aim: float) -> dict[str, str]:
    """The nodes to try float32 first, with why: a node whose error reaches a tenth of the aim and is at least twice
    what its inputs carry in (failing any, more than they carry), the largest error first."""
    scored: dict[str, tuple[float, float, str]] = {}
    for case in diffs:
        for diff in case.nodes:
            node = origins.node(diff.node)
            if node is None or node.name in kept or not diff.err > SIGNIFICANT * aim:
                continue
            carried = max((e for e in diff.inputs.values()), default=0.0)
            if math.isinf(carried):
                continue  # an infinity carried in: the node that made it is the one
            ratio = diff.err / carried if carried > 0 else math.inf
            if ratio <= 1.0:
                continue
            cause = f"; {diff.cause}" if diff.cause else ""
            why = f"introduces err {diff.err:.3g} (its inputs carry {carried:.3g}) on test case {case.test_case}{cause}"
            if node.name not in scored or (diff.err, ratio) > scored[node.name][:2]:
                scored[node.name] = (diff.err, ratio, why)
    amplifying = [n for n in scored if scored[n][1] >= AMPLIFIES] or list(scored)
    ordered = sorted(amplifying, key=lambda n: (-scored[n][0], -scored[n][1], origins.order.get(n, 0)))
    return {name: scored[name][2] for name in ordered}


class Regions:
    """The regions above nodes: the nodes that feed them, level by level, through tensors that carry float16's
    rounding (not shapes, exact values or weights); keeping a region float32 keeps what a node amplifies stored
    float32."""

    def __init__(self, diffs: Sequence[CaseDiff], origins: Origins, kept: Mapping[str, str]) -> None:
        self.origins = origins
        self.kept = kept
        self.carries: dict[str, float] = {}
        for case in diffs:
            for t in case.tensors:
                self.carries[t.name] = max(self.carries.get(t.name, 0.0), t.err)

    def _levels(self, roots: Mapping[str, str]) -> list[dict[str, str]]:
        origins = self.origins
        frontier = [origins.base_nodes[n] for n in roots if n in origins.base_nodes]
        seen = set(roots) | set(self.kept)
        levels = []
        while frontier:
            level: dict[str, str] = {}
            feeders = []
            for current in frontier:
                for name in current.input:
                    tensor = origins.tensor(name)
                    feeder = origins.producers.get(tensor)
                    if feeder is None or feeder.name in seen or self.carries.get(tensor, 0.0) <= 0.0:
                        continue
                    seen.add(feeder.name)
                    feeders.append(feeder)
                    level[feeder.name] = (
                        f"feeds {current.name!r} ({current.op_type}), which amplifies the float16 rounding of what "
                        "it reads: its output stays float32"
                    )
            if level:
                levels.append(level)
            frontier = feeders
        return levels

    def depth_of(self, roots: Mapping[str, str]) -> int:
        return len(self._levels(roots))

    def of(self, roots: Mapping[str, str], depth: int) -> dict[str, str]:
        """The roots and their regions up to ``depth`` levels."""
        found = dict(roots)
        for level in self._levels(roots)[: max(depth, 0)]:
            found.update(level)
        return found
