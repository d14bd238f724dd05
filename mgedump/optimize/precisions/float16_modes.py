"""What the two float16 modes share: the search that decides which nodes stay float32, and what a pack says.

``ioc16`` (:mod:`.ioc16`) computes in float16 where onnxruntime has a float16 kernel; ``io16xc32``
(:mod:`.io16xc32`) stores float16 between operators and computes in float32. Both are made by
:func:`~mgedump.optimize.autocast.choose_precision` on the test data (docs/float16.md), or, without test data,
from the weights' ranges and ``fp32_nodes`` alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ...base.errors import OptimizeError
from ...base.naming import option_name
from ..autocast import choose_precision
from ..float16 import check_not_quantized, convert, float16_tensors, float_types, is_float16_model
from ..nodes import all_nodes, matching_nodes, name_nodes
from ..offline import load_weights, save
from . import Job, Made, Precision

READS = frozenset({"fp32_nodes", "keep_io_types", "float16_margin"})
LIMIT = 10  # nodes listed in a pack's summary; the manifest lists them all


def float16_maker(mode: str, after: Callable[[str, Any, Job], list[str]] | None = None) -> Callable[[Job], Made]:
    """How a float16 mode is made: the search on the test data, else the weights' ranges and ``fp32_nodes``.

    Args:
        after: more notes on the searched model (float32 model's path, the search's result, the job).
    """

    def make(job: Job) -> Made:
        model, options = job.model, job.options
        check_not_quantized(model, option_name("precision", mode))
        if is_float16_model(model):
            record = {"mode": mode, "kept_float32": [], "weights_float32": [], "search_rounds": 0}
            return Made(model, record, ["the model is float16 already"])
        if not job.test_inputs:
            return _converted(_from_weights(job, mode), mode)
        staged = os.path.join(job.scratch, "float32.onnx")
        save(model, staged, job.external)
        found = choose_precision(
            staged,
            mode,
            job.test_inputs,
            maxerr=job.bounds.tightest(),
            fp32_nodes=options.fp32_nodes,
            scratch=job.scratch,
            keep_io=options.keep_io_types,
            margin=options.float16_margin,
            error_stats={output.name: job.bounds.of(output.name).stat for output in model.graph.output},
        )
        notes = [*found.notes, cast_note(found.model, mode), *(after(staged, found, job) if after else [])]
        found.load_weights()  # the one model that holds its weights in memory: the mode's model
        return _converted(Made(found.model, found.to_json(), notes), mode)

    return make


def _converted(made: Made, mode: str) -> Made:
    """The mode's model, once it is seen to hold float16, or its record to keep nodes float32 (a search that keeps
    every node float32 says so): a model with no float32 to convert is the model as it is under another name.

    Raises:
        OptimizeError: nothing in the model made is float16, and its record keeps no node float32.
    """
    if float16_tensors(made.model) or made.record.get("kept_float32"):
        return made
    types = float_types(made.model)
    raise OptimizeError(
        f"{option_name('precision', mode)} converts nothing: no tensor of the model made is float16 (the model's "
        f"floating-point tensors are {', '.join(types) or 'none'}): it would be the model as it is under another name"
    )


def float16_check(model: Any, record: Mapping[str, Any]) -> str | None:
    """What a float16 record says that its model does not hold: a float16 tensor where it keeps no node float32,
    a node kept float32 that is not in the model."""
    if not float16_tensors(model) and not record.get("kept_float32"):
        return "it holds no float16 tensor, and its record says every node converted"
    names = {node.name for node in all_nodes(model.graph)}
    missing = [entry["node"] for entry in record.get("kept_float32", []) if entry["node"] not in names]
    if missing:
        return f"node(s) recorded kept float32 are not in it: {', '.join(missing[:8])}"
    return None


def _from_weights(job: Job, mode: str) -> Made:
    """Without test data: the nodes ``fp32_nodes`` names stay float32, weights float16 where float16 holds them."""
    model = job.model
    if job.external:
        load_weights(model, job.scratch)
    name_nodes(model)
    kept = matching_nodes(model, job.options.fp32_nodes)
    conversion = convert(model, mode, kept, keep_io=job.options.keep_io_types)
    record = {
        "mode": mode,
        "kept_float32": [{"node": n, "op_type": "", "why": why} for n, why in kept.items()],
        "weights_float32": [{"weight": n, "why": why} for n, why in conversion.weights32.items()],
        "search_rounds": 0,
    }
    return Made(model, record)


def cast_note(model: Any, mode: str) -> str:
    """How many Casts the float16 model holds, and how many of them only convert a weight (onnxruntime folds those
    when it loads the model: they cost nothing per run)."""
    weights = {init.name for init in model.graph.initializer}
    casts = [node for node in model.graph.node if node.op_type == "Cast"]
    on_weights = sum(1 for node in casts if node.input and node.input[0] in weights)
    return (
        f"{mode}: {len(casts)} Cast(s) in the model, {on_weights} of them on weights (folded when onnxruntime loads "
        f"it), {len(casts) - on_weights} run per inference"
    )


def float16_lines(record: Mapping[str, Any]) -> list[str]:
    """What a float16 mode kept float32, and why: one line each, the first :data:`LIMIT` of them."""
    kept = record["kept_float32"]
    weights = record.get("weights_float32", [])
    if not kept and not weights:
        return [f"{record['mode']}: every node converted"]
    lines = [f"{record['mode']}: {len(kept)} node(s) and {len(weights)} weight(s) kept float32"]
    entries = []
    for entry in kept:
        op = f" ({entry['op_type']})" if entry.get("op_type") else ""
        entries.append(f"  node {entry['node']!r}{op}: {entry['why']}")
    by_reason: dict[str, list[str]] = {}
    for entry in weights:  # weights kept for one reason (read by one kept node) are many: one line per reason
        by_reason.setdefault(entry["why"], []).append(entry["weight"])
    for why, names in by_reason.items():
        entries.append(f"  weight {names[0]!r}: {why}" if len(names) == 1 else f"  {len(names)} weights: {why}")
    return lines + limited(entries)


def limited(entries: list[str]) -> list[str]:
    """The first :data:`LIMIT` entries, and how many more the manifest lists."""
    more = (
        [f"  ... and {len(entries) - LIMIT} more (the bundle's manifest lists them all)"]
        if len(entries) > LIMIT
        else []
    )
    return entries[:LIMIT] + more


def float16_mode(name: str, about: str, after: Callable[[str, Any, Job], list[str]] | None = None) -> Precision:
    """A float16 mode (``ioc16``, ``io16xc32``): what the two share said once, the manifest's ``float16`` record,
    rank 1, the float16 options, inputs stored float16 and what a pack says; ``after`` as :func:`float16_maker`."""
    return Precision(
        name=name,
        about=about,
        make=float16_maker(name, after=after),
        manifest_key="float16",
        rank=1,
        reads=READS,
        rounds_inputs=True,
        lines=float16_lines,
        check=float16_check,
    )
