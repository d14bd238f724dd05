"""onnxruntime's quantizer (:mod:`onnxruntime.quantization`), called for int8 candidates: static QDQ calibrated
once and reused by every candidate, or dynamic MatMul weights; its own output kept off the user's terminal."""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..base.errors import MgeError, ModelError

STATIC, DYNAMIC = "static", "dynamic"  # QDQ calibrated ahead, or MatMul weights with activations at run time
DYNAMIC_OPS = ("MatMul", "Attention", "LSTM")


@contextlib.contextmanager
def _silenced() -> Iterator[None]:
    """onnxruntime's quantizer prints progress on stdout and warns through the root logger (calling basicConfig,
    which would leave a handler behind): keep both off the user's terminal."""
    import onnxruntime as ort  # type: ignore[import-untyped]

    root = logging.getLogger()
    null = logging.NullHandler()
    root.addHandler(null)
    before = logging.root.manager.disable
    logging.disable(logging.WARNING)
    ort.set_default_logger_severity(3)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        ort.set_default_logger_severity(2)
        logging.disable(before)
        root.removeHandler(null)


def _reader(feeds: Sequence[Mapping[str, np.ndarray]]) -> Any:
    from onnxruntime.quantization import CalibrationDataReader  # type: ignore[import-untyped]

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self._next = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            item = next(self._next, None)
            return None if item is None else dict(item)

        def __len__(self) -> int:
            return len(feeds)

    return Reader()


def opset_of(model: Any) -> int:
    """The model's opset of the default ONNX domain (0 when it imports none)."""
    return next((op.version for op in model.opset_import if (op.domain or "") in ("", "ai.onnx")), 0)


class Quantizer:
    """Quantizes one float model again and again with other nodes excluded; static ranges are calibrated once."""

    def __init__(
        self,
        base_path: str,
        mode: str,
        method: str,
        per_channel: bool,
        calibration: Sequence[Mapping[str, np.ndarray]],
        scratch: str,
        external: bool,
    ) -> None:
        self.base_path = base_path
        self.mode = mode
        self.method = method
        self.per_channel = per_channel
        self.calibration = calibration
        self.scratch = tempfile.mkdtemp(prefix="int8-", dir=scratch)  # the calibration cache is this search's own
        self.cache = os.path.join(self.scratch, "calibration.json")
        self.external = external
        self.count = 0

    def quantize(self, exclude: Mapping[str, str]) -> str:
        """A quantized candidate with these nodes kept float; its path.

        Raises:
            ModelError: onnxruntime's quantizer fails on the model.
        """
        from onnxruntime import quantization as q

        self.count += 1
        out = os.path.join(self.scratch, f"int8-{self.count}.onnx")
        excluded = sorted(exclude)
        try:
            with _silenced():
                if self.mode == DYNAMIC:
                    q.quantize_dynamic(
                        self.base_path,
                        out,
                        op_types_to_quantize=list(DYNAMIC_OPS),
                        per_channel=self.per_channel,
                        weight_type=q.QuantType.QInt8,
                        nodes_to_exclude=excluded,
                        use_external_data_format=self.external,
                        extra_options={"MatMulConstBOnly": True},
                    )
                else:
                    kwargs: dict[str, Any] = {}
                    if "calibration_cache_path" in inspect.signature(q.quantize_static).parameters:
                        kwargs["calibration_cache_path"] = self.cache  # calibrate once for every candidate
                    q.quantize_static(
                        self.base_path,
                        out,
                        _reader(self.calibration),
                        quant_format=q.QuantFormat.QDQ,
                        per_channel=self.per_channel,
                        activation_type=q.QuantType.QUInt8,
                        weight_type=q.QuantType.QInt8,
                        nodes_to_exclude=excluded,
                        use_external_data_format=self.external,
                        calibrate_method=_calibration_method(self.method),
                        **kwargs,
                    )
        except MgeError:
            raise
        except Exception as exc:  # the quantizer's own errors: one line, naming the tool
            text = " ".join(str(exc).split())[:300] or type(exc).__name__
            raise ModelError(f"onnxruntime's quantizer fails on the model: {text}") from None
        return out


def _calibration_method(method: str) -> Any:
    from onnxruntime.quantization import CalibrationMethod

    return {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy}.get(
        method, CalibrationMethod.Percentile
    )
