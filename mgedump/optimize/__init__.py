"""Optimise a model for inference (docs/bundle.md#optimisations-and-requirements): the ``--optimize-for-inference`` and ``--enable-*`` flags.

:func:`optimize_file` is the pipeline; :mod:`.float16` holds the float16 modes,
:mod:`.passes` our own graph rewrites, :mod:`.requirements` what an optimised
model needs at run time. The flags themselves are
:class:`~mgedump.options.OptimizeOptions` (the table is
:data:`~mgedump.options.ENABLE_FLAGS`).

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
- ``--enable-ioc16``: our own float16 pass (:mod:`.float16`): an op computes in
  float16 where onnxruntime's CPU provider has a float16 kernel for it, every
  other op (and those that must stay exact: Resize, TopK, Range, CumSum, NMS,
  ...) computes in float32 behind Casts; weights are stored as float16 unless
  float16 cannot hold them. The nodes kept float32 are decided from the test
  data (:mod:`.autocast`).
- ``--enable-io16xc32``: our own pass (:mod:`.float16`): every float tensor between operators and
  at the model's inputs and outputs is float16; each operator casts its inputs
  to float32, computes in float32 and casts its outputs back.
- ``--quantize int8``: onnxruntime's quantizer (:mod:`.quantize`): static QDQ
  int8 calibrated on the test cases (or ``--calibrate`` data), or dynamic int8
  MatMul weights; the portable rewrites run first whatever the flags say (they
  are the quantizer's pre-processing). The nodes kept float are decided from
  the test data, and a model int8 destroys is refused.
- ``--discard-var-name``: our own pass: internal tensors and initializers are
  renamed, node names and doc strings dropped; graph inputs and outputs keep
  their names.
- MegEngine's layouts and fusions for its own ARM/OpenCL/CUDA kernels have no
  onnxruntime equivalent and are refused with an error naming their target.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base.errors import ModelError, UsageError
from ..bundle.requirements import check_can_make, int8_requirements, requirements_of
from ..model.modelfile import uses_external_data
from ..model.runtime import open_session, session_options
from ..options import DEFAULT_MAXERR, OptimizeOptions
from .autocast import choose_precision
from .float16 import check_not_quantized, convert, is_float16_model
from .nodes import matching_nodes, name_nodes
from .passes import (
    batchnorm_to_affine,
    dequantized_weights,
    discard_names,
    hide_weights,
    restore_ir,
    restore_weights,
    strip_opsets,
)

__all__ = ["OptimizeOptions", "OptimizeResult", "end_to_end_note", "level_of", "optimize_file"]


@dataclass
class OptimizeResult:
    """The optimised model file and what it needs.

    Attributes:
        path: the optimised model.
        optimizations: the rewrites applied, as the manifest lists them.
        requirements: what the model needs at run time beyond a standard ONNX runtime.
        notes: remarks for the user.
        float16: with a float16 mode: the nodes and weights kept float32 and why
            (:meth:`~mgedump.optimize.autocast.Autocast.to_json`).
        int8: with ``--quantize int8``: how it was quantized, the nodes kept float, the calibration data and the
            error statistics per output (:meth:`~mgedump.optimize.quantize.Int8Result.to_json`).
    """

    path: str
    optimizations: list[str]
    requirements: list[str]
    notes: list[str] = field(default_factory=list)
    float16: dict[str, Any] | None = None
    int8: dict[str, Any] | None = None


def optimize_file(
    src: str,
    dst: str,
    options: OptimizeOptions,
    *,
    test_inputs: Sequence[Mapping[str, Any]] | None = None,
    maxerr: float | None = None,
    output_maxerr: Mapping[str, float] | None = None,
    calibration: Sequence[Mapping[str, Any]] = (),
    calibration_specs: Sequence[str] = (),
) -> OptimizeResult:
    """Write src, optimised as options say, to dst (with dst's external data beside it if the model needs it).

    Args:
        src, dst: the model, and where the optimised one goes.
        options: the rewrites.
        test_inputs: the test cases' inputs. With a float16 mode, the nodes
            that must stay float32 are found by running on them
            (:mod:`.autocast`); without, only the weights' ranges decide.
        maxerr: what the float16 or int8 model's outputs must meet on the test cases (none: the pack's default).
        output_maxerr: outputs held to their own bound (``--maxerr NAME:X``): int8 holds each output to its
            bound; the float16 search aims at the tightest of all.
        calibration: with int8: the cases the static ranges are calibrated on (none: the test cases).
        calibration_specs: where the calibration cases came from (``--calibrate`` specs), for the manifest.

    Raises:
        UsageError: nchw88 on a CPU without AVX2.
        ModelError: the model cannot be optimised or the result fails ``onnx.checker``.
        OptimizeError: no float16 or int8 model meets ``maxerr`` on the test cases.
        UsageError: int8 without test data.
    """
    import onnx

    check_can_make(options)
    limit = DEFAULT_MAXERR if maxerr is None else maxerr
    tightest = min([limit, *(output_maxerr or {}).values()])
    quantize = options.quantize
    if quantize and not test_inputs:
        raise UsageError("--quantize int8 is proved on test data, and none was given")
    with tempfile.TemporaryDirectory(prefix="mgedump-opt-") as tmp:
        notes: list[str] = []
        external = _uses_external(src)
        # 1. portable rewrites (standard ONNX); 2. float16 or int8; 3. onnxruntime-only fusions and layouts
        if options.optimize_for_inference or quantize:
            model = _ort_offline(src, os.path.join(tmp, "basic.onnx"), "basic", external)
            if batchnorm_to_affine(model):  # BatchNorms that follow no Conv: Mul + Add, then fold again
                staged = os.path.join(tmp, "affine.onnx")
                _save(model, staged, external)
                model = _ort_offline(staged, os.path.join(tmp, "basic2.onnx"), "basic", external)
        else:
            model = onnx.load(src)
        float16 = None
        if options.float16 is not None:
            check_not_quantized(model, f"--enable-{options.float16}")
            if is_float16_model(model):
                notes.append("the model is float16 already")
                float16 = {"mode": options.float16, "kept_float32": [], "weights_float32": [], "search_rounds": 0}
            elif test_inputs:
                staged = os.path.join(tmp, "float32.onnx")
                _save(model, staged, external)
                found = choose_precision(
                    staged,
                    options.float16,
                    test_inputs,
                    maxerr=tightest,
                    fp32_nodes=options.fp32_nodes,
                    scratch=tmp,
                    keep_io=options.keep_io_types,
                    margin=options.float16_margin,
                )
                model, float16 = found.model, found.to_json()
                notes += found.notes
                notes.append(_cast_note(found.model, options.float16))
                if options.float16 == "io16xc32":
                    notes += _latency_note(staged, found, test_inputs[0], tmp)
            else:
                name_nodes(model)
                kept = matching_nodes(model, options.fp32_nodes)
                conversion = convert(model, options.float16, kept, keep_io=options.keep_io_types)
                float16 = {
                    "mode": options.float16,
                    "kept_float32": [{"node": n, "op_type": "", "why": why} for n, why in kept.items()],
                    "weights_float32": [{"weight": n, "why": why} for n, why in conversion.weights32.items()],
                    "search_rounds": 0,
                }
        int8 = None
        if quantize and test_inputs:
            model, int8 = _quantize(
                src,
                model,
                options,
                test_inputs,
                (limit, output_maxerr or {}),
                calibration,
                calibration_specs,
                tmp,
                external,
            )
            notes += int8.pop("notes")
        level = level_of(options)
        if level != "basic":
            staged = os.path.join(tmp, "staged.onnx")
            _save(model, staged, external)
            model = _ort_offline(staged, os.path.join(tmp, f"{level}.onnx"), level, external)
        if options.discard_var_name:
            discard_names(model)
        strip_opsets(model)
        requirements = requirements_of(options) + (int8_requirements(int8["mode"]) if int8 else [])
        if not requirements_of(options):
            try:
                onnx.checker.check_model(model)
            except onnx.checker.ValidationError as exc:
                raise ModelError(
                    f"the optimised model fails onnx.checker: {' '.join(str(exc).split())[:300]}"
                ) from None
        _save(model, dst, external)
    names = options.names()
    if int8 and "optimize-for-inference" not in names:
        names.insert(0, "optimize-for-inference")  # the quantizer's pre-processing ran
    return OptimizeResult(dst, names, requirements, notes, float16, int8)


def _quantize(
    src: str,
    model: Any,
    options: OptimizeOptions,
    test_inputs: Sequence[Mapping[str, Any]],
    maxerr: tuple[float, Mapping[str, float]],
    calibration: Sequence[Mapping[str, Any]],
    calibration_specs: Sequence[str],
    tmp: str,
    external: bool,
) -> tuple[Any, dict[str, Any]]:
    """int8 on the optimised float model, proved against the outputs of the model as given (src)."""
    import onnx

    from .quantize import quantize_int8

    staged = os.path.join(tmp, "float.onnx")
    _save(model, staged, external)
    given = open_session(src, label="the model as given")
    names = [o.name for o in given.get_outputs()]
    expected = [given.run(names, dict(feeds)) for feeds in test_inputs]
    found = quantize_int8(
        staged,
        os.path.join(tmp, "int8.onnx"),
        test_inputs=test_inputs,
        expected=expected,
        maxerr=maxerr[0],
        output_maxerr=maxerr[1],
        calibration=calibration,
        calibration_specs=calibration_specs,
        mode=options.quantize_mode,
        method=options.calibrate_method,
        per_channel=options.int8_weights == "per-channel",
        fp32_nodes=options.fp32_nodes,
        scratch=tmp,
        external=external,
    )
    record = found.to_json()
    record["notes"] = found.notes
    return onnx.load(found.path), record


def level_of(options: OptimizeOptions) -> str:
    return "all" if options.enable_nchw88 else "extended" if options.enable_fuse_conv_bias_nonlinearity else "basic"


def _uses_external(path: str) -> bool:
    return uses_external_data(path) or os.path.getsize(path) > (1 << 31) - (64 << 20)


def _save(model: Any, path: str, external: bool) -> None:
    import onnx

    if external:
        # "model.onnx" keeps its data in "model.onnx.data", the bundle's data member
        location = os.path.basename(path) + ".data"
        onnx.save_model(
            model,
            path,
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=location,
            size_threshold=1024,
        )
    else:
        onnx.save_model(model, path)


def _ort_offline(src: str, out: str, level: str, external: bool) -> Any:
    """Run onnxruntime's offline optimiser at a level; return the saved model, opsets restored.

    Integer weights that the model dequantizes (int8 -> Cast -> Mul, DequantizeLinear) are hidden from the
    optimiser as graph inputs and put back after: constant folding would store them dequantized, as float32
    weights four times their size.
    """
    import onnx

    original = onnx.load(src, load_external_data=False)
    protected = dequantized_weights(original)
    source = src
    if protected:
        model = onnx.load(src)
        weights = hide_weights(model, protected)
        source = out + ".protected.onnx"
        _save(model, source, external)
    opts = session_options(graph_opt=level)
    opts.optimized_model_filepath = out
    if external:
        opts.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", os.path.basename(out) + ".data"
        )
        opts.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    open_session(source, label=f"the model being optimised ({level} level)", options=opts)
    model = onnx.load(out)
    if protected:
        restore_weights(model, weights)
    restore_ir(model, original)
    return model


def _cast_note(model: Any, mode: str) -> str:
    """How many Casts the float16 model holds, and how many of them only convert a weight (onnxruntime folds those
    when it loads the model: they cost nothing per run)."""
    weights = {init.name for init in model.graph.initializer}
    casts = [node for node in model.graph.node if node.op_type == "Cast"]
    on_weights = sum(1 for node in casts if node.input and node.input[0] in weights)
    return (
        f"{mode}: {len(casts)} Cast(s) in the model, {on_weights} of them on weights (folded when onnxruntime loads "
        f"it), {len(casts) - on_weights} run per inference"
    )


LATENCY_ROUNDS, LATENCY_RUNS = 3, 5


def _latency_note(float32_path: str, found: Any, feeds: Mapping[str, Any], tmp: str) -> list[str]:
    """io16xc32 against the float32 model on this CPU, on the first test case (alternated rounds, medians): onnxruntime's
    CPU kernels compute in float32, so every float16 tensor between them costs Casts, and the model runs slower."""
    import statistics
    import time

    import numpy as np

    path = found.path
    model = found.model
    if not path or not os.path.exists(path):
        path = os.path.join(tmp, "latency16.onnx")
        _save(model, path, False)
    sessions = {}
    for label, file in (("float32", float32_path), ("io16xc32", path)):
        sessions[label] = open_session(file, label=f"the {label} model")
    half = {v.name for v in model.graph.input if v.type.tensor_type.elem_type == 10}
    inputs = {
        "float32": dict(feeds),
        "io16xc32": {k: (v.astype(np.float16) if k in half else v) for k, v in feeds.items()},
    }
    times: dict[str, list[float]] = {"float32": [], "io16xc32": []}
    for _ in range(LATENCY_ROUNDS):
        for label, session in sessions.items():
            session.run(None, inputs[label])
            for _ in range(LATENCY_RUNS):
                start = time.perf_counter()
                session.run(None, inputs[label])
                times[label].append(time.perf_counter() - start)
    ratio = statistics.median(times["io16xc32"]) / max(statistics.median(times["float32"]), 1e-9)
    why = (
        "onnxruntime computes in float32 here and every float16 tensor between its kernels costs Casts; it saves "
        "memory, not time"
        if ratio > 1.05
        else "no slower here, the model being mostly float32 (elsewhere io16xc32 runs slower than float32 on a CPU)"
    )
    return [
        f"io16xc32: {ratio:.2f}x the float32 model's latency on this CPU (test case 0, medians of "
        f"{LATENCY_ROUNDS * LATENCY_RUNS} runs): {why}"
    ]


def end_to_end_note(
    given: Any,
    bundled: Any,
    cases: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
    outputs: Sequence[str],
    certified: float,
) -> str:
    """The error the user sees: the model as given on the inputs as given, against the bundled model on the inputs
    as the bundle stores them (float16 for a float16 model), both read as float32; beside the error the bundle
    certifies (its expected outputs: the model as given on the stored inputs, in the outputs' stored dtype).

    Args:
        given, bundled: onnxruntime sessions.
        cases: per test case, (the inputs as given, the inputs as stored).
        outputs: the bundled model's output names.
        certified: the self-check's worst error.
    """
    import numpy as np

    from ..measure.assertion import measure

    worst, where = 0.0, ""
    for k, (original, stored) in enumerate(cases):
        want = given.run(list(outputs), dict(original))
        have = bundled.run(list(outputs), dict(stored))
        for name, a, b in zip(outputs, want, have, strict=True):
            a, b = np.asarray(a), np.asarray(b)
            if a.dtype.kind != "f" or b.dtype.kind != "f":
                continue
            err = measure(a.astype(np.float32), b.astype(np.float32)).err
            if err > worst or not where:
                worst, where = err, f"output {name!r}, test case {k}"
    return (
        f"end to end: err {worst:.3g} ({where}) against the model as given on the inputs as given; the bundle "
        f"certifies {certified:.3g}: its expected outputs come from the model as given on the inputs as stored "
        "(rounded to float16), stored in the outputs' dtype"
    )
