"""Verify and time a bundle, or a plain model with ``-d`` specs (the ``mgerun`` command): each test case run, timed
and checked, into a :class:`Report`. What it runs is prepared in :mod:`.verify_prepare`; what it writes besides the
reports, and its diagnosis, is in :mod:`.verify_outputs`."""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ..base.bounds import Bounds
from ..base.errors import ModelError, RunError, UsageError, Verdict
from ..base.limits import available_memory, require_memory
from ..base.log import fresh_warnings, no_status, warn_once
from ..base.naming import option_name
from ..base.outputs import Output, Outputs
from ..data import TestData
from ..data.values import value_bytes
from ..measure.assertion import OutputCheck, by_value
from ..measure.structured import check_value
from ..measure.timing import Progress, Timing, batch_of, time_runs
from ..model.environment import differences, run_environment
from ..model.runtime import TensorInfo, to_values
from ..options import VerifyOptions
from ..report import bundle_name, report_name
from ..report.fitting import FittingRecord
from ..report.formats import asked
from ..report.schema import (
    Assertion,
    BundleRecord,
    CaseRecord,
    ColdStart,
    Diagnosis,
    OpRow,
    OutputRecord,
    Session,
    TensorRecord,
    TimingRecord,
)
from .fitting import fit_and_verify
from .inputs import files_read
from .verify_outputs import diagnose_case, dump_outputs, io_dump, save_profile
from .verify_prepare import Prepared, PreparedCase, from_bundle, from_model, is_plain_model

__all__ = ["CaseReport", "Report", "VerifyOptions", "is_plain_model", "verify"]


@dataclass
class CaseReport:
    """One test case's checks and timings; :meth:`record` is what the reports show of it."""

    index: int
    spec: str
    origin: str
    checks: list[OutputCheck]
    timing: Timing
    error: str | None = None
    sweep: list[Timing] = field(default_factory=list)
    outputs: list[np.ndarray] = field(default_factory=list, repr=False)
    diagnosis: dict[str, Any] | None = None
    seconds: float = 0.0  # wall time of the test case: its runs, the sweep and the checks

    @property
    def passed(self) -> bool:
        return self.error is None and all(check.passed for check in self.checks)

    def latency(self) -> dict[str, float | int]:
        return self.timing.stats()

    def record(self) -> CaseRecord:
        """The test case as the reports show it (docs/reports.md, "A test case")."""
        return CaseRecord(
            index=self.index,
            spec=self.spec,
            origin=self.origin,
            passed=self.passed,
            error=self.error,
            outputs=[OutputRecord.of(check) for check in self.checks],
            timing=TimingRecord.of(self.timing),
            seconds=self.seconds,
            sweep=[TimingRecord.of(timing) for timing in self.sweep],
            diagnosis=None if self.diagnosis is None else Diagnosis.from_json(self.diagnosis),
        )

    def to_json(self) -> dict[str, Any]:
        return self.record().to_json()


@dataclass
class Report(Verdict):
    """The result of :func:`verify`; :attr:`exit_code` is the command's exit code; :meth:`record` is what the
    reports show of it."""

    source: str
    kind: str
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    assertion: bool
    bounds: Bounds  # each output's, as checked: the bundle's with the options' over them
    verbose: bool
    session: dict[str, Any] = field(default_factory=dict)
    cases: list[CaseReport] = field(default_factory=list)
    profile: str | None = None
    op_profile: list[dict[str, Any]] | None = None  # with --profile: time per operator type, most first
    session_create_ms: float | None = None
    files: list[str] = field(default_factory=list, repr=False)  # every file read: outputs must not overwrite them
    packed_environment: dict[str, Any] | None = None  # the manifest's: where the bundle was packed
    environment: dict[str, Any] = field(default_factory=run_environment, repr=False)  # where it runs
    variant: str | None = None  # the variant of a bundle of several that ran
    fitting: Any = None  # with --fitting: the search and the choice (mgedump.commands.fitting.FittingResult)

    def cold_start(self) -> dict[str, float | None]:
        """Creating the session, and the first run (its first warm-up run, else its first timed run)."""
        first = next((ms for ms in (c.timing.first_run_ms() for c in self.cases) if ms is not None), None)
        return {"session_create_ms": self.session_create_ms, "first_run_ms": first}

    def environment_differences(self) -> list[str]:
        """What differs between where the bundle was packed and where it runs that can change results (for a
        bundle that does not record it, one sentence saying so); none for a plain model."""
        if self.kind != "bundle":
            return []
        return differences(self.packed_environment, self.environment)

    def record(self, name: str | None = None) -> BundleRecord:
        """The bundle as the reports show it (docs/reports.md, "A bundle"); ``name`` defaults to
        :func:`~mgedump.report.bundle_name` of the source."""
        name = name or bundle_name(self.source)
        return BundleRecord(
            source=self.source,
            name=report_name(name, self.variant),
            variant=self.variant,
            kind=self.kind,
            exit_code=self.exit_code,
            assertion=Assertion(self.assertion, self.bounds.default.maxerr),
            session=Session.from_json(self.session),
            cold_start=ColdStart.from_json(self.cold_start()),
            inputs=[TensorRecord.from_json(info.to_json()) for info in self.inputs],
            outputs=[TensorRecord.from_json(info.to_json()) for info in self.outputs],
            profile=self.profile,
            op_profile=None if self.op_profile is None else [OpRow.from_json(row) for row in self.op_profile],
            test_cases=[case.record() for case in self.cases],
            packed_environment=self.packed_environment,
            environment_differences=self.environment_differences(),
            fitting=None if self.fitting is None else FittingRecord.of(self.fitting),
        )

    def to_json(self) -> dict[str, Any]:
        return self.record().to_json()


def run_outputs(options: VerifyOptions) -> Outputs:
    """The table of what ``mgerun`` writes: the reports (standard output may take one), the profile, and the
    folders of outputs and io dumps."""
    return Outputs(
        [
            *(Output(entry.option, target, stdout=entry.stdout) for entry, target in asked(options)),
            Output("profile", options.profile or ""),
            Output("bin_out_dump", options.bin_out_dump or "", folder=True),
            Output("io_dump", options.io_dump or "", folder=True),
            Output("fitting_out", options.fitting_out or "", stdout=True),
        ]
    )


@fresh_warnings
def verify(
    path: str,
    options: VerifyOptions | None = None,
    *,
    on_case: Callable[[CaseReport, Report], None] | None = None,
    progress: Progress | None = None,
    label: str = "",
    on_stage: Callable[[str], None] | None = None,
) -> Report:
    """Verify every test case of a bundle (or run a plain model on ``-d`` data) and time it.

    Args:
        path: a bundle, or an ONNX model when ``options.cases`` (``-d``) is given or it ends in ``.onnx``.
        options: defaults to ``VerifyOptions()``.
        on_case: called after each test case, for printing results as they come.
        progress: called as ``progress(label, done, total)`` during timing runs
            expected to last over a second, for a progress bar.
        label: put before "test case N" in the progress bar's label (the bundle, when there are several).
        on_stage: called with what it starts doing before the test cases run (``"checking b.mgetest"``,
            ``"loading the model"``), then with ``""`` when they start, for a status line.

    Returns:
        The report; ``report.exit_code`` is 1 when an assertion failed or the
        model failed to run.

    Raises:
        MgeError: a bad bundle, model, spec or option (exit code 2).
    """
    options = options or VerifyOptions()
    if options.fitting:  # every variant verified, the fastest passing one chosen and run (docs/fitting.md)
        return cast(
            Report,
            fit_and_verify(path, options, verify, on_case=on_case, progress=progress, label=label, on_stage=on_stage),
        )
    plain = is_plain_model(path, options)
    data = TestData.parse(options.cases) if plain and options.cases else None
    protected = files_read(models=[path] if plain else [], data=[data], others=[path], options=(options,))
    outputs = run_outputs(options)
    outputs.check(protected)
    options.session.providers()  # an unknown provider refused before any work
    with tempfile.TemporaryDirectory(prefix="mgerun-") as tmp:
        stage = on_stage or no_status
        prepared = from_model(path, data, options, tmp, stage) if plain else from_bundle(path, options, tmp, stage)
        stage("")
        if prepared.files:  # the data files are known now: no output may replace one
            protected += prepared.files
            outputs.check(protected)
        max_runs = _check_budget(prepared, options)
        report = _new_report(path, prepared, options, protected)
        if report.assertion:  # a --maxerr OUTPUT:X given now names an output of the model
            options.bounds.check_outputs([info.name for info in prepared.outputs])
        bounds = report.bounds if report.assertion else None
        for index, case in enumerate(prepared.cases):
            if options.test_cases is not None and index not in options.test_cases:
                continue  # --rerun-failed: the test cases that failed
            result = _run_case(prepared, index, case, bounds, options, progress, label, max_runs)
            if max_runs is not None and len(result.timing.latencies_ms) >= max_runs:
                warn_once(
                    f"test case {index}: {option_name('duration_s')} stopped after {max_runs} runs, as many as memory holds"
                )
            report.cases.append(result)
            if options.bin_out_dump and result.error is None:
                dump_outputs(options.bin_out_dump, index, prepared.outputs, result.outputs, protected)
            if not result.passed and result.error is None and prepared.reference is not None:
                bound = report.bounds.tightest(info.name for info in prepared.outputs)
                result.diagnosis = diagnose_case(prepared, index, case, bound, options, tmp)
            if on_case is not None:
                on_case(result, report)
        if options.profile:
            report.profile, report.op_profile = save_profile(prepared.runner, options.profile, protected)
        if options.io_dump:
            _io_dump_after_timing(prepared, report, options)
    return report


def time_again(path: str, options: VerifyOptions, index: int) -> list[float]:
    """Test case ``index`` of a bundle (or of the plain model run on ``-d`` data) timed again as ``options`` ask,
    nothing checked or written: the latency gate's next round of runs (:mod:`.gate`).

    Raises:
        MgeError: the bundle or model no longer opens or runs.
    """
    options = dataclasses.replace(
        options, fitting=False, no_assert=True, profile=None, bin_out_dump=None, io_dump=None, repeat_sweep=()
    )
    plain = is_plain_model(path, options)
    data = TestData.parse(options.cases) if plain and options.cases else None
    with tempfile.TemporaryDirectory(prefix="mgerun-") as tmp:
        prepared = (
            from_model(path, data, options, tmp, no_status) if plain else from_bundle(path, options, tmp, no_status)
        )
        try:
            timing, _ = time_runs(
                prepared.runner, prepared.cases[index].feeds, options.iters, options.warmup,
                duration_s=options.duration_s, concurrency=options.concurrency,
                max_runs=_check_budget(prepared, options),
            )  # fmt: skip
        finally:
            prepared.runner.close()
    return timing.latencies_ms


def _check_budget(prepared: Prepared, options: VerifyOptions) -> int | None:
    """Refuse timing runs whose latencies would not fit in memory; return the most runs a --duration may make."""
    # every timed run's latency is kept (a float, and its text in the report)
    timings = len(prepared.cases) * (1 + len(options.repeat_sweep))
    require_memory(
        64 * timings * options.iters,
        f"{option_name('iters')} {options.iters} on {len(prepared.cases)} test case(s)",
        UsageError,
    )
    if options.repeat_sweep:
        _check_sweep(prepared, options.repeat_sweep)
    # a --duration run keeps going while time is left: as many runs as memory holds, at the most
    return max(options.iters, available_memory() // (2 * 64 * timings)) if options.duration_s else None


def _new_report(path: str, prepared: Prepared, options: VerifyOptions, protected: Sequence[str]) -> Report:
    """The report before any test case ran: the bundle's settings with the command line's overrides."""
    session_info = {
        "providers": prepared.runner.providers,
        **options.session.report_json(),
        "iters": options.iters,
        "warmup": options.warmup,
        "duration_s": options.duration_s,
        "concurrency": options.concurrency,
    }
    return Report(
        source=path,
        kind=prepared.kind,
        inputs=prepared.inputs,
        outputs=prepared.outputs,
        assertion=prepared.assertion and not options.no_assert,
        bounds=prepared.bounds.overridden_by(options.bounds),  # mgerun --maxerr X over every output's, then OUTPUT:X
        verbose=prepared.verbose if options.silent is None else not options.silent,
        session=session_info,
        session_create_ms=prepared.session_ms,
        packed_environment=prepared.packed_environment,
        files=list(protected),
        variant=prepared.variant,
    )


def _io_dump_after_timing(prepared: Prepared, report: Report, options: VerifyOptions) -> None:
    """The --io-dump of every test case that ran, after timing (the timing session's memory let go first)."""
    from ..base.limits import release_memory

    prepared.runner.close()
    release_memory()
    ran = [(result.index, prepared.cases[result.index].feeds) for result in report.cases if result.error is None]
    io_dump(prepared, ran, options)


def _run_case(
    prepared: Prepared,
    index: int,
    case: PreparedCase,
    bounds: Bounds | None,
    options: VerifyOptions,
    progress: Progress | None,
    prefix: str = "",
    max_runs: int | None = None,
) -> CaseReport:
    batch = batch_of(case.feeds)
    began = time.perf_counter()
    label = f"{prefix}test case {index}"

    def timed(feeds: dict[str, np.ndarray], what: str) -> tuple[Timing, Any]:
        return time_runs(
            prepared.runner,
            feeds,
            options.iters,
            options.warmup,
            progress,
            what,
            duration_s=options.duration_s,
            concurrency=options.concurrency,
            max_runs=max_runs,
        )

    try:
        timing, first = timed(case.feeds, label)
        got = to_values(first or [], prepared.model_outputs or prepared.outputs)
        if prepared.variant is not None:  # a variant's outputs held to the reference by value (float16 to float32)
            got = [by_value(want, have) for want, have in zip(case.expected or got, got, strict=True)]
        sweep = []
        for n in options.repeat_sweep:
            feeds = {k: (np.repeat(v, n, axis=0) if np.ndim(v) else v) for k, v in case.feeds.items()}
            swept, _ = timed(feeds, f"{label}, batch x{n}")
            sweep.append(swept)
    except (RunError, ModelError) as exc:
        error = exc.one_line()
        if case.defaulted:
            error += (
                f"; dims defaulted to 1: {', '.join(case.defaulted)} (give them with {option_name('input_shapes')})"
            )
        report = CaseReport(
            index=index, spec=case.spec, origin=case.origin, checks=[], timing=Timing(batch, []), error=error
        )
        report.seconds = time.perf_counter() - began
        return report
    checks = []
    if bounds is not None and case.expected is not None:
        checks = [
            check_value(info.name, want, have, *bounds.of(info.name))
            for info, want, have in zip(prepared.outputs, case.expected, got, strict=True)
        ]
    report = CaseReport(
        index=index, spec=case.spec, origin=case.origin, checks=checks, timing=timing, sweep=sweep, outputs=got
    )
    report.seconds = time.perf_counter() - began
    return report


def _check_sweep(prepared: Prepared, sizes: Sequence[int]) -> None:
    if max(sizes) == 1:
        return
    largest = max(sum(value_bytes(a) for a in case.feeds.values()) for case in prepared.cases)
    # the repeated inputs, and about as much again for what the model makes of them
    require_memory(2 * largest * max(sizes), f"{option_name('repeat_sweep')} {max(sizes)}", UsageError)
    for info in prepared.inputs:
        if not info.is_tensor:
            raise UsageError(
                f"{option_name('repeat_sweep')} repeats tensors along their batch dim; input {info.name!r} is "
                f"{info.dtype}"
            )
        if info.shape and isinstance(info.shape[0], int):
            raise UsageError(
                f"{option_name('repeat_sweep')} needs a batch dim the model leaves free, but input {info.name!r} fixes dim 0 to "
                f"{info.shape[0]} (shape {info.shape_text()})",
                hint="export the model with a symbolic batch dim",
            )
