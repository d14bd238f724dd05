"""Mixed precision decided from the test data (docs/bundle.md#float16-what-stays-float32), as NVIDIA's AutoCast and onnxconverter-common's
auto mixed precision do.

Given the float32 model and the test cases:

1. Run the float32 model on the test cases (inputs rounded through float16, as
   the float16 model will get them) with every tensor exposed: the reference.
2. Keep float32 the nodes ``--fp32-nodes`` names, and every node whose float32
   values on the test cases go beyond what float16 holds (65504).
3. Convert (:func:`mgedump.optimize.float16.convert`) and run the candidate
   plainly, on the session the child process opened it with
   (:class:`~mgedump.optimize.isolate.Opener`). If every output meets the aim
   (``maxerr`` less the margin), done: one run.
4. Otherwise run that candidate once with every tensor exposed and diff it
   against the reference (:mod:`mgedump.diagnose.divergence`). Rank the nodes
   that introduce error, most against what their inputs carry first, then the
   regions above them, level by level: the nodes that feed them, whose float16
   storage they amplify. Keep float32 the shortest prefix of that ranking that
   passes: 1, 2, 4, ... nodes, then bisected; each step one plain run.
5. When even the whole ranking does not pass, every node float32 (float16 only
   at the inputs and outputs) is tried: if that passes, the rest of the model
   joins the ranking; if not, the floor is float16 storage at the model's own
   inputs and outputs, and the refusal says so, measures what
   ``--keep-io-types`` would give, and names a wide reduction whose float16
   inputs alone miss the bound, or an output whose ranking flips.

A search makes at most :data:`MAX_RUNS` candidate runs; when they are spent it
keeps the smallest set it found to pass. It refuses with the reason when none
passes: a float16 model that destroys the outputs is never written.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.errors import OptimizeError
from ..base.log import logger
from ..diagnose.divergence import CaseDiff, diff_stream, tensor_err
from ..diagnose.exposed import ModelDumper, RunSettings, dump_to_scratch
from ..diagnose.iodump import IoDump, MemoryDump
from ..measure.assertion import maxerr_hint
from ..options import FLOAT16_MAXERR
from .float16 import FLOAT16_MAX, Conversion, _all_nodes, convert, matching_nodes, name_nodes
from .isolate import Opener, worst_output

MAX_RUNS = 10  # candidate runs one search may make (the reference and the diagnosis apart)
SIGNIFICANT = 0.1  # a node whose output err reaches this fraction of the aim may be a culprit ...
AMPLIFIES = 2.0  # ... when its err is at least this many times what its inputs carry in
REFINE = 8  # the bisection of a region's depth stops within an eighth of the depth that passes
REORDERING_OPS = ("TopK", "NonMaxSuppression", "ArgMax", "ArgMin", "Unique")


@dataclass
class Autocast:
    """What the search decided: the converted model and why each node kept float32 did."""

    model: Any
    mode: str
    kept: dict[str, str] = field(default_factory=dict)  # node name -> why
    op_types: dict[str, str] = field(default_factory=dict)
    weights32: dict[str, str] = field(default_factory=dict)
    rounds: int = 0
    worst: float = 0.0
    aim: float = 0.0
    casts: int = 0
    notes: list[str] = field(default_factory=list)
    path: str = ""  # the model as the search ran it (in the scratch folder)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "kept_float32": [
                {"node": name, "op_type": self.op_types.get(name, ""), "why": why} for name, why in self.kept.items()
            ],
            "weights_float32": [{"weight": name, "why": why} for name, why in self.weights32.items()],
            "search_rounds": self.rounds,
        }


def _save(model: Any, path: str) -> None:
    import onnx

    large = model.ByteSize() > (1 << 31) - (64 << 20)
    onnx.save_model(model, path, save_as_external_data=large, location=os.path.basename(path) + ".data")


def _rounded(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The inputs as the float16 model gets them: float32 data rounded through float16."""
    return {k: (v.astype(np.float16).astype(np.float32) if v.dtype == np.float32 else v) for k, v in feeds.items()}


def _as_inputs_of(model: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    from onnx import TensorProto

    types = {v.name: v.type.tensor_type.elem_type for v in model.graph.input}
    half = TensorProto.FLOAT16
    return {
        k: (v.astype(np.float16) if types.get(k) == half and v.dtype == np.float32 else v) for k, v in feeds.items()
    }


def _range_rule(ref: IoDump | MemoryDump, model: Any) -> dict[str, str]:
    """Nodes whose float32 outputs on the test cases go beyond float16's range."""
    kept = {}
    for node in model.graph.node:
        worst = 0.0
        for case in ref.cases.values():
            for name in node.output:
                entry = case.by_name.get(name)
                if entry and entry["dtype"] == "float32" and entry["max"] is not None:
                    worst = max(worst, abs(entry["max"]), abs(entry["min"]))
        if worst > FLOAT16_MAX:
            kept[node.name] = f"float32 values reach {worst:.4g} on the test data, beyond float16's {FLOAT16_MAX:g}"
    return kept


def _producers(model: Any) -> dict[str, Any]:
    return {o: node for node in model.graph.node for o in node.output}


def _output_errs(case: CaseDiff, outputs: Sequence[str]) -> dict[str, float]:
    errs = {t.name: t.err for t in case.tensors}
    return {name: errs.get(name, float("inf")) for name in outputs}


_CAST_NAME = re.compile(r"__(f16|f32)(_\d+)?$")


def _size_hints(ref: IoDump | MemoryDump, names: Sequence[str]) -> dict[str, int]:
    """The bytes of a candidate's tensors, from the reference's: a Cast's output (``x__f16``) sized after ``x``."""
    measured: dict[str, int] = {}
    for case in ref.cases.values():
        for name, entry in case.by_name.items():
            try:
                size = int(np.prod(entry["shape"])) * np.dtype(entry["dtype"]).itemsize
            except TypeError:
                continue
            measured[name] = max(measured.get(name, 0), size)
    hints = {}
    for name in names:
        source = _CAST_NAME.sub("", name)
        if source in measured:
            hints[name] = measured[source]
    return hints


@dataclass
class _Trial:
    """One candidate run plainly on every test case: each output's error against the reference."""

    kept: dict[str, str]
    keep_io: bool
    model: Any
    path: str
    conversion: Conversion
    errs: list[dict[str, float]]  # per test case: output -> err (inf for an exact output that differs)
    got: list[dict[str, np.ndarray]]
    expected: list[dict[str, np.ndarray]]
    run: int

    def worst(self) -> tuple[float, str, int]:
        """(err, output, test case) of the worst output."""
        return worst_output(self.errs)

    def passes(self, bound: float) -> bool:
        return all(err <= bound for errs in self.errs for err in errs.values())


class _Search:
    """The state one search shares: the float32 model, the reference, the child that opens and runs candidates."""

    def __init__(
        self,
        base: Any,
        mode: str,
        cases: list[tuple[int, dict[str, np.ndarray]]],
        ref: IoDump | MemoryDump,
        keep_io: bool,
        scratch: str,
        opener: Opener,
        settings: RunSettings | None,
    ) -> None:
        self.base = base
        self.mode = mode
        self.cases = cases
        self.ref = ref
        self.keep_io = keep_io
        self.scratch = scratch
        self.opener = opener
        self.settings = settings
        self.outputs = [v.name for v in base.graph.output]
        self.runs = 0
        self.diagnoses = 0
        self._trials: dict[tuple[frozenset[str], bool], _Trial] = {}
        self._expected: dict[bool, list[dict[str, np.ndarray]]] = {}
        self.raw_cases: list[dict[str, np.ndarray]] = []
        self.nodes: Sequence[Any] = ()

    # -- runs

    def expected(self, keep_io: bool) -> list[dict[str, np.ndarray]]:
        """The float32 model's outputs the candidates are held to, from a plain run on a session like theirs (the
        exposed reference can differ in float32's last digits, enough to flip a TopK between near-equal scores): on
        the rounded inputs, or for ``--keep-io-types`` on the inputs as given."""
        if keep_io not in self._expected:
            path = os.path.join(self.scratch, "base.onnx")
            feeds = [f for _, f in self.cases] if keep_io == self.keep_io else self.raw_cases
            self._expected[keep_io] = self.opener.run(path, feeds, self.scratch, "the float32 model")
        return self._expected[keep_io]

    def evaluate(self, kept: Mapping[str, str], keep_io: bool | None = None, label: str = "") -> _Trial:
        """Convert with these nodes kept float32, run the candidate plainly and measure its outputs (cached)."""
        keep_io = self.keep_io if keep_io is None else keep_io
        key = (frozenset(kept), keep_io)
        if key in self._trials:
            return self._trials[key]
        self.runs += 1
        candidate = copy.deepcopy(self.base)
        conversion = convert(candidate, self.mode, kept, keep_io=keep_io)
        path = os.path.join(self.scratch, f"candidate-{self.runs}.onnx")
        _save(candidate, path)
        feeds = self.cases if keep_io == self.keep_io else list(enumerate(self.raw_cases))
        inputs = [_as_inputs_of(candidate, f) for _, f in feeds]
        got = self.opener.run(path, inputs, self.scratch, f"--enable-{self.mode}")
        expected = self.expected(keep_io)
        errs: list[dict[str, float]] = []
        shown: list[dict[str, np.ndarray]] = []
        for want, have in zip(expected, got, strict=True):
            errs.append({})
            shown.append({})
            for name in self.outputs:
                value = have[name]
                reference = want[name]
                if reference.dtype != value.dtype and value.dtype == np.float16:
                    reference = reference.astype(np.float16)  # stored as the bundle stores it
                measured = tensor_err(name, reference, value)
                errs[-1][name] = math.inf if measured.exact and measured.err else measured.err
                shown[-1][name] = reference
        trial = _Trial(dict(kept), keep_io, candidate, path, conversion, errs, got, shown, self.runs)
        self._trials[key] = trial
        _say_run(self.mode, trial, label)
        return trial

    def diagnose(self, trial: _Trial, aim: float) -> list[CaseDiff]:
        """Run a candidate with every tensor exposed and compare it with the reference, tensor by tensor."""
        self.diagnoses += 1
        diffs = []
        with ModelDumper(trial.path, f"diagnosis-{trial.run}", self.settings, label="the float16 model") as dumper:
            dumper.runner.hint(_size_hints(self.ref, dumper.runner.plan.tensors))
            nodes = dumper.runner.plan.nodes
            for k, feeds in self.cases:  # each candidate tensor is compared as it comes, never stored
                tensors = dumper.runner.tensors(_as_inputs_of(trial.model, feeds))
                reference: Any = self.ref.cases[k]
                diffs.append(diff_stream(k, reference, nodes, tensors, aim))
            self.nodes = nodes
        return diffs


def choose_precision(
    base_path: str,
    mode: str,
    test_inputs: Sequence[Mapping[str, np.ndarray]],
    *,
    maxerr: float,
    fp32_nodes: Sequence[str] = (),
    scratch: str,
    settings: RunSettings | None = None,
    keep_io: bool = False,
    margin: float = 0.0,
) -> Autocast:
    """Find which nodes must stay float32 for the float16 model to meet ``maxerr`` on the test cases.

    Args:
        base_path: the float32 model (already optimised).
        mode: ``"ioc16"`` or ``"io16xc32"``.
        test_inputs: the test cases' inputs, float32 where the model takes float.
        maxerr: what every model output must meet.
        fp32_nodes: glob patterns of node names or op types to keep float32.
        scratch: a folder for the dumps and candidate models.
        settings: onnxruntime settings for the runs.
        keep_io: the model's float inputs and outputs stay float32 (``--keep-io-types``).
        margin: the search aims at ``maxerr * (1 - margin)``, so data it has not seen has room; where no model
            reaches that aim, it takes one that meets ``maxerr`` and says so.

    Returns:
        The converted model and the decisions.

    Raises:
        OptimizeError: no mixed-precision model meets ``maxerr``; the message
            says which output misses it, why the search stopped, and the floor.
    """
    import onnx

    base = onnx.load(base_path)
    name_nodes(base)
    named = os.path.join(scratch, "base.onnx")
    _save(base, named)
    cases = [(k, dict(feeds) if keep_io else _rounded(feeds)) for k, feeds in enumerate(test_inputs)]
    budget = (settings or RunSettings()).budget
    with ModelDumper(named, "reference", settings, label="the float32 model") as dumper:
        # the reference is read once per diagnosis: in memory when it fits the budget, on disk otherwise
        ref = dumper.collect(cases) if dumper.estimate(cases) <= budget else dump_to_scratch(dumper, cases, scratch)
    outputs = [v.name for v in base.graph.output]
    notes: list[str] = []
    aim = maxerr * (1.0 - margin)
    floor = _Floor.of(ref, outputs) if not keep_io else _Floor()  # float32 outputs have no rounding of their own
    if maxerr >= floor.err > aim:
        notes.append(
            f"{mode}: the outputs' own float16 rounding ({floor.err:.3g}) leaves no room below --maxerr {maxerr:g}: "
            "the search aims at --maxerr itself"
        )
        aim = maxerr
    op_types = {node.name: node.op_type for node in _all_nodes(base.graph)}
    kept: dict[str, str] = {}
    kept.update(matching_nodes(base, fp32_nodes))
    for name, why in _range_rule(ref, base).items():
        kept.setdefault(name, why)
    with Opener() as opener:  # every candidate is opened in a child: a crash there is a refusal
        search = _Search(base, mode, cases, ref, keep_io, scratch, opener, settings)
        search.raw_cases = [dict(feeds) for feeds in test_inputs]
        if floor.err > maxerr:
            raise _floor_refusal(search, floor, maxerr)
        found, aim = _run_search(search, kept, aim, maxerr, notes)
    worst = found.worst()[0]
    if aim < maxerr:
        notes.insert(
            0,
            f"{mode}: aimed at {aim:.3g} (--maxerr {maxerr:g} less the {margin:.0%} --float16-margin: room for data "
            f"the search has not seen); worst err on the test cases {worst:.3g}",
        )
    return Autocast(
        found.model,
        mode,
        found.kept,
        op_types,
        dict(found.conversion.weights32),
        search.runs,
        worst,
        aim,
        found.conversion.casts,
        notes,
        found.path,
    )


def _run_search(
    search: _Search, kept: dict[str, str], aim: float, maxerr: float, notes: list[str]
) -> tuple[_Trial, float]:
    """The search proper (see the module's docstring); returns the trial kept and the aim it met."""
    first = search.evaluate(kept, label="the nodes the data decides on kept float32")
    if first.passes(aim):
        return first, aim
    diffs = search.diagnose(first, aim)
    origins = _Origins(search.base)
    origins.learn(search.nodes)
    for k, errs in enumerate(first.errs):
        for name, err in errs.items():
            if err > aim and _flips(first, name, k, aim):
                reorder = _reordering_between(search.base, None, name)
                via = f": {reorder.op_type} {reorder.name!r} picks by values float16 rounds" if reorder else ""
                notes.append(
                    f"{search.mode}: output {name!r} held the same values in another order in float16 (the ranking "
                    f"flips{via}); what stays float32 holds the order"
                )
                break
        else:
            continue
        break
    culprits = _culprits(diffs, origins, kept, aim)
    regions = _Regions(diffs, origins, kept)
    names = list(culprits)

    def keep(count: int, depth: int) -> dict[str, str]:
        return {**kept, **regions.of({n: culprits[n] for n in names[:count]}, depth)}

    # how many culprits, each with the whole region above it: gallop 1, 2, 4, ... then bisect
    lo, k, hi = 0, 1, 0
    while k <= len(names) and search.runs < MAX_RUNS:
        if search.evaluate(keep(k, DEEP), label=f"{k} of {len(names)} culprit(s), whole regions").passes(aim):
            hi = k
            break
        lo = k
        k = len(names) if k < len(names) < 2 * k else 2 * k
    if hi:
        while hi - lo > 1 and search.runs < MAX_RUNS:
            mid = (lo + hi) // 2
            if search.evaluate(keep(mid, DEEP), label=f"{mid} of {len(names)} culprit(s), whole regions").passes(aim):
                hi = mid
            else:
                lo = mid
        # how deep the regions above them must go: bisect the levels
        low, high = -1, regions.depth_of(dict.fromkeys(names[:hi], ""))
        best = search.evaluate(keep(hi, DEEP))
        while high - low > max(1, high // REFINE) and search.runs < MAX_RUNS:
            mid = (low + high) // 2
            trial = search.evaluate(keep(hi, mid), label=f"{hi} culprit(s), regions {mid} level(s) deep")
            if trial.passes(aim):
                high, best = mid, trial
            else:
                low = mid
        return best, aim
    # the culprits did not do (or the runs ran out): every node float32, float16 only at the inputs and outputs
    every = {node.name: ALL_WHY for node in _all_nodes(search.base.graph)}
    whole = search.evaluate({**every, **keep(len(names), DEEP)}, label="every node float32")
    if not whole.passes(aim):
        if not whole.passes(maxerr):
            raise _refusal(search, whole, diffs, origins, maxerr)
        notes.append(
            f"{search.mode}: even with every node float32 the worst err is {whole.worst()[0]:.3g}: the search aims "
            f"at --maxerr {maxerr:g} itself, with no margin"
        )
        aim = maxerr
    return whole, aim


ALL_WHY = "kept with the rest of the model: the nodes that introduce error, with the regions above them, did not do"
DEEP = 1 << 30  # a region with no depth limit


def _say_run(mode: str, trial: _Trial, label: str) -> None:
    """One line per candidate run: with -v, and on a terminal (where a long search shows it is moving)."""
    err, name, case = trial.worst()
    what = f" ({label})" if label else ""
    line = (
        f"{mode} search run {trial.run}{what}: {len(trial.kept)} node(s) kept float32; worst err {err:.3g} "
        f"(output {name!r}, test case {case})"
    )
    say_progress(line)


def say_progress(line: str) -> None:
    logger.debug(line)
    if sys.stderr.isatty() and not logger.isEnabledFor(logging.DEBUG) and logger.isEnabledFor(logging.WARNING):
        print(f"mgedump: {line}", file=sys.stderr, flush=True)


class _Origins:
    """Maps the float16 model's nodes and tensors back to the float32 model's: the Casts the conversion added carry
    another node's tensor (``x__f32`` is ``x``; ``x__cast_store`` writes ``x`` for x's producer)."""

    def __init__(self, base: Any) -> None:
        self.producers = _producers(base)
        self.base_nodes = {node.name: node for node in base.graph.node}
        self.order = {node.name: k for k, node in enumerate(base.graph.node)}
        self._casts: dict[str, str] = {}  # a Cast's output -> its input

    def learn(self, nodes: Sequence[Any]) -> None:
        for node in nodes:
            if node.name not in self.base_nodes and node.op_type == "Cast" and node.inputs:
                for out in node.outputs:
                    self._casts[out] = node.inputs[0]

    def tensor(self, name: str) -> str:
        seen = set()
        while name in self._casts and name not in seen and name not in self.producers:
            seen.add(name)
            name = self._casts[name]
        return name

    def node(self, node: Any) -> Any | None:
        """The float32 model's node that a float16 model's node stands for."""
        if node.name in self.base_nodes:
            return self.base_nodes[node.name]
        for out in node.outputs:
            producer = self.producers.get(self.tensor(out))
            if producer is not None:
                return producer
        return None


def _culprits(diffs: Sequence[CaseDiff], origins: _Origins, kept: Mapping[str, str], aim: float) -> dict[str, str]:
    """The nodes to try float32 first, with why: a node whose error reaches a tenth of the aim and is at least twice
    what its inputs carry in (failing any, more than they carry), the largest error first."""
    scored: dict[str, tuple[float, float, str]] = {}
    for case in diffs:
        for diff in case.nodes:
            node = origins.node(diff.node)
            if node is None or node.name in kept or not diff.err > SIGNIFICANT * aim:
                continue
            carried = max((e for e in diff.inputs.values()), default=0.0)
            if math.isinf(carried):
                continue  # an infinity carried in: the node that made it is the one
            ratio = diff.err / carried if carried > 0 else math.inf
            if ratio <= 1.0:
                continue
            cause = f"; {diff.cause}" if diff.cause else ""
            why = f"introduces err {diff.err:.3g} (its inputs carry {carried:.3g}) on test case {case.test_case}{cause}"
            if node.name not in scored or (diff.err, ratio) > scored[node.name][:2]:
                scored[node.name] = (diff.err, ratio, why)
    amplifying = [n for n in scored if scored[n][1] >= AMPLIFIES] or list(scored)
    ordered = sorted(amplifying, key=lambda n: (-scored[n][0], -scored[n][1], origins.order.get(n, 0)))
    return {name: scored[name][2] for name in ordered}


class _Regions:
    """The regions above nodes: the nodes that feed them, level by level, through tensors that carry float16's
    rounding (not shapes, exact values or weights); keeping a region float32 keeps what a node amplifies stored
    float32."""

    def __init__(self, diffs: Sequence[CaseDiff], origins: _Origins, kept: Mapping[str, str]) -> None:
        self.origins = origins
        self.kept = kept
        self.carries: dict[str, float] = {}
        for case in diffs:
            for t in case.tensors:
                self.carries[t.name] = max(self.carries.get(t.name, 0.0), t.err)

    def _levels(self, roots: Mapping[str, str]) -> list[dict[str, str]]:
        origins = self.origins
        frontier = [origins.base_nodes[n] for n in roots if n in origins.base_nodes]
        seen = set(roots) | set(self.kept)
        levels = []
        while frontier:
            level: dict[str, str] = {}
            feeders = []
            for current in frontier:
                for name in current.input:
                    tensor = origins.tensor(name)
                    feeder = origins.producers.get(tensor)
                    if feeder is None or feeder.name in seen or self.carries.get(tensor, 0.0) <= 0.0:
                        continue
                    seen.add(feeder.name)
                    feeders.append(feeder)
                    level[feeder.name] = (
                        f"feeds {current.name!r} ({current.op_type}), which amplifies the float16 rounding of what "
                        "it reads: its output stays float32"
                    )
            if level:
                levels.append(level)
            frontier = feeders
        return levels

    def depth_of(self, roots: Mapping[str, str]) -> int:
        return len(self._levels(roots))

    def of(self, roots: Mapping[str, str], depth: int) -> dict[str, str]:
        """The roots and their regions up to ``depth`` levels."""
        found = dict(roots)
        for level in self._levels(roots)[: max(depth, 0)]:
            found.update(level)
        return found


@dataclass
class _Floor:
    """The outputs' own float16 rounding: the worst error rounding the float32 outputs to float16 alone gives."""

    err: float = 0.0
    output: str = ""
    case: int = 0
    largest: float = 0.0  # the largest value of that output
    scale: float = 0.0  # the largest value of any output

    @classmethod
    def of(cls, ref: IoDump | MemoryDump, outputs: Sequence[str]) -> _Floor:
        found = cls()
        for number, case in ref.cases.items():
            for name in outputs:
                if name not in case.by_name or case.by_name[name]["dtype"] != "float32":
                    continue
                value = case.tensor(name)
                err = tensor_err(name, value, value.astype(np.float16).astype(np.float32)).err
                top = float(np.abs(value[np.isfinite(value)]).max(initial=0.0))
                if err > found.err:
                    found.err, found.output, found.case, found.largest = err, name, number, top
                found.scale = max(found.scale, top)
        return found


def _floor_refusal(search: _Search, floor: _Floor, maxerr: float) -> OptimizeError:
    """Rounding the float32 outputs to float16 alone misses maxerr: the model's outputs are float16 in both modes, so
    no search can do better. The floor is the output's own float16 rounding at its largest value (float16 holds 11
    significant bits: 34.7 is stored to within 2**-6, 0.0156), and a wide reduction's float16-stored inputs add to
    it; ``--keep-io-types`` keeps the outputs float32 and removes the first: what it gives is measured."""
    mode = search.mode
    step = float(np.spacing(np.float16(floor.largest))) if floor.largest else 0.0
    message = (
        f"the optimised model misses --maxerr {maxerr:g}: err={floor.err:.3g} (name={floor.output}, test case "
        f"{floor.case}): --enable-{mode} makes the model's outputs float16, and rounding them to float16 alone gives "
        f"that error (the output reaches {floor.largest:.4g}, where float16 values are {step:g} apart)"
    )
    reduction = _reduction_floor(search, floor.case, floor.output, maxerr)
    if reduction:
        message += f"; and its {reduction}"
    every = {node.name: ALL_WHY for node in _all_nodes(search.base.graph)}
    trial = search.evaluate(every, keep_io=True, label="every node float32, --keep-io-types")
    err = trial.worst()[0]
    keep = (
        f"--keep-io-types would pass (err {err:.3g} with every node float32): the inputs and outputs stay float32"
        if trial.passes(maxerr)
        else f"--keep-io-types would not pass either (err {err:.3g} with every node float32)"
    )
    hint = maxerr_hint(floor.err, floor.scale)
    return OptimizeError(message, hint=f"{hint}, or {keep}" if hint else keep)


def _reduction_floor(search: _Search, case: int, output: str, maxerr: float) -> str:
    """The MatMul or Gemm on the way to ``output`` whose float16-stored activations alone give the most error (a tenth
    of the bound or more): from the reference's own tensors, float32 arithmetic on its activations rounded to float16
    (weights as they are)."""
    from onnx import numpy_helper

    base = search.base
    weights = {init.name: numpy_helper.to_array(init) for init in base.graph.initializer}
    producers = _producers(base)
    above, stack = set(), [output]
    while stack:
        node = producers.get(stack.pop())
        if node is None or node.name in above:
            continue
        above.add(node.name)
        stack.extend(node.input)
    dump = search.ref.cases[search.cases[case][0]]
    found: tuple[float, str] | None = None
    for node in base.graph.node:
        if node.name not in above or node.op_type not in ("MatMul", "Gemm") or len(node.input) < 2:
            continue

        def value(name: str) -> np.ndarray | None:
            if name in weights:
                return weights[name].astype(np.float32)
            return dump.tensor(name).astype(np.float32) if name in dump.by_name else None

        a, b = value(node.input[0]), value(node.input[1])
        if a is None or b is None or node.output[0] not in dump.by_name:
            continue
        attrs = {at.name: at for at in node.attribute}
        if node.op_type == "Gemm":
            if "transA" in attrs and attrs["transA"].i:
                a = a.T
            if "transB" in attrs and attrs["transB"].i:
                b = b.T
        stored = [
            x if name in weights else x.astype(np.float16).astype(np.float32)
            for name, x in zip(node.input[:2], (a, b), strict=True)
        ]
        try:
            exact = np.matmul(a, b)
            rounded = np.matmul(*stored)
            if node.op_type == "Gemm":  # alpha * A @ B + beta * C: the bias may take back most of the sum
                alpha = attrs["alpha"].f if "alpha" in attrs else 1.0
                beta = attrs["beta"].f if "beta" in attrs else 1.0
                c = value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
                shift = beta * c if c is not None else 0.0
                exact, rounded = alpha * exact + shift, alpha * rounded + shift
        except ValueError:
            continue
        err = tensor_err(node.output[0], exact, rounded).err
        width = int(a.shape[-1])
        if err >= SIGNIFICANT * maxerr and (found is None or err > found[0]):
            found = (
                err,
                f"{node.op_type} {node.name!r} sums {width} inputs stored float16: their rounding alone gives err "
                f"{err:.3g} at its output",
            )
    return found[1] if found is not None else ""


def _flips(trial: _Trial, output: str, case: int, bound: float) -> bool:
    """The output holds the same values as expected, in another order: a ranking that flipped."""
    want = np.asarray(trial.expected[case][output])
    have = np.asarray(trial.got[case][output])
    if want.shape != have.shape or want.size < 2 or want.dtype.kind not in "fiu":
        return False
    if tensor_err(output, want, have).passes(bound):
        return False
    return tensor_err(output, np.sort(want, axis=None), np.sort(have, axis=None)).passes(bound)


def _reordering_between(base: Any, node_name: str | None, output: str) -> Any | None:
    """A TopK, NonMaxSuppression or ArgMax on the way from a node (or anywhere) to an output."""
    producers = _producers(base)
    stack, seen = [output], set()
    while stack:
        node = producers.get(stack.pop())
        if node is None or node.name in seen:
            continue
        seen.add(node.name)
        if node.op_type in REORDERING_OPS:
            return node
        if node.name == node_name:
            continue
        stack.extend(node.input)
    return None


def _refusal(
    search: _Search,
    trial: _Trial,
    diffs: Sequence[CaseDiff],
    origins: _Origins,
    maxerr: float,
    floor: bool = True,
) -> OptimizeError:
    """No candidate met maxerr: which output misses it and by how much, why the search stopped, what it kept, the
    floor, and the choices that would pass."""
    flag = f"--enable-{search.mode}"
    err, name, case = trial.worst()
    number = search.cases[case][0]
    parts = [f"{flag}: output {name!r} misses --maxerr {maxerr:g} (err {err:.3g}, test case {number})"]
    failing = next((d for d in diffs if d.test_case == number and d.first_divergence is not None), None)
    failing = failing or next((d for d in diffs if d.first_divergence is not None), None)
    first = failing.first_divergence if failing is not None else None
    first_node = origins.node(first.node) if first is not None else None
    if floor:
        parts.append("even with every node float32: the floor is float16 storage at the model's inputs and outputs")
    else:
        names = list(trial.kept)
        shown = ", ".join(repr(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        parts.append(
            f"the search stopped after {search.runs} candidate run(s) with {len(names)} node(s) float32"
            f"{': ' + shown if names else ''}"
        )
    reorder = _reordering_between(search.base, first_node.name if first_node is not None else None, name)
    if _flips(trial, name, case, maxerr):
        via = f" ({reorder.op_type} {reorder.name!r} picks by values float16 rounds)" if reorder is not None else ""
        parts.append(f"its values match as a set but not in order: the ranking flips{via}")
    elif reorder is not None:
        parts.append(f"{reorder.op_type} {reorder.name!r} between the divergence and the output reorders it")
    elif first is not None:
        state = ""
        if first_node is not None:
            state = " (float32 already)" if first_node.name in trial.kept else " (float16)"
        cause = f" ({first.cause})" if first.cause else ""
        parts.append(
            f"first divergence on test case {failing.test_case if failing else number}: node {first.node.name!r} "
            f"({first.node.op_type}){state}, output {first.output.name!r} err {first.err:.3g}{cause}"
        )
    reduction = _reduction_floor(search, case, name, maxerr) if not search.keep_io else ""
    if reduction:
        parts.append(reduction)
    hint = f"keep more of the model float32 with --fp32-nodes, or leave {flag} out"
    if floor and not search.keep_io:
        io_trial = search.evaluate(trial.kept, keep_io=True, label="every node float32, --keep-io-types")
        io_err = io_trial.worst()[0]
        if io_trial.passes(maxerr):
            hint = f"--keep-io-types would pass (err {io_err:.3g}): the inputs and outputs stay float32"
        else:
            hint = f"--keep-io-types would not pass either (err {io_err:.3g}); leave {flag} out"
        suggested = maxerr_hint(err, 1.0)
        if suggested and not io_trial.passes(maxerr):
            hint = f"{suggested}; {hint}"
    elif not search.keep_io and floor:
        hint = f"try --keep-io-types, or leave {flag} out"
    if trial.passes(FLOAT16_MAXERR) and maxerr < FLOAT16_MAXERR and not floor:
        hint += f" (--maxerr {FLOAT16_MAXERR:g} suits float16 on most models)"
    return OptimizeError("; ".join(parts), hint=hint)
