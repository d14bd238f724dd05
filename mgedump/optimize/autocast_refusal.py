"""Why no float16 model meets ``maxerr``, said so that the user can act: the output that misses and by how much,
the floor (the outputs' own float16 rounding, a wide reduction's float16 inputs), a ranking that flips, the
first divergence, and what ``keep_io_types`` would give, measured."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.errors import OptimizeError
from ..base.naming import option_name
from ..diagnose.divergence import CaseDiff, tensor_err
from ..diagnose.iodump import IoDump, MemoryDump
from ..measure.assertion import FLOAT16_MAX, maxerr_hint
from ..options import FLOAT16_MAXERR
from .autocast_culprits import ALL_WHY, SIGNIFICANT, Origins, producers_of
from .autocast_trials import Search, Trial
from .nodes import all_nodes

REORDERING_OPS = ("TopK", "NonMaxSuppression", "ArgMax", "ArgMin", "Unique")


@dataclass
class Floor:
    """The outputs' own float16 rounding: the worst error rounding the float32 outputs to float16 alone gives."""

    err: float = 0.0
    output: str = ""
    case: int = 0
    largest: float = 0.0  # the largest value of that output
    scale: float = 0.0  # the largest value of any output

    @classmethod
    def of(cls, ref: IoDump | MemoryDump, outputs: Sequence[str], stats: Mapping[str, str] | None = None) -> Floor:
        """The floor on the reference's outputs, each under its error statistic (``stats``: the largest if none)."""
        found = cls()
        for number, case in ref.cases.items():
            for name in outputs:
                if name not in case.by_name or case.by_name[name]["dtype"] != "float32":
                    continue
                value = case.tensor(name)
                stat = (stats or {}).get(name, "max")
                err = tensor_err(name, value, value.astype(np.float16).astype(np.float32), stat).err
                top = float(np.abs(value[np.isfinite(value)]).max(initial=0.0))
                if err > found.err:
                    found.err, found.output, found.case, found.largest = err, name, number, top
                found.scale = max(found.scale, top)
        return found


def _reach(largest: float) -> str:
    """How far an output reaches against float16's grid: the spacing of float16 values there, or its overflow."""
    if largest > FLOAT16_MAX:
        return (
            f"the output reaches {largest:.4g}, beyond {FLOAT16_MAX:g}, the largest float16 value: it overflows float16"
        )
    step = float(np.spacing(np.float16(largest))) if largest else 0.0
    return f"the output reaches {largest:.4g}, where float16 values are {step:g} apart"


def floor_refusal(search: Search, floor: Floor, maxerr: float) -> OptimizeError:
    """Rounding the float32 outputs to float16 alone misses maxerr: the model's outputs are float16 in both modes, so
    no search can do better. The floor is the output's own float16 rounding at its largest value (float16 holds 11
    significant bits: 34.7 is stored to within 2**-6, 0.0156), and a wide reduction's float16-stored inputs add to
    it; ``keep_io_types`` keeps the outputs float32 and removes the first: what it gives is measured."""
    mode = search.mode
    maxerr_flag, keep_flag = option_name("maxerr"), option_name("keep_io_types")
    message = (
        f"the optimised model misses {maxerr_flag} {maxerr:g}: err={floor.err:.3g} (name={floor.output}, test case "
        f"{floor.case}): {option_name('precision', mode)} makes the model's outputs float16, and rounding them to float16 alone gives "
        f"that error ({_reach(floor.largest)})"
    )
    reduction = _reduction_floor(search, floor.case, floor.output, maxerr)
    if reduction:
        message += f"; and its {reduction}"
    every = {node.name: ALL_WHY for node in all_nodes(search.base.graph)}
    trial = search.evaluate(every, keep_io=True, label=f"every node float32, {keep_flag}")
    err = trial.worst()[0]
    keep = (
        f"{keep_flag} would pass (err {err:.3g} with every node float32): the inputs and outputs stay float32"
        if trial.passes(maxerr)
        else f"{keep_flag} would not pass either (err {err:.3g} with every node float32)"
    )
    hint = maxerr_hint(floor.err, floor.scale)
    return OptimizeError(message, hint=f"{hint}, or {keep}" if hint else keep)


def _reduction_floor(search: Search, case: int, output: str, maxerr: float) -> str:
    """The MatMul or Gemm on the way to ``output`` whose float16-stored activations alone give the most error (a tenth
    of the bound or more): from the reference's own tensors, float32 arithmetic on its activations rounded to float16
    (weights as they are)."""
    base = search.base
    weights = {init.name: search.values(init) for init in base.graph.initializer}
    producers = producers_of(base)
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
        read = [x for name, x in zip(node.input[:2], (a, b), strict=True) if name not in weights]
        top = max((float(np.abs(x).max(initial=0.0)) for x in read), default=0.0)
        if top > FLOAT16_MAX:
            if found is None or found[0] < float("inf"):
                found = (float("inf"), f"{node.op_type} {node.name!r} reads values up to {top:.4g}, beyond "
                         f"{FLOAT16_MAX:g}, the largest float16 value: stored float16, they overflow")  # fmt: skip
            continue
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


def flips(trial: Trial, output: str, case: int, bound: float) -> bool:
    """The output holds the same values as expected, in another order: a ranking that flipped."""
    want = np.asarray(trial.expected[case][output])
    have = np.asarray(trial.got[case][output])
    if want.shape != have.shape or want.size < 2 or want.dtype.kind not in "fiu":
        return False
    if tensor_err(output, want, have).passes(bound):
        return False
    return tensor_err(output, np.sort(want, axis=None), np.sort(have, axis=None)).passes(bound)


def reordering_between(base: Any, node_name: str | None, output: str) -> Any | None:
    """A TopK, NonMaxSuppression or ArgMax on the way from a node (or anywhere) to an output."""
    producers = producers_of(base)
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


def refusal(
    search: Search,
    trial: Trial,
    diffs: Sequence[CaseDiff],
    origins: Origins,
    maxerr: float,
    floor: bool = True,
) -> OptimizeError:
    """No candidate met maxerr: which output misses it and by how much, why the search stopped, what it kept, the
    floor, and the choices that would pass."""
    flag, keep_flag = option_name("precision", search.mode), option_name("keep_io_types")
    err, name, case = trial.worst()
    number = search.cases[case][0]
    parts = [f"{flag}: output {name!r} misses {option_name('maxerr')} {maxerr:g} (err {err:.3g}, test case {number})"]
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
    reorder = reordering_between(search.base, first_node.name if first_node is not None else None, name)
    if flips(trial, name, case, maxerr):
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
    if search.lost:
        parts.append(search.lost)
    hint = f"keep more of the model float32 with {option_name('fp32_nodes')}, or leave {flag} out"
    if floor and not search.keep_io:
        io_trial = search.evaluate(trial.kept, keep_io=True, label=f"every node float32, {keep_flag}")
        io_err = io_trial.worst()[0]
        if io_trial.passes(maxerr):
            hint = f"{keep_flag} would pass (err {io_err:.3g}): the inputs and outputs stay float32"
        else:
            hint = f"{keep_flag} would not pass either (err {io_err:.3g}); leave {flag} out"
        suggested = maxerr_hint(err, 1.0)
        if suggested and not io_trial.passes(maxerr):
            hint = f"{suggested}; {hint}"
    elif not search.keep_io and floor:
        hint = f"try {keep_flag}, or leave {flag} out"
    if trial.passes(FLOAT16_MAXERR) and maxerr < FLOAT16_MAXERR and not floor:
        hint += f" ({option_name('maxerr')} {FLOAT16_MAXERR:g} suits float16 on most models)"
    return OptimizeError("; ".join(parts), hint=hint)
