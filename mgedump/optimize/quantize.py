"""int8 for inference: onnxruntime's quantizer, proved on the test data (``--quantize int8``).

The quantization itself is onnxruntime's (:mod:`onnxruntime.quantization`,
called in :mod:`.quantize_ort`); this module decides what it may quantize and
proves the result (the outputs measured in :mod:`.quantize_stats`, the nodes that
introduce error found in :mod:`.quantize_blame`):

- static (the default): QDQ format, int8 weights and uint8 activations
  (U8S8: onnxruntime's choice for x86 CPUs; int8 activations measured 1.5-3x
  slower than U8S8 on an AVX2 CPU without VNNI), weights per channel where the model's opset
  allows it (DequantizeLinear's ``axis`` needs opset 13), activation ranges
  calibrated on the calibration cases (the pack's own test cases unless others
  are given) with MinMax, Entropy or Percentile. The ranges are computed once
  and cached; every candidate of the search reuses them.
- dynamic: int8 weights for MatMul (``MatMulInteger`` with
  ``DynamicQuantizeLinear``), activations quantized at run time: for
  MatMul-heavy models (transformers) where static ranges do not suit.

The proof, on the test cases, against the outputs of the model as given:

1. Quantize everything but the nodes ``--fp32-nodes`` names; run it. If every
   output meets ``maxerr``, done.
2. Otherwise run the float model and the candidate with every tensor exposed,
   and measure, for each node int8 touched, the error it *introduces*: its
   outputs' error beyond what its inputs carry in. The first node that
   introduces error above ``maxerr`` is the first divergence.
3. If the candidate destroys the outputs (a non-finite error, 0.5 or more, or
   beyond a tenth of the outputs' scale: as :func:`mgedump.measure.assertion.maxerr_hint`
   judges), refuse, naming the first divergence; a model int8 destroys is only
   packed when the user names the nodes to keep float (``--fp32-nodes``). The
   refusal says which nodes would do, when the search finds them.
4. Otherwise keep float the fewest nodes, most error first, that bring every
   output within ``maxerr``: grow the set 1, 2, 4, ... then bisect, each step
   one quantization (no calibration) and one plain run of the test cases.

The result records, per output, what a user needs to pick ``--maxerr``
knowingly: the largest, 99th percentile and mean absolute error, the
AssertEqual error, and top-1 agreement for a score vector.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.errors import OptimizeError
from ..diagnose.exposed import RunSettings
from ..measure.assertion import maxerr_hint
from ..options import CALIBRATE_METHODS
from .isolate import Opener
from .nodes import matching_nodes, name_nodes
from .quantize_blame import NodeErr, diagnose, first_divergence, rank, touched_nodes
from .quantize_ort import DYNAMIC, DYNAMIC_OPS, STATIC, Quantizer, opset_of
from .quantize_stats import Measure, OutputStats, measure, output_stats, run_all

MODES = (STATIC, DYNAMIC)
METHODS = CALIBRATE_METHODS
DEFAULT_METHOD = CALIBRATE_METHODS[0]  # MinMax: measured as accurate as Entropy and faster, Percentile worse (README)
PER_CHANNEL_OPSET = 13  # DequantizeLinear's axis (per-channel scales) came with opset 13
MAX_HINT_NODES = 8  # a refusal names at most this many nodes to keep float
HEAVY_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm", "Attention", "LSTM", "GRU")  # where int8 saves time


@dataclass
class Int8Result:
    """What the search decided and measured.

    Attributes:
        path: the int8 model.
        mode, method, per_channel: how it was quantized.
        kept: node name -> why it stays float.
        op_types: node name -> op type (for what is kept).
        quantized: the nodes int8 touched.
        outputs: the error statistics per output.
        calibration: how many cases calibrated the ranges and where they came from.
        rounds: quantizations tried; runs: whole-model runs of the test cases (exposed runs included).
        notes: remarks for the user.
    """

    path: str
    mode: str
    method: str | None
    per_channel: bool
    opset: int = 0
    kept: dict[str, str] = field(default_factory=dict)
    op_types: dict[str, str] = field(default_factory=dict)
    quantized: list[str] = field(default_factory=list)
    outputs: list[OutputStats] = field(default_factory=list)
    calibration: dict[str, Any] | None = None
    rounds: int = 0
    runs: int = 0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "format": "QDQ" if self.mode == STATIC else "integer-ops",
            "opset": self.opset,
            "weights": "int8",
            "activations": "uint8" if self.mode == STATIC else "uint8, quantized at run time",
            "method": self.method,
            "per_channel": self.per_channel,
            "calibration": self.calibration,
            "quantized_nodes": len(self.quantized),
            "kept_float32": [
                {"node": name, "op_type": self.op_types.get(name, ""), "why": why} for name, why in self.kept.items()
            ],
            "search_rounds": self.rounds,
            "outputs": [s.to_json() for s in self.outputs],
        }


def quantize_int8(
    base_path: str,
    dst: str,
    *,
    test_inputs: Sequence[Mapping[str, np.ndarray]],
    expected: Sequence[Sequence[np.ndarray]],
    maxerr: float,
    output_maxerr: Mapping[str, float] | None = None,
    calibration: Sequence[Mapping[str, np.ndarray]] = (),
    calibration_specs: Sequence[str] = (),
    mode: str = STATIC,
    method: str = DEFAULT_METHOD,
    per_channel: bool = True,
    fp32_nodes: Sequence[str] = (),
    scratch: str,
    external: bool = False,
    settings: RunSettings | None = None,
) -> Int8Result:
    """Quantize the float model at ``base_path`` to int8 and prove it on the test cases; write it to ``dst``.

    Args:
        base_path: the float model to quantize (already optimised); its nodes are named here.
        dst: where the int8 model goes.
        test_inputs: the test cases' inputs.
        expected: the outputs of the model as given on each test case, in the model's output order.
        maxerr: what every output must meet on every test case (AssertEqual).
        output_maxerr: outputs held to their own bound instead (``--maxerr NAME:X``).
        calibration: the cases the static ranges are calibrated on (none: the test cases).
        calibration_specs: where the calibration cases came from, for the record.
        mode: ``"static"`` (QDQ, calibrated) or ``"dynamic"`` (MatMul weights, activations at run time).
        method: ``"minmax"``, ``"entropy"`` or ``"percentile"`` (static only).
        per_channel: weights per output channel where the opset allows it.
        fp32_nodes: glob patterns of node names or op types to keep float.
        scratch: a folder for the candidates and dumps.
        external: save with external data (models beyond protobuf's 2 GiB).
        settings: onnxruntime settings for the exposed runs.

    Raises:
        UsageError: an unknown mode or method.
        ModelError: the quantizer fails on the model.
        OptimizeError: int8 destroys the outputs (the first divergence named), or no set of float nodes meets maxerr.
    """
    _check_choices(mode, method)
    base, named = _named_base(base_path, scratch, external)
    notes = []
    opset = opset_of(base)
    if per_channel and opset < PER_CHANNEL_OPSET:
        per_channel = False
        notes.append(f"weights per tensor: per-channel scales need opset {PER_CHANNEL_OPSET}, the model has {opset}")
    calibration_record = _calibration_record(mode, calibration, calibration_specs, len(test_inputs))
    quantizer = Quantizer(named, mode, method, per_channel, calibration or test_inputs, scratch, external)
    op_types = {node.name: node.op_type for node in base.graph.node}
    names = [v.name for v in base.graph.output]
    kept = matching_nodes(base, fp32_nodes)
    used_method = method if mode == STATIC else None
    result = Int8Result(
        dst, mode, used_method, per_channel, opset, op_types=op_types, calibration=calibration_record, notes=notes
    )

    bounds = dict(output_maxerr or {})
    opener = Opener()  # every candidate is opened in a child first: a crash there is a refusal

    def probe(keep: Mapping[str, str]) -> tuple[str, Measure, list[list[np.ndarray]]]:
        path = quantizer.quantize(keep)
        opener.check(path, f"--quantize int8 ({mode})")
        got = run_all(path, test_inputs, "the int8 model")
        result.runs += 1
        return path, measure(names, expected, got), got

    with opener:
        result, path = _search(
            probe, result, base, named, kept, names, expected, test_inputs, maxerr, mode, scratch, settings, bounds
        )
    result.rounds = quantizer.count
    _move(path, dst, external)
    return result


def _check_choices(mode: str, method: str) -> None:
    """Raises UsageError for an unknown mode or calibration method."""
    from ..base.errors import UsageError

    if mode not in MODES:
        raise UsageError(f"the int8 mode must be one of {', '.join(MODES)}, got {mode!r}")
    if method not in METHODS:
        raise UsageError(f"the calibration method must be one of {', '.join(METHODS)}, got {method!r}")


def _named_base(base_path: str, scratch: str, external: bool) -> tuple[Any, str]:
    """The float model with every node named (what the search keeps float, by name), and its copy in ``scratch``."""
    import onnx

    base = onnx.load(base_path)
    name_nodes(base)
    named = os.path.join(scratch, "int8-base.onnx")
    onnx.save_model(base, named, save_as_external_data=external, location="int8-base.onnx.data")
    return base, named


def _calibration_record(
    mode: str, calibration: Sequence[Mapping[str, np.ndarray]], specs: Sequence[str], test_cases: int
) -> dict[str, Any] | None:
    """How many cases calibrate the static ranges and where they come from (none for dynamic int8)."""
    if mode == DYNAMIC:
        return None
    return {"cases": len(calibration) or test_cases, "from": list(specs) if calibration else ["the test cases"]}


def _search(
    probe: Any,
    result: Int8Result,
    base: Any,
    named: str,
    kept: dict[str, str],
    names: Sequence[str],
    expected: Sequence[Sequence[np.ndarray]],
    test_inputs: Sequence[Mapping[str, np.ndarray]],
    maxerr: float,
    mode: str,
    scratch: str,
    settings: RunSettings | None,
    bounds: Mapping[str, float],
) -> tuple[Int8Result, str]:
    """Quantize, prove, and keep nodes float when the proof fails (the module's docstring); the result and the
    chosen candidate's path."""
    import onnx

    op_types = result.op_types
    path, measure, got = probe(kept)
    whole = measure
    candidate = onnx.load(path, load_external_data=False)
    touched = touched_nodes(base, candidate)
    if not touched:
        raise OptimizeError(
            f"--quantize int8 ({mode}): onnxruntime's quantizer found nothing to quantize in the model"
            + (f" (its {mode} mode quantizes {', '.join(DYNAMIC_OPS)})" if mode == DYNAMIC else "")
        )
    if not measure.passes(maxerr, bounds):
        diagnosis = diagnose(named, base, path, test_inputs, scratch, settings)
        result.runs += 2
        # the nodes that introduce a tenth of maxerr or more, most first; for a model int8 destroys, only as many as
        # a hint may name (the search then only finds what to suggest, and stays short)
        ranking = [n for n in rank(diagnosis, [t for t in touched if t not in kept]) if n.introduced >= maxerr / 10]
        destroyed = any(s.destroyed for s in output_stats(names, expected, got))
        if destroyed:  # one more quantization only: does keeping the worst few float pass? (the hint)
            hint_keep = _keep_ranked(kept, ranking[:MAX_HINT_NODES], maxerr)
            outcome = probe(hint_keep) if ranking else None
            found = (hint_keep, outcome) if outcome is not None and outcome[1].passes(maxerr, bounds) else None
        else:
            found = _bisect(probe, kept, ranking, maxerr, bounds) if ranking else None
        if destroyed or found is None:
            raise _refusal(measure, diagnosis, maxerr, mode, destroyed, found, kept)
        kept, (path, measure, got) = found
    result.kept = dict(kept)
    result.quantized = [t for t in touched_nodes(base, onnx.load(path, load_external_data=False)) if t not in kept]
    heavy = [name for name in result.quantized if op_types.get(name) in HEAVY_OPS]
    if not heavy and any(op_types.get(name) in HEAVY_OPS for name in touched):
        raise OptimizeError(
            f"--quantize int8 ({mode}) meets --maxerr {maxerr:g} only with every "
            f"{'/'.join(sorted({op_types[n] for n in touched if op_types.get(n) in HEAVY_OPS}))} kept float: "
            f"nothing would be left for int8 to speed up; with every other node int8: err={whole.worst[0]:.3g} "
            f"(name={whole.worst[1]}, test case {whole.worst[2]})",
            hint=maxerr_hint(whole.worst[0], whole.scale) or "leave --quantize out",
        )
    result.outputs = output_stats(names, expected, got)
    return result, path


def _keep_ranked(kept: Mapping[str, str], nodes: Sequence[NodeErr], maxerr: float) -> dict[str, str]:
    """The nodes kept float already, and these, each with why."""
    chosen = dict(kept)
    for node in nodes:
        chosen[node.name] = (
            f"int8 err {node.err:.3g} at its output against {node.carried:.3g} at its inputs on test case "
            f"{node.case} (maxerr {maxerr:g})"
        )
    return chosen


def _bisect(
    probe: Any, kept: Mapping[str, str], ranking: Sequence[NodeErr], maxerr: float, bounds: Mapping[str, float]
) -> Any:
    """The fewest of the ranked nodes (a prefix of the ranking) to keep float for every output to meet maxerr:
    doubling, then bisecting. Returns (kept, probe's result), or None when even all of them do not do."""

    def keep(k: int) -> dict[str, str]:
        return _keep_ranked(kept, ranking[:k], maxerr)

    low, high, best = 0, 1, None
    while True:
        high = min(high, len(ranking))
        outcome = probe(keep(high))
        if outcome[1].passes(maxerr, bounds):
            best = (high, outcome)
            break
        if high == len(ranking):
            return None
        low, high = high, high * 2
    while best[0] - low > 1:
        middle = (low + best[0]) // 2
        outcome = probe(keep(middle))
        if outcome[1].passes(maxerr, bounds):
            best = (middle, outcome)
        else:
            low = middle
    return keep(best[0]), best[1]


def _refusal(
    measure: Measure,
    diagnosis: Sequence[Sequence[NodeErr]],
    maxerr: float,
    mode: str,
    destroyed: bool,
    found: Any,
    kept: Mapping[str, str],
) -> OptimizeError:
    worst, name, case = measure.worst
    first = first_divergence(diagnosis[case], maxerr) if case < len(diagnosis) else None
    where = f"; first divergence on test case {case}: {first.describe()}" if first is not None else ""
    if destroyed:
        message = (
            f"--quantize int8 ({mode}) destroys the outputs: err={worst:.3g} (name={name}, test case {case}) "
            f"against --maxerr {maxerr:g}{where}"
        )
        if found is not None and len(found[0]) - len(kept) <= MAX_HINT_NODES:
            nodes = [n for n in found[0] if n not in kept]
            hint = (
                f"--fp32-nodes {','.join(nodes)} keeps {'it' if len(nodes) == 1 else 'them'} float and passes "
                f"(err {found[1][1].worst[0]:.3g}): use it if that is what you want, and check that the calibration "
                "data is like the data the model will see"
            )
        else:
            hint = "keep the nodes that diverge float with --fp32-nodes, or check the calibration data"
        return OptimizeError(message, hint=hint)
    return OptimizeError(
        f"--quantize int8 ({mode}): with every node int8{' but those --fp32-nodes names' if kept else ''} the model "
        f"misses --maxerr {maxerr:g}: err={worst:.3g} "
        f"(name={name}, test case {case}), and keeping float the nodes that introduce error does not bring it "
        f"within{where}",
        hint=maxerr_hint(worst, measure.scale)
        or "keep more of the model float with --fp32-nodes, or leave --quantize out",
    )


def _move(path: str, dst: str, external: bool) -> None:
    """The chosen candidate becomes dst (its external data renamed after dst)."""
    import onnx

    if not external:
        os.replace(path, dst)
        return
    model = onnx.load(path)
    onnx.save_model(
        model,
        dst,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=os.path.basename(dst) + ".data",
        size_threshold=1024,
    )
