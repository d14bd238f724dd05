"""``mgerun --fitting``: verify every variant of a bundle, time the passing ones under the settings this machine
offers, and choose the one to ship (docs/fitting.md); ``mgerun --config FILE`` runs that choice again.

The search itself is :func:`mgedump.measure.fitting.fit`; this module makes its
candidates from a bundle (each passing variant's model under each setting,
run on the bundle's first test case), writes the choice as a small JSON file,
and reads it back.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base.errors import UsageError
from ..base.fileio import read_regular
from ..base.log import warn_once
from ..base.naming import option_name
from ..bundle import Bundle
from ..bundle.reader import peek_model_sha256, peek_variants
from ..data.casts import as_inputs_of
from ..measure.fitting import Candidate, Fitting, fit, process_memory, settings_space
from ..measure.timing import Progress
from ..model.runtime import OrtRunner, TensorInfo, open_runner
from ..model.session import CPU, EXECUTION_MODES, GRAPH_OPT_LEVELS, MAX_THREADS, SessionSettings
from ..options import FITTING_BUDGET_S, VerifyOptions
from .verify_prepare import Placed, place_model

CONFIG_FORMAT = "mgedump-fitting"
CONFIG_VERSION = 1
RANKS = {"fp32": 0}  # a variant's distance from float32 when its mode does not say (precisions give the rest)
UNUSABLE_PROVIDERS = ("AzureExecutionProvider",)  # listed by some builds, runs no model of its own
# onnxruntime's defaults, what mgerun opens with no flags (its default graph optimisation is all, its execution
# sequential; its intra-op threads its own choice: null in a choice)
DEFAULTS = SessionSettings(graph_opt="all", execution_mode="sequential")

MAX_CONFIG_BYTES = 1 << 20  # a choice is a few hundred bytes


@dataclass
class VariantCheck:
    """A variant's verification before fitting: its report (or the error that stopped it), its certified error."""

    name: str
    passed: bool
    report: Any = None
    error: str | None = None
    certified: dict[str, float | None] = field(default_factory=dict)


@dataclass
class FittingResult:
    """What ``--fitting`` found: every variant verified, the search, and the choice (None: no variant passed)."""

    bundle: str
    checks: list[VariantCheck]
    fitting: Fitting | None
    chosen: dict[str, Any] | None

    @property
    def passed(self) -> bool:
        return self.chosen is not None


Run = Callable[..., Any]  # mgedump.commands.verify.verify: one bundle (one variant) verified and timed -> Report


def fit_bundle(
    path: str,
    options: VerifyOptions,
    run: Run,
    *,
    budget_s: float,
    progress: Progress | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> FittingResult:
    """Verify every variant of a bundle, then time the passing ones under every setting this machine offers and
    choose one (the module docstring; docs/fitting.md).

    Raises:
        MgeError: a bundle that cannot be read (exit 2).
    """
    fitting = option_name("fitting")
    if options.no_assert:
        raise UsageError(
            f"{fitting} chooses among variants proven on the test cases; {option_name('no_assert')} checks none"
        )
    names = peek_variants(path) or [_single_variant(path)]
    checks = [_check(path, name, options, run) for name in names]
    reports = [c.report for c in checks if c.report is not None]
    if reports and not any(case.checks for report in reports for case in report.cases):
        raise UsageError(
            f"{path} holds no expected outputs (packed with {option_name('no_assert')}): {fitting} has nothing to "
            "prove its variants on"
        )
    passing = [c for c in checks if c.passed]
    if not passing:
        return FittingResult(path, checks, None, None)
    with tempfile.TemporaryDirectory(prefix="mgerun-fitting-") as tmp:
        candidates = _candidates(path, [c.name for c in passing], options, tmp)
        if on_stage is not None:
            on_stage(f"fitting {len(candidates)} candidate(s) within {budget_s:g} s")
        found = fit(candidates, budget_s, progress=_progress(progress), memory=process_memory())
    chosen = _choice(path, found) if found.chosen is not None else None
    return FittingResult(path, checks, found, chosen)


def _single_variant(path: str) -> str:
    """The variant a one-model bundle holds (``fp32``, ``int8``, ...)."""
    from ..optimize.precisions import variant_of

    with Bundle(path) as bundle:
        return variant_of(bundle.manifest.records)


def _check(path: str, name: str, options: VerifyOptions, run: Run) -> VariantCheck:
    """Verify one variant on every test case (one run each: timing is the search's)."""
    from ..base.errors import MgeError

    several = bool(peek_variants(path))
    quick = dataclasses.replace(
        options, variant=name if several else None, fitting=False, fitting_out=None,
        fitting_budget_s=FITTING_BUDGET_S, iters=1, warmup=0,
        duration_s=0.0, repeat_sweep=(), profile=None, bin_out_dump=None, io_dump=None,
    )  # fmt: skip
    try:
        report = run(path, quick)
    except MgeError as exc:
        return VariantCheck(name, False, error=exc.one_line())
    worst: dict[str, float | None] = {}
    for case in report.cases:
        for check in case.checks:
            before = worst.get(check.name, 0.0)
            worst[check.name] = None if check.err is None or before is None else max(check.err, before)
    return VariantCheck(name, report.passed, report, certified=worst)


def _progress(progress: Progress | None) -> Callable[[str, int, int], None] | None:
    return None if progress is None else (lambda label, done, total: progress(label, done, total))


def providers() -> list[str]:
    """The execution providers this onnxruntime offers that can run a model."""
    import onnxruntime as ort  # type: ignore[import-untyped]

    return [p for p in ort.get_available_providers() if p not in UNUSABLE_PROVIDERS]


def _candidates(path: str, names: Sequence[str], options: VerifyOptions, tmp: str) -> list[Candidate]:
    """Every passing variant under every setting, and onnxruntime's defaults (float32's, or the one variant's of a
    bundle of one model): its model placed once (its weights read where they lie in the bundle), its first test
    case's inputs in its dtypes."""
    from ..optimize.precisions import FLOAT32, registry

    space = settings_space(providers())
    plain = FLOAT32 if FLOAT32 in names else names[0] if len(names) == 1 else None
    candidates = []
    with Bundle(path) as bundle:
        manifest = bundle.manifest
        stored = [TensorInfo.from_json(d) for d in manifest.inputs]
        case = manifest.test_cases[0]
        arrays = [(info.name, bundle.value(m, info)) for info, m in zip(stored, case.inputs, strict=True)]
        for name in names:
            entry = next((v for v in manifest.variants if v.name == name), None)  # none: a one-model bundle
            model = entry.model if entry is not None else manifest.model
            placed = place_model(bundle, model, os.path.join(tmp, name), f"{path}:{model.member}")
            takes = [TensorInfo.from_json(d) for d in (entry.inputs if entry is not None else manifest.inputs)]
            feeds = dict(as_inputs_of(arrays, stored, takes))
            mode = registry().get(name)
            rank = RANKS.get(name, mode.rank if mode is not None else 1) if name != FLOAT32 else 0
            candidates += [Candidate(name, rank, s, _starter(placed, feeds, s)) for s in space]
            if name == plain:  # doing nothing: the session mgerun opens with no flags
                candidates.append(Candidate(name, rank, DEFAULTS, _starter(placed, feeds, DEFAULTS), defaults=True))
        bundle.verified()
    return candidates


class _Runs:
    """One run of the test case (timed), and the run that ends a turn (untimed): it hands back what the session's
    arena holds free, so that the finalists left open between their turns hold their weights only (docs/fitting.md:
    each kept the memory of its largest run, 3.3x a plain mgerun on a layout detector with three variants)."""

    def __init__(self, runner: OrtRunner, feeds: dict[str, Any]) -> None:
        self.runner = runner
        self.feeds = feeds

    def __call__(self) -> None:
        self.runner.run(self.feeds)

    def settle(self) -> None:
        self.runner.run_and_shrink(self.feeds)


def _starter(placed: Placed, feeds: dict[str, Any], settings: SessionSettings) -> Callable[[], Callable[[], None]]:
    """Opens the candidate's runner when it is first timed; returns one run of the test case."""

    def start() -> Callable[[], None]:
        return _Runs(open_runner(placed.opened, settings, data_folder=placed.data_folder), feeds)

    return start


def _choice(path: str, found: Fitting) -> dict[str, Any]:
    """The choice as ``--fitting-out`` writes it and ``--config`` reads it."""
    chosen = found.chosen
    assert chosen is not None
    model = peek_model_sha256(path, chosen.variant)
    return {
        "format": CONFIG_FORMAT,
        "version": CONFIG_VERSION,
        "bundle": os.path.basename(path),
        **({"model_sha256": model} if model is not None else {}),
        "variant": chosen.variant,
        **chosen.settings.to_json(),
        "median_ms": round(chosen.median_ms, 6),
        "p90_ms": round(chosen.p90_ms, 6),
        "why": found.why,
    }


def config_text(choice: dict[str, Any]) -> bytes:
    return (json.dumps(choice, indent=1, sort_keys=True) + "\n").encode()


def read_config(path: str) -> dict[str, Any]:
    """A choice ``--fitting-out`` wrote, every field checked.

    Raises:
        UsageError: the file cannot be read, or is not such a choice.
    """
    what = f"{option_name('config')} {path}"
    try:
        choice = json.loads(read_regular(path, MAX_CONFIG_BYTES).decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"{what}: cannot be read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UsageError(f"{what}: cannot be read as a fitting choice ({' '.join(str(exc).split())[:200]})") from None
    fields = {
        "variant": lambda v: isinstance(v, str) and 0 < len(v) <= 64,
        "provider": lambda v: isinstance(v, str) and 0 < len(v) <= 64,
        "threads": lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1),
        "graph_opt": lambda v: v in GRAPH_OPT_LEVELS,
        "execution_mode": lambda v: v in EXECUTION_MODES,
    }
    if not isinstance(choice, dict) or choice.get("format") != CONFIG_FORMAT:
        raise UsageError(f"{what}: not a fitting choice ({option_name('fitting_out')} writes one)")
    if choice.get("version") != CONFIG_VERSION:
        raise UsageError(
            f"{what}: fitting choice version {choice.get('version')!r}, this mgerun reads {CONFIG_VERSION}"
        )
    for key, valid in fields.items():
        if not valid(choice.get(key)):
            raise UsageError(f"{what}: its {key!r} is not valid ({choice.get(key)!r})")
    if (
        choice["threads"] is not None and choice["threads"] > MAX_THREADS
    ):  # the config's field, not a --thread the user never gave
        raise UsageError(
            f"{what}: threads {choice['threads']} is above the most mgerun runs, {MAX_THREADS} (four per core, 64 "
            "at least)"
        )
    if "bundle" in choice and not (isinstance(choice["bundle"], str) and 0 < len(choice["bundle"]) <= 4096):
        raise UsageError(f"{what}: its 'bundle' is not valid ({str(choice['bundle'])[:100]!r})")
    model = choice.get("model_sha256")
    if model is not None and not (isinstance(model, str) and re.fullmatch("[0-9a-f]{64}", model)):
        raise UsageError(f"{what}: its 'model_sha256' is not valid ({str(model)[:100]!r})")
    return choice


def with_config(options: VerifyOptions, path: str, bundles: Sequence[str] = ()) -> tuple[VerifyOptions, list[str]]:
    """The options that run exactly the choice in a ``--fitting-out`` file (its variant and session settings), and
    the notes to print before any work: what it applies (docs/fitting.md#running-the-choice-again).

    A choice records the sha256 of the model it timed (``model_sha256``): a bundle whose variant of that name is
    another model is refused, whatever its file name (a copy renamed for deployment is the same bundle, and runs).
    A choice an older ``mgerun`` wrote records only the bundle's file name: run on a bundle of another name, it
    says so in one warning and runs.

    Raises:
        UsageError: the file is not a choice, it was made for another model, or an option given beside it says
            otherwise.
    """
    choice = read_config(path)
    made_for = choice.get("bundle")
    model = choice.get("model_sha256")
    what = f"{option_name('config')} {path}"
    notes = [
        f"{what}: running variant {choice['variant']} with {SessionSettings.from_json(choice).text()}, its choice"
        + (f" for {made_for}" if made_for else "")
    ]
    if model is not None:
        models = [(b, peek_model_sha256(b, choice["variant"])) for b in bundles]
        other = [(b, found) for b, found in models if found is not None and found != model]
        if other:
            bundle, found = other[0]
            more = f" (and {len(other) - 1} more bundle(s))" if len(other) > 1 else ""
            raise UsageError(
                f"{what} was chosen for another model ({made_for or 'a bundle'}'s {choice['variant']}, sha256 "
                f"{model[:12]}); {bundle}'s is sha256 {found[:12]}{more}: fit this bundle with {option_name('fitting')}"
            )
    else:
        notes.append(
            f"{what} records no model sha256 (an older mgerun wrote it): only the bundle's file name is checked"
        )
        others = [os.path.basename(b) for b in bundles if made_for is not None and os.path.basename(b) != made_for]
        if others:
            more = f" (and {len(others) - 1} more)" if len(others) > 1 else ""
            warn_once(
                f"{what} was chosen for bundle {made_for!r}, not {others[0]!r}{more}: running its variant and "
                "settings anyway"
            )
    session = chosen_session(options.session, choice)
    wanted = {"variant": choice["variant"], **{key: session.value(key) for key in _CHOSEN}}
    for key, value in wanted.items():
        given = options.variant if key == "variant" else options.session.value(key)
        if given is not None and given != value:
            raise UsageError(
                f"{option_name(key)} {given} and {option_name('config')} {path} ({key} {value}) say otherwise: "
                "give one of them"
            )
    return dataclasses.replace(options, variant=choice["variant"], session=session, config=None), notes


_CHOSEN = ("provider", "threads", "graph_opt", "execution_mode")  # the settings fitting chooses


def chosen_session(base: SessionSettings, choice: dict[str, Any]) -> SessionSettings:
    """The settings a fitting chose (``--fitting-out``'s shape) in place of those of ``base``; the CPU provider as
    when none is given."""
    chosen = SessionSettings.from_json(choice)
    return dataclasses.replace(
        base,
        provider=None if chosen.provider == CPU else chosen.provider,
        threads=chosen.threads,
        graph_opt=chosen.graph_opt,
        execution_mode=chosen.execution_mode,
    )


def fit_and_verify(
    path: str,
    options: VerifyOptions,
    run: Run,
    *,
    on_case: Callable[[Any, Any], None] | None = None,
    progress: Progress | None = None,
    label: str = "",
    on_stage: Callable[[str], None] | None = None,
) -> Any:
    """``--fitting`` on one bundle: fit, then verify and time the choice with the options' runs; the report
    carries the fitting (``Report.fitting``) from before its first test case is handed to ``on_case``, so that
    what prints can show the fitting first; ``run`` verifies one variant (:func:`mgedump.commands.verify.verify`).
    With no variant passing, the report of the first that failed (exit 1), its fitting saying so.

    Raises:
        MgeError: a bundle whose variants none could be run (the first variant's error).
    """
    from ..base.errors import MgeError

    found = fit_bundle(path, options, run, budget_s=options.fitting_budget_s, progress=progress, on_stage=on_stage)
    if found.chosen is None:
        failed = next((c.report for c in found.checks if c.report is not None), None)
        if failed is None:
            raise MgeError(found.checks[0].error or f"{path}: no variant could be run")
        failed.fitting = found
        return failed
    chosen = found.chosen
    chosen_options = dataclasses.replace(
        options,
        fitting=False,
        fitting_out=None,
        fitting_budget_s=FITTING_BUDGET_S,
        variant=chosen["variant"] if peek_variants(path) else None,
        session=chosen_session(options.session, chosen),
    )

    def on_chosen_case(case: Any, report: Any) -> None:  # the fitting is known before the choice's test cases
        report.fitting = found
        if on_case is not None:
            on_case(case, report)

    report = run(path, chosen_options, on_case=on_chosen_case, progress=progress, label=label, on_stage=on_stage)
    report.fitting = found
    return report
