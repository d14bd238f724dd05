"""onnxruntime's offline optimiser as a rewrite, and saving a model with or without external data.

The portable rewrites are onnxruntime's BASIC level (constant folding; Identity, Dropout and other redundant
nodes removed; BatchNorm and Add/Mul folded into Conv; MatMul+Add into Gemm); its EXTENDED level adds
``com.microsoft.FusedConv`` and ALL the NCHWc layout for x86 AVX2 (docs/optimize.md). The result is saved at the
model's own opsets, IR and weights-as-inputs restored (:mod:`.passes`).
"""

from __future__ import annotations

import os
from typing import Any

from ..model.modelfile import uses_external_data
from ..model.runtime import open_session
from ..model.session import SessionSettings
from . import passes
from .passes import batchnorm_to_affine, dequantized_weights, hide_weights, restore_ir, restore_weights


def uses_external(path: str) -> bool:
    """Whether the model at ``path`` keeps (or must keep) its weights in an external data file."""
    return uses_external_data(path) or os.path.getsize(path) > passes.PROTOBUF_LIMIT


def save(model: Any, path: str, external: bool) -> None:
    """Save a model; with ``external`` (or past protobuf's 2 GiB: :func:`.passes.too_big`), its weights in
    ``<file>.data`` beside it (the bundle's data member)."""
    import onnx

    if external or passes.too_big(model):
        onnx.save_model(
            model,
            path,
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=os.path.basename(path) + ".data",
            size_threshold=1024,
        )
    else:
        onnx.save_model(model, path)


def load_weights(model: Any, scratch: str) -> None:
    """Read into the model the weights it keeps as external data in ``scratch`` (what :func:`ort_offline` leaves
    there): before it is saved anywhere else."""
    from onnx.external_data_helper import load_external_data_for_model

    load_external_data_for_model(model, scratch)


def portable_rewrites(src: str, scratch: str, external: bool) -> Any:
    """The model at ``src`` after the portable rewrites (onnxruntime's BASIC level, twice when BatchNorms that
    follow no Conv become Mul + Add). With ``external``, its weights stay in ``scratch`` (:func:`ort_offline`)."""
    model = ort_offline(src, os.path.join(scratch, "basic.onnx"), "basic", external)
    if batchnorm_to_affine(model, scratch):
        staged = os.path.join(scratch, "affine.onnx")
        save(model, staged, external)
        model = ort_offline(staged, os.path.join(scratch, "basic2.onnx"), "basic", external)
    return model


def at_level(model: Any, level: str, scratch: str, external: bool) -> Any:
    """The model after onnxruntime's optimiser at ``level`` (``extended``: fusions; ``all``: NCHWc too)."""
    staged = os.path.join(scratch, "staged.onnx")
    save(model, staged, external)
    return ort_offline(staged, os.path.join(scratch, f"{level}.onnx"), level, external)


def ort_offline(src: str, out: str, level: str, external: bool) -> Any:
    """Run onnxruntime's offline optimiser at a level; return the saved model, opsets restored. With ``external``,
    the model returned leaves its weights where onnxruntime wrote them, beside ``out`` (:func:`load_weights` reads
    them in): a model that is saved there again, staged, searched on, never holds them in memory.

    Integer weights that the model dequantizes (int8 -> Cast -> Mul, DequantizeLinear) are hidden from the
    optimiser as graph inputs and put back after: constant folding would store them dequantized, as float32
    weights four times their size.
    """
    import onnx

    original = onnx.load(src, load_external_data=False)
    protected = dequantized_weights(original)
    source = src
    if protected:
        model = onnx.load(src)
        weights = hide_weights(model, protected)
        source = out + ".protected.onnx"
        save(model, source, external)
    opts = SessionSettings(graph_opt=level).session_options()
    opts.optimized_model_filepath = out
    # the session only writes the model: packing weights for its kernels would hold a second copy of them, and the
    # packed copy is never saved (512 MiB of weights: peak 632 to 120 MiB, 2.3 to 0.9 s; docs/benchmarks.md)
    opts.add_session_config_entry("session.disable_prepacking", "1")
    if external:
        opts.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", os.path.basename(out) + ".data"
        )
        opts.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    open_session(source, label=f"the model being optimised ({level} level)", options=opts)
    model = onnx.load(out, load_external_data=not external)
    if protected:
        restore_weights(model, weights)
    restore_ir(model, original)
    return model
