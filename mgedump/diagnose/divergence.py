"""Compare two runs tensor by tensor and name the node that first introduces error (docs/io-dump.md#the-first-divergence).

Tensors are matched by name; tensors on one side only (fused away, renamed,
Casts added) are counted, never an error. Each matched tensor gets the
AssertEqual error of :mod:`mgedump.measure.assertion` (a non-finite value on one side
only, or a shape that differs, is an infinite error) and where its worst
element is.

The first divergence is the first node, in B's execution order, that
*introduces* error: its output's error is above ``maxerr`` and clearly above
what its matched inputs carry in: every input is within ``maxerr``, or the
output's error is more than :data:`INTRODUCES_FACTOR` times the worst input's.
A node that only passes on error it was given is not it; so rounding carried in
from float16 inputs does not count, while a weight that changed (weights are
not tensors of the dump) does.

A float16 overflow is recognised as the cause when a float16 tensor of B holds
an infinity where the reference is finite; a tensor float16 is on neither side
of (an integer accumulator, a float32 sum) never has that cause.

Nodes that introduce error are ranked by the error they introduce relative to
what their inputs carry in, so a node that carries error on (a ReduceSum over
many inputs, an integer accumulator) ranks below the one that made it.

With float16 on either side, float16's rounding accumulates inside the model
(a sum of 1024 rounded inputs, a difference of near values), so only the
model's outputs (the tensors no node reads) decide whether a test case passes;
internal tensors above ``maxerr`` are reported, not failing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.bounds import DEFAULT_MAXERR
from ..base.errors import Verdict
from ..measure.assertion import FLOAT16_MAX, json_value, measure, value_text
from ..measure.structured import measure_value
from ..options import FLOAT16_MAXERR
from .iodump import CaseDump, IoDump, NodeInfo

INTRODUCES_FACTOR = 10.0
TOP_NODES = 10


@dataclass
class TensorErr:
    """One matched tensor compared.

    Attributes:
        name: the tensor.
        err: the AssertEqual error (``inf`` for a shape mismatch or a non-finite value on one side only).
        index: where the worst element is.
        a_value, b_value: the two values there.
        reason: why the error is infinite, when it is.
        a_absmax: the largest finite magnitude in A.
        b_inf_where_a_finite: B holds an infinity where A is finite.
    """

    name: str
    err: float
    index: tuple[int, ...] | None = None
    a_value: Any = None
    b_value: Any = None
    reason: str | None = None
    a_absmax: float = 0.0
    b_inf_where_a_finite: bool = False
    exact: bool = False
    a_dtype: str = ""
    b_dtype: str = ""
    path: str | None = None  # a sequence's, map's or optional's worst element (``[3][1]``); index is then None

    def passes(self, maxerr: float) -> bool:
        """Within maxerr, as :meth:`mgedump.measure.assertion.Measure.passes` decides."""
        return self.err == 0.0 if self.exact else self.err <= maxerr

    def where(self, a: str = "A=", b: str = "B=", show: Callable[[Any], str] = value_text) -> str:
        """Where the worst element is and the two values there (`` (worst element at [0, 3]: A=1.5, B=2.5)``), or
        why the error is infinite; "" when neither is known. ``a`` and ``b`` name the sides, ``show`` the values."""
        if self.index is not None or self.path is not None:
            at = self.path if self.path is not None else list(self.index or ())
            return f" (worst element at {at}: {a}{show(self.a_value)}, {b}{show(self.b_value)})"
        return f" ({self.reason})" if self.reason else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "err": json_value(self.err),
            "worst_index": None if self.index is None else list(self.index),
            **({"worst_path": self.path} if self.path is not None else {}),
            "a": json_value(self.a_value),
            "b": json_value(self.b_value),
            "reason": self.reason,
        }


def tensor_err(name: str, a: np.ndarray, b: np.ndarray, stat: str = "max") -> TensorErr:
    """Compare one tensor of B against A's with the AssertEqual metric (:func:`mgedump.measure.assertion.measure`),
    under ``stat`` of the element errors (a precision search's output held to a p99 or mean bound)."""
    if stat != "max" and isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        m = measure(a, b, labels=("A", "B"), stat=stat)
    else:
        m = measure_value(a, b, labels=("A", "B"))
    return TensorErr(
        name,
        m.err,
        m.index,
        m.expect_value,
        m.got_value,
        m.reason,
        m.expect_absmax,
        m.got_inf_where_expect_finite,
        m.exact,
        _dtype(a),
        _dtype(b),
        m.path,
    )


def _dtype(value: Any) -> str:
    return str(value.dtype) if isinstance(value, np.ndarray) else type(value).__name__


@dataclass
class NodeDiff:
    """A node of B whose outputs were compared.

    Attributes:
        node: the node (B's).
        err: the worst error of its matched outputs.
        output: the output holding it.
        inputs: the errors its matched inputs carry in.
        introduces: it introduces error (see the module's docstring).
        cause: a recognised cause (float16 overflow), or None.
    """

    node: NodeInfo
    err: float
    output: TensorErr
    inputs: dict[str, float]
    introduces: bool
    cause: str | None = None

    @property
    def gain(self) -> float:
        """The error it introduces relative to what its inputs carry in (infinite when they carry none)."""
        carried = max(self.inputs.values(), default=0.0)
        if math.isinf(carried):
            return 1.0 if math.isinf(self.err) else 0.0
        return self.err / carried if carried > 0 else math.inf

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node.name,
            "op_type": self.node.op_type,
            "domain": self.node.domain,
            "output": self.output.to_json(),
            "err": json_value(self.err),
            "inputs": {name: json_value(err) for name, err in self.inputs.items()},
            "cause": self.cause,
        }

    def describe(self) -> str:
        """This node and the error it introduces, as people read it."""
        out = self.output
        where = out.where()
        inputs = ", ".join(f"{name} {err:.3g}" for name, err in self.inputs.items())
        carried = f"; its inputs carry err {inputs}" if inputs else ""
        cause = f"; {self.cause}" if self.cause else ""
        node = self.node
        return f"node {node.name!r} ({node.op_type}), output {out.name!r} err {self.err:.3g}{where}{carried}{cause}"


@dataclass
class CaseDiff:
    """One test case compared."""

    test_case: int
    maxerr: float
    tensors: list[TensorErr]
    nodes: list[NodeDiff]
    only_a: list[str]
    only_b: list[str]
    input_errs: dict[str, float] = field(default_factory=dict)

    judged: list[str] | None = None  # the tensors that decide whether it passes (none: every tensor)

    @property
    def passed(self) -> bool:
        judged = set(self.judged) if self.judged is not None else None
        return all(t.passes(self.maxerr) for t in self.tensors if judged is None or t.name in judged)

    def above_unjudged(self) -> list[TensorErr]:
        """Tensors above maxerr that do not decide (internal tensors of a float16 run): reported, not failing."""
        if self.judged is None:
            return []
        judged = set(self.judged)
        return [t for t in self.tensors if t.name not in judged and not t.passes(self.maxerr)]

    @property
    def first_divergence(self) -> NodeDiff | None:
        return next((n for n in self.nodes if n.introduces), None)

    def introducers(self) -> list[NodeDiff]:
        """The nodes that introduce error, the most against what came in first (a node that only carries on what
        it was given, a ReduceSum over many inputs or an integer accumulator, ranks below the one that made it),
        then by the error itself."""
        return sorted((n for n in self.nodes if n.introduces), key=lambda n: (-n.gain, -n.err))

    def worst(self) -> TensorErr | None:
        return max(self.tensors, key=lambda t: t.err, default=None)

    def to_json(self) -> dict[str, Any]:
        first = self.first_divergence
        worst = self.worst()
        return {
            "test_case": self.test_case,
            "passed": self.passed,
            "matched": len(self.tensors),
            "only_a": self.only_a,
            "only_b": self.only_b,
            "inputs": {name: json_value(err) for name, err in self.input_errs.items()},
            "worst": None if worst is None else worst.to_json(),
            "first_divergence": None if first is None else first.to_json(),
            "top": [n.to_json() for n in self.introducers()[:TOP_NODES]],
        }


def recognise_cause(outputs: Iterable[TensorErr]) -> str | None:
    """A float16 overflow, when a float16 tensor of B holds an infinity where A is finite, or A goes beyond float16's
    range where B stores float16. Tensors float16 is on neither side of (an int32 accumulator of MatMulInteger, a
    float32 sum) never overflow float16."""
    for out in outputs:
        if out.b_dtype != "float16" or not out.a_dtype.startswith("float"):
            continue
        if out.b_inf_where_a_finite:
            return f"float16 overflow: B holds an infinity where A is finite (output {out.name!r})"
        if out.a_absmax > FLOAT16_MAX:
            return f"float16 overflow: A reaches {out.a_absmax:.4g} in {out.name!r}, beyond float16's largest value {FLOAT16_MAX:g}"
    return None


def _carried_by_casts(nodes: Iterable[NodeInfo], matched: Mapping[str, TensorErr]) -> dict[str, str]:
    """B's tensors that only a Cast made (one side only: ``x__f32``), mapped to the matched tensor they carry, so a
    node reading through a Cast still sees the error its input carries in."""
    casts = {
        node.outputs[0]: node.inputs[0] for node in nodes if node.op_type == "Cast" and node.inputs and node.outputs
    }
    carried = {}
    for name in casts:
        source, seen = name, set()
        while source in casts and source not in matched and source not in seen:
            seen.add(source)
            source = casts[source]
        if source in matched and source != name:
            carried[name] = source
    return carried


def _standing_for(node: NodeInfo, producer: Mapping[str, NodeInfo], matched: Mapping[str, TensorErr]) -> NodeInfo:
    """The node a Cast stands for when it only stores another node's output (``x__f32`` -> ``x``): that node."""
    seen = set()
    while (
        node.op_type == "Cast"
        and node.inputs
        and node.inputs[0] not in matched
        and node.inputs[0] in producer
        and node.name not in seen
    ):
        seen.add(node.name)
        node = producer[node.inputs[0]]
    return node


def diff_case(number: int, a: CaseDump, b: CaseDump, maxerr: float) -> CaseDiff:
    """Compare the tensors two dumps of test case ``number`` share, and find the nodes of B that introduce error."""
    return diff_stream(number, a, b.nodes, ((name, b.tensor(name)) for name in b.names), maxerr)


def diff_stream(
    number: int,
    a: CaseDump,
    b_nodes: Sequence[NodeInfo],
    b_tensors: Iterable[tuple[str, np.ndarray]],
    maxerr: float,
) -> CaseDiff:
    """Compare B's tensors as they come (from a run, or read one at a time) with A's; B's nodes in execution order.

    Only one pair of tensors is in memory at a time (plus what A keeps).
    """
    in_a = set(a.names)
    errs: dict[str, TensorErr] = {}
    b_names: list[str] = []
    for name, array in b_tensors:
        b_names.append(name)
        if name in in_a:
            errs[name] = tensor_err(name, a.tensor(name), array)
    in_b = set(b_names)
    produced = {o for node in b_nodes for o in node.outputs}
    graph_inputs = {n for n in b_names if n not in produced}
    carried = _carried_by_casts(b_nodes, errs)
    producer = {o: node for node in b_nodes for o in node.outputs}
    groups: dict[str, tuple[NodeInfo, list[TensorErr]]] = {}
    for node in b_nodes:
        for name in node.outputs:
            if name in errs:
                owner = _standing_for(node, producer, errs)
                groups.setdefault(owner.name, (owner, []))[1].append(errs[name])
    nodes = []
    for node, outputs in groups.values():
        worst = max(outputs, key=lambda t: t.err)
        inputs = {}
        for name in node.inputs:
            source = carried.get(name, name)
            if source in errs:
                inputs[source] = errs[source].err
        worst_in = max(inputs.values(), default=0.0)
        fails = not worst.passes(maxerr)
        introduces = fails and (worst_in <= maxerr or worst.err > INTRODUCES_FACTOR * worst_in)
        cause = recognise_cause(outputs) if fails else None
        nodes.append(NodeDiff(node, worst.err, worst, inputs, introduces, cause))
    return CaseDiff(
        test_case=number,
        maxerr=maxerr,
        tensors=list(errs.values()),
        nodes=nodes,
        only_a=[n for n in a.names if n not in in_b],
        only_b=[n for n in b_names if n not in in_a],
        input_errs={n: errs[n].err for n in b_names if n in graph_inputs and n in errs},
    )


def model_outputs(case: CaseDump) -> list[str]:
    """A run's outputs as its dump shows them: the tensors a node makes and no node reads."""
    nodes = case.nodes
    read = {name for node in nodes for name in node.inputs}
    return [name for node in nodes for name in node.outputs if name and name not in read]


def has_float16(case: CaseDump) -> bool:
    return any(entry["dtype"] == "float16" for entry in case.index["tensors"])


@dataclass
class DiffReport(Verdict):
    """The result of :func:`diff_dumps`; :attr:`exit_code` is ``mgediff``'s exit code."""

    a: str
    b: str
    maxerr: float
    maxerr_source: str
    cases: list[CaseDiff]

    def to_json(self) -> dict[str, Any]:
        return {
            "diff_version": 1,
            "a": self.a,
            "b": self.b,
            "maxerr": self.maxerr,
            "maxerr_source": self.maxerr_source,
            "passed": self.passed,
            "exit_code": self.exit_code,
            "test_cases": [case.to_json() for case in self.cases],
        }


def choose_maxerr(maxerr: float | None, cases: Iterable[tuple[CaseDump, CaseDump]]) -> tuple[float, str]:
    """The maxerr to use and why: as given; float16's precision when either side holds float16; else float32's."""
    if maxerr is not None:
        return maxerr, "given"
    if any(has_float16(a) or has_float16(b) for a, b in cases):
        return FLOAT16_MAXERR, "float16 on one side: float16's precision"
    return DEFAULT_MAXERR, "the default"


def diff_dumps(
    a: IoDump, b: IoDump, *, maxerr: float | None = None, label_a: str = "A", label_b: str = "B"
) -> DiffReport:
    """Compare every test case the two dumps share.

    Raises:
        DataError: the dumps share no test case, or share no tensor at all.
    """
    from ..base.errors import DataError

    numbers = sorted(set(a.cases) & set(b.cases))
    if not numbers:
        raise DataError(
            f"{label_a} and {label_b} share no test case (A has {sorted(a.cases)}, B has {sorted(b.cases)})"
        )
    pairs = [(a.cases[n], b.cases[n]) for n in numbers]
    limit, source = choose_maxerr(maxerr, pairs)
    float16 = any(has_float16(ca) or has_float16(cb) for ca, cb in pairs)
    cases = []
    for number, (ca, cb) in zip(numbers, pairs, strict=True):
        case = diff_case(number, ca, cb, limit)
        if float16:  # float16 accumulates inside: the model's outputs decide, internal tensors are reported
            case.judged = model_outputs(cb)
        cases.append(case)
    if all(not case.tensors for case in cases):
        raise DataError(f"{label_a} and {label_b} have no tensor name in common: they are not runs of related models")
    return DiffReport(label_a, label_b, limit, source, cases)
