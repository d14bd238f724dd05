"""onnxruntime's quantizer (:mod:`onnxruntime.quantization`), called for int8 candidates: static QDQ calibrated
once and reused by every candidate, or dynamic MatMul weights; its own output kept off the user's terminal."""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import os
import tempfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..base.errors import MgeError, ModelError

STATIC, DYNAMIC = "static", "dynamic"  # QDQ calibrated ahead, or MatMul weights with activations at run time
DYNAMIC_OPS = ("MatMul", "Attention", "LSTM")
# operators that compute a node in integers: what onnxruntime's quantizer puts in a node's place
INTEGER_OPS = (
    "MatMulInteger",
    "ConvInteger",
    "QLinearMatMul",
    "QLinearConv",
    "QAttention",
    "DynamicQuantizeLSTM",
    "MatMulIntegerToFloat",
    "DynamicQuantizeMatMul",
)
_FLOATS = (1, 10, 11, 16)  # onnx.TensorProto FLOAT, FLOAT16, DOUBLE, BFLOAT16: what the quantizer quantizes
QUANT_SUFFIX, GEMM_SUFFIX = "_quant", "_MatMul"  # the quantizer names a node's integer op <name>_quant, a Gemm's
# MatMul <name>_MatMul (onnxruntime.quantization: ONNXModel.replace_gemm_with_matmul, operators/matmul.py)


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
        self.gemms = _gemm_names(base_path) if mode == DYNAMIC else set()

    def quantize(self, exclude: Mapping[str, str]) -> str:
        """A quantized candidate with these nodes kept float; its path.

        Raises:
            ModelError: onnxruntime's quantizer fails on the model.
        """
        from onnxruntime import quantization as q

        self.count += 1
        out = os.path.join(self.scratch, f"int8-{self.count}.onnx")
        excluded = sorted(excluded_names(exclude, self.gemms))
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


def _gemm_names(path: str) -> set[str]:
    """The model's Gemm nodes (main graph), by name."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    return {node.name for node in model.graph.node if node.op_type == "Gemm" and node.name}


def excluded_names(exclude: Mapping[str, str] | Sequence[str], gemms: set[str]) -> set[str]:
    """The names to exclude from the quantizer: each node, and each Gemm's MatMul too (the dynamic quantizer replaces
    a Gemm by a MatMul named ``<name>_MatMul`` before it reads the exclusion list, so the Gemm's own name excludes
    nothing)."""
    names = set(exclude)
    return names | {name + GEMM_SUFFIX for name in names if name in gemms}


def int8_nodes(base: Any, made: Any, mode: str, excluded: Collection[str] = ()) -> list[str]:
    """The base model's nodes the model made computes in integers, read off its operators, in graph order.

    dynamic: the node's integer operator is there (``<name>_quant``, a Gemm's ``<name>_MatMul_quant``, of
    :data:`INTEGER_OPS`). static (QDQ): the node is gone or replaced (folded into a range), or it reads a
    dequantized tensor it read float in the base model, and reads a weight dequantized too (a node kept float
    reads its producer's dequantized output and its own weights float); a node without weights that reads a
    dequantized tensor is int8 unless ``excluded`` names it (the static quantizer reads the names it is given).
    """
    if mode == DYNAMIC:
        integer = {n.name[: -len(QUANT_SUFFIX)] for n in made.graph.node if n.op_type in INTEGER_OPS and n.name}
        return [n.name for n in base.graph.node if n.name in integer or n.name + GEMM_SUFFIX in integer]

    def dequantized(graph: Any) -> set[str]:
        return {o for n in graph.node if n.op_type == "DequantizeLinear" for o in n.output}

    before, after = dequantized(base.graph), dequantized(made.graph)
    weights = {init.name for init in base.graph.initializer if init.data_type in _FLOATS}
    by_name = {n.name: n for n in made.graph.node}
    found = []
    for node in base.graph.node:
        twin = by_name.get(node.name)
        if twin is None or twin.op_type != node.op_type:
            found.append(node.name)
            continue
        slots = list(zip(node.input, twin.input, strict=False))
        if not any(new in after and old not in before for old, new in slots):
            continue
        own = [new for old, new in slots if old in weights]
        if (own and any(new in after for new in own)) or (not own and node.name not in excluded):
            found.append(node.name)
    return found


def integer_ops(model: Any) -> dict[str, int]:
    """How many of each quantized operator the model holds (integer ops, QuantizeLinear, DequantizeLinear,
    DynamicQuantizeLinear)."""
    counts: dict[str, int] = {}
    for node in model.graph.node:
        if node.op_type in (*INTEGER_OPS, "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"):
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def _calibration_method(method: str) -> Any:
    from onnxruntime.quantization import CalibrationMethod

    return {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy}.get(
        method, CalibrationMethod.Percentile
    )
