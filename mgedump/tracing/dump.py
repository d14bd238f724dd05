"""What ``trace.dump`` does with the tool: write the recorded graph as an ONNX model or as a bundle.

The graph is the one a trace's first call recorded, with every external tensor
as a constant. It is optimised, packed into a bundle with test cases, and
described in strip info by the same code as the ``mgedump`` command. This is
the only module of the tracing framework that imports the tool's higher
modules (options, optimisation, packing, strip info, file output).

With ``symbolic_shape=True`` and calls on several input shapes, the dims
that varied become free dims (ONNX dim params) of the dumped model, once
the recordings agree operation by operation and the graph is checked to give
each recording's results on its inputs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mgedump.base.errors import UsageError
from mgedump.base.fileio import CHUNK, atomic_output, write_bytes_atomic
from mgedump.base.naming import NO_VALUE, spoken_as
from mgedump.base.outputs import Output, Outputs, all_or_nothing
from mgedump.bundle import MODEL_MEMBER
from mgedump.bundle.format import BUNDLE_SUFFIX
from mgedump.commands.pack import pack
from mgedump.model.runtime import infer, open_session
from mgedump.model.stripinfo import strip_info_paths, write_strip_info
from mgedump.optimize import check_can_make, optimize_file
from mgedump.optimize.nodes import unique_name
from mgedump.options import OptimizeOptions, PackOptions

from .arguments import DumpArgs
from .dispatch import TensorBase, with_note
from .graph import Program, build_model, node_labels
from .ops import OPS

MEGENGINE_FORMATS = ("FBS", "FBS_V2", "MDL")


@dataclass(frozen=True)
class DumpInfo:
    """What :meth:`mgedump.jit.trace.dump` wrote (MegEngine's ``DumpInfo``).

    Attributes:
        inputs: the graph's input names.
        outputs: the graph's output names.
        params: the weights' (initializers') names.
        nr_opr: how many operations (ONNX nodes) the written graph has. ONNX
            has no input nodes, so a + b counts 1 where MegEngine counts 3.
        opr_types: how many nodes of each ONNX operator type.
        tot_bytes: the size of the written model (the bundle's model, with ``input_data``).
        tensor_value_bytes: the bytes of the weights.
        content_hash: the SHA-256 of the written model.
        free_dims: the free dims given to the inputs, ``{input: {axis: name}}``.
    """

    inputs: list[str]
    outputs: list[str]
    params: list[str]
    nr_opr: int
    opr_types: dict[str, int]
    tot_bytes: int
    tensor_value_bytes: int
    content_hash: str
    free_dims: dict[str, dict[int, str]] = field(default_factory=dict)


# the keywords of :meth:`mgedump.tracing.jit.trace.dump` besides the ``--enable-*`` flags, in its order: it documents
# them and holds their defaults, and passes every one of them here
DUMP_KEYWORDS = (
    "arg_names",
    "output_names",
    "optimize_for_inference",
    "keep_var_name",
    "keep_opr_name",
    "keep_param_name",
    "strip_info_file",
    "append_json",
    "input_data",
    "maxerr",
    "no_assert",
    "silent",
    "dump_format",
    "variants",
)


def dump_program(programs: Sequence[Program], file: Any, *, symbolic_shape: bool, **keywords: Any) -> DumpInfo:
    """Write a recorded graph as an ONNX model, or as a bundle with test cases.

    Args:
        programs: what the trace recorded, one per input shapes, the first
            first (made with ``capture_as_const=True``).
        file: the path to write, or a binary file object.
        symbolic_shape: give the input dims that varied between the programs as free dims.
        **keywords: every keyword of :meth:`mgedump.tracing.jit.trace.dump` (:data:`DUMP_KEYWORDS`, which it
            documents), then its ``--enable-*`` flags.

    Returns:
        What was written.

    Raises:
        ValueError: a wrong number of ``arg_names``/``output_names``; bad
            ``keep_var_name``; a test case that does not fit the inputs; a
            MegEngine ``dump_format``; dims that varied but cannot be free.
        TypeError: ``output_names`` for a function that returns a dict; a
            ``file`` that is neither a path nor a binary file object.
        MgeError: an unknown or refused ``enable_*`` flag, a bad spec or
            ``maxerr``, an unwritable output (as the ``mgedump`` command reports them).
    """
    args = DumpArgs.checked(file, keywords, DUMP_KEYWORDS)
    program = programs[0]
    _check_dumpable(program, args)
    inputs, outputs = _interface(program, args.arg_names, args.output_names)
    with spoken_as(_megengine_keyword):
        options = _optimize_options(args.optimize_for_inference, args.enable_flags)
    shapes, free = _free_dims(programs, inputs, outputs) if symbolic_shape and len(programs) > 1 else ({}, {})
    model = _dump_model(program, inputs, outputs, args, shapes)
    if free:
        _check_free_dims(model, programs, inputs, outputs)
    with tempfile.TemporaryDirectory(prefix="mgedump-trace-") as tmp:
        src = os.path.join(tmp, "model.onnx")
        with open(src, "wb") as f:
            f.write(model.SerializeToString())
        if args.input_data is None:
            data = _write_model(src, args.file, tmp, options, args.strip_info_file, args.append_json)
        else:
            scalars = {
                name for name, (_, vid) in zip(inputs, program.inputs, strict=True) if not program.values[vid].shape
            }
            cases = [_case(case, inputs, scalars, i) for i, case in enumerate(args.input_data)]
            if not cases:
                raise ValueError("input_data is empty: give at least one test case")
            # nonfinite_ok: MegEngine dumps expected outputs that hold NaN or infinity (exp of #rand(0, 255));
            # the packer warns naming the output and the count (the command line keeps refusing them)
            pack_options: dict[str, Any] = {
                "cases": cases,
                "no_assert": args.no_assert,
                "silent": args.silent,
                "optimize": options,
                "nonfinite_ok": True,
            }
            if args.maxerr is not None:
                pack_options["maxerr"] = args.maxerr
            if args.variants:
                pack_options["variants"] = tuple(args.variants)
            data = _write_bundle(src, args.file, tmp, pack_options, args.strip_info_file, args.append_json)
    return _info(data, free)


# MegEngine's message for a function that returns no tensor (test_dump_without_output_error)
NO_OUTPUT = (
    "the traced function without return values cannot be dumped, the traced function should return "
    "List[Tensor] or Dict[str, Tensor]"
)


def _check_dumpable(program: Program, args: DumpArgs) -> None:
    """Refuse what cannot be dumped: another format, a graph with a break or trained-mode statistics, an output
    path that is also the strip info's.

    Raises:
        ValueError: a MegEngine ``dump_format``; ``exclude_from_trace``; the strip info on the output's path.
        RuntimeError: BatchNorm in training mode (as MegEngine, at dump and not at call).
    """
    label, dump_format = program.label, args.dump_format
    if dump_format is not None and dump_format.upper() != "ONNX":
        known = "MegEngine's own graph format" if dump_format.upper() in MEGENGINE_FORMATS else "not a format"
        raise ValueError(
            f"dump_format={dump_format!r} is {known}; mgedump writes ONNX only (dump_format=None or 'ONNX'), "
            "which onnxruntime and the mgedump/mgerun commands read"
        )
    if program.used_exclude:  # unreachable with capture_as_const, kept as a guard
        raise ValueError(f"{label} uses exclude_from_trace; its graph cannot be dumped whole")
    training = [k for k, rec in enumerate(program.ops) if OPS[rec.name].training]
    if training:
        rec = program.ops[training[0]]
        where = f" in {rec.scope}" if rec.scope else ""
        raise RuntimeError(
            f"{label} cannot be dumped: op #{training[0]} ({rec.name}{where}) normalizes with the statistics of "
            "the batch (a BatchNorm in training mode), which an inference graph does not have; call .eval() "
            "on the module before tracing, so that it uses its running statistics"
        )
    if args.strip_info_file and isinstance(args.file, (str, os.PathLike)):
        target = os.path.realpath(os.fspath(args.file))
        if any(os.path.realpath(p) == target for p in strip_info_paths(args.strip_info_file)):
            raise ValueError(
                f"dump(strip_info_file={args.strip_info_file!r}) would be written over the dumped file "
                f"{os.fspath(args.file)!r}: give the strip info another path"
            )


def _interface(
    program: Program, arg_names: list[str] | None, output_names: list[str] | None
) -> tuple[list[str], list[str]]:
    """The graph's input and output names: given, else MegEngine's.

    Inputs: the tensor's own name, else ``arg_N``. Outputs: a dict's keys;
    else the name the user gave the returned tensor, else the operation's
    (``net.fc.ADD``, as MegEngine names an output var), else ``output_N``.

    Raises:
        ValueError: the function returns no tensor; a wrong number of names; names that are not unique.
        TypeError: ``output_names`` for a function that returns a dict.
    """
    label = program.label
    inputs = [program.values[vid].name or f"arg_{i}" for i, (_, vid) in enumerate(program.inputs)]
    inputs = _names(arg_names, inputs, "arg_names", "tensor input(s)", label)
    kind, meta = program.structure
    if not program.output_vids:
        raise with_note(ValueError(NO_OUTPUT), f"{label} returns {'None' if kind == 'none' else 'no tensor'}")
    if kind == "dict":
        if output_names is not None:
            raise TypeError(f"output_names cannot be given: {label} returns a dict, whose keys name the outputs")
        outputs = [str(k) for k in meta]
    else:
        outputs = _names(output_names, _default_outputs(program, set(inputs)), "output_names", "output(s)", label)
    if len(set(inputs + outputs)) != len(inputs) + len(outputs):
        raise ValueError(f"input and output names must be unique, got inputs {inputs} and outputs {outputs}")
    return inputs, outputs


def _default_outputs(program: Program, taken: set[str]) -> list[str]:
    """MegEngine's names of the outputs (see :func:`_interface`), made unique."""
    labels = node_labels(program, program.slice([v for v in program.output_vids if v is not None], frozenset())[0])
    names: list[str] = []
    for i, vid in enumerate(program.output_vids):
        value = program.values[vid] if vid is not None else None
        name = program.user_names.get(vid) if vid is not None else None
        if name is None and value is not None and value.kind == "op":
            name = labels.get(value.op)
        name = name or f"output_{i}"
        base, n = name, 0
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        names.append(name)
    return names


# MegEngine's dump() keywords for its optimisations, and what each is here (docs/trace.md)
_PRECISIONS = {"enable_io16xc32": "io16xc32", "enable_ioc16": "ioc16"}
_REWRITES = {
    "enable_fuse_conv_bias_nonlinearity": "fuse_conv_bias_nonlinearity",
    "enable_nchw88": "nchw88",
    "discard_var_name": "discard_var_name",
    "fp32_nodes": "fp32_nodes",
    "keep_io_types": "keep_io_types",
    "float16_margin": "float16_margin",
}
_REFUSED = (
    "enable_hwcd4", "enalbe_hwcd4", "enable_nchw4", "enable_nchw44", "enable_nchw44_dot", "enable_nchw32",
    "enable_chwn4", "enable_fuse_conv_bias_with_z",
)  # fmt: skip


def _megengine_keyword(name: str, value: Any = NO_VALUE) -> str:
    """Messages name options as dump() takes them (MegEngine's keywords)."""
    if name == "precision" and value is not NO_VALUE:
        return next((k for k, v in _PRECISIONS.items() if v == value), f"precision {value!r}") + "=True"
    return next((k for k, v in _REWRITES.items() if v == name), name)


def _optimize_options(optimize_for_inference: bool, flags: dict[str, Any]) -> OptimizeOptions:
    """The rewrites MegEngine's dump() keywords ask for.

    Raises:
        UsageError: an unknown keyword, or one of MegEngine's layouts and fusions for its own kernels.
    """
    chosen: dict[str, Any] = {"optimize_for_inference": optimize_for_inference}
    for key, value in flags.items():
        if key in _REFUSED:
            if value:
                raise UsageError(
                    f"{key} is a MegEngine layout/fusion for its own kernels; ONNX and onnxruntime have no "
                    "equivalent, so mgedump refuses it rather than do nothing"
                )
        elif key in _PRECISIONS:
            if value:
                chosen["precision"] = _PRECISIONS[key]
        elif key in _REWRITES:
            chosen[_REWRITES[key]] = tuple(value) if key == "fp32_nodes" else value
        else:
            raise UsageError(f"unknown optimisation flag {key!r}")
    options = OptimizeOptions(**chosen)
    check_can_make(options)
    return options


def _info(data: bytes, free: dict[str, dict[int, str]]) -> DumpInfo:
    import onnx

    model = onnx.load_model_from_string(data)
    graph = model.graph
    params = {i.name for i in graph.initializer}
    weights = sum(onnx.numpy_helper.to_array(i).nbytes for i in graph.initializer)
    return DumpInfo(
        inputs=[i.name for i in graph.input if i.name not in params],
        outputs=[o.name for o in graph.output],
        params=[i.name for i in graph.initializer],
        nr_opr=len(graph.node),
        opr_types=dict(Counter(n.op_type for n in graph.node)),
        tot_bytes=len(data),
        tensor_value_bytes=int(weights),
        content_hash=hashlib.sha256(data).hexdigest(),
        free_dims=free,
    )


# ---------------------------------------------------------------- free dims


def _free_dims(
    programs: Sequence[Program], inputs: list[str], outputs: list[str]
) -> tuple[dict[int, list[int | str] | None], dict[str, dict[int, str]]]:
    """The declared shapes of the inputs and outputs with the dims that varied between programs free.

    Raises:
        ValueError: the programs differ in more than their shapes (an operation,
            an attribute, a constant made from a shape): the graph of one shape
            does not serve the others.
    """
    first = programs[0]
    label = first.label
    for other in programs[1:]:
        where = f"{_signature(first)} and {_signature(other)}"
        if len(other.ops) != len(first.ops):
            raise _not_free(label, where, f"{len(first.ops)} and {len(other.ops)} operations were recorded")
        for k, (a, b) in enumerate(zip(first.ops, other.ops, strict=True)):
            if a.name != b.name or a.inputs != b.inputs or a.attrs != b.attrs:
                diff = [key for key in sorted(a.attrs) if a.attrs.get(key) != b.attrs.get(key)]
                detail = "; ".join(f"{key}: {a.attrs.get(key)!r} and {b.attrs.get(key)!r}" for key in diff)
                raise _not_free(label, where, f"op #{k} ({a.name}) differs ({detail or 'its inputs'})")
        for u, v in zip(first.values, other.values, strict=True):
            if u.kind != v.kind or (u.kind in ("const", "ext") and not _same(u.data, v.data)):
                raise _not_free(label, where, f"{u.label} differs ({u.shape} and {v.shape})")
    params: dict[tuple[int, ...], str] = {}
    shapes: dict[int, list[int | str] | None] = {}
    free: dict[str, dict[int, str]] = {}
    for name, (_, vid) in zip(inputs, first.inputs, strict=True):
        dims: list[int | str] = []
        for axis, dim in enumerate(first.values[vid].shape):
            seen = tuple(p.values[vid].shape[axis] for p in programs)
            if len(set(seen)) > 1:
                param = params.setdefault(seen, f"{name}_dim{axis}")
                free.setdefault(name, {})[axis] = param
                dims.append(param)
            else:
                dims.append(dim)
        shapes[vid] = dims
    for name, out_vid in zip(outputs, first.output_vids, strict=True):
        assert out_vid is not None
        if first.values[out_vid].dynamic:
            continue
        out: list[int | str] = []
        for axis, dim in enumerate(first.values[out_vid].shape):
            seen = tuple(p.values[out_vid].shape[axis] for p in programs)
            out.append(dim if len(set(seen)) == 1 else params.get(seen, f"{name}_dim{axis}"))
        shapes[out_vid] = out
    return shapes, free


def _signature(program: Program) -> str:
    return "input shapes " + ", ".join(str(list(program.values[vid].shape)) for _, vid in program.inputs)


def _not_free(label: str, where: str, detail: str) -> ValueError:
    return ValueError(
        f"{label} was traced with {where}, but its recordings differ beyond their shapes: {detail}. The dims that "
        "varied cannot be free dims of one graph: compute shapes from tensors (x.shape under "
        "symbolic_shape=True, -1 in reshape) instead of Python numbers, or dump a trace called with one input shape"
    )


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    return a is b or (a is not None and b is not None and a.shape == b.shape and bool(np.array_equal(a, b)))


def _check_free_dims(model: Any, programs: Sequence[Program], inputs: list[str], outputs: list[str]) -> None:
    """Run the graph with free dims on every recording's first inputs; it must give that recording's results."""
    session = open_session(model.SerializeToString(), label=f"the dumped graph of {programs[0].label}")
    for program in programs:
        if program.sample is None:
            continue
        feeds, expected = program.sample
        feed = {name: (a.reshape(1) if a.ndim == 0 else a) for name, a in zip(inputs, feeds, strict=True)}
        random = any(OPS[rec.name].random for rec in program.ops)
        try:
            got = infer(session, feed)
        except Exception as exc:  # noqa: BLE001 - onnxruntime's own error, reported with the shapes
            raise _not_free(programs[0].label, _signature(program), f"the graph fails there: {exc}") from None
        for name, g, e in zip(outputs, got, expected, strict=True):
            e = np.asarray(e)
            g = g.reshape(e.shape) if g.size == e.size else g
            ok = g.shape == e.shape and (random or np.allclose(g, e, rtol=1e-4, atol=1e-5, equal_nan=True))
            if not ok:
                raise _not_free(
                    programs[0].label,
                    _signature(program),
                    f"the graph gives output {name!r} of shape {list(g.shape)} there, the trace gave "
                    f"{list(e.shape)}{'' if g.shape != e.shape else ' with other values'}",
                )


# ---------------------------------------------------------------- writing


def _write_model(
    src: str, file: Any, tmp: str, options: OptimizeOptions, strip_info_file: str | None, append_json: bool
) -> bytes:
    """The model (optimised if asked) to a path or a file object, and its strip info; returns its bytes."""
    is_path = isinstance(file, (str, os.PathLike))
    if not is_path and not hasattr(file, "write"):
        raise TypeError(f"dump needs a path or a binary file object, got {type(file).__name__}")
    _outputs(os.fspath(file) if is_path else None, strip_info_file).check()
    path = src
    if options.any:
        path = optimize_file(src, os.path.join(tmp, "optimized.onnx"), options).path
    with open(path, "rb") as f:
        data = f.read()
    with all_or_nothing():  # the model and its strip info, both or neither
        if is_path:
            write_bytes_atomic(os.fspath(file), data)
        else:
            file.write(data)
        if strip_info_file:
            write_strip_info(path, strip_info_file, append=append_json, label=_model_label(file, path))
    return data


def _outputs(file: str | None, strip_info_file: str | None) -> Outputs:
    """What a dump writes: the file (unless a file object), and the strip info's two files."""
    strip = strip_info_paths(strip_info_file) if strip_info_file else ()
    return Outputs([Output("file", file or ""), *(Output("strip_info_file", p) for p in strip)])


def _model_label(file: Any, path: str) -> str:
    """How the strip info names the model: the file written, else the model's own file."""
    return os.path.basename(os.fspath(file)) if isinstance(file, (str, os.PathLike)) else os.path.basename(path)


def _write_bundle(
    src: str, file: Any, tmp: str, pack_options: dict[str, Any], strip_info_file: str | None, append_json: bool
) -> bytes:
    """A bundle of the model and its test cases, packed as ``mgedump`` does, and its strip info.

    Returns:
        The bundled model's bytes (of several variants, the first's).
    """
    is_path = isinstance(file, (str, os.PathLike))
    if not is_path and not hasattr(file, "write"):
        raise TypeError(f"dump needs a path or a binary file object, got {type(file).__name__}")
    late_strip = bool(strip_info_file) and append_json
    options = PackOptions(**pack_options, strip_info=None if late_strip else strip_info_file)
    if late_strip:  # the bundle and the strip info merged after it: checked together, written both or neither
        _outputs(os.fspath(file) if is_path else None, strip_info_file).check()
    target = os.fspath(file) if is_path and not late_strip else os.path.join(tmp, "bundle" + BUNDLE_SUFFIX)
    result = pack(src, target, options)
    with zipfile.ZipFile(target) as zf:
        model = zf.read(result.manifest.model.member)  # of several variants, the first
    if late_strip:  # pack writes strip info afresh; merge it from the bundled model instead
        assert strip_info_file is not None
        bundled = os.path.join(tmp, "bundled", MODEL_MEMBER)
        os.makedirs(os.path.dirname(bundled))
        with open(bundled, "wb") as out:
            out.write(model)
        with all_or_nothing():
            write_strip_info(bundled, strip_info_file, append=True, model_sha256=result.manifest.model.sha256)
            if is_path:
                with open(target, "rb") as packed, atomic_output(os.fspath(file)) as out:
                    shutil.copyfileobj(packed, out, CHUNK)
    if not is_path:
        with open(target, "rb") as f:
            file.write(f.read())
    return model


def _names(given: Sequence[str] | str | None, default: list[str], what: str, unit: str, label: str) -> list[str]:
    if given is None:
        return default
    names = [given] if isinstance(given, str) else list(given)
    if len(names) != len(default):
        raise ValueError(f"{what} has {len(names)} name(s), but {label} has {len(default)} {unit}")
    for name in names:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{what} must be non-empty strings, got {name!r}")
    return names


def _dump_model(
    program: Program,
    inputs: list[str],
    outputs: list[str],
    args: DumpArgs,
    shapes: dict[int, list[int | str] | None],
) -> Any:
    """The whole recorded graph as ONNX, with interface names and constants baked in.

    Scalar inputs and outputs are given shape (1,), as MegEngine dumps them,
    and reshaped inside the graph.
    """
    import onnx

    need = [v for v in program.output_vids if v is not None]
    if len(need) != len(outputs):
        raise ValueError(f"{program.label} returns tensors computed inside exclude_from_trace; they cannot be dumped")
    ops, leaves = program.slice(need, frozenset())
    fed = [vid for _, vid in program.inputs]
    consts = sorted(v for v in leaves if program.values[v].kind in ("const", "ext"))
    labels = node_labels(program, ops)
    naming = _Naming(set(inputs) | set(outputs))
    names, graph_outputs, scalar_in, scalar_out = naming.interface(program, fed, need, inputs, outputs)
    naming.inner(program, names, consts, ops, labels, args)
    model = build_model(
        program,
        ops,
        fed,
        consts,
        graph_outputs,
        names,
        graph_name=program.label,
        labels=labels if args.keep_opr_name else None,
        descriptive=args.keep_var_name >= 2,
        shapes=dict(shapes),
    )
    _scalar_interface(model.graph, names, scalar_in, scalar_out, naming.unique)
    onnx.checker.check_model(model)
    return model


class _Naming:
    """The tensor names of a dumped graph, each unique."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken

    def unique(self, hint: str) -> str:
        return unique_name(self.taken, hint)

    def interface(
        self, program: Program, fed: list[int], need: list[int], inputs: list[str], outputs: list[str]
    ) -> tuple[dict[int, str], list[tuple[int, str]], list[tuple[int, str]], list[str]]:
        """The names of the inputs and outputs (scalars get an inner name: the graph reshapes them)."""
        scalar_in = [(vid, name) for vid, name in zip(fed, inputs, strict=True) if not program.values[vid].shape]
        names: dict[int, str] = dict(zip(fed, inputs, strict=True))
        for vid, name in scalar_in:
            names[vid] = self.unique(f"{name}_scalar")
        graph_outputs: list[tuple[int, str]] = []
        scalar_out: list[str] = []
        for vid, name in zip(need, outputs, strict=True):
            if not program.values[vid].shape:
                scalar_out.append(name)
                name = self.unique(f"{name}_scalar")
            elif program.values[vid].kind == "op" and vid not in names:
                names[vid] = name
            graph_outputs.append((vid, name))
        return names, graph_outputs, scalar_in, scalar_out

    def inner(
        self,
        program: Program,
        names: dict[int, str],
        consts: list[int],
        ops: list[int],
        labels: dict[int, str],
        args: DumpArgs,
    ) -> None:
        """The names of weights, constants and intermediate tensors: MegEngine's with ``keep_param_name`` or
        ``keep_var_name=2`` (the tensor's or the operation's, or the one the user gave), else numbered."""
        for i, vid in enumerate(consts):
            value = program.values[vid]
            if value.kind == "ext":
                keep = (args.keep_param_name or args.keep_var_name >= 2) and value.name
                names[vid] = self.unique(value.name if keep and value.name else f"param_{i}")
            else:
                names[vid] = self.unique(f"const_{i}")
        for k in ops:
            vid = program.ops[k].output
            if vid not in names:
                given = program.user_names.get(vid)
                hint = (given or labels[k]) if args.keep_var_name >= 2 else f"t{k}"
                names[vid] = self.unique(hint)


def _scalar_interface(
    graph: Any, names: dict[int, str], scalar_in: list[tuple[int, str]], scalar_out: list[str], unique: Any
) -> None:
    """Scalar inputs and outputs as shape (1,), reshaped inside the graph."""
    from onnx import helper, numpy_helper

    for vid, name in scalar_in:  # a (1,) input, reshaped to the scalar the trace saw
        shape_name = unique(f"{name}_scalar_shape")
        graph.initializer.append(numpy_helper.from_array(np.zeros(0, np.int64), shape_name))
        graph.node.insert(0, helper.make_node("Reshape", [name, shape_name], [names[vid]]))
        for value_info in graph.input:
            if value_info.name == names[vid]:
                value_info.name = name
                value_info.type.tensor_type.shape.dim.add().dim_value = 1
    for name in scalar_out:  # the scalar result as (1,)
        shape_name = unique(f"{name}_shape")
        graph.initializer.append(numpy_helper.from_array(np.ones(1, np.int64), shape_name))
        graph.node.append(helper.make_node("Reshape", [f"{name}_scalar", shape_name], [name]))
        for value_info in graph.output:
            if value_info.name == f"{name}_scalar":
                value_info.name = name
                value_info.type.tensor_type.shape.dim.add().dim_value = 1


def _case(case: Any, inputs: list[str], scalars: set[str], index: int) -> Any:
    """One test case for the packer: a ``-d`` text as it is, arrays as a dict of input name to array.

    Scalars become shape (1,), as the dumped inputs are.
    """
    if isinstance(case, str):
        return case
    if isinstance(case, (np.ndarray, TensorBase)):
        if len(inputs) != 1:
            raise ValueError(
                f"test case {index} is one array, but the graph has {len(inputs)} inputs {inputs}: "
                "give a list or a dict of arrays"
            )
        arrays = {inputs[0]: case}
    elif isinstance(case, dict):
        unknown = sorted(set(case) - set(inputs))
        if unknown:
            raise ValueError(f"test case {index} names unknown input(s) {unknown}; the inputs are {inputs}")
        arrays = dict(case)
    elif isinstance(case, (list, tuple)):
        if len(case) != len(inputs):
            raise ValueError(
                f"test case {index} has {len(case)} array(s), the graph has {len(inputs)} input(s) {inputs}"
            )
        arrays = dict(zip(inputs, case, strict=True))
    else:
        raise TypeError(
            f"test case {index} is a {type(case).__name__}: give a -d spec string, an array, a list or a dict of arrays"
        )
    out = {}
    for name, data in arrays.items():
        array = data.numpy() if isinstance(data, TensorBase) else np.asarray(data)
        out[name] = array.reshape(1) if name in scalars and array.shape == () else array
    return out
