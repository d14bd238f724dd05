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
import inspect
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .dispatch import current, wrap
from .dump import dump_program
from .graph import Call, Program, Recorder, Replayer, TraceMismatchError, rebuild_outputs, run_function
from .tensor import Tensor

__all__ = ["TraceMismatchError", "exclude_from_trace", "trace"]

_GRAPH_OPT = {0: "disable", 1: "basic", 2: "extended", 3: "all"}


@contextlib.contextmanager
def exclude_from_trace() -> Iterator[None]:
    """Run the code inside eagerly on every call of a traced function.

    Inside the block, operations are not recorded; they compute with numpy on
    every call and may read the real values of traced tensors (on later calls,
    the compiled graph computes the values the block reads). Tensors made in
    the block and used after it become extra inputs of the graph. Outside any
    traced function it does nothing.

    Raises:
        RuntimeError: the trace was made with ``capture_as_const=True``.
    """
    call = current()
    if call is None:
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


class trace:
    """Trace a function of tensors into a static graph (MegEngine's ``jit.trace``).

    Usable bare (``@trace``), with options (``@trace(symbolic=True)``) or as a
    call (``trace(f, capture_as_const=True)``).

    Args:
        function: the function to trace. Its positional arguments must be
            Tensors (the graph's inputs); keyword arguments that are Tensors are
            inputs too, other keyword arguments are passed through. It returns
            a Tensor, a tuple or list of Tensors, a dict of them, or None.
        symbolic: run the first call on placeholders that have a shape and a
            dtype but no value (reading a value is an error) instead of eagerly.
        capture_as_const: bake tensors from outside the function (weights,
            globals) into the graph as constants; a later call that sees a
            changed value raises :class:`TraceMismatchError`. Needed by :meth:`dump`.
        opt_level: onnxruntime's graph optimisation for the compiled graph:
            0 disable, 1 basic, 2 extended, 3 all.
        profiling: profile the compiled graph with onnxruntime's profiler (see :meth:`get_profile`).

    Raises:
        ValueError: opt_level is not 0..3.
    """

    def __init__(
        self,
        function: Callable[..., Any] | None = None,
        *,
        symbolic: bool = False,
        capture_as_const: bool = False,
        opt_level: int = 2,
        profiling: bool = False,
    ) -> None:
        if opt_level not in _GRAPH_OPT or isinstance(opt_level, bool):
            raise ValueError(
                f"opt_level must be 0, 1, 2 or 3 (onnxruntime's disable/basic/extended/all), got {opt_level!r}"
            )
        self.symbolic = bool(symbolic)
        self.capture_as_const = bool(capture_as_const)
        self.opt_level = opt_level
        self.profiling = bool(profiling)
        self._function: Callable[..., Any] | None = None
        self._program: Program | None = None
        self._profile_dir: str | None = None
        if function is not None:
            self._set_function(function)

    def _set_function(self, function: Callable[..., Any]) -> None:
        if not callable(function):
            raise TypeError(f"trace needs a function, got {type(function).__name__}")
        self._function = function
        functools.update_wrapper(self, function)

    @property
    def _label(self) -> str:
        name = getattr(self._function, "__qualname__", None) or getattr(
            self._function, "__name__", "the traced function"
        )
        return name.rsplit("<locals>.", 1)[-1]

    def __repr__(self) -> str:
        state = "not called yet" if self._program is None else f"{len(self._program.ops)} ops"
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
        for i, a in enumerate(args):
            if not isinstance(a, Tensor):
                raise TypeError(
                    f"positional argument {i} of {self._label} is a {type(a).__name__}, not a Tensor: positional "
                    "arguments are the graph's inputs; pass other values as keyword arguments"
                )
        if self._program is None:
            return self._record(args, kwargs)
        return self._replay(args, kwargs)

    def _arg_names(self, n: int) -> list[str]:
        names = [f"arg_{i}" for i in range(n)]
        try:
            params = list(inspect.signature(self._function).parameters.values())
        except (TypeError, ValueError):
            return names
        for i, p in enumerate(params[:n]):
            if p.kind == p.VAR_POSITIONAL:
                break
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names[i] = p.name
        return names

    def _record(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        profile = None
        if self.profiling:
            self._profile_dir = self._profile_dir or tempfile.mkdtemp(prefix="mgedump-trace-profile-")
            profile = os.path.join(self._profile_dir, "".join(c if c.isalnum() else "_" for c in self._label))
        program = Program(self._label, self.capture_as_const, _GRAPH_OPT[self.opt_level], profile)
        recorder = Recorder(program, self.symbolic)
        names = self._arg_names(len(args))
        inner = [recorder.input(i, names[i], a) for i, a in enumerate(args)]
        inner_kwargs = {k: recorder.input(k, k, v) if isinstance(v, Tensor) else v for k, v in kwargs.items()}
        structure, arrays = run_function(self._function, recorder, inner, inner_kwargs, self._label)
        need = tuple(dict.fromkeys(v for v in program.output_vids if v is not None and program.values[v].kind == "op"))
        if need and not self.symbolic:
            program.compiled(need, frozenset())  # compile now, so later calls only run
        self._program = program
        return rebuild_outputs(structure, [wrap(a) for a in arrays])

    def _replay(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        program = self._program
        assert program is not None
        replayer = Replayer(program)
        positional = [vid for key, vid in program.inputs if isinstance(key, int)]
        keywords = {key: vid for key, vid in program.inputs if isinstance(key, str)}
        if len(args) != len(positional):
            raise TraceMismatchError(
                f"{self._label} was traced with {len(positional)} positional tensor argument(s); this call gives {len(args)}"
            )
        given = sorted(k for k, v in kwargs.items() if isinstance(v, Tensor))
        if given != sorted(keywords):
            raise TraceMismatchError(
                f"{self._label} was traced with tensor keyword argument(s) {sorted(keywords)}; this call gives {given}"
            )
        pairs = list(zip(positional, args, strict=True)) + [(keywords[k], kwargs[k]) for k in given]
        for vid, t in pairs:
            value = program.values[vid]
            if t.shape != value.shape or t.dtype != value.dtype:
                raise TraceMismatchError(
                    f"{self._label}: {value.label} was {value.dtype}{list(value.shape)} when traced; this call gives "
                    f"{t.dtype}{list(t.shape)}. A trace is compiled for fixed input shapes and dtypes: "
                    "make another trace for other shapes"
                )
        inner = [replayer.input(vid, t) for vid, t in zip(positional, args, strict=True)]
        inner_kwargs = {k: replayer.input(keywords[k], v) if isinstance(v, Tensor) else v for k, v in kwargs.items()}
        structure, arrays = run_function(self._function, replayer, inner, inner_kwargs, self._label)
        return rebuild_outputs(structure, [wrap(a) for a in arrays])

    # ------------------------------------------------------------ profiling

    def get_profile(self) -> dict[str, Any]:
        """onnxruntime's profile of the compiled graph so far.

        Ends profiling of the sessions compiled so far (later calls compile
        and profile afresh).

        Returns:
            ``{"files": [...], "events": [...]}``: the profile JSON files
            (chrome://tracing format) and their events.

        Raises:
            RuntimeError: the trace was not made with ``profiling=True``, or not called yet.
        """
        if not self.profiling:
            raise RuntimeError(f"get_profile needs trace(..., profiling=True) for {self._label}")
        if self._program is None:
            raise RuntimeError(f"{self._label} has not been called yet: there is no profile")
        files, events = [], []
        for compiled in self._program.sessions.values():
            path = compiled.session.end_profiling()
            if path:
                files.append(path)
                with open(path, encoding="utf-8") as f:
                    events.extend(json.load(f))
        self._program.sessions.clear()
        return {"files": files, "events": events}

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
        **enable_flags: bool,
    ) -> None:
        """Write the traced graph as an ONNX model, or as a bundle with test cases.

        The graph is the one the first call recorded, with every external
        tensor as a constant. Optimisation and strip info are those of the
        ``mgedump`` command (the same code).

        Args:
            file: the path to write (or a binary file object, without ``input_data``).
            arg_names: names of the graph inputs, one per tensor argument
                (default: the function's parameter names, ``arg_i`` for ``*args``).
            output_names: names of the graph outputs, one per returned tensor
                (default: ``output_i``; a dict return names them by its keys).
            optimize_for_inference: the portable rewrites of ``--optimize-for-inference``.
            keep_var_name: 2 names every intermediate tensor after the operation
                that made it (``conv2d_3``); 0 and 1 number them (graph inputs
                and outputs always keep their names: they are the interface).
            keep_opr_name: name the nodes after the operations.
            keep_param_name: name the weights after the tensors' names
                (``fc.weight``; modules name their parameters) instead of numbering them.
            strip_info_file: also write strip info (JSON, plus onnxruntime's
                reduced-build config beside it), as ``--output-strip-info``.
            append_json: merge the strip info into an existing strip-info file.
            input_data: write a bundle with these test cases: each item is a
                ``-d`` spec string (``"#rand(0,1)"``), an array (one-input
                graphs), a list of arrays (one per input) or a dict of arrays by input name.
            maxerr: the bundle's AssertEqual threshold. Defaults to the bundle
                default of ``mgedump`` (``--maxerr``).
            no_assert: store no expected outputs in the bundle.
            **enable_flags: ``enable_io16xc32=True`` and the other ``--enable-*``
                flags of ``mgedump``, as keywords.

        Raises:
            ValueError: the trace was made without ``capture_as_const=True``; a
                wrong number of ``arg_names``/``output_names``; bad ``keep_var_name``;
                a test case that does not fit the inputs.
            RuntimeError: the function has not been called yet.
            TypeError: ``output_names`` for a function that returns a dict.
            MgeError: an unknown or refused ``enable_*`` flag, a bad spec, an
                unwritable output (as the ``mgedump`` command reports them).
        """
        if not self.capture_as_const:
            raise ValueError(
                f"dump needs the trace made with capture_as_const=True (trace({self._label}, capture_as_const=True)): "
                "without it, weights are inputs fed on every call, not part of the graph"
            )
        program = self._program
        if program is None:
            raise RuntimeError(f"{self._label} has not been called yet: call it once with example inputs, then dump")
        dump_program(
            program,
            file,
            arg_names=arg_names,
            output_names=output_names,
            optimize_for_inference=optimize_for_inference,
            keep_var_name=keep_var_name,
            keep_opr_name=keep_opr_name,
            keep_param_name=keep_param_name,
            strip_info_file=strip_info_file,
            append_json=append_json,
            input_data=input_data,
            maxerr=maxerr,
            no_assert=no_assert,
            **enable_flags,
        )
