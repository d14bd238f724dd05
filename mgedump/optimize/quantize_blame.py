"""Where an int8 candidate's error comes from: the float model and the candidate run with every tensor exposed,
and, for each node int8 touched, the error it *introduces* (its outputs' error beyond what its inputs carry in).

Both runs are made in the search's child (:meth:`~mgedump.optimize.isolate.Opener.call` calls :func:`blame`
there), where a crash of onnxruntime or a hang costs the diagnosis, not the pack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..diagnose.divergence import INTRODUCES_FACTOR, TensorErr, tensor_err
from ..diagnose.exposed import ModelDumper, reference_dump
from ..model.session import SessionSettings
from .isolate import Opener
from .isolate_call import run_settings, settings_json


@dataclass
class NodeErr:
    """A node of the float model on one test case of the int8 candidate: its outputs' error and what its inputs
    carry in."""

    name: str
    op_type: str
    case: int
    err: float  # its outputs' worst error
    carried: float  # the worst error its inputs carry in
    output: TensorErr

    @property
    def introduced(self) -> float:
        return max(self.err - self.carried, 0.0)

    def introduces(self, maxerr: float) -> bool:
        return self.err > maxerr and (self.carried <= maxerr or self.err > INTRODUCES_FACTOR * self.carried)

    def describe(self) -> str:
        out = self.output
        where = out.where("float ", "int8 ", show=format)
        return (
            f"node {self.name!r} ({self.op_type}), output {out.name!r} err {self.err:.3g}{where}; "
            f"its inputs carry err {self.carried:.3g}"
        )


def visible_tensors(base: Any, candidate: Any) -> dict[str, str]:
    """Each float tensor of the base model -> the candidate's tensor its readers get: the twin node's output (same
    node name, same slot), through QuantizeLinear and DequantizeLinear when it is quantized. A node the quantizer
    removed (a Relu folded into the range of the tensor before it) or replaced (dynamic) is looked up by its output's
    name. The model's inputs are measured as given, so a reader that quantizes one carries the blame."""
    quantized = {n.input[0]: n.output[0] for n in candidate.graph.node if n.op_type == "QuantizeLinear" and n.input}
    dequantized = {n.input[0]: n.output[0] for n in candidate.graph.node if n.op_type == "DequantizeLinear" and n.input}
    twins = {n.name: n for n in candidate.graph.node}

    def through(name: str) -> str:
        q = quantized.get(name)
        return dequantized.get(q, name) if q is not None else name

    visible = {v.name: v.name for v in base.graph.input}
    for node in base.graph.node:
        twin = twins.get(node.name)
        same = twin is not None and twin.op_type == node.op_type and len(twin.output) == len(node.output)
        for k, name in enumerate(node.output):
            if name:
                visible[name] = through(twin.output[k] if same and twin is not None else name)
    return visible


def diagnose(
    opener: Opener,
    base_path: str,
    candidate_path: str,
    cases: Sequence[Mapping[str, np.ndarray]],
    scratch: str,
    settings: SessionSettings | None,
    what: str,
) -> list[list[NodeErr]]:
    """Per test case, the error each node of the base model shows in the candidate, in execution order: both run
    with every tensor exposed in the child (:func:`blame`).

    Raises:
        CandidateFailed: the child died in those runs, or gave no answer in time.
        MgeError: they failed otherwise.
    """
    return opener.call(  # type: ignore[no-any-return]
        f"{__name__}:blame",
        cases,
        scratch,
        what,
        (NodeErr, TensorErr),
        base_path=base_path,
        candidate_path=candidate_path,
        dumps=scratch,
        settings=settings_json(settings),
    )


def blame(
    cases: Sequence[Mapping[str, np.ndarray]],
    base_path: str,
    candidate_path: str,
    dumps: str,
    settings: Mapping[str, Any] | None,
) -> list[list[NodeErr]]:
    """What :func:`diagnose` has the child do: per test case, the error each node of the base model shows in the
    candidate, in execution order (a reference too large for memory is dumped into ``dumps``).

    A candidate tensor that several base tensors become (a Conv and the Relu folded into it) is compared with the
    last of them, and each of their nodes is measured on it: the Relu then introduces nothing, the Conv what both do.
    """
    import onnx

    base = onnx.load(base_path, load_external_data=False)
    numbered = list(enumerate(cases))
    ref = reference_dump(base_path, "float", numbered, run_settings(settings), dumps, label="the float model")
    visible = visible_tensors(base, onnx.load(candidate_path, load_external_data=False))
    compared_with = {seen: name for name, seen in visible.items()}  # the last base tensor wins
    found = []
    with ModelDumper(candidate_path, "int8", run_settings(settings), label="the int8 model") as dumper:
        for k, feeds in numbered:
            ref_case = ref.cases[k]
            known = set(ref_case.names)
            errs: dict[str, TensorErr] = {}  # by candidate tensor
            for name, array in dumper.runner.tensors(dict(feeds)):
                original = compared_with.get(name)
                if original is not None and original in known:
                    errs[name] = tensor_err(original, ref_case.tensor(original), array)
            nodes = []
            for node in base.graph.node:
                outs = [errs[visible[o]] for o in node.output if o in visible and visible[o] in errs]
                if not outs:
                    continue
                worst = max(outs, key=lambda t: t.err)
                carried = max((errs[visible[i]].err for i in node.input if visible.get(i) in errs), default=0.0)
                nodes.append(NodeErr(node.name, node.op_type, k, worst.err, carried, worst))
            found.append(nodes)
    return found


def rank(diagnosis: Sequence[Sequence[NodeErr]], touched: Sequence[str]) -> list[NodeErr]:
    """The touched nodes, the most error introduced first (each at its worst test case)."""
    worst: dict[str, NodeErr] = {}
    allowed = set(touched)
    for case in diagnosis:
        for node in case:
            if node.name in allowed and (node.name not in worst or node.introduced > worst[node.name].introduced):
                worst[node.name] = node
    return sorted(worst.values(), key=lambda n: -n.introduced)


def first_divergence(case: Sequence[NodeErr], maxerr: float) -> NodeErr | None:
    """The first node, in execution order, that introduces error beyond maxerr on this test case (None: none does)."""
    return next((n for n in case if n.introduces(maxerr)), None)
