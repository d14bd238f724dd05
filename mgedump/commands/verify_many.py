"""Verify several bundles in one call (``mgerun a.mgetest b.mgetest models/``) and write the reports.

A folder stands for every ``*.mgetest`` bundle of its tree, sorted, each named by its path relative to the folder
(:mod:`.tree`); ``--shard`` keeps one shard of them (:mod:`.shards`). Each bundle is verified in turn with
:func:`mgedump.commands.verify`, or in worker processes with ``--jobs`` (:mod:`.jobs`); with several, a bundle that is
bad input does not stop the others: it is reported with its error, and the
exit code is the worst of all (2 over 1 over 0). The reports (JSON, JUnit XML,
HTML) cover every bundle; the HTML and JUnit reports are rendered from the
JSON report, so the three always agree.

With several bundles, the outputs that are one per bundle get the bundle's
name: ``--profile prof.json`` writes ``prof.NAME.json``, ``--bin-out-dump DIR``
and ``--io-dump DIR`` write into ``DIR/NAME/``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import IO, Any

from ..base.errors import EXIT_OK, EXIT_TOO_SLOW, MgeError, UsageError
from ..base.fileio import make_folder
from ..base.limits import peak_rss_mib
from ..base.log import fresh_warnings, warn_once
from ..base.naming import option_name
from ..base.outputs import all_or_nothing
from ..bundle.reader import peek_variants
from ..data import TestData
from ..measure.timing import Progress
from ..model.environment import run_environment
from ..options import GateOptions, SelectOptions, SpreadOptions, VerifyOptions
from ..report import bundle_name, report_name, unique_names, utc_timestamp, write_report
from ..report.formats import asked, check_known
from ..report.schema import BundleRecord, RunReport
from ..report.spread import JobsRecord, ShardRecord
from .fitting import config_text, with_config
from .inputs import files_read
from .jobs import Done, check_options, run_checks, timing_options, untimed, with_timing
from .rerun import failed_in, select_failed
from .shards import pick, resolve_run, resolve_shard
from .tree import expand_tree, report_names
from .verify import CaseReport, Report, run_outputs, time_again, verify
from .verify_prepare import is_plain_model


@dataclass
class BundleResult:
    """One bundle's outcome: its report, or the error that stopped it; :meth:`record` is what the reports show."""

    path: str
    report: Report | None = None
    error: MgeError | None = None
    variant: str | None = None  # the variant of a bundle of several that ran
    seconds: float = 0.0
    peak_rss_mib: float | None = None  # the process's peak memory when the bundle ended
    started: str = field(default_factory=utc_timestamp)  # ISO 8601, UTC
    exit: int | None = None  # checked in a worker: its exit code (its record is the summary's, on file)
    not_run: str | None = None  # why it was not run (--maxfail)

    @property
    def exit_code(self) -> int:
        if self.not_run is not None:
            return EXIT_OK
        if self.error is not None:
            return self.error.exit_code
        if self.exit is not None:
            return self.exit
        assert self.report is not None
        return self.report.exit_code

    def record(self, name: str | None = None) -> BundleRecord:
        """The bundle as the reports show it; ``name`` defaults to its :func:`~mgedump.report.bundle_name`."""
        if self.not_run is not None:
            name = name or bundle_name(self.path)
            return BundleRecord(
                source=self.path,
                name=report_name(name, self.variant),
                kind="bundle",
                exit_code=EXIT_OK,
                variant=self.variant,
                not_run=self.not_run,
            )
        if self.report is not None:
            record = self.report.record(name)
        else:
            assert self.error is not None
            name = name or bundle_name(self.path)
            record = BundleRecord(
                source=self.path,
                name=report_name(name, self.variant),
                kind="bundle",
                exit_code=self.error.exit_code,
                error=self.error.one_line(),
                variant=self.variant,
            )
        record.seconds, record.started, record.peak_rss_mib = self.seconds, self.started, self.peak_rss_mib
        return record

    def to_json(self) -> dict[str, Any]:
        return self.record().to_json()


@dataclass
class Summary:
    """Every bundle's outcome; :attr:`exit_code` is the worst of them; :meth:`record` is the report of them all."""

    results: list[BundleResult] = field(default_factory=list)
    peak_rss_mib: float | None = None
    environment: dict[str, Any] = field(default_factory=run_environment)  # where this call runs
    names: dict[str, str] = field(default_factory=dict)  # path -> what the reports call it (none: unique_names)
    shard: ShardRecord | None = None  # the report's shard (--shard)
    jobs: JobsRecord | None = None  # the report's jobs (--jobs)
    run: dict[str, str] | None = None  # the run's identity (--run-id, or the CI's run variable)
    gate: dict[str, Any] | None = None  # the latency gate's verdict (--max-latency, --baseline)
    records: IO[bytes] | None = field(default=None, repr=False)  # with workers: every run's record, a JSON line each

    @property
    def exit_code(self) -> int:
        worst = max((r.exit_code for r in self.results), default=EXIT_OK)
        return EXIT_TOO_SLOW if worst == EXIT_OK and self.gate and not self.gate["passed"] else worst

    def saved_records(self) -> list[BundleRecord]:
        """With workers, the records they sent back, in the order of the plan (read back from their file)."""
        assert self.records is not None
        self.records.seek(0)
        lines = [json.loads(line) for line in self.records]
        return [BundleRecord.from_json(entry["record"]) for entry in sorted(lines, key=lambda entry: entry["index"])]

    @property
    def passed(self) -> bool:
        return self.exit_code == EXIT_OK

    def record(self) -> RunReport:
        """The report of every bundle (docs/reports.md): what the JSON, JUnit and HTML reports render."""
        paths = list(dict.fromkeys(result.path for result in self.results))  # a bundle's variants share its name
        named = self.names or dict(zip(paths, unique_names(paths), strict=True))
        if self.records is not None:
            bundles = self.saved_records()
        else:
            bundles = [result.record(named.get(result.path)) for result in self.results]
        return RunReport(
            bundles=bundles,
            exit_code=self.exit_code,
            peak_rss_mib=self.peak_rss_mib,
            environment=self.environment,
            shard=self.shard,
            jobs=self.jobs,
            run=self.run,
            latency_gate=self.gate,
        )

    def to_json(self) -> dict[str, Any]:
        return self.record().to_json()


def expand_paths(paths: Sequence[str]) -> list[str]:
    """The bundles named: a folder stands for every ``*.mgetest`` bundle of its tree, sorted (:mod:`.tree`).

    Raises:
        UsageError: no path, a folder that holds no bundle, or a loop in a folder's tree.
    """
    return [found.path for found in expand_tree(paths)]


@dataclass(frozen=True)
class RunPlan:
    """What one ``mgerun`` call runs, worked out once (:func:`plan_runs`): the bundles (folders expanded), the
    test data for a plain model (list files read), and the inputs no output may overwrite.
    """

    bundles: tuple[str, ...]
    options: VerifyOptions
    protected: tuple[str, ...]
    runs: tuple[tuple[str, str | None], ...] = ()  # (bundle, variant): each variant of a bundle of several
    names: tuple[str, ...] = ()  # what the reports call each bundle: its path relative to the folder given
    spread: SpreadOptions = field(default_factory=SpreadOptions)
    shard: ShardRecord | None = None  # with --shard: which one, how chosen, how many of how many bundles
    run: dict[str, str] | None = None  # the run's identity (--run-id, or the CI's run variable)
    notes: tuple[str, ...] = ()  # what to tell the user before any work (--shard auto found no CI index)
    gate: GateOptions = field(default_factory=GateOptions)  # the latency gate
    select: SelectOptions = field(default_factory=SelectOptions)  # which to run (--rerun-failed), when to stop
    cases: tuple[tuple[int, ...] | None, ...] = ()  # with --rerun-failed: each run's test cases (none: every one)

    @property
    def many(self) -> bool:
        """Reported as many bundles: more than one, or a shard or workers (whose reports are merged or spread)."""
        return len(self.runs or self.bundles) > 1 or self.shard is not None or self.spread.workers is not None


def plan_runs(
    paths: Sequence[str],
    options: VerifyOptions | None = None,
    *,
    data_flags: Sequence[str] | None = None,
    spread: SpreadOptions | None = None,
    environ: Mapping[str, str] | None = None,
    gate: GateOptions | None = None,
    select: SelectOptions | None = None,
) -> RunPlan:
    """Expand folders, parse the test data, pick the shard and check every output target, once, before any work.

    Args:
        data_flags: the data options given (the command line passes even those given with their default);
            none: those whose values differ from their defaults.
        spread: the shard to check and the workers to check it with (none: every bundle, in this process).
        environ: where ``--shard auto`` reads CI's variables (none: this process's environment).

    Raises:
        UsageError: no bundle, data flags for bundles, a plain model among several, outputs that collide.
        SpecError: test data that cannot be read.
    """
    options, spread, gate = options or VerifyOptions(), spread or SpreadOptions(), gate or GateOptions()
    select = select or SelectOptions()
    if gate.active and spread.timing in ("none",):
        raise UsageError(
            f"the latency gate needs timing: with {option_name('jobs')} over 1, give {option_name('jobs_timing')} serial"
        )
    env = os.environ if environ is None else environ
    shard = resolve_shard(spread.shard, env) if spread.shard is not None else None
    run = resolve_run(spread.run_id, env)
    check_known(options)
    outputs = run_outputs(options)
    outputs.check()
    failed = failed_in(select.rerun_failed) if select.rerun_failed else None
    given = bool(paths)
    if failed is not None and not failed.runs:
        note = f"nothing failed or could not run in {select.rerun_failed}: nothing to run"
        return RunPlan((), options, (), spread=spread, run=run, notes=(note,), gate=gate, select=select)
    if failed is not None and not paths:
        paths = list(dict.fromkeys(failed.sources.values()))
    found = expand_tree(paths)
    bundles = [f.path for f in found]
    spread_flag = option_name("shard") if spread.shard is not None else option_name("jobs") if spread.jobs else None
    if spread_flag and options.cases:
        raise UsageError(f"{spread_flag} spreads bundles; a plain model with {option_name('cases')} runs alone")
    many = len(bundles) > 1 or spread_flag is not None
    if many and options.cases:
        raise UsageError(f"{option_name('cases')} gives data to one plain model; {len(bundles)} paths were given")
    plain = [p for p in bundles if is_plain_model(p, options)]
    if many and plain:
        raise UsageError(
            f"{plain[0]} is a plain model: run it alone with {option_name('cases')}, or pack it into a bundle first"
        )
    data_flags = options.data.given() if data_flags is None else data_flags
    if data_flags and not plain:
        verb = "applies" if len(data_flags) == 1 else "apply"
        raise UsageError(f"{', '.join(data_flags)} {verb} to a plain model with {option_name('cases')}, not a bundle")
    if plain:  # a plain model is one model: it has no variants to name, choose among, or read a choice for
        for name in ("variant", "fitting", "config"):
            if getattr(options, name):
                raise UsageError(
                    f"{option_name(name)} chooses among a bundle's variants; {plain[0]} is a plain model: pack it "
                    f"with {option_name('variants')} first"
                )
    if options.cases:
        options = dataclasses.replace(options, cases=TestData.parse(options.cases))
    options.session.providers()
    _check_unique_names(bundles, options, many)
    data = options.cases if isinstance(options.cases, TestData) else None
    others = [*bundles, *([gate.baseline] if gate.baseline else []), *([failed.report] if failed else [])]
    protected = tuple(files_read(models=plain, data=[data], others=others, options=(options, spread)))
    outputs.check(protected)
    if options.fitting_out and len(bundles) > 1:
        raise UsageError(f"{option_name('fitting_out')} holds the choice for one bundle; {len(bundles)} were given")
    if options.fitting and spread.workers is not None:
        raise UsageError(
            f"{option_name('fitting')} times the variants against each other, alone on this machine; "
            f"run it without {option_name('jobs')}"
        )
    config_notes: list[str] = []
    if options.config:
        options, config_notes = with_config(options, options.config, bundles)
    names = report_names(found)
    if failed is not None and not given:  # the bundles the report names, under its names for them
        named = {source: name for name, source in failed.sources.items()}
        names = [named.get(path, name) for path, name in zip(bundles, names, strict=True)]
    if failed is not None:  # before the shards: every shard shares out the same bundles, those that failed
        failed_names = {name for name, _ in failed.runs}
        kept_found = [(f, n) for f, n in zip(found, names, strict=True) if n in failed_names]
        found, names = [f for f, _ in kept_found], [n for _, n in kept_found]
        bundles = [f.path for f in found]
    picked = None
    if shard is not None:
        found, names, picked = pick(found, names, shard, spread.shard_durations)
        bundles = [f.path for f in found]
    runs = _runs(bundles, plain, options.variant, options.fitting)
    cases: list[tuple[int, ...] | None] = []
    if failed is not None:
        bundles, names, kept, cases = select_failed(failed, bundles, names, runs, none_ok=shard is not None)
        runs = tuple(kept)
    notes = ((shard.note,) if shard is not None and shard.note else ()) + tuple(config_notes)
    return RunPlan(
        tuple(bundles), options, protected, tuple(runs), tuple(names), spread, picked, run, notes, gate, select,
        tuple(cases),
    )  # fmt: skip


def _runs(
    bundles: Sequence[str], plain: Sequence[str], variant: str | None, fitting: bool
) -> tuple[tuple[str, str | None], ...]:
    """Each bundle's runs: the variant asked for, or each variant of a bundle of several, or its one model (and
    one run a bundle with ``fitting``, which verifies every variant itself)."""
    runs: list[tuple[str, str | None]] = []
    for path in bundles:
        names = [] if path in plain or variant is not None or fitting else peek_variants(path)
        runs += [(path, name) for name in names] or [(path, variant)]
    return tuple(runs)


@fresh_warnings
def verify_all(
    plan: RunPlan | Sequence[str],
    options: VerifyOptions | None = None,
    *,
    on_start: Callable[[str], None] | None = None,
    on_case: Callable[[CaseReport, Report], None] | None = None,
    on_bundle: Callable[[BundleResult], None] | None = None,
    progress: Progress | None = None,
    on_stage: Callable[[str], None] | None = None,
    on_record: Callable[[BundleResult, BundleRecord, bool], None] | None = None,
) -> Summary:
    """Verify every bundle (or the one plain model with ``-d``), then write the reports the options ask for.

    Args:
        plan: what :func:`plan_runs` made, or the paths to plan: bundles, folders of bundles, or one model
            when ``options.cases`` is given.
        options: with paths, the options (with a plan, its own).
        on_start: called with each bundle's path before it runs.
        on_case: called after each test case (see :func:`~mgedump.commands.verify`).
        on_bundle: called after each bundle, with its result.
        progress: the progress callback for long timing runs.
        on_stage: what each bundle starts doing before its test cases run (see :func:`~mgedump.commands.verify`).
        on_record: with workers (``plan.spread.jobs``), called instead of the three above when a run is done:
            its result, its record, and whether the bundle prints passing checks.

    Raises:
        MgeError: bad options; with one bundle, anything that stops it (as
            :func:`~mgedump.commands.verify` raises it); with several, only
            what stops them all.
    """
    if not isinstance(plan, RunPlan):
        plan = plan_runs(plan, options)
    options, many = plan.options, plan.many
    protected = list(plan.protected)
    if many:  # the per-bundle folders go inside the one given
        for name in ("bin_out_dump", "io_dump"):
            folder = getattr(options, name)
            if folder:
                make_folder(folder, option_name(name))
    summary = Summary(
        names=dict(zip(plan.bundles, plan.names, strict=True)) if plan.names else {}, shard=plan.shard, run=plan.run
    )
    if plan.spread.workers is not None:
        _run_in_workers(plan, summary, protected, on_record)
    else:
        callbacks = (on_start, on_case, on_bundle, progress, on_stage)
        # the variants of one bundle share its outputs: a bad option for one is bad for all, and said once
        once = len(plan.bundles) == 1 and plan.shard is None
        runs = list(plan.runs or [(b, None) for b in plan.bundles])
        failed = 0
        for k, (path, variant) in enumerate(runs):
            if _stopped(plan, failed):
                summary.results += [BundleResult(p, variant=v, not_run=_not_run(plan)) for p, v in runs[k:]]
                break
            chosen = _cases_of(plan, k, options)
            summary.results.append(_run_here(path, variant, chosen, many, protected, *callbacks, usage_once=once))
            failed += summary.results[-1].exit_code != EXIT_OK
    summary.peak_rss_mib = peak_rss_mib()
    if plan.gate.active:
        from .gate import apply_gate

        summary.gate = apply_gate(summary.record(), plan.gate, partial(_time_again, plan.options))
    write_reports(summary, options, protected)
    return summary


def _time_again(options: VerifyOptions, path: str, variant: str | None, index: int) -> list[float]:
    """The latency gate's next round of a test case's runs (:func:`.gate.apply_gate`), timed here, alone."""
    return time_again(path, options_for(path, options, False, variant), index)


def _cases_of(plan: RunPlan, k: int, options: VerifyOptions) -> VerifyOptions:
    """The options of run ``k``: with ``--rerun-failed``, only its test cases that failed."""
    if not plan.cases or plan.cases[k] is None:
        return options
    return dataclasses.replace(options, test_cases=plan.cases[k])


def _stopped(plan: RunPlan, failed: int) -> bool:
    """``--maxfail N`` and N runs ``failed`` already: the rest are not run."""
    return plan.select.maxfail is not None and failed >= plan.select.maxfail


def _not_run(plan: RunPlan) -> str:
    """Why a run ``--maxfail`` left was not run."""
    limit = plan.select.maxfail
    return f"not run: stopped after {limit} failing bundle(s) ({option_name('maxfail')} {limit})"


def _run_here(
    path: str,
    variant: str | None,
    options: VerifyOptions,
    many: bool,
    protected: list[str],
    on_start: Callable[[str], None] | None,
    on_case: Callable[[CaseReport, Report], None] | None,
    on_bundle: Callable[[BundleResult], None] | None,
    progress: Progress | None,
    on_stage: Callable[[str], None] | None,
    usage_once: bool = False,
) -> BundleResult:
    """Verify one run in this process (with ``usage_once``, a usage error stops the command, as one bundle's does)."""
    if on_start is not None:
        on_start(path if variant is None else f"{path} [{variant}]")
    began = time.perf_counter()
    result = BundleResult(path, variant=variant)
    try:
        result.report = verify(
            path, options_for(path, options, many, variant), on_case=on_case, progress=progress,
            label=f"{run_name(path, variant)}: " if many else "", on_stage=on_stage,
        )  # fmt: skip
        for case in result.report.cases:  # the report keeps statistics; the tensors go, bundle after bundle
            case.outputs = []
    except MgeError as exc:
        if not many or (usage_once and isinstance(exc, UsageError)):
            raise
        result.error = exc
    result.seconds = time.perf_counter() - began
    result.peak_rss_mib = peak_rss_mib()
    if result.report is not None:
        protected += result.report.files
    if on_bundle is not None:
        on_bundle(result)
    return result


def _run_in_workers(
    plan: RunPlan,
    summary: Summary,
    protected: list[str],
    on_record: Callable[[BundleResult, BundleRecord, bool], None] | None,
) -> None:
    """Check every run in worker processes (:mod:`.jobs`), each record written to the summary's file as it comes;
    with ``jobs_timing="serial"``, then time each alone (:func:`.jobs.time_serially`)."""
    workers, timing = plan.spread.workers, plan.spread.timing
    assert workers is not None and timing is not None
    runs = plan.runs or tuple((b, None) for b in plan.bundles)
    check = check_options(plan.options, workers, timing)
    tasks = [
        (k, p, v, options_for(p, _cases_of(plan, k, check), True, v), f"{run_name(p, v)}: ")
        for k, (p, v) in enumerate(runs)
    ]
    summary.results = [BundleResult(path, variant=variant) for path, variant in runs]
    summary.records = tempfile.TemporaryFile()  # noqa: SIM115  # the summary's, removed when it is
    peaks: list[float] = []
    checked = tempfile.TemporaryFile()  # noqa: SIM115  # with serial timing: the records until they are timed
    waiting: dict[int, tuple[int, int, bool]] = {}  # index -> (offset, length, verbose) in checked

    def done(outcome: Done) -> None:
        result = summary.results[outcome.index]
        result.seconds, result.peak_rss_mib, result.started = outcome.seconds, outcome.peak_rss_mib, outcome.started
        result.error = outcome.failure()
        name = summary.names.get(result.path) or bundle_name(result.path)
        if outcome.record is None:
            record = result.record(name).to_json()
        else:
            record = outcome.record
            record.update(seconds=result.seconds, started=result.started, peak_rss_mib=result.peak_rss_mib)
            record["name"] = report_name(name, result.variant)
            result.exit = int(record["exit_code"])
            protected.extend(outcome.files)
        if timing != "alone":
            untimed(record)
        peaks.append(outcome.peak_rss_mib or 0.0)
        if timing == "serial" and outcome.record is not None:
            data = json.dumps(record).encode()
            waiting[outcome.index] = (checked.seek(0, os.SEEK_END), len(data), outcome.verbose)
            checked.write(data)
            return
        _save(summary, outcome.index, record)
        if on_record is not None:
            on_record(result, BundleRecord.from_json(record), outcome.verbose)

    def timed(outcome: Done) -> None:
        offset, length, verbose = waiting[outcome.index]
        checked.seek(offset)
        record = json.loads(checked.read(length))
        if outcome.record is not None:
            record = with_timing(record, outcome.record)
        else:
            warn_once(f"{outcome.error}: not timed")
        peaks.append(outcome.peak_rss_mib or 0.0)
        _save(summary, outcome.index, record)
        if on_record is not None:
            on_record(summary.results[outcome.index], BundleRecord.from_json(record), verbose)

    limit = plan.spread.timeout_s
    with checked:
        ended: set[int] = set()  # the runs done
        failed = [0]

        def count(outcome: Done) -> None:
            done(outcome)
            ended.add(outcome.index)
            failed[0] += summary.results[outcome.index].exit_code != EXIT_OK

        run_checks(tasks, workers, count, timeout=limit, stop=lambda: _stopped(plan, failed[0]))
        for index, result in enumerate(summary.results):
            if index not in ended:
                result.not_run = _not_run(plan)
                name = summary.names.get(result.path) or bundle_name(result.path)
                _save(summary, index, result.record(name).to_json())
        if waiting:
            alone = timing_options(plan.options)
            run_checks([(k, p, v, options_for(p, _cases_of(plan, k, alone), True, v), f"{run_name(p, v)}: ")
                        for k, p, v, _, _ in tasks if k in waiting], 1, timed, timeout=limit)  # fmt: skip
    summary.jobs = {"workers": workers, "timing": timing, "worker_peak_rss_mib": max(peaks, default=0.0)}


def _save(summary: Summary, index: int, record: dict[str, Any]) -> None:
    assert summary.records is not None
    summary.records.seek(0, os.SEEK_END)
    summary.records.write(json.dumps({"index": index, "record": record}).encode() + b"\n")


def run_name(path: str, variant: str | None) -> str:
    """What a run is called in per-run output names and labels: the bundle's name, and its variant."""
    return bundle_name(path) + (f".{variant}" if variant is not None else "")


def options_for(path: str, options: VerifyOptions, many: bool, variant: str | None = None) -> VerifyOptions:
    """The options for one run: its variant, and with several runs, the per-run outputs named after it."""
    if variant is not None and variant != options.variant:
        options = dataclasses.replace(options, variant=variant)
    if not many:
        return options
    name = run_name(path, variant)
    changes: dict[str, Any] = {}
    if options.profile:
        root, ext = os.path.splitext(options.profile)
        changes["profile"] = f"{root}.{name}{ext or '.json'}"
    for flag in ("bin_out_dump", "io_dump"):
        folder = getattr(options, flag)
        if folder:
            changes[flag] = os.path.join(folder, name)
    return dataclasses.replace(options, **changes) if changes else options


def _check_unique_names(bundles: Sequence[str], options: VerifyOptions, many: bool) -> None:
    """Per-bundle outputs are named after the bundles: two bundles of one name would write over each other."""
    if not many or not (options.profile or options.bin_out_dump or options.io_dump):
        return
    seen: dict[str, str] = {}
    for path in bundles:
        name = bundle_name(path)
        if name in seen and os.path.realpath(seen[name]) != os.path.realpath(path):
            raise UsageError(
                f"{seen[name]} and {path} are both called {name!r}: their {option_name('profile')} or dump outputs "
                "would collide",
                hint="rename one, or run them in separate calls",
            )
        seen[name] = path


def write_reports(summary: Summary, options: VerifyOptions, protected: Sequence[str]) -> None:
    """Write the reports the options ask for, all from the one report's records, and the fitting's choice; a target
    ``-`` is standard output."""
    fitted = [r.report.fitting for r in summary.results if r.report is not None and r.report.fitting is not None]
    if options.fitting_out and fitted and fitted[0].chosen is not None:
        write_report(options.fitting_out, config_text(fitted[0].chosen), protected)
    if asked(options):
        write_report_files(summary.record(), options, protected)


def write_report_files(report: RunReport, options: VerifyOptions, protected: Sequence[str]) -> None:
    """Write a report's records in every format the options ask for (:mod:`mgedump.report.formats`), together or
    not at all."""
    with all_or_nothing():  # the report files replace their targets together, or none does
        for entry, target in asked(options):
            write_report(target, entry.bytes_of(report), protected)
