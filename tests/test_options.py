"""The options dataclasses: every default in one place, every bad value refused with one clear line."""

from __future__ import annotations

import pytest

from mgedump.base.errors import UsageError
from mgedump.model.session import SessionSettings
from mgedump.options import DataOptions, DiffOptions, OptimizeOptions, PackOptions, VerifyOptions
from tests.support import SAMPLES


@pytest.mark.parametrize(
    "flag, target",
    [
        ("--enable-hwcd4", "OpenCL"),
        ("--enalbe-hwcd4", "OpenCL"),
        ("--enable-nchw4", "CUDA"),
        ("--enable-nchw44", "ARM"),
        ("--enable-nchw44-dot", "dot-product"),
        ("--enable-nchw32", "CUDA"),
        ("--enable-chwn4", "CUDA"),
        ("--enable-fuse-conv-bias-with-z", "CUDA"),
    ],
)
def test_flags_for_megengine_kernels_are_refused(flag, target, tmp_path, mgedump):
    result = mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--optimize-for-inference", flag, "-o", tmp_path / "o")
    assert result.code == 2 and target in result.err and "refuses" in result.err
    assert len(result.err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "flag",
    [
        "--enable-io16xc32",
        "--enable-ioc16",
        "--enable-fuse-conv-bias-nonlinearity",
        "--enable-nchw88",
        "--enable-hwcd4",
    ],
)
def test_enable_flags_need_optimize_for_inference(flag, tmp_path, mgedump):
    result = mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", flag, "-o", tmp_path / "o")
    assert result.code == 2
    assert ("refuses" if flag == "--enable-hwcd4" else "needs --optimize-for-inference") in result.err


def test_io16xc32_and_ioc16_exclude_each_other(tmp_path, mgedump):
    result = mgedump(
        SAMPLES / "cnn.onnx",
        "-d",
        "#rand(0,1)",
        "--optimize-for-inference",
        "--enable-io16xc32",
        "--enable-ioc16",
        "-o",
        tmp_path / "o",
    )
    assert result.code == 2 and "exclude each other" in result.err


def test_defaults():
    assert PackOptions().maxerr == 1e-4 and PackOptions().optimize == OptimizeOptions()
    assert (VerifyOptions().iters, VerifyOptions().warmup, VerifyOptions().maxerr) == (10, 1, None)
    assert DataOptions() == DataOptions(seed=0, repeat=1, resize_input=False, input_transform=None)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: PackOptions(maxerr=-1), "maxerr must be a finite number >= 0, got -1"),
        (lambda: PackOptions(maxerr=float("nan")), "maxerr must be a finite number >= 0"),
        (lambda: VerifyOptions(maxerr=float("inf")), "maxerr must be a finite number >= 0"),
        (lambda: VerifyOptions(iters=0), "iters must be >= 1, got 0"),
        (lambda: VerifyOptions(warmup=-1), "warmup must be >= 0, got -1"),
        (lambda: VerifyOptions(session={"threads": 0}), "threads must be >= 1, got 0"),
        (
            lambda: VerifyOptions(session=SessionSettings(threads=2**40)),
            r"threads must be at most \d+ \(four per core, 64 at least\)",
        ),
        (lambda: VerifyOptions(session={"graph_opt": "max"}), "graph_opt must be one of disable, basic, extended, all"),
        (
            lambda: VerifyOptions(session={"device": 1}),
            "no session setting 'device': the settings are provider, threads",
        ),
        (lambda: VerifyOptions(repeat_sweep=(1, 0)), "repeat_sweep batch sizes must be >= 1"),
        (lambda: DataOptions(repeat=0), "repeat must be >= 1, got 0"),
        (lambda: PackOptions(embed_io_dump=-1), "embed_io_dump takes a count of test cases >= 1"),
        (lambda: VerifyOptions(io_dump_budget_mb=0), "io_dump_budget_mb must be >= 1"),
        (lambda: DiffOptions(maxerr=-1), "maxerr must be a finite number >= 0"),
        (lambda: DataOptions(seed=-1), r"seed must be in \[0, 2\*\*63\)"),
        (lambda: DataOptions(input_transform="data/"), "is not a Python expression"),
        (lambda: OptimizeOptions(float16_margin=1.5), r"float16_margin must be a fraction in \[0, 1\)"),
        (lambda: OptimizeOptions(nchw88=True), "nchw88 needs optimize_for_inference"),
    ],
)
def test_bad_values_are_usage_errors(make, message):
    with pytest.raises(UsageError, match=message):
        make()


def test_the_library_names_options_by_keyword_and_the_command_line_by_flag(tmp_path, mgedump):
    """One message, two surfaces: a library caller reads the keyword it typed, a command-line user the flag."""
    with pytest.raises(UsageError, match="^iters must be >= 1, got 0$"):
        VerifyOptions(iters=0)
    result = mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--repeat", "0", "-o", tmp_path / "o")
    assert result.code == 2 and "--repeat must be >= 1, got 0" in result.err


def test_precision_modes_are_checked_against_the_registry():
    from mgedump.optimize.precisions import check_options

    assert check_options(OptimizeOptions()) is None
    assert check_options(OptimizeOptions(optimize_for_inference=True, precision="ioc16")).name == "ioc16"
    with pytest.raises(UsageError, match="precision 'bf17' is not a precision mode: one of ioc16, io16xc32, int8"):
        check_options(OptimizeOptions(precision="bf17"))
    with pytest.raises(UsageError, match="precision='ioc16' needs optimize_for_inference"):
        check_options(OptimizeOptions(precision="ioc16"))
    with pytest.raises(UsageError, match="keep_io_types keeps a float16 model's inputs and outputs float32: add"):
        check_options(OptimizeOptions(keep_io_types=True))
    with pytest.raises(UsageError, match="calibrate_method applies to int8's static calibration, not to"):
        check_options(OptimizeOptions(precision="int8-dynamic", calibrate_method="entropy"))
    assert not OptimizeOptions().any and OptimizeOptions(discard_var_name=True).any
