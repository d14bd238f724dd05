"""Pack a model and its test cases into a bundle (the ``mgedump`` command)."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..assertion import assert_equal, maxerr_hint
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
from ..environment import pack_environment
from ..errors import MgeError, OptimizeError, RunError, SpecError, UsageError
from ..fileio import CHUNK, FileDigest, atomic_output, check_target, hash_files
from ..log import fresh_warnings, logger
from ..modelfile import ModelSource, model_source
from ..optimize import OptimizeResult, end_to_end_note, optimize_file
from ..options import PackOptions
from ..runtime import TensorInfo, check_model_path, infer, model_io, open_session, to_numpy_outputs
from ..stripinfo import strip_info_paths, write_strip_info

__all__ = ["PackOptions", "PackResult", "pack"]


@dataclass
class PackResult:
    """What :func:`pack` wrote: the bundle's path, its manifest, and the optimised model's self-check."""

    output: str
    manifest: Manifest
    self_check: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the optimisation says (float16: Casts, end-to-end error)

    @property
    def test_cases(self) -> int:
        return len(self.manifest.test_cases)


@dataclass
class _Case:
    """A test case as stored: inputs in the bundled model's dtypes, expected outputs from the model as given."""

    case: TestCase
    inputs: list[tuple[str, np.ndarray]]
    expected: list[np.ndarray]


@dataclass
class _Packing:
    """What the steps of :func:`pack` hand on to each other."""

    model_path: str
    output_path: str
    options: PackOptions
    tmp: str
    protected: list[str]
    targets: list[str]
    source: ModelSource | None = None
    session: Any = None
    inputs: list[TensorInfo] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)
    cases: list[TestCase] = field(default_factory=list)
    optimized: OptimizeResult | None = None
    optimized_session: Any = None
    stage: Callable[[str], None] = field(default=lambda text: None, repr=False)
    b_inputs: list[TensorInfo] = field(default_factory=list)
    b_outputs: list[TensorInfo] = field(default_factory=list)
    stored: list[_Case] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def protect(self, paths: Sequence[str]) -> None:
        """More inputs are known: no output may overwrite them."""
        self.protected += paths
        for path in self.targets:
            check_target(path, self.protected)


@fresh_warnings
def pack(
    model: str | os.PathLike[str] | Any,
    output_path: str | os.PathLike[str],
    options: PackOptions,
    *,
    on_stage: Callable[[str], None] | None = None,
) -> PackResult:
    """Run the model on every test case and write the bundle.

    Expected outputs come from the model as given. With ``options.optimize``,
    the optimised model is bundled, and it must meet ``maxerr`` on every test
    case against those outputs, or nothing is written. The bundle is written
    beside ``output_path`` and renamed into place, so an existing file is
    replaced whole or not at all.

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
    data = TestData.parse(options.cases)
    strip_info = f"{output_path}.json" if options.strip_info is True else options.strip_info or None
    targets = [output_path, *(strip_info_paths(strip_info) if strip_info else ())]
    if options.model_out:  # (its data file, if the model has one, is checked when it is known: at writing)
        targets.append(os.fspath(options.model_out))
        if len({os.path.realpath(t) for t in targets}) < len(targets):
            raise UsageError("--output-model and -o (or the strip info) would write one file: give each its own path")
    given = [os.fspath(model)] if isinstance(model, (str, os.PathLike)) else []
    for path in targets:  # before any work, and before the scratch folder is made beside the output
        check_target(path, [*given, *data.list_files])
    with tempfile.TemporaryDirectory(prefix=".mgedump-", dir=_folder_of(output_path)) as tmp:
        model_path = _model_file(model, tmp)
        state = _Packing(model_path, output_path, options, tmp, [model_path], targets, stage=on_stage or _quiet)
        state.protect(data.list_files)
        check_model_path(model_path)
        state.source = model_source(model_path, DATA_MEMBER)
        state.protect(state.source.data_paths)
        # Hash the weights in a thread while onnxruntime loads and runs the model: one read, on the other core.
        cancel = threading.Event()
        with ThreadPoolExecutor(1, thread_name_prefix="mgedump-hash") as pool:
            hashing = pool.submit(hash_files, state.source.data_paths or (model_path,), cancel)
            try:
                _build_cases(state, data)
                _optimize(state)
                state.stored = _expected_outputs(
                    state.session,
                    state.cases,
                    state.inputs,
                    state.b_inputs,
                    state.b_outputs,
                    not options.no_assert,
                    stage=state.stage,
                    nonfinite_ok=options.nonfinite_ok,
                )
                _self_check_optimized(state)
                state.stage("hashing the weights")
                digest = hashing.result()
            except BaseException:
                cancel.set()
                raise
        members, manifest = _manifest(state, digest)
        state.stage(f"writing {os.path.basename(output_path)}")
        written = write_bundle(output_path, manifest, members, inputs=state.protected)
        if options.model_out:
            _write_model_out(os.fspath(options.model_out), members, state.protected)
        if strip_info:
            write_strip_info(
                state.optimized.path if state.optimized else model_path,
                strip_info,
                model_sha256=written.model.sha256,
                inputs=state.protected,
            )
    return PackResult(output_path, written, state.checks, state.notes)


def _quiet(text: str) -> None:
    """No status line."""


def _write_model_out(target: str, members: Sequence[Member], protected: Sequence[str]) -> None:
    """The bundled model as a plain ONNX file (``--output-model``): the model member's bytes, and its external data
    member beside it under the name the model reads it by (model.onnx.data)."""
    for member in members:
        if member.name not in (MODEL_MEMBER, DATA_MEMBER):
            continue
        path = target if member.name == MODEL_MEMBER else os.path.join(os.path.dirname(target), DATA_MEMBER)
        with atomic_output(path, protected) as out:
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


def _build_cases(state: _Packing, data: TestData) -> None:
    """Open the model as given and build every test case's inputs."""
    state.stage(f"loading {os.path.basename(state.model_path)}")
    state.session = open_session(state.model_path)
    state.inputs, state.outputs = model_io(state.session)
    state.stage(f"building {len(data.cases)} test case(s)")
    _check_output_names(state.options, state.outputs)
    state.cases = data.build(state.inputs, state.options.data)
    state.protect([path for case in state.cases for path in case.files])  # the data files are known now
    if state.options.embed_io_dump > len(state.cases):
        raise UsageError(
            f"--embed-io-dump {state.options.embed_io_dump} asks for more test cases than the {len(state.cases)} given"
        )


def _optimize(state: _Packing) -> None:
    """The bundled model: the optimised one when asked for, else the model as given."""
    options = state.options
    if not options.optimize.any:
        state.b_inputs, state.b_outputs = state.inputs, state.outputs
        return
    calibration = TestData.parse(options.calibrate).build(state.inputs, options.data) if options.calibrate else []
    state.protect([path for case in calibration for path in case.files])
    state.stage(f"optimising ({', '.join(options.optimize.names())})")
    state.optimized = optimize_file(
        state.model_path,
        os.path.join(state.tmp, MODEL_MEMBER),
        options.optimize,
        test_inputs=[dict(case.inputs) for case in state.cases],
        maxerr=options.maxerr,
        output_maxerr=dict(options.output_maxerr),
        calibration=[dict(case.inputs) for case in calibration],
        calibration_specs=[
            f"--calibrate {c}" if isinstance(c, str) else "--calibrate (arrays)" for c in options.calibrate
        ],
    )
    bundled = open_session(state.optimized.path, label="the optimised model")
    state.b_inputs, state.b_outputs = model_io(bundled)
    state.optimized_session = bundled


def _self_check_optimized(state: _Packing) -> None:
    """The optimised model must meet maxerr on every test case against the model as given."""
    if state.optimized is None:
        return
    optimized_path = state.optimized.path
    state.stage("checking the optimised model on every test case")
    state.checks = _self_check(
        state.optimized_session,
        state.stored,
        state.b_outputs,
        state.options,
        lambda k: _explain(state.model_path, optimized_path, state.stored[k], _tightest(state.options), state.tmp),
    )
    state.notes = list(state.optimized.notes)
    if state.optimized.float16:  # what the user sees beside what the bundle certifies
        worst = max((c["err"] for c in state.checks if c["err"] is not None), default=0.0)
        pairs = [(dict(c.case.inputs), dict(c.inputs)) for c in state.stored]
        names = [info.name for info in state.b_outputs]
        state.notes.append(end_to_end_note(state.session, state.optimized_session, pairs, names, worst))


def _manifest(state: _Packing, digest: FileDigest) -> tuple[list[Member], Manifest]:
    """The bundle's members (the model, its data, the test cases, an io dump) and its manifest."""
    options, source = state.options, state.source
    assert source is not None
    if state.optimized is None:
        members, model_sha256 = _model_members(state.model_path, source, digest)
        optimizations, requirements, float16, int8 = [], [], None, None
    else:
        optimized = state.optimized
        members, model_sha256 = _model_members(optimized.path, model_source(optimized.path, DATA_MEMBER), None)
        optimizations, requirements, float16 = optimized.optimizations, optimized.requirements, optimized.float16
        int8 = optimized.int8
    source_sha256 = digest.sha256 if source.model_bytes is None else hash_files([state.model_path]).sha256
    cases = _case_members(state.stored, state.b_outputs, members, options.no_assert)
    io_dump = None
    if options.embed_io_dump:
        stored = state.stored[: options.embed_io_dump]
        io_dump = _embed_io_dump(state.model_path, source_sha256, stored, state.inputs, members, state.tmp)
        size = sum(os.path.getsize(p) for m in members if m.name.startswith(IO_DUMP_FOLDER) for p in m.paths)
        state.notes.append(
            f"embedded io dump: {size / 1e6:.3g} MB ({len(stored)} test case(s); tensors computed "
            "from weights alone left out)"
        )
        state.stage(f"writing {os.path.basename(state.output_path)} with an io dump of {size / 1e6:.3g} MB")
    manifest = Manifest(
        model=ModelEntry(
            sha256=model_sha256,
            source_sha256=source_sha256,
            external_data=DATA_MEMBER if any(m.name == DATA_MEMBER for m in members) else None,
        ),
        optimizations=list(optimizations),
        float16=float16 or None,
        int8=int8 or None,
        requirements=list(requirements),
        inputs=[info.to_json() for info in state.b_inputs],
        outputs=[info.to_json() for info in state.b_outputs],
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
        test_cases=cases,
        io_dump=io_dump,
        environment=pack_environment(),
    )
    return members, manifest


def _model_members(path: str, source: ModelSource, digest: FileDigest | None) -> tuple[list[Member], str]:
    """The model member (the file as it is, or rewritten for external data) and its sha256."""
    if source.model_bytes is None:
        member = Member(MODEL_MEMBER, paths=(path,), digest=digest)
        return [member], member.hashed().sha256
    data_digest = digest if digest is not None else hash_files(source.data_paths)
    members = [
        Member(MODEL_MEMBER, source.model_bytes),
        Member(DATA_MEMBER, paths=source.data_paths, digest=data_digest),
    ]
    return members, members[0].hashed().sha256


def _expected_outputs(
    session: Any,
    cases: Sequence[TestCase],
    inputs: Sequence[TensorInfo],
    b_inputs: Sequence[TensorInfo],
    b_outputs: Sequence[TensorInfo],
    asserted: bool = True,
    stage: Callable[[str], None] = _quiet,
    nonfinite_ok: bool = False,
) -> list[_Case]:
    """Run the model as given on each case's inputs as the bundled model takes them (e.g. float16).

    The expected outputs are stored in the bundled model's output dtypes, so
    the unzipped bundle is a standard ONNX test case for the bundled model.

    Raises:
        SpecError: the model fails to run on a test case, or (``asserted``) an
            output holds NaN or infinity: a bundle that expects it could never pass.
    """
    by_name = {info.name: info for info in b_inputs}
    stored = []
    for index, case in enumerate(cases):
        stage(f"running test case {index + 1} of {len(cases)}")
        feeds = []
        for (name, array), info in zip(case.inputs, inputs, strict=True):
            target = by_name.get(name, info)
            feeds.append((name, cast_to(array, target, "the test data") if target.dtype != info.dtype else array))
        original = {
            name: (array.astype(info.np_dtype) if array.dtype != info.np_dtype else array)
            for (name, array), info in zip(feeds, inputs, strict=True)
        }
        where = f"test case {index} ({case.spec.origin}: {case.spec.text!r})"
        defaulted = f"; dims defaulted to 1: {', '.join(case.defaulted)}" if case.defaulted else ""
        try:
            values = infer(session, original)
        except RunError as exc:
            hint = "give the defaulted dims with --input-shape" if defaulted else exc.hint
            raise SpecError(f"{where}: {exc.message}{defaulted}", hint=hint) from None
        expected = [
            value.astype(info.np_dtype) if info.dtype != "str" and value.dtype != info.np_dtype else value
            for value, info in zip(to_numpy_outputs(values, b_outputs), b_outputs, strict=True)
        ]
        for value, info in zip(expected, b_outputs, strict=True):
            if asserted and value.dtype.kind == "f" and not np.isfinite(value).all():
                bad = int(value.size - np.count_nonzero(np.isfinite(value)))
                if nonfinite_ok:
                    logger.warning(
                        "%s: the model's output %r holds NaN or infinity (%d of %d elements)",
                        where,
                        info.name,
                        bad,
                        value.size,
                    )
                    continue
                raise SpecError(
                    f"{where}: the model's output {info.name!r} holds NaN or infinity ({bad} of {value.size} "
                    f"elements){defaulted}; a bundle that expects it could never pass",
                    hint="check the range of the test data, or pack with --no-assert",
                )
        stored.append(_Case(case, feeds, expected))
        logger.debug("test case %d (%s): ran", index, case.spec.origin)
    return stored


def _self_check(
    bundled: Any,
    stored: Sequence[_Case],
    b_outputs: Sequence[TensorInfo],
    options: PackOptions,
    explain: Callable[[int], str | None],
) -> list[dict[str, Any]]:
    """Run the optimised model on every test case; refuse a model that misses maxerr.

    Args:
        explain: names the first divergence of a failing test case (or None).

    Raises:
        OptimizeError: with the measured error per output, and either a
            --maxerr that would pass (when the error is small against the
            outputs' scale) or the first divergence.
    """
    results, failures, worst, scale, worst_case = [], [], 0.0, 0.0, 0
    for index, case in enumerate(stored):
        try:
            got = to_numpy_outputs(infer(bundled, dict(case.inputs)), b_outputs)
        except RunError as exc:
            raise OptimizeError(f"the optimised model fails to run on test case {index}: {exc.message}") from None
        for info, want, have in zip(b_outputs, case.expected, got, strict=True):
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
        message = f"the optimised model misses --maxerr {_bounds_text(options)}: " + ", ".join(failures[:4])
        message += f" and {len(failures) - 4} more" if len(failures) > 4 else ""
        hint = maxerr_hint(worst, scale)
        if hint is None:
            first = explain(worst_case)
            message += f"; first divergence on test case {worst_case}: {first}" if first else ""
        raise OptimizeError(message, hint=hint)
    return results


def _embed_io_dump(
    model_path: str,
    sha256: str,
    stored: Sequence[_Case],
    inputs: Sequence[TensorInfo],
    members: list[Member],
    scratch: str,
) -> dict[str, Any]:
    """Dump the model as given on the first test cases; add the dump as members; return the manifest's entry."""
    from ..diagnose.exposed import ModelDumper

    folder = os.path.join(scratch, IO_DUMP_FOLDER)
    dtypes = {info.name: info.np_dtype for info in inputs}
    cases = [
        (k, {name: (a.astype(dtypes[name]) if a.dtype != dtypes[name] else a) for name, a in case.inputs})
        for k, case in enumerate(stored)
    ]
    with ModelDumper(model_path, sha256, label=model_path) as dumper:
        dumper.dump(folder, cases)
    for k in range(len(stored)):
        case_dir = os.path.join(folder, case_folder(k))
        for name in ["index.json", *sorted(f for f in os.listdir(case_dir) if f != "index.json")]:
            members.append(Member(f"{IO_DUMP_FOLDER}/{case_folder(k)}/{name}", paths=(os.path.join(case_dir, name),)))
    return {"folder": IO_DUMP_FOLDER, "test_cases": list(range(len(stored))), "model_sha256": sha256}


def _tightest(options: PackOptions) -> float:
    """The tightest bound of any output: what the optimisations' searches aim at."""
    return min([options.maxerr, *(bound for _, bound in options.output_maxerr)])


def _bounds_text(options: PackOptions) -> str:
    own = ", ".join(f"{name}:{bound:g}" for name, bound in options.output_maxerr)
    return f"{options.maxerr:g}" + (f" ({own})" if own else "")


def _check_output_names(options: PackOptions, outputs: Sequence[TensorInfo]) -> None:
    """Refuse a per-output --maxerr for an output the model does not have."""
    names = [info.name for info in outputs]
    for name, _ in options.output_maxerr:
        if name not in names:
            raise UsageError(
                f"--maxerr {name}:...: the model has no output {name!r} (outputs: {', '.join(map(repr, names))})"
            )


def _explain(given: str, optimized: str, case: _Case, maxerr: float, scratch: str) -> str | None:
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
    stored: Sequence[_Case], outputs: Sequence[TensorInfo], members: list[Member], no_assert: bool
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
