"""What a pack proves: the expected outputs of the model as given, and every bundled model held to them.

The model as given runs on every test case's inputs as the bundle stores them;
its outputs are the reference. An optimised model (a variant) must meet
maxerr on every test case against that reference, each output's bound
applying to its error statistic (docs/assertion.md); its worst error per
output is what the bundle certifies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.errors import MgeError, OptimizeError, RunError, SpecError
from ..base.log import logger
from ..base.naming import option_name
from ..data import TestCase
from ..data.casts import as_inputs_of
from ..model.runtime import TensorInfo, infer, to_values
from ..model.valuetype import leaves
from ..options import PackOptions

Stage = Callable[[str], None]


@dataclass(frozen=True)
class Opened:
    """A model opened in onnxruntime, with its inputs and outputs."""

    path: str
    session: Any
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]


@dataclass(frozen=True)
class StoredCase:
    """A test case as the bundle stores it: inputs in the stored dtypes, expected outputs from the model as
    given."""

    case: TestCase
    inputs: list[tuple[str, np.ndarray]]
    expected: list[np.ndarray]


@dataclass(frozen=True)
class Proof:
    """A bundled model held to the reference: every check, the worst error per output, and the cases' inputs as
    that model takes them."""

    checks: list[dict[str, Any]]

    @property
    def certified(self) -> dict[str, float | None]:
        """The worst error per output over the test cases (None where one could not be computed)."""
        worst: dict[str, float | None] = {}
        for check in self.checks:
            name, err, before = check["output"], check["err"], worst.get(check["output"], 0.0)
            worst[name] = None if err is None or before is None else max(err, before)
        return worst

    @property
    def worst(self) -> float:
        return max((c["err"] for c in self.checks if c["err"] is not None), default=0.0)


def expected_outputs(
    given: Opened,
    cases: Sequence[TestCase],
    stored: Opened,
    asserted: bool,
    stage: Stage,
    nonfinite_ok: bool = False,
) -> list[StoredCase]:
    """Run the model as given on each case's inputs as ``stored`` takes them (e.g. float16).

    The expected outputs are kept in ``stored``'s output dtypes, so the unzipped bundle is a standard ONNX test
    case for that model.

    Raises:
        SpecError: the model fails to run on a test case, or (``asserted``) an
            output holds NaN or infinity: a bundle that expects it could never pass.
    """
    result = []
    for index, case in enumerate(cases):
        stage(f"running test case {index + 1} of {len(cases)}")
        feeds = as_inputs_of(case.inputs, given.inputs, stored.inputs)
        original = {
            name: (array.astype(info.np_dtype) if info.is_tensor and array.dtype != info.np_dtype else array)
            for (name, array), info in zip(feeds, given.inputs, strict=True)
        }
        where = f"test case {index} ({case.spec.origin}: {case.spec.text!r})"
        defaulted = f"; dims defaulted to 1: {', '.join(case.defaulted)}" if case.defaulted else ""
        try:
            values = infer(given.session, original)
        except RunError as exc:
            hint = f"give the defaulted dims with {option_name('input_shapes')}" if defaulted else exc.hint
            raise SpecError(f"{where}: {exc.message}{defaulted}", hint=hint) from None
        expected = [
            value.astype(info.np_dtype)
            if info.is_tensor and info.dtype != "str" and value.dtype != info.np_dtype
            else value
            for value, info in zip(to_values(values, stored.outputs), stored.outputs, strict=True)
        ]
        if asserted:
            _check_finite(expected, stored.outputs, where, defaulted, nonfinite_ok)
        result.append(StoredCase(case, feeds, expected))
        logger.debug("test case %d (%s): ran", index, case.spec.origin)
    return result


def _check_finite(
    expected: Sequence[np.ndarray], outputs: Sequence[TensorInfo], where: str, defaulted: str, warn: bool = False
) -> None:
    """Refuse expected outputs that hold NaN or infinity (or, with ``warn``, say so: the assertion counts the same
    non-finite value on both sides as agreeing, docs/assertion.md)."""
    for value, info in zip(expected, outputs, strict=True):
        nonfinite = [leaf for leaf in leaves(value) if leaf.dtype.kind == "f" and not np.isfinite(leaf).all()]
        if nonfinite:
            bad = sum(int(a.size - np.count_nonzero(np.isfinite(a))) for a in nonfinite)
            size = sum(a.size for a in leaves(value))
            if warn:
                logger.warning(
                    "%s: the model's output %r holds NaN or infinity (%d of %d elements)", where, info.name, bad, size
                )
                continue
            raise SpecError(
                f"{where}: the model's output {info.name!r} holds NaN or infinity ({bad} of {size} "
                f"elements){defaulted}; a bundle that expects it could never pass",
                hint=f"check the range of the test data, or pack with {option_name('no_assert')}",
            )


def self_check(
    bundled: Any,
    stored: Sequence[StoredCase],
    outputs: Sequence[TensorInfo],
    options: PackOptions,
    explain: Callable[[int], str | None],
    given_inputs: Sequence[TensorInfo] | None = None,
    bundled_inputs: Sequence[TensorInfo] | None = None,
) -> Proof:
    """Run a bundled model on every test case; refuse it if it misses maxerr.

    Args:
        explain: names the first divergence of a failing test case (or None).
        given_inputs, bundled_inputs: the stored inputs' infos and the model's, when the model takes other dtypes
            (a variant of a version-2 bundle): the inputs are cast, and its outputs compared by value.

    Raises:
        OptimizeError: with the measured error per output, and either a
            maxerr that would pass (when the error is small against the
            outputs' scale) or the first divergence.
    """
    from ..measure.assertion import by_value, maxerr_hint  # a plain pack proves nothing: not imported by it
    from ..measure.structured import check_value

    results, failures, worst, scale, worst_case = [], [], 0.0, 0.0, 0
    for index, case in enumerate(stored):
        feeds = case.inputs
        if given_inputs is not None and bundled_inputs is not None:
            feeds = as_inputs_of(case.inputs, given_inputs, bundled_inputs)
        try:
            got = to_values(infer(bundled, dict(feeds)), outputs)
        except RunError as exc:
            raise OptimizeError(f"the optimised model fails to run on test case {index}: {exc.message}") from None
        for info, want, have in zip(outputs, case.expected, got, strict=True):
            have = by_value(want, have)
            check = check_value(info.name, want, have, *options.bounds.of(info.name))
            results.append({"case": index, "output": info.name, "err": check.err, "passed": check.passed})
            if check.passed:
                continue
            failures.append(
                f"err={check.err:.3g} (name={info.name}, test case {index})"
                if check.err is not None
                else f"{check.reason} (name={info.name}, test case {index})"
            )
            err = math.inf if check.err is None else check.err
            if err > worst or not failures[:-1]:
                worst, worst_case = err, index
            scale = max(scale, abs(check.stats.get("expect_max") or 0.0), abs(check.stats.get("expect_min") or 0.0))
    if failures:
        message = f"the optimised model misses {option_name('maxerr')} {options.bounds.text()}: " + ", ".join(
            failures[:4]
        )
        message += f" and {len(failures) - 4} more" if len(failures) > 4 else ""
        hint = maxerr_hint(worst, scale)
        if hint is None:
            first = explain(worst_case)
            message += f"; first divergence on test case {worst_case}: {first}" if first else ""
        raise OptimizeError(message, hint=hint)
    return Proof(results)


def explain(given: str, optimized: str, case: StoredCase, maxerr: float, scratch: str) -> str | None:
    """The first divergence between the model as given and the optimised one on a test case, if one is found."""
    from ..diagnose.locate import compare_models

    try:
        report = compare_models(
            (given, "given"),
            (optimized, "optimised"),
            [(0, dict(case.inputs))],
            scratch,
            maxerr=maxerr,
            labels=("the model as given", "the optimised model"),
        )
    except MgeError:
        return None  # the diagnosis is a bonus: the refusal stands without it
    first = report.cases[0].first_divergence
    return first.describe() if first is not None else None
