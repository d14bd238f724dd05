"""Optimise a model for inference (DESIGN section 5): the ``--optimize-for-inference`` and ``--enable-*`` flags.

Each flag maps onto a well-kept implementation or a small pass of our own:

- ``--optimize-for-inference``: onnxruntime's own offline optimiser at its
  BASIC level (constant folding; Identity, Dropout and other redundant node
  removal; BatchNorm and Add/Mul folded into Conv; MatMul+Add into Gemm). Its
  result is standard ONNX at the model's own opsets; we strip the opset imports
  it adds, give IR v3 models back their weights-as-inputs, and run
  ``onnx.checker`` on the result.
- ``--enable-fuse-conv-bias-nonlinearity``: onnxruntime's EXTENDED level
  (``com.microsoft.FusedConv``): the bundle requires onnxruntime.
- ``--enable-nchw88``: onnxruntime's ALL level, its blocked NCHWc layout for x86
  AVX2 (``com.microsoft.nchwc``): requires onnxruntime's CPU provider on an AVX2 CPU.
- ``--enable-ioc16``: onnxruntime's float16 converter
  (``onnxruntime.transformers.float16``), with every op that has no float16 CPU
  kernel in onnxruntime (and the converter's own unsafe list: Resize, TopK,
  Range, CumSum, NMS, ...) kept float32 behind Casts; weights stored as float16.
- ``--enable-io16xc32``: our own pass: every float tensor between operators and
  at the model's inputs and outputs is float16; each operator casts its inputs
  to float32, computes in float32 and casts its outputs back.
- ``--discard-var-name``: our own pass: internal tensors and initializers are
  renamed, node names and doc strings dropped; graph inputs and outputs keep
  their names.
- MegEngine's layouts and fusions for its own ARM/OpenCL/CUDA kernels have no
  onnxruntime equivalent and are refused with an error naming their target.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import ModelError, SpecError
from .log import warn_once

# flags that MegEngine implements for its own kernels, and what they were for
REFUSED_FLAGS = {
    "enable_hwcd4": "MegEngine's OpenCL kernels on mobile GPUs (image2d layout)",
    "enable_nchw4": "MegEngine's CUDA int8 kernels (NCHW4 layout)",
    "enable_nchw44": "MegEngine's ARM kernels (NCHW44 layout)",
    "enable_nchw44_dot": "MegEngine's ARMv8.2 dot-product int8 kernels (NCHW44-dot layout)",
    "enable_nchw32": "MegEngine's CUDA tensor-core int8 kernels (NCHW32 layout)",
    "enable_chwn4": "MegEngine's CUDA int8 kernels (CHWN4 layout)",
    "enable_fuse_conv_bias_with_z": "MegEngine's ConvBias-with-residual (z) kernels on CUDA",
}
FLAG_ALIASES = {"enalbe_hwcd4": "enable_hwcd4"}  # the reference's own misspelling

REQ_ONNXRUNTIME = "onnxruntime"  # com.microsoft ops: any onnxruntime, no other runtime
REQ_ORT_CPU = "onnxruntime-cpu"  # ops only onnxruntime's CPU execution provider has
REQ_AVX2 = "x86-avx2"  # an x86 CPU with AVX2

# ops that must stay float32 whatever the kernels say (their inputs are indices, scales or sizes)
FLOAT32_ONLY_OPS = ("Resize", "Upsample", "TopK", "NonMaxSuppression", "Range", "CumSum", "RoiAlign", "RandomUniformLike")


@dataclass(frozen=True)
class OptimizeOptions:
    """Which rewrites to apply. All default to off.

    Attributes:
        optimize_for_inference: portable rewrites; required by every ``enable_*`` flag.
        enable_io16xc32: float16 tensors between operators, float32 arithmetic.
        enable_ioc16: float16 storage and arithmetic where onnxruntime has kernels.
        enable_fuse_conv_bias_nonlinearity: onnxruntime's fused Conv (onnxruntime only).
        enable_nchw88: onnxruntime's NCHWc layout (onnxruntime's CPU provider, x86 AVX2).
        discard_var_name: rename internal tensors, drop node names and doc strings.
    """

    optimize_for_inference: bool = False
    enable_io16xc32: bool = False
    enable_ioc16: bool = False
    enable_fuse_conv_bias_nonlinearity: bool = False
    enable_nchw88: bool = False
    discard_var_name: bool = False

    @classmethod
    def from_flags(cls, optimize_for_inference: bool = False, discard_var_name: bool = False, **enable_flags: bool) -> "OptimizeOptions":
        """Build options from flag names (``enable_io16xc32=True``, ...), as the CLI and ``trace.dump`` give them.

        Raises:
            SpecError: an unknown flag, a flag for MegEngine's own kernels, an
                ``enable_*`` flag without ``optimize_for_inference``, or
                ``enable_io16xc32`` with ``enable_ioc16``.
        """
        known = {f.name for f in fields(cls)}
        chosen: dict[str, bool] = {}
        for name, value in enable_flags.items():
            name = FLAG_ALIASES.get(name, name)
            if not value:
                continue
            if name in REFUSED_FLAGS:
                raise SpecError(
                    f"--{name.replace('_', '-')} is a layout/fusion for {REFUSED_FLAGS[name]}; "
                    "ONNX and onnxruntime have no equivalent, so mgedump refuses it rather than do nothing"
                )
            if name not in known or not name.startswith("enable_"):
                raise SpecError(f"unknown optimisation flag {name!r}")
            chosen[name] = True
        if chosen and not optimize_for_inference:
            flag = "--" + sorted(chosen)[0].replace("_", "-")
            raise SpecError(f"{flag} needs --optimize-for-inference", hint="add --optimize-for-inference")
        if chosen.get("enable_io16xc32") and chosen.get("enable_ioc16"):
            raise SpecError("--enable-io16xc32 and --enable-ioc16 exclude each other; pick one")
        return cls(optimize_for_inference=optimize_for_inference, discard_var_name=discard_var_name, **chosen)

    @property
    def any(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def names(self) -> list[str]:
        """The flags that are on, as manifest entries (``optimize-for-inference``, ``io16xc32``, ...)."""
        out = []
        for f in fields(self):
            if getattr(self, f.name):
                out.append(f.name.removeprefix("enable_").replace("_", "-"))
        return out

    def requirements(self) -> list[str]:
        """What the optimised model needs at run time beyond a standard ONNX runtime."""
        reqs = []
        if self.enable_fuse_conv_bias_nonlinearity or self.enable_nchw88:
            reqs.append(REQ_ONNXRUNTIME)
        if self.enable_nchw88:
            reqs += [REQ_ORT_CPU, REQ_AVX2]
        return reqs


@dataclass
class OptimizeResult:
    """The optimised model file and what it needs."""

    path: str
    optimizations: list[str]
    requirements: list[str]
    notes: list[str] = field(default_factory=list)


def cpu_has_avx2() -> bool:
    """Whether this CPU has AVX2 (numpy's own CPU feature detection, on any OS)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__  # numpy 2
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core._multiarray_umath import __cpu_features__  # type: ignore[no-redef]
    return bool(__cpu_features__.get("AVX2"))


def check_requirements(requirements: list[str], provider: str | None = None) -> None:
    """Refuse to run a model whose requirements this machine or provider does not meet.

    Raises:
        SpecError: with what the model needs and what is missing.
    """
    unknown = [r for r in requirements if r not in (REQ_ONNXRUNTIME, REQ_ORT_CPU, REQ_AVX2)]
    if unknown:
        raise SpecError(f"the bundle's model needs {', '.join(unknown)}, which this mgedump does not know", hint="upgrade mgedump")
    if REQ_AVX2 in requirements and not cpu_has_avx2():
        raise SpecError(
            "the bundle's model uses onnxruntime's NCHWc layout for x86 CPUs with AVX2 (--enable-nchw88), "
            "and this CPU has no AVX2", hint="pack it again without --enable-nchw88 for this machine",
        )
    if REQ_ORT_CPU in requirements and provider not in (None, "CPUExecutionProvider"):
        raise SpecError(f"the bundle's model uses onnxruntime CPU-only ops (NCHWc); it cannot run on {provider}")


# ---------------------------------------------------------------- the pipeline


def optimize_file(src: str, dst: str, options: OptimizeOptions) -> OptimizeResult:
    """Write src, optimised as options say, to dst (with dst's external data beside it if the model needs it).

    Raises:
        SpecError: nchw88 on a CPU without AVX2.
        ModelError: the model cannot be optimised or the result fails ``onnx.checker``.
    """
    import onnx

    if options.enable_nchw88 and not cpu_has_avx2():
        raise SpecError("--enable-nchw88 makes onnxruntime's NCHWc layout for x86 AVX2, and this CPU has no AVX2")
    with tempfile.TemporaryDirectory(prefix="mgedump-opt-") as tmp:
        notes: list[str] = []
        external = _uses_external(src)
        # 1. portable rewrites (standard ONNX); 2. float16; 3. onnxruntime-only fusions and layouts
        if options.optimize_for_inference:
            model = _ort_offline(src, os.path.join(tmp, "basic.onnx"), "basic", external)
            if _batchnorm_to_affine(model):  # BatchNorms that follow no Conv: Mul + Add, then fold again
                staged = os.path.join(tmp, "affine.onnx")
                _save(model, staged, external)
                model = _ort_offline(staged, os.path.join(tmp, "basic2.onnx"), "basic", external)
        else:
            model = onnx.load(src)
        if options.enable_ioc16:
            model = _ioc16(model, notes)
        elif options.enable_io16xc32:
            model = _io16xc32(model, notes)
        level = level_of(options)
        if level != "basic":
            staged = os.path.join(tmp, "staged.onnx")
            _save(model, staged, external)
            model = _ort_offline(staged, os.path.join(tmp, f"{level}.onnx"), level, external)
        if options.discard_var_name:
            discard_names(model)
        _strip_opsets(model)
        if not options.requirements():
            try:
                onnx.checker.check_model(model)
            except onnx.checker.ValidationError as exc:
                raise ModelError(f"the optimised model fails onnx.checker: {' '.join(str(exc).split())[:300]}") from None
        _save(model, dst, external)
    return OptimizeResult(dst, options.names(), options.requirements(), notes)


def level_of(options: OptimizeOptions) -> str:
    return "all" if options.enable_nchw88 else "extended" if options.enable_fuse_conv_bias_nonlinearity else "basic"


def _uses_external(path: str) -> bool:
    from .modelfile import uses_external_data

    return uses_external_data(path) or os.path.getsize(path) > (1 << 31) - (64 << 20)


def _save(model: Any, path: str, external: bool) -> None:
    import onnx

    if external:
        from .modelfile import DATA_MEMBER

        location = os.path.basename(path) + ".data" if not path.endswith("model.onnx") else DATA_MEMBER
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location=location, size_threshold=1024)
    else:
        onnx.save_model(model, path)


def _ort_offline(src: str, out: str, level: str, external: bool) -> Any:
    """Run onnxruntime's offline optimiser at a level; return the saved model, opsets restored."""
    import onnx

    from .runtime import open_session, session_options

    opts = session_options(graph_opt=level)
    opts.optimized_model_filepath = out
    if external:
        opts.add_session_config_entry("session.optimized_model_external_initializers_file_name", os.path.basename(out) + ".data")
        opts.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    open_session(src, options=opts)
    model = onnx.load(out)
    _restore_ir(model, onnx.load(src, load_external_data=False))
    return model


def _batchnorm_to_affine(model: Any) -> int:
    """Rewrite inference BatchNormalization nodes whose parameters are constants as Mul + Add.

    onnxruntime folds a BatchNorm into the Conv before it; one that follows
    something else (a Concat, an Add) stays. As ``x * s + b`` with
    ``s = scale / sqrt(var + eps)`` and ``b = B - mean * s`` it is standard ONNX
    that any runtime computes, and that later Conv folding can absorb.

    Returns:
        How many nodes were rewritten.
    """
    import numpy as np
    from onnx import helper, numpy_helper

    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    count = 0
    nodes = []
    for node in graph.node:
        params = node.input[1:5]
        if node.op_type != "BatchNormalization" or len(node.output) != 1 or len(params) != 4 or not all(p in weights for p in params):
            nodes.append(node)
            continue
        scale, bias, mean, var = (numpy_helper.to_array(weights[p]).astype(np.float64) for p in params)
        eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
        mul = scale / np.sqrt(var + eps)
        add = bias - mean * mul
        dtype = numpy_helper.to_array(weights[params[0]]).dtype
        rank = _rank_of(model, node.input[0])
        shape = (-1,) + (1,) * max(rank - 2, 0)
        base = node.output[0]
        mul_name, add_name, mid = f"{base}__bn_scale", f"{base}__bn_bias", f"{base}__bn_mul"
        graph.initializer.extend([numpy_helper.from_array(mul.astype(dtype).reshape(shape), mul_name),
                                  numpy_helper.from_array(add.astype(dtype).reshape(shape), add_name)])
        nodes.append(helper.make_node("Mul", [node.input[0], mul_name], [mid], name=f"{node.name}__mul" if node.name else ""))
        nodes.append(helper.make_node("Add", [mid, add_name], [base], name=f"{node.name}__add" if node.name else ""))
        count += 1
    if count:
        del graph.node[:]
        graph.node.extend(nodes)
    return count


def _rank_of(model: Any, name: str) -> int:
    """A tensor's rank from the model's value infos (shape inference); 4 when unknown."""
    import onnx

    for value in list(model.graph.input) + list(model.graph.value_info):
        if value.name == name and value.type.tensor_type.HasField("shape"):
            return len(value.type.tensor_type.shape.dim)
    inferred = onnx.shape_inference.infer_shapes(model)
    for value in inferred.graph.value_info:
        if value.name == name and value.type.tensor_type.HasField("shape"):
            return len(value.type.tensor_type.shape.dim)
    return 4


def _restore_ir(model: Any, source: Any) -> None:
    """Give an IR v3 model back its weights-as-inputs after onnxruntime saved it.

    onnxruntime drops initializers from graph.input (IR v3 requires them there,
    so onnx.checker fails) and keeps inputs for the initializers it folded away
    (so the model would ask for them): list exactly the real inputs, then every
    initializer.
    """
    model.ir_version = source.ir_version
    if source.ir_version >= 4:
        return
    from onnx import helper

    source_inits = {init.name for init in source.graph.initializer}
    real = [value for value in model.graph.input if value.name not in source_inits]
    current = {value.name: value for value in model.graph.input}
    weights = [current.get(init.name) or helper.make_tensor_value_info(init.name, init.data_type, list(init.dims))
               for init in model.graph.initializer]
    del model.graph.input[:]
    model.graph.input.extend(real + weights)


def _used_domains(graph: Any, out: set[str]) -> None:
    for node in graph.node:
        out.add(node.domain or "")
        for attr in node.attribute:
            if attr.HasField("g"):
                _used_domains(attr.g, out)
            for sub in attr.graphs:
                _used_domains(sub, out)


def _strip_opsets(model: Any) -> None:
    """Drop the opset imports no node uses (onnxruntime adds a dozen); keep the default domain."""
    used: set[str] = {""}
    _used_domains(model.graph, used)
    for function in model.functions:
        used.add(function.domain)
        for node in function.node:
            used.add(node.domain or "")
    keep = [op for op in model.opset_import if (op.domain or "") in used]
    del model.opset_import[:]
    model.opset_import.extend(keep)


# ---------------------------------------------------------------- float16


def _cpu_float16_ops() -> set[str]:
    """Ops of the default domain that have a float16 kernel in onnxruntime's CPU provider."""
    from onnxruntime.capi import _pybind_state as C

    ops = set()
    for kernel in C.get_all_opkernel_def():
        if kernel.provider == "CPUExecutionProvider" and kernel.domain in ("", "ai.onnx"):
            if any("tensor(float16)" in types for types in kernel.type_constraints.values()):
                ops.add(kernel.op_name)
    return ops


def _all_op_types(graph: Any, out: set[str]) -> set[str]:
    for node in graph.node:
        out.add(node.op_type)
        for attr in node.attribute:
            if attr.HasField("g"):
                _all_op_types(attr.g, out)
            for sub in attr.graphs:
                _all_op_types(sub, out)
    return out


def _warn_clamped(model: Any) -> None:
    """float16 converters clamp out-of-range weights silently: say how many and the worst."""
    import numpy as np
    from onnx import numpy_helper

    count, worst = 0, 0.0
    for init in model.graph.initializer:
        if init.data_type != 1:  # FLOAT
            continue
        values = numpy_helper.to_array(init)
        big = np.abs(values[np.isfinite(values)]) > 65504
        if big.any():
            count += int(big.sum())
            worst = max(worst, float(np.abs(values[np.isfinite(values)]).max()))
    if count:
        warn_once(f"float16 conversion clamps {count} weight value(s) beyond float16's range (largest magnitude {worst:g}) to 65504")


def _is_float16_model(model: Any) -> bool:
    from onnx import TensorProto

    io = list(model.graph.input) + list(model.graph.output)
    floats = [v for v in io if v.type.tensor_type.elem_type in (TensorProto.FLOAT, TensorProto.FLOAT16)]
    return bool(floats) and all(v.type.tensor_type.elem_type == TensorProto.FLOAT16 for v in floats)


def _ioc16(model: Any, notes: list[str]) -> Any:
    """float16 storage and arithmetic; ops without a float16 CPU kernel stay float32 behind Casts."""
    if _is_float16_model(model):
        notes.append("the model is float16 already")
        return model
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    _warn_clamped(model)
    _name_nodes(model.graph)  # the converter names its Casts after nodes: unnamed nodes would collide
    supported = _cpu_float16_ops()
    present = _all_op_types(model.graph, set())
    block = sorted(set(DEFAULT_OP_BLOCK_LIST) | set(FLOAT32_ONLY_OPS) | {op for op in present if op not in supported})
    converted = convert_float_to_float16(model, keep_io_types=False, op_block_list=block, force_fp16_initializers=True)
    _check_topology(converted)
    return converted


def _name_nodes(graph: Any) -> None:
    """Give every node a unique name (keeping unique ones as they are)."""
    seen: set[str] = set()
    for index, node in enumerate(graph.node):
        if not node.name or node.name in seen:
            node.name = f"{node.op_type}_{index}"
            while node.name in seen:
                node.name += "_"
        seen.add(node.name)


def _io16xc32(model: Any, notes: list[str]) -> Any:
    """float16 tensors between operators and at the inputs and outputs; float32 arithmetic inside each operator."""
    import onnx
    from onnx import TensorProto, helper

    if _is_float16_model(model):
        notes.append("the model is float16 already")
        return model
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = model.graph
    types = {v.name: v.type.tensor_type.elem_type for v in list(inferred.graph.value_info) + list(graph.input) + list(graph.output)}
    initializers = {i.name for i in graph.initializer}
    is_float = lambda name: types.get(name) == TensorProto.FLOAT and name not in initializers  # noqa: E731
    used = {n for node in graph.node for n in list(node.input) + list(node.output)} | {v.name for v in graph.input}
    counter = [0]

    def fresh(base: str) -> str:
        while True:
            counter[0] += 1
            name = f"{base}__io16_{counter[0]}"
            if name not in used:
                used.add(name)
                return name

    nodes = []
    as32: dict[str, str] = {}
    for value in graph.input:
        if is_float(value.name):
            value.type.tensor_type.elem_type = TensorProto.FLOAT16
            as32[value.name] = fresh(value.name)
            nodes.append(helper.make_node("Cast", [value.name], [as32[value.name]], name=fresh("cast32"), to=TensorProto.FLOAT))
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in as32:
                node.input[i] = as32[name]
        outs = list(node.output)
        nodes.append(node)
        for i, name in enumerate(outs):
            if not is_float(name):
                continue
            wide = fresh(name)
            node.output[i] = wide
            nodes.append(helper.make_node("Cast", [wide], [name], name=fresh("cast16"), to=TensorProto.FLOAT16))
            as32[name] = fresh(name)
            nodes.append(helper.make_node("Cast", [name], [as32[name]], name=fresh("cast32"), to=TensorProto.FLOAT))
    # drop the float32 Casts nobody reads (after the last use of a tensor, or of a graph output)
    outputs = {v.name for v in graph.output}
    consumed = {name for node in nodes for name in node.input} | outputs
    del graph.node[:]
    graph.node.extend(n for n in nodes if not (n.op_type == "Cast" and "__io16_" in n.output[0] and n.output[0] not in consumed))
    for value in graph.output:
        if types.get(value.name) == TensorProto.FLOAT:
            value.type.tensor_type.elem_type = TensorProto.FLOAT16
    del graph.value_info[:]
    _check_topology(model)
    return model


def _check_topology(model: Any) -> None:
    """Sort nodes so each comes after what it reads, and make node names unique (float16 converters break both).

    Raises:
        ModelError: a node reads a tensor nothing produces.
    """
    graph = model.graph
    known = {v.name for v in graph.input} | {i.name for i in graph.initializer} | {""}
    # The converter names the Cast before a float32-only node after its input, so a tensor read by two such
    # nodes gets two identical Casts with one output name: keep the first.
    producers: dict[str, Any] = {}
    unique = []
    for node in graph.node:
        twin = next((producers[o] for o in node.output if o in producers), None)
        if twin is not None:
            if node.op_type == "Cast" and twin.op_type == "Cast" and list(node.input) == list(twin.input) \
                    and list(node.output) == list(twin.output) and node.attribute == twin.attribute:
                continue
            raise ModelError(f"float16 conversion broke the graph: two nodes write {node.output[0]!r}")
        producers.update((o, node) for o in node.output)
        unique.append(node)
    producer_count = {name: 1 for name in producers}
    pending = unique
    ordered = []
    while pending:
        ready = [n for n in pending if all(i in known or i not in producer_count for i in n.input)]
        if not ready:
            raise ModelError(f"float16 conversion broke the graph: node {pending[0].name or pending[0].op_type!r} is in a cycle")
        ready_ids = {id(n) for n in ready}
        pending = [n for n in pending if id(n) not in ready_ids]
        for node in ready:
            known.update(node.output)
        ordered.extend(ready)
    names: set[str] = set()
    for index, node in enumerate(ordered):
        if node.name:
            if node.name in names:
                node.name = f"{node.name}_{index}"
            names.add(node.name)
    copies = [type(n)() for n in ordered]
    for copy, node in zip(copies, ordered):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(copies)


# ---------------------------------------------------------------- names


def discard_names(model: Any) -> None:
    """Rename internal tensors and initializers, drop node names and doc strings; keep graph input/output names."""
    graph = model.graph
    keep = {v.name for v in graph.input} - {i.name for i in graph.initializer} | {v.name for v in graph.output}
    mapping: dict[str, str] = {}
    counter = [0]

    def rename(name: str) -> str:
        if not name or name in keep:
            return name
        if name not in mapping:
            while True:
                new = f"t{counter[0]}"
                counter[0] += 1
                if new not in keep:
                    break
            mapping[name] = new
        return mapping[name]

    model.doc_string = ""
    _rename_graph(graph, rename, top=True)
    del model.metadata_props[:]


def _rename_graph(graph: Any, rename: Any, top: bool) -> None:
    graph.doc_string = ""
    graph.name = "main" if top else "sub"
    for init in graph.initializer:
        init.name = rename(init.name)
        init.doc_string = ""
    for sparse in graph.sparse_initializer:
        sparse.values.name = rename(sparse.values.name)
        sparse.indices.name = rename(sparse.indices.name)
    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        value.name = rename(value.name)
        value.doc_string = ""
    for node in graph.node:
        node.name = ""
        node.doc_string = ""
        for i, name in enumerate(node.input):
            node.input[i] = rename(name)
        for i, name in enumerate(node.output):
            node.output[i] = rename(name)
        for attr in node.attribute:
            attr.doc_string = ""
            if attr.HasField("t"):
                attr.t.name = rename(attr.t.name) if attr.t.name else ""
            if attr.HasField("g"):
                _rename_graph(attr.g, rename, top=False)
            for sub in attr.graphs:
                _rename_graph(sub, rename, top=False)
