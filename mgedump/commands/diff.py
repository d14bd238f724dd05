"""Compare two runs tensor by tensor and name where they part (the ``mgediff`` command, docs/io-dump.md#comparing-two-runs-mgediff).

Each side is an io dump (a folder written by ``mgerun --io-dump``), a bundle
or a model. A bundle or a model is run with every tensor exposed, on:

1. the ``-d`` specs, when given;
2. else a bundle's own test cases (A's if A is a bundle, else B's);
3. else the inputs an io dump of the other side recorded.

Test data is cast to each model's input types, so a float32 model and its
float16 version run on the same values.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from dataclasses import dataclass

import numpy as np

from ..base.deps import require
from ..base.errors import RunError, SpecError, UsageError
from ..base.fileio import hash_files
from ..base.log import fresh_warnings
from ..base.naming import option_name
from ..base.outputs import Output, Outputs
from ..bundle import Bundle
from ..data import TestData
from ..diagnose.divergence import DiffReport, diff_dumps
from ..diagnose.exposed import ModelDumper, dump_to_scratch
from ..diagnose.iodump import IoDump
from ..diagnose.locate import inputs_for
from ..model.runtime import TensorInfo, model_io, open_session
from ..model.session import SessionSettings
from ..options import DiffOptions
from .inputs import files_read
from .verify_prepare import choose_variant, place_model

__all__ = ["DiffOptions", "diff"]

Cases = list[tuple[int, dict[str, np.ndarray]]]


@dataclass
class _Side:
    """One side of a comparison: a dump as it is, or a model (from a file or a bundle) to run."""

    label: str
    kind: str  # "dump", "bundle" or "model"
    dump: IoDump | None = None
    model_path: str = ""
    sha256: str = ""
    cases: Cases | None = None  # a bundle's own test cases
    opened: str | bytes = ""  # what a session opens (the file, or a bundled model's bytes)
    data_folder: str | None = None  # where a bundled model's weights lie (the bundle's folder: docs/bundle.md)
    variants: bool = False  # a bundle of several variants, of which --variant chose one


def _open_side(path: str, name: str, scratch: str, variant: str | None) -> _Side:
    if os.path.isdir(path):
        return _Side(f"{path} (io dump)", "dump", dump=IoDump(path))
    if not os.path.exists(path):
        raise UsageError(f"{name}: {path} does not exist (give an io dump folder, a bundle or a model)")
    if not os.path.isfile(path):  # a FIFO or a device would block the first read
        raise UsageError(
            f"{name}: {path} is not a regular file or a folder (give an io dump folder, a bundle or a model)"
        )
    if zipfile.is_zipfile(path):
        with Bundle(path) as bundle:
            manifest = bundle.manifest
            # a bundle of several variants runs the one --variant names (none named: refused, as mgerun does);
            # a bundle of one model runs it, whatever the other side's variant is
            chosen = choose_variant(bundle, variant if manifest.variants else None).model
            placed = place_model(bundle, chosen, os.path.join(scratch, name), f"{path}:{chosen.member}")
            infos = [TensorInfo.from_json(info) for info in manifest.inputs]
            cases = [
                (k, {i.name: bundle.value(member, i) for i, member in zip(infos, case.inputs, strict=True)})
                for k, case in enumerate(manifest.test_cases)
            ]
            bundle.verified()
        label = f"{path} (bundle, variant {variant})" if manifest.variants else f"{path} (bundle)"
        return _Side(
            label, "bundle", model_path=placed.path, sha256=chosen.sha256, cases=cases,
            opened=placed.opened, data_folder=placed.data_folder, variants=bool(manifest.variants),
        )  # fmt: skip
    return _Side(f"{path} (model)", "model", model_path=path, sha256=hash_files([path]).sha256, opened=path)


def _cases_from_data(side: _Side, data: TestData, options: DiffOptions) -> tuple[Cases, list[str]]:
    """The test cases the data makes for this side's model, and the data files they read."""
    session = open_session(side.opened, label=side.label, data_folder=side.data_folder)
    inputs, _ = model_io(session)
    built = data.build(inputs, options.data)
    return [(k, dict(case.inputs)) for k, case in enumerate(built)], [f for case in built for f in case.files]


def _files_of(path: str) -> list[str]:
    """A side's files: the path itself, or every file of an io dump folder."""
    if not os.path.isdir(path):
        return [path]
    return [os.path.join(folder, name) for folder, _, names in os.walk(path) for name in names]


def _cases_from_dump(dump: IoDump) -> Cases:
    cases = []
    for number, case in sorted(dump.cases.items()):
        produced = {o for node in case.nodes for o in node.outputs}
        cases.append((number, {name: case.tensor(name) for name in case.names if name not in produced}))
    return cases


def _test_cases(a: _Side, b: _Side, data: TestData | None, options: DiffOptions) -> tuple[Cases | None, list[str]]:
    """The test cases both sides run (None when both are dumps), and the data files they were read from."""
    runs = [s for s in (a, b) if s.kind != "dump"]
    if not runs:
        if data is not None:
            raise UsageError("-d gives data to a model or bundle to run; A and B are both io dumps")
        return None, []
    if data is not None:
        return _cases_from_data(runs[0], data, options)
    for side in (a, b):
        if side.cases is not None:
            return side.cases, []
    for side in (a, b):
        if side.dump is not None:
            return _cases_from_dump(side.dump), []
    raise UsageError("A and B are models: give test data with -d (e.g. -d '#rand(0,1)'), or compare a bundle")


def _run(side: _Side, cases: Cases, settings: SessionSettings, budget: int, scratch: str) -> IoDump:
    """Run one side on the test cases with every tensor exposed.

    Raises:
        UsageError: the test data does not give the model's inputs (the sides are not related models).
        SpecError: the model fails to run on the data (the data must change, as at pack time).
    """
    with ModelDumper(
        side.model_path, side.sha256, settings, budget=budget, label=side.label, data_folder=side.data_folder
    ) as dumper:
        dtypes = {
            v.name: _np_dtype(v.type.tensor_type.elem_type)
            for v in dumper.runner.model.graph.input
            if v.type.tensor_type.elem_type
        }
        needed = list(dumper.runner.plan.inputs)
        given_names = sorted(cases[0][1]) if cases else []
        missing = [n for n in needed if n not in given_names]
        if missing:
            raise UsageError(
                f"{side.label} takes input(s) {', '.join(map(repr, needed))}, but the test data gives "
                f"{', '.join(map(repr, given_names)) or 'none'}: compare runs of related models, or give -d"
            )
        try:
            return dump_to_scratch(dumper, [(k, inputs_for(dtypes, feeds)) for k, feeds in cases], scratch)
        except RunError as exc:
            raise SpecError(f"{side.label}: {exc.message}", hint=exc.hint) from None


def _np_dtype(elem_type: int) -> str:
    tensor_dtype_to_np_dtype = require("onnx.helper", purpose="comparing runs").tensor_dtype_to_np_dtype

    return str(np.dtype(tensor_dtype_to_np_dtype(elem_type)))


@fresh_warnings
def diff(a: str, b: str, options: DiffOptions | None = None) -> DiffReport:
    """Compare A and B tensor by tensor (each an io dump folder, a bundle or a model).

    Args:
        a, b: the two sides; B is the one whose nodes are searched for the
            first divergence (the optimised, converted or suspect side).
        options: defaults to ``DiffOptions()``.

    Returns:
        The comparison; ``report.exit_code`` is 1 when a matched tensor is above maxerr.

    Raises:
        MgeError: a side that cannot be read, data that does not fit, or two
            runs with no tensor in common (exit code 2).
    """
    options = options or DiffOptions()
    data = TestData.parse(options.cases) if options.cases else None
    protected = files_read(models=[a, b], data=[data], others=[*_files_of(a), *_files_of(b)])
    outputs = Outputs([Output("report_json", options.report_json or "", stdout=True)])
    outputs.check(protected)
    settings = SessionSettings(provider=options.provider)
    settings.providers()  # an unknown provider refused before any work
    with tempfile.TemporaryDirectory(prefix="mgediff-") as scratch:
        side_a = _open_side(a, "A", scratch, options.variant)
        side_b = _open_side(b, "B", scratch, options.variant)
        if options.variant is not None and not (side_a.variants or side_b.variants):
            raise UsageError(
                f"{option_name('variant')} {options.variant!r} chooses among a bundle's variants; neither A nor B "
                f"is a bundle of several (mgedump {option_name('variants')})"
            )
        cases, data_files = _test_cases(side_a, side_b, data, options)
        protected += data_files
        outputs.check(protected)
        dumps = []
        for side in (side_a, side_b):
            if side.dump is not None:
                dumps.append(side.dump)
            else:
                assert cases is not None
                dumps.append(_run(side, cases, settings, options.io_dump_budget_mb << 20, scratch))
        report = diff_dumps(dumps[0], dumps[1], maxerr=options.maxerr, label_a=side_a.label, label_b=side_b.label)
    if options.report_json:
        import json

        from ..report import write_report
        from ..report.schema import json_ready  # strict JSON: no lone surrogate from a path or a name

        document = json.dumps(json_ready(report.to_json()), indent=1, sort_keys=True, allow_nan=False) + "\n"
        write_report(options.report_json, document.encode(), protected)
    return report
