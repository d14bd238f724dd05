"""The nodes of a model, subgraphs included: named uniquely (what the precision searches keep float, by name),
walked depth first, and picked by ``--fp32-nodes`` patterns."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Any

from ..base.errors import UsageError
from ..base.naming import option_name


def subgraphs(node: Any) -> list[Any]:
    """The subgraphs of each attribute of a node that holds any (If branches, Loop and Scan bodies), in order."""
    return [sub for attr in node.attribute for sub in ([attr.g] if attr.HasField("g") else list(attr.graphs))]


def unique_name(taken: set[str], base: str) -> str:
    """``base``, or ``base_1``, ``base_2``, ... : the first not in ``taken``, which then holds it."""
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


def name_nodes(model: Any) -> None:
    """Give every node (subgraphs included) a name unique in the model; unique names are kept.

    Nodes are what the mixed-precision search keeps float32, by name.
    """
    seen: set[str] = set()
    counter = [0]

    def visit(graph: Any) -> None:
        for node in graph.node:
            if not node.name or node.name in seen:
                base = node.name or node.op_type
                while True:
                    counter[0] += 1
                    candidate = f"{base}_{counter[0]}"
                    if candidate not in seen:
                        break
                node.name = candidate
            seen.add(node.name)
            for attr in node.attribute:
                if attr.HasField("g"):
                    visit(attr.g)
                for sub in attr.graphs:
                    visit(sub)

    visit(model.graph)


def all_nodes(graph: Any) -> Iterable[Any]:
    """Every node of a graph and of its subgraphs (If branches, Loop and Scan bodies), depth first."""
    for node in graph.node:
        yield node
        for sub in subgraphs(node):
            yield from all_nodes(sub)


def matching_nodes(model: Any, patterns: Iterable[str]) -> dict[str, str]:
    """The nodes, subgraphs included, whose name or op type matches a glob pattern (``--fp32-nodes``).

    Raises:
        UsageError: a pattern matches no node (a typo, or a node the optimisation removed): it would do nothing.
    """
    patterns = [p for p in patterns if p]
    found: dict[str, str] = {}
    used: set[str] = set()
    nodes = list(all_nodes(model.graph))
    for node in nodes:
        for pattern in patterns:
            if fnmatch.fnmatchcase(node.name, pattern) or fnmatch.fnmatchcase(node.op_type, pattern):
                found.setdefault(node.name, f"{option_name('fp32_nodes')} {pattern}")
                used.add(pattern)
    unused = [p for p in patterns if p not in used]
    if unused:
        examples = ", ".join(repr(n.name) for n in nodes[:3] if n.name)
        raise UsageError(
            f"{option_name('fp32_nodes')} {', '.join(repr(p) for p in unused)} matches no node of the model to optimise "
            "(node names and op types, subgraphs included; the portable rewrites may have removed the node)",
            hint=f"name nodes as the model has them, e.g. {examples}" if examples else None,
        )
    return found
