"""The differ (mgediff's library side): where each side's test data comes from, and its options."""

from __future__ import annotations

import numpy as np
import pytest

from mgedump.base.errors import UsageError
from mgedump.commands.diff import diff
from mgedump.options import DiffOptions
from tests.support import sample


@pytest.fixture
def dump(tmp_path, mgedump, mgerun):
    cnn = sample("cnn.onnx")
    assert mgedump(cnn.path, "-d", cnn.spec, "-d", "#rand(0,3)", "-o", tmp_path / "b.mgetest", "-q").code == 0
    assert mgerun(tmp_path / "b.mgetest", "--iter", "1", "--io-dump", tmp_path / "dump").code == 0
    return tmp_path / "dump"


def test_a_model_runs_on_the_inputs_a_dump_recorded(dump):
    report = diff(str(dump), str(sample("cnn.onnx").path))
    assert [case.test_case for case in report.cases] == [0, 1]
    assert report.passed and all(len(case.tensors) == 12 for case in report.cases)


def test_a_given_maxerr_is_used_and_said(dump):
    report = diff(str(dump), str(dump), DiffOptions(maxerr=0.5))
    assert report.maxerr == 0.5 and report.maxerr_source == "given"


def test_data_for_two_dumps_is_refused(dump):
    with pytest.raises(UsageError, match="A and B are both io dumps"):
        diff(str(dump), str(dump), DiffOptions(cases=["#rand(0,1)"]))


def test_specs_feed_both_models_cast_to_their_inputs(tmp_path):
    import onnx

    from mgedump.optimize.float16 import convert

    model = onnx.load(str(sample("cnn.onnx").path))
    convert(model, "ioc16")
    onnx.save(model, tmp_path / "half.onnx")
    report = diff(str(sample("cnn.onnx").path), str(tmp_path / "half.onnx"), DiffOptions(cases=["#rand(0,1)"]))
    case = report.cases[0]
    assert case.input_errs["data"] < 1e-3  # float32 data, rounded to float16 for B
    assert report.passed and case.first_divergence is None
    assert np.isfinite([t.err for t in case.tensors]).all()
