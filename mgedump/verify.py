"""Verify and time a bundle, or a plain model with ``-d`` specs (the ``mgerun`` command)."""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .assertion import OutputCheck, assert_equal
from .bundle import Bundle
from .data import DataOptions, build_cases
from .errors import EXIT_FAILED, EXIT_OK, ModelError, RunError, SpecError
from .pack import check_maxerr
from .runtime import TensorInfo, model_io, open_session, run, to_numpy_outputs
from .spec import expand_specs


@dataclass(frozen=True)
class VerifyOptions:
    """How to verify and time.

    Attributes:
        maxerr: overrides the bundle's threshold. Defaults to the bundle's.
        silent: print failures only. Defaults to the bundle's setting.
        no_assert: run and time only.
        iters: timed runs per test case. Defaults to 10.
        warmup: untimed runs first. Defaults to 1.
        specs: ``-d`` values, for a plain model only.
        data: data options, for a plain model only.
    """

    maxerr: float | None = None
    silent: bool | None = None
    no_assert: bool = False
    iters: int = 10
    warmup: int = 1
    specs: Sequence[str] = ()
    data: DataOptions = field(default_factory=DataOptions)


@dataclass
class CaseReport:
    """One test case's checks and timings."""

    index: int
    spec: str
    origin: str
    checks: list[OutputCheck]
    latencies_ms: list[float]
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and all(check.passed for check in self.checks)

    def latency(self) -> dict[str, float | int]:
        return latency_stats(self.latencies_ms)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "spec": self.spec,
            "origin": self.origin,
            "passed": self.passed,
            "error": self.error,
            "outputs": [check.to_json() for check in self.checks],
            "latency_ms": self.latency(),
        }


@dataclass
class Report:
    """The result of :func:`verify`; :attr:`exit_code` is the command's exit code."""

    source: str
    kind: str
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    assertion: bool
    maxerr: float
    verbose: bool
    cases: list[CaseReport] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(case.passed for case in self.cases)

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.passed else EXIT_FAILED

    def to_json(self) -> dict[str, Any]:
        return {
            "report_version": 1,
            "source": self.source,
            "kind": self.kind,
            "passed": self.passed,
            "exit_code": self.exit_code,
            "assertion": {"enabled": self.assertion, "maxerr": self.maxerr},
            "inputs": [info.to_json() for info in self.inputs],
            "outputs": [info.to_json() for info in self.outputs],
            "test_cases": [case.to_json() for case in self.cases],
        }


def latency_stats(samples: Sequence[float]) -> dict[str, float | int]:
    """count, min, median, mean, p90, p99, max and (population) stddev; stddev of one sample is 0."""
    if not samples:
        return {"count": 0}
    values = np.asarray(samples, dtype=np.float64)
    return {
        "count": int(values.size),
        "min": float(values.min()),
        "median": float(np.median(values)),
        "mean": float(values.mean()),
        "p90": float(np.percentile(values, 90)),
        "p99": float(np.percentile(values, 99)),
        "max": float(values.max()),
        "stddev": float(values.std()) if values.size > 1 else 0.0,
    }


@dataclass
class _Prepared:
    kind: str
    session: Any
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    cases: list[tuple[str, str, dict[str, np.ndarray], list[np.ndarray] | None]]
    assertion: bool
    maxerr: float
    verbose: bool


def _from_bundle(path: str, options: VerifyOptions, tmp: str) -> _Prepared:
    if options.specs:
        raise SpecError("-d gives data to a plain model; a bundle carries its own test cases")
    with Bundle(path) as bundle:
        manifest = bundle.manifest
        model = manifest["model"]
        label = f"{path}:{model['member']}"
        if model.get("external_data"):
            model_path = bundle.extract(model["member"], tmp)
            bundle.extract(model["external_data"], tmp)
            session = open_session(model_path, label=label)
        else:
            session = open_session(bundle.read(model["member"]), label=label)
        inputs = [TensorInfo.from_json(d) for d in manifest["inputs"]]
        outputs = [TensorInfo.from_json(d) for d in manifest["outputs"]]
        got_in, got_out = model_io(session)
        if [i.name for i in got_in] != [i.name for i in inputs] or [o.name for o in got_out] != [o.name for o in outputs]:
            raise ModelError(f"{label}: the model's inputs/outputs do not match the manifest")
        assertion = manifest["assertion"]
        cases = []
        for case in manifest["test_cases"]:
            feeds = {info.name: bundle.tensor(member, info.name) for info, member in zip(inputs, case["inputs"])}
            expected = [bundle.tensor(member, info.name) for info, member in zip(outputs, case["outputs"])]
            cases.append((case["spec"], case.get("origin", ""), feeds, expected if assertion["enabled"] else None))
    return _Prepared("bundle", session, inputs, outputs, cases, assertion["enabled"], float(assertion["maxerr"]), assertion["verbose"])


def _from_model(path: str, options: VerifyOptions) -> _Prepared:
    if not options.specs:
        raise SpecError(f"{path} is a plain model: give test data with -d (e.g. -d '#rand(0,255)')")
    session = open_session(path)
    inputs, outputs = model_io(session)
    built = build_cases(expand_specs(list(options.specs)), inputs, options.data)
    cases = [(case.spec.text, case.spec.origin, dict(case.inputs), None) for case in built]
    return _Prepared("model", session, inputs, outputs, cases, False, 0.0, True)


def is_plain_model(path: str, options: VerifyOptions) -> bool:
    """A path is run as a plain model when -d is given or it ends in .onnx."""
    return bool(options.specs) or path.lower().endswith(".onnx")


def verify(path: str, options: VerifyOptions | None = None, *, on_case: Callable[[CaseReport, Report], None] | None = None) -> Report:
    """Verify every test case of a bundle (or run a plain model on ``-d`` data) and time it.

    Args:
        path: a bundle, or an ONNX model when ``options.specs`` is given.
        options: defaults to ``VerifyOptions()``.
        on_case: called after each test case, for printing progress.

    Returns:
        The report; ``report.exit_code`` is 1 when an assertion failed or the
        model failed to run.

    Raises:
        MgeError: a bad bundle, model, spec or option (exit code 2).
    """
    options = options or VerifyOptions()
    if options.iters < 1:
        raise SpecError(f"--iter must be >= 1, got {options.iters}")
    if options.warmup < 0:
        raise SpecError(f"--warmup-iter must be >= 0, got {options.warmup}")
    with tempfile.TemporaryDirectory(prefix="mgerun-") as tmp:
        if is_plain_model(path, options):
            prepared = _from_model(path, options)
        else:
            prepared = _from_bundle(path, options, tmp)
        maxerr = prepared.maxerr if options.maxerr is None else check_maxerr(options.maxerr)
        verbose = prepared.verbose if options.silent is None else not options.silent
        assertion = prepared.assertion and not options.no_assert
        report = Report(path, prepared.kind, prepared.inputs, prepared.outputs, assertion, maxerr, verbose)
        for index, (spec, origin, feeds, expected) in enumerate(prepared.cases):
            case = _run_case(prepared, index, spec, origin, feeds, expected if assertion else None, maxerr, options)
            report.cases.append(case)
            if on_case is not None:
                on_case(case, report)
    return report


def _run_case(prepared: _Prepared, index: int, spec: str, origin: str, feeds: dict[str, np.ndarray],
              expected: list[np.ndarray] | None, maxerr: float, options: VerifyOptions) -> CaseReport:
    session = prepared.session
    first: list[np.ndarray] | None = None
    latencies: list[float] = []
    try:
        for _ in range(options.warmup):
            values = run(session, feeds)
            if first is None:
                first = values
        clock = time.perf_counter
        for _ in range(options.iters):
            start = clock()
            values = run(session, feeds)
            latencies.append((clock() - start) * 1e3)
            if first is None:
                first = values
        got = to_numpy_outputs(first or [], prepared.outputs)
    except (RunError, ModelError) as exc:
        return CaseReport(index, spec, origin, [], latencies, error=exc.one_line())
    checks = []
    if expected is not None:
        checks = [assert_equal(info.name, want, have, maxerr) for info, want, have in zip(prepared.outputs, expected, got)]
    return CaseReport(index, spec, origin, checks, latencies)
