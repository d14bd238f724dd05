"""Pack a model and its test cases into a bundle (the ``mgedump`` command).

:func:`pack` reads as its steps, each returning what the next takes: open the
model as given, build the test cases, make each variant asked for (one model
as the options make it, or several precision variants), run the model as
given for the expected outputs, prove every variant on them, then write the
bundle and the other outputs, all or none.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..base.errors import MgeError, OptimizeError, UsageError
from ..base.fileio import FileDigest, hash_files
from ..base.log import fresh_warnings, logger, no_status
from ..base.naming import option_name
from ..base.outputs import Output, Outputs, all_or_nothing
from ..bundle import DATA_MEMBER, MODEL_MEMBER, Manifest, write_bundle
from ..data import TestCase, TestData
from ..data.spec import CaseSpec
from ..model.environment import pack_environment
from ..model.modelfile import ModelSource, data_files, model_source
from ..model.runtime import check_model_path, model_io, open_session
from ..model.stripinfo import strip_info_paths, write_strip_info
from ..options import FLOAT32, GivenCases, OptimizeOptions, PackOptions
from .inputs import FilesRead, only_data_of
from .pack_members import Source, Variant, embed_io_dump, manifest_of, write_model_out
from .pack_proof import Opened, StoredCase, expected_outputs, explain, self_check

__all__ = ["PackOptions", "PackResult", "pack"]

Stage = Callable[[str], None]


@dataclass
class PackResult:
    """What :func:`pack` wrote: the bundle's path, its manifest, the bundled model's self-check, and what the
    optimisation says (each precision mode's summary, its notes, the error end to end, the variants left out)."""

    output: str
    manifest: Manifest
    self_check: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def test_cases(self) -> int:
        return len(self.manifest.test_cases)


@dataclass(frozen=True)
class BundleContents:
    """What the packing steps made for the writing step: the variants, the stored test cases and inputs, the variants
    left out, the notes."""

    variants: list[Variant]
    stored: list[StoredCase]
    stored_io: Opened
    left_out: list[dict[str, str]]
    notes: list[str]


@fresh_warnings
def pack(
    model: str | os.PathLike[str] | Any,
    output_path: str | os.PathLike[str],
    options: PackOptions,
    *,
    on_stage: Stage | None = None,
) -> PackResult:
    """Run the model on every test case and write the bundle.

    Expected outputs come from the model as given. With ``options.optimize``,
    the optimised model is bundled, and it must meet ``maxerr`` on every test
    case against those outputs, or nothing is written. With
    ``options.variants``, each variant is made and proved; one that misses
    maxerr is left out with its reason, and the pack fails only when none
    passes. Every output (the bundle, the strip info, ``model_out``) is
    checked against the others and against every input before the first
    write, written beside its target, and renamed into place with the others
    at the end: all or none.

    Args:
        model: an ONNX model file, or an ``onnx.ModelProto`` in memory.
        output_path: the bundle to write.
        options: the test cases (``-d`` texts, arrays, or :class:`~mgedump.data.TestData`) and everything else.
        on_stage: called with what it starts doing (``"running test case 3 of 40"``), for a status line.

    Raises:
        MgeError: bad model, spec, data or output path, or an optimised model
            that misses ``maxerr`` (nothing is written).
    """
    output_path = os.fspath(output_path)
    if not output_path:
        raise UsageError(f"{option_name('output')} is empty: give the bundle's path")
    stage = on_stage or no_status
    data = TestData.parse(options.cases)
    calibration = TestData.parse(options.calibrate) if options.calibrate else None
    names = _variants(options, calibration is not None)
    given = [os.fspath(model)] if isinstance(model, (str, os.PathLike)) else []
    outputs = _outputs(output_path, options, len(names) > 1, given)
    outputs.check(FilesRead(models=given, data=[data, calibration]))  # the one check, before any work
    with tempfile.TemporaryDirectory(prefix=".mgedump-", dir=os.path.dirname(os.path.realpath(output_path))) as tmp:
        model_path = _model_file(model, tmp)
        check_model_path(model_path)
        with _beside_the_model(model_path) as (planned, hashing, environment):
            try:
                opened = _open_given(model_path, stage)
            except MgeError:
                planned.result()  # the model's refusal of its external data, in mgedump's words, comes first
                raise
            copy = planned.result()
            cases = _build_cases(opened, data, options, stage)
            calibration_cases = calibration.build(opened.inputs, options.data) if calibration else []
            made = _make(names, Given(opened, cases, calibration_cases, options, stage, tmp))
            stage("hashing the weights")
            source = Source(model_path, copy, hashing.result())
            packed_on = environment.result()
        inputs = [model_path, *copy.data_paths, *data.list_files, *_files(cases)]
        inputs += [*(calibration.list_files if calibration else ()), *_files(calibration_cases)]
        members: list[Any] = []
        target = made.variants[0].target if options.target_runtime else None
        manifest = manifest_of(
            source, made.variants, made.stored, made.stored_io, members, options, packed_on, made.left_out, target,
            several=len(names) > 1,
        )  # fmt: skip
        notes = made.notes
        if options.embed_io_dump:
            manifest.io_dump, size = embed_io_dump(source, opened, made.stored, options.embed_io_dump, members, tmp)
            notes.append(_io_dump_note(manifest.io_dump, size))
            stage(f"writing {os.path.basename(output_path)} with an io dump of {size / 1e6:.3g} MB")
        if options.model_out and any(m.name == DATA_MEMBER for m in members):
            # an optimised model may keep weights outside where the given did not
            beside = _data_beside(options.model_out)
            if beside.path not in outputs.paths:
                outputs.add(beside)
        outputs.check(inputs)  # again with what running found (the same, but for a model made with external data)
        stage(f"writing {os.path.basename(output_path)}")
        with all_or_nothing():
            written = write_bundle(output_path, manifest, members, inputs=inputs)
            if options.model_out:
                write_model_out(os.fspath(options.model_out), members, inputs)
            if options.strip_info:
                _write_strip_info(options.strip_info, made.variants, written, inputs)
    checks = made.variants[0].proof.checks if len(made.variants) == 1 and made.variants[0].proof else []
    return PackResult(output_path, written, checks, notes)


def _io_dump_note(io_dump: dict[str, Any], size: int) -> str:
    return (
        f"embedded io dump: {size / 1e6:.3g} MB ({len(io_dump['test_cases'])} test case(s); "
        "tensors computed from weights alone left out)"
    )


def _variants(options: PackOptions, calibrate: bool) -> list[str]:
    """The variants to make, their options checked before any work (one: the model the options make). A plain
    pack (no rewrite, no mode option, no calibration data: nothing to check) imports none of the optimiser."""
    if not options.variants and not calibrate and options.optimize == OptimizeOptions():
        return [FLOAT32]
    from ..optimize import check_can_make
    from ..optimize.precisions import variant_names

    names = variant_names(options.variants) if options.variants else [options.optimize.precision or FLOAT32]
    several = bool(options.variants)  # a refusal names what works with --variants, not a precision flag
    modes = [check_can_make(_optimize_options(options, name), among_variants=several) for name in names]
    if calibrate and not any(mode is not None and "calibrate" in mode.reads for mode in modes):
        # says which modes it is for
        check_can_make(_optimize_options(options, names[0]), calibrate=True, among_variants=several)
    return names


def _optimize_options(options: PackOptions, name: str) -> OptimizeOptions:
    """The options that make one variant: the pack's rewrites, with that precision."""
    precision = None if name == FLOAT32 else name
    optimize = options.optimize
    if options.variants and precision is not None and not optimize.optimize_for_inference:
        optimize = dataclasses.replace(optimize, optimize_for_inference=True)  # a variant's mode: portable first
    return dataclasses.replace(optimize, precision=precision) if precision != optimize.precision else optimize


@dataclass(frozen=True)
class Given:
    """What every variant is made from: the model as given (opened), the test cases and calibration cases, the
    pack's options, the status callback, and the scratch folder."""

    opened: Opened
    cases: Sequence[TestCase]
    calibration: Sequence[TestCase]
    options: PackOptions
    stage: Stage
    tmp: str


def _make(names: Sequence[str], given: Given) -> BundleContents:
    """Make the one model (a version-1 bundle: its test cases stored in its dtypes), or every variant (version 2:
    the test cases once, in the dtypes of the model as given), each proved."""
    opened, options, stage = given.opened, given.options, given.stage
    if len(names) == 1:
        variant = _make_variant(names[0], given, os.path.join(given.tmp, MODEL_MEMBER))
        stored = expected_outputs(
            opened, given.cases, variant.opened, not options.no_assert, stage, options.nonfinite_ok
        )
        if variant.result is not None:
            _prove(opened, variant, stored, options, given.tmp, stage)
        lines = variant.result.lines() if variant.result else []
        return BundleContents([variant], stored, variant.opened, [], [*lines, *variant.notes])
    stored = expected_outputs(opened, given.cases, opened, True, stage, options.nonfinite_ok)
    variants, left_out = [], []
    sizes: dict[int, list[tuple[str, list[str]]]] = {}
    for name in names:
        try:
            folder = os.path.join(given.tmp, "variants", name)
            os.makedirs(folder)
            variant = _make_variant(name, given, os.path.join(folder, MODEL_MEMBER))
            _check_distinct(variant, sizes)
            _prove(opened, variant, stored, options, given.tmp, stage, cast=True)
        except MgeError as exc:
            left_out.append({"name": name, "reason": exc.one_line()})
            logger.debug("variant %s left out: %s", name, exc.one_line())
            continue
        variants.append(variant)
    if not variants:
        reasons = "; ".join(f"{e['name']}: {e['reason']}" for e in left_out)
        raise OptimizeError(f"no variant meets {option_name('maxerr')}: {reasons}")
    return BundleContents(variants, stored, opened, left_out, _variant_lines(variants, left_out))


def _check_distinct(variant: Variant, made: dict[int, list[tuple[str, list[str]]]]) -> None:
    """A variant whose model (and weights) are byte for byte another's is that variant under another name (files
    hashed only when their sizes are another variant's).

    Raises:
        OptimizeError: it is; else it joins ``made`` (by total size: each variant's name and files).
    """
    paths = [variant.path, *data_files(variant.path)]
    size = sum(os.path.getsize(path) for path in paths)
    others = made.setdefault(size, [])
    if others:
        digest = hash_files(paths).sha256
        same = next((name for name, files in others if hash_files(files).sha256 == digest), None)
        if same is not None:
            raise OptimizeError(f"its model is byte for byte variant {same}'s")
    others.append((variant.name, paths))


def _variant_lines(variants: Sequence[Variant], left_out: Sequence[dict[str, str]]) -> list[str]:
    """What a pack of several variants says: each variant's certified error and summary, then the ones left out."""
    lines = []
    for variant in variants:
        certified = variant.proof.certified if variant.proof else {}
        errs = ", ".join(f"{name} {'n/a' if err is None else f'{err:.3g}'}" for name, err in certified.items())
        lines.append(f"variant {variant.name}: certified err {errs}")
        lines += [f"  {line}" for line in (variant.result.lines() if variant.result else [])]
    return lines + [f"variant {e['name']} left out: {e['reason']}" for e in left_out]


def _make_variant(name: str, given: Given, target: str) -> Variant:
    """One variant's model: optimised as its options say (none: the model as given), written for the target's
    onnxruntime when asked, opened."""
    optimize = _optimize_options(given.options, name)
    variant = _optimize(name, optimize, given, target) if optimize.any else None
    wanted = given.options.target_runtime
    if wanted:
        return _retarget(variant or Variant(name, given.opened), wanted, target, given.stage)
    return variant or Variant(name, given.opened)


def _optimize(name: str, optimize: OptimizeOptions, given: Given, target: str) -> Variant:
    """One variant's model optimised (its precision mode made and proved by the pipeline), opened."""
    from ..optimize import check_can_make, optimization_names, optimize_file

    opened, options = given.opened, given.options
    mode = check_can_make(optimize)
    other = next((info for info in [*opened.inputs, *opened.outputs] if not info.is_tensor), None)
    if mode is not None and other is not None:  # the searches run candidates on tensors only
        raise UsageError(
            f"{option_name('precision', mode.name)} searches on tensor inputs and outputs; {other.name!r} is "
            f"{other.dtype}",
            hint=_without_hint(mode.name, options),
        )
    calibrated = mode is not None and "calibrate" in mode.reads  # calibration data is for the variants calibrated
    given.stage(f"optimising ({', '.join(optimization_names(optimize))})")
    result = optimize_file(
        opened.path,
        target,
        optimize,
        test_inputs=[dict(case.inputs) for case in given.cases],
        bounds=options.bounds,
        calibration=[dict(case.inputs) for case in given.calibration] if calibrated else [],
        calibration_specs=_calibration_specs(options.calibrate),
    )
    session = open_session(result.path, label="the optimised model")
    return Variant(name, Opened(result.path, session, *model_io(session)), result, notes=list(result.notes))


def _calibration_specs(given: GivenCases) -> list[str]:
    """Where the calibration cases came from, for the manifest: each text given, else "(arrays)" (of test data
    parsed already, the texts it holds)."""
    texts: list[str | None] = []
    if isinstance(given, TestData):
        texts = [case.text if isinstance(case, CaseSpec) else None for case in given.cases]
    elif isinstance(given, Iterable):  # else refused when parsed
        texts = [case if isinstance(case, str) else None for case in given]
    flag = option_name("calibrate")
    return [f"{flag} {text}" if text is not None else f"{flag} (arrays)" for text in texts]


def _without_hint(mode: str, options: PackOptions) -> str | None:
    """What to do instead of a precision mode the model cannot have, naming only the flags the user gave (none for
    a variant: it is left out, the others packed)."""
    if options.variants:
        return None
    if options.optimize.optimize_for_inference:
        return f"pack without it ({option_name('optimize_for_inference')} alone is fine)"
    return f"pack without {option_name('precision', mode)}"


def _retarget(variant: Variant, wanted: str, target: str, stage: Stage) -> Variant:
    """A variant's model written at the newest IR and opsets the target's onnxruntime loads; proved like any
    rewrite (its result is then not None)."""
    from ..model.target import retarget_file
    from ..optimize import OptimizeResult

    stage(f"writing the model for onnxruntime {wanted}")
    folder = os.path.join(os.path.dirname(target), "target")  # beside nothing else: the model keeps its data embedded
    os.makedirs(folder, exist_ok=True)
    done = retarget_file(variant.path, os.path.join(folder, MODEL_MEMBER), wanted)
    variant.target = done.to_json(".".join(wanted.split(".")[:2]))
    if done.path is None:
        return variant
    before = variant.result
    result = OptimizeResult(
        done.path,
        list(before.optimizations) if before else [],
        list(before.requirements) if before else [],
        [*(before.notes if before else []), f"written for onnxruntime {wanted}: {', '.join(done.changes)}"],
        before.mode if before else None,
        before.record if before else None,
        before.options if before else None,
    )
    session = open_session(done.path, label=f"the model written for onnxruntime {wanted}")
    return dataclasses.replace(
        variant, opened=Opened(done.path, session, *model_io(session)), result=result, notes=list(result.notes)
    )


def _prove(
    given: Opened,
    variant: Variant,
    stored: Sequence[StoredCase],
    options: PackOptions,
    tmp: str,
    stage: Stage,
    cast: bool = False,
) -> None:
    """A variant must meet maxerr on every test case against the model as given; the error end to end is said
    beside the certified one where its mode rounds the inputs.

    Args:
        cast: the stored inputs are the model as given's: cast them to the variant's input dtypes.
    """
    stage(f"checking {'the optimised model' if not cast else 'variant ' + variant.name} on every test case")
    variant.proof = self_check(
        variant.opened.session,
        stored,
        variant.opened.outputs,
        options,
        lambda k: explain(given.path, variant.path, stored[k], options.bounds.tightest(), tmp),
        given.inputs if cast else None,
        variant.opened.inputs if cast else None,
    )
    mode = variant.result.mode if variant.result else None
    if mode is not None and mode.rounds_inputs and not cast:  # what the user sees beside what the bundle certifies
        from ..optimize import end_to_end_note

        pairs = [(dict(c.case.inputs), dict(c.inputs)) for c in stored]
        names = [info.name for info in variant.opened.outputs]
        note = end_to_end_note(given.session, variant.opened.session, pairs, names, variant.proof.worst)
        variant.notes.append(note)


def _write_strip_info(path: str, variants: Sequence[Variant], written: Manifest, inputs: Sequence[str]) -> None:
    """The strip info of every bundled model: a reduced onnxruntime build then runs any of them."""
    if not written.variants:
        write_strip_info(variants[0].path, path, model_sha256=written.model.sha256, inputs=inputs)
        return
    models = [(v.path, e.model.member, e.model.sha256) for v, e in zip(variants, written.variants, strict=True)]
    (first, label, sha256), *others = models
    write_strip_info(first, path, model_sha256=sha256, inputs=inputs, label=label, others=others)


def _outputs(output_path: str, options: PackOptions, several: bool, given: Sequence[str]) -> Outputs:
    """The table of what a pack writes: the bundle, the strip info (two files), the model and, when the model
    given keeps its weights outside, their data file beside it (a name the tool chooses).

    Raises:
        UsageError: ``model_out`` with several variants (it writes one model).
    """
    if several and options.model_out:
        raise UsageError(
            f"{option_name('model_out')} writes one model, and {option_name('variants')} names several: give one "
            "variant, or write the bundle alone"
        )
    strip = strip_info_paths(options.strip_info) if options.strip_info else ()
    rows = [
        Output("output", output_path),
        *(Output("strip_info", path) for path in strip),
        Output("model_out", os.fspath(options.model_out) if options.model_out else ""),
    ]
    if options.model_out and any(data_files(model) for model in given):
        rows.append(_data_beside(options.model_out))
    return Outputs(rows)


def _data_beside(model_out: str | os.PathLike[str]) -> Output:
    """``model.onnx.data`` beside ``model_out``: a file there is refused unless it is the data of the model that
    ``model_out`` replaces, read by no other model beside it (a pack run again to the same path)."""
    path = _beside(model_out, DATA_MEMBER)
    return Output("model_out", path, chosen=True, own=only_data_of(os.fspath(model_out), path))


def _beside(path: str | os.PathLike[str], name: str) -> str:
    return os.path.join(os.path.dirname(os.fspath(path)), name)


def _files(cases: Sequence[TestCase]) -> list[str]:
    return [path for case in cases for path in case.files]


@contextmanager
def _beside_the_model(
    model_path: str,
) -> Iterator[tuple[Future[ModelSource], Future[FileDigest], Future[dict[str, Any]]]]:
    """In a thread while onnxruntime loads and runs the model (it lets go of the interpreter meanwhile): plan how
    the model is copied (:func:`model_source`: its external data checked, the model rewritten to name one data
    member), hash what is copied (one read of the weights, on the other core), then take the manifest's
    environment (the versions of the installed distributions and the CPU's flags, off the way of a small model's
    pack)."""
    cancel = threading.Event()
    with ThreadPoolExecutor(1, thread_name_prefix="mgedump-hash") as pool:
        planned = pool.submit(model_source, model_path, DATA_MEMBER)  # the one worker runs these in this order
        hashing = pool.submit(lambda: hash_files(planned.result().data_paths or (model_path,), cancel))
        try:
            yield planned, hashing, pool.submit(_environment, cancel)
        except BaseException:
            cancel.set()
            raise


def _environment(cancel: threading.Event) -> dict[str, Any]:
    """Where the bundle is packed (nothing when the pack has failed meanwhile)."""
    return {} if cancel.is_set() else pack_environment()


def _model_file(model: Any, tmp: str) -> str:
    """The model's file: the path given, or an in-memory ``onnx.ModelProto`` saved into the scratch folder."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    if type(model).__name__ != "ModelProto":
        raise UsageError(f"pack takes a model file or an onnx.ModelProto, got {type(model).__name__}")
    import onnx

    path = os.path.join(tmp, "given.onnx")
    large = model.ByteSize() >= (1 << 31) - 1 if hasattr(model, "ByteSize") else False
    onnx.save_model(model, path, save_as_external_data=large, location="given.onnx.data")
    return path


def _open_given(model_path: str, stage: Stage) -> Opened:
    stage(f"loading {os.path.basename(model_path)}")
    session = open_session(model_path)
    return Opened(model_path, session, *model_io(session))


def _build_cases(opened: Opened, data: TestData, options: PackOptions, stage: Stage) -> list[TestCase]:
    """Every test case's inputs, for the model as given."""
    stage(f"building {len(data.cases)} test case(s)")
    options.bounds.check_outputs([info.name for info in opened.outputs])
    cases = data.build(opened.inputs, options.data)
    if options.embed_io_dump > len(cases):
        raise UsageError(
            f"{option_name('embed_io_dump')} {options.embed_io_dump} asks for more test cases than the "
            f"{len(cases)} given"
        )
    return cases
