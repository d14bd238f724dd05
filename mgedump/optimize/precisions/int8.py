"""``int8``: static int8 in QDQ form, calibrated ahead (``--quantize int8``).

int8 weights (per channel from opset 13) and uint8 activations whose ranges are calibrated on the test cases or
on the calibration data; the search keeps float the fewest nodes that bring every output within its bound, and
int8 is left out when they carry more than half of the model's multiply-accumulates (docs/int8.md).
"""

from __future__ import annotations

from . import Precision
from .int8_modes import int8_check, int8_lines, int8_maker, int8_requirements

MODE = Precision(
    name="int8",
    about="static int8 (QDQ), activation ranges calibrated ahead",
    make=int8_maker("static"),
    manifest_key="int8",
    rank=2,
    reads=frozenset({"fp32_nodes", "calibrate_method", "int8_weights", "calibrate"}),
    portable="implied",
    needs_data=True,
    requirements=int8_requirements,
    lines=int8_lines,
    check=int8_check,
    record_mode="static",
)
