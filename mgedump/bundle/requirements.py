"""What an optimised model needs at run time beyond a standard ONNX runtime, and whether this machine has it."""

from __future__ import annotations

from ..base.errors import UsageError
from ..base.naming import option_name

REQ_ONNXRUNTIME = "onnxruntime"  # com.microsoft ops: any onnxruntime, no other runtime
REQ_ORT_CPU = "onnxruntime-cpu"  # ops only onnxruntime's CPU execution provider has
REQ_AVX2 = "x86-avx2"  # an x86 CPU with AVX2
REQ_INT8_QDQ = "int8-qdq"  # int8 QuantizeLinear/DequantizeLinear pairs (standard ONNX; opset 13 for per-channel)
REQ_INT8_DYNAMIC = "int8-integer-ops"  # DynamicQuantizeLinear and MatMulInteger (standard ONNX, opset 11)
INT8_KERNELS = {
    REQ_INT8_QDQ: ("QuantizeLinear", "DequantizeLinear"),
    REQ_INT8_DYNAMIC: ("DynamicQuantizeLinear", "MatMulInteger"),
}
KNOWN = (REQ_ONNXRUNTIME, REQ_ORT_CPU, REQ_AVX2, REQ_INT8_QDQ, REQ_INT8_DYNAMIC)


def cpu_has_avx2() -> bool:
    """Whether this CPU has AVX2 (numpy's own CPU feature detection, on any OS)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__  # type: ignore[import-not-found]  # numpy 2
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core._multiarray_umath import __cpu_features__  # type: ignore[no-redef]
    return bool(__cpu_features__.get("AVX2"))


def check_requirements(requirements: list[str], provider: str | None = None) -> None:
    """Refuse to run a model whose requirements this machine or provider does not meet.

    Raises:
        UsageError: with what the model needs and what is missing.
    """
    unknown = [r for r in requirements if r not in KNOWN]
    if unknown:
        raise UsageError(
            f"the bundle's model needs {', '.join(unknown)}, which this mgedump does not know", hint="upgrade mgedump"
        )
    if REQ_AVX2 in requirements and not cpu_has_avx2():
        raise UsageError(
            f"the bundle's model uses onnxruntime's NCHWc layout for x86 CPUs with AVX2 ({option_name('nchw88')}), "
            "and this CPU has no AVX2",
            hint=f"pack it again without {option_name('nchw88')} for this machine",
        )
    for req in (r for r in requirements if r in INT8_KERNELS):
        missing = [op for op in INT8_KERNELS[req] if op not in _kernels_for_int8(provider)]
        if missing:
            raise UsageError(
                f"the bundle's int8 model needs {', '.join(missing)} kernels, which this onnxruntime lacks"
            )
    if REQ_ORT_CPU in requirements and provider not in (None, "CPUExecutionProvider"):
        raise UsageError(f"the bundle's model uses onnxruntime CPU-only ops (NCHWc); it cannot run on {provider}")


def _kernels_for_int8(provider: str | None) -> set[str]:
    """The ops with an int8 kernel in onnxruntime for the provider, or for the CPU provider it falls back to."""
    from onnxruntime.capi import _pybind_state as C  # type: ignore[import-untyped]

    providers = {"CPUExecutionProvider", provider or "CPUExecutionProvider"}
    return {
        k.op_name
        for k in C.get_all_opkernel_def()
        if k.provider in providers and any("int8" in t for types in k.type_constraints.values() for t in types)
    }
