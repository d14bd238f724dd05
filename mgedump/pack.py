"""Pack a model and its test cases into a bundle (the ``mgedump`` command)."""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Sequence

from . import __version__
from .bundle import FORMAT, FORMAT_VERSION, MODEL_MEMBER, Member, tensor_bytes, write_bundle
import numpy as np

from .data import DataOptions, TestCase, build_cases
from .errors import RunError, SpecError
from .fileio import check_target, hash_files
from .log import logger
from .modelfile import DATA_MEMBER, model_source
from .runtime import TensorInfo, check_model_path, model_io, open_session, run, to_numpy_outputs
from .spec import expand_specs

DEFAULT_MAXERR = 1e-4


def check_maxerr(maxerr: float) -> float:
    """Refuse a negative or non-finite ``--maxerr``."""
    if not (isinstance(maxerr, (int, float)) and math.isfinite(maxerr) and maxerr >= 0):
        raise SpecError(f"--maxerr must be a finite number >= 0, got {maxerr}")
    return float(maxerr)


@dataclass(frozen=True)
class PackOptions:
    """What to pack besides the model.

    Attributes:
        specs: the ``-d`` values, one test case each (``@FILE`` gives several).
        data: how data is made and prepared. Defaults to ``DataOptions()``.
        maxerr: the AssertEqual threshold recorded in the bundle. Defaults to 1e-4.
        no_assert: store no expected outputs; ``mgerun`` then only runs and times.
        silent: record that ``mgerun`` prints failures only.
    """

    specs: Sequence[str]
    data: DataOptions = field(default_factory=DataOptions)
    maxerr: float = DEFAULT_MAXERR
    no_assert: bool = False
    silent: bool = False


@dataclass
class PackResult:
    """What :func:`pack` wrote."""

    output: str
    manifest: dict[str, Any]

    @property
    def test_cases(self) -> int:
        return len(self.manifest["test_cases"])


def pack(model_path: str, output_path: str, options: PackOptions) -> PackResult:
    """Run the model on every test case and write the bundle.

    Expected outputs come from the model as given. The bundle is written
    beside ``output_path`` and renamed into place, so an existing file is
    replaced whole or not at all.

    Raises:
        MgeError: bad model, spec, data or output path (nothing is written).
    """
    maxerr = check_maxerr(options.maxerr)
    check_target(output_path)
    check_model_path(model_path)
    source = model_source(model_path)
    # Hash the weights in a thread while onnxruntime loads and runs the model: one read, on the other core.
    cancel = threading.Event()
    with ThreadPoolExecutor(1, thread_name_prefix="mgedump-hash") as pool:
        hashing = pool.submit(hash_files, source.data_paths or (model_path,), cancel)
        try:
            inputs, outputs, cases, expected = _run_cases(model_path, options)
            digest = hashing.result()
        except BaseException:
            cancel.set()
            raise
    if source.model_bytes is None:
        source_sha256 = digest.sha256
        members = [Member(MODEL_MEMBER, paths=(model_path,), digest=digest)]
    else:
        source_sha256 = hash_files([model_path]).sha256
        members = [Member(MODEL_MEMBER, source.model_bytes), Member(DATA_MEMBER, paths=source.data_paths, digest=digest)]
    model_sha256 = members[0].hashed().sha256

    manifest_cases = []
    for index, (case, values) in enumerate(zip(cases, expected)):
        folder = f"test_data_set_{index}"
        input_members = []
        for k, (name, array) in enumerate(case.inputs):
            input_members.append(f"{folder}/input_{k}.pb")
            members.append(Member(input_members[-1], tensor_bytes(array, name)))
        output_members = []
        if not options.no_assert:
            for k, (info, array) in enumerate(zip(outputs, values)):
                output_members.append(f"{folder}/output_{k}.pb")
                members.append(Member(output_members[-1], tensor_bytes(array, info.name)))
        manifest_cases.append(
            {"dir": folder, "spec": case.spec.text, "origin": case.spec.origin, "inputs": input_members, "outputs": output_members}
        )

    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "generator": {"name": "mgedump", "version": __version__},
        "model": {
            "member": MODEL_MEMBER,
            "sha256": model_sha256,
            "source_sha256": source_sha256,
            "external_data": DATA_MEMBER if source.data_paths else None,
        },
        "optimizations": [],
        "requirements": [],
        "inputs": [info.to_json() for info in inputs],
        "outputs": [info.to_json() for info in outputs],
        "assertion": {"enabled": not options.no_assert, "maxerr": maxerr, "verbose": not options.silent},
        "seed": options.data.seed,
        "data_options": {
            "repeat": options.data.repeat,
            "resize_input": options.data.resize_input,
            "input_transform": options.data.input_transform,
        },
        "test_cases": manifest_cases,
    }
    written = write_bundle(output_path, manifest, members)
    return PackResult(os.fspath(output_path), written)


def _run_cases(model_path: str, options: PackOptions) -> tuple[list[TensorInfo], list[TensorInfo], list[TestCase], list[list[np.ndarray]]]:
    """Open the model, build every test case and run the model on it (expected outputs)."""
    session = open_session(model_path)
    inputs, outputs = model_io(session)
    cases = build_cases(expand_specs(list(options.specs)), inputs, options.data)
    expected = []
    for index, case in enumerate(cases):
        try:
            values = run(session, dict(case.inputs))
        except RunError as exc:
            raise SpecError(f"test case {index} ({case.spec.origin}: {case.spec.text!r}): {exc.message}", hint=exc.hint) from None
        expected.append(to_numpy_outputs(values, outputs))
        logger.debug("test case %d (%s): ran", index, case.spec.origin)
    return inputs, outputs, cases, expected
