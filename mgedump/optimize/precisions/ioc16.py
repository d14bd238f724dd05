"""``ioc16``: float16 storage and arithmetic where onnxruntime has float16 kernels (MegEngine's ``enable_ioc16``).

An op computes in float16 where onnxruntime's CPU provider has a float16 kernel for it; every other op (and those
that must stay exact: Resize, TopK, Range, CumSum, NMS, ...) computes in float32 behind Casts; weights are stored
as float16 unless float16 cannot hold them. The nodes kept float32 are decided on the test data (docs/float16.md).
"""

from __future__ import annotations

from .float16_modes import float16_mode

MODE = float16_mode("ioc16", "float16 storage and arithmetic (ops without float16 kernels stay float32)")
