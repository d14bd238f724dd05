"""onnxruntime: its sessions and options from :class:`~.session.SessionSettings`, the onnxruntime runner
(:class:`OrtRunner`), describing a model's inputs and outputs, running it.

Every onnxruntime error is turned into one readable line here, so no C++ text
reaches the user as a traceback.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.deps import require
from ..base.errors import ModelError, RunError
from ..base.log import program
from ..base.naming import option_name
from .session import SessionSettings
from .valuetype import ORT_DTYPES, ValueType, is_structured, normalize, parse, tensor_type

_ORT_DTYPES = ORT_DTYPES  # onnxruntime's type strings for tensors, and the numpy dtype of each


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output.

    Attributes:
        name: the graph name.
        dtype: the numpy dtype name (``float32``, ``int64``, ``bool``, ``str``); for a sequence, a map or an
            optional, onnxruntime's name of its type (``seq(map(int64,tensor(float)))``,
            :mod:`~mgedump.model.valuetype`).
        shape: one entry per dim: an int when fixed, a str for a named
            symbolic dim, None for an unnamed one; None when the rank is unknown (and for a sequence, a map or an
            optional).
    """

    name: str
    dtype: str
    shape: tuple[int | str | None, ...] | None

    @property
    def is_tensor(self) -> bool:
        """A tensor (else a sequence, a map or an optional)."""
        return not is_structured(self.dtype)

    @property
    def value_type(self) -> ValueType:
        """The type as a :class:`~mgedump.model.valuetype.ValueType` (raises ValueError for text no mgedump wrote)."""
        return parse(self.dtype) if not self.is_tensor else tensor_type(self.dtype)

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(object) if self.dtype == "str" else np.dtype(self.dtype)

    def shape_text(self) -> str:
        if self.shape is None:
            return "unknown"
        return "[" + ",".join("?" if d is None else str(d) for d in self.shape) + "]"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": None if self.shape is None else list(self.shape)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorInfo:
        shape = data.get("shape")
        return cls(str(data["name"]), str(data["dtype"]), None if shape is None else tuple(shape))


def clean_ort_message(exc: BaseException, limit: int = 400) -> str:
    """onnxruntime's exception text as one short line, without its status prefix."""
    text = str(exc)
    text = re.sub(r"^\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*[A-Z_]+\s*:\s*", "", text)
    # drop C++ source locations and signatures: "/src/x.cc:256 ns::F(const A&, B) "
    text = _CPP_LOCATION.sub("", text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_CPP_LOCATION = re.compile(r"\S+\.(?:cc|cpp|h):\d+\s+(?:[\w:~<>*&,\s]+?\((?:[^()]|\([^()]*\))*\)\s*(?:const\s*)?)?")


def check_model_path(path: str) -> None:
    """Refuse a model path that is missing, not a file, or empty.

    Raises:
        ModelError: with what is wrong.
    """
    if not os.path.exists(path):
        raise ModelError(f"model file not found: {path}")
    if not os.path.isfile(path):
        raise ModelError(f"model path is not a file: {path}")
    if os.path.getsize(path) == 0:
        raise ModelError(f"model file is empty: {path}")


def open_session(
    model: str | bytes,
    *,
    label: str | None = None,
    settings: SessionSettings | None = None,
    profile: str | None = None,
    data_folder: str | None = None,
    arena: bool = True,
    options: Any = None,
) -> Any:
    """Open an onnxruntime ``InferenceSession`` on a model file or serialized model.

    Args:
        model: a path, or the model's bytes.
        label: how to name the model in messages. Defaults to the path.
        settings: how the session runs (none: on the CPU provider, with onnxruntime's defaults).
        profile, data_folder, arena: as :meth:`SessionSettings.session_options` takes them.
        options: ``SessionOptions`` :meth:`SessionSettings.session_options` made and the caller changed (the offline optimiser
            names the file to write); none: made from the settings.

    Raises:
        ModelError: the model is missing, not ONNX, or onnxruntime cannot load it.
        UsageError: onnxruntime here has no such provider.
    """
    if label is None:
        label = model if isinstance(model, str) else "model"
    if isinstance(model, str):
        check_model_path(model)
    ort = require("onnxruntime", purpose="running a model")

    settings = settings or SessionSettings()
    if options is None:
        options = settings.session_options(profile=profile, data_folder=data_folder, arena=arena)
    providers = settings.provider_list()
    _prime_allocator()
    try:
        return ort.InferenceSession(model, sess_options=options, providers=providers)
    except Exception as exc:  # onnxruntime raises its own pybind11 types
        from .modelfile import external_data_problem

        problem = external_data_problem(model) if isinstance(model, str) else None
        raise (problem or ModelError(describe_load_error(label, exc))) from None


_PRIMED = False
PRIME_BYTES = 8 << 20


def _prime_allocator() -> None:
    """Once a process, before its first session: allocate and free :data:`PRIME_BYTES` through the C library.

    glibc serves an allocation over its mmap threshold (128 KiB at start) with a mapping of its own, unmapped when
    freed; freeing one raises the threshold to its size. onnxruntime's session creation allocates many blocks of
    128 KiB to a few MiB: under the first threshold each is mapped, faulted in page by page and unmapped, and
    session creation spends that in system time. One block of 8 MiB freed first serves them from the heap (ResNet-50
    packed: about 14% fewer page faults and 5% less wall time; docs/benchmarks.md). ``bytes`` of that size come from
    ``calloc``, whose fresh mapping is zero already, so the block costs a map and an unmap, no page; elsewhere than
    glibc it is an allocation and nothing more."""
    global _PRIMED
    if not _PRIMED:
        _PRIMED = True
        block = bytes(PRIME_BYTES)  # calloc's, freed at once
        del block


class OrtRunner:
    """A :class:`~mgedump.model.runner.Runner` on an onnxruntime ``InferenceSession``.

    ``run`` is the session's own ``run`` with every output asked for: the timed loops add no call of their own.
    ``session`` is the onnxruntime session, for what only onnxruntime has (its profiler, exposed runs).
    """

    def __init__(self, session: Any) -> None:
        self.session = session
        self.run: Callable[[Mapping[str, Any]], list[Any]] = functools.partial(session.run, None)

    @functools.cached_property
    def inputs(self) -> list[TensorInfo]:
        return tensor_infos(self.session.get_inputs(), "input")

    @functools.cached_property
    def outputs(self) -> list[TensorInfo]:
        return tensor_infos(self.session.get_outputs(), "output")

    @property
    def providers(self) -> list[str]:
        return list(self.session.get_providers())

    def end_profiling(self) -> str:
        return str(self.session.end_profiling())

    def run_and_shrink(self, feeds: Mapping[str, Any]) -> None:
        """One run that hands back, at its end, the memory its CPU arena holds free (the intermediate tensors'):
        an idle session then holds its weights, not its largest run (docs/fitting.md)."""
        import onnxruntime as ort  # type: ignore[import-untyped]

        options = ort.RunOptions()
        options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self.session.run(None, feeds, options)

    def close(self) -> None:
        self.session = None
        self.run = _closed


def _closed(feeds: Mapping[str, Any]) -> list[Any]:
    raise RunError("the model's session was closed")


def open_runner(
    model: str | bytes,
    settings: SessionSettings | None = None,
    *,
    label: str | None = None,
    profile: str | None = None,
    data_folder: str | None = None,
    arena: bool = True,
) -> OrtRunner:
    """An onnxruntime runner on a model (:func:`open_session`'s arguments and errors)."""
    return OrtRunner(
        open_session(model, label=label, settings=settings, profile=profile, data_folder=data_folder, arena=arena)
    )


def describe_load_error(label: str, exc: BaseException) -> str:
    """One line that says why onnxruntime refused a model, and what to do."""
    message = clean_ort_message(exc, limit=4000)
    kind = type(exc).__name__
    ir = re.search(r"Unsupported model IR version: (\d+), max supported IR version: (\d+)", message)
    if ir:
        return (
            f"{label}: the model's IR version {ir.group(1)} is newer than this onnxruntime supports "
            f"(at most {ir.group(2)}); re-save it with ir_version <= {ir.group(2)} "
            f"(onnx.helper.make_model(..., ir_version={ir.group(2)}))"
        )
    if kind == "InvalidProtobuf" or "Protobuf parsing failed" in message:
        return f"{label}: not a valid ONNX model (protobuf parsing failed: the file is truncated or not ONNX)"
    if "opset" in message.lower() and "support" in message.lower():
        return f"{label}: onnxruntime does not support the model's opset: {message}"
    if len(message) > 400:
        message = message[:397] + "..."
    return f"{label}: onnxruntime cannot load the model: {message}"


def name_not_utf8(what: str, index: int, exc: UnicodeDecodeError) -> ModelError:
    """The refusal of a model input or output whose name is not UTF-8 (``exc``: the failed decoding of its name)."""
    raw = exc.object[exc.start : exc.end] if isinstance(exc.object, bytes) else b""
    return ModelError(
        f"{what} {index} of the model has a name that is not UTF-8 text (bytes {raw!r} in it): onnxruntime's "
        "Python API cannot name it, so nothing can feed or check it",
        hint="rename it in the model (onnx.helper) to UTF-8 text",
    )


def check_io_names(model: Any) -> None:
    """An ONNX ModelProto's inputs and outputs have names onnxruntime can give (onnx hands one that is not UTF-8
    over as bytes).

    Raises:
        ModelError: the first that has not, as :func:`tensor_infos` refuses it.
    """
    graph = model.graph
    weights = {init.name for init in graph.initializer}
    for what, values in (("input", [v for v in graph.input if v.name not in weights]), ("output", graph.output)):
        for index, value in enumerate(values):
            if isinstance(value.name, bytes):
                try:
                    value.name.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise name_not_utf8(what, index, exc) from None


def tensor_infos(args: Sequence[Any], what: str) -> list[TensorInfo]:
    """Describe onnxruntime ``NodeArg`` s; non-tensor types are refused."""
    infos = []
    for index, arg in enumerate(args):
        try:
            arg.name  # noqa: B018 - onnxruntime decodes it here
        except UnicodeDecodeError as exc:
            raise name_not_utf8(what, index, exc) from None
        dtype = _ORT_DTYPES.get(arg.type)
        if dtype is None:
            dtype = _structured(arg, what)
        shape = arg.shape if not is_structured(dtype) else None
        dims = None if shape is None else tuple(d if isinstance(d, (int, str)) or d is None else None for d in shape)
        infos.append(TensorInfo(arg.name, dtype, dims))
    return infos


def _structured(arg: Any, what: str) -> str:
    """A sequence, map or optional type mgedump handles, as onnxruntime names it.

    Raises:
        ModelError: another type (a sparse tensor, a map of sequences), naming the command that refuses it.
    """
    try:
        return parse(arg.type).text
    except ValueError as exc:
        raise ModelError(
            f"{what} {arg.name!r} has type {arg.type}, which {program()} cannot feed or check ({exc})",
            hint="docs/bundle.md, Types, lists the types mgedump handles",
        ) from None


def model_io(session: Any) -> tuple[list[TensorInfo], list[TensorInfo]]:
    """The model's inputs (graph inputs that are not initializers) and outputs."""
    return tensor_infos(session.get_inputs(), "input"), tensor_infos(session.get_outputs(), "output")


def infer(session: Any, feeds: dict[str, np.ndarray], *, output_names: Sequence[str] | None = None) -> list[np.ndarray]:
    """Run the model once.

    Raises:
        RunError: onnxruntime failed; see :func:`run_error`.
    """
    try:
        return list(session.run(output_names, feeds))
    except Exception as exc:
        raise run_error(exc, feeds) from None


def run_error(exc: BaseException, feeds: dict[str, np.ndarray]) -> RunError:
    """onnxruntime's run failure as one line, naming the integer inputs when an index is out of range."""
    message = clean_ort_message(exc)
    hint = None
    integer_inputs = [n for n, a in feeds.items() if a.dtype.kind in "iu"]
    if integer_inputs and re.search(r"out of (data )?bounds|out of range|idx", message, re.IGNORECASE):
        hint = "check the values given for integer input(s) " + ", ".join(repr(n) for n in integer_inputs)
    images = [f"{n} {'x'.join(map(str, a.shape))}" for n, a in feeds.items() if a.dtype.kind == "f" and a.ndim == 4]
    if images and re.search(r"mismatch(ed)? dim|dimension mismatch|incompatible dim|broadcast", message, re.IGNORECASE):
        hint = (  # a free H/W the model needs in multiples of its stride (32): an image of any size does not fit
            f"the model may need another H and W (often multiples of 32; given {', '.join(images)}): fix them with "
            f"{option_name('input_shapes')} NAME:N,C,H,W and {option_name('resize_input')}"
        )
    return RunError(f"the model failed to run: {message}", hint=hint)


def to_values(values: Sequence[Any], infos: Sequence[TensorInfo]) -> list[Any]:
    """The outputs as mgedump holds them: arrays, and sequences, maps and optionals as lists, dicts and None
    (:func:`~mgedump.model.valuetype.normalize`).

    Raises:
        ModelError: an output is not of the type the model declares.
    """
    out = []
    for value, info in zip(values, infos, strict=True):
        try:
            out.append(normalize(value, info.value_type, f"output {info.name!r}"))
        except TypeError as exc:
            raise ModelError(f"{exc}, but the model declares {info.dtype}") from None
    return out


def to_numpy_outputs(values: Sequence[Any], infos: Sequence[TensorInfo]) -> list[np.ndarray]:
    """Check that every output is a numpy array (not a sequence or map)."""
    arrays = []
    for value, info in zip(values, infos, strict=True):
        if not isinstance(value, np.ndarray):
            raise ModelError(
                f"output {info.name!r} is not a tensor ({type(value).__name__}); mgedump checks tensors only"
            )
        arrays.append(value)
    return arrays
