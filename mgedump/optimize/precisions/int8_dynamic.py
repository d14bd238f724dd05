"""``int8-dynamic``: int8 MatMul weights, activations quantized at run time (``--quantize int8 --quantize-mode
dynamic``): for MatMul-heavy models (transformers) where static ranges do not suit (docs/int8.md)."""

from __future__ import annotations

from .int8_modes import int8_mode

MODE = int8_mode(
    "int8-dynamic",
    "int8 MatMul weights, activations quantized at run time",
    "dynamic",
    frozenset({"fp32_nodes", "int8_weights"}),
    optimization="int8",
)
