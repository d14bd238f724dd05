"""Running a model with every tensor exposed as an output, in parts that fit a memory budget.

Exposing every intermediate tensor as an output changes which fusions
onnxruntime can make (it does not fuse away a node whose output is a graph
output), so such a run can differ slightly from a plain one.

Memory stays bounded: the tensors to expose (an io dump's :class:`~.iodump.Plan`)
are split into parts whose estimated size (from ONNX shape inference with the
run's input shapes) fits a budget, and the model runs once per part; each
part's tensors are handed on as soon as they arrive. :class:`ExposedRunner`
does this; :mod:`.exposed` wraps it for a model file and writes dumps.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..base.deps import require
from ..base.limits import release_memory
from ..options import IO_DUMP_BUDGET_MB
from .iodump import Plan
from .structured import structured, type_text, value_key, value_nbytes

if TYPE_CHECKING:
    from ..model.runtime import OrtRunner

DEFAULT_BUDGET = IO_DUMP_BUDGET_MB << 20  # bytes
EMBEDDED_WEIGHTS_LIMIT = 64 << 20  # a model file larger than this has its weights moved out before exposing


def load_for_exposure(path: str, scratch_dir: str, data_folder: str | None = None) -> tuple[Any, str | None]:
    """The model's graph without weights in memory, and the folder its weights are in (``data_folder`` when given:
    a bundled model reads its weights inside the bundle, docs/bundle.md).

    Each run in parts serializes the graph with other outputs; weights embedded
    in a large model would be copied every time, so they are written once as
    external data into ``scratch_dir``. A model with external data keeps it
    where it is.

    Raises:
        ModelError: the file is not a model onnx can read.
    """
    onnx = require("onnx", purpose="exposing every tensor of a model (io dumps, first divergence)")

    from ..base.errors import ModelError
    from ..model.modelfile import uses_external_data

    folder = os.path.dirname(os.path.abspath(path))
    try:
        if uses_external_data(path):
            return onnx.load(path, load_external_data=False), data_folder or folder
        model = onnx.load(path)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise ModelError(f"{path}: not a valid ONNX model ({type(exc).__name__})") from None
    if os.path.getsize(path) <= EMBEDDED_WEIGHTS_LIMIT:
        return model, None
    external = require("onnx.external_data_helper")
    convert_model_to_external_data = external.convert_model_to_external_data
    write_external_data_tensors = external.write_external_data_tensors

    convert_model_to_external_data(model, all_tensors_to_one_file=True, location="weights.data", size_threshold=1024)
    write_external_data_tensors(model, scratch_dir)
    return model, scratch_dir


def exposed_model(model: Any, names: Sequence[str]) -> bytes:
    """The model serialized with these tensors added as graph outputs (onnxruntime infers their types)."""
    helper = require("onnx.helper", purpose="exposing every tensor of a model (io dumps, first divergence)")

    exposed = type(model)()
    exposed.CopyFrom(model)
    present = {v.name for v in exposed.graph.output}
    exposed.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names if n not in present)
    return bytes(exposed.SerializeToString())


def estimate_sizes(model: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, int]:
    """Bytes of each tensor whose shape and dtype ONNX shape inference can tell, for these inputs' shapes."""
    onnx = require("onnx", purpose="exposing every tensor of a model (io dumps, first divergence)")

    known: dict[str, int] = {name: value_nbytes(array) for name, array in feeds.items()}
    probe = type(model)()
    probe.CopyFrom(model)
    for value in probe.graph.input:
        array = feeds.get(value.name)
        if array is None or not value.type.HasField("tensor_type"):
            continue
        shape = value.type.tensor_type.shape
        del shape.dim[:]
        for d in array.shape:
            shape.dim.add().dim_value = int(d)
    try:
        inferred = onnx.shape_inference.infer_shapes(probe, data_prop=True)
    except Exception:  # inference is a best effort: unknown sizes are estimated by the caller
        return known
    tensor_dtype_to_np_dtype = require("onnx.helper").tensor_dtype_to_np_dtype

    for value in list(inferred.graph.value_info) + list(inferred.graph.output):
        t = value.type.tensor_type
        if not value.type.HasField("tensor_type") or not t.HasField("shape") or not t.elem_type:
            continue
        if not all(d.HasField("dim_value") for d in t.shape.dim):
            continue
        dims = [int(d.dim_value) for d in t.shape.dim]
        try:
            itemsize = np.dtype(tensor_dtype_to_np_dtype(t.elem_type)).itemsize
        except (KeyError, TypeError, ValueError):
            continue
        known[value.name] = math.prod(dims) * itemsize
    return known


def partition(names: Sequence[str], sizes: Mapping[str, int], budget: int) -> list[list[str]]:
    """Consecutive groups of tensors whose estimated sizes add up to at most the budget (one tensor at least).

    A tensor of unknown size counts as the largest known one.
    """
    fallback = max(sizes.values(), default=budget // 16)
    parts: list[list[str]] = [[]]
    used = 0
    for name in names:
        size = sizes.get(name, fallback)
        if parts[-1] and used + size > budget:
            parts.append([])
            used = 0
        parts[-1].append(name)
        used += size
    return [p for p in parts if p]


SessionFactory = Callable[[bytes], "OrtRunner"]  # exposing is onnxruntime's: the graph is rewritten as ONNX


class ExposedRunner:
    """Runs a model with every tensor of its plan exposed, in parts that fit a memory budget.

    Args:
        model: the ONNX ModelProto (loaded without its external data).
        open_exposed: opens an onnxruntime runner on serialized model bytes
            (with the caller's providers, options and external data folder).
        budget: the bytes of exposed tensors one run may hold at once.
    """

    def __init__(self, model: Any, open_exposed: SessionFactory, budget: int = DEFAULT_BUDGET) -> None:
        self.model = model
        self.plan = Plan.of(model)
        self.budget = budget
        self._open = open_exposed
        self._runners: dict[tuple[str, ...], OrtRunner] = {}
        self._sizes: dict[tuple[Any, ...], dict[str, int]] = {}
        self._hints: dict[str, int] = {}
        self.parts_run = 0
        self._input_types = {v.name: type_text(v.type) or "" for v in model.graph.input}

    @staticmethod
    def _key(feeds: Mapping[str, np.ndarray]) -> tuple[Any, ...]:
        return tuple(sorted((name, *value_key(array)) for name, array in feeds.items()))

    def sizes(self, feeds: Mapping[str, np.ndarray]) -> dict[str, int]:
        """The bytes of each tensor for inputs of these shapes and dtypes: measured where a run of that shape (or
        :meth:`hint`) told them, else estimated by shape inference (once per shape)."""
        key = self._key(feeds)
        if key not in self._sizes:
            estimated = estimate_sizes(self.model, feeds)
            sizes = {**estimated, **{n: s for n, s in self._hints.items() if n not in estimated}}
            # a tensor shape inference cannot size counts as the largest one that depends on the inputs (weights
            # dequantized at run time can be far larger than any activation)
            plan_sizes = [sizes[n] for n in self.plan.tensors if n in sizes]
            fallback = max(plan_sizes, default=max(sizes.values(), default=0))
            for name in self.plan.tensors:
                sizes.setdefault(name, fallback)
            self._sizes[key] = sizes
        return self._sizes[key]

    def hint(self, sizes: Mapping[str, int]) -> None:
        """Sizes known from elsewhere (another run of a related model), for the tensors shape inference cannot
        size: fewer, larger parts."""
        self._hints.update(sizes)
        self._sizes.clear()

    def tensors(self, feeds: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
        """Every tensor of the plan for these inputs, in plan order (non-tensor values left out).

        Raises:
            RunError: the model failed to run.
        """
        from ..model.runtime import infer

        for name in self.plan.inputs:
            if name in feeds:
                value = feeds[name]
                if isinstance(value, np.ndarray):
                    yield name, value
                elif (wrapped := structured(value, self._input_types.get(name, ""), name)) is not None:
                    yield name, wrapped  # a sequence or an optional input
        fed = set(self.plan.inputs)
        inner = [n for n in self.plan.tensors if n not in fed]
        # a part's tensors count three times: onnxruntime's outputs, the numpy copies it hands over at the end of the
        # run, and the working buffers of the run around them
        sizes = self.sizes(feeds)
        parts = partition(inner, sizes, max(self.budget // 3, 1))
        keep_sessions = len(parts) == 1  # a whole-model session is reused across test cases
        for part in parts:
            key = tuple(part)
            runner = self._runners.get(key)
            if runner is None:
                runner = self._open(exposed_model(self.model, part))
            if keep_sessions:
                self._runners[key] = runner
            session = runner.session
            available = {o.name: o.type for o in session.get_outputs()}
            wanted = [n for n in part if n in available]
            values = infer(session, dict(feeds), output_names=wanted)
            self.parts_run += 1
            del session, runner
            held: list[Any] = list(values)
            del values
            for k, name in enumerate(wanted):
                value, held[k] = held[k], None  # let each tensor go as soon as the caller is done with it
                if isinstance(value, np.ndarray):
                    sizes[name] = int(value.nbytes)  # measured: the next test case of this shape runs in fewer parts
                    yield name, value
                elif not available[name].startswith(("tensor(", "sparse_tensor(")):
                    output = structured(value, available[name], name)
                    if output is not None:  # a type mgedump handles (others are left out)
                        yield name, output
                del value
            del held
            release_memory()
