"""Fuzzing the bundle reader through mgerun: a mutated or truncated bundle exits 0, 1 or 2, never with a traceback.

Three kinds of damage: raw bytes anywhere in the file (zip headers, the
manifest, members), any value of the manifest replaced by any JSON value
(members' hashes left valid, so the reader gets past them), and bytes of a
tensor member changed with its hash fixed (so the tensor decoder and the
comparison see them). The runs are derandomized: the same examples every time.
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

from tests import crafted
from tests.data.test_readers_fuzz import mutated
from tests.support import SAMPLES, run_ok

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


def _verify(data: bytes, capfd) -> tuple[int, str]:
    """Run mgerun on these bytes as a bundle; check how it ends; return the exit code and what it printed."""
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
        assert os.listdir(folder) == ["b.mgetest"]  # nothing left beside the bundle
    assert "Traceback" not in out + err
    assert code in (0, 1, 2), (code, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("mgerun: error: "), err
    return code, out


def test_the_good_bundle_passes(good, capfd):
    code, out = _verify(good.read_bytes(), capfd)
    assert code == 0 and "test case 1  " in out and "FAILED" not in out


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


def test_manifest_values_replaced_or_removed(raw, good, capfd):
    members = crafted.read_members(good)
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
        with tempfile.TemporaryDirectory() as folder:
            bundle = crafted.zip_members(
                Path(folder) / "m.mgetest", {**members, "mgedump.json": json.dumps(edited).encode()}
            )
            data = bundle.read_bytes()
        _verify(data, capfd)

    check()


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
