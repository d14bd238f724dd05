"""Pack a model and its test cases into a bundle (the ``mgedump`` command).

:func:`pack` reads as its steps, each returning what the next takes: open the
model as given, build the test cases, optimise (a precision mode, rewrites),
run the model as given for the expected outputs, prove the optimised model on
them, then write the bundle and the other outputs, all or none.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.errors import MgeError, OptimizeError, RunError, SpecError, UsageError
from ..base.fileio import CHUNK, FileDigest, atomic_output, hash_files
from ..base.log import fresh_warnings, logger, no_status
from ..base.naming import option_name
from ..base.outputs import Output, Outputs, all_or_nothing
from ..bundle import (
    DATA_MEMBER,
    IO_DUMP_FOLDER,
    MODEL_MEMBER,
    AssertionEntry,
    CaseEntry,
    Manifest,
    Member,
    ModelEntry,
    case_folder,
    tensor_bytes,
    write_bundle,
)
from ..data import TestCase, TestData, cast_to
from ..measure.assertion import assert_equal, maxerr_hint
from ..model.environment import pack_environment
from ..model.modelfile import ModelSource, model_source
from ..model.runtime import TensorInfo, check_model_path, infer, model_io, open_session, to_numpy_outputs
from ..model.stripinfo import strip_info_paths, write_strip_info
from ..optimize import OptimizeResult, check_can_make, end_to_end_note, optimization_names, optimize_file
from ..options import PackOptions

__all__ = ["PackOptions", "PackResult", "pack"]

Stage = Callable[[str], None]


@dataclass
class PackResult:
    """What :func:`pack` wrote: the bundle's path, its manifest, the optimised model's self-check, and what the
    optimisation says (the precision mode's summary, its notes, the error end to end)."""

    output: str
    manifest: Manifest
    self_check: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def test_cases(self) -> int:
        return len(self.manifest.test_cases)


@dataclass(frozen=True)
class Opened:
    """A model opened in onnxruntime, with its inputs and outputs."""

    path: str
    session: Any
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]


@dataclass(frozen=True)
class StoredCase:
    """A test case as the bundle stores it: inputs in the bundled model's dtypes, expected outputs from the model
    as given."""

    case: TestCase
    inputs: list[tuple[str, np.ndarray]]
    expected: list[np.ndarray]


@dataclass(frozen=True)
class Optimized:
    """The optimised model and its session."""

    result: OptimizeResult
    opened: Opened


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
    case against those outputs, or nothing is written. Every output (the
    bundle, the strip info, ``model_out``) is checked against the others and
    against every input before the first write, written beside its target,
    and renamed into place with the others at the end: all or none.

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
    stage = on_stage or no_status
    data = TestData.parse(options.cases)
    calibration = TestData.parse(options.calibrate) if options.calibrate else None
    check_can_make(options.optimize, calibrate=calibration is not None)
    outputs = _outputs(output_path, options)
    given = [os.fspath(model)] if isinstance(model, (str, os.PathLike)) else []
    outputs.check([*given, *data.list_files, *(calibration.list_files if calibration else ())])
    with tempfile.TemporaryDirectory(prefix=".mgedump-", dir=_folder_of(output_path)) as tmp:
        model_path = _model_file(model, tmp)
        check_model_path(model_path)
        source = model_source(model_path, DATA_MEMBER)
        with _hashing(source.data_paths or (model_path,)) as hashing:
            opened = _open_given(model_path, stage)
            cases = _build_cases(opened, data, options, stage)
            calibration_cases = calibration.build(opened.inputs, options.data) if calibration else []
            optimized = _optimize(opened, cases, calibration_cases, options, tmp, stage)
            bundled = optimized.opened if optimized else opened
            stored = _expected_outputs(opened, cases, bundled, not options.no_assert, stage)
            checks, notes = _prove(opened, optimized, stored, options, tmp, stage) if optimized else ([], [])
            stage("hashing the weights")
            digest = hashing.result()
        inputs = [model_path, *source.data_paths, *data.list_files, *_files(cases)]
        inputs += [*(calibration.list_files if calibration else ()), *_files(calibration_cases)]
        members, model = _model_members(model_path, source, digest, optimized)
        manifest = _manifest(model, bundled, stored, members, options)
        if options.embed_io_dump:
            manifest.io_dump, size = _embed_io_dump(model_path, model, opened, stored, options, members, tmp)
            notes.append(
                f"embedded io dump: {size / 1e6:.3g} MB ({len(manifest.io_dump['test_cases'])} test case(s); "
                "tensors computed from weights alone left out)"
            )
            stage(f"writing {os.path.basename(output_path)} with an io dump of {size / 1e6:.3g} MB")
        if options.model_out and any(m.name == DATA_MEMBER for m in members):
            outputs.add(Output("model_out", _beside(options.model_out, DATA_MEMBER), chosen=True))
        outputs.check(inputs)  # every input is known now: the one check before the first write
        stage(f"writing {os.path.basename(output_path)}")
        with all_or_nothing():
            written = write_bundle(output_path, manifest, members, inputs=inputs)
            if options.model_out:
                _write_model_out(os.fspath(options.model_out), members, inputs)
            if options.strip_info:
                model_file = optimized.result.path if optimized else model_path
                write_strip_info(model_file, options.strip_info, model_sha256=written.model.sha256, inputs=inputs)
    lines = optimized.result.lines() if optimized else []
    return PackResult(output_path, written, checks, [*lines, *notes])


def _outputs(output_path: str, options: PackOptions) -> Outputs:
    """The table of what a pack writes (the strip info is two files)."""
    strip = strip_info_paths(options.strip_info) if options.strip_info else ()
    return Outputs(
        [
            Output("output", output_path),
            *(Output("strip_info", path) for path in strip),
            Output("model_out", os.fspath(options.model_out) if options.model_out else ""),
        ]
    )


def _beside(path: str | os.PathLike[str], name: str) -> str:
    return os.path.join(os.path.dirname(os.fspath(path)), name)


def _files(cases: Sequence[TestCase]) -> list[str]:
    return [path for case in cases for path in case.files]


@contextmanager
def _hashing(paths: Sequence[str]) -> Iterator[Future[FileDigest]]:
    """Hash the weights in a thread while onnxruntime loads and runs the model: one read, on the other core."""
    cancel = threading.Event()
    with ThreadPoolExecutor(1, thread_name_prefix="mgedump-hash") as pool:
        try:
            yield pool.submit(hash_files, paths, cancel)
        except BaseException:
            cancel.set()
            raise


def _write_model_out(target: str, members: Sequence[Member], inputs: Sequence[str]) -> None:
    """The bundled model as a plain ONNX file (``model_out``): the model member's bytes, and its external data
    member beside it under the name the model reads it by (model.onnx.data)."""
    for member in members:
        if member.name not in (MODEL_MEMBER, DATA_MEMBER):
            continue
        path = target if member.name == MODEL_MEMBER else _beside(target, DATA_MEMBER)
        with atomic_output(path, inputs) as out:
            if member.data is not None:
                out.write(member.data)
            for source in member.paths:
                with open(source, "rb") as f:
                    shutil.copyfileobj(f, out, CHUNK)


def _folder_of(path: str) -> str:
    return os.path.dirname(os.path.realpath(path))


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
    names = [info.name for info in opened.outputs]
    for name, _ in options.output_maxerr:
        if name not in names:
            raise UsageError(
                f"{option_name('output_maxerr', name)}: the model has no output {name!r} "
                f"(outputs: {', '.join(map(repr, names))})"
            )
    cases = data.build(opened.inputs, options.data)
    if options.embed_io_dump > len(cases):
        raise UsageError(
            f"{option_name('embed_io_dump')} {options.embed_io_dump} asks for more test cases than the "
            f"{len(cases)} given"
        )
    return cases


def _optimize(
    opened: Opened,
    cases: Sequence[TestCase],
    calibration: Sequence[TestCase],
    options: PackOptions,
    tmp: str,
    stage: Stage,
) -> Optimized | None:
    """The optimised model when options ask for one (none: the model as given is bundled)."""
    if not options.optimize.any:
        return None
    stage(f"optimising ({', '.join(optimization_names(options.optimize))})")
    result = optimize_file(
        opened.path,
        os.path.join(tmp, MODEL_MEMBER),
        options.optimize,
        test_inputs=[dict(case.inputs) for case in cases],
        maxerr=options.maxerr,
        output_maxerr=dict(options.output_maxerr),
        calibration=[dict(case.inputs) for case in calibration],
        calibration_specs=[
            f"{option_name('calibrate')} {c}" if isinstance(c, str) else f"{option_name('calibrate')} (arrays)"
            for c in options.calibrate
        ],
    )
    session = open_session(result.path, label="the optimised model")
    return Optimized(result, Opened(result.path, session, *model_io(session)))


def _prove(
    given: Opened, optimized: Optimized, stored: Sequence[StoredCase], options: PackOptions, tmp: str, stage: Stage
) -> tuple[list[dict[str, Any]], list[str]]:
    """The optimised model must meet maxerr on every test case against the model as given: the checks, and what
    the optimisation says (with the error end to end where the mode rounds the inputs)."""
    stage("checking the optimised model on every test case")
    checks = _self_check(
        optimized.opened.session,
        stored,
        optimized.opened.outputs,
        options,
        lambda k: _explain(given.path, optimized.result.path, stored[k], options.tightest, tmp),
    )
    notes = list(optimized.result.notes)
    mode = optimized.result.mode
    if mode is not None and mode.rounds_inputs:  # what the user sees beside what the bundle certifies
        worst = max((c["err"] for c in checks if c["err"] is not None), default=0.0)
        pairs = [(dict(c.case.inputs), dict(c.inputs)) for c in stored]
        names = [info.name for info in optimized.opened.outputs]
        notes.append(end_to_end_note(given.session, optimized.opened.session, pairs, names, worst))
    return checks, notes


@dataclass(frozen=True)
class BundledModel:
    """The model as the bundle holds it: its hash, the hash of the file it came from, and how it was made."""

    sha256: str
    source_sha256: str
    optimized: OptimizeResult | None


def _model_members(
    model_path: str, source: ModelSource, digest: FileDigest, optimized: Optimized | None
) -> tuple[list[Member], BundledModel]:
    """The model member (the file as it is, or rewritten for external data) and its data member, if any."""
    source_sha256 = digest.sha256 if source.model_bytes is None else hash_files([model_path]).sha256
    if optimized is None:
        members, sha256 = _members_of(model_path, source, digest)
        return members, BundledModel(sha256, source_sha256, None)
    path = optimized.result.path
    members, sha256 = _members_of(path, model_source(path, DATA_MEMBER), None)
    return members, BundledModel(sha256, source_sha256, optimized.result)


def _members_of(path: str, source: ModelSource, digest: FileDigest | None) -> tuple[list[Member], str]:
    if source.model_bytes is None:
        member = Member(MODEL_MEMBER, paths=(path,), digest=digest)
        return [member], member.hashed().sha256
    data_digest = digest if digest is not None else hash_files(source.data_paths)
    members = [
        Member(MODEL_MEMBER, source.model_bytes),
        Member(DATA_MEMBER, paths=source.data_paths, digest=data_digest),
    ]
    return members, members[0].hashed().sha256


def _manifest(
    model: BundledModel, bundled: Opened, stored: Sequence[StoredCase], members: list[Member], options: PackOptions
) -> Manifest:
    """The bundle's manifest; the test cases' tensors join the members."""
    optimized = model.optimized
    return Manifest(
        model=ModelEntry(
            sha256=model.sha256,
            source_sha256=model.source_sha256,
            external_data=DATA_MEMBER if any(m.name == DATA_MEMBER for m in members) else None,
        ),
        optimizations=list(optimized.optimizations) if optimized else [],
        records=optimized.records if optimized else {},
        requirements=list(optimized.requirements) if optimized else [],
        inputs=[info.to_json() for info in bundled.inputs],
        outputs=[info.to_json() for info in bundled.outputs],
        assertion=AssertionEntry(
            enabled=not options.no_assert,
            maxerr=options.maxerr,
            verbose=not options.silent,
            output_maxerr=dict(options.output_maxerr),
        ),
        seed=options.data.seed,
        data_options={
            "repeat": options.data.repeat,
            "resize_input": options.data.resize_input,
            "input_transform": options.data.input_transform,
        },
        test_cases=_case_members(stored, bundled.outputs, members, options.no_assert),
        environment=pack_environment(),
    )


def _expected_outputs(
    given: Opened, cases: Sequence[TestCase], bundled: Opened, asserted: bool, stage: Stage
) -> list[StoredCase]:
    """Run the model as given on each case's inputs as the bundled model takes them (e.g. float16).

    The expected outputs are stored in the bundled model's output dtypes, so
    the unzipped bundle is a standard ONNX test case for the bundled model.

    Raises:
        SpecError: the model fails to run on a test case, or (``asserted``) an
            output holds NaN or infinity: a bundle that expects it could never pass.
    """
    stored = []
    for index, case in enumerate(cases):
        stage(f"running test case {index + 1} of {len(cases)}")
        feeds = _as_bundled(case, given.inputs, bundled.inputs)
        original = {
            name: (array.astype(info.np_dtype) if array.dtype != info.np_dtype else array)
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
            value.astype(info.np_dtype) if info.dtype != "str" and value.dtype != info.np_dtype else value
            for value, info in zip(to_numpy_outputs(values, bundled.outputs), bundled.outputs, strict=True)
        ]
        if asserted:
            _check_finite(expected, bundled.outputs, where, defaulted)
        stored.append(StoredCase(case, feeds, expected))
        logger.debug("test case %d (%s): ran", index, case.spec.origin)
    return stored


def _as_bundled(
    case: TestCase, inputs: Sequence[TensorInfo], bundled: Sequence[TensorInfo]
) -> list[tuple[str, np.ndarray]]:
    """A test case's inputs in the bundled model's dtypes."""
    by_name = {info.name: info for info in bundled}
    feeds = []
    for (name, array), info in zip(case.inputs, inputs, strict=True):
        target = by_name.get(name, info)
        feeds.append((name, cast_to(array, target, "the test data") if target.dtype != info.dtype else array))
    return feeds


def _check_finite(expected: Sequence[np.ndarray], outputs: Sequence[TensorInfo], where: str, defaulted: str) -> None:
    """Refuse expected outputs that hold NaN or infinity: a bundle that expects them could never pass."""
    for value, info in zip(expected, outputs, strict=True):
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            bad = int(value.size - np.count_nonzero(np.isfinite(value)))
            raise SpecError(
                f"{where}: the model's output {info.name!r} holds NaN or infinity ({bad} of {value.size} "
                f"elements){defaulted}; a bundle that expects it could never pass",
                hint=f"check the range of the test data, or pack with {option_name('no_assert')}",
            )


def _self_check(
    bundled: Any,
    stored: Sequence[StoredCase],
    outputs: Sequence[TensorInfo],
    options: PackOptions,
    explain: Callable[[int], str | None],
) -> list[dict[str, Any]]:
    """Run the optimised model on every test case; refuse a model that misses maxerr.

    Args:
        explain: names the first divergence of a failing test case (or None).

    Raises:
        OptimizeError: with the measured error per output, and either a
            maxerr that would pass (when the error is small against the
            outputs' scale) or the first divergence.
    """
    results, failures, worst, scale, worst_case = [], [], 0.0, 0.0, 0
    for index, case in enumerate(stored):
        try:
            got = to_numpy_outputs(infer(bundled, dict(case.inputs)), outputs)
        except RunError as exc:
            raise OptimizeError(f"the optimised model fails to run on test case {index}: {exc.message}") from None
        for info, want, have in zip(outputs, case.expected, got, strict=True):
            check = assert_equal(info.name, want, have, options.maxerr_of(info.name))
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
        message = f"the optimised model misses {option_name('maxerr')} {_bounds_text(options)}: " + ", ".join(
            failures[:4]
        )
        message += f" and {len(failures) - 4} more" if len(failures) > 4 else ""
        hint = maxerr_hint(worst, scale)
        if hint is None:
            first = explain(worst_case)
            message += f"; first divergence on test case {worst_case}: {first}" if first else ""
        raise OptimizeError(message, hint=hint)
    return results


def _embed_io_dump(
    model_path: str,
    model: BundledModel,
    opened: Opened,
    stored: Sequence[StoredCase],
    options: PackOptions,
    members: list[Member],
    scratch: str,
) -> tuple[dict[str, Any], int]:
    """Dump the model as given on the first test cases; add the dump as members; return the manifest's entry and
    its size in bytes."""
    from ..diagnose.exposed import ModelDumper

    stored = stored[: options.embed_io_dump]
    folder = os.path.join(scratch, IO_DUMP_FOLDER)
    dtypes = {info.name: info.np_dtype for info in opened.inputs}
    cases = [
        (k, {name: (a.astype(dtypes[name]) if a.dtype != dtypes[name] else a) for name, a in case.inputs})
        for k, case in enumerate(stored)
    ]
    with ModelDumper(model_path, model.source_sha256, label=model_path) as dumper:
        dumper.dump(folder, cases)
    for k in range(len(stored)):
        case_dir = os.path.join(folder, case_folder(k))
        for name in ["index.json", *sorted(f for f in os.listdir(case_dir) if f != "index.json")]:
            members.append(Member(f"{IO_DUMP_FOLDER}/{case_folder(k)}/{name}", paths=(os.path.join(case_dir, name),)))
    size = sum(os.path.getsize(p) for m in members if m.name.startswith(IO_DUMP_FOLDER) for p in m.paths)
    entry = {"folder": IO_DUMP_FOLDER, "test_cases": list(range(len(stored))), "model_sha256": model.source_sha256}
    return entry, size


def _bounds_text(options: PackOptions) -> str:
    own = ", ".join(f"{name}:{bound:g}" for name, bound in options.output_maxerr)
    return f"{options.maxerr:g}" + (f" ({own})" if own else "")


def _explain(given: str, optimized: str, case: StoredCase, maxerr: float, scratch: str) -> str | None:
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


def _case_members(
    stored: Sequence[StoredCase], outputs: Sequence[TensorInfo], members: list[Member], no_assert: bool
) -> list[CaseEntry]:
    """Add every test case's tensors to members; return the manifest's test cases."""
    manifest_cases = []
    for index, case in enumerate(stored):
        folder = case_folder(index)
        input_members = []
        for k, (name, array) in enumerate(case.inputs):
            input_members.append(f"{folder}/input_{k}.pb")
            members.append(Member(input_members[-1], tensor_bytes(array, name)))
        output_members = []
        if not no_assert:
            for k, (info, array) in enumerate(zip(outputs, case.expected, strict=True)):
                output_members.append(f"{folder}/output_{k}.pb")
                members.append(Member(output_members[-1], tensor_bytes(array, info.name)))
        spec = case.case.spec
        manifest_cases.append(CaseEntry(folder, spec.text, spec.origin, input_members, output_members))
    return manifest_cases
