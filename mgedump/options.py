"""The options of the library's commands: plain frozen dataclasses, every default written once.

:func:`mgedump.pack` takes a :class:`PackOptions`, :func:`mgedump.verify` a
:class:`VerifyOptions`, :func:`mgedump.diff` a :class:`DiffOptions`; they hold
plain values (numbers, names, tuples) and know nothing of the command line,
which builds them from its flags (:mod:`mgedump.cli.flags`). Each dataclass
checks its values when it is made, so a bad value fails with one
:class:`~mgedump.base.errors.UsageError` before any work starts; the messages
name options as the surface in use does (:mod:`mgedump.base.naming`). Checks
that need the registry of precision modes (what applies to which mode) are
the pipeline's: :func:`mgedump.optimize.precisions.check_options`.

This module imports nothing heavy: the command line reads its defaults to
print ``--help`` without loading numpy, onnx or onnxruntime.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, InitVar, dataclass, field, fields, is_dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from .base.bounds import Bounds, OutputBounds, OutputStats, check_maxerr
from .base.cpus import usable_cpus
from .base.errors import UsageError
from .base.naming import option_name
from .base.numbers import parse_version
from .model.session import SessionSettings, check_threads

if TYPE_CHECKING:  # numpy is imported by the commands, not by the options (--help reads them)
    from numpy.typing import ArrayLike

FLOAT16_MAXERR = 1e-2  # mgediff's default when either side holds float16: float16's own precision
FLOAT16_MARGIN = 0.5  # the float16 search aims this fraction below maxerr (measured on held-out data: docs/float16.md)
IO_DUMP_BUDGET_MB = 1024  # MiB of exposed tensors one run may hold (docs/io-dump.md)
FLOAT32 = "fp32"  # the variant of no precision mode: the model's own float32 (a name in PackOptions.variants)
CALIBRATE_METHODS = ("minmax", "entropy", "percentile")  # onnxruntime's calibrators; minmax measured best (docs)
INT8_WEIGHTS = ("per-channel", "per-tensor")
MAX_DURATION_S = 86400
REPORT = {"report": True}  # marks a field that is a report format's target (mgedump.report.formats)
FITTING_BUDGET_S = 60.0  # seconds a fitting may take, sessions included (docs/fitting.md)


# ---------------------------------------------------------------------------------------------------------------------
# Test cases as the options take them (the commands parse them: mgedump.data.TestData.parse)


class CaseText(Protocol):
    """A test case as written, parsed (:class:`mgedump.data.spec.CaseSpec`): its text and where it came from."""

    @property
    def text(self) -> str: ...

    @property
    def origin(self) -> str: ...


class ParsedCases(Protocol):
    """Test cases parsed already (:class:`mgedump.data.TestData`): they pass as they are."""

    @property
    def list_files(self) -> list[str]: ...


# One test case: a -d text, one parsed, an array (or a number), or a dict of input name to array.
GivenCase: TypeAlias = "str | CaseText | ArrayLike | Mapping[str, ArrayLike]"
# The test cases of an option: a list of them, or test data parsed already.
GivenCases: TypeAlias = "Sequence[GivenCase] | ParsedCases"


# ---------------------------------------------------------------------------------------------------------------------
# Checks of one value


def check_one_of(value: Any, choices: Sequence[str], name: str) -> None:
    """Refuse a value that is not one of ``choices``."""
    if value not in choices:
        raise UsageError(f"{option_name(name)} must be one of {', '.join(choices)}, got {value!r}")


def check_at_least(value: Any, low: int, name: str, unit: str = "") -> None:
    """Refuse a whole number below ``low``."""
    if value < low:
        raise UsageError(f"{option_name(name)} must be >= {low}{unit}, got {value}")


def given_cases(value: GivenCases, name: str = "cases") -> GivenCases:
    """The test cases as given: ``-d`` texts, :class:`~mgedump.data.spec.CaseSpec` objects, arrays or dicts (a
    tuple of them), or :class:`~mgedump.data.TestData` already parsed (which passes as it is)."""
    if hasattr(value, "list_files"):  # TestData: parsed at the edge, not parsed again
        return value
    if (
        isinstance(value, (str, bytes))
        or is_dataclass(value)
        or isinstance(value, Mapping)
        or hasattr(value, "dtype")
        or not isinstance(value, Iterable)
    ):
        raise UsageError(
            f"{option_name(name)} must be a list of test cases (-d texts, arrays or dicts of input name to array), "
            f"got one {type(value).__name__}"
        )
    return tuple(value)


def _normalize(options: Any, **values: Any) -> None:
    """Store values in their checked form (a frozen dataclass's fields, set once, while it is made)."""
    for name, value in values.items():
        object.__setattr__(options, name, value)


# ---------------------------------------------------------------------------------------------------------------------
# The options


@dataclass(frozen=True)
class DataOptions:
    """How test data is made from ``-d`` specs (docs/data-specs.md).

    Attributes:
        seed: seeds every generator; the same seed gives the same data.
        repeat: repeat file data this many times along axis 0 (batch).
        resize_input: resize images to the model's H and W.
        input_transform: a Python expression of ``data`` and ``np`` applied to
            file data after ``repeat``. It is the user's own code from the
            command line; it is never read from a bundle or a list file.
        input_shapes: (input name or None for a one-input model, dims): fixes
            an input's shape for every source (generators use it,
            ``resize_input`` resizes images to its H and W, file data that
            contradicts it is an error).
    """

    seed: int = 0
    repeat: int = 1
    resize_input: bool = False
    input_transform: str | None = None
    input_shapes: tuple[tuple[str | None, tuple[int, ...]], ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.seed < 2**63:
            raise UsageError(f"{option_name('seed')} must be in [0, 2**63), got {self.seed}")
        check_at_least(self.repeat, 1, "repeat")
        if self.input_transform is not None:
            try:
                compile(self.input_transform, "<input_transform>", "eval")
            except SyntaxError as exc:
                raise UsageError(
                    f"{option_name('input_transform')} {self.input_transform!r} is not a Python expression: {exc.msg}"
                ) from None
        for _, dims in self.input_shapes:
            if not dims or any(d < 0 or d >= 1 << 31 for d in dims):
                raise UsageError(f"{option_name('input_shapes')} takes whole numbers >= 0 as dims, got {list(dims)}")

    def given(self) -> list[str]:
        """The options whose values differ from their defaults, as the surface in use names them."""
        return [option_name(f.name) for f in fields(self) if getattr(self, f.name) != f.default]


@dataclass(frozen=True)
class OptimizeOptions:
    """Which rewrites ``mgedump`` applies to the bundled model (docs/optimize.md). All are off by default.

    Attributes:
        optimize_for_inference: portable rewrites (constant folding, BatchNorm folded into Conv, ...).
        precision: a precision mode by name, from the registry (:mod:`mgedump.optimize.precisions`:
            ``"ioc16"``, ``"io16xc32"``, ``"int8"``, ``"int8-dynamic"``); none keeps the model's float32.
        fuse_conv_bias_nonlinearity: onnxruntime's fused Conv (onnxruntime only).
        nchw88: onnxruntime's NCHWc layout (onnxruntime's CPU provider, x86 AVX2).
        discard_var_name: rename internal tensors, drop node names and doc strings.
        fp32_nodes: glob patterns of node names or op types that a float16 or int8 mode keeps float,
            whatever the test data says.
        keep_io_types: a float16 mode keeps the model's float inputs and outputs float32.
        float16_margin: the float16 search aims this fraction below maxerr.
        calibrate_method: int8 (static): how activation ranges are calibrated.
        int8_weights: int8: one scale per output channel or per weight tensor.
    """

    optimize_for_inference: bool = False
    precision: str | None = None
    fuse_conv_bias_nonlinearity: bool = False
    nchw88: bool = False
    discard_var_name: bool = False
    fp32_nodes: tuple[str, ...] = ()
    keep_io_types: bool = False
    float16_margin: float = FLOAT16_MARGIN
    calibrate_method: str = CALIBRATE_METHODS[0]
    int8_weights: str = INT8_WEIGHTS[0]

    def __post_init__(self) -> None:
        if isinstance(self.fp32_nodes, str) or not all(isinstance(p, str) for p in self.fp32_nodes):
            raise UsageError(f"{option_name('fp32_nodes')} takes a list of node name or op type patterns")
        _normalize(self, fp32_nodes=tuple(p.strip() for p in self.fp32_nodes if p.strip()))
        margin = self.float16_margin
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin < 1:
            raise UsageError(f"{option_name('float16_margin')} must be a fraction in [0, 1), got {margin}")
        check_one_of(self.calibrate_method, CALIBRATE_METHODS, "calibrate_method")
        check_one_of(self.int8_weights, INT8_WEIGHTS, "int8_weights")
        if self.precision is not None and not isinstance(self.precision, str):
            raise UsageError(f"{option_name('precision')} names a precision mode, got {self.precision!r}")
        for name in ("fuse_conv_bias_nonlinearity", "nchw88"):
            if getattr(self, name) and not self.optimize_for_inference:
                raise UsageError(
                    f"{option_name(name)} needs {option_name('optimize_for_inference')}",
                    hint=f"add {option_name('optimize_for_inference')}",
                )

    @property
    def any(self) -> bool:
        """Whether any rewrite is on."""
        return bool(
            self.optimize_for_inference
            or self.precision
            or self.fuse_conv_bias_nonlinearity
            or self.nchw88
            or self.discard_var_name
        )


@dataclass(frozen=True)
class PackOptions:
    """What ``mgedump`` packs besides the model.

    Attributes:
        cases: the test cases: ``-d`` texts (``@FILE`` gives several),
            :class:`~mgedump.data.spec.CaseSpec` objects, or, from code, arrays:
            an array per test case for a one-input model, or a dict of input name to array.
        data: how data is made and prepared.
        bounds: the AssertEqual bounds recorded in the bundle (:class:`~mgedump.base.bounds.Bounds`): every
            output's, outputs' own, and the statistic of the element errors each applies to (docs/assertion.md).
            The keywords ``maxerr`` (the bound of every output), ``output_maxerr`` (outputs with their own: a
            mapping or (name, bound) pairs), ``error_stat`` (``"max"``, ``"p99"``, ``"mean"`` or ``"median"``) and
            ``output_error_stat`` (outputs with their own) set its parts.
        no_assert: store no expected outputs; ``mgerun`` then only runs and times.
        silent: record that ``mgerun`` prints failures only.
        optimize: rewrites for inference (none: the model as given).
        calibrate: with int8 (static): the calibration data, as ``cases`` takes it (none: the test cases).
        strip_info: write strip info (JSON) to this path, and onnxruntime's reduced-build config beside it
            (none: no strip info).
        model_out: also write the bundled model as a plain ONNX file here.
        embed_io_dump: store the io dump of the model as given on this many
            test cases (the first ones) in the bundle, so that ``mgerun`` names
            where a failing test case first diverges (0: none).
        variants: several variants of the model in one bundle (docs/fitting.md): ``"fp32"`` and precision
            modes by name (``"ioc16"``, ``"int8"``, ...), or ``"auto"`` for every one this model can have; each is
            made with ``optimize``'s rewrites and proved on the test cases; one that misses maxerr is left out
            with its reason (none given: the one model ``optimize`` makes).
        target_runtime: the onnxruntime version the target has (``"1.17"``): the bundled model is written at the
            newest IR and opsets it loads (none: the model's own; :mod:`mgedump.model.target`).
        nonfinite_ok: expected outputs may hold NaN or infinity: a warning names the output and the count
            (``trace.dump`` sets it, as MegEngine dumps them); the command line has no flag for it and refuses them.
    """

    cases: GivenCases = ()
    data: DataOptions = field(default_factory=DataOptions)
    bounds: Bounds = field(default_factory=Bounds)
    no_assert: bool = False
    silent: bool = False
    optimize: OptimizeOptions = field(default_factory=OptimizeOptions)
    calibrate: GivenCases = ()
    strip_info: str | None = None
    model_out: str | None = None
    embed_io_dump: int = 0
    variants: tuple[str, ...] = ()
    target_runtime: str | None = None
    nonfinite_ok: bool = False
    _: KW_ONLY
    maxerr: InitVar[float | None] = None
    output_maxerr: InitVar[OutputBounds | None] = None
    error_stat: InitVar[str | None] = None
    output_error_stat: InitVar[OutputStats | None] = None

    def __post_init__(
        self,
        maxerr: float | None,
        output_maxerr: OutputBounds | None,
        error_stat: str | None,
        output_error_stat: OutputStats | None,
    ) -> None:
        if not isinstance(self.bounds, Bounds):
            raise UsageError(f"{option_name('bounds')} takes a Bounds, got {type(self.bounds).__name__}")
        _normalize(self, bounds=self.bounds.replaced(maxerr, error_stat, output_maxerr, output_error_stat))
        if self.target_runtime is not None:
            parse_version(str(self.target_runtime), option_name("target_runtime"))
        if isinstance(self.variants, str) or not all(isinstance(v, str) for v in self.variants):
            raise UsageError(f"{option_name('variants')} takes a list of variant names, e.g. ['fp32', 'int8']")
        if self.variants and self.optimize.precision is not None:
            raise UsageError(
                f"{option_name('precision', self.optimize.precision)} and {option_name('variants')} exclude each "
                f"other: name {self.optimize.precision!r} among the variants"
            )
        if len(self.variants) > 1 and self.no_assert:
            raise UsageError(
                f"{option_name('variants')} are proved on the test cases: leave out {option_name('no_assert')}"
            )
        if self.embed_io_dump < 0:
            raise UsageError(
                f"{option_name('embed_io_dump')} takes a count of test cases >= 1, got {self.embed_io_dump}"
            )
        _normalize(
            self,
            cases=given_cases(self.cases),
            calibrate=given_cases(self.calibrate, "calibrate") if self.calibrate else (),
            variants=tuple(self.variants),
        )


@dataclass(frozen=True)
class VerifyOptions:
    """How ``mgerun`` verifies and times.

    Attributes:
        cases: test data (as :class:`PackOptions` takes it), for a plain model only.
        data: data options, for a plain model only.
        bounds: over the bundle's bounds (:meth:`~mgedump.base.bounds.Bounds.overridden_by`): a bound given
            replaces every output's, then outputs' own replace theirs (none given: the bundle's). The keywords
            ``maxerr`` (every output's) and ``output_maxerr`` (outputs' own: a mapping or (name, bound) pairs) set
            its parts.
        silent: print failures only (none: the bundle's setting).
        no_assert: run and time only.
        iters: timed runs per test case.
        warmup: untimed runs before timing.
        duration_s: time each test case for at least this many seconds (and
            at least ``iters`` runs); 0: exactly ``iters`` runs.
        concurrency: threads issuing runs on the one session at once; the
            latency of each run under that load, and throughput, are reported.
        session: how the model's session runs (provider and its options, threads, graph optimisation,
            execution mode: :class:`~mgedump.model.session.SessionSettings`, or a mapping of its settings by
            name); none given: the CPU provider with onnxruntime's defaults.
        profile: write onnxruntime's profile JSON to this file; the report then
            also holds the time per operator type.
        bin_out_dump: write each test case's outputs as ``.npy`` into this folder.
        repeat_sweep: batch sizes: after verifying, time every test case with
            its inputs repeated N times along axis 0, for each N.
        report_json: write the machine-readable report to this file
            (:func:`mgedump.verify_all` writes it, for all bundles).
        junit_xml: write a JUnit XML report to this file (``verify_all``).
        report_html: write a self-contained HTML report with plots to this file (``verify_all``).
        reports: where to write the reports of formats registered beyond these three, by the format's option
            (:mod:`mgedump.report.formats`); a built-in format's option given here is taken as that field.
        io_dump: write every tensor of every test case into this folder (an io dump).
        io_dump_budget_mb: how many MiB of exposed tensors one run may hold;
            beyond it, a test case is run several times, a part of the tensors each.
        variant: the variant of a bundle of several to run (docs/fitting.md); none: every variant
            (:func:`mgedump.verify_all`; :func:`mgedump.verify` asks for one).
        fitting: verify every variant, time the passing ones under the settings this machine offers, and run the
            fastest proven one (docs/fitting.md); ``fitting_budget_s`` bounds the search; ``fitting_out`` writes the
            choice (JSON) to this file.
        config: run exactly a choice ``fitting_out`` wrote: its variant and session settings.
        test_cases: run only the test cases of these numbers (none: every one; ``--rerun-failed`` sets it per
            bundle).
    """

    cases: GivenCases = ()
    data: DataOptions = field(default_factory=DataOptions)
    bounds: Bounds = field(default_factory=Bounds)
    silent: bool | None = None
    no_assert: bool = False
    iters: int = 10
    warmup: int = 1
    duration_s: float = 0.0
    concurrency: int = 1
    session: SessionSettings = field(default_factory=SessionSettings)
    profile: str | None = None
    bin_out_dump: str | None = None
    repeat_sweep: Sequence[int] = ()
    report_json: str | None = field(default=None, metadata=REPORT)
    junit_xml: str | None = field(default=None, metadata=REPORT)
    report_html: str | None = field(default=None, metadata=REPORT)
    reports: Mapping[str, str] = field(default_factory=dict)
    io_dump: str | None = None
    io_dump_budget_mb: int = IO_DUMP_BUDGET_MB
    variant: str | None = None
    fitting: bool = False
    fitting_budget_s: float = FITTING_BUDGET_S
    fitting_out: str | None = None
    config: str | None = None
    test_cases: tuple[int, ...] | None = None
    _: KW_ONLY
    maxerr: InitVar[float | None] = None
    output_maxerr: InitVar[OutputBounds | None] = None

    def __post_init__(self, maxerr: float | None, output_maxerr: OutputBounds | None) -> None:
        if not isinstance(self.bounds, Bounds):
            raise UsageError(f"{option_name('bounds')} takes a Bounds, got {type(self.bounds).__name__}")
        _normalize(self, bounds=self.bounds.replaced(maxerr, output_maxerr=output_maxerr))
        check_at_least(self.iters, 1, "iters")
        session = self.session
        if isinstance(session, Mapping):
            session = SessionSettings.given(session)
        if not isinstance(session, SessionSettings):
            raise UsageError(f"{option_name('session')} must be SessionSettings, got {type(session).__name__}")
        session.check()
        budget = self.fitting_budget_s
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 < budget <= MAX_DURATION_S:
            raise UsageError(
                f"{option_name('fitting_budget_s')} must be a number of seconds in (0, {MAX_DURATION_S}], got {budget}"
            )
        if (self.fitting_out or budget != FITTING_BUDGET_S) and not self.fitting:
            which = "fitting_out" if self.fitting_out else "fitting_budget_s"
            raise UsageError(f"{option_name(which)} applies to {option_name('fitting')}, which is not given")
        if self.fitting and (self.config or self.variant):
            other = "config" if self.config else "variant"
            raise UsageError(
                f"{option_name('fitting')} chooses the variant; {option_name(other)} names one: give one of them"
            )
        check_at_least(self.warmup, 0, "warmup")
        check_threads(self.concurrency, "concurrency")
        check_at_least(self.io_dump_budget_mb, 1, "io_dump_budget_mb", " (MiB)")
        duration = self.duration_s
        if not (isinstance(duration, (int, float)) and math.isfinite(duration) and duration >= 0):
            raise UsageError(f"{option_name('duration_s')} must be a finite number of seconds >= 0, got {duration}")
        if duration > MAX_DURATION_S:
            raise UsageError(
                f"{option_name('duration_s')} must be at most {MAX_DURATION_S} seconds (a day), got {duration:g}"
            )
        if any(n < 1 for n in self.repeat_sweep):
            raise UsageError(f"{option_name('repeat_sweep')} batch sizes must be >= 1, got {list(self.repeat_sweep)}")
        _normalize(
            self,
            cases=given_cases(self.cases),
            repeat_sweep=tuple(self.repeat_sweep),
            session=session,
            **self._report_fields(),
        )

    def _report_fields(self) -> dict[str, Any]:
        """``reports`` split: a target for a format that has a field of its own goes to that field."""
        own = {f.name for f in fields(self) if f.metadata.get("report")}
        if not isinstance(self.reports, Mapping):
            raise UsageError(f"{option_name('reports')} must map report formats to paths, got {self.reports!r}")
        moved: dict[str, Any] = {"reports": {k: v for k, v in self.reports.items() if k not in own and v}}
        for name, target in self.reports.items():
            if name in own and target:
                if getattr(self, name) not in (None, target):
                    raise UsageError(f"{option_name(name)} is given twice: {getattr(self, name)} and {target}")
                moved[name] = target
        return moved

    def report_target(self, option: str) -> str | None:
        """Where the report format of this option goes (its field, or its entry of ``reports``); none: nowhere."""
        own = any(f.name == option and f.metadata.get("report") for f in fields(self))
        return getattr(self, option) if own else self.reports.get(option)


@dataclass(frozen=True)
class DiffOptions:
    """How ``mgediff`` compares two runs.

    Attributes:
        cases: the test data for sides that are models or bundles.
        data: data options for ``cases``.
        maxerr: the AssertEqual bound for every tensor (none: :data:`~mgedump.base.bounds.DEFAULT_MAXERR`, or
            :data:`FLOAT16_MAXERR` when either side holds float16: float16's precision).
        provider: execution provider for the runs (none: the CPU provider).
        io_dump_budget_mb: MiB of exposed tensors one run may hold.
        variant: the variant to run of a side that is a bundle of several (``mgedump --variants``); such a
            side needs it.
        report_json: write the comparison as JSON to this file.
    """

    cases: GivenCases = ()
    data: DataOptions = field(default_factory=DataOptions)
    maxerr: float | None = None
    provider: str | None = None
    io_dump_budget_mb: int = IO_DUMP_BUDGET_MB
    variant: str | None = None
    report_json: str | None = None

    def __post_init__(self) -> None:
        check_at_least(self.io_dump_budget_mb, 1, "io_dump_budget_mb", " (MiB)")
        _normalize(
            self, maxerr=None if self.maxerr is None else check_maxerr(self.maxerr), cases=given_cases(self.cases)
        )


PERCENTILES = ("p50", "p90", "p99")  # what the latency gate compares (docs/verify.md#latency-gates)
MAX_LATENCY_MS = 86_400_000.0  # a day


@dataclass(frozen=True)
class GateOptions:
    """The latency gate (:mod:`mgedump.commands.gate`).

    Attributes:
        max_latency: (test case index or none for every test case, milliseconds) limits; a test case's own first.
        latency_percentile: what is compared: ``"p50"``, ``"p90"`` or ``"p99"``.
        baseline: an earlier JSON report of the same bundles to compare with.
        max_slowdown: how many times the baseline's figure a test case may take (with ``baseline``; default 1.10).
    """

    max_latency: tuple[tuple[int | None, float], ...] = ()
    latency_percentile: str = "p90"
    baseline: str | None = None
    max_slowdown: float | None = None

    def __post_init__(self) -> None:
        check_one_of(self.latency_percentile, PERCENTILES, "latency_percentile")
        for _, ms in self.max_latency:
            if not 0 < ms <= MAX_LATENCY_MS:
                raise UsageError(f"{option_name('max_latency')} takes milliseconds over 0 (at most a day); got {ms:g}")
        if self.max_slowdown is not None:
            if self.baseline is None:
                raise UsageError(
                    f"{option_name('max_slowdown')} compares with {option_name('baseline')}: give that too"
                )
            if not 1.0 <= self.max_slowdown <= 1000.0:
                raise UsageError(
                    f"{option_name('max_slowdown')} takes a factor from 1 to 1000; got {self.max_slowdown:g}"
                )
        if self.baseline is not None and self.max_slowdown is None:
            object.__setattr__(self, "max_slowdown", 1.10)

    @property
    def active(self) -> bool:
        return bool(self.max_latency) or self.baseline is not None

    def limit_for(self, index: int) -> float | None:
        """The limit of test case ``index``: its own, else the one for every test case (none: no limit)."""
        own = [ms for case, ms in self.max_latency if case == index]
        every = [ms for case, ms in self.max_latency if case is None]
        chosen = own or every
        return chosen[-1] if chosen else None


JOBS_TIMINGS = ("none", "serial")  # how --jobs over 1 times the bundles it checked in parallel (docs/verify.md)
MAX_JOBS = 256  # worker processes beyond this only wait for the cores and memory
MAX_TIMEOUT_S = 86400.0  # --timeout: a day at most


@dataclass(frozen=True)
class SpreadOptions:
    """How ``mgerun`` spreads many bundles: over machines (shards) and over worker processes (jobs).

    Attributes:
        shard: check one shard of the bundles: ``"I/N"`` (1-based), ``"auto"`` (GitLab's ``CI_NODE_INDEX`` and
            ``CI_NODE_TOTAL``) or ``"auto/N"`` (Kubernetes' ``JOB_COMPLETION_INDEX``, 0-based, or GitLab's
            index); none: every bundle (:mod:`mgedump.commands.shards`).
        shard_durations: a JSON report of an earlier run whose times balance the shards (none: the stable hash).
        jobs: worker processes checking bundles at once, ``"auto"`` for the cores this process may use; none: every
            bundle in this process, one after another (:mod:`mgedump.commands.jobs`).
        jobs_timing: with jobs over 1, ``"none"`` (check in parallel, time nothing) or ``"serial"`` (then time each
            bundle alone, one after another); none: ``"none"``.
        run_id: the run's identity, recorded in the report and checked by ``--merge``; none: the CI's run variable
            (:func:`mgedump.commands.shards.resolve_run`).
        timeout_s: seconds one bundle may take; beyond, its worker is killed and the bundle fails (none: no limit).
    """

    shard: str | None = None
    shard_durations: str | None = None
    jobs: int | str | None = None
    jobs_timing: str | None = None
    run_id: str | None = None
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        jobs = self.jobs
        if (
            jobs is not None
            and jobs != "auto"
            and (isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS)
        ):
            raise UsageError(f"{option_name('jobs')} takes a count from 1 to {MAX_JOBS}, or auto; got {self.jobs}")
        if self.jobs_timing is not None:
            check_one_of(self.jobs_timing, JOBS_TIMINGS, "jobs_timing")
            if self.jobs is None:
                raise UsageError(f"{option_name('jobs_timing')} applies with {option_name('jobs')}")
        if self.shard_durations is not None and self.shard is None:
            raise UsageError(f"{option_name('shard_durations')} balances {option_name('shard')}: give that too")
        if self.timeout_s is not None and not (
            isinstance(self.timeout_s, (int, float)) and 0 < self.timeout_s <= MAX_TIMEOUT_S
        ):
            raise UsageError(f"{option_name('timeout_s')} takes seconds over 0 and at most {MAX_TIMEOUT_S:g} (a day)")

    @property
    def workers(self) -> int | None:
        """The worker processes: ``jobs`` with ``auto`` as the cores this process may use (none: no workers; with a
        timeout and no ``jobs``, one, so that a bundle that runs too long can be stopped)."""
        if self.jobs is None and self.timeout_s is not None:
            return 1
        if self.jobs != "auto":
            return self.jobs if isinstance(self.jobs, int) else None
        return max(1, min(usable_cpus(), MAX_JOBS))

    @property
    def timing(self) -> str | None:
        """How the bundles are timed with workers: ``"alone"`` (one worker: each timed as it is checked),
        ``"none"`` or ``"serial"``; none without workers."""
        workers = self.workers
        if workers is None:
            return None
        return "alone" if workers == 1 and self.jobs_timing is None else self.jobs_timing or "none"


MAX_FAIL = 1_000_000  # --maxfail: beyond, it stops nothing a folder holds


@dataclass(frozen=True)
class SelectOptions:
    """Which bundles ``mgerun`` runs of those it found, and when it stops (:mod:`mgedump.commands.rerun`,
    docs/verify.md#stopping-early-and-running-again).

    Attributes:
        rerun_failed: an earlier JSON report: run only the bundles, variants and test cases that failed or could
            not run in it (none: all).
        maxfail: stop after this many failing bundles (or variants) and report the rest as not run (none: never).
    """

    rerun_failed: str | None = None
    maxfail: int | None = None

    def __post_init__(self) -> None:
        if self.maxfail is not None and (
            isinstance(self.maxfail, bool) or not isinstance(self.maxfail, int) or not 1 <= self.maxfail <= MAX_FAIL
        ):
            raise UsageError(f"{option_name('maxfail')} takes a count from 1 to {MAX_FAIL}; got {self.maxfail}")


# The bound's keywords, read back from ``bounds`` for the library's callers (``PackOptions(maxerr=0.5).maxerr`` is
# 0.5, and ``dataclasses.replace`` hands them on unchanged); the library itself reads ``bounds``.
PackOptions.maxerr = property(lambda self: self.bounds.default.maxerr)  # type: ignore[attr-defined]
PackOptions.error_stat = property(lambda self: self.bounds.default.stat)  # type: ignore[attr-defined]
PackOptions.output_maxerr = property(lambda self: self.bounds.output_maxerr)  # type: ignore[attr-defined]
PackOptions.output_error_stat = property(lambda self: self.bounds.output_error_stat)  # type: ignore[attr-defined]
VerifyOptions.maxerr = property(lambda self: self.bounds.maxerr)  # type: ignore[attr-defined]
VerifyOptions.output_maxerr = property(lambda self: self.bounds.output_maxerr)  # type: ignore[attr-defined]
