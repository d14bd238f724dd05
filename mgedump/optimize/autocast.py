"""Mixed precision decided from the test data (docs/bundle.md#float16-what-stays-float32), as NVIDIA's AutoCast and onnxconverter-common's
auto mixed precision do.

Given the float32 model and the test cases:

1. Run the float32 model on the test cases (inputs rounded through float16, as
   the float16 model will get them) with every tensor exposed: the reference.
2. Keep float32 the nodes ``--fp32-nodes`` names, and every node whose float32
   values on the test cases go beyond what float16 holds (65504).
3. Convert (:func:`mgedump.optimize.float16.convert`), run the candidate the
   same way, and diff it against the reference (:mod:`mgedump.diagnose.divergence`).
   If every model output is within ``maxerr``, done. Otherwise keep float32
   every node that introduces error above ``maxerr``; when the node that first
   diverges is float32 already (its error comes in through float16-rounded
   inputs), keep the nodes that feed it too. Repeat.

The search stops when the outputs pass, or when nothing is left to keep
float32 (or after :data:`MAX_ROUNDS`), and then refuses with the first
divergence named: a float16 model that destroys the outputs is never written.
"""

from __future__ import annotations

import copy
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..assertion import maxerr_hint
from ..diagnose.divergence import CaseDiff, diff_stream, tensor_err
from ..diagnose.exposed import ModelDumper, RunSettings, dump_to_scratch
from ..diagnose.iodump import IoDump, MemoryDump
from ..errors import OptimizeError
from ..log import logger
from ..options import FLOAT16_MAXERR
from .float16 import FLOAT16_MAX, convert, matching_nodes, name_nodes
from .isolate import Opener

MAX_ROUNDS = 12


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

    Returns:
        The converted model and the decisions.

    Raises:
        OptimizeError: no mixed-precision model meets ``maxerr``; the message
            names the first divergence and its cause.
    """
    import onnx

    base = onnx.load(base_path)
    name_nodes(base)
    named = os.path.join(scratch, "base.onnx")
    _save(base, named)
    cases = [(k, dict(feeds) if keep_io else _rounded(feeds)) for k, feeds in enumerate(test_inputs)]
    budget = (settings or RunSettings()).budget
    with ModelDumper(named, "reference", settings, label="the float32 model") as dumper:
        # the reference is read once per round: in memory when it fits the budget, on disk otherwise
        ref = dumper.collect(cases) if dumper.estimate(cases) <= budget else dump_to_scratch(dumper, cases, scratch)
    outputs = [v.name for v in base.graph.output]
    if not keep_io:  # float32 outputs have no float16 rounding of their own
        _check_rounding_floor(ref, outputs, maxerr, mode)
    op_types = {node.name: node.op_type for node in base.graph.node}
    kept: dict[str, str] = {}
    kept.update(matching_nodes(base, fp32_nodes))
    for name, why in _range_rule(ref, base).items():
        kept.setdefault(name, why)
    last: CaseDiff | None = None
    depth, last_first, stopped = 1, None, ""
    with Opener() as opener:  # every candidate is opened in a child first: a crash there is a refusal
        for rounds in range(1, MAX_ROUNDS + 1):
            candidate = copy.deepcopy(base)
            conversion = convert(candidate, mode, kept, keep_io=keep_io)
            path = os.path.join(scratch, f"candidate-{rounds}.onnx")
            _save(candidate, path)
            opener.check(path, f"--enable-{mode}")
            diffs = []
            with ModelDumper(path, f"candidate-{rounds}", settings, label="the float16 model") as dumper:
                nodes = dumper.runner.plan.nodes
                for k, feeds in cases:  # each candidate tensor is compared as it comes, never stored
                    tensors = dumper.runner.tensors(_as_inputs_of(candidate, feeds))
                    reference: Any = ref.cases[k]  # in memory or on disk: read the same way
                    case = diff_stream(k, reference, nodes, tensors, maxerr)
                    diffs.append(case)
            failing = [case for case in diffs if any(e > maxerr for e in _output_errs(case, outputs).values())]
            worst = max((e for case in diffs for e in _output_errs(case, outputs).values()), default=0.0)
            _say_round(mode, rounds, kept, failing, outputs, worst, maxerr)
            if not failing:
                return Autocast(candidate, mode, kept, op_types, dict(conversion.weights32), rounds, worst)
            last = failing[0]
            origins = _Origins(base)
            origins.learn(nodes)
            first = last.first_divergence
            node = origins.node(first.node) if first is not None else None
            # the same node diverging again: keep twice as deep a region above it this time
            depth = depth * 2 if node is not None and node.name == last_first else 1
            last_first = node.name if node is not None else None
            added = _keep_more(last, kept, origins, maxerr, depth)
            if not added:
                stopped = "nothing is left to keep float32"
                if node is not None:
                    stopped = (
                        f"node {node.name!r}, where it first diverges, is float32 already, and so is every node that "
                        "feeds it"
                    )
                break
        else:
            stopped = f"the search stopped after {MAX_ROUNDS} rounds"
    raise _refusal(last, maxerr, mode, stopped, kept, outputs)


def _say_round(
    mode: str,
    rounds: int,
    kept: Mapping[str, str],
    failing: Sequence[CaseDiff],
    outputs: Sequence[str],
    worst: float,
    maxerr: float,
) -> None:
    """One line per search round: with -v, and on a terminal (where a long search shows it is moving)."""
    if failing:
        errs = _output_errs(failing[0], outputs)
        name = max(errs, key=lambda n: errs[n])
        state = f"output {name!r} misses --maxerr {maxerr:g} (err {errs[name]:.3g}, test case {failing[0].test_case})"
    else:
        state = f"every output within --maxerr {maxerr:g} (worst err {worst:.3g})"
    line = f"{mode} search round {rounds}: {len(kept)} node(s) kept float32; {state}"
    logger.debug(line)
    if sys.stderr.isatty() and not logger.isEnabledFor(logging.DEBUG) and logger.isEnabledFor(logging.WARNING):
        print(f"mgedump: {line}", file=sys.stderr, flush=True)


class _Origins:
    """Maps the float16 model's nodes and tensors back to the float32 model's: the Casts the conversion added carry
    another node's tensor (``x__f32`` is ``x``; ``x__cast_store`` writes ``x`` for x's producer)."""

    def __init__(self, base: Any) -> None:
        self.producers = _producers(base)
        self.base_nodes = {node.name: node for node in base.graph.node}
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


def _check_rounding_floor(ref: IoDump | MemoryDump, outputs: Sequence[str], maxerr: float, mode: str) -> None:
    """Refuse at once when rounding the float32 outputs to float16 alone misses maxerr: the model's outputs are
    float16 in both modes, so no search can do better.

    The floor is each output's own float16 rounding at its largest value: float16 holds 11 significant bits, so a
    value of 34.7 is stored to within 2**-6 (0.0156). ``--keep-io-types`` keeps the outputs float32 and removes it.

    Raises:
        OptimizeError: with the error that rounding alone gives, where, and the choices that would pass.
    """
    worst, where, scale, largest = 0.0, "", 0.0, 0.0
    for number, case in ref.cases.items():
        for name in outputs:
            if name not in case.by_name or case.by_name[name]["dtype"] != "float32":
                continue
            value = case.tensor(name)
            err = tensor_err(name, value, value.astype(np.float16).astype(np.float32)).err
            top = float(np.abs(value[np.isfinite(value)]).max(initial=0.0))
            if err > worst:
                worst, where, largest = err, f"(name={name}, test case {number})", top
            scale = max(scale, top)
    if worst > maxerr:
        step = float(np.spacing(np.float16(largest))) if largest else 0.0
        hint = maxerr_hint(worst, scale)
        keep = "--keep-io-types keeps the model's inputs and outputs float32 and removes this floor"
        raise OptimizeError(
            f"the optimised model misses --maxerr {maxerr:g}: err={worst:.3g} {where}: --enable-{mode} makes the "
            f"model's outputs float16, and rounding them to float16 alone gives that error (the output reaches "
            f"{largest:.4g}, where float16 values are {step:g} apart)",
            hint=f"{hint}, or {keep}" if hint else keep,
        )


def _keep_more(case: CaseDiff, kept: dict[str, str], origins: _Origins, maxerr: float, depth: int = 1) -> int:
    """Keep float32 the nodes that introduce error; if they are all kept already, the nodes that feed the first, up
    to ``depth`` levels of them at once (a whole region, when one level did not do)."""
    added = 0
    for diff in case.introducers():
        node = origins.node(diff.node)
        if node is not None and node.name not in kept:
            cause = f"; {diff.cause}" if diff.cause else ""
            kept[node.name] = (
                f"introduces err {diff.err:.3g} above maxerr {maxerr:g} on test case {case.test_case}{cause}"
            )
            added += 1
    if added:
        return added
    first = case.first_divergence
    node = origins.node(first.node) if first is not None else None
    if node is None:
        return 0
    # the error comes in through float16-rounded inputs: climb through the producers kept float32 already, and keep
    # the nearest ones that are not
    frontier, seen, levels = [node], {node.name}, 0
    while frontier and (not added or levels < depth):
        levels += 1
        feeders = []
        for current in frontier:
            for name in current.input:
                feeder = origins.producers.get(origins.tensor(name))
                if feeder is None or feeder.name in seen:
                    continue
                seen.add(feeder.name)
                feeders.append(feeder)
                if feeder.name not in kept:
                    kept[feeder.name] = f"feeds {node.name!r} ({node.op_type}), which diverges even in float32"
                    added += 1
        frontier = feeders
    return added


def _refusal(
    case: CaseDiff | None,
    maxerr: float,
    mode: str,
    stopped: str = "",
    kept: Mapping[str, str] | None = None,
    outputs: Sequence[str] = (),
) -> OptimizeError:
    """The search found no model that meets maxerr: which output fails, why the search stopped, what it kept float32,
    and where the last candidate first diverged."""
    flag = f"--enable-{mode}"
    if case is not None and outputs and stopped:
        errs = _output_errs(case, outputs)
        name = max(errs, key=lambda n: errs[n])
        names = list(kept or {})
        shown = ", ".join(repr(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        stopped = (
            f"; output {name!r} misses it (err {errs[name]:.3g}, test case {case.test_case}); {stopped}; "
            f"kept float32: {len(names)} node(s){': ' + shown if names else ''}"
        )
    if case is None or case.first_divergence is None:
        worst = case.worst() if case is not None else None
        where = f" (worst: {worst.name!r}, err {worst.err:.3g})" if worst is not None else ""
        return OptimizeError(
            f"{flag}: no mixed-precision model meets --maxerr {maxerr:g}{where}; the outputs themselves are float16",
            hint=f"float16 outputs hold about 3 significant digits: use --maxerr {FLOAT16_MAXERR:g} or above, or leave the flag out",
        )
    first = case.first_divergence
    cause = f" ({first.cause})" if first.cause else ""
    return OptimizeError(
        f"{flag}: even with the nodes that diverge kept float32, the model misses --maxerr {maxerr:g}{stopped}; first "
        f"divergence on test case {case.test_case}: node {first.node.name!r} ({first.node.op_type}), output "
        f"{first.output.name!r} err {first.err:.3g}{cause}",
        hint=f"keep more of the model float32 with --fp32-nodes, or leave {flag} out",
    )
