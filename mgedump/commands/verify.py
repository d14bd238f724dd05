"""Verify and time a bundle, or a plain model with ``-d`` specs (the ``mgerun`` command)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.errors import EXIT_FAILED, EXIT_OK, BundleError, DataError, ModelError, RunError, UsageError
from ..base.fileio import atomic_output, check_folder_target, check_target, hash_files, make_folder
from ..base.limits import available_memory, require_memory
from ..base.log import fresh_warnings, warn_once
from ..bundle import Bundle, case_folder
from ..bundle.requirements import check_requirements
from ..data import TestData, check_shape
from ..measure.assertion import OutputCheck, assert_equal
from ..measure.timing import Progress, Timing, batch_of, time_runs
from ..model.environment import differences, run_environment
from ..model.modelfile import external_locations
from ..model.runtime import TensorInfo, model_io, open_session, resolve_providers, session_options, to_numpy_outputs
from ..options import VerifyOptions
from ..report import bundle_name, check_report_targets
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
class Report:
    """The result of :func:`verify`; :attr:`exit_code` is the command's exit code; :meth:`record` is what the
    reports show of it."""

    source: str
    kind: str
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    assertion: bool
    maxerr: float
    verbose: bool
    session: dict[str, Any] = field(default_factory=dict)
    cases: list[CaseReport] = field(default_factory=list)
    profile: str | None = None
    op_profile: list[dict[str, Any]] | None = None  # with --profile: time per operator type, most first
    session_create_ms: float | None = None
    files: list[str] = field(default_factory=list, repr=False)  # every file read: outputs must not overwrite them
    packed_environment: dict[str, Any] | None = None  # the manifest's: where the bundle was packed
    environment: dict[str, Any] = field(default_factory=run_environment, repr=False)  # where it runs

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

    @property
    def passed(self) -> bool:
        return all(case.passed for case in self.cases)

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.passed else EXIT_FAILED

    def record(self, name: str | None = None) -> BundleRecord:
        """The bundle as the reports show it (docs/reports.md, "A bundle"); ``name`` defaults to
        :func:`~mgedump.report.bundle_name` of the source."""
        return BundleRecord(
            source=self.source,
            name=name or bundle_name(self.source),
            kind=self.kind,
            exit_code=self.exit_code,
            assertion=Assertion(self.assertion, self.maxerr),
            session=Session.from_json(self.session),
            cold_start=ColdStart.from_json(self.cold_start()),
            inputs=[TensorRecord.from_json(info.to_json()) for info in self.inputs],
            outputs=[TensorRecord.from_json(info.to_json()) for info in self.outputs],
            profile=self.profile,
            op_profile=None if self.op_profile is None else [OpRow.from_json(row) for row in self.op_profile],
            test_cases=[case.record() for case in self.cases],
            packed_environment=self.packed_environment,
            environment_differences=self.environment_differences(),
        )

    def to_json(self) -> dict[str, Any]:
        return self.record().to_json()


@dataclass
class _Case:
    spec: str
    origin: str
    feeds: dict[str, np.ndarray]
    expected: list[np.ndarray] | None
    defaulted: list[str] = field(default_factory=list)  # symbolic dims a generator set to 1


@dataclass
class _Prepared:
    kind: str
    session: Any
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    cases: list[_Case]
    assertion: bool
    maxerr: float
    verbose: bool
    model_path: str = ""
    model_sha256: str = ""
    reference: str | None = None  # the embedded io dump's folder, extracted
    output_maxerr: dict[str, float] = field(default_factory=dict)  # the outputs with a bound of their own
    packed_environment: dict[str, Any] | None = None  # the manifest's: where the bundle was packed
    files: list[str] = field(default_factory=list)  # data files read (outputs must not overwrite them)
    session_ms: float = 0.0  # creating the session: the cold start


def _open(model: str | bytes, label: str, options: VerifyOptions, tmp: str) -> tuple[Any, float]:
    """The session, and how long creating it took (ms): the cold start."""
    profile_prefix = os.path.join(tmp, "profile") if options.profile else None
    opts = session_options(threads=options.threads, graph_opt=options.graph_opt, profile=profile_prefix)
    began = time.perf_counter()
    session = open_session(model, label=label, providers=resolve_providers(options.provider), options=opts)
    return session, (time.perf_counter() - began) * 1e3


def _bundled_input(bundle: Bundle, member: str, info: TensorInfo) -> np.ndarray:
    """A test case's input from the bundle, checked against the model's input: a bundle whose data does not fit
    its own model is a broken bundle (exit 2), not a model that fails (exit 1).

    Raises:
        BundleError: another dtype, rank or fixed dim than the model's input.
    """
    array = bundle.tensor(member, info.name)
    what = f"{bundle.path}: member {member!r}"
    if info.dtype != "str" and array.dtype != info.np_dtype:
        raise BundleError(f"{what} holds {array.dtype}, but the model's input {info.name!r} takes {info.dtype}")
    try:
        check_shape(array, info, what)
    except DataError as exc:
        raise BundleError(exc.message) from None
    return array


def _quiet(text: str) -> None:
    """No status line."""


def _from_bundle(path: str, options: VerifyOptions, tmp: str, stage: Callable[[str], None] = _quiet) -> _Prepared:
    if options.cases:
        raise UsageError("-d gives data to a plain model; a bundle carries its own test cases")
    stage(f"checking {os.path.basename(path)}")
    with Bundle(path) as bundle:
        manifest = bundle.manifest
        model = manifest.model
        label = f"{path}:{model.member}"
        check_requirements(manifest.requirements, resolve_providers(options.provider)[0])
        # onnxruntime loads a file with a third less memory than the same bytes from Python; the model and its
        # data get a folder of their own, which no name in the bundle can collide with
        model_folder = os.path.join(tmp, "model")
        os.mkdir(model_folder)
        model_path = bundle.extract(model.member, model_folder)
        if model.external_data:
            bundle.extract(model.external_data, model_folder)
        _check_external_data(label, model_path, model.external_data)
        stage("loading the model")
        session, session_ms = _open(model_path, label, options, tmp)
        stage("reading the test cases and checking the bundle's hashes")
        inputs = [TensorInfo.from_json(d) for d in manifest.inputs]
        outputs = [TensorInfo.from_json(d) for d in manifest.outputs]
        got_in, got_out = model_io(session)
        if [i.name for i in got_in] != [i.name for i in inputs] or [o.name for o in got_out] != [
            o.name for o in outputs
        ]:
            raise ModelError(f"{label}: the model's inputs/outputs do not match the manifest")
        assertion = manifest.assertion
        cases = []
        for case in manifest.test_cases:
            feeds = {
                info.name: _bundled_input(bundle, member, info)
                for info, member in zip(got_in, case.inputs, strict=True)
            }
            expected = None
            if assertion.enabled:  # the manifest lists one output member per output then, none otherwise
                expected = [
                    bundle.tensor(member, info.name) for info, member in zip(outputs, case.outputs, strict=True)
                ]
            cases.append(_Case(case.spec, case.origin, feeds, expected))
        reference = None
        if manifest.io_dump:
            reference = bundle.extract_folder(manifest.io_dump["folder"], os.path.join(tmp, "reference"))
        bundle.verified()
    return _Prepared(
        kind="bundle",
        session=session,
        inputs=inputs,
        outputs=outputs,
        cases=cases,
        assertion=assertion.enabled,
        maxerr=assertion.maxerr,
        verbose=assertion.verbose,
        model_path=model_path,
        model_sha256=model.sha256,
        reference=reference,
        output_maxerr=dict(assertion.output_maxerr),
        packed_environment=manifest.environment,
        session_ms=session_ms,
    )


def _check_external_data(label: str, model_path: str, member: str | None) -> None:
    """The bundled model may read external data from its own data member only: never a path of the target
    machine (absolute, or up out of the folder), whatever onnxruntime's own checks would say.

    Raises:
        BundleError: another location.
    """
    allowed = {member.rsplit("/", 1)[-1]} if member else set()
    for location in sorted(external_locations(model_path)):
        if location not in allowed:
            where = f"its data member {member!r}" if member else "no data member: the bundle has none"
            raise BundleError(
                f"{label}: the model reads external data from {location!r}; a bundled model may read {where}"
            )


def _from_model(
    path: str, data: TestData | None, options: VerifyOptions, tmp: str, stage: Callable[[str], None] = _quiet
) -> _Prepared:
    if data is None:
        raise UsageError(f"{path} is a plain model: give test data with -d (e.g. -d '#rand(0,255)')")
    stage(f"loading {os.path.basename(path)}")
    session, session_ms = _open(path, path, options, tmp)
    stage("building the test data")
    inputs, outputs = model_io(session)
    built = data.build(inputs, options.data)
    cases = [_Case(case.spec.text, case.spec.origin, dict(case.inputs), None, case.defaulted) for case in built]
    return _Prepared(
        kind="model",
        session=session,
        inputs=inputs,
        outputs=outputs,
        cases=cases,
        assertion=False,
        maxerr=0.0,
        verbose=True,
        model_path=path,
        model_sha256=hash_files([path]).sha256 if options.io_dump else "",
        files=[f for case in built for f in case.files],
        session_ms=session_ms,
    )


def is_plain_model(path: str, options: VerifyOptions) -> bool:
    """A path is run as a plain model when -d is given or it ends in .onnx."""
    return bool(options.cases) or path.lower().endswith(".onnx")


def _check_outputs(options: VerifyOptions, protected: Sequence[str], *, reports: bool) -> None:
    """Refuse outputs that cannot be written, or would overwrite an input, before any work starts.

    Args:
        reports: check the report targets too (which :func:`~mgedump.commands.verify_many.verify_all` writes and
            :func:`~mgedump.commands.verify_many.plan_runs` checked once before): only against data files that
            only building the test cases names.
    """
    if options.profile:
        check_target(options.profile, protected)
    if reports:
        check_report_targets((options.report_json, options.junit_xml, options.report_html), protected)
    if options.bin_out_dump:
        check_folder_target(options.bin_out_dump, "--bin-out-dump", protected)
    if options.io_dump:
        check_folder_target(options.io_dump, "--io-dump", protected)


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
        path: a bundle, or an ONNX model when ``options.specs`` is given.
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
    plain = is_plain_model(path, options)
    data = TestData.parse(options.cases) if plain and options.cases else None
    protected = [path, *(data.list_files if data is not None else ())]
    _check_outputs(options, protected, reports=False)
    resolve_providers(options.provider)
    with tempfile.TemporaryDirectory(prefix="mgerun-") as tmp:
        stage = on_stage or _quiet
        prepared = _from_model(path, data, options, tmp, stage) if plain else _from_bundle(path, options, tmp, stage)
        stage("")
        if prepared.files:  # the data files are known now: no output may replace one
            protected += prepared.files
            _check_outputs(options, protected, reports=True)
        max_runs = _check_budget(prepared, options)
        report = _new_report(path, prepared, options, protected)
        bounds = _bounds(prepared, options) if report.assertion else None
        for index, case in enumerate(prepared.cases):
            result = _run_case(prepared, index, case, bounds, options, progress, label, max_runs)
            if max_runs is not None and len(result.timing.latencies_ms) >= max_runs:
                warn_once(f"test case {index}: --duration stopped after {max_runs} runs, as many as memory holds")
            report.cases.append(result)
            if options.bin_out_dump and result.error is None:
                _dump_outputs(options.bin_out_dump, index, prepared.outputs, result.outputs, protected)
            if not result.passed and result.error is None and prepared.reference is not None:
                tightest = min(bounds.values(), default=report.maxerr) if bounds else report.maxerr
                result.diagnosis = _diagnose(prepared, index, case, tightest, options, tmp)
            if on_case is not None:
                on_case(result, report)
        if options.profile:
            report.profile, report.op_profile = _save_profile(prepared.session, options.profile, protected)
        if options.io_dump:
            _io_dump_after_timing(prepared, report, options)
    return report


def _bounds(prepared: _Prepared, options: VerifyOptions) -> dict[str, float]:
    """Each output's AssertEqual bound: the bundle's (its own, else the bundle's), all replaced by a --maxerr X
    given now, then by a --maxerr OUTPUT:X given now.

    Raises:
        UsageError: a --maxerr OUTPUT:X for an output the model does not have.
    """
    names = [info.name for info in prepared.outputs]
    for name, _ in options.output_maxerr:
        if name not in names:
            raise UsageError(
                f"--maxerr {name}:...: the model has no output {name!r} (outputs: {', '.join(map(repr, names))})"
            )
    if options.maxerr is not None:
        bounds = dict.fromkeys(names, options.maxerr)
    else:
        bounds = {name: prepared.output_maxerr.get(name, prepared.maxerr) for name in names}
    bounds.update(options.output_maxerr)
    return bounds


def _check_budget(prepared: _Prepared, options: VerifyOptions) -> int | None:
    """Refuse timing runs whose latencies would not fit in memory; return the most runs a --duration may make."""
    # every timed run's latency is kept (a float, and its text in the report)
    timings = len(prepared.cases) * (1 + len(options.repeat_sweep))
    require_memory(
        64 * timings * options.iters, f"--iter {options.iters} on {len(prepared.cases)} test case(s)", UsageError
    )
    if options.repeat_sweep:
        _check_sweep(prepared, options.repeat_sweep)
    # a --duration run keeps going while time is left: as many runs as memory holds, at the most
    return max(options.iters, available_memory() // (2 * 64 * timings)) if options.duration_s else None


def _new_report(path: str, prepared: _Prepared, options: VerifyOptions, protected: Sequence[str]) -> Report:
    """The report before any test case ran: the bundle's settings with the command line's overrides."""
    session_info = {
        "providers": list(prepared.session.get_providers()),
        "threads": options.threads,
        "graph_opt": options.graph_opt or "all",
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
        maxerr=prepared.maxerr if options.maxerr is None else options.maxerr,
        verbose=prepared.verbose if options.silent is None else not options.silent,
        session=session_info,
        session_create_ms=prepared.session_ms,
        packed_environment=prepared.packed_environment,
        files=list(protected),
    )


def _io_dump_after_timing(prepared: _Prepared, report: Report, options: VerifyOptions) -> None:
    """The --io-dump of every test case that ran, after timing (the timing session's memory let go first)."""
    from ..diagnose.expose import release_memory

    prepared.session = None
    release_memory()
    ran = [
        (k, case.feeds)
        for k, (case, result) in enumerate(zip(prepared.cases, report.cases, strict=True))
        if result.error is None
    ]
    _io_dump(prepared, ran, options)


def _run_case(
    prepared: _Prepared,
    index: int,
    case: _Case,
    bounds: dict[str, float] | None,
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
            prepared.session,
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
        got = to_numpy_outputs(first or [], prepared.outputs)
        sweep = []
        for n in options.repeat_sweep:
            feeds = {k: (np.repeat(v, n, axis=0) if v.ndim else v) for k, v in case.feeds.items()}
            swept, _ = timed(feeds, f"{label}, batch x{n}")
            sweep.append(swept)
    except (RunError, ModelError) as exc:
        error = exc.one_line()
        if case.defaulted:
            error += f"; dims defaulted to 1: {', '.join(case.defaulted)} (give them with --input-shape)"
        report = CaseReport(
            index=index, spec=case.spec, origin=case.origin, checks=[], timing=Timing(batch, []), error=error
        )
        report.seconds = time.perf_counter() - began
        return report
    checks = []
    if bounds is not None and case.expected is not None:
        checks = [
            assert_equal(info.name, want, have, bounds[info.name])
            for info, want, have in zip(prepared.outputs, case.expected, got, strict=True)
        ]
    report = CaseReport(
        index=index, spec=case.spec, origin=case.origin, checks=checks, timing=timing, sweep=sweep, outputs=got
    )
    report.seconds = time.perf_counter() - began
    return report


def _check_sweep(prepared: _Prepared, sizes: Sequence[int]) -> None:
    if max(sizes) == 1:
        return
    largest = max(sum(a.nbytes for a in case.feeds.values()) for case in prepared.cases)
    # the repeated inputs, and about as much again for what the model makes of them
    require_memory(2 * largest * max(sizes), f"--repeat-sweep {max(sizes)}", UsageError)
    for info in prepared.inputs:
        if info.shape and isinstance(info.shape[0], int):
            raise UsageError(
                f"--repeat-sweep needs a batch dim the model leaves free, but input {info.name!r} fixes dim 0 to "
                f"{info.shape[0]} (shape {info.shape_text()})",
                hint="export the model with a symbolic batch dim",
            )


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "output"


def _dump_outputs(
    folder: str, index: int, infos: Sequence[TensorInfo], outputs: Sequence[np.ndarray], protected: Sequence[str]
) -> None:
    case_dir = os.path.join(folder, case_folder(index))
    make_folder(case_dir, "--bin-out-dump")
    used: set[str] = set()
    for k, (info, array) in enumerate(zip(infos, outputs, strict=True)):
        name = _safe_name(info.name)
        if name in used:
            name = f"{name}_{k}"
        used.add(name)
        with atomic_output(os.path.join(case_dir, name + ".npy"), protected) as f:
            np.save(f, array, allow_pickle=False)


def _settings(options: VerifyOptions) -> Any:
    from ..diagnose.exposed import RunSettings

    return RunSettings(
        providers=tuple(resolve_providers(options.provider)),
        threads=options.threads,
        graph_opt=options.graph_opt,
        budget=options.io_dump_budget_mb << 20,
    )


def _io_dump(prepared: _Prepared, cases: Sequence[tuple[int, dict[str, np.ndarray]]], options: VerifyOptions) -> None:
    """Write every tensor of these test cases (that ran) into the --io-dump folder."""
    from ..diagnose.exposed import ModelDumper

    assert options.io_dump is not None
    with ModelDumper(prepared.model_path, prepared.model_sha256, _settings(options), label=prepared.model_path) as d:
        d.dump(options.io_dump, cases)


def _diagnose(
    prepared: _Prepared, index: int, case: _Case, maxerr: float, options: VerifyOptions, tmp: str
) -> dict[str, Any] | None:
    """Where a failing test case first diverges from the reference io dump the bundle carries (if it has this case)."""
    from ..diagnose.divergence import diff_dumps
    from ..diagnose.exposed import ModelDumper
    from ..diagnose.iodump import IoDump

    assert prepared.reference is not None  # the caller diagnoses only bundles that carry an io dump
    reference = IoDump(prepared.reference)  # members were hash-checked with the bundle
    if index not in reference.cases:
        return None
    run_folder = os.path.join(tmp, f"run-{index}")
    try:
        with ModelDumper(
            prepared.model_path, prepared.model_sha256, _settings(options), label="the bundled model"
        ) as d:
            d.dump(run_folder, [(index, case.feeds)])
        diff = diff_dumps(
            reference, IoDump(run_folder), maxerr=maxerr, label_a="the embedded io dump", label_b="this run"
        ).cases[0]
    except (RunError, ModelError, DataError) as exc:
        return {"reference": "embedded io dump", "maxerr": maxerr, "first_divergence": None, "error": exc.one_line()}
    first = diff.first_divergence
    return {
        "reference": "embedded io dump",
        "maxerr": maxerr,
        "matched": len(diff.tensors),
        "first_divergence": None if first is None else first.to_json(),
        "text": None if first is None else first.describe(),
        "top": [n.to_json() for n in diff.introducers()[:5]],
    }


def _save_profile(session: Any, target: str, protected: Sequence[str]) -> tuple[str, list[dict[str, Any]]]:
    """Copy onnxruntime's profile to the target; return it and the time per operator type it records."""
    from ..measure.profiling import op_table

    produced = session.end_profiling()
    table = op_table(produced)
    with open(produced, "rb") as src, atomic_output(target, protected) as dst:
        shutil.copyfileobj(src, dst)
    return target, table
