"""Awkward input that must work: free dims given with --input-shape, comments in list files, links written
through, damaged images, text from a bundle that tries to drive the terminal, SIGTERM, and the exit codes
a model that fails to run gives at pack time (2) and at verify time (1)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import numpy as np
import pytest

from tests.support import SAMPLES, bundle_manifest, one_report, rewrite_bundle, script

FREE_WIDTH = SAMPLES / "free_width.onnx"  # x [1,3,32,W]
FREE_DIMS = SAMPLES / "free_dims.onnx"  # x [N,3,H,W]
CAT = SAMPLES / "images" / "cat.png"


def _input_shape(bundle) -> list[int]:
    from mgedump.bundle.tensorproto import decode
    from tests.support import bundle_member

    return list(decode(bundle_member(bundle, "test_data_set_0/input_0.pb"))[0].shape)


# ---------------------------------------------------------------- --input-shape


@pytest.mark.parametrize(
    "model, shape, data",
    [
        (FREE_WIDTH, "1,3,32,100", ["-d", "#rand(0,1)"]),
        (FREE_WIDTH, "x:1,3,32,64", ["-d", "#randn(0,1)", "-d", "#const(0.5)"]),
        (FREE_WIDTH, "1,3,32,120", ["-d", CAT, "--resize-input"]),
        (FREE_DIMS, "2,3,48,80", ["-d", "#rand(0,1)"]),
        (FREE_DIMS, "x:1,3,40,56", ["-d", CAT, "--resize-input"]),
        (FREE_DIMS, "2,3,40,56", ["-d", CAT, "--resize-input", "--repeat", "2"]),
    ],
)
def test_input_shape_packs_free_dims(tmp_path, mgedump, mgerun, model, shape, data):
    out = tmp_path / "o.mgetest"
    result = mgedump(model, *data, "--input-shape", shape, "-o", out)
    assert result.code == 0, result.err
    assert "symbolic" not in result.err  # nothing was defaulted
    assert _input_shape(out) == [int(d) for d in shape.split(":")[-1].split(",")]
    assert mgerun(out, "--iter", "1").code == 0


@pytest.mark.parametrize("model, shape", [(FREE_WIDTH, "1,3,32,72"), (FREE_DIMS, "x:3,3,24,40")])
def test_input_shape_runs_a_plain_model(tmp_path, mgerun, model, shape):
    report = tmp_path / "r.json"
    result = mgerun(model, "-d", "#rand(0,1)", "--input-shape", shape, "--iter", "1", "--report-json", report)
    assert result.code == 0, result.out + result.err
    case = one_report(report)["test_cases"][0]
    assert case["batch"] == int(shape.split(":")[-1].split(",")[0])


def test_a_defaulted_dim_is_named_when_the_run_fails(tmp_path, mgedump, mgerun):
    packed = mgedump(FREE_WIDTH, "-d", "#rand(0,1)", "-o", tmp_path / "o.mgetest")
    assert packed.code == 2  # at pack time, data the model cannot run on is bad input
    assert "dims defaulted to 1: 'x' dim 3 ('W')" in packed.err and "--input-shape" in packed.err
    assert "--input-shape x:1,3,32,<W>" in packed.err  # the warning names the free dim as a placeholder
    ran = mgerun(FREE_WIDTH, "-d", "#rand(0,1)", "--iter", "1")
    assert ran.code == 1  # at verify time, a model that fails to run is a failed check
    assert "dims defaulted to 1: 'x' dim 3 ('W')" in ran.out


def test_the_model_failing_at_verify_time_exits_1(tmp_path, mgedump, mgerun):
    """A bundle packed from a model that runs, verified with one that does not (the same inputs, another
    model): exit 1 at verify time, as docs/exit-codes.md says."""
    model = SAMPLES / "bad" / "gather_index.onnx"
    out = tmp_path / "g.mgetest"
    assert mgedump(model, "-d", "#rand(0,9)", "-o", out).code == 0

    def big_indices(names, manifest, members):
        from mgedump.bundle.tensorproto import decode, encode

        array, name = decode(members["test_data_set_0/input_0.pb"])
        members["test_data_set_0/input_0.pb"] = encode(np.full_like(array, 1000), name)

    broken = rewrite_bundle(out, tmp_path / "b.mgetest", big_indices, fix_hashes=True)
    result = mgerun(broken, "--iter", "1")
    assert result.code == 1 and "the model failed to run" in result.out


# ---------------------------------------------------------------- list files, links, scalars


def test_list_files_skip_comments_and_blank_lines(tmp_path, mgedump):
    listing = tmp_path / "l.txt"
    listing.write_text(f"# test cases for cnn\n\n{CAT}\n   # indented comment\n#rand(0,1)\n\n", encoding="utf-8")
    out = tmp_path / "o.mgetest"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", f"@{listing}", "-o", out, "-q").code == 0
    assert len(bundle_manifest(out)["test_cases"]) == 2


def test_an_output_that_is_a_link_is_written_through(tmp_path, mgedump):
    real = tmp_path / "real.mgetest"
    real.write_bytes(b"old")
    link = tmp_path / "link.mgetest"
    link.symlink_to(real)
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", link, "-q").code == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert bundle_manifest(real)["format_version"] == 1


def test_randn_for_a_scalar_integer_input(tmp_path, mgedump, mgerun):
    out = tmp_path / "o.mgetest"
    result = mgedump(SAMPLES / "multi_input.onnx", "-d", "input:0:#rand(0,1);len:#randn(5,1)", "-o", out)
    assert result.code == 0, result.err
    assert mgerun(out, "--iter", "1").code == 0


def test_external_data_linked_inside_the_models_folder_is_fine(tmp_path, mgedump):
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "store.bin").write_bytes((SAMPLES / "external" / "mlp.weights").read_bytes())
    (tmp_path / "mlp.weights").symlink_to(tmp_path / "weights" / "store.bin")
    (tmp_path / "mlp.onnx").write_bytes((SAMPLES / "external" / "mlp.onnx").read_bytes())
    assert mgedump(tmp_path / "mlp.onnx", "-d", "#rand(0,1)", "-o", tmp_path / "o.mgetest", "-q").code == 0


def test_a_damaged_image_that_decodes_gives_one_warning_not_the_decoders_text(tmp_path, mgedump):
    data = (SAMPLES / "images" / "dog.jpg").read_bytes()
    at = data.index(b"\xff\xc4")
    damaged = tmp_path / "d.jpg"
    damaged.write_bytes(data[:at] + b"\x00" * 9 + data[at:])
    result = mgedump(SAMPLES / "cnn.onnx", "-d", damaged, "--resize-input", "-o", tmp_path / "o.mgetest")
    assert result.code == 0
    lines = result.err.splitlines()
    assert lines[0] == (
        f"mgedump: warning: {damaged}: the image decoder reported damage "
        "(Corrupt JPEG data: 9 extraneous bytes before marker 0xc4); check the file"
    )
    assert len(lines) == 2 and lines[1].startswith("mgedump: wrote ")


# ---------------------------------------------------------------- text from files, signals, --silent


def test_text_from_a_bundle_cannot_drive_the_terminal(tmp_path, mgedump, mgerun):
    out = tmp_path / "o.mgetest"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", out, "-q").code == 0

    def hostile_spec(names, manifest, members):
        manifest["test_cases"][0]["spec"] = "x)\nall 9 test case(s) passed\x1b[2J\x07"

    crafted = rewrite_bundle(out, tmp_path / "c.mgetest", hostile_spec)
    result = mgerun(crafted, "--iter", "1")
    assert result.code == 0
    assert "\x1b" not in result.out and "\x07" not in result.out
    assert "x)\\x0aall 9 test case(s) passed\\x1b[2J\\x07" in result.out
    assert not any(line.startswith("all 9") for line in result.out.splitlines())


def test_silent_prints_the_timing_but_no_passing_assertion(tmp_path, mgedump, mgerun):
    out = tmp_path / "o.mgetest"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", out, "-q").code == 0
    result = mgerun(out, "--silent", "--iter", "2")
    assert result.code == 0
    assert "AssertEqual" not in result.out
    assert any(line.startswith("latency (ms)") for line in result.out.splitlines())


def test_sigterm_exits_143_and_leaves_no_temporary_folder(tmp_path, mgedump):
    out = tmp_path / "o.mgetest"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", out, "-q").code == 0
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    process = subprocess.Popen(
        [script("mgerun"), out, "--iter", "10000000", "--silent"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    while not any(p.name.startswith("mgerun-") for p in scratch.iterdir()):  # the bundle is being verified
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143
    assert err.strip().splitlines()[-1] == "mgerun: terminated"
    # onnxruntime itself leaves a small ".ses" file in TMPDIR on import; mgerun's own folder is gone
    assert [p.name for p in scratch.iterdir() if p.name != ".ses"] == []
