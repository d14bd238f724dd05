"""Reading a bundle: everything is checked before it is trusted, and each way a bundle can be wrong is named."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mgedump.base.errors import BundleError
from mgedump.bundle import Bundle, Manifest, Member, write_bundle
from mgedump.bundle import reader as reader_module
from tests.support import SAMPLES, rewrite_bundle


@pytest.fixture
def bundle(tmp_path, mgedump):
    out = tmp_path / "good.mgetest"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-d", "#rand(0,2)", "-o", out, "-q").code == 0
    return out


def _open(path) -> None:
    with Bundle(str(path)) as b:
        b.verified()


def test_a_good_bundle_reads(bundle):
    with Bundle(str(bundle)) as b:
        b.verified()
        x = b.tensor("test_data_set_1/input_0.pb", "data")
        assert x.shape == (1, 3, 32, 32) and x.dtype == np.float32 and x.min() >= 0 and x.max() <= 2
        assert b.manifest.test_cases[1].spec == "#rand(0,2)"


def _reorder(names, manifest, members):
    return [names[0], *reversed(names[1:])]


def _drop_member(names, manifest, members):
    return [n for n in names if n != "test_data_set_1/output_0.pb"]


def _drop_manifest(names, manifest, members):
    return names[1:]


def _manifest_last(names, manifest, members):
    return [*names[1:], names[0]]


def _duplicate(names, manifest, members):
    return [*names, names[-1]]


@pytest.mark.parametrize(
    "edit, message",
    [
        (_reorder, "members are not in the manifest's order"),
        (_drop_member, "'test_data_set_1/output_0.pb' is listed in the manifest but missing"),
        (_drop_manifest, "the first member is not mgedump.json"),
        (_manifest_last, "the first member is not mgedump.json"),
    ],
)
def test_member_order_and_presence(bundle, tmp_path, edit, message):
    bad = rewrite_bundle(bundle, tmp_path / "bad.mgetest", edit)
    with pytest.raises(BundleError, match=message.replace("(", r"\(")):
        _open(bad)


def test_a_member_twice_is_refused(bundle, tmp_path):
    with pytest.warns(UserWarning, match="Duplicate name"):
        bad = rewrite_bundle(bundle, tmp_path / "bad.mgetest", _duplicate)
    with pytest.raises(BundleError, match="appears twice"):
        _open(bad)


def test_a_compressed_member_is_refused(bundle, tmp_path):
    bad = rewrite_bundle(bundle, tmp_path / "bad.mgetest", compress=True)
    with pytest.raises(BundleError, match="is compressed; bundle members are stored"):
        _open(bad)


def test_an_oversized_manifest_is_refused_before_it_is_parsed(bundle, tmp_path, monkeypatch):
    monkeypatch.setattr(reader_module, "MAX_MANIFEST_BYTES", 100)
    with pytest.raises(BundleError, match="manifest is larger than 100 bytes"):
        _open(bundle)


@pytest.mark.parametrize(
    "text, message",
    [
        (b"{not json", "manifest is not valid JSON"),
        (b"\xff\xfe", "manifest is not valid JSON"),
        (b"[1, 2]", "manifest is malformed: expected a JSON object"),
        (b'{"format": "other"}', "manifest format is 'other'"),
    ],
)
def test_an_invalid_manifest_is_refused(bundle, tmp_path, text, message):
    def edit(names, manifest, members):
        manifest.clear()

    bad = rewrite_bundle(bundle, tmp_path / "bad.mgetest", edit)
    # rewrite_bundle writes the manifest dict; replace its bytes outright
    with zipfile.ZipFile(bad) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    members["mgedump.json"] = text
    with zipfile.ZipFile(bad, "w") as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name), data)
    with pytest.raises(BundleError, match=message):
        _open(bad)


def test_a_size_that_differs_from_the_manifest(bundle, tmp_path):
    def edit(names, manifest, members):
        members["test_data_set_0/input_0.pb"] += b"\x00"

    with pytest.raises(BundleError, match="'test_data_set_0/input_0.pb' is .* bytes, manifest says"):
        _open(rewrite_bundle(bundle, tmp_path / "bad.mgetest", edit))


MODEL_SHA = hashlib.sha256(b"model").hexdigest()  # the model member of the bundles below holds b"model"


def _large_bundle(tmp_path, payload: bytes) -> Path:
    """A bundle with one member over the size that is hashed in the background, written by the real writer."""
    path = tmp_path / "large.mgetest"
    big = tmp_path / "big.bin"
    big.write_bytes(payload)
    manifest = Manifest.from_json(_minimal_manifest())
    write_bundle(str(path), manifest, [Member("model.onnx", b"model"), Member("weights.bin", paths=(str(big),))])
    return path


def _minimal_manifest() -> dict:
    return {
        "format": "mgedump-bundle",
        "format_version": 1,
        "generator": {"name": "mgedump", "version": "0"},
        "model": {"member": "model.onnx", "sha256": MODEL_SHA, "source_sha256": "0" * 64, "external_data": None},
        "optimizations": [],
        "requirements": [],
        "inputs": [],
        "outputs": [],
        "assertion": {"enabled": False, "maxerr": 0.0, "verbose": True},
        "seed": 0,
        "data_options": {"repeat": 1, "resize_input": False, "input_transform": None},
        "test_cases": [{"dir": "test_data_set_0", "spec": "x", "origin": "-d #1", "inputs": [], "outputs": []}],
    }


def test_a_large_member_tampered_with_is_caught_by_the_background_hash(tmp_path, monkeypatch):
    monkeypatch.setattr(reader_module, "DEFER_HASH_BYTES", 1000)
    path = _large_bundle(tmp_path, bytes(range(256)) * 64)
    with Bundle(str(path)) as b:  # the large member is still being hashed
        b.verified()
    data = bytearray(path.read_bytes())
    offset = data.index(bytes(range(256)) * 4) + 100
    data[offset] ^= 0xFF  # same size, other bytes
    path.write_bytes(bytes(data))
    b = Bundle(str(path))  # opening does not wait for the large member's hash...
    try:
        with pytest.raises(BundleError, match="'weights.bin' .*tampered"):
            b.verified()  # ...verified() does
    finally:
        b.close()


def test_a_tensor_member_must_hold_the_tensor_it_is_for(bundle):
    with Bundle(str(bundle)) as b, pytest.raises(BundleError, match="holds tensor 'data', expected 'other'"):
        b.tensor("test_data_set_0/input_0.pb", "other")


def test_extract_copies_the_member_bytes(bundle, tmp_path):
    folder = tmp_path / "x"
    folder.mkdir()
    with Bundle(str(bundle)) as b:
        path = b.extract("model.onnx", str(folder))
    assert Path(path).read_bytes() == (SAMPLES / "cnn.onnx").read_bytes()


def test_the_large_members_hash_starts_before_the_small_members_are_checked(tmp_path, monkeypatch):
    """The weights' hash, the longest, runs beside the small members' hashes, not after them."""
    monkeypatch.setattr(reader_module, "DEFER_HASH_BYTES", 1000)
    path = _large_bundle(tmp_path, bytes(range(256)) * 64)
    started = []
    check = Bundle._check_hash
    monkeypatch.setattr(
        Bundle,
        "_check_hash",
        lambda self, zf, entry: started.append(self._pending is not None) or check(self, zf, entry),
    )
    with Bundle(str(path)) as b:
        b.verified()
    assert started == [True]  # model.onnx, checked with the weights' hash under way
