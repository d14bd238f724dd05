"""int8 for inference: onnxruntime's quantizer, proved on the test data (``--quantize int8``).

The quantization itself is onnxruntime's (:mod:`onnxruntime.quantization`);
this module decides what it may quantize and proves the result:

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

import contextlib
import inspect
import io
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.errors import MgeError, ModelError, OptimizeError
from ..diagnose.divergence import INTRODUCES_FACTOR, TensorErr, tensor_err
from ..diagnose.exposed import ModelDumper, RunSettings, dump_to_scratch
from ..measure.assertion import assert_equal, maxerr_hint
from ..model.runtime import infer, open_session, tensor_infos, to_numpy_outputs
from ..options import CALIBRATE_METHODS
from .float16 import matching_nodes, name_nodes
from .isolate import Opener, worst_output

MODES = ("static", "dynamic")  # QDQ calibrated ahead, or MatMul weights only
STATIC, DYNAMIC = MODES
METHODS = CALIBRATE_METHODS
DEFAULT_METHOD = CALIBRATE_METHODS[0]  # MinMax: measured as accurate as Entropy and faster, Percentile worse (README)
PER_CHANNEL_OPSET = 13  # DequantizeLinear's axis (per-channel scales) came with opset 13
DYNAMIC_OPS = ("MatMul", "Attention", "LSTM")
QUANTIZED_OPS = ("DequantizeLinear", "QuantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger")
TOP1_MIN_CLASSES = 2  # an output whose last axis holds this many scores or more is a score vector
MAX_HINT_NODES = 8
DESTROYED_SHARE = 0.25  # an absolute error beyond this share of an output's largest magnitude destroys it
HEAVY_OPS = (
    "Conv",
    "ConvTranspose",
    "MatMul",
    "Gemm",
    "Attention",
    "LSTM",
    "GRU",
)  # where int8 saves time  # a refusal names at most this many nodes to keep float


@dataclass
class OutputStats:
    """One output of the int8 model against the model as given, over every test case."""

    name: str
    max_abs_err: float
    p99_abs_err: float
    mean_abs_err: float
    assert_err: float
    top1_agreement: float | None = None  # the share of score vectors whose best class is unchanged
    top1_rows: int = 0
    scale: float = 0.0  # the largest magnitude of the expected output

    @property
    def destroyed(self) -> bool:
        """int8 has taken the output's meaning: a non-finite error, an error beyond a quarter of the output's own
        scale, or the best class changed on half the score vectors or more."""
        return (
            not np.isfinite(self.max_abs_err)
            or not np.isfinite(self.assert_err)
            or self.max_abs_err > DESTROYED_SHARE * max(self.scale, 1e-6)
            or (self.top1_agreement is not None and self.top1_agreement <= 0.5)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "max_abs_err": self.max_abs_err,
            "p99_abs_err": self.p99_abs_err,
            "mean_abs_err": self.mean_abs_err,
            "assert_err": self.assert_err,
            "top1_agreement": self.top1_agreement,
            "top1_rows": self.top1_rows,
            "scale": self.scale,
        }

    def line(self) -> str:
        top1 = "" if self.top1_agreement is None else f", top-1 agreement {self.top1_agreement:.1%} of {self.top1_rows}"
        return (
            f"output {self.name!r}: max abs err {self.max_abs_err:.3g}, p99 {self.p99_abs_err:.3g}, "
            f"mean {self.mean_abs_err:.3g} (AssertEqual err {self.assert_err:.3g}){top1}"
        )


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


# ---------------------------------------------------------------- onnxruntime's quantizer


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
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
    return next((op.version for op in model.opset_import if (op.domain or "") in ("", "ai.onnx")), 0)


class _Quantizer:
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
        from onnxruntime import quantization as q  # type: ignore[import-untyped]

        self.count += 1
        out = os.path.join(self.scratch, f"int8-{self.count}.onnx")
        excluded = sorted(exclude)
        try:
            with _quiet():
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
    from onnxruntime.quantization import CalibrationMethod  # type: ignore[import-untyped]

    return {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy}.get(
        method, CalibrationMethod.Percentile
    )


# ---------------------------------------------------------------- measuring a candidate


def _run_all(path: str, cases: Sequence[Mapping[str, np.ndarray]], label: str) -> list[list[np.ndarray]]:
    session = open_session(path, label=label)
    outputs = tensor_infos(session.get_outputs(), "output")
    got = []
    for feeds in cases:
        try:
            got.append(to_numpy_outputs(infer(session, dict(feeds)), outputs))
        except MgeError as exc:
            raise OptimizeError(f"the int8 model fails to run on the test data: {exc.message}") from None
    return got


@dataclass
class _Measure:
    """A candidate's outputs against the expected ones."""

    errs: list[dict[str, float]]  # per test case: output -> AssertEqual err (inf when it cannot agree)
    scale: float

    @property
    def worst(self) -> tuple[float, str, int]:
        """(err, output, test case) of the worst output."""
        return worst_output(self.errs)

    def passes(self, maxerr: float, bounds: Mapping[str, float] | None = None) -> bool:
        """Every output within its bound: its own (``bounds``), else ``maxerr``."""
        own = bounds or {}
        return all(err <= own.get(name, maxerr) for errs in self.errs for name, err in errs.items())


def _measure(names: Sequence[str], expected: Sequence[Sequence[np.ndarray]], got: Sequence[Sequence[np.ndarray]]):
    errs, scale = [], 0.0
    for want_case, got_case in zip(expected, got, strict=True):
        case = {}
        for name, want, have in zip(names, want_case, got_case, strict=True):
            check = assert_equal(name, want, have, 0.0)
            case[name] = float("inf") if check.err is None else check.err
            if want.dtype.kind == "f" and want.size:
                finite = np.abs(want[np.isfinite(want)])
                scale = max(scale, float(finite.max(initial=0.0)))
        errs.append(case)
    return _Measure(errs, scale)


def output_stats(
    names: Sequence[str], expected: Sequence[Sequence[np.ndarray]], got: Sequence[Sequence[np.ndarray]]
) -> list[OutputStats]:
    """Per output, over every test case: max, 99th percentile and mean absolute error, the AssertEqual error, and
    top-1 agreement when the output is a score vector (float, its last axis 2 or more long)."""
    stats = []
    for k, name in enumerate(names):
        diffs, agree, rows, worst, scale = [], 0, 0, 0.0, 0.0
        floats = True
        for want_case, got_case in zip(expected, got, strict=True):
            want, have = np.asarray(want_case[k]), np.asarray(got_case[k])
            check = assert_equal(name, want, have, 0.0)
            worst = max(worst, float("inf") if check.err is None else check.err)
            if want.dtype.kind != "f" or want.shape != have.shape:
                floats = floats and want.dtype.kind == "f"
                continue
            diffs.append(np.abs(want.astype(np.float64) - have.astype(np.float64)).reshape(-1))
            finite = want[np.isfinite(want)]
            scale = max(scale, float(np.abs(finite).max(initial=0.0)))
            if _scores(want):
                a = want.reshape(-1, want.shape[-1]).argmax(axis=-1)
                b = have.reshape(-1, have.shape[-1]).argmax(axis=-1)
                agree += int((a == b).sum())
                rows += int(a.size)
        every = np.concatenate(diffs) if diffs else np.zeros(0)
        if every.size and not np.isfinite(every).all():
            every = np.append(every[np.isfinite(every)], np.inf)
        stats.append(
            OutputStats(
                name,
                float(every.max()) if every.size else 0.0,
                float(np.percentile(every, 99)) if every.size else 0.0,
                float(every.mean()) if every.size else 0.0,
                worst,
                (agree / rows) if rows and floats else None,
                rows if floats else 0,
                scale,
            )
        )
    return stats


def _scores(value: np.ndarray) -> bool:
    """Whether an output holds score vectors along its last axis: a batch of them ([N, C]), or probabilities (each
    vector non-negative, summing to 1) in more dims ([N, T, C]). A detector's [N, 4 + C, boxes] is neither."""
    if value.ndim < 2 or value.shape[-1] < TOP1_MIN_CLASSES or not np.isfinite(value).all():
        return False
    if value.ndim == 2:
        return True
    return bool((value >= 0).all() and np.allclose(value.sum(axis=-1), 1.0, atol=1e-2))


# ---------------------------------------------------------------- where the error comes from


@dataclass
class _NodeErr:
    name: str
    op_type: str
    case: int
    err: float  # its outputs' worst error
    carried: float  # the worst error its inputs carry in
    output: TensorErr

    @property
    def introduced(self) -> float:
        return max(self.err - self.carried, 0.0)

    def introduces(self, maxerr: float) -> bool:
        return self.err > maxerr and (self.carried <= maxerr or self.err > INTRODUCES_FACTOR * self.carried)

    def describe(self) -> str:
        out = self.output
        where = ""
        if out.index is not None:
            where = f" (worst element at {list(out.index)}: float {out.a_value}, int8 {out.b_value})"
        elif out.reason:
            where = f" ({out.reason})"
        return (
            f"node {self.name!r} ({self.op_type}), output {out.name!r} err {self.err:.3g}{where}; "
            f"its inputs carry err {self.carried:.3g}"
        )


def _touched(base: Any, candidate: Any) -> list[str]:
    """The base model's nodes that int8 changed: replaced (dynamic), or reading a dequantized tensor (QDQ)."""
    dequantized = {o for n in candidate.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    by_name = {n.name: n for n in candidate.graph.node}
    found = []
    for node in base.graph.node:
        twin = by_name.get(node.name)
        if twin is None or twin.op_type != node.op_type or any(i in dequantized for i in twin.input):
            found.append(node.name)
    return found


def _visible(base: Any, candidate: Any) -> dict[str, str]:
    """Each float tensor of the base model -> the candidate's tensor its readers get: the twin node's output (same
    node name, same slot), through QuantizeLinear and DequantizeLinear when it is quantized. A node the quantizer
    removed (a Relu folded into the range of the tensor before it) or replaced (dynamic) is looked up by its output's
    name. The model's inputs are measured as given, so a reader that quantizes one carries the blame."""
    quantized = {n.input[0]: n.output[0] for n in candidate.graph.node if n.op_type == "QuantizeLinear" and n.input}
    dequantized = {n.input[0]: n.output[0] for n in candidate.graph.node if n.op_type == "DequantizeLinear" and n.input}
    twins = {n.name: n for n in candidate.graph.node}

    def through(name: str) -> str:
        q = quantized.get(name)
        return dequantized.get(q, name) if q is not None else name

    visible = {v.name: v.name for v in base.graph.input}
    for node in base.graph.node:
        twin = twins.get(node.name)
        same = twin is not None and twin.op_type == node.op_type and len(twin.output) == len(node.output)
        for k, name in enumerate(node.output):
            if name:
                visible[name] = through(twin.output[k] if same and twin is not None else name)
    return visible


def _diagnose(
    base_path: str,
    base: Any,
    candidate_path: str,
    cases: Sequence[Mapping[str, np.ndarray]],
    scratch: str,
    settings: RunSettings | None,
) -> list[list[_NodeErr]]:
    """Per test case, the error each node of the base model shows in the candidate, in execution order.

    A candidate tensor that several base tensors become (a Conv and the Relu folded into it) is compared with the
    last of them, and each of their nodes is measured on it: the Relu then introduces nothing, the Conv what both do.
    """
    import onnx

    budget = (settings or RunSettings()).budget
    numbered = list(enumerate(cases))
    with ModelDumper(base_path, "float", settings, label="the float model") as dumper:
        ref = (
            dumper.collect(numbered)
            if dumper.estimate(numbered) <= budget
            else dump_to_scratch(dumper, numbered, scratch)
        )
    visible = _visible(base, onnx.load(candidate_path, load_external_data=False))
    compared_with = {seen: name for name, seen in visible.items()}  # the last base tensor wins
    found = []
    with ModelDumper(candidate_path, "int8", settings, label="the int8 model") as dumper:
        for k, feeds in numbered:
            ref_case = ref.cases[k]
            known = set(ref_case.names)
            errs: dict[str, TensorErr] = {}  # by candidate tensor
            for name, array in dumper.runner.tensors(dict(feeds)):
                original = compared_with.get(name)
                if original is not None and original in known:
                    errs[name] = tensor_err(original, ref_case.tensor(original), array)
            nodes = []
            for node in base.graph.node:
                outs = [errs[visible[o]] for o in node.output if o in visible and visible[o] in errs]
                if not outs:
                    continue
                worst = max(outs, key=lambda t: t.err)
                carried = max((errs[visible[i]].err for i in node.input if visible.get(i) in errs), default=0.0)
                nodes.append(_NodeErr(node.name, node.op_type, k, worst.err, carried, worst))
            found.append(nodes)
    return found


def _rank(diagnosis: Sequence[Sequence[_NodeErr]], touched: Sequence[str]) -> list[_NodeErr]:
    """The touched nodes, the most error introduced first (each at its worst test case)."""
    worst: dict[str, _NodeErr] = {}
    allowed = set(touched)
    for case in diagnosis:
        for node in case:
            if node.name in allowed and (node.name not in worst or node.introduced > worst[node.name].introduced):
                worst[node.name] = node
    return sorted(worst.values(), key=lambda n: -n.introduced)


def _first_divergence(case: Sequence[_NodeErr], maxerr: float) -> _NodeErr | None:
    return next((n for n in case if n.introduces(maxerr)), None)


# ---------------------------------------------------------------- the search


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
    import onnx

    from ..base.errors import UsageError

    if mode not in MODES:
        raise UsageError(f"the int8 mode must be one of {', '.join(MODES)}, got {mode!r}")
    if method not in METHODS:
        raise UsageError(f"the calibration method must be one of {', '.join(METHODS)}, got {method!r}")
    base = onnx.load(base_path)
    name_nodes(base)
    named = os.path.join(scratch, "int8-base.onnx")
    onnx.save_model(base, named, save_as_external_data=external, location="int8-base.onnx.data")
    notes = []
    opset = opset_of(base)
    if per_channel and opset < PER_CHANNEL_OPSET:
        per_channel = False
        notes.append(f"weights per tensor: per-channel scales need opset {PER_CHANNEL_OPSET}, the model has {opset}")
    if mode == DYNAMIC:
        calibration_info = None
    else:
        from_specs = list(calibration_specs) if calibration else ["the test cases"]
        calibration_info = {"cases": len(calibration or test_inputs), "from": from_specs}
    quantizer = _Quantizer(named, mode, method, per_channel, calibration or test_inputs, scratch, external)
    op_types = {node.name: node.op_type for node in base.graph.node}
    names = [v.name for v in base.graph.output]
    kept = matching_nodes(base, fp32_nodes)
    result = Int8Result(
        dst, mode, method if mode == STATIC else None, per_channel, op_types=op_types, calibration=calibration_info
    )
    result.notes = notes
    result.opset = opset

    bounds = dict(output_maxerr or {})
    opener = Opener()  # every candidate is opened in a child first: a crash there is a refusal

    def probe(keep: Mapping[str, str]) -> tuple[str, _Measure, list[list[np.ndarray]]]:
        path = quantizer.quantize(keep)
        opener.check(path, f"--quantize int8 ({mode})")
        got = _run_all(path, test_inputs, "the int8 model")
        result.runs += 1
        return path, _measure(names, expected, got), got

    with opener:
        result, path = _search(
            probe, result, base, named, kept, names, expected, test_inputs, maxerr, mode, scratch, settings, bounds
        )
    result.rounds = quantizer.count
    _move(path, dst, external)
    return result


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
    touched = _touched(base, candidate)
    if not touched:
        raise OptimizeError(
            f"--quantize int8 ({mode}): onnxruntime's quantizer found nothing to quantize in the model"
            + (f" (its {mode} mode quantizes {', '.join(DYNAMIC_OPS)})" if mode == DYNAMIC else "")
        )
    if not measure.passes(maxerr, bounds):
        diagnosis = _diagnose(named, base, path, test_inputs, scratch, settings)
        result.runs += 2
        # the nodes that introduce a tenth of maxerr or more, most first; for a model int8 destroys, only as many as
        # a hint may name (the search then only finds what to suggest, and stays short)
        ranking = [n for n in _rank(diagnosis, [t for t in touched if t not in kept]) if n.introduced >= maxerr / 10]
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
    result.quantized = [t for t in _touched(base, onnx.load(path, load_external_data=False)) if t not in kept]
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


def _keep_ranked(kept: Mapping[str, str], nodes: Sequence[_NodeErr], maxerr: float) -> dict[str, str]:
    """The nodes kept float already, and these, each with why."""
    chosen = dict(kept)
    for node in nodes:
        chosen[node.name] = (
            f"int8 err {node.err:.3g} at its output against {node.carried:.3g} at its inputs on test case "
            f"{node.case} (maxerr {maxerr:g})"
        )
    return chosen


def _bisect(
    probe: Any, kept: Mapping[str, str], ranking: Sequence[_NodeErr], maxerr: float, bounds: Mapping[str, float]
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
    measure: _Measure,
    diagnosis: Sequence[Sequence[_NodeErr]],
    maxerr: float,
    mode: str,
    destroyed: bool,
    found: Any,
    kept: Mapping[str, str],
) -> OptimizeError:
    worst, name, case = measure.worst
    first = _first_divergence(diagnosis[case], maxerr) if case < len(diagnosis) else None
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
