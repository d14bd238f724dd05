"""Writing a bundle: the manifest lists every member with its size and hash, in archive order, and the bytes
depend on nothing but the inputs."""

from __future__ import annotations

import hashlib
import zipfile

import pytest

from mgedump.base.bounds import Bounds
from mgedump.base.errors import BundleError
from mgedump.bundle import AssertionEntry, Manifest, Member, ModelEntry, write_bundle


def _write(path, members) -> Manifest:
    manifest = Manifest(
        model=ModelEntry(sha256="0" * 64, source_sha256="0" * 64),
        inputs=[],
        outputs=[],
        assertion=AssertionEntry(enabled=False, bounds=Bounds(maxerr=0.0), verbose=True),
        test_cases=[],
    )
    return write_bundle(str(path), manifest, members)


def test_members_are_listed_in_order_with_their_hashes(tmp_path):
    data = tmp_path / "data.bin"
    data.write_bytes(b"weights" * 1000)
    manifest = _write(
        tmp_path / "b.zip", [Member("model.onnx", b"model"), Member("model.onnx.data", paths=(str(data),))]
    )
    assert [m["name"] for m in manifest.members] == ["model.onnx", "model.onnx.data"]
    with zipfile.ZipFile(tmp_path / "b.zip") as zf:
        assert zf.namelist() == ["mgedump.json", "model.onnx", "model.onnx.data"]
        for entry in manifest.members:
            payload = zf.read(entry["name"])
            assert entry["size"] == len(payload) and entry["sha256"] == hashlib.sha256(payload).hexdigest()
        assert all(
            i.compress_type == zipfile.ZIP_STORED and i.date_time == (1980, 1, 1, 0, 0, 0) for i in zf.infolist()
        )


def test_same_members_same_bytes(tmp_path):
    members = [Member("model.onnx", b"model"), Member("test_data_set_0/input_0.pb", b"\x08\x01")]
    _write(tmp_path / "a.zip", members)
    _write(tmp_path / "b.zip", members)
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()


def test_an_unsafe_member_name_writes_nothing(tmp_path):
    target = tmp_path / "b.zip"
    target.write_bytes(b"old")
    with pytest.raises(BundleError, match="not a safe relative path"):
        _write(target, [Member("../escape", b"x")])
    assert target.read_bytes() == b"old"
