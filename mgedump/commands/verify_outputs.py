"""What ``mgerun`` writes besides its reports, and its diagnosis: each test case's outputs (``--bin-out-dump``),
every tensor (``--io-dump``), onnxruntime's profile (``--profile``), and where a failing test case first diverges
from the io dump its bundle carries."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..base.errors import DataError, ModelError, RunError
from ..base.fileio import atomic_output, make_folder, write_bytes_atomic
from ..base.naming import option_name
from ..bundle import case_folder
from ..bundle.valueproto import encode_value
from ..model.runner import Runner
from ..model.runtime import TensorInfo
from ..options import VerifyOptions
from .verify_prepare import Prepared, PreparedCase


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "output"


def dump_outputs(
    folder: str, index: int, infos: Sequence[TensorInfo], outputs: Sequence[np.ndarray], protected: Sequence[str]
) -> None:
    """One test case's outputs as ``.npy`` files in ``folder/test_data_set_N`` (``--bin-out-dump``), each named
    after its output (made safe as a file name, and unique)."""
    case_dir = os.path.join(folder, case_folder(index))
    make_folder(case_dir, option_name("bin_out_dump"))
    used: set[str] = set()
    for k, (info, array) in enumerate(zip(infos, outputs, strict=True)):
        name = _safe_name(info.name)
        if name in used:
            name = f"{name}_{k}"
        used.add(name)
        if not info.is_tensor:  # a sequence, a map or an optional: as in the bundle (no pickle in a .npy)
            write_bytes_atomic(
                os.path.join(case_dir, name + ".pb"), encode_value(array, info.value_type, info.name), protected
            )
            continue
        with atomic_output(os.path.join(case_dir, name + ".npy"), protected) as f:
            np.save(f, array, allow_pickle=False)


def io_dump(prepared: Prepared, cases: Sequence[tuple[int, dict[str, np.ndarray]]], options: VerifyOptions) -> None:
    """Write every tensor of these test cases (that ran) into the --io-dump folder."""
    from ..diagnose.exposed import ModelDumper

    assert options.io_dump is not None
    with ModelDumper(
        prepared.model_path,
        prepared.model_sha256,
        options.session,
        budget=options.io_dump_budget_mb << 20,
        label=prepared.model_path,
        data_folder=prepared.data_folder,
    ) as d:
        d.dump(options.io_dump, cases)


def diagnose_case(
    prepared: Prepared, index: int, case: PreparedCase, maxerr: float, options: VerifyOptions, tmp: str
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
            prepared.model_path,
            prepared.model_sha256,
            options.session,
            budget=options.io_dump_budget_mb << 20,
            label="the bundled model",
            data_folder=prepared.data_folder,
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


def save_profile(runner: Runner, target: str, protected: Sequence[str]) -> tuple[str, list[dict[str, Any]]]:
    """Copy the runner's profile to the target; return it and the time per operator type it records."""
    from ..measure.profiling import op_table

    produced = runner.end_profiling()
    table = op_table(produced)
    with open(produced, "rb") as src, atomic_output(target, protected) as dst:
        shutil.copyfileobj(src, dst)
    return target, table
