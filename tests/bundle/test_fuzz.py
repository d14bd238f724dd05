"""Fuzzing the bundle reader through mgerun: a mutated or truncated bundle exits 0, 1 or 2, never with a traceback.

Three kinds of damage: raw bytes anywhere in the file (zip headers, the
manifest, members), any value of the manifest replaced by any JSON value
(members' hashes left valid, so the reader gets past them), and bytes of a
tensor member changed with its hash fixed (so the tensor decoder and the
comparison see them). A manifest value the published schema refuses is named
in the one line mgerun prints (``this bundle's manifest is malformed: FIELD:
...``), in bundles of one model and of several variants; crafted fields
(an environment whose ``cpu`` is a list, flags holding objects or null, an
origin that is a number, an object, null or nested hundreds deep) are rows of
a table. The runs are derandomized: the same examples every time.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mgedump.base.log import printable
from mgedump.base.schema import first_problem, path_text
from mgedump.bundle.format import reader_schema
from tests import crafted
from tests.data.test_readers_fuzz import mutated
from tests.support import SAMPLES, pack_two_variants, run_ok

MALFORMED = "mgerun: error: this bundle's manifest is malformed: "

FUZZ = settings(
    max_examples=80,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    """Two test cases of cnn.onnx, with an embedded io dump (every kind of member a bundle has)."""
    out = tmp_path_factory.mktemp("fuzz") / "good.mgetest"
    run_ok("mgedump", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-d", "#rand(0,2)", "--embed-io-dump", "-o", out, "-q")
    return out


_last_err = [""]  # what the last _verify printed on stderr


def _verify(data: bytes, capfd, runs: int = 1) -> tuple[int, str]:
    """Run mgerun on these bytes as a bundle; check how it ends; return the exit code and what it printed.

    Args:
        runs: how many runs the bundle makes (a bundle of several variants runs each, and a manifest that is well
            formed but does not fit its members is refused by each run, in the same words).
    """
    from mgedump.cli import mgerun_main

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "b.mgetest")
        with open(path, "wb") as f:
            f.write(data)
        capfd.readouterr()
        try:
            mgerun_main([path, "--iter", "1", "--warmup-iter", "0", "--silent"])
            code = 0
        except SystemExit as exc:
            code = exc.code
        out, err = capfd.readouterr()
        _last_err[0] = err
        assert os.listdir(folder) == ["b.mgetest"]  # nothing left beside the bundle
    assert "Traceback" not in out + err
    assert code in (0, 1, 2), (code, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert 1 <= len(lines) <= runs and len(set(lines)) == 1 and lines[0].startswith("mgerun: error: "), err
    return code, out


def test_the_good_bundle_passes(good, capfd):
    code, out = _verify(good.read_bytes(), capfd)
    assert code == 0 and "test case 1  " in out and "FAILED" not in out


@pytest.fixture(scope="module")
def several(tmp_path_factory) -> Path:
    """A bundle of two variants (format version 2)."""
    out = tmp_path_factory.mktemp("fuzz2") / "several.mgetest"
    pack_two_variants(out)
    return out


@pytest.fixture(scope="module")
def raw(good) -> bytes:
    return good.read_bytes()


def test_byte_mutations_and_truncations(raw, capfd):
    @FUZZ
    @given(mutated(raw))
    def check(data):
        _verify(data, capfd)

    check()


def _paths(value, prefix=()):
    """Every path into a JSON value (keys and list indexes), the value's own path first."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["model.onnx", "test_data_set_0/input_0.pb", "../x", "", "float16", "data", "prob"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)


def _with_manifest(members: dict[str, bytes], manifest_text: bytes) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        bundle = crafted.zip_members(Path(folder) / "m.mgetest", {**members, "mgedump.json": manifest_text})
        return bundle.read_bytes()


def _named_when_malformed(edited: dict, code: int, err: str) -> None:
    """A manifest the schema refuses (its format and version intact) is refused naming the first field wrong."""
    if edited.get("format") != "mgedump-bundle" or edited.get("format_version") not in (1, 2):
        return
    found = first_problem(reader_schema(), edited)
    if found is not None:  # refused once, before any run, naming the field (a type's grammar may say more)
        named = MALFORMED + printable(path_text(found.path)) + ": "
        assert code == 2 and err.strip().startswith(named) and len(err.strip().splitlines()) == 1, (str(found), err)


@pytest.mark.parametrize("bundle_name", ["good", "several"])
def test_manifest_values_replaced_or_removed(bundle_name, request, capfd):
    members = crafted.read_members(request.getfixturevalue(bundle_name))
    manifest = json.loads(members["mgedump.json"])
    paths = [p for p in _paths(manifest) if p]

    @FUZZ
    @given(st.sampled_from(paths), st.one_of(st.just("delete"), JSON))
    def check(path, value):
        edited = json.loads(members["mgedump.json"])
        parent = edited
        for key in path[:-1]:
            parent = parent[key]
        if value == "delete":
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
        capfd.readouterr()
        code, _ = _verify(
            _with_manifest(members, json.dumps(edited).encode()), capfd, len(manifest.get("variants", [0]))
        )
        _named_when_malformed(edited, code, _last_err[0])

    check()


def _nested(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = {"a": [value]}
    return value


def _set(*path):
    def edit(value):
        def apply(manifest):
            parent = manifest
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = value

        return apply

    return edit


# (bundle, edit of the manifest, the field mgerun names)
CRAFTED = [
    ("good", _set("environment", "cpu")(["x86_64", "avx2"]), "environment.cpu: expected an object, got a list"),
    ("good", _set("environment", "cpu")("AMD EPYC"), "environment.cpu: expected an object, got a string"),
    ("good", _set("environment", "cpu", "flags")([{"avx2": True}]), "environment.cpu.flags[0]: expected a string"),
    ("good", _set("environment", "cpu", "flags")([None]), "environment.cpu.flags[0]: expected a string, got null"),
    ("good", _set("environment", "cpu", "flags")({"avx2": 1}), "environment.cpu.flags: expected a list or null"),
    ("good", _set("environment", "cpu", "arch")(["x86_64"]), "environment.cpu.arch: expected a string or null"),
    ("good", _set("environment", "os")(None), "environment.os: expected an object, got null"),
    ("good", _set("environment", "onnxruntime")(1.17), "environment.onnxruntime: expected a string or null"),
    ("good", _set("environment", "numpy")({"major": 2}), "environment.numpy: expected a string or null"),
    ("good", _set("environment")([]), "environment: expected an object, got a list"),
    ("good", _set("test_cases", 0, "origin")(3), "test_cases[0].origin: expected a string, got a number"),
    ("good", _set("test_cases", 0, "origin")({"file": "x"}), "test_cases[0].origin: expected a string, got an object"),
    ("good", _set("test_cases", 0, "origin")(None), "test_cases[0].origin: expected a string, got null"),
    ("good", _set("test_cases", 0, "origin")(_nested(400)), "test_cases[0].origin: expected a string, got an object"),
    ("good", _set("test_cases", 0, "spec")(["#rand(0,1)"]), "test_cases[0].spec: expected a string, got a list"),
    ("good", _set("test_cases", 1, "dir")("../up"), "test_cases[1].dir"),
    ("good", _set("generator")("mgedump 0.1"), "generator: expected an object"),
    ("good", _set("data_options", "repeat")(0), "data_options.repeat: expected a number >= 1"),
    ("good", _set("data_options", "input_transform")(["data/255"]), "data_options.input_transform: expected a string"),
    ("good", _set("io_dump", "test_cases")([True]), "io_dump.test_cases[0]: expected a whole number"),
    ("good", _set("assertion", "output_maxerr")({"prob": "1e-3"}), "assertion.output_maxerr.prob: expected a number"),
    ("good", _set("assertion", "error_stat")("worst"), "assertion.error_stat: expected one of"),
    ("good", _set("outputs", 0, "shape")([1, -10]), "outputs[0].shape[1]"),
    ("good", _set("target_runtime")({"onnxruntime": 1.17, "converted": []}), "target_runtime.onnxruntime"),
    ("several", _set("variants", 1, "certified", "prob")("4e-5"), "variants[1].certified.prob"),
    ("several", _set("variants", 1, "options")(_nested(300)), "variants[1].options.a"),
    ("several", _set("variants", 1, "float16", "kept_float32")(None), "variants[1].float16.kept_float32"),
    ("several", _set("variants", 0, "name")("FP32"), "variants[0].name"),
    ("several", _set("variants", 0, "model")(None), "variants[0].model: expected an object, got null"),
    ("several", _set("variants")([]), "variants: expected a list that is not empty"),
    ("several", _set("left_out")([{"name": 8, "reason": "x"}]), "left_out[0].name: expected a string"),
    ("several", _set("optimizations")([]), "optimizations: not allowed here"),
    ("several", _set("model", "source_sha256")(None), "model.source_sha256: expected a string, got null"),
]


@pytest.mark.parametrize(("bundle_name", "edit", "named"), CRAFTED, ids=[c[2].split(":")[0] for c in CRAFTED])
def test_a_crafted_manifest_field_is_named_in_one_line(bundle_name, edit, named, request, capfd):
    members = crafted.read_members(request.getfixturevalue(bundle_name))
    manifest = json.loads(members["mgedump.json"])
    edit(manifest)
    code, _ = _verify(_with_manifest(members, json.dumps(manifest).encode()), capfd)
    assert code == 2 and _last_err[0].strip().startswith(MALFORMED + named), _last_err[0]


def test_a_crafted_manifest_field_through_mgediff(good, tmp_path, mgediff):
    members = crafted.read_members(good)
    manifest = json.loads(members["mgedump.json"])
    manifest["environment"]["cpu"] = [1, 2]
    (tmp_path / "b.mgetest").write_bytes(_with_manifest(members, json.dumps(manifest).encode()))
    result = mgediff(tmp_path / "b.mgetest", SAMPLES / "cnn.onnx")
    assert result.code == 2 and "Traceback" not in result.err
    assert result.err.strip() == "mgediff: error: " + MALFORMED.split(": error: ")[1] + (
        "environment.cpu: expected an object, got a list"
    )


def test_tensor_members_changed_with_their_hash_fixed(good, capfd):
    """A test case's tensor, and maybe one of the embedded io dump (read when a test case fails)."""
    members = crafted.read_members(good)
    cases = sorted(name for name in members if name.startswith("test_data_set_"))
    dumped = sorted(name for name in members if name.startswith("io_dump/") and name.endswith(".pb"))

    @FUZZ
    @given(st.sampled_from(cases), st.none() | st.sampled_from(dumped), st.data())
    def check(name, dump_name, data):
        manifest = json.loads(members["mgedump.json"])
        edited = dict(members)
        for target in filter(None, (name, dump_name)):
            payload = data.draw(mutated(members[target]))
            edited[target] = payload
            for entry in manifest["members"]:
                if entry["name"] == target:
                    entry["sha256"], entry["size"] = hashlib.sha256(payload).hexdigest(), len(payload)
        edited["mgedump.json"] = json.dumps(manifest).encode()
        with tempfile.TemporaryDirectory() as folder:
            bundle_bytes = crafted.zip_members(Path(folder) / "t.mgetest", edited).read_bytes()
        _verify(bundle_bytes, capfd)

    check()
