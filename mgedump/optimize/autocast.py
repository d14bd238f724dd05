"""Mixed precision decided from the test data (docs/bundle.md#float16-what-stays-float32), as NVIDIA's AutoCast and onnxconverter-common's
auto mixed precision do.

Given the float32 model and the test cases:

1. Run the float32 model on the test cases (inputs rounded through float16, as
   the float16 model will get them) with every tensor exposed: the reference,
   dumped by the child process of step 3 into the scratch folder (a crash or a
   hang there is a refusal: there is nothing to search against).
2. Keep float32 the nodes ``fp32_nodes`` names, and every node whose float32
   values on the test cases go beyond what float16 holds (65504).
3. Convert (:func:`mgedump.optimize.float16.convert`) and run the candidate
   plainly, on the session the child process opened it with
   (:class:`~mgedump.optimize.isolate.Opener`). If every output meets the aim
   (``maxerr`` less the margin), done: one run.
4. Otherwise run that candidate once with every tensor exposed and diff it
   against the reference (:mod:`mgedump.diagnose.divergence`), both in the child
   (:meth:`~mgedump.optimize.autocast_trials.Search.diagnose`); when that run is
   lost (a crash, a hang), the search goes on without it, to step 5. Rank the nodes
   that introduce error, most against what their inputs carry first, then the
   regions above them, level by level: the nodes that feed them, whose float16
   storage they amplify. Keep float32 the shortest prefix of that ranking that
   passes: 1, 2, 4, ... nodes, then bisected; each step one plain run.
5. When even the whole ranking does not pass, every node float32 (float16 only
   at the inputs and outputs) is tried: if that passes, the rest of the model
   joins the ranking; if not, the floor is float16 storage at the model's own
   inputs and outputs, and the refusal says so, measures what
   ``keep_io_types`` would give, and names a wide reduction whose float16
   inputs alone miss the bound, or an output whose ranking flips.

A search makes at most :data:`MAX_RUNS` candidate runs; when they are spent it
keeps the smallest set it found to pass. It refuses with the reason when none
passes: a float16 model that destroys the outputs is never written.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.naming import option_name
from ..diagnose.iodump import IoDump
from ..model.session import SessionSettings
from .autocast_culprits import ALL_WHY, Origins, Regions, find_culprits, range_rule
from .autocast_refusal import Floor, flips, floor_refusal, refusal, reordering_between
from .autocast_trials import Search, Trial, rounded, save
from .float16_weights import WeightFiles
from .isolate import Opener
from .isolate_call import settings_json
from .nodes import all_nodes, matching_nodes, name_nodes

MAX_RUNS = 10  # candidate runs one search may make (the reference and the diagnosis apart)
REFINE = 8  # the bisection of a region's depth stops within an eighth of the depth that passes
DEEP = 1 << 30  # a region with no depth limit


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
    weights: WeightFiles | None = None  # the files its weights lie in, until :meth:`load_weights`

    def load_weights(self) -> None:
        """Read the model's weights into it (the search leaves them in files of the scratch folder)."""
        if self.weights is not None:
            self.weights.load(self.model)
            self.weights = None

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "kept_float32": [
                {"node": name, "op_type": self.op_types.get(name, ""), "why": why} for name, why in self.kept.items()
            ],
            "weights_float32": [{"weight": name, "why": why} for name, why in self.weights32.items()],
            "search_rounds": self.rounds,
        }


def choose_precision(
    base_path: str,
    mode: str,
    test_inputs: Sequence[Mapping[str, np.ndarray]],
    *,
    maxerr: float,
    fp32_nodes: Sequence[str] = (),
    scratch: str,
    settings: SessionSettings | None = None,
    keep_io: bool = False,
    margin: float = 0.0,
    error_stats: Mapping[str, str] | None = None,
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
        keep_io: the model's float inputs and outputs stay float32 (``keep_io_types``).
        margin: the search aims at ``maxerr * (1 - margin)``, so data it has not seen has room; where no model
            reaches that aim, it takes one that meets ``maxerr`` and says so.
        error_stats: outputs whose bound applies to another statistic of their element errors than the largest
            (``p99``, ``mean``, ``median``).

    Returns:
        The converted model and the decisions; the model's weights lie in files of ``scratch`` until
        :meth:`Autocast.load_weights`.

    Raises:
        OptimizeError: no mixed-precision model meets ``maxerr``; the message
            says which output misses it, why the search stopped, and the floor.
    """
    base, named, weights = _named_base(base_path, scratch)
    cases = [(k, dict(feeds) if keep_io else rounded(feeds)) for k, feeds in enumerate(test_inputs)]
    outputs = [v.name for v in base.graph.output]
    notes: list[str] = []
    aim = maxerr * (1.0 - margin)
    stats = {name: stat for name, stat in (error_stats or {}).items() if stat != "max"}
    with Opener() as opener:  # every run of a model is made in a child: a crash there is a refusal
        ref = _reference(opener, mode, named, cases, scratch, settings)
        floor = Floor.of(ref, outputs, stats) if not keep_io else Floor()  # float32 outputs: no rounding of their own
        if maxerr >= floor.err > aim:
            notes.append(_no_room(mode, floor.err, maxerr))
            aim = maxerr
        kept = dict(matching_nodes(base, fp32_nodes))
        for name, why in range_rule(ref, base).items():
            kept.setdefault(name, why)
        raw = [dict(feeds) for feeds in test_inputs]
        search = Search(base, mode, cases, ref, keep_io, scratch, opener, settings, raw, stats, weights)
        if floor.err > maxerr:
            raise floor_refusal(search, floor, maxerr)
        found, aim = _run_search(search, kept, aim, maxerr, notes)
    worst = found.worst()[0]
    op_types = {node.name: node.op_type for node in all_nodes(base.graph)}
    if aim < maxerr:
        notes.insert(
            0,
            f"{mode}: aimed at {aim:.3g} ({option_name('maxerr')} {maxerr:g} less the {margin:.0%} "
            f"{option_name('float16_margin')}: room for data the search has not seen); worst err on the test cases "
            f"{worst:.3g}",
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
        weights,
    )


def _no_room(mode: str, floor: float, maxerr: float) -> str:
    return (
        f"{mode}: the outputs' own float16 rounding ({floor:.3g}) leaves no room below {option_name('maxerr')} "
        f"{maxerr:g}: the search aims at {option_name('maxerr')} itself"
    )


def _reference(
    opener: Opener,
    mode: str,
    named: str,
    cases: Sequence[tuple[int, Mapping[str, np.ndarray]]],
    scratch: str,
    settings: SessionSettings | None,
) -> IoDump:
    """The float32 model's every tensor on the test cases, what the candidates are compared with: run in the child
    and dumped into a folder of ``scratch`` (the io dump format), which the child's diagnoses read too.

    Raises:
        CandidateFailed: the child died in that run, or gave no answer in time: the search cannot start.
    """
    flag = option_name("precision", mode)
    folder = tempfile.mkdtemp(prefix="reference-", dir=scratch)
    opener.call(
        "mgedump.optimize.isolate_call:dump_exposed",
        [feeds for _, feeds in cases],
        scratch,
        f"{flag}: the search's reference (the float32 model)",
        (),
        hint=f"leave {flag} out",
        numbers=[k for k, _ in cases],
        path=named,
        sha256="reference",
        folder=folder,
        settings=settings_json(settings),
        label="the float32 model",
    )
    return IoDump(folder)


def _named_base(base_path: str, scratch: str) -> tuple[Any, str, WeightFiles]:
    """The float32 model with every node named (what the search keeps float32, by name), its copy in ``scratch`` (the
    candidates' expected outputs come from a plain run of it), and the files that hold its float32 weights: the model
    in memory holds none (docs/float16.md, "What a search costs")."""
    import onnx
    from onnx.external_data_helper import load_external_data_for_model

    base = onnx.load(base_path, load_external_data=False)
    if os.path.realpath(os.path.dirname(os.path.abspath(base_path))) != os.path.realpath(scratch):
        load_external_data_for_model(base, os.path.dirname(os.path.abspath(base_path)))  # then held in scratch
    weights = WeightFiles(scratch)
    weights.hold(base)
    name_nodes(base)
    named = os.path.join(scratch, "base.onnx")
    save(base, named)
    return base, named, weights


def _run_search(
    search: Search, kept: dict[str, str], aim: float, maxerr: float, notes: list[str]
) -> tuple[Trial, float]:
    """The search proper (see the module's docstring); returns the trial kept and the aim it met."""
    first = search.evaluate(kept, label="the nodes the data decides on kept float32")
    if first.passes(aim):
        return first, aim
    diffs = search.diagnose(first, aim)
    if diffs is None:  # lost in the child: nothing is blamed, and every node float32 is next
        notes.append(f"{search.mode}: {search.lost}; the search went on without it")
        diffs = []
    origins = Origins(search.base)
    origins.learn(search.nodes)
    for k, errs in enumerate(first.errs):
        for name, err in errs.items():
            if err > aim and flips(first, name, k, aim):
                reorder = reordering_between(search.base, None, name)
                via = f": {reorder.op_type} {reorder.name!r} picks by values float16 rounds" if reorder else ""
                notes.append(
                    f"{search.mode}: output {name!r} held the same values in another order in float16 (the ranking "
                    f"flips{via}); what stays float32 holds the order"
                )
                break
        else:
            continue
        break
    culprits = find_culprits(diffs, origins, kept, aim)
    regions = Regions(diffs, origins, kept)
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
    why = f"kept with the rest of the model: {search.lost}" if search.lost else ALL_WHY
    every = {node.name: why for node in all_nodes(search.base.graph)}
    whole = search.evaluate({**every, **keep(len(names), DEEP)}, label="every node float32")
    if not whole.passes(aim):
        if not whole.passes(maxerr):
            raise refusal(search, whole, diffs, origins, maxerr)
        notes.append(
            f"{search.mode}: even with every node float32 the worst err is {whole.worst()[0]:.3g}: the search aims "
            f"at {option_name('maxerr')} {maxerr:g} itself, with no margin"
        )
        aim = maxerr
    return whole, aim
