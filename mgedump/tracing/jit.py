"""``trace``: turn eager tensor code into a static ONNX graph, run it on onnxruntime, and dump it.

MegEngine's ``jit.trace`` for inference on numpy and onnxruntime::

    import numpy as np
    from mgedump import tensor
    from mgedump.jit import trace

    @trace(capture_as_const=True)
    def f(x):
        return np.exp(x) + 1

    f(tensor([1.0, 2.0]))        # first call: runs eagerly and records every operation
    f(tensor([3.0, 4.0]))        # later calls: run the compiled graph on onnxruntime
    f.dump("f.onnx")             # the graph as ONNX (optimised like `mgedump --optimize-for-inference`)
    f.dump("f.mgetest", input_data=["#rand(0,1)"])   # or a bundle with test cases

Users import it as ``mgedump.jit``. The recording and replaying are
:mod:`mgedump.tracing.graph`'s; what ``dump`` does with the tool is
:mod:`mgedump.tracing.dump`'s. See docs/trace.md for the full semantics.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .arguments import flag, level
from .dispatch import current, with_note, wrap
from .dump import DUMP_KEYWORDS, DumpInfo, dump_program
from .graph import (
    Call,
    Program,
    Recorder,
    Replayer,
    TraceError,
    TraceMismatchError,
    mismatch,
    rebuild_outputs,
    run_function,
)
from .tensor import Tensor

__all__ = ["DumpInfo", "TraceError", "TraceMismatchError", "exclude_from_trace", "trace"]

_MISSING = object()
# MegEngine's message for an argument that is not a tensor under capture_as_const (test_invalid_inp_error)
INVALID_INPUT = "Only support tensor type args when capture_as_const is enabled"
_GRAPH_OPT = {0: "disable", 1: "basic", 2: "extended", 3: "all"}
# MegEngine's trace options that have no ONNX counterpart: refused when set
_MEGENGINE_ONLY = {
    "sublinear_memory_config": "sublinear memory optimisation (training memory)",
    "dtr_config": "dynamic tensor rematerialisation (training memory)",
    "graph_opt_config": "MegEngine's JIT fusion settings",
}


@contextlib.contextmanager
def exclude_from_trace() -> Iterator[None]:
    """Run the code inside eagerly on every call of a traced function: a graph break, as in MegEngine.

    Inside the block, operations are not recorded; they compute with numpy on
    every call and may read the real values of traced tensors (on later calls,
    the compiled graph computes the values the block reads). After the block,
    tensors made in it and tensors computed before it come back into the graph
    as inputs from outside, so the block may rebind them freely from call to
    call. Outside any traced function it does nothing.

    Raises:
        RuntimeError: the trace was made with ``capture_as_const=True``.
    """
    call = current()
    if call is None or call.excluded:
        yield
        return
    assert isinstance(call, Call)  # the only traced calls there are
    if call.program.capture_as_const:
        raise RuntimeError(
            f"exclude_from_trace cannot be used in {call.program.label}, traced with capture_as_const=True: "
            "a graph with constants captured is meant to be dumped whole, and the excluded code would be lost"
        )
    call.program.used_exclude = True
    call.excluded += 1
    try:
        yield
    finally:
        call.excluded -= 1
        call.end_excluded()


def _flatten(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[tuple[Any, ...]], list[Tensor], list[Any]]:
    """The tensors in the arguments (in tuples, lists and dicts too) with their paths, and the other values."""
    paths: list[tuple[Any, ...]] = []
    tensors: list[Tensor] = []
    others: list[Any] = []

    def walk(path: tuple[Any, ...], value: Any) -> None:
        if isinstance(value, Tensor):
            paths.append(path)
            tensors.append(value)
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                walk((*path, i), item)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk((*path, key), item)
        else:
            others.append((path, value))

    for i, a in enumerate(args):
        walk((i,), a)
    for key, a in kwargs.items():
        walk((key,), a)
    return paths, tensors, others


def _replace(value: Any, path: tuple[Any, ...], by: dict[tuple[Any, ...], Any]) -> Any:
    if path in by:
        return by[path]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_replace(item, (*path, i), by) for i, item in enumerate(value))
    if isinstance(value, list):
        return [_replace(item, (*path, i), by) for i, item in enumerate(value)]
    if isinstance(value, dict):
        return {key: _replace(item, (*path, key), by) for key, item in value.items()}
    return value


def _rebuild(
    args: tuple[Any, ...], kwargs: dict[str, Any], by: dict[tuple[Any, ...], Any]
) -> tuple[list[Any], dict[str, Any]]:
    return [_replace(a, (i,), by) for i, a in enumerate(args)], {k: _replace(v, (k,), by) for k, v in kwargs.items()}


def _input_names(paths: list[tuple[Any, ...]], tensors: list[Tensor]) -> list[str]:
    """MegEngine's input names: the tensor's own name, else ``arg_N`` (N counts positional tensors) or the keyword."""
    names: list[str] = []
    n = 0
    for path, t in zip(paths, tensors, strict=True):
        if isinstance(path[0], int):
            default = f"arg_{n}"
            n += 1
        else:
            default = "_".join(str(p) for p in path)
        name = t.name or default
        while name in names:
            name = f"{name}_"
        names.append(name)
    return names


def _paths(paths: Sequence[tuple[Any, ...]]) -> str:
    return ", ".join("".join(f"[{p!r}]" for p in path) for path in paths) or "none"


def _same_value(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(np.all(a == b)) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - values that cannot be compared are taken as different
        return False


class trace:
    """Trace a function of tensors into a static graph (MegEngine's ``jit.trace``).

    Usable bare (``@trace``), with options (``@trace(symbolic=True)``) or as a
    call (``trace(f, capture_as_const=True)``).

    Args:
        function: the function to trace. Its arguments may be Tensors, tuples,
            lists and dicts holding Tensors (the graph's inputs), and other
            values (passed through). It returns a Tensor, a tuple or list of
            Tensors, a dict of them, or None.
        symbolic: run the first call on placeholders that have a shape and a
            dtype but no value (reading a value is an error) instead of eagerly.
        capture_as_const: bake tensors from outside the function (weights,
            globals) into the graph as constants; a later call that sees a
            changed value raises :class:`TraceError`. Needed by :meth:`dump`.
            As in MegEngine, the positional arguments must then be tensors (or
            tuples, lists and dicts of them); other values go as keywords.
        opt_level: 0 to 3, onnxruntime's graph optimisation for the compiled
            graph (disable/basic/extended/all); from 1 on, also MegEngine's
            rewrites that change results (``y / y`` is 1, a stable log-sum-exp).
        profiling: profile the compiled graph with onnxruntime's profiler (see :meth:`get_profile`).
        symbolic_shape: inside the function, ``Tensor.shape`` is an int32 tensor
            computed by the graph (MegEngine's default); :meth:`dump` then gives
            dims that varied between calls as free dims. False: a tuple of ints.
        without_host: later calls run the recorded graph without calling the
            Python function (nothing is checked: the graph is taken as it is).
        imperative: later calls compute the recorded operations with numpy, one
            by one, instead of compiling them for onnxruntime.
        record_only: accepted when False (MegEngine's record-only mode is not supported).
        sublinear_memory_config, dtr_config, graph_opt_config: accepted when
            None: MegEngine's memory and fusion settings have no ONNX counterpart.

    Each new combination of input shapes and dtypes is traced afresh (its first
    call records, later ones replay), as MegEngine runs a trace on a new batch size.

    Raises:
        TypeError: a switch that is not True or False; opt_level not an int.
        ValueError: opt_level is not 0..3.
        NotImplementedError: a MegEngine-only option is set.
    """

    def __init__(
        self,
        function: Callable[..., Any] | None = None,
        *,
        symbolic: bool = False,
        capture_as_const: bool = False,
        record_only: bool = False,
        sublinear_memory_config: Any = None,
        dtr_config: Any = None,
        profiling: bool = False,
        opt_level: int = 2,
        graph_opt_config: Any = None,
        symbolic_shape: bool = True,
        without_host: bool = False,
        imperative: bool = False,
    ) -> None:
        opt_level = level("trace(opt_level=...) (onnxruntime's disable/basic/extended/all)", opt_level, 3)
        switches = {"symbolic": symbolic, "capture_as_const": capture_as_const, "record_only": record_only}
        switches |= {"profiling": profiling, "symbolic_shape": symbolic_shape, "without_host": without_host}
        switches |= {"imperative": imperative}
        on = {key: flag(f"trace({key}=...)", value) for key, value in switches.items()}
        given = {"sublinear_memory_config": sublinear_memory_config, "dtr_config": dtr_config}
        given["graph_opt_config"] = graph_opt_config
        for key, what in _MEGENGINE_ONLY.items():
            if given[key] is not None:
                raise NotImplementedError(
                    f"trace({key}=...) is MegEngine's {what}, which has no counterpart in an ONNX graph on "
                    "onnxruntime; leave it out"
                )
        if on["record_only"]:
            raise NotImplementedError(
                "trace(record_only=True) is not supported: call the function once (it runs and records), then dump"
            )
        self.symbolic = on["symbolic"]
        self.capture_as_const = on["capture_as_const"]
        self.opt_level = opt_level
        self.profiling = on["profiling"]
        self.symbolic_shape = on["symbolic_shape"]
        self.without_host = on["without_host"]
        self.imperative = on["imperative"]
        self._function: Callable[..., Any] | None = None
        self._programs: dict[Any, Program] = {}
        self._paths: list[tuple[Any, ...]] | None = None
        self._profile_dir: str | None = None
        self._profile_files: list[str] = []
        if function is not None:
            self._set_function(function)

    def _set_function(self, function: Callable[..., Any]) -> None:
        if not callable(function):
            raise TypeError(f"trace needs a function, got {type(function).__name__}")
        self._function = function
        functools.update_wrapper(self, function)

    @property
    def _program(self) -> Program | None:
        """The first input shapes' recording: the graph that :meth:`dump` writes."""
        return next(iter(self._programs.values()), None)

    @property
    def _label(self) -> str:
        name = getattr(self._function, "__qualname__", None) or getattr(
            self._function, "__name__", "the traced function"
        )
        return str(name).rsplit("<locals>.", 1)[-1]

    def __repr__(self) -> str:
        program = self._program
        state = "not called yet" if program is None else f"{len(program.ops)} ops"
        return f"<trace of {self._label}: {state}>"

    # ------------------------------------------------------------ calling

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._function is None:
            if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], Tensor):
                self._set_function(args[0])
                return self
            raise TypeError("trace(...) with options must decorate a function: @trace(symbolic=True) def f(x): ...")
        if current() is not None:
            raise RuntimeError(
                f"nested traces are not supported: {self._label} was called while another traced function "
                "was running; call the undecorated function instead"
            )
        paths, tensors, others = _flatten(args, kwargs)
        if self.capture_as_const:
            self._check_positional(others)
        if self._paths is not None and paths != self._paths:
            raise mismatch(
                "argument mismatch",
                f"{self._label} was traced with tensor arguments at {_paths(self._paths)}; this call gives them at "
                f"{_paths(paths)}",
            )
        signature = tuple((t._shape, t._dtype) for t in tensors)
        program = self._programs.get(signature)
        if program is None:
            return self._record(signature, args, kwargs, paths, tensors, others)
        if self.without_host:
            return self._run_without_host(program, tensors, others)
        return self._replay(program, args, kwargs, paths, tensors)

    def _check_positional(self, others: list[Any]) -> None:
        """MegEngine's rule with capture_as_const: the positional arguments are the graph's inputs, tensors only.

        Raises:
            TypeError: MegEngine's message; the argument and its type in a note.
        """
        for path, value in others:
            if isinstance(path[0], int):
                raise with_note(
                    TypeError(INVALID_INPUT),
                    f"{self._label}: argument {_paths([path])} is {type(value).__name__} {value!r:.40}; with "
                    "capture_as_const=True the positional arguments are the inputs of the dumped graph: give "
                    "Tensors (or tuples, lists and dicts of them), and other values as keyword arguments",
                )

    def _record(
        self,
        signature: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        paths: list[tuple[Any, ...]],
        tensors: list[Tensor],
        others: list[Any],
    ) -> Any:
        assert self._function is not None
        profile = None
        if self.profiling:
            self._profile_dir = self._profile_dir or tempfile.mkdtemp(prefix="mgedump-trace-profile-")
            stem = "".join(c if c.isalnum() else "_" for c in self._label)
            profile = os.path.join(self._profile_dir, f"{stem}_{len(self._programs)}")
        program = Program(self._label, self.capture_as_const, _GRAPH_OPT[self.opt_level], self.opt_level, profile)
        recorder = Recorder(program, self.symbolic, self.symbolic_shape)
        names = _input_names(paths, tensors)
        inner = {path: recorder.input(path, name, t) for path, name, t in zip(paths, names, tensors, strict=True)}
        call_args, call_kwargs = _rebuild(args, kwargs, inner)
        structure, arrays = run_function(self._function, recorder, call_args, call_kwargs, self._label)
        if self.without_host and program.used_exclude:
            raise RuntimeError(
                f"{self._label} uses exclude_from_trace, but trace(without_host=True) runs later calls without the "
                "Python function, so the excluded code would never run again; drop without_host or the block"
            )
        if self.without_host and any(v is None for v in program.output_vids):
            raise RuntimeError(f"{self._label} returns a tensor made inside exclude_from_trace; without_host cannot")
        need = tuple(dict.fromkeys(v for v in program.output_vids if v is not None and program.values[v].kind == "op"))
        if need and not self.symbolic and not self.imperative:
            program.compiled(need, frozenset())  # compile now, so later calls only run
        program.passthrough = others
        if self.symbolic_shape and self.capture_as_const:
            program.sample = ([t._value() for t in tensors], arrays)
        self._programs[signature] = program
        self._paths = paths
        return rebuild_outputs(structure, [wrap(a) for a in arrays])

    def _replay(
        self,
        program: Program,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        paths: list[tuple[Any, ...]],
        tensors: list[Tensor],
    ) -> Any:
        assert self._function is not None
        replayer = Replayer(program, self.symbolic_shape, self.imperative)
        inner = {path: replayer.input(vid, t) for (path, vid), t in zip(program.inputs, tensors, strict=True)}
        call_args, call_kwargs = _rebuild(args, kwargs, inner)
        structure, arrays = run_function(self._function, replayer, call_args, call_kwargs, self._label)
        return rebuild_outputs(structure, [wrap(a) for a in arrays])

    def _run_without_host(self, program: Program, tensors: list[Tensor], others: list[Any]) -> Any:
        traced_with = dict(program.passthrough)
        for path, value in others:
            before = traced_with.get(path, _MISSING)
            if before is _MISSING or not _same_value(value, before):
                was = "not given" if before is _MISSING else repr(before)
                raise mismatch(
                    "argument mismatch",
                    f"{self._label}: argument {_paths([path])} is {value!r}, traced with {was}; "
                    "trace(without_host=True) does not run the Python function again, so it cannot follow "
                    "an argument that is not a tensor changing",
                )
        if len(others) != len(traced_with):
            raise mismatch("argument mismatch", f"{self._label}: this call leaves out arguments the trace was given")
        feeds = {vid: t._value() for (_, vid), t in zip(program.inputs, tensors, strict=True)}
        arrays = program.run_eager(feeds) if self.imperative else program.run_graph(feeds)
        return rebuild_outputs(program.structure, [wrap(a) for a in arrays])

    # ------------------------------------------------------------ profiling

    def get_profile(self) -> dict[str, Any]:
        """The profile of the compiled graph so far, in MegEngine's shape, from onnxruntime's profiler.

        Ends profiling of the sessions compiled so far (later calls compile
        and profile afresh).

        Returns:
            ``{"profiler": {"device": {op: {"cpu0": {"start", "kern", "end", "runs"}}}},
            "graph_exec": {"operator": {op: {"id", "name", "type"}}}, "files": [...],
            "events": [...]}``: per operation (a node of the graph, named
            ``scope.OpName`` as in a dump), its first start, total kernel time
            and last end in seconds over the profiled runs, and onnxruntime's
            own chrome://tracing files and events.

        Raises:
            RuntimeError: the trace was not made with ``profiling=True``, or not called yet.
        """
        if not self.profiling:
            raise RuntimeError(f"get_profile needs trace(..., profiling=True) for {self._label}")
        if not self._programs:
            raise RuntimeError(f"{self._label} has not been called yet: there is no profile")
        events: list[dict[str, Any]] = []
        for program in self._programs.values():
            for compiled in program.sessions.values():
                path = compiled.session.end_profiling()
                if path:
                    self._profile_files.append(path)
            program.sessions.clear()
        for path in self._profile_files:
            with open(path, encoding="utf-8") as f:
                events.extend(json.load(f))
        device: dict[str, Any] = {}
        operators: dict[str, Any] = {}
        for event in events:
            name = str(event.get("name", ""))
            if event.get("cat") != "Node" or not name.endswith("_kernel_time"):
                continue
            node = name[: -len("_kernel_time")]
            start, dur = float(event.get("ts", 0)) / 1e6, float(event.get("dur", 0)) / 1e6
            record = device.setdefault(node, {"cpu0": {"start": start, "kern": 0.0, "end": start, "runs": 0}})["cpu0"]
            record["start"] = min(record["start"], start)
            record["end"] = max(record["end"], start + dur)
            record["kern"] += dur
            record["runs"] += 1
            operators[node] = {"id": node, "name": node, "type": str(event.get("args", {}).get("op_name", ""))}
        return {
            "profiler": {"device": device},
            "graph_exec": {"operator": operators},
            "files": list(self._profile_files),
            "events": events,
        }

    # ------------------------------------------------------------ dumping

    def dump(
        self,
        file: Any,
        *,
        arg_names: Sequence[str] | str | None = None,
        output_names: Sequence[str] | str | None = None,
        optimize_for_inference: bool = True,
        keep_var_name: int = 1,
        keep_opr_name: bool = False,
        keep_param_name: bool = False,
        strip_info_file: str | None = None,
        append_json: bool = False,
        input_data: Sequence[Any] | None = None,
        maxerr: float | None = None,
        no_assert: bool = False,
        silent: bool = False,
        dump_format: str | None = None,
        variants: Sequence[str] | None = None,
        **enable_flags: Any,
    ) -> DumpInfo:
        """Write the traced graph as an ONNX model, or as a bundle with test cases (docs/trace.md has the details).

        The graph is the one the first call recorded, every external tensor a
        constant; optimisation and strip info are the ``mgedump`` command's.
        With ``symbolic_shape=True``, input dims that varied between calls are
        free dims. Scalar inputs and outputs have shape (1,), as in MegEngine.

        Args:
            file: the path to write, or a binary file object.
            arg_names, output_names: a str or a list of str, one per tensor input or
                returned tensor (default: MegEngine's names, ``arg_N`` and the
                outputs' operation names; a dict return is named by its keys).
            optimize_for_inference: the portable rewrites of ``--optimize-for-inference``.
            keep_var_name: 2 names intermediate tensors and weights as MegEngine
                (``net.fc.MatrixMul``, or the name the user gave); 0 and 1 number
                them (inputs and outputs always keep their names).
            keep_opr_name: name the nodes as MegEngine (``net.fc.MatrixMul``, ``net.RELU[1]``).
            keep_param_name: name the weights after their tensors (``net.fc.weight``).
            strip_info_file, append_json: also write strip info, as ``--output-strip-info``
                (``append_json``: merged into an existing file).
            input_data: write a bundle: a list with one test case per item, a
                ``-d`` spec string, an array (one-input graphs), a list of arrays
                (one per input) or a dict of arrays by input name.
            maxerr, no_assert, silent: as ``--maxerr`` (default: the bundle
                default), ``--no-assert`` and ``--silent``.
            dump_format: None or ``"ONNX"``; MegEngine's formats are refused.
            variants: with ``input_data``: several precision variants in the bundle, each proved, as
                ``mgedump --variants`` (``["fp32", "int8"]``, ``["auto"]``; docs/fitting.md).
            **enable_flags: ``enable_io16xc32=True`` and the other ``--enable-*``
                flags; MegEngine's keywords for its own format (``append``,
                ``user_info``, ``model_version``, ...) at their defaults only.

        Returns:
            A :class:`DumpInfo`: the written graph's inputs, outputs, weights and operation counts.

        Raises:
            ValueError: no ``capture_as_const=True``; no tensor returned; a wrong
                number of names; bad ``keep_var_name``; a test case that does not
                fit; a MegEngine ``dump_format``; recordings that differ beyond shapes.
            RuntimeError: not called yet; a BatchNorm in training mode.
            TypeError: a keyword of the wrong type (the message says the type it
                takes); ``output_names`` for a function that returns a dict.
            NotImplementedError: a MegEngine-only keyword away from its default.
            MgeError: an unknown or refused ``enable_*`` flag, a bad spec, an
                unwritable output (as the ``mgedump`` command reports them).
        """
        if not self.capture_as_const:
            raise ValueError(
                f"dump needs the trace made with capture_as_const=True (trace({self._label}, capture_as_const=True)): "
                "without it, weights are inputs fed on every call, not part of the graph"
            )
        if not self._programs:
            raise RuntimeError(f"{self._label} has not been called yet: call it once with example inputs, then dump")
        given = locals()
        keywords = {name: given[name] for name in DUMP_KEYWORDS}
        return dump_program(
            list(self._programs.values()), file, symbolic_shape=self.symbolic_shape, **keywords, **enable_flags
        )
