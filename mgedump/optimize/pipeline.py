"""The optimisation pipeline: portable rewrites, a precision mode, onnxruntime's fusions and layouts, names.

Each step is a well-kept implementation or a small pass of our own (docs/optimize.md):

1. ``optimize_for_inference``: onnxruntime's offline optimiser at its BASIC level (:mod:`.offline`): standard
   ONNX at the model's own opsets. A mode whose ``portable`` is ``"implied"`` (int8: the quantizer's
   pre-processing) runs it whatever the options say.
2. ``precision``: the mode of that name (:mod:`.precisions`), made and proved on the test data.
3. ``fuse_conv_bias_nonlinearity`` (onnxruntime's EXTENDED level, ``com.microsoft.FusedConv``) and ``nchw88``
   (its ALL level, the NCHWc layout for x86 AVX2): the model then needs onnxruntime.
4. ``discard_var_name``: internal tensors and initializers renamed, node names and doc strings dropped.

The result keeps the model's opsets, passes ``onnx.checker`` (unless it holds onnxruntime's own ops), and lists
what it needs at run time (docs/bundle.md, "Optimisations and requirements").
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base.bounds import Bounds
from ..base.errors import OptimizeError, UsageError
from ..base.naming import option_name
from ..bundle import requirements as target
from ..bundle.requirements import REQ_AVX2, REQ_ONNXRUNTIME, REQ_ORT_CPU
from ..options import OptimizeOptions
from .offline import at_level, load_weights, portable_rewrites, save, uses_external
from .passes import check_model, check_saved, discard_names, strip_opsets, too_big
from .precisions import Job, Precision, check_options


@dataclass
class OptimizeResult:
    """The optimised model file and what it needs.

    Attributes:
        path: the optimised model.
        optimizations: the rewrites applied, as the manifest lists them.
        requirements: what the model needs at run time beyond a standard ONNX runtime.
        notes: remarks for the user.
        mode: the precision mode applied, if one.
        record: the mode's record for the manifest (stored under ``mode.manifest_key``).
        options: the options that made it.
    """

    path: str
    optimizations: list[str]
    requirements: list[str]
    notes: list[str] = field(default_factory=list)
    mode: Precision | None = None
    record: dict[str, Any] | None = None
    options: OptimizeOptions | None = None

    @property
    def records(self) -> dict[str, dict[str, Any]]:
        """The manifest's records of the mode, by key (none without a mode)."""
        return {self.mode.manifest_key: self.record} if self.mode is not None and self.record else {}

    def lines(self) -> list[str]:
        """What the mode says of how it was made (a pack prints it)."""
        return self.mode.lines(self.record) if self.mode is not None and self.record else []


def level_of(options: OptimizeOptions) -> str:
    """onnxruntime's optimisation level the options ask for."""
    return "all" if options.nchw88 else "extended" if options.fuse_conv_bias_nonlinearity else "basic"


def requirements_of(options: OptimizeOptions) -> list[str]:
    """What onnxruntime's fusions and layouts make a model need at run time."""
    reqs = [REQ_ONNXRUNTIME] if level_of(options) != "basic" else []
    return reqs + ([REQ_ORT_CPU, REQ_AVX2] if options.nchw88 else [])


def check_can_make(options: OptimizeOptions, calibrate: bool = False, among_variants: bool = False) -> Precision | None:
    """Check the options before any work; return the chosen precision mode (``among_variants``: it makes one of
    a pack's variants, and a refusal says what works with them).

    Raises:
        UsageError: options that do not go together, or NCHWc on a CPU without AVX2 (it cannot be laid out here).
    """
    mode = check_options(options, calibrate, among_variants)
    if options.nchw88 and not target.cpu_has_avx2():
        raise UsageError(
            f"{option_name('nchw88')} makes onnxruntime's NCHWc layout for x86 AVX2, and this CPU has no AVX2"
        )
    return mode


def optimize_file(
    src: str,
    dst: str,
    options: OptimizeOptions,
    *,
    test_inputs: Sequence[Mapping[str, Any]] = (),
    bounds: Bounds | None = None,
    calibration: Sequence[Mapping[str, Any]] = (),
    calibration_specs: Sequence[str] = (),
) -> OptimizeResult:
    """Write src, optimised as options say, to dst (with dst's external data beside it if the model needs it).

    Args:
        src, dst: the model, and where the optimised one goes.
        options: the rewrites.
        test_inputs: the test cases' inputs: what a precision mode is proved on (a float16 mode without them
            decides from the weights' ranges alone).
        bounds: what the mode's model must meet on the test cases (none: the pack's default).
        calibration: the cases a calibrated mode calibrates on (none: the test cases).
        calibration_specs: where the calibration cases came from, for the manifest.

    Raises:
        UsageError: options that do not go together; a mode proved on data without test data.
        ModelError: the model cannot be optimised or the result fails ``onnx.checker``.
        OptimizeError: no model of the chosen precision meets ``maxerr`` on the test cases.
    """
    import onnx

    mode = check_can_make(options, bool(calibration))
    if mode is not None and mode.needs_data and not test_inputs:
        raise UsageError(f"{option_name('precision', mode.name)} is proved on test data, and none was given")
    portable = options.optimize_for_inference or (mode is not None and mode.portable == "implied")
    with tempfile.TemporaryDirectory(prefix="mgedump-opt-") as tmp:
        external = uses_external(src)
        model = portable_rewrites(src, tmp, external) if portable else onnx.load(src)
        made = None
        if mode is not None:
            job = Job(
                src, model, options, test_inputs, bounds or Bounds(), calibration, calibration_specs, tmp, external
            )  # fmt: skip
            made = mode.make(job)
            _check_record(mode, made)
            model = made.model
        level = level_of(options)
        if level != "basic":
            model = at_level(model, level, tmp, external)
        if options.discard_var_name:
            discard_names(model)
        strip_opsets(model)
        if external:  # the weights the rewrites left in the scratch folder, read in to be saved beside dst
            load_weights(model, tmp)
        external = external or too_big(model)
        if level == "basic" and not external:
            check_model(model, "the optimised model")
        save(model, dst, external)
        if level == "basic" and external:  # by path: a model past protobuf's 2 GiB cannot be serialised to check
            check_saved(dst, "the optimised model")
    requirements = requirements_of(options) + (mode.requirements(made.record) if mode and made else [])
    return OptimizeResult(
        dst,
        _names(options, portable, mode),
        requirements,
        made.notes if made else [],
        mode,
        made.record if made else None,
        options,
    )


def optimization_names(options: OptimizeOptions) -> list[str]:
    """The rewrites the options ask for, as the manifest's ``optimizations`` lists them, in the order they run."""
    mode = check_options(options)
    return _names(options, options.optimize_for_inference or (mode is not None and mode.portable == "implied"), mode)


def _names(options: OptimizeOptions, portable: bool, mode: Precision | None) -> list[str]:
    """The manifest's ``optimizations``: the rewrites applied, in the order they ran."""
    names = ["optimize-for-inference"] if portable else []
    names += [mode.entry] if mode is not None else []
    flags = ("fuse_conv_bias_nonlinearity", "nchw88", "discard_var_name", "keep_io_types")
    return names + [name.replace("_", "-") for name in flags if getattr(options, name)]


def _check_record(mode: Precision, made: Any) -> None:
    """The mode's record, its printed counts and its name agree with the operators of the model made.

    Raises:
        OptimizeError: they do not (the model is not what its record says).
    """
    problem = mode.check(made.model, made.record)
    if problem is not None:
        raise OptimizeError(
            f"{option_name('precision', mode.name)}: the model made is not what its record says: {problem}"
        )
