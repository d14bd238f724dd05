"""What ``trace.dump`` does with the tool: write the recorded graph as an ONNX model or as a bundle.

The graph is the one a trace's first call recorded, with every external tensor
as a constant. It is optimised, packed into a bundle with test cases, and
described in strip info by the same code as the ``mgedump`` command. This is
the only module of the tracing framework that imports the tool's higher
modules (options, optimisation, packing, strip info, file output).
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from mgedump.bundle import MODEL_MEMBER
from mgedump.commands.pack import pack
from mgedump.data.spec import CaseSpec
from mgedump.fileio import check_target, write_bytes_atomic
from mgedump.optimize import optimize_file
from mgedump.options import OptimizeOptions, PackOptions
from mgedump.stripinfo import strip_info_paths, write_strip_info

from .dispatch import TensorBase
from .graph import Program, build_model, node_labels


def dump_program(
    program: Program,
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
    """Write a recorded graph as an ONNX model, or as a bundle with test cases.

    The arguments are :meth:`mgedump.tracing.jit.trace.dump`'s, which documents them.

    Args:
        program: what the trace's first call recorded (with ``capture_as_const=True``).
        file: the path to write (or a binary file object, without ``input_data``).
        arg_names: names of the graph inputs, one per tensor argument.
        output_names: names of the graph outputs, one per returned tensor.
        optimize_for_inference: the portable rewrites of ``--optimize-for-inference``.
        keep_var_name: 2 names intermediate tensors after their operation; 0 and 1 number them.
        keep_opr_name: name the nodes after the operations.
        keep_param_name: name the weights after the tensors' names.
        strip_info_file: also write strip info, as ``--output-strip-info``.
        append_json: merge the strip info into an existing strip-info file.
        input_data: write a bundle with these test cases.
        maxerr: the bundle's AssertEqual threshold. Defaults to ``mgedump``'s.
        no_assert: store no expected outputs in the bundle.
        **enable_flags: the ``--enable-*`` flags of ``mgedump``, as keywords.

    Raises:
        ValueError: a wrong number of ``arg_names``/``output_names``; bad
            ``keep_var_name``; a test case that does not fit the inputs.
        TypeError: ``output_names`` for a function that returns a dict; a
            ``file`` that is neither a path nor a binary file object.
        MgeError: an unknown or refused ``enable_*`` flag, a bad spec or
            ``maxerr``, an unwritable output (as the ``mgedump`` command reports them).
    """
    label = program.label
    if program.used_exclude:  # unreachable with capture_as_const, kept as a guard
        raise ValueError(f"{label} uses exclude_from_trace; its graph cannot be dumped whole")
    if keep_var_name not in (0, 1, 2) or isinstance(keep_var_name, bool):
        raise ValueError(f"keep_var_name must be 0, 1 or 2, got {keep_var_name!r}")
    inputs = [_input_name(key, program) for key, _ in program.inputs]
    inputs = _names(arg_names, inputs, "arg_names", "tensor input(s)", label)
    kind, meta = program.structure
    if kind == "dict":
        if output_names is not None:
            raise TypeError(f"output_names cannot be given: {label} returns a dict, whose keys name the outputs")
        outputs = [str(k) for k in meta]
    else:
        outputs = [f"output_{i}" for i in range(len(program.output_vids))]
        outputs = _names(output_names, outputs, "output_names", "output(s)", label)
    if not outputs:
        raise ValueError(f"{label} returns no tensor: there is no graph to dump")
    if len(set(inputs + outputs)) != len(inputs) + len(outputs):
        raise ValueError(f"input and output names must be unique, got inputs {inputs} and outputs {outputs}")

    options = OptimizeOptions.from_flags(optimize_for_inference=bool(optimize_for_inference), **enable_flags)
    model = _dump_model(program, inputs, outputs, keep_var_name, keep_opr_name, keep_param_name)
    with tempfile.TemporaryDirectory(prefix="mgedump-trace-") as tmp:
        src = os.path.join(tmp, "model.onnx")
        with open(src, "wb") as f:
            f.write(model.SerializeToString())
        if input_data is None:
            _write_model(src, file, tmp, options, strip_info_file, append_json)
        else:
            specs = [_case_spec(case, inputs, tmp, i) for i, case in enumerate(input_data)]
            if not specs:
                raise ValueError("input_data is empty: give at least one test case")
            pack_options: dict[str, Any] = {"cases": specs, "no_assert": no_assert, "optimize": options}
            if maxerr is not None:
                pack_options["maxerr"] = maxerr
            _write_bundle(src, file, tmp, pack_options, strip_info_file, append_json)


def _input_name(key: Any, program: Program) -> str:
    for k, vid in program.inputs:
        if k == key:
            return program.values[vid].name or f"arg_{key}"
    raise KeyError(key)


def _write_model(
    src: str, file: Any, tmp: str, options: OptimizeOptions, strip_info_file: str | None, append_json: bool
) -> None:
    """The model (optimised if asked) to a path or a file object, and its strip info."""
    is_path = isinstance(file, (str, os.PathLike))
    if is_path:
        check_target(os.fspath(file))
    elif not hasattr(file, "write"):
        raise TypeError(f"dump needs a path or a binary file object, got {type(file).__name__}")
    if strip_info_file:
        for path in strip_info_paths(strip_info_file):
            check_target(path)
    path = src
    if options.any:
        path = optimize_file(src, os.path.join(tmp, "optimized.onnx"), options).path
    with open(path, "rb") as f:
        data = f.read()
    if is_path:
        write_bytes_atomic(os.fspath(file), data)
        written = os.fspath(file)
    else:
        file.write(data)
        written = path
    if strip_info_file:
        write_strip_info(written, strip_info_file, append=append_json)


def _write_bundle(
    src: str, file: Any, tmp: str, pack_options: dict[str, Any], strip_info_file: str | None, append_json: bool
) -> None:
    """A bundle of the model and its test cases, packed as ``mgedump`` does, and its strip info."""
    if not isinstance(file, (str, os.PathLike)):
        raise TypeError(f"dump with input_data writes a bundle and needs a path, got {type(file).__name__}")
    late_strip = bool(strip_info_file) and append_json
    options = PackOptions(**pack_options, strip_info=None if late_strip else strip_info_file)
    result = pack(src, os.fspath(file), options)
    if late_strip:  # pack writes strip info afresh; merge it from the bundled model instead
        bundled = os.path.join(tmp, "bundled", MODEL_MEMBER)
        os.makedirs(os.path.dirname(bundled))
        with zipfile.ZipFile(os.fspath(file)) as zf, open(bundled, "wb") as out:
            out.write(zf.read(MODEL_MEMBER))
        write_strip_info(bundled, strip_info_file, append=True, model_sha256=result.manifest.model.sha256)


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
    keep_var_name: int,
    keep_opr_name: bool,
    keep_param_name: bool,
) -> Any:
    """The whole recorded graph as ONNX, with interface names and constants baked in."""
    import onnx

    need = [v for v in program.output_vids if v is not None]
    if len(need) != len(outputs):
        raise ValueError(f"{program.label} returns tensors computed inside exclude_from_trace; they cannot be dumped")
    ops, leaves = program.slice(need, frozenset())
    fed = [vid for _, vid in program.inputs]
    consts = sorted(v for v in leaves if program.values[v].kind in ("const", "ext"))
    names: dict[int, str] = dict(zip(fed, inputs, strict=True))
    taken = set(inputs) | set(outputs)
    for vid, name in zip(need, outputs, strict=True):
        if program.values[vid].kind == "op" and vid not in names:
            names[vid] = name

    def unique(hint: str) -> str:
        name, n = hint, 0
        while name in taken:
            n += 1
            name = f"{hint}_{n}"
        taken.add(name)
        return name

    for i, vid in enumerate(consts):
        value = program.values[vid]
        if value.kind == "ext":
            names[vid] = unique(value.name if keep_param_name and value.name else f"param_{i}")
        else:
            names[vid] = unique(f"const_{i}")
    for k in ops:
        vid = program.ops[k].output
        if vid not in names:
            names[vid] = unique(f"{program.ops[k].name}_{k}" if keep_var_name >= 2 else f"t{k}")
    model = build_model(
        program,
        ops,
        fed,
        consts,
        list(zip(need, outputs, strict=True)),
        names,
        graph_name=program.label,
        labels=node_labels(program, ops) if keep_opr_name else None,
        descriptive=keep_var_name >= 2,
    )
    onnx.checker.check_model(model)
    return model


def _case_spec(case: Any, inputs: list[str], tmp: str, index: int) -> str | CaseSpec:
    """A ``-d`` spec for one test case; arrays are saved as .npy files in tmp and named relative to it."""
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
    items = []
    for j, (name, data) in enumerate(arrays.items()):
        if ";" in name:
            raise ValueError(
                f"input name {name!r} contains ';', which the -d spec grammar reserves; rename it with arg_names"
            )
        array = data.numpy() if isinstance(data, TensorBase) else np.asarray(data)
        filename = f"case{index}_input{j}.npy"
        np.save(os.path.join(tmp, filename), array, allow_pickle=False)
        items.append(f"{name}:{filename}")
    # relative to tmp only, so the bundle records no host path and the same arrays give the same bytes
    return CaseSpec(";".join(items), f"input_data[{index}]", base_dir=tmp, cwd_first=False)
