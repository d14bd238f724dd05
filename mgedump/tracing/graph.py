"""Recording operations, replaying them, and compiling the recorded graph to onnxruntime.

The pieces:

- Every operation goes through :func:`mgedump.tracing.dispatch.apply`. While
  a traced call runs, its :class:`Call` is registered there as the thread's
  current call and receives every operation (outside ``exclude_from_trace``):
  in the first call of a trace a :class:`Recorder` computes (unless symbolic)
  and appends an :class:`OpRecord`; in later calls a :class:`Replayer` checks
  each operation against the record and computes nothing.
- A :class:`Program` holds what the first call recorded: the values (arguments,
  external tensors, constants, tensors made inside ``exclude_from_trace``, and
  operation results) and the operations in order. It compiles slices of the
  graph into onnxruntime sessions on demand and caches them.
- Values are computed lazily on replay: reading a value (inside
  ``exclude_from_trace``, or with ``.numpy()``) runs the slice of the graph
  that produces it, from the values known so far in that call; the function's
  return values are computed the same way when it returns. A trace without
  value reads therefore runs one cached session per call.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mgedump import __version__
from mgedump.model.runtime import infer, open_session
from mgedump.model.session import SessionSettings

from .dispatch import (
    ORIGIN_EXCLUDED,
    TensorBase,
    TracedCall,
    current,
    enter_call,
    leave_call,
    scope,
    traced,
    with_note,
)
from .ops import OPS, compute_dtype, display_name, onnx_type, widened_inputs

OPSET = 13
IR_VERSION = 8
STATIC_LIMIT = 4096  # values up to this many elements that a call always computes alike are kept and reused


class TraceError(RuntimeError):
    """A call of a traced function differs from the one recorded (MegEngine's ``TraceError``).

    ``str(error)`` is MegEngine's text, ``trace error because <reason>``
    (``operator mismatch``, ``tensors not equals``, ...); what differed is in
    :attr:`detail`, which is also an exception note, so that tracebacks print
    it under the message.

    Attributes:
        reason: MegEngine's reason phrase.
        detail: where and what differed (the function, the operation, the values).
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"trace error because {reason}")
        self.reason = reason
        self.detail = detail
        if detail:
            with_note(self, detail)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.reason, self.detail))


TraceMismatchError = TraceError  # the name mgedump used first


def mismatch(reason: str, detail: str) -> TraceError:
    """A TraceError: MegEngine's reason as its message, what differed as its detail (and note)."""
    return TraceError(reason, detail)


@dataclass
class Value:
    """A value of the recorded graph.

    Attributes:
        kind: ``arg`` (an argument), ``ext`` (a tensor from outside the
            function), ``xin`` (made inside ``exclude_from_trace``, or live at
            such a block's entry: an input from outside the graph), ``const``
            (made in the function from data) or ``op`` (an operation's result).
        shape, dtype: as recorded.
        label: how messages name it.
        op: the index of the producing operation (``op`` values).
        data: the value of a constant, or of an external tensor when recorded.
        tensor: the external tensor itself.
        name: the argument's or external tensor's name.
        static: the value, when every call with these input shapes computes it
            alike (shapes and what follows from them and from constants).
        dynamic: its shape depends on input values (a boolean mask's result):
            a later call computes it before it is used.
    """

    kind: str
    shape: tuple[int, ...]
    dtype: np.dtype
    label: str
    op: int = -1
    data: np.ndarray | None = None
    tensor: TensorBase | None = None
    name: str | None = None
    static: np.ndarray | None = None
    dynamic: bool = False


@dataclass
class OpRecord:
    name: str
    attrs: dict[str, Any]
    inputs: tuple[int, ...]
    output: int
    scope: str = ""


@dataclass
class Compiled:
    session: Any
    inputs: list[int]  # the values fed, in the session's input order


@dataclass
class Program:
    """What the first call of a trace with some input shapes recorded, and the sessions compiled from it.

    Attributes:
        label: the traced function's name, for messages.
        capture_as_const: external tensors are constants of the graph.
        graph_opt: onnxruntime's optimisation level for the sessions.
        opt_level: the trace's opt_level; from 1 on, MegEngine's rewrites apply
            (``y / y`` is 1, ``log(exp(x))`` is x, ``log(exp(a) + exp(b))`` a stable log-sum-exp).
        profile_prefix: onnxruntime profiling file prefix, when profiling.
        sample: the first call's input and output values (kept for a dump with free dims).
        passthrough: the arguments that are not tensors, as given to the first call.
        exposed: the operation results the first call read or returned: a later
            call may read those only (MegEngine's "data unreadable" otherwise).
        user_names: names the user gave operation results (``x.name = "o_x"``), by value id.
    """

    label: str
    capture_as_const: bool
    graph_opt: str
    opt_level: int = 2
    profile_prefix: str | None = None
    values: list[Value] = field(default_factory=list)
    ops: list[OpRecord] = field(default_factory=list)
    inputs: list[tuple[Any, int]] = field(default_factory=list)  # (argument path, value id)
    ext_by_id: dict[int, int] = field(default_factory=dict)
    used_exclude: bool = False
    structure: Any = None  # how the first call's outputs were arranged
    output_vids: list[int | None] = field(default_factory=list)
    sessions: dict[Any, Compiled] = field(default_factory=dict)
    sample: tuple[list[np.ndarray], list[np.ndarray]] | None = None
    passthrough: Any = None
    exposed: set[int] = field(default_factory=set)
    user_names: dict[int, str] = field(default_factory=dict)
    _effective: dict[int, OpRecord] = field(default_factory=dict)

    def add(self, value: Value) -> int:
        self.values.append(value)
        return len(self.values) - 1

    def describe(self, vid: int) -> str:
        return self.values[vid].label

    # ------------------------------------------------------------ rewrites

    def effective(self, k: int) -> OpRecord:
        """Operation k as the graph computes it: with opt_level >= 1, after MegEngine's arithmetic rewrites."""
        rec = self.ops[k]
        if self.opt_level < 1:
            return rec
        found = self._effective.get(k)
        if found is not None:
            return found
        new = rec
        if rec.name == "div" and rec.inputs[0] == rec.inputs[1]:
            new = OpRecord("ones_like", {}, rec.inputs[:1], rec.output, rec.scope)
        elif rec.name == "log":
            src = self._producer(rec.inputs[0])
            if src is not None and src.name == "exp":
                new = OpRecord("identity", {}, src.inputs, rec.output, rec.scope)
            elif src is not None and src.name == "add":
                a, b = (self._producer(v) for v in src.inputs)
                if a is not None and b is not None and a.name == b.name == "exp":
                    new = OpRecord("logaddexp", {}, (a.inputs[0], b.inputs[0]), rec.output, rec.scope)
        self._effective[k] = new
        return new

    def _producer(self, vid: int) -> OpRecord | None:
        value = self.values[vid]
        return self.ops[value.op] if value.kind == "op" else None

    # ------------------------------------------------------------ compiling

    def slice(self, need: Sequence[int], cut: frozenset[int] | set[int]) -> tuple[list[int], set[int]]:
        """The operations that compute ``need`` from the leaves and the ``cut`` values, and those leaves."""
        ops: set[int] = set()
        leaves: set[int] = set()
        seen: set[int] = set()
        stack = list(need)
        while stack:
            vid = stack.pop()
            if vid in seen:
                continue
            seen.add(vid)
            value = self.values[vid]
            if vid in cut or value.kind != "op":
                leaves.add(vid)
                continue
            if value.op not in ops:
                ops.add(value.op)
                stack.extend(self.effective(value.op).inputs)
        return sorted(ops), leaves

    def is_fed(self, vid: int, cut: frozenset[int] | set[int]) -> bool:
        """Whether a leaf is a graph input (else an initializer)."""
        kind = self.values[vid].kind
        return vid in cut or kind in ("arg", "xin") or (kind == "ext" and not self.capture_as_const)

    def compiled(self, need: tuple[int, ...], cut: frozenset[int]) -> Compiled:
        """The session computing ``need`` from the fed values (cached)."""
        key = (need, cut)
        found = self.sessions.get(key)
        if found is not None:
            return found
        ops, leaves = self.slice(need, cut)
        fed = sorted(v for v in leaves if self.is_fed(v, cut))
        consts = sorted(v for v in leaves if not self.is_fed(v, cut))
        names = {v: f"v{v}" for v in (*fed, *consts, *need, *(self.ops[k].output for k in ops))}
        labels = node_labels(self, ops) if self.profile_prefix else None
        model = build_model(
            self, ops, fed, consts, [(v, names[v]) for v in need], names, graph_name=self.label, labels=labels
        )
        session = open_session(
            model.SerializeToString(),
            label=f"the trace of {self.label}",
            settings=SessionSettings(graph_opt=self.graph_opt),
            profile=self.profile_prefix,
        )
        compiled = Compiled(session, fed)
        self.sessions[key] = compiled
        return compiled

    def run_graph(self, feeds: dict[int, np.ndarray]) -> list[np.ndarray]:
        """The outputs of the first call's graph from new argument values, without the Python function."""
        known = dict(feeds)
        for vid in self.output_vids:
            assert vid is not None  # without_host refuses outputs made inside exclude_from_trace
        need = tuple(dict.fromkeys(v for v in self.output_vids if v is not None and self.values[v].kind == "op"))
        if need:
            compiled = self.compiled(need, frozenset())
            for ext in compiled.inputs:
                if ext not in known:  # external tensors: their current values
                    tensor = self.values[ext].tensor
                    assert tensor is not None
                    known[ext] = tensor._value()
            outputs = infer(compiled.session, {f"v{v}": known[v] for v in compiled.inputs})
            known.update(zip(need, outputs, strict=True))
        result = []
        for vid in self.output_vids:
            assert vid is not None
            value = self.values[vid]
            if vid not in known:
                fresh = value.tensor is not None and not self.capture_as_const  # an external tensor, fed afresh
                known[vid] = value.tensor._value() if fresh and value.tensor is not None else _data(value)
            result.append(known[vid])
        return result

    def run_eager(self, feeds: dict[int, np.ndarray]) -> list[np.ndarray]:
        """The outputs of the first call's operations computed with numpy from new argument values."""
        known = dict(feeds)

        def get(vid: int) -> np.ndarray:
            if vid not in known:
                value = self.values[vid]
                if value.kind == "ext" and not self.capture_as_const:
                    assert value.tensor is not None
                    known[vid] = value.tensor._value()
                else:
                    assert value.data is not None
                    known[vid] = value.data
            return known[vid]

        for rec in self.ops:
            known[rec.output] = np.asarray(OPS[rec.name].compute([get(v) for v in rec.inputs], rec.attrs))
        return [get(v) for v in self.output_vids if v is not None]


def node_labels(program: Program, ops: Sequence[int]) -> dict[int, str]:
    """Each operation's node name, as MegEngine names it: its operator name in the module scope that issued it
    (``net.fc.MatrixMul``); operations that share a name are numbered in order (``net.RELU[0]``, ``net.RELU[1]``)."""
    labels = {}
    for k in ops:
        rec = program.effective(k)
        name = display_name(rec.name, rec.attrs)
        labels[k] = f"{rec.scope}.{name}" if rec.scope else name
    counts = Counter(labels.values())
    seen: Counter[str] = Counter()
    for k, label in labels.items():
        if counts[label] > 1:
            labels[k] = f"{label}[{seen[label]}]"
            seen[label] += 1
    return labels


# ---------------------------------------------------------------- calls


class Call(TracedCall):
    """One call of a traced function: registered with the dispatch layer as the thread's current call while it runs."""

    symbolic = False

    def __init__(self, program: Program, symbolic_shape: bool = False) -> None:
        self.program = program
        self.active = False
        self.excluded = 0
        self.symbolic_shape = symbolic_shape
        self.known: dict[int, np.ndarray] = {}  # values of this call (fed leaves, materialized results)
        self.cut: set[int] = set()  # results materialized in this call

    def __enter__(self) -> Call:
        if current() is not None:
            raise RuntimeError(
                f"nested traces are not supported: {self.program.label} was called while another traced "
                "function was running; call the inner function's undecorated version instead"
            )
        enter_call(self)
        return self

    def __exit__(self, *exc: object) -> None:
        leave_call(self)

    def end_excluded(self) -> None:
        """An ``exclude_from_trace`` block ended (a graph break)."""

    def note_read(self, vid: int) -> None:
        """A value read (the recorder and the replayer keep account of them)."""

    def note_name(self, vid: int, name: str | None) -> None:
        """A value named by the user (the recorder keeps them)."""

    def read_value(self, t: TensorBase) -> np.ndarray:
        """The value of one of this call's tensors that has none yet."""
        assert t._vid is not None
        self.materialize([t._vid])
        return self.known[t._vid]

    def _internal(self, t: TensorBase) -> np.ndarray:
        """A tensor's value for the tracer's own use (not a read by the user: no data-read bookkeeping)."""
        if t._data is not None:
            return t._data
        if t._call is self:
            return Call.read_value(self, t)
        return t._value()

    def materialize(self, vids: Sequence[int]) -> None:
        """Compute these values on onnxruntime from the values known so far."""
        need = tuple(dict.fromkeys(v for v in vids if v not in self.known))
        if not need:
            return
        compiled = self.program.compiled(need, frozenset(self.cut))
        outputs = infer(compiled.session, {f"v{v}": self.known[v] for v in compiled.inputs})
        for vid, array in zip(need, outputs, strict=True):
            self.known[vid] = array
            self.cut.add(vid)

    def finish(self, flat: Sequence[TensorBase]) -> list[np.ndarray]:
        """The values of the returned tensors (computed now where needed)."""
        self.materialize([t._vid for t in flat if t._call is self and t._data is None and t._vid is not None])
        return [
            self.known[t._vid] if t._call is self and t._vid is not None and t._data is None else t._value()
            for t in flat
        ]


def _fixed(value: Value) -> bool:
    return value.static is not None or value.kind == "const"


class Recorder(Call):
    """The first call: records every operation (computing it unless symbolic)."""

    def __init__(self, program: Program, symbolic: bool, symbolic_shape: bool = False) -> None:
        super().__init__(program, symbolic_shape)
        self.symbolic = symbolic
        self.local: dict[int, tuple[int, TensorBase]] = {}  # id of a tensor made in this call -> (value id, tensor)
        self.barrier = 0  # values before this were computed before the last exclude_from_trace block ended
        self.crossed: dict[int, int] = {}  # a value from before the barrier -> its input after it

    def input(self, key: Any, name: str, t: TensorBase) -> TensorBase:
        value = t._value()
        vid = self.program.add(Value("arg", t._shape, t._dtype, f"argument {name!r}", name=name))
        self.program.inputs.append((key, vid))
        self.known[vid] = value
        return traced(None if self.symbolic else value, t._shape, t._dtype, vid, self)

    def read_value(self, t: TensorBase) -> np.ndarray:
        if self.symbolic and not self.excluded:
            raise RuntimeError(
                f"cannot read the value of a tensor (shape {t._shape}, {t._dtype}) while tracing "
                f"{self.program.label} with symbolic=True: the first call runs on placeholders with no "
                "value. Use trace(symbolic=False), or read it inside `with jit.exclude_from_trace():`"
            )
        assert t._vid is not None
        self.note_read(t._vid)
        return super().read_value(t)

    def note_read(self, vid: int) -> None:
        if self.program.values[vid].kind == "op":
            self.program.exposed.add(vid)

    def note_name(self, vid: int, name: str | None) -> None:
        if name is None:
            self.program.user_names.pop(vid, None)
        else:
            self.program.user_names[vid] = name

    def end_excluded(self) -> None:
        # MegEngine's graph break: what the rest of the function takes from before the block comes back as an input
        self.barrier = len(self.program.values)
        self.crossed = {}

    def _array(self, t: TensorBase) -> np.ndarray:
        """A tensor's value for the tracer itself (placeholders too: computed on onnxruntime)."""
        if t._data is not None:
            return t._data
        return super().read_value(t)

    def ref(self, t: TensorBase, crossing: bool = True) -> int:
        """The value id of an operand, registering constants, external and excluded tensors."""
        program = self.program
        if t._call is self:
            if t._vid is not None:
                vid = t._vid
                if crossing and vid < self.barrier and program.values[vid].kind == "op":
                    return self._cross(vid, t)
                return vid
            entry = self.local.get(id(t))
            if entry is not None:
                return entry[0]
            if t._origin == ORIGIN_EXCLUDED:
                n = sum(1 for v in program.values if v.kind == "xin")
                vid = program.add(Value("xin", t._shape, t._dtype, f"tensor #{n} computed inside exclude_from_trace"))
                assert t._data is not None
                self.known[vid] = t._data
            else:
                vid = program.add(Value("const", t._shape, t._dtype, "a constant", data=t._data))
            self.local[id(t)] = (vid, t)
            return vid
        known = program.ext_by_id.get(id(t))
        if known is not None:
            return known
        value = t._value()
        n = sum(1 for v in program.values if v.kind == "ext")
        name = t.path_name()
        label = f"external tensor {name!r}" if name else f"external tensor #{n} ({t._dtype}{list(t._shape)})"
        vid = program.add(Value("ext", t._shape, t._dtype, label, data=value, tensor=t, name=name))
        program.ext_by_id[id(t)] = vid
        self.known[vid] = value
        return vid

    def _cross(self, vid: int, t: TensorBase) -> int:
        found = self.crossed.get(vid)
        if found is None:
            source = self.program.values[vid]
            n = sum(1 for v in self.program.values if v.kind == "xin")
            found = self.program.add(
                Value(
                    "xin",
                    source.shape,
                    source.dtype,
                    f"tensor #{n} live at an exclude_from_trace block's entry ({source.label})",
                    dynamic=source.dynamic,
                )
            )
            self.known[found] = self._array(t)
            self.crossed[vid] = found
        return found

    def apply(self, op: str, inputs: Sequence[TensorBase], attrs: dict[str, Any]) -> TensorBase:
        program = self.program
        opdef = OPS[op]
        refs = tuple(self.ref(t) for t in inputs)
        vals = [program.values[r] for r in refs]
        decides = opdef.dynamic(attrs) if opdef.dynamic is not None else ()
        dynamic = any(v.dynamic for v in vals) or any(not _fixed(vals[p]) for p in decides)
        fixed = not opdef.random and not dynamic and (opdef.shape_only or all(_fixed(v) for v in vals))
        placeholder = any(t._data is None for t in inputs)
        if placeholder and (dynamic or not opdef.shape_only and fixed):  # values needed: compute the placeholders
            arrays = [self._array(t) for t in inputs]
            placeholder = False
        elif placeholder:  # symbolic: shapes and dtypes from a run on zeros
            arrays = [np.broadcast_to(np.zeros((), t._dtype), t._shape) if t._data is None else t._data for t in inputs]
        else:
            arrays = [_data_of(t) for t in inputs]
        with np.errstate(all="ignore") if placeholder else contextlib.nullcontext():
            out = np.asarray(opdef.compute(arrays, attrs))
        k = len(program.ops)
        static = out if fixed and out.size <= STATIC_LIMIT else None
        keep = placeholder and static is None
        value = Value("op", out.shape, out.dtype, f"the result of op #{k} ({op})", op=k, static=static, dynamic=dynamic)
        vid = program.add(value)
        program.ops.append(OpRecord(op, attrs, refs, vid, ".".join(name for name in scope() if name)))
        return traced(None if keep else out, out.shape, out.dtype, vid, self)


class Replayer(Call):
    """A later call: checks each operation against the record; computes only what is read (or, imperative, each op)."""

    def __init__(self, program: Program, symbolic_shape: bool = False, imperative: bool = False) -> None:
        super().__init__(program, symbolic_shape)
        self.pos = 0
        self.imperative = imperative

    def input(self, vid: int, t: TensorBase) -> TensorBase:
        value = t._value()
        self.known[vid] = value
        return traced(value, t._shape, t._dtype, vid, self)

    def _mismatch(self, k: int, reason: str, message: str) -> TraceError:
        return mismatch(reason, f"{self.program.label}: op #{k} ({self.program.ops[k].name}): {message}")

    def note_read(self, vid: int) -> None:
        """MegEngine's "data unreadable": only what the first call read or returned can be read (outside
        ``exclude_from_trace``, which may read anything)."""
        program = self.program
        if self.excluded or vid in program.exposed or program.values[vid].kind != "op":
            return
        raise mismatch(
            "data unreadable",
            f"{program.label}: this call reads or returns {program.values[vid].label}, which the first call "
            "neither read nor returned, so the compiled graph does not give it out; read it on the first call "
            "too, or make a new trace",
        )

    def read_value(self, t: TensorBase) -> np.ndarray:
        assert t._vid is not None
        self.note_read(t._vid)
        return super().read_value(t)

    def apply(self, op: str, inputs: Sequence[TensorBase], attrs: dict[str, Any]) -> TensorBase:
        program = self.program
        k = self.pos
        if k >= len(program.ops):
            raise mismatch(
                "too many instructions",
                f"{program.label}: op #{k} ({op}) was not in the trace: the first call issued "
                f"{len(program.ops)} operation(s) and this one issues more",
            )
        rec = program.ops[k]
        if rec.name != op:
            raise mismatch(
                "operator mismatch", f"{program.label}: op #{k}: the trace has {rec.name}, this call issues {op}"
            )
        if rec.attrs != attrs:
            diff = [key for key in sorted(set(rec.attrs) | set(attrs)) if rec.attrs.get(key) != attrs.get(key)]
            detail = "; ".join(f"{key}: traced {rec.attrs.get(key)!r}, got {attrs.get(key)!r}" for key in diff)
            raise self._mismatch(k, "operator mismatch", f"attributes differ ({detail})")
        if len(rec.inputs) != len(inputs):
            raise self._mismatch(
                k, "operator mismatch", f"the trace has {len(rec.inputs)} input(s), this call gives {len(inputs)}"
            )
        for p, (t, vid) in enumerate(zip(inputs, rec.inputs, strict=True)):
            expected = program.values[vid]
            if expected.kind == "xin":
                self._feed(k, p, t, vid)
            elif t._call is self and t._vid is not None:
                if t._vid != vid:
                    given = program.values[t._vid]
                    if (expected.kind == "op") != (given.kind == "op"):  # MegEngine: arguments are external nodes
                        reason = (
                            "expect internal node, got external"
                            if expected.kind == "op"
                            else ("expect external node, got internal")
                        )
                    else:
                        reason = "input id mismatch"
                    raise self._mismatch(
                        k, reason, f"input {p}: the trace has {expected.label}, this call gives {given.label}"
                    )
            else:
                self._check_operand(k, p, t, vid)
        self.pos = k + 1
        value = program.values[rec.output]
        if value.static is not None:
            return traced(value.static, value.shape, value.dtype, rec.output, self)
        if self.imperative:
            out = np.asarray(OPS[op].compute([self._internal(t) for t in inputs], attrs))
            self.known[rec.output] = out
            return traced(out, out.shape, out.dtype, rec.output, self)
        if value.dynamic:  # its shape is known once it is computed
            self.materialize([rec.output])
            out = self.known[rec.output]
            return traced(out, out.shape, out.dtype, rec.output, self)
        return traced(None, value.shape, value.dtype, rec.output, self)

    def _feed(self, k: int, p: int, t: TensorBase, vid: int) -> None:
        """An input from outside the graph (after a graph break): any tensor of the right shape."""
        expected = self.program.values[vid]
        array = self._internal(t)
        if not expected.dynamic and (array.shape != expected.shape or array.dtype != expected.dtype):
            raise self._mismatch(
                k,
                "tensor shape mismatch",
                f"input {p} ({expected.label}): traced {expected.dtype}{list(expected.shape)}, "
                f"got {array.dtype}{list(array.shape)}",
            )
        self.known[vid] = array

    def _check_operand(self, k: int, p: int, t: TensorBase, vid: int) -> None:
        program = self.program
        expected = program.values[vid]
        if t._call is self:  # made in this call from data (a constant)
            if expected.kind != "const":
                raise self._mismatch(
                    k,
                    "expect internal node, got external",
                    f"input {p}: the trace has {expected.label}, this call gives a constant {_short(t._data)}",
                )
            assert t._data is not None
            if not _same(expected.data, t._data):
                raise self._mismatch(
                    k,
                    "tensors not equals",
                    f"input {p}: a constant changed: traced {_short(expected.data)}, got {_short(t._data)}",
                )
            return
        if expected.kind != "ext":
            what = f"external tensor {t.name!r}" if t.name else "an external tensor (one made outside the function)"
            reason = "tensors not equals" if expected.kind == "const" else "expect internal node, got external"
            raise self._mismatch(k, reason, f"input {p}: the trace has {expected.label}, this call gives {what}")
        if t is expected.tensor:
            value = expected.data
        else:
            value = t._value()
            if program.capture_as_const:
                if not _same(expected.data, value):
                    raise self._mismatch(
                        k,
                        "tensors not equals",
                        f"input {p}: captured constant {expected.label} changed since the trace was made "
                        f"(traced {_short(expected.data)}, now {_short(value)}); capture_as_const=True bakes the "
                        "values of external tensors into the graph: make a new trace, or use capture_as_const=False",
                    )
            elif value.shape != expected.shape or value.dtype != expected.dtype:
                raise self._mismatch(
                    k,
                    "tensor shape mismatch",
                    f"input {p}: {expected.label} was {expected.dtype}{list(expected.shape)} when traced, "
                    f"now {value.dtype}{list(value.shape)}",
                )
        if not program.capture_as_const:
            assert value is not None
            self.known[vid] = value

    def finish(self, flat: Sequence[TensorBase]) -> list[np.ndarray]:
        program = self.program
        if self.pos != len(program.ops):
            rec = program.ops[self.pos]
            raise mismatch(
                "mismature end",
                f"{program.label}: this call issued {self.pos} operation(s), the trace has {len(program.ops)}: "
                f"op #{self.pos} ({rec.name}) and after were not issued",
            )
        for t in flat:
            if t._call is self and t._vid is not None:
                self.note_read(t._vid)
        return super().finish(flat)


def _same(a: np.ndarray | None, b: np.ndarray) -> bool:
    return a is b or (a is not None and a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b)))


def _short(a: np.ndarray | None) -> str:
    if a is None:
        return "nothing"
    if a.size <= 6:
        return f"{a.tolist()!r} ({a.dtype})"
    return f"a {a.dtype}{list(a.shape)} array (min {a.min()}, max {a.max()}, mean {a.astype(np.float64).mean():.6g})"


# ---------------------------------------------------------------- ONNX


class Builder:
    """Collects ONNX nodes and initializers with unique names."""

    def __init__(self, reserved: set[str], node_names: bool, descriptive: bool = False) -> None:
        from onnx import helper, numpy_helper

        self._helper = helper
        self._numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.names = set(reserved)
        self.node_names = node_names
        self.descriptive = descriptive
        self.label = ""
        self._node_names: set[str] = set()
        self._counts: dict[tuple[int, str], int] = {}

    def unique(self, hint: str, taken: set[str] | None = None) -> str:
        taken = self.names if taken is None else taken
        n = self._counts.get((id(taken), hint), 0)
        name = hint if n == 0 else f"{hint}_{n}"
        while name in taken:
            n += 1
            name = f"{hint}_{n}"
        self._counts[(id(taken), hint)] = n
        taken.add(name)
        return name

    def tmp(self, hint: str) -> str:
        return self.unique(f"{self.label}/{hint}" if self.label and self.descriptive else f"_{hint}")

    def tmp_node(self, op_type: str, inputs: Sequence[str], **attrs: Any) -> str:
        """One node with a fresh output name; returns that name."""
        out = self.tmp(op_type.lower())
        self.node(op_type, inputs, [out], **attrs)
        return out

    def const(self, array: np.ndarray, hint: str = "const") -> str:
        name = self.tmp(hint)
        self.initializers.append(self._numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any) -> None:
        name = self.unique(self.label or op_type, self._node_names) if self.node_names else None
        self.nodes.append(self._helper.make_node(op_type, list(inputs), list(outputs), name=name, **attrs))


def build_model(
    program: Program,
    ops: Sequence[int],
    fed: Sequence[int],
    consts: Sequence[int],
    outputs: Sequence[tuple[int, str]],
    names: dict[int, str],
    *,
    graph_name: str,
    labels: dict[int, str] | None = None,
    descriptive: bool = False,
    shapes: dict[int, Sequence[int | str] | None] | None = None,
) -> Any:
    """An ONNX model (IR 8, opset 13) of some recorded operations.

    Args:
        program: the recording.
        ops: indices of the operations, in recorded order.
        fed: values that are graph inputs, in order.
        consts: values that are initializers (constants, captured tensors).
        outputs: (value id, graph output name) pairs.
        names: the tensor name of every value used.
        graph_name: the graph's name.
        labels: name each operation's nodes (``net.fc.MatrixMul``); none: unnamed nodes.
        descriptive: name helper tensors after their operation too.
        shapes: the declared shape of some inputs and outputs (a str is a free dim;
            None: unknown). Defaults to the recorded shapes (unknown for values
            whose shape depends on input values).
    """
    from onnx import helper, numpy_helper

    values = program.values
    declared = shapes or {}

    def info(vid: int, name: str) -> Any:
        value = values[vid]
        shape = declared.get(vid, [None] * len(value.shape) if value.dynamic else value.shape)
        return helper.make_tensor_value_info(name, onnx_type(value.dtype), shape)

    b = Builder(set(names.values()) | {name for _, name in outputs}, labels is not None, descriptive)
    graph_inputs = [info(v, names[v]) for v in fed]
    initializers = [numpy_helper.from_array(_data(values[v]), names[v]) for v in consts]
    names = dict(names)
    for k in ops:
        rec = program.effective(k)
        if rec.name == "identity":  # no node: the result is its input under another name
            names[rec.output] = names[rec.inputs[0]]
            continue
        b.label = labels[k] if labels is not None else f"{rec.name}_{k}"
        infos = [(values[v].shape, values[v].dtype) for v in rec.inputs]
        out = values[rec.output]
        dynamic = out.dynamic or bool(declared)
        first = len(b.nodes)
        _emit(b, rec, [names[v] for v in rec.inputs], names[rec.output], infos, (out.shape, out.dtype), dynamic)
        if labels is not None:
            _label_producer(b.nodes[first:], names[rec.output])
    b.label = ""
    graph_outputs = []
    for vid, name in outputs:
        if names[vid] != name:
            b.node("Identity", [names[vid]], [name])
        graph_outputs.append(info(vid, name))
    graph = helper.make_graph(
        b.nodes, graph_name, graph_inputs, graph_outputs, initializer=initializers + b.initializers
    )
    return helper.make_model(
        graph,
        ir_version=IR_VERSION,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="mgedump.jit.trace",
        producer_version=__version__,
    )


def _label_producer(nodes: Sequence[Any], output: str) -> None:
    """Of an operation's nodes, the one that makes its result takes the operation's name (helpers get suffixes)."""
    producer = next((n for n in nodes if output in n.output), None)
    if producer is not None and producer is not nodes[0]:
        producer.name, nodes[0].name = nodes[0].name, producer.name


def _data_of(t: TensorBase) -> np.ndarray:
    assert t._data is not None
    return t._data


def _data(value: Value) -> np.ndarray:
    assert value.data is not None, f"{value.label} has no data to bake into the graph"
    return value.data


def _emit(
    b: Builder,
    rec: OpRecord,
    ins: list[str],
    out: str,
    infos: list[tuple[Any, ...]],
    oinfo: tuple[Any, ...],
    dynamic: bool = False,
) -> None:
    """Emit one operation, in a wider dtype where onnxruntime has no kernel for its own."""
    if 0 in oinfo[0] and not dynamic:  # an empty result is known from its shape (opset 13's Reshape reads 0 as "keep")
        b.node("Identity", [b.const(np.zeros(oinfo[0], oinfo[1]), "empty")], [out])
        return
    positions = [p for p in widened_inputs(rec.name, len(ins)) if p < len(ins)]
    dtype = infos[positions[0]][1] if positions else None
    wide = compute_dtype(rec.name, dtype) if dtype is not None else None
    if wide is None:
        OPS[rec.name].emit(b, ins, out, rec.attrs, infos, oinfo)
        return
    ins, infos = list(ins), list(infos)
    for p in positions:
        if infos[p][1] == dtype:
            cast = b.tmp("widen")
            b.node("Cast", [ins[p]], [cast], to=onnx_type(wide))
            ins[p], infos[p] = cast, (infos[p][0], wide)
    if oinfo[1] == dtype:
        wide_out = b.tmp("wide")
        OPS[rec.name].emit(b, ins, wide_out, rec.attrs, infos, (oinfo[0], wide))
        b.node("Cast", [wide_out], [out], to=onnx_type(dtype))
    else:
        OPS[rec.name].emit(b, ins, out, rec.attrs, infos, oinfo)


def flatten_outputs(result: Any, label: str) -> tuple[Any, list[TensorBase]]:
    """The returned tensors in order, and the structure to rebuild (a Tensor, tuple/list or dict of them, or None).

    Raises:
        TypeError: something other than tensors was returned.
    """

    def bad(what: str) -> TypeError:
        return TypeError(
            f"{label} must return a Tensor, a tuple or list of Tensors, a dict of Tensors or None; it returned {what}"
        )

    if result is None:
        return ("none", None), []
    if isinstance(result, TensorBase):
        return ("tensor", None), [result]
    if isinstance(result, (tuple, list)):
        for i, t in enumerate(result):
            if not isinstance(t, TensorBase):
                raise bad(f"a {type(t).__name__} at position {i}")
        return (type(result).__name__, len(result)), list(result)
    if isinstance(result, dict):
        for key, t in result.items():
            if not isinstance(key, str):
                raise bad(f"a dict with a {type(key).__name__} key {key!r} (keys must be str)")
            if not isinstance(t, TensorBase):
                raise bad(f"a {type(t).__name__} under key {key!r}")
        return ("dict", list(result)), list(result.values())
    raise bad(f"a {type(result).__name__}")


def _structure(structure: Any) -> str:
    kind, meta = structure
    if kind == "none":
        return "None"
    if kind == "tensor":
        return "a Tensor"
    if kind == "dict":
        return f"a dict with keys {meta}"
    return f"a {kind} of {meta} tensor(s)"


def rebuild_outputs(structure: Any, tensors: list[TensorBase]) -> Any:
    kind, meta = structure
    if kind == "none":
        return None
    if kind == "tensor":
        return tensors[0]
    if kind == "tuple":
        return tuple(tensors)
    if kind == "list":
        return list(tensors)
    return dict(zip(meta, tensors, strict=True))


def run_function(
    fn: Callable[..., Any], call: Call, args: list[TensorBase], kwargs: dict[str, Any], label: str
) -> tuple[Any, list[np.ndarray]]:
    """Run the function in the call; return the output structure and the output values."""
    with call:
        result = fn(*args, **kwargs)
        structure, flat = flatten_outputs(result, label)
        arrays = call.finish(flat)
        if isinstance(call, Recorder):
            program = call.program
            program.structure = structure
            program.output_vids = [
                None if (t._call is call and t._origin == ORIGIN_EXCLUDED and t._vid is None) else call.ref(t, False)
                for t in flat
            ]
            program.exposed.update(v for v in program.output_vids if v is not None and program.values[v].kind == "op")
        elif structure != call.program.structure:
            raise mismatch(
                "output structure mismatch",
                f"{label} returned {_structure(structure)} when traced as {_structure(call.program.structure)}",
            )
    return structure, arrays
