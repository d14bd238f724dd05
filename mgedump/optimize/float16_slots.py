"""What each slot of a node holds, from the operator's ONNX schema: which inputs and outputs follow its float type
(so may be float16), and which tensors of the enclosing graphs its subgraphs read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .nodes import subgraphs


def opsets_of(model: Any) -> dict[str, int]:
    """Domain -> the opset version the model imports."""
    return {(op.domain or ""): op.version for op in model.opset_import}


@dataclass(frozen=True)
class Slots:
    """Which inputs and outputs of a node follow its float type (from its schema), and through which type variable."""

    inputs: tuple[str | None, ...]  # the type variable of each input that may be float16, else None
    outputs: tuple[str | None, ...]


def node_slots(node: Any, opsets: Mapping[str, int]) -> Slots | None:
    """A node's :class:`Slots`, from its operator's schema at the model's opset; None for an op onnx does not know."""
    import onnx

    domain = node.domain or ""
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get(domain, 1), domain)
    except Exception:  # an op onnx does not know (another runtime's domain)
        return None
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}

    def slot(formals: Sequence[Any], k: int) -> str | None:
        if not formals:
            return None
        formal = formals[min(k, len(formals) - 1)]
        types = allowed.get(formal.type_str, {formal.type_str})
        return formal.type_str if "tensor(float16)" in types and formal.type_str in allowed else None

    return Slots(
        tuple(slot(schema.inputs, k) for k in range(len(node.input))),
        tuple(slot(schema.outputs, k) for k in range(len(node.output))),
    )


def outer_reads(node: Any) -> set[str]:
    """The tensors of the enclosing graphs that a node's subgraphs read (their implicit inputs)."""
    found: set[str] = set()

    def visit(graph: Any, inner: set[str]) -> None:
        defined = inner | {v.name for v in graph.input} | {i.name for i in graph.initializer}
        defined |= {o for n in graph.node for o in n.output}
        for n in graph.node:
            found.update(name for name in n.input if name and name not in defined)
            for sub in subgraphs(n):
                visit(sub, defined)

    for sub in subgraphs(node):
        visit(sub, set())
    return found
