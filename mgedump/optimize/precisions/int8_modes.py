"""What the two int8 modes share: onnxruntime's quantizer, proved on the test data, and what a pack says.

``int8`` (:mod:`.int8`) is static QDQ calibrated ahead; ``int8-dynamic`` (:mod:`.int8_dynamic`) quantizes MatMul
weights and the activations at run time. Both are :func:`~mgedump.optimize.quantize.quantize_int8`, after the
portable rewrites (the quantizer's pre-processing), against the outputs of the model as given (docs/int8.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ...bundle.requirements import REQ_INT8_DYNAMIC, REQ_INT8_QDQ
from ...model.runtime import open_session
from ..offline import save
from ..passes import restore_ir
from ..quantize_ort import GEMM_SUFFIX, INTEGER_OPS, QUANT_SUFFIX, integer_ops
from . import Job, Made, Precision
from .float16_modes import limited


def int8_maker(quantize_mode: str) -> Callable[[Job], Made]:
    """How an int8 mode is made: ``quantize_mode`` is onnxruntime's ``"static"`` or ``"dynamic"``."""

    def make(job: Job) -> Made:
        import onnx

        from ..quantize import quantize_int8

        staged = os.path.join(job.scratch, "float.onnx")
        save(job.model, staged, job.external)
        given = open_session(job.source, label="the model as given")
        names = [o.name for o in given.get_outputs()]
        expected = [given.run(names, dict(feeds)) for feeds in job.test_inputs]
        del given  # its weights are not held through the search
        options = job.options
        passed_on = ("test_inputs", "bounds", "calibration", "calibration_specs", "scratch", "external")
        found = quantize_int8(
            staged,
            os.path.join(job.scratch, "int8.onnx"),
            expected=expected,
            mode=quantize_mode,
            method=options.calibrate_method,
            per_channel=options.int8_weights == "per-channel",
            fp32_nodes=options.fp32_nodes,
            **{name: getattr(job, name) for name in passed_on},  # the job's own, as the quantizer names them too
        )
        made = onnx.load(found.path)
        restore_ir(made, job.model)  # an IR 3 model lists the quantizer's new weights (scales, ...) as inputs too
        return Made(made, found.to_json(), list(found.notes))

    return make


def int8_check(model: Any, record: Mapping[str, Any]) -> str | None:
    """What an int8 record says that its model does not hold, read off the model's operators: the integer
    operators (dynamic) or the dequantized tensors (static) of the nodes it counts quantized, and no integer
    operator of a node it says is kept float."""
    count, ops = record["quantized_nodes"], integer_ops(model)
    computing = sum(ops.get(op, 0) for op in INTEGER_OPS)
    if count <= 0:
        return "it records no node quantized"
    if record["mode"] == "dynamic" and computing < count:
        return f"it records {count} node(s) quantized, and the model holds {computing} integer operator(s)"
    if record["mode"] != "dynamic" and not ops.get("DequantizeLinear"):
        return f"it records {count} node(s) quantized, and the model holds no DequantizeLinear"
    integer = {n.name for n in model.graph.node if n.op_type in INTEGER_OPS}
    wrong = [
        entry["node"]
        for entry in record.get("kept_float32", [])
        if {entry["node"] + QUANT_SUFFIX, entry["node"] + GEMM_SUFFIX + QUANT_SUFFIX} & integer
    ]
    if wrong:
        return f"node(s) recorded kept float compute in integers: {', '.join(wrong[:8])}"
    return None


def int8_requirements(record: Mapping[str, Any]) -> list[str]:
    """What an int8 model needs: kernels for its quantized ops."""
    return [REQ_INT8_QDQ if record["mode"] == "static" else REQ_INT8_DYNAMIC]


def int8_lines(record: Mapping[str, Any]) -> list[str]:
    """How int8 was made, each output's error statistics (to pick maxerr knowingly), and the nodes kept float."""
    how = f"{record['mode']} {record['format']}"
    calibration = record.get("calibration")
    if calibration:
        how += f", {record['method']} ranges from {calibration['cases']} case(s) ({', '.join(calibration['from'])})"
    how += ", weights per channel" if record.get("per_channel") else ", weights per tensor"
    kept = record.get("kept_float32", [])
    lines = [
        f"int8 ({how}): {record['quantized_nodes']} node(s) quantized, {len(kept)} kept float, "
        f"{record['search_rounds']} quantization(s) tried"
    ]
    search = record.get("search")
    if search:
        budget = search["budget"]
        share = search.get("float_share")
        lines.append(
            f"int8 search: ranked by what each node kept float buys on the outputs ({search['measured_alone']} "
            f"measured alone; budget {budget['runs']} runs, {budget['seconds']:g} s"
            + (f", spent: {budget['stopped_by']}" if budget.get("stopped_by") else "")
            + ")"
            + (
                f"; the nodes kept float carry {share:.0%} of the model's multiply-accumulates"
                if share is not None
                else ""
            )
        )
    for out in record.get("outputs", []):
        top1 = ""
        if out.get("top1_agreement") is not None:
            top1 = f", top-1 agreement {out['top1_agreement']:.1%} of {out['top1_rows']}"
        stat = f", {out['stat']} {out['stat_err']:.3g}" if out.get("stat") not in (None, "max") else ""
        lines.append(
            f"  output {out['name']!r}: max abs err {out['max_abs_err']:.3g}, p99 {out['p99_abs_err']:.3g}, "
            f"mean {out['mean_abs_err']:.3g} (AssertEqual err {out['assert_err']:.3g}{stat}){top1}"
        )
    return lines + limited([f"  node {e['node']!r} ({e['op_type']}) kept float: {e['why']}" for e in kept])


def int8_mode(name: str, about: str, quantize_mode: str, reads: frozenset[str], **more: Any) -> Precision:
    """An int8 mode (``int8``, ``int8-dynamic``): what the two share said once, the manifest's ``int8`` record,
    rank 2, the portable rewrites run by the quantizer, test data needed, its requirements and what a pack says;
    ``more``, the other fields of its :class:`~mgedump.optimize.precisions.Precision`."""
    return Precision(
        name=name,
        about=about,
        make=int8_maker(quantize_mode),
        manifest_key="int8",
        rank=2,
        reads=reads,
        portable="implied",
        needs_data=True,
        requirements=int8_requirements,
        lines=int8_lines,
        check=int8_check,
        record_mode=quantize_mode,
        **more,
    )
