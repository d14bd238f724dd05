"""``ioc16``: float16 storage and arithmetic where onnxruntime has float16 kernels (MegEngine's ``enable_ioc16``).

An op computes in float16 where onnxruntime's CPU provider has a float16 kernel for it; every other op (and those
that must stay exact: Resize, TopK, Range, CumSum, NMS, ...) computes in float32 behind Casts; weights are stored
as float16 unless float16 cannot hold them. The nodes kept float32 are decided on the test data (docs/float16.md).
"""

from __future__ import annotations

from . import Precision
from .float16_modes import READS, float16_check, float16_lines, float16_maker

MODE = Precision(
    name="ioc16",
    about="float16 storage and arithmetic (ops without float16 kernels stay float32)",
    make=float16_maker("ioc16"),
    manifest_key="float16",
    rank=1,
    reads=READS,
    rounds_inputs=True,
    lines=float16_lines,
    check=float16_check,
)
