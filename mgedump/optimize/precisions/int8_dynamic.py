"""``int8-dynamic``: int8 MatMul weights, activations quantized at run time (``--quantize int8 --quantize-mode
dynamic``): for MatMul-heavy models (transformers) where static ranges do not suit (docs/int8.md)."""

from __future__ import annotations

from . import Precision
from .int8_modes import int8_check, int8_lines, int8_maker, int8_requirements

MODE = Precision(
    name="int8-dynamic",
    about="int8 MatMul weights, activations quantized at run time",
    make=int8_maker("dynamic"),
    manifest_key="int8",
    optimization="int8",
    rank=2,
    reads=frozenset({"fp32_nodes", "int8_weights"}),
    portable="implied",
    needs_data=True,
    requirements=int8_requirements,
    lines=int8_lines,
    check=int8_check,
    record_mode="dynamic",
)
