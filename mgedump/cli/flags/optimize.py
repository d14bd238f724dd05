"""The rewrites ``mgedump`` applies: ``--optimize-for-inference``, the precision modes, onnxruntime's fusions and
layouts, and MegEngine's ``--enable-*`` flags (docs/optimize.md).

MegEngine's ``dump_with_testcase_mge.py`` names its precision modes ``--enable-io16xc32`` and ``--enable-ioc16``
(both need ``--optimize-for-inference``); int8 is ``--quantize int8``. MegEngine's layouts and fusions for its
own ARM, OpenCL and CUDA kernels have no ONNX or onnxruntime equivalent: their flags are accepted and refused,
naming what they were for, rather than silently doing nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from ...base.errors import UsageError
from ...options import CALIBRATE_METHODS, FLOAT16_MARGIN, INT8_WEIGHTS, OptimizeOptions
from . import FLOAT, apply, choice_option, comma_list, given, stating

QUANTIZE_TYPES = ("int8",)  # --quantize
QUANTIZE_MODES = {"static": "int8", "dynamic": "int8-dynamic"}  # --quantize-mode: the precision mode of each
FLOAT16_FLAGS = {"io16xc32": "--enable-io16xc32", "ioc16": "--enable-ioc16"}  # MegEngine's flag of each mode


@dataclass(frozen=True)
class Refused:
    """A MegEngine layout or fusion flag: ONNX has no equivalent, so it is refused when given."""

    name: str
    target: str
    aliases: tuple[str, ...] = ()

    @property
    def flags(self) -> tuple[str, ...]:
        return tuple("--" + n.replace("_", "-") for n in (self.name, *self.aliases))

    def help(self) -> str:
        kind = "fusion" if "fuse" in self.name else "layout"
        where = "OpenCL" if "OpenCL" in self.target else "ARM" if "ARM" in self.target else "CUDA"
        return f"Refused: a MegEngine {where} {kind} (no ONNX equivalent)."


REFUSED = (
    Refused("enable_hwcd4", "MegEngine's OpenCL kernels on mobile GPUs (image2d layout)", ("enalbe_hwcd4",)),
    Refused("enable_nchw4", "MegEngine's CUDA int8 kernels (NCHW4 layout)"),
    Refused("enable_nchw44", "MegEngine's ARM kernels (NCHW44 layout)"),
    Refused("enable_nchw44_dot", "MegEngine's ARMv8.2 dot-product int8 kernels (NCHW44-dot layout)"),
    Refused("enable_nchw32", "MegEngine's CUDA tensor-core int8 kernels (NCHW32 layout)"),
    Refused("enable_chwn4", "MegEngine's CUDA int8 kernels (CHWN4 layout)"),
    Refused("enable_fuse_conv_bias_with_z", "MegEngine's ConvBias-with-residual (z) kernels on CUDA"),
)

NAMES = (
    "optimize_for_inference",
    "fuse_conv_bias_nonlinearity",
    "nchw88",
    "discard_var_name",
    "fp32_nodes",
    "keep_io_types",
    "float16_margin",
    "calibrate_method",
    "int8_weights",
)


def _flag(*names: str, **kwargs: Any) -> Any:
    return click.option(*names, is_flag=True, default=None, **kwargs)


optimize_options = apply(
    [
        _flag(
            "--optimize-for-inference",
            "optimize_for_inference",
            help="Portable rewrites: constant folding, Identity/Dropout removal, BatchNorm and bias folded into "
            "Conv/Gemm.",
        ),
        _flag(
            "--enable-io16xc32",
            "enable_io16xc32",
            help="float16 tensors between operators and at inputs/outputs; float32 arithmetic.",
        ),
        _flag(
            "--enable-ioc16",
            "enable_ioc16",
            help="float16 storage and arithmetic (ops without float16 kernels stay float32).",
        ),
        _flag(
            "--enable-fuse-conv-bias-nonlinearity",
            "fuse_conv_bias_nonlinearity",
            help="Fuse Conv+bias+activation (onnxruntime's FusedConv; onnxruntime only).",
        ),
        _flag(
            "--enable-nchw88",
            "nchw88",
            help="onnxruntime's NCHWc layout for x86 AVX2 (onnxruntime's CPU provider only).",
        ),
        *(_flag(*refused.flags, refused.name, help=refused.help()) for refused in REFUSED),
        _flag(
            "--discard-var-name",
            "discard_var_name",
            help="Rename internal tensors and weights, drop node names and doc strings.",
        ),
        click.option(
            "--fp32-nodes",
            "fp32_nodes",
            metavar="PATTERN[,PATTERN]",
            default=None,
            help="With --enable-ioc16/--enable-io16xc32 or --quantize int8: keep these nodes float (globs of node "
            "names or op types, subgraphs included, e.g. 'Softmax,*/ln/*'); a pattern that matches no node is "
            "refused.",
        ),
        _flag(
            "--keep-io-types",
            "keep_io_types",
            help="With --enable-ioc16/--enable-io16xc32: the model's float inputs and outputs stay float32 (no "
            "float16 rounding of the outputs; the bundle's test data stays float32).",
        ),
        click.option(
            "--float16-margin",
            "float16_margin",
            type=FLOAT,
            metavar="FRACTION",
            default=None,
            help=f"With --enable-ioc16/--enable-io16xc32: the search aims this fraction below --maxerr (default "
            f"{FLOAT16_MARGIN:g}), so that data it has not seen has room; where nothing reaches the aim it takes "
            "--maxerr itself and says so.",
        ),
        click.option(
            "--quantize",
            "quantize",
            metavar="int8",
            type=click.Choice(QUANTIZE_TYPES),
            default=None,
            help="Quantize with onnxruntime's quantizer and prove it on the test data: int8 (static QDQ calibrated "
            "on the test cases or --calibrate data; nodes whose error breaks --maxerr stay float; a model int8 "
            "destroys is refused). Runs the portable rewrites first.",
        ),
        click.option(
            "--quantize-mode",
            "quantize_mode",
            type=click.Choice(tuple(QUANTIZE_MODES)),
            default=None,
            help="With --quantize: static (int8 weights, uint8 activations with ranges calibrated ahead) or "
            "dynamic (int8 MatMul weights, activations quantized at run time: for transformers).  [default: "
            "static]",
        ),
        choice_option(
            "--calibrate-method",
            "calibrate_method",
            CALIBRATE_METHODS,
            stating(
                "With --quantize int8 (static): how activation ranges are calibrated.",
                OptimizeOptions,
                "calibrate_method",
            ),
        ),  # fmt: skip
        choice_option(
            "--int8-weights",
            "int8_weights",
            INT8_WEIGHTS,
            stating(
                "With --quantize: one scale per output channel (from opset 13) or per weight tensor.",
                OptimizeOptions,
                "int8_weights",
            ),
        ),  # fmt: skip
    ]
)


def parse_patterns(value: str) -> tuple[str, ...]:
    """``--fp32-nodes 'Softmax,*/ln/*'`` as glob patterns.

    Raises:
        UsageError: no pattern in it.
    """
    return comma_list("--fp32-nodes", value, "'Softmax,*/ln/*'")


def optimize_from(values: dict[str, Any]) -> OptimizeOptions:
    """The rewrites the flags ask for.

    Raises:
        UsageError: a MegEngine flag with no equivalent here, or precision flags that exclude each other.
    """
    for refused in REFUSED:
        if values.pop(refused.name, None):
            raise UsageError(
                f"{refused.flags[0]} is a layout/fusion for {refused.target}; "
                "ONNX and onnxruntime have no equivalent, so mgedump refuses it rather than do nothing"
            )
    chosen = given(values, NAMES)
    if "fp32_nodes" in chosen:
        chosen["fp32_nodes"] = parse_patterns(chosen["fp32_nodes"])
    chosen["precision"] = precision_from(values)
    return OptimizeOptions(**chosen)


def precision_from(values: dict[str, Any]) -> str | None:
    """The precision mode the flags name (MegEngine's ``--enable-*`` or ``--quantize``), if one."""
    float16 = [mode for mode in FLOAT16_FLAGS if values.pop(f"enable_{mode}", None)]
    quantize, quantize_mode = values.pop("quantize", None), values.pop("quantize_mode", None)
    if len(float16) > 1:
        raise UsageError("--enable-io16xc32 and --enable-ioc16 exclude each other; pick one")
    if quantize and float16:
        raise UsageError(f"--quantize {quantize} and {FLOAT16_FLAGS[float16[0]]} exclude each other; pick one")
    if quantize_mode and not quantize:
        raise UsageError("--quantize-mode applies to --quantize int8, which is not given")
    if quantize:
        return QUANTIZE_MODES[quantize_mode or "static"]
    return float16[0] if float16 else None
