"""``int8``: static int8 in QDQ form, calibrated ahead (``--quantize int8``).

int8 weights (per channel from opset 13) and uint8 activations whose ranges are calibrated on the test cases or
on the calibration data; the search keeps float the fewest nodes that bring every output within its bound, and
int8 is left out when they carry more than half of the model's multiply-accumulates (docs/int8.md).
"""

from __future__ import annotations

from .int8_modes import int8_mode

MODE = int8_mode(
    "int8",
    "static int8 (QDQ), activation ranges calibrated ahead",
    "static",
    frozenset({"fp32_nodes", "calibrate_method", "int8_weights", "calibrate"}),
)
