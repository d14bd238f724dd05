"""Bad input: each case exits 2 with one line on stderr, no traceback, and leaves existing output untouched.

docs/troubleshooting.md lists these cases.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.support import SAMPLES, bad_models, rewrite_bundle, run_ok

SENTINEL = b"existing output, must survive\n"


def _bundle(tmp: Path) -> Path:
    out = tmp / "good.mgetest"
    run_ok("mgedump", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", out, "-q")
    return out


def _traversal(names, manifest, members):
    members["../x"] = b"evil"
    manifest["members"].append({"name": "../x", "size": 4, "sha256": "0" * 64})
    return names + ["../x"]


def _unknown_version(names, manifest, members):
    manifest["format_version"] = 3


def _tamper_output(names, manifest, members):
    members["test_data_set_0/output_0.pb"] = members["test_data_set_0/output_0.pb"][:-1] + b"\x00"


def _extra_member(names, manifest, members):
    members["extra.bin"] = b"x"
    return names + ["extra.bin"]


# Each case: (id, program, args builder(tmp) -> list, what stderr must mention).
CASES = [
    ("missing-model", "mgedump", lambda t: [t / "nope.onnx", "-d", "#rand(0,1)"], "model file not found"),
    ("spec-missing-max", "mgedump", lambda t: [SAMPLES / "cnn.onnx", "-d", "#rand(0)"], "#rand needs MIN,MAX"),
    ("spec-min-over-max", "mgedump", lambda t: [SAMPLES / "cnn.onnx", "-d", "#rand(1,0)"], "MIN > MAX"),
    (
        "spec-ellipsis-inside",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", "#rand(0,1,...,3)"],
        "'...' may only end",
    ),
    ("spec-unknown-generator", "mgedump", lambda t: [SAMPLES / "cnn.onnx", "-d", "#uniform(0,1)"], "unknown generator"),
    ("spec-not-a-number", "mgedump", lambda t: [SAMPLES / "cnn.onnx", "-d", "#rand(a,b)"], "expected a finite number"),
    ("spec-unclosed", "mgedump", lambda t: [SAMPLES / "cnn.onnx", "-d", "#rand(0,1"], "bad generator"),
    (
        "unknown-input-name",
        "mgedump",
        lambda t: [SAMPLES / "multi_input.onnx", "-d", "input:0:#rand(0,1);size:#const(1)"],
        "unknown input name 'size'",
    ),
    (
        "missing-input",
        "mgedump",
        lambda t: [SAMPLES / "multi_input.onnx", "-d", "len:#const(7)"],
        "no data for input(s) 'input:0'",
    ),
    (
        "duplicate-input",
        "mgedump",
        lambda t: [SAMPLES / "multi_input.onnx", "-d", "len:#const(7);len:#const(1);input:0:#rand(0,1)"],
        "given twice",
    ),
    ("rank-mismatch", "mgedump", lambda t: [SAMPLES / "cnn.onnx", "-d", "#rand(0,1,3,32,32)"], "rank 4"),
    (
        "npy-rank-mismatch",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", _npy(t / "a.npy", np.zeros((3, 32, 32), np.float32))],
        "rank 4",
    ),
    (
        "fixed-dim-mismatch",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", _npy(t / "a.npy", np.zeros((1, 3, 16, 16), np.float32))],
        "fixes dim 2 to 32",
    ),
    ("pickled-npy", "mgedump", lambda t: [SAMPLES / "cnn.onnx", "-d", _pickled(t / "p.npy")], "pickled"),
    (
        "neither-image-nor-array",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", _write(t / "notes.txt", b"just text")],
        "neither an image",
    ),
    ("missing-data-file", "mgedump", lambda t: [SAMPLES / "cnn.onnx", "-d", t / "nope.png"], "data file not found"),
    (
        "bad-pb",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", _write(t / "x.pb", b"\xff\xff\xff\xff")],
        "not a valid ONNX TensorProto",
    ),
    (
        "image-size-mismatch",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", SAMPLES / "images" / "dog.jpg"],
        "--resize-input",
    ),
    (
        "resize-with-generator",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--resize-input"],
        "--resize-input applies to image files",
    ),
    (
        "transform-with-generator",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--input-transform", "data/255"],
        "--input-transform applies to file data",
    ),
    (
        "transform-syntax-error",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", SAMPLES / "images" / "cat.png", "--input-transform", "data/"],
        "not a Python expression",
    ),
    (
        "missing-list-file",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", f"@{t / 'nope.txt'}"],
        "cannot read list file",
    ),
    ("no-data", "mgedump", lambda t: [SAMPLES / "cnn.onnx"], "no test data given"),
    ("negative-maxerr", "mgedump", lambda t: [SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--maxerr", "-1"], "--maxerr"),
    (
        "repeat-zero",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", SAMPLES / "images" / "cat.png", "--repeat", "0"],
        "--repeat must be >= 1",
    ),
    (
        "unknown-option",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--enable-everything"],
        "No such option",
    ),
    (
        "output-folder-not-writable",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", _write(t / "file", b"x") / "out.mgetest"],
        "output folder is not a folder",
    ),
    ("output-is-a-folder", "mgedump", lambda t: [SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", t], "is a folder"),
    ("corrupt-zip", "mgerun", lambda t: [_write(t / "c.mgetest", _bundle(t).read_bytes()[:-100])], "not a bundle"),
    ("not-a-zip", "mgerun", lambda t: [_write(t / "c.mgetest", b"PK\x03\x04 nothing more")], "not a bundle"),
    (
        "member-path-traversal",
        "mgerun",
        lambda t: [rewrite_bundle(_bundle(t), t / "e.mgetest", _traversal)],
        "'../x' is not a safe relative path",
    ),
    (
        "unknown-manifest-version",
        "mgerun",
        lambda t: [rewrite_bundle(_bundle(t), t / "e.mgetest", _unknown_version)],
        "format version 3 is newer",
    ),
    (
        "tampered-member",
        "mgerun",
        lambda t: [rewrite_bundle(_bundle(t), t / "e.mgetest", _tamper_output)],
        "'test_data_set_0/output_0.pb' does not match its sha256",
    ),
    (
        "unlisted-member",
        "mgerun",
        lambda t: [rewrite_bundle(_bundle(t), t / "e.mgetest", _extra_member)],
        "'extra.bin' is not listed",
    ),
    ("missing-bundle", "mgerun", lambda t: [t / "nope.mgetest"], "bundle not found"),
    ("plain-model-without-data", "mgerun", lambda t: [SAMPLES / "cnn.onnx"], "give test data with -d"),
    *[
        (
            f"plain-model-{flag}",
            "mgerun",
            lambda t, more=more: [SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", *more],
            f"--{flag} chooses among a bundle's variants; {SAMPLES / 'cnn.onnx'} is a plain model",
        )
        for flag, more in (
            ("fitting", ["--fitting"]),
            ("variant", ["--variant", "ioc16"]),
            ("config", ["--config", SAMPLES / "testcases.txt"]),
        )
    ],
    ("iter-zero", "mgerun", lambda t: [_bundle(t), "--iter", "0"], "--iter must be >= 1"),
    ("bad-iter-value", "mgerun", lambda t: [_bundle(t), "--iter", "many"], "'many' is not a valid integer"),
    (
        "embed-more-than-cases",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--embed-io-dump", "3"],
        "asks for more test cases than the 1 given",
    ),
    (
        "fp32-nodes-without-float16",
        "mgedump",
        lambda t: [SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--optimize-for-inference", "--fp32-nodes", "Conv"],
        "--fp32-nodes keeps nodes float in a float16 or int8 mode",
    ),
    ("io-dump-into-a-file", "mgerun", lambda t: [_bundle(t), "--io-dump", _write(t / "f", b"x")], "--io-dump"),
    (
        "io-dump-budget-zero",
        "mgerun",
        lambda t: [_bundle(t), "--io-dump", t / "d", "--io-dump-budget", "0"],
        "--io-dump-budget must be >= 1",
    ),
    (
        "io-dump-of-another-model",
        "mgerun",
        lambda t: [_bundle(t), "--io-dump", _other_dump(t)],
        "holds a dump of another model",
    ),
] + [
    # every deliberately bad sample model of the registry, with the spec and error it lists
    (f"sample-{m.id}", "mgedump", lambda t, m=m: [m.path, "-d", m.spec], m.error)
    for m in bad_models()
]


def _other_dump(tmp: Path) -> Path:
    """An io dump folder holding a dump of gray.onnx."""
    folder = tmp / "gray_dump"
    run_ok("mgerun", SAMPLES / "gray.onnx", "-d", "#rand(0,1)", "--iter", "1", "--io-dump", folder, "-q", "--silent")
    return folder


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _npy(path: Path, array: np.ndarray) -> Path:
    np.save(path, array)
    return path


class _Payload:
    """Unpickling this creates a marker file: if the marker exists, the pickle ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _pickled(path: Path) -> Path:
    np.save(path, np.array([_Payload(path.parent / "pwned"), None], dtype=object), allow_pickle=True)
    return path


def test_the_pickle_payload_works(tmp_path):
    """The payload the pickled-npy case carries really does run when loaded with pickles allowed."""
    np.load(_pickled(tmp_path / "p.npy"), allow_pickle=True)
    assert (tmp_path / "pwned").exists()


@pytest.mark.parametrize("case_id, prog, build, needle", CASES, ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_line(case_id, prog, build, needle, tmp_path, mgedump, mgerun):
    args = [str(a) for a in build(tmp_path)]
    existing = tmp_path / "existing.out"
    existing.write_bytes(SENTINEL)
    before = sorted(p.name for p in tmp_path.iterdir())
    if prog == "mgedump":
        if "-o" not in args:
            args += ["-o", str(existing)]
        result = mgedump(*args)
    else:
        result = mgerun(*args, "--report-json", str(existing))
    assert result.code == 2, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith(f"{prog}: error: ")
    assert needle in lines[0], lines[0]
    assert "Traceback" not in result.err + result.out
    assert existing.read_bytes() == SENTINEL
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no temporary file left behind
    assert not (tmp_path / "pwned").exists()  # no pickle ran


def test_verbose_shows_the_traceback(tmp_path, mgedump):
    result = mgedump(tmp_path / "nope.onnx", "-d", "#rand(0,1)", "-o", tmp_path / "o", "-v")
    assert result.code == 2 and "Traceback" in result.err


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_output_folder(tmp_path, mgedump):
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "out.mgetest").write_bytes(SENTINEL)
    folder.chmod(0o555)
    try:
        result = mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", folder / "out.mgetest")
    finally:
        folder.chmod(0o755)
    assert result.code == 2 and "not writable" in result.err
    assert (folder / "out.mgetest").read_bytes() == SENTINEL
