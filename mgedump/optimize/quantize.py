"""int8 for inference: onnxruntime's quantizer, proved on the test data (docs/int8.md).

The quantization itself is onnxruntime's (:mod:`onnxruntime.quantization`,
called in :mod:`.quantize_ort`); this module decides what it may quantize and
proves the result (the outputs measured in :mod:`.quantize_stats`, the nodes that
introduce error found in :mod:`.quantize_blame`, the search in
:mod:`.quantize_search`, the share of the model kept float in :mod:`.quantize_macs`):

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

The proof, on the test cases, against the outputs of the model as given, each output held to its bound under its
error statistic (``error_stat``: the largest element error, or its 99th percentile, mean or median):

1. Quantize everything but the nodes ``fp32_nodes`` names; run it in the child. If every output meets its bound,
   done.
2. Otherwise search for the fewest nodes to keep float (:mod:`.quantize_search`): first by the error each node
   introduces, then by what keeping each float buys on the outputs, within a budget of runs and seconds. A model
   int8 destroys is searched like any other.
3. When the nodes kept float carry more than half of the model's multiply-accumulates
   (:data:`~mgedump.optimize.quantize_macs.MAX_FLOAT_SHARE`), int8 has too little left to speed up: refused,
   with the figure and what would have been kept. So no candidate beyond that share is run: the search's last
   candidate is the largest set within it, run as soon as one candidate of the search misses, and when it misses
   too the bound is refused there (every node float is the last candidate when the model's MACs are unknown).

Calibration and proof on empty data (a float input that holds no element in every calibration case, a test case
whose outputs hold none) are refused: ranges calibrated on nothing are onnxruntime's defaults, and a proof on no
element proves nothing.

The result records, per output, what a user needs to pick ``maxerr`` knowingly: the largest, 99th percentile and
mean absolute error, the AssertEqual error (and under the output's statistic), and top-1 agreement for a score
vector.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.bounds import Bounds
from ..base.errors import MgeError, OptimizeError, UsageError
from ..base.naming import option_name
from ..measure.assertion import maxerr_hint
from ..model.session import SessionSettings
from ..options import CALIBRATE_METHODS
from .float16 import check_not_quantized
from .isolate import CandidateFailed, Opener, say_progress
from .nodes import matching_nodes, name_nodes
from .offline import save
from .quantize_blame import diagnose, first_divergence, rank
from .quantize_macs import HEAVY_OPS, MAX_FLOAT_SHARE, Ceiling, Share, float_share
from .quantize_ort import DYNAMIC, DYNAMIC_OPS, STATIC, Quantizer, int8_nodes, integer_ops, opset_of
from .quantize_search import (
    Budget,
    Outcome,
    Searcher,
    benefit_ranking,
    keep_introducing,
    shortest_prefix,
)
from .quantize_stats import measure, output_stats

MODES = (STATIC, DYNAMIC)
METHODS = CALIBRATE_METHODS
DEFAULT_METHOD = CALIBRATE_METHODS[0]  # MinMax: as accurate as Entropy and faster, Percentile worse (docs/int8.md)
PER_CHANNEL_OPSET = 13  # DequantizeLinear's axis (per-channel scales) came with opset 13
__all__ = ["HEAVY_OPS", "METHODS", "MODES", "Int8Result", "quantize_int8"]


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
        search: how the search ranked by benefit, when it had to (its budget, the share kept float); else None.
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
    outputs: list[Any] = field(default_factory=list)
    calibration: dict[str, Any] | None = None
    rounds: int = 0
    runs: int = 0
    search: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        found = {
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
        if self.search is not None:
            found["search"] = self.search
        return found


@dataclass
class _Proof:
    """What every candidate is proved on, and against."""

    names: list[str]
    expected: Sequence[Sequence[np.ndarray]]
    test_inputs: Sequence[Mapping[str, np.ndarray]]
    bounds: Bounds
    what: str
    scratch: str
    settings: SessionSettings | None
    opener: Opener

    @property
    def stats(self) -> dict[str, str]:
        """Each output's error statistic."""
        return {name: self.bounds.of(name).stat for name in self.names}


def quantize_int8(
    base_path: str,
    dst: str,
    *,
    test_inputs: Sequence[Mapping[str, np.ndarray]],
    expected: Sequence[Sequence[np.ndarray]],
    bounds: Bounds,
    calibration: Sequence[Mapping[str, np.ndarray]] = (),
    calibration_specs: Sequence[str] = (),
    mode: str = STATIC,
    method: str = DEFAULT_METHOD,
    per_channel: bool = True,
    fp32_nodes: Sequence[str] = (),
    scratch: str,
    external: bool = False,
    settings: SessionSettings | None = None,
    budget: Budget | None = None,
    opener: Opener | None = None,
) -> Int8Result:
    """Quantize the float model at ``base_path`` to int8 and prove it on the test cases; write it to ``dst``.

    Args:
        base_path, dst: the float model to quantize (already optimised), and where the int8 model goes.
        test_inputs, expected: the test cases' inputs, and the outputs of the model as given on each.
        bounds: what every output must meet on every test case (each output's bound, and the statistic of its
            element errors it applies to: ``max``, ``p99``, ``mean``, ``median``).
        calibration, calibration_specs: the cases the static ranges are calibrated on (none: the test cases), and
            where they came from.
        mode, method, per_channel: ``"static"`` or ``"dynamic"``; ``"minmax"``, ``"entropy"`` or
            ``"percentile"``; weights per output channel where the opset allows it.
        fp32_nodes: glob patterns of node names or op types to keep float.
        scratch, external, settings: a folder for the candidates, external data, settings for the exposed runs.
        budget, opener: what the search may spend (default :class:`~.quantize_search.Budget`), and the child
            that opens and runs the candidates (default: one of this search's own).

    Raises:
        UsageError: an unknown mode or method; calibration or proof on empty data.
        ModelError: the quantizer fails on the model.
        OptimizeError: the quantizer finds nothing to quantize; int8 meets the bound only with more than half the
            model's arithmetic kept float; even every node float misses it; the first candidate crashes.
    """
    _check_choices(mode, method)
    what = _what(mode)
    _check_not_empty(test_inputs, expected, calibration or test_inputs, mode, what)
    base, named = _named_base(base_path, scratch, external)
    if mode == STATIC:  # the quantizer fails on tensors quantized already (a scale it does not find)
        check_not_quantized(
            base,
            what,
            because="int8 would quantize again what its quantization dequantizes",
            without=option_name("precision", "int8"),
        )
    opset, notes = opset_of(base), []
    if per_channel and opset < PER_CHANNEL_OPSET:
        per_channel = False
        notes = [f"weights per tensor: per-channel scales need opset {PER_CHANNEL_OPSET}, the model has {opset}"]
    calibration_record = _calibration_record(mode, calibration, calibration_specs, len(test_inputs))
    quantizer = Quantizer(named, mode, method, per_channel, calibration or test_inputs, scratch, external)
    names = [v.name for v in base.graph.output]
    own = opener is None
    opener = opener or Opener()  # every candidate is opened and run in a child: a crash there is no crash of ours
    proof = _Proof(names, expected, test_inputs, bounds, what, scratch, settings, opener)
    op_types = {node.name: node.op_type for node in base.graph.node}
    used_method = method if mode == STATIC else None
    result = Int8Result(dst, mode, used_method, per_channel, opset, op_types=op_types, calibration=calibration_record)
    result.notes = notes
    searcher = Searcher(_prober(quantizer, opener, proof, result), bounds, budget or Budget())
    try:
        path = _search(searcher, proof, result, base, named, matching_nodes(base, fp32_nodes))
    except OptimizeError as exc:  # the candidates skipped on the way are part of why
        if not searcher.skipped:
            raise
        raise type(exc)("; ".join([exc.message, *searcher.skipped]), hint=exc.hint, **_cause_of(exc)) from None
    finally:
        if own:
            opener.close()
    result.notes += searcher.skipped
    result.rounds = quantizer.count
    _move(path, dst, external)
    return result


def _prober(quantizer: Quantizer, opener: Opener, proof: _Proof, result: Int8Result) -> Any:
    """The search's probe: quantize with these nodes kept float, run the candidate in the child, measure it."""
    names, expected = proof.names, proof.expected

    def probe(keep: Mapping[str, str]) -> Outcome:
        path = quantizer.quantize(keep)
        label = f"{proof.what}, candidate {quantizer.count} ({len(keep)} node(s) kept float)"
        runs = opener.run(path, proof.test_inputs, proof.scratch, label)
        got = [[case[name] for name in names] for case in runs]
        result.runs += 1
        outcome = Outcome(dict(keep), path, measure(names, expected, got, proof.stats), got, _mean_abs(expected, got))
        err, output, case = outcome.measure.worst
        say_progress(
            f"int8 search run {quantizer.count}: {len(keep)} node(s) kept float; worst err {err:.3g} (output "
            f"{output!r}, test case {case}), mean abs err {outcome.mean_abs:.3g}"
        )
        return outcome

    return probe


def _cause_of(exc: OptimizeError) -> dict[str, str]:
    """The keyword a :class:`CandidateFailed` is made with, to raise it again with more said."""
    return {"cause": exc.cause} if isinstance(exc, CandidateFailed) else {}


def _what(mode: str) -> str:
    """How messages name the mode: ``--quantize int8 (static)`` on the command line."""
    if mode == STATIC:
        return f"{option_name('precision', 'int8')} (static)"
    return option_name("precision", "int8-dynamic")


def _check_choices(mode: str, method: str) -> None:
    """Raises UsageError for an unknown mode or calibration method."""
    if mode not in MODES:
        raise UsageError(f"the int8 mode must be one of {', '.join(MODES)}, got {mode!r}")
    if method not in METHODS:
        raise UsageError(f"the calibration method must be one of {', '.join(METHODS)}, got {method!r}")


def _check_not_empty(
    test_inputs: Sequence[Mapping[str, np.ndarray]],
    expected: Sequence[Sequence[np.ndarray]],
    calibration: Sequence[Mapping[str, np.ndarray]],
    mode: str,
    what: str,
) -> None:
    """Calibration or proof on empty data is refused: a float input that holds no element in every calibration case
    (its range would be onnxruntime's default), or a test case whose outputs hold none (it proves nothing).

    Raises:
        UsageError: either.
    """
    for k, outputs in enumerate(expected):
        if outputs and all(np.size(value) == 0 for value in outputs):
            raise UsageError(
                f"{what}: test case {k} gives outputs that hold no element: a proof on no element proves nothing",
                hint="give test data of the size the model will see",
            )
    if mode != STATIC or not calibration:
        return
    for name in calibration[0]:
        values = [np.asarray(case[name]) for case in calibration if name in case]
        floats = [v for v in values if v.dtype.kind == "f"]
        if floats and all(v.size == 0 for v in floats):
            raise UsageError(
                f"{what}: input {name!r} holds no element in any of the {len(calibration)} calibration case(s) "
                f"(shape {list(floats[0].shape)}): its range cannot be calibrated on empty data",
                hint=f"give {option_name('calibrate')} data, or test data, of the size the model will see",
            )


def _mean_abs(expected: Sequence[Sequence[np.ndarray]], got: Sequence[Sequence[np.ndarray]]) -> float:
    """The mean absolute error over every float output (of the expected shape) and test case."""
    means = []
    for want_case, got_case in zip(expected, got, strict=True):
        for want, have in zip(want_case, got_case, strict=True):
            want, have = np.asarray(want), np.asarray(have)
            if want.dtype.kind == "f" and want.shape == have.shape and want.size:
                with np.errstate(all="ignore"):
                    diff = np.abs(want.astype(np.float64) - have.astype(np.float64))
                means.append(float(np.nan_to_num(diff, nan=0.0, posinf=1e30).mean()))
    return float(np.mean(means)) if means else 0.0


def _named_base(base_path: str, scratch: str, external: bool) -> tuple[Any, str]:
    """The float model with every node named (what the search keeps float, by name), and its copy in ``scratch``.

    The search reads the model's structure only: where the weights lie in ``scratch`` already, the copy names the
    same data file and they are never read in (on a 3 GiB model, a copy of the weights in memory through the whole
    search, and another on disk)."""
    import onnx
    from onnx.external_data_helper import load_external_data_for_model

    base = onnx.load(base_path, load_external_data=False)
    folder = os.path.dirname(os.path.abspath(base_path))
    if os.path.realpath(folder) != os.path.realpath(scratch):
        load_external_data_for_model(base, folder)
    name_nodes(base)
    named = os.path.join(scratch, "int8-base.onnx")
    save(base, named, external)
    return base, named


def _calibration_record(
    mode: str, calibration: Sequence[Mapping[str, np.ndarray]], specs: Sequence[str], test_cases: int
) -> dict[str, Any] | None:
    """How many cases calibrate the static ranges and where they come from (none for dynamic int8)."""
    if mode == DYNAMIC:
        return None
    return {"cases": len(calibration) or test_cases, "from": list(specs) if calibration else ["the test cases"]}


def _search(searcher: Searcher, proof: _Proof, result: Int8Result, base: Any, named: str, kept: dict[str, str]) -> str:
    """Quantize, prove, and keep nodes float when the proof fails (the module's docstring); the chosen candidate's
    path, its decisions in ``result``, read off the operators of the model made (:func:`.quantize_ort.int8_nodes`),
    never off the list the quantizer was given."""
    import onnx

    first = searcher.run(kept, last=True)  # a crash of the first candidate is a refusal
    assert first is not None
    touched = int8_nodes(base, onnx.load(first.path, load_external_data=False), result.mode, kept)
    if not touched:
        raise _nothing_quantized(proof, result, base)
    chosen, outcome = kept, first
    if not first.passes(proof.bounds):
        chosen, outcome = _keep_float(searcher, proof, result, base, named, kept, touched, first)
    final = onnx.load(outcome.path, load_external_data=False)
    result.quantized = int8_nodes(base, final, result.mode, chosen)
    anyway = [name for name in chosen if name in result.quantized]
    result.kept = {name: why for name, why in chosen.items() if name not in result.quantized}
    if anyway:
        result.notes.append(
            f"int8: onnxruntime's quantizer quantized {len(anyway)} node(s) it was told to keep float: "
            + ", ".join(anyway[:8])
            + (", ..." if len(anyway) > 8 else "")
        )
    _judge_share(proof, result, base, kept, touched, first)
    result.outputs = output_stats(proof.names, proof.expected, outcome.got, proof.stats)
    return outcome.path


def _nothing_quantized(proof: _Proof, result: Int8Result, base: Any) -> OptimizeError:
    """The first candidate computes no node in integers: the model is quantized already, or holds nothing the
    quantizer quantizes."""
    held = integer_ops(base)
    if held:
        return OptimizeError(
            f"{proof.what}: the model is quantized already ({', '.join(sorted(held))}); onnxruntime's quantizer "
            "adds no integer operator to it",
            hint=f"pack it without {option_name('precision', 'int8')}",
        )
    return OptimizeError(
        f"{proof.what}: onnxruntime's quantizer found nothing to quantize in the model"
        + (f" (its {result.mode} mode quantizes {', '.join(DYNAMIC_OPS)})" if result.mode == DYNAMIC else "")
    )


def _keep_float(
    searcher: Searcher,
    proof: _Proof,
    result: Int8Result,
    base: Any,
    named: str,
    kept: dict[str, str],
    touched: Sequence[str],
    first: Outcome,
) -> tuple[dict[str, str], Outcome]:
    """The fewest nodes to keep float for every output to meet its bound: by the error each introduces, then by
    what each buys on the outputs (:mod:`.quantize_search`). No candidate keeping more than
    :data:`MAX_FLOAT_SHARE` of the model's MACs float is run (it would be left out whatever its error): the largest
    set within it is the last candidate, and it is run as soon as one candidate of the search misses, so a bound
    int8 cannot meet is refused early. With the MACs unknown, every node float is the last candidate."""
    maxerr = proof.bounds.default.maxerr
    diagnosis = _diagnosis(searcher, proof, result, named, first)
    free = [t for t in touched if t not in kept]
    proxy = rank(diagnosis, free)
    strong = [n for n in proxy if n.introduced >= maxerr / 10]
    destroyed = any(s.destroyed for s in output_stats(proof.names, proof.expected, first.got))
    ceiling = Ceiling.of(base, proof.test_inputs[0])
    largest: dict[str, str] = {}
    if ceiling is not None:
        ordered = keep_introducing({}, proxy, maxerr)
        ordered.update((name, "kept float with the rest") for name in free if name not in ordered)
        largest = ceiling.largest(kept, ordered.items())
        if len(largest) == len(kept):  # the share allows the search to keep nothing more float
            raise _too_much_float(proof, ceiling, largest, first, None)
        searcher.allows = ceiling.allows
        searcher.on_miss = lambda: _try_largest(searcher, proof, ceiling, largest, first)
    found = None
    if strong and not destroyed:
        keep_strong = lambda k: keep_introducing(kept, strong[:k], maxerr)  # noqa: E731
        length = len(strong) if ceiling is None else ceiling.longest(keep_strong, len(strong))
        if length:
            found = shortest_prefix(searcher, keep_strong, length, complete=False)
    if found is not None:
        return found
    order, measured, alone = benefit_ranking(searcher, kept, proxy, free, first)
    keep_ranked = lambda k: {**kept, **dict(order[:k])}  # noqa: E731
    if alone is not None:
        found = alone
    elif ceiling is None:
        found = shortest_prefix(searcher, keep_ranked, len(order), complete=True)
    else:
        length = ceiling.longest(keep_ranked, len(order))
        found = shortest_prefix(searcher, keep_ranked, length, complete=False) if length else None
        if found is None:  # the largest set the share allows is the last candidate, run whatever the budget
            outcome = searcher.run(largest, last=True)
            assert outcome is not None
            if not outcome.passes(proof.bounds):
                raise _too_much_float(proof, ceiling, largest, first, outcome)
            found = (largest, outcome)
    result.search = {"ranked_by": "benefit", "measured_alone": measured, "budget": searcher.budget.to_json()}
    if found is None:
        raise _every_float_misses(searcher, proof, first, diagnosis, kept, free)
    return found


def _try_largest(searcher: Searcher, proof: _Proof, ceiling: Ceiling, largest: dict[str, str], first: Outcome) -> None:
    """Run the largest set the share allows kept float (once a candidate of the search has missed): when even it
    misses, no set int8 may keep float passes, refused now rather than after the search. Skipped in the child or
    out of budget, the search goes on (it is the search's last candidate).

    Raises:
        OptimizeError: it misses the bounds.
    """
    outcome = searcher.run(largest)
    if outcome is not None and not outcome.passes(proof.bounds):
        raise _too_much_float(proof, ceiling, largest, first, outcome)


def _too_much_float(
    proof: _Proof, ceiling: Ceiling, largest: Mapping[str, str], first: Outcome, outcome: Outcome | None
) -> OptimizeError:
    """No set int8 may keep float meets the bounds: the largest within :data:`MAX_FLOAT_SHARE` misses (``outcome``),
    or the nodes kept float already leave no room (``outcome`` None)."""
    share = Share(ceiling.share(largest), sum(1 for name in ceiling.macs if name in largest), len(ceiling.macs))
    shown = ", ".join(list(largest)[:8]) + (", ..." if len(largest) > 8 else "")
    nodes = f"the {len(largest)} node(s) ({shown})" if largest else "none (each node quantized carries more alone)"
    measured = ""
    if outcome is not None:
        err, name, case = outcome.measure.worst
        measured = f" (with those float: err={err:.3g}, name={name}, test case {case})"
    worst, name, case = first.measure.worst
    return OptimizeError(
        f"{proof.what} meets {option_name('maxerr')} {proof.bounds.default.maxerr:g} only with more kept float than "
        f"{nodes}, {share.text()}, the most it may keep float{measured}: int8 would have too little left to speed "
        f"up (it is left out beyond {MAX_FLOAT_SHARE:.0%}); with every node int8: err={worst:.3g} (name={name}, test "
        f"case {case})",
        hint=maxerr_hint(worst, first.measure.scale) or f"leave {option_name('precision', 'int8')} out",
    )


def _diagnosis(searcher: Searcher, proof: _Proof, result: Int8Result, named: str, first: Outcome) -> list[Any]:
    """Where the first candidate's error comes from (:mod:`.quantize_blame`), run in the child; a crash, a hang or a
    failure there loses the diagnosis, not the pack: said with the candidates skipped, and the search goes on
    without it (nothing ranked by the error each node introduces)."""
    what = f"{proof.what}, candidate 1 ({len(first.kept)} node(s) kept float) with every tensor exposed"
    try:
        diagnosis = diagnose(proof.opener, named, first.path, proof.test_inputs, proof.scratch, proof.settings, what)
    except MgeError as exc:
        cause = exc.cause if isinstance(exc, CandidateFailed) else exc.message
        searcher.skipped.append(
            f"int8: the diagnosis of candidate 1 (its run with every tensor exposed, beside the float model's) was "
            f"lost: {cause}; the search went on without it"
        )
        return []
    result.runs += 2
    return diagnosis


def _every_float_misses(
    searcher: Searcher, proof: _Proof, first: Outcome, diagnosis: Any, kept: Mapping[str, str], free: Sequence[str]
) -> OptimizeError:
    """Even every node float misses the bound: what misses is not int8's (the rewrites before it, or a bound below
    float32's own rounding)."""
    whole = searcher.run({**kept, **dict.fromkeys(free, "")}, last=True)
    worst, name, case = (whole or first).measure.worst
    start, where_name, where_case = first.measure.worst
    divergence = (
        first_divergence(diagnosis[where_case], proof.bounds.default.maxerr) if where_case < len(diagnosis) else None
    )
    where = ""
    if divergence is not None:
        where = f"; with every node int8 the first divergence on test case {where_case}: {divergence.describe()}"
    return OptimizeError(
        f"{proof.what}: even with every node float the model misses {option_name('maxerr')} {proof.bounds.default.maxerr:g}: "
        f"err={worst:.3g} (name={name}, test case {case}; with every node int8 err={start:.3g}, name={where_name})"
        + where,
        hint=maxerr_hint(worst, first.measure.scale)
        or f"check the bound against the model as given, or leave {option_name('precision', 'int8')} out",
    )


def _judge_share(
    proof: _Proof, result: Int8Result, base: Any, user: Mapping[str, str], touched: Sequence[str], first: Outcome
) -> None:
    """Refuse an int8 model that keeps too much of the model float to be worth it (:mod:`.quantize_macs`): more
    than :data:`MAX_FLOAT_SHARE` of its multiply-accumulates once the search kept nodes float, or every heavy node
    when only ``fp32_nodes`` did. Said in a note otherwise.

    Raises:
        OptimizeError: int8 would leave too little to speed up.
    """
    op_types = result.op_types
    searched = [name for name in result.kept if name not in user]
    share = float_share(base, proof.test_inputs[0], result.kept)
    heavy_touched = any(op_types.get(name) in HEAVY_OPS for name in touched)
    heavy_left = any(op_types.get(name) in HEAVY_OPS for name in result.quantized)
    too_much = share.too_much if searched else (heavy_touched and not heavy_left)
    if result.search is not None:
        result.search["float_share"] = None if share.share is None else round(share.share, 4)
    if searched:
        result.notes.append(
            f"int8: the {len(result.kept)} node(s) kept float carry {share.text()}; int8 is left out beyond "
            f"{MAX_FLOAT_SHARE:.0%}"
        )
    if not too_much:
        return
    worst, name, case = first.measure.worst
    shown = ", ".join(list(result.kept)[:8]) + (", ..." if len(result.kept) > 8 else "")
    raise OptimizeError(
        f"{proof.what} meets {option_name('maxerr')} {proof.bounds.default.maxerr:g} only with {len(result.kept)} node(s) kept "
        f"float ({shown}), {share.text()}: int8 would have too little left to speed up (it is left out beyond "
        f"{MAX_FLOAT_SHARE:.0%}); with every node int8: err={worst:.3g} (name={name}, test case {case})",
        hint=maxerr_hint(worst, first.measure.scale) or f"leave {option_name('precision', 'int8')} out",
    )


def _move(path: str, dst: str, external: bool) -> None:
    """The chosen candidate becomes dst (its external data renamed after dst)."""
    import onnx

    if not external:
        os.replace(path, dst)
        return
    save(onnx.load(path), dst, external)
