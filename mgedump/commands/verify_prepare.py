"""What ``mgerun`` runs, prepared: a bundle (checked, its model extracted, its test cases and expected outputs
read) or a plain model with ``-d`` test data, with the onnxruntime session open on it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ..base.bounds import Bounds
from ..base.errors import BundleError, DataError, ModelError, UsageError
from ..base.fileio import hash_files
from ..base.naming import option_name
from ..bundle import Bundle
from ..bundle.requirements import check_requirements
from ..data import TestData, check_shape
from ..data.casts import as_inputs_of
from ..model.modelfile import external_locations
from ..model.runner import Runner
from ..model.runtime import TensorInfo, open_runner
from ..options import VerifyOptions


@dataclass
class PreparedCase:
    """One test case, ready to run: how it was given, its inputs, and its expected outputs (None for a plain model)."""

    spec: str
    origin: str
    feeds: dict[str, np.ndarray]
    expected: list[np.ndarray] | None
    defaulted: list[str] = field(default_factory=list)  # symbolic dims a generator set to 1


@dataclass
class Prepared:
    """What a run of ``mgerun`` starts from: the runner (the model's session), the model's inputs and outputs, the
    test cases, the assertion, and (for a bundle) its model file, its embedded io dump and where it was packed."""

    kind: str
    runner: Runner
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    cases: list[PreparedCase]
    assertion: bool
    bounds: Bounds  # the bundle's (a plain model: none checked)
    verbose: bool
    model_path: str = ""
    model_sha256: str = ""
    reference: str | None = None  # the embedded io dump's folder, extracted
    packed_environment: dict[str, Any] | None = None  # the manifest's: where the bundle was packed
    files: list[str] = field(default_factory=list)  # data files read (outputs must not overwrite them)
    session_ms: float = 0.0  # creating the session: the cold start
    data_folder: str | None = None  # where the model's external data lies, when not beside model_path (the bundle's)
    variant: str | None = None  # the variant of a bundle of several that runs; its outputs compare by value
    model_outputs: list[TensorInfo] = field(default_factory=list)  # the session's outputs (none: ``outputs``)


def open_timed(
    model: str | bytes, label: str, options: VerifyOptions, tmp: str, data_folder: str | None = None
) -> tuple[Runner, float]:
    """The runner, and how long creating its session took (ms): the cold start."""
    profile_prefix = os.path.join(tmp, "profile") if options.profile else None
    began = time.perf_counter()
    runner = open_runner(model, options.session, label=label, profile=profile_prefix, data_folder=data_folder)
    return runner, (time.perf_counter() - began) * 1e3


def _bundled_input(bundle: Bundle, member: str, info: TensorInfo) -> np.ndarray:
    """A test case's input from the bundle, checked against the model's input: a bundle whose data does not fit
    its own model is a broken bundle (exit 2), not a model that fails (exit 1).

    Raises:
        BundleError: another dtype, rank or fixed dim than the model's input.
    """
    if not info.is_tensor:  # a sequence or an optional, checked against the model's type as it is read
        return cast(np.ndarray, bundle.value(member, info))
    array = bundle.tensor(member, info.name)
    what = f"{bundle.path}: member {member!r}"
    if info.dtype != "str" and array.dtype != info.np_dtype:
        raise BundleError(f"{what} holds {array.dtype}, but the model's input {info.name!r} takes {info.dtype}")
    try:
        check_shape(array, info, what)
    except DataError as exc:
        raise BundleError(exc.message) from None
    return array


def from_bundle(path: str, options: VerifyOptions, tmp: str, stage: Callable[[str], None]) -> Prepared:
    """A bundle prepared: checked (its hashes, its requirements, its external data), its model (or the variant's
    asked for) extracted and opened, its test cases and expected outputs read.

    Raises:
        UsageError: ``-d`` given for a bundle; a variant it does not hold, or none named for a bundle of several.
        BundleError: a broken bundle.
        ModelError: the model does not load, or its inputs and outputs are not the manifest's."""
    if options.cases:
        raise UsageError(f"{option_name('cases')} gives data to a plain model; a bundle carries its own test cases")
    stage(f"checking {os.path.basename(path)}")
    with Bundle(path) as bundle:
        manifest = bundle.manifest
        chosen = choose_variant(bundle, options.variant)
        model = chosen.model
        label = f"{path}:{model.member}"
        check_requirements(chosen.requirements, options.session.providers()[0])
        placed = place_model(bundle, model, os.path.join(tmp, "model"), label)
        model_path = placed.path
        stage("loading the model")
        runner, session_ms = open_timed(placed.opened, label, options, tmp, placed.data_folder)
        stage("reading the test cases and checking the bundle's hashes")
        inputs = [TensorInfo.from_json(d) for d in manifest.inputs]
        outputs = [TensorInfo.from_json(d) for d in manifest.outputs]
        got_in, got_out = runner.inputs, runner.outputs
        if [i.name for i in got_in] != [i.name for i in inputs] or [o.name for o in got_out] != [
            o.name for o in outputs
        ]:
            raise ModelError(f"{label}: the model's inputs/outputs do not match the manifest")
        if manifest.variants:  # what fitting and the reports read of a variant is what its model takes
            entry = next(v for v in manifest.variants if v.name == chosen.name)
            _check_records(label, [TensorInfo.from_json(d) for d in entry.inputs], got_in, "input")
            _check_records(label, [TensorInfo.from_json(d) for d in entry.outputs], got_out, "output")
        stored_in = inputs if manifest.variants else got_in  # a variant takes the stored inputs cast to its dtypes
        cases = _bundled_cases(bundle, stored_in, got_in, outputs)
        reference = None
        if manifest.io_dump:
            reference = bundle.extract_folder(manifest.io_dump["folder"], os.path.join(tmp, "reference"))
        bundle.verified()
    assertion = manifest.assertion
    return Prepared(
        kind="bundle",
        runner=runner,
        inputs=inputs,
        outputs=outputs,
        cases=cases,
        assertion=assertion.enabled,
        bounds=assertion.bounds,
        verbose=assertion.verbose,
        model_path=model_path,
        model_sha256=model.sha256,
        reference=reference,
        packed_environment=manifest.environment,
        session_ms=session_ms,
        data_folder=placed.data_folder,
        variant=chosen.name if manifest.variants else None,
        model_outputs=got_out,
    )


@dataclass(frozen=True)
class Chosen:
    """The model of a bundle that runs: the one model of a version-1 bundle, or the variant asked for."""

    name: str
    model: Any
    requirements: list[str]


def _check_records(label: str, recorded: list[TensorInfo], got: list[TensorInfo], kind: str) -> None:
    """A variant's manifest record of its inputs or outputs is its model's, name and dtype.

    Raises:
        BundleError: naming the first that differs.
    """
    for record, info in zip(recorded, got, strict=False):
        if (record.name, record.dtype) != (info.name, info.dtype):
            raise BundleError(
                f"{label}: the manifest says {kind} {record.name!r} is {record.dtype}; the model's is "
                f"{info.name!r}, {info.dtype}"
            )
    if len(recorded) != len(got):
        raise BundleError(f"{label}: the manifest lists {len(recorded)} {kind}(s); the model has {len(got)}")


def choose_variant(bundle: Bundle, name: str | None) -> Chosen:
    """The model to run: a version-1 bundle's own, or the variant of that name.

    Raises:
        UsageError: a name the bundle does not hold, or none for a bundle of several.
    """
    from ..optimize.precisions import variant_of  # the mode's record says which variant a one-model bundle is

    manifest = bundle.manifest
    if not manifest.variants:
        own = variant_of(manifest.records)
        if name is not None and name != own:
            raise UsageError(f"{bundle.path} holds one model, the {own} variant; {option_name('variant')} {name!r}")
        return Chosen(own, manifest.model, list(manifest.requirements))
    names = [v.name for v in manifest.variants]
    if name is None:
        raise UsageError(f"{bundle.path} holds the variants {', '.join(names)}: name one ({option_name('variant')})")
    if name not in names:
        raise UsageError(f"{bundle.path} has no variant {name!r}: it holds {', '.join(names)}")
    entry = manifest.variants[names.index(name)]
    return Chosen(name, entry.model, list(entry.requirements))


def _bundled_cases(
    bundle: Bundle, stored: list[TensorInfo], model_inputs: list[TensorInfo], outputs: list[TensorInfo]
) -> list[PreparedCase]:
    """Every test case's inputs (checked against the stored infos, cast to the model's dtypes) and outputs."""
    manifest = bundle.manifest
    cases = []
    for case in manifest.test_cases:
        arrays = [
            (info.name, _bundled_input(bundle, member, info)) for info, member in zip(stored, case.inputs, strict=True)
        ]
        feeds = dict(as_inputs_of(arrays, stored, model_inputs)) if stored is not model_inputs else dict(arrays)
        expected = None
        if manifest.assertion.enabled:  # the manifest lists one output member per output then, none otherwise
            expected = [bundle.value(member, info) for info, member in zip(outputs, case.outputs, strict=True)]
        cases.append(PreparedCase(case.spec, case.origin, feeds, expected))
    return cases


@dataclass(frozen=True)
class Placed:
    """A bundled model ready to open: its file, what a session opens (the file, or the model's bytes), and the
    folder its external data lies in (None: beside the file)."""

    path: str
    opened: str | bytes
    data_folder: str | None = None


def place_model(bundle: Bundle, model: Any, folder: str, label: str) -> Placed:
    """A bundled model (a manifest's model entry) made ready to open, its external data checked (check 8 of
    docs/bundle.md, "What a reader checks").

    The model member is copied into ``folder`` (a folder of its own, which no name in the bundle can collide with:
    onnxruntime loads a file with a third less memory than the same bytes from Python). Its weights are never
    copied: members are stored, so the data member's bytes lie in one range of the bundle file, and the model is
    rewritten to read them there (docs/bundle.md, "Reading the weights in place"). Only a bundle whose file name
    is not UTF-8 text (which the model cannot name), or an onnxruntime older than 1.21 (which cannot be told where
    the data lies), has its data member copied beside the model.

    Raises:
        BundleError: the model reads external data from anything but its data member, or beyond it.
    """
    from ..model.modelfile import point_into

    os.mkdir(folder)
    path = bundle.extract(model.member, folder)
    member = model.external_data
    real = os.path.realpath(bundle.path)
    name = os.path.basename(real)
    if member and _utf8(name) and _reads_data_from_a_folder():
        with open(path, "rb") as f:
            given = f.read()
        start, size = bundle.span(member)
        rewritten = point_into(given, member, name, start, size, label)
        with open(path, "wb") as f:
            f.write(rewritten)
        return Placed(path, rewritten, os.path.dirname(real))
    if member:
        bundle.extract(member, folder)
    _check_external_data(label, path, member)
    return Placed(path, path)


IN_PLACE_FROM = (1, 21)  # the first onnxruntime that reads external data from a folder named in its options


def _reads_data_from_a_folder() -> bool:
    """Whether this onnxruntime takes ``session.model_external_initializers_file_folder_path`` for a model opened
    from memory (1.21 on); an older one gets the data member copied beside the model, as before."""
    import re

    import onnxruntime as ort  # type: ignore[import-untyped]

    found = re.match(r"(\d+)\.(\d+)", str(getattr(ort, "__version__", "")), re.ASCII)
    return found is not None and (int(found.group(1)), int(found.group(2))) >= IN_PLACE_FROM


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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


def from_model(
    path: str, data: TestData | None, options: VerifyOptions, tmp: str, stage: Callable[[str], None]
) -> Prepared:
    """A plain model prepared: opened, and its test cases built from the ``-d`` data.

    Raises:
        UsageError: no test data given."""
    if data is None:
        raise UsageError(f"{path} is a plain model: give test data with -d (e.g. -d '#rand(0,255)')")
    stage(f"loading {os.path.basename(path)}")
    runner, session_ms = open_timed(path, path, options, tmp)
    stage("building the test data")
    inputs, outputs = runner.inputs, runner.outputs
    built = data.build(inputs, options.data)
    cases = [PreparedCase(case.spec.text, case.spec.origin, dict(case.inputs), None, case.defaulted) for case in built]
    return Prepared(
        kind="model",
        runner=runner,
        inputs=inputs,
        outputs=outputs,
        cases=cases,
        assertion=False,
        bounds=Bounds(maxerr=0.0),
        verbose=True,
        model_path=path,
        model_sha256=hash_files([path]).sha256 if options.io_dump else "",
        files=[f for case in built for f in case.files],
        session_ms=session_ms,
    )


def is_plain_model(path: str, options: VerifyOptions) -> bool:
    """A path is run as a plain model when -d is given or it ends in .onnx."""
    return bool(options.cases) or path.lower().endswith(".onnx")
