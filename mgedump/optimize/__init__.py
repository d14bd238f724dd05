"""Optimise a model for inference (DESIGN section 5): the ``--optimize-for-inference`` and ``--enable-*`` flags.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelError
from ..modelfile import uses_external_data
from ..options import OptimizeOptions
from ..runtime import open_session, session_options
from .autocast import choose_precision
from .float16 import convert, is_float16_model, matching_nodes, name_nodes
from .passes import batchnorm_to_affine, discard_names, restore_ir, strip_opsets
from .requirements import check_can_make, requirements_of

__all__ = ["OptimizeOptions", "OptimizeResult", "level_of", "optimize_file"]


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
    """

    path: str
    optimizations: list[str]
    requirements: list[str]
    notes: list[str] = field(default_factory=list)
    float16: dict[str, Any] | None = None


def optimize_file(
    src: str,
    dst: str,
    options: OptimizeOptions,
    *,
    test_inputs: Sequence[Mapping[str, Any]] | None = None,
    maxerr: float | None = None,
) -> OptimizeResult:
    """Write src, optimised as options say, to dst (with dst's external data beside it if the model needs it).

    Args:
        src, dst: the model, and where the optimised one goes.
        options: the rewrites.
        test_inputs: the test cases' inputs. With a float16 mode, the nodes
            that must stay float32 are found by running on them
            (:mod:`.autocast`); without, only the weights' ranges decide.
        maxerr: what the float16 model's outputs must meet on the test cases.

    Raises:
        UsageError: nchw88 on a CPU without AVX2.
        ModelError: the model cannot be optimised or the result fails ``onnx.checker``.
        OptimizeError: no float16 model meets ``maxerr`` on the test cases.
    """
    import onnx

    check_can_make(options)
    with tempfile.TemporaryDirectory(prefix="mgedump-opt-") as tmp:
        notes: list[str] = []
        external = _uses_external(src)
        # 1. portable rewrites (standard ONNX); 2. float16; 3. onnxruntime-only fusions and layouts
        if options.optimize_for_inference:
            model = _ort_offline(src, os.path.join(tmp, "basic.onnx"), "basic", external)
            if batchnorm_to_affine(model):  # BatchNorms that follow no Conv: Mul + Add, then fold again
                staged = os.path.join(tmp, "affine.onnx")
                _save(model, staged, external)
                model = _ort_offline(staged, os.path.join(tmp, "basic2.onnx"), "basic", external)
        else:
            model = onnx.load(src)
        float16 = None
        if options.float16 is not None:
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
                    maxerr=1e-2 if maxerr is None else maxerr,
                    fp32_nodes=options.fp32_nodes,
                    scratch=tmp,
                )
                model, float16 = found.model, found.to_json()
            else:
                name_nodes(model)
                kept = matching_nodes(model, options.fp32_nodes)
                conversion = convert(model, options.float16, kept)
                float16 = {
                    "mode": options.float16,
                    "kept_float32": [{"node": n, "op_type": "", "why": why} for n, why in kept.items()],
                    "weights_float32": [{"weight": n, "why": why} for n, why in conversion.weights32.items()],
                    "search_rounds": 0,
                }
        level = level_of(options)
        if level != "basic":
            staged = os.path.join(tmp, "staged.onnx")
            _save(model, staged, external)
            model = _ort_offline(staged, os.path.join(tmp, f"{level}.onnx"), level, external)
        if options.discard_var_name:
            discard_names(model)
        strip_opsets(model)
        if not requirements_of(options):
            try:
                onnx.checker.check_model(model)
            except onnx.checker.ValidationError as exc:
                raise ModelError(
                    f"the optimised model fails onnx.checker: {' '.join(str(exc).split())[:300]}"
                ) from None
        _save(model, dst, external)
    return OptimizeResult(dst, options.names(), requirements_of(options), notes, float16)


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
    """Run onnxruntime's offline optimiser at a level; return the saved model, opsets restored."""
    import onnx

    opts = session_options(graph_opt=level)
    opts.optimized_model_filepath = out
    if external:
        opts.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", os.path.basename(out) + ".data"
        )
        opts.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    open_session(src, label=f"the model being optimised ({level} level)", options=opts)
    model = onnx.load(out)
    restore_ir(model, onnx.load(src, load_external_data=False))
    return model
