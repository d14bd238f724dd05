"""The float16 search's candidates: converted with some nodes kept float32, run plainly on the session a plain
``mgerun`` would use (in the child that proves it loads, :class:`~mgedump.optimize.isolate.Opener`), each output
measured against the float32 model's; and, when the search needs to know where the error comes from, run again
with every tensor exposed and diffed against the reference, tensor by tensor: in the same child
(:func:`exposed_diffs`), which reads the reference from its io dump and hands the diffs back on disk, so that a
crash or a hang there loses the diagnosis, not the pack."""

from __future__ import annotations

import copy
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.errors import MgeError
from ..base.naming import option_name
from ..diagnose.divergence import CaseDiff, NodeDiff, TensorErr, diff_stream, tensor_err
from ..diagnose.exposed import ModelDumper
from ..diagnose.iodump import IoDump, MemoryDump, NodeInfo
from ..model.session import SessionSettings
from .float16 import Conversion, convert
from .float16_weights import WeightFiles
from .isolate import CandidateFailed, Opener, say_progress, worst_output
from .isolate_call import run_settings, settings_json
from .offline import save as save_model
from .passes import check_saved, too_big


def save(model: Any, path: str, keep: bool = False) -> None:
    """Save a model, with its weights as external data beside it when protobuf's 2 GiB would not hold them (onnx
    then moves them out of the model in memory: with ``keep``, they are read back, for a model used again)."""
    big = too_big(model)
    save_model(model, path, big)
    if big and keep:
        from onnx.external_data_helper import load_external_data_for_model

        load_external_data_for_model(model, os.path.dirname(path))


def rounded(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The inputs as the float16 model gets them: float32 data rounded through float16 (beyond its range: inf, which
    the pack refuses by name)."""
    with np.errstate(over="ignore"):
        return {k: (v.astype(np.float16).astype(np.float32) if v.dtype == np.float32 else v) for k, v in feeds.items()}


def as_inputs_of(model: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The feeds cast to float16 where the model takes a float input as float16."""
    from onnx import TensorProto

    types = {v.name: v.type.tensor_type.elem_type for v in model.graph.input}
    half = TensorProto.FLOAT16
    return {
        k: (v.astype(np.float16) if types.get(k) == half and v.dtype == np.float32 else v) for k, v in feeds.items()
    }


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
class Trial:
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

    def passes(self, maxerr: float) -> bool:
        return all(err <= maxerr for errs in self.errs for err in errs.values())


@dataclass(eq=False)
class Search:
    """The state one search shares: the float32 model, the reference, the child that opens and runs candidates.

    Attributes:
        cases: (number, inputs) of each test case, as the float16 model gets them (rounded unless keep_io).
        ref: the float32 model's every tensor on them, dumped by the child.
        raw_cases: the inputs as given (for the candidates that keep the model's float inputs float32).
        stats: each output's error statistic, where it is not the largest error (``error_stat``).
        weights: the files that hold the base's float32 weights (its candidates hold none; none: the base holds them).
        runs: candidates run so far; diagnoses: runs with every tensor exposed.
        nodes: the last diagnosed candidate's nodes, in execution order.
        lost: why a diagnosis was lost (a crash, a hang, a failure in the child), if one was.
    """

    base: Any
    mode: str
    cases: list[tuple[int, dict[str, np.ndarray]]]
    ref: IoDump
    keep_io: bool
    scratch: str
    opener: Opener
    settings: SessionSettings | None
    raw_cases: list[dict[str, np.ndarray]] = field(default_factory=list)
    stats: Mapping[str, str] = field(default_factory=dict)
    weights: WeightFiles | None = None
    runs: int = 0
    diagnoses: int = 0
    nodes: Sequence[Any] = ()
    lost: str = ""
    _trials: dict[tuple[frozenset[str], bool], Trial] = field(default_factory=dict)
    _expected: dict[bool, list[dict[str, np.ndarray]]] = field(default_factory=dict)

    def values(self, init: Any) -> np.ndarray:
        """A weight of the base, as an array (read from :attr:`weights` when they hold it)."""
        from onnx import numpy_helper

        if self.weights is not None and self.weights.holds(init):
            return self.weights.values(init)
        return numpy_helper.to_array(init)

    @property
    def outputs(self) -> list[str]:
        """The model's outputs, in order."""
        return [v.name for v in self.base.graph.output]

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

    def evaluate(self, kept: Mapping[str, str], keep_io: bool | None = None, label: str = "") -> Trial:
        """Convert with these nodes kept float32, run the candidate plainly and measure its outputs (cached)."""
        keep_io = self.keep_io if keep_io is None else keep_io
        key = (frozenset(kept), keep_io)
        if key in self._trials:
            return self._trials[key]
        self.runs += 1
        candidate = copy.deepcopy(self.base)  # a graph: its weights lie in self.weights' files, never copied
        conversion = convert(candidate, self.mode, kept, keep_io=keep_io, weights=self.weights)
        path = os.path.join(self.scratch, f"candidate-{self.runs}.onnx")
        save(candidate, path, keep=True)  # the chosen candidate's model is the mode's model
        if self.weights is not None:  # its weights in files: checked by path
            check_saved(path, "the float16 model")
        feeds = self.cases if keep_io == self.keep_io else list(enumerate(self.raw_cases))
        inputs = [as_inputs_of(candidate, f) for _, f in feeds]
        what = f"{option_name('precision', self.mode)}, candidate {self.runs} ({len(kept)} node(s) kept float32)"
        got = self.opener.run(path, inputs, self.scratch, what)
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
                measured = tensor_err(name, reference, value, self.stats.get(name, "max"))
                errs[-1][name] = math.inf if measured.exact and measured.err else measured.err
                shown[-1][name] = reference
        trial = Trial(dict(kept), keep_io, candidate, path, conversion, errs, got, shown, self.runs)
        self._trials[key] = trial
        _say_run(self.mode, trial, label)
        return trial

    def diagnose(self, trial: Trial, aim: float) -> list[CaseDiff] | None:
        """Run a candidate with every tensor exposed, in the child, and compare it with the reference, tensor by
        tensor (:func:`exposed_diffs`); None when the child died there, hung or failed (:attr:`lost` says so)."""
        self.diagnoses += 1
        what = (
            f"{option_name('precision', self.mode)}, candidate {trial.run} ({len(trial.kept)} node(s) kept float32) "
            "with every tensor exposed"
        )
        try:
            diffs, self.nodes = self.opener.call(
                f"{__name__}:exposed_diffs",
                [as_inputs_of(trial.model, feeds) for _, feeds in self.cases],
                self.scratch,
                what,
                (CaseDiff, NodeDiff, TensorErr, NodeInfo),
                numbers=[k for k, _ in self.cases],
                path=trial.path,
                sha256=f"diagnosis-{trial.run}",
                reference=self.ref.folder,
                aim=aim,
                settings=settings_json(self.settings),
            )
        except MgeError as exc:
            cause = exc.cause if isinstance(exc, CandidateFailed) else exc.message
            self.lost = f"the diagnosis of candidate {trial.run} (its run with every tensor exposed) was lost: {cause}"
            return None
        return diffs  # type: ignore[no-any-return]


def exposed_diffs(
    cases: Sequence[Mapping[str, np.ndarray]],
    numbers: Sequence[int],
    path: str,
    sha256: str,
    reference: str,
    aim: float,
    settings: Mapping[str, Any] | None,
) -> tuple[list[CaseDiff], list[NodeInfo]]:
    """What :meth:`Search.diagnose` has the child do: the candidate at ``path`` run with every tensor exposed on each
    test case (numbered ``numbers``) and compared with the reference dump, tensor by tensor; and its nodes, in
    execution order."""
    ref = IoDump(reference)
    diffs = []
    with ModelDumper(path, sha256, run_settings(settings), label="the float16 model") as dumper:
        dumper.runner.hint(_size_hints(ref, dumper.runner.plan.tensors))
        nodes = dumper.runner.plan.nodes
        for k, feeds in zip(numbers, cases, strict=True):  # each candidate tensor is compared as it comes, never stored
            diffs.append(diff_stream(k, ref.cases[k], nodes, dumper.runner.tensors(feeds), aim))
    return diffs, list(nodes)


def _say_run(mode: str, trial: Trial, label: str) -> None:
    """One line per candidate run: with -v, and on a terminal (where a long search shows it is moving)."""
    err, name, case = trial.worst()
    what = f" ({label})" if label else ""
    line = (
        f"{mode} search run {trial.run}{what}: {len(trial.kept)} node(s) kept float32; worst err {err:.3g} "
        f"(output {name!r}, test case {case})"
    )
    say_progress(line)
