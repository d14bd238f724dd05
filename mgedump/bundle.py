"""The mgedump bundle format, version 1. This docstring is its specification.

A bundle is a ZIP archive whose members are all stored (uncompressed), in this
order::

    mgedump.json                    the manifest (UTF-8 JSON object)
    model.onnx                      the model as it will run
    model.onnx.data                 only when the model keeps weights outside
    test_data_set_0/input_0.pb      one ONNX TensorProto per model input
    test_data_set_0/output_0.pb     expected outputs (absent when assertions are off)
    test_data_set_1/...

Unzipped, it is the ONNX model-zoo test layout: ``model.onnx`` beside
``test_data_set_N/{input,output}_K.pb``, numbered from 0 with no gaps, inputs in
model input order and each TensorProto named after its graph input or output.

Member names MUST be relative, use ``/``, and contain no ``..``, no ``\\`` and
no empty component. Every member MUST be listed, in archive order, in the
manifest's ``members`` with its size and sha256; a reader MUST refuse a bundle
with a member it does not list, a listed member it lacks, or any hash that does
not match. Timestamps are fixed (1980-01-01 00:00) and no host path or clock
time is recorded, so the same input gives the same bytes.

Manifest keys (all REQUIRED unless marked):

``format``: ``"mgedump-bundle"``.
``format_version``: ``1``. A reader MUST refuse other versions; this version is
    independent of the package version.
``generator``: ``{"name": "mgedump", "version": str}``.
``model``: ``{"member": "model.onnx", "sha256": str, "source_sha256": str,
    "external_data": str or null}``: the bundled model, the hash of the model
    file it was made from, and the member holding external data, if any.
``optimizations``: list of str, the rewrites applied (empty: the model as given).
``requirements``: list of str, what the bundled model needs at run time beyond
    a standard ONNX runtime (e.g. ``"onnxruntime"``, ``"x86-avx2"``).
``inputs``, ``outputs``: lists of ``{"name": str, "dtype": str, "shape": list
    or null}``; dims are ints, str (symbolic) or null.
``assertion``: ``{"enabled": bool, "maxerr": float, "verbose": bool}``.
``seed``: int, the seed of the data generators.
``data_options``: ``{"repeat": int, "resize_input": bool, "input_transform": str
    or null}``, as given to the packer (recorded, never evaluated by a reader).
``test_cases``: list of ``{"dir": str, "spec": str, "origin": str,
    "inputs": [member, ...], "outputs": [member, ...]}``.
``members``: list of ``{"name": str, "size": int, "sha256": str}`` for every
    member after the manifest.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import threading
from concurrent.futures import Future, ThreadPoolExecutor
import zipfile
import zlib
from dataclasses import dataclass
from typing import IO, Any, Sequence

import numpy as np

from .errors import BundleError
from .fileio import CHUNK, FileDigest, atomic_output, hash_files
from .zipwrite import StoredZipWriter, copy_range

FORMAT = "mgedump-bundle"
FORMAT_VERSION = 1
MANIFEST = "mgedump.json"
MODEL_MEMBER = "model.onnx"
MAX_MANIFEST_BYTES = 16 << 20
DEFER_HASH_BYTES = 16 << 20


@dataclass(frozen=True)
class Member:
    """A member to write: bytes in memory, or files' bytes streamed from disk.

    ``digest`` may carry the files' hash when it was computed beforehand.
    """

    name: str
    data: bytes | None = None
    paths: tuple[str, ...] = ()
    digest: FileDigest | None = None

    def hashed(self) -> FileDigest:
        if self.data is not None:
            return FileDigest(hashlib.sha256(self.data).hexdigest(), len(self.data), zlib.crc32(self.data))
        return self.digest or hash_files(self.paths)


def tensor_bytes(array: np.ndarray, name: str) -> bytes:
    """Serialize an array as an ONNX TensorProto named ``name``."""
    from .tensorproto import encode

    return encode(array, name)


def write_bundle(path: str, manifest: dict[str, Any], members: Sequence[Member]) -> dict[str, Any]:
    """Write a bundle atomically: the manifest (with member hashes), then the members.

    Args:
        path: the bundle file to create or replace.
        manifest: every manifest key but ``members``.
        members: the members after the manifest, in order.

    Returns:
        The manifest as written.

    Raises:
        OutputError: the file cannot be written.
    """
    digests = []
    for member in members:
        check_member_name(member.name)
        digests.append(member.hashed())
    listed = [{"name": m.name, "size": d.size, "sha256": d.sha256} for m, d in zip(members, digests)]
    manifest = dict(manifest, members=listed)
    manifest_bytes = (json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=True, allow_nan=False) + "\n").encode()
    with atomic_output(path) as f:
        writer = StoredZipWriter(f)
        writer.add_bytes(MANIFEST, manifest_bytes)
        for member, digest in zip(members, digests):
            if member.data is not None:
                writer.add_bytes(member.name, member.data)
            else:
                writer.add_files(member.name, member.paths, digest.size, digest.crc32)
        writer.close()
    return manifest


# ---------------------------------------------------------------- reading


def check_member_name(name: str) -> None:
    """Refuse absolute, backslashed, empty-component or ``..`` member names."""
    parts = name.split("/")
    if (
        not name
        or name.startswith("/")
        or "\\" in name
        or "\x00" in name
        or (len(name) > 1 and name[1] == ":")
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise BundleError(f"bundle member name {name!r} is not a safe relative path")


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise BundleError(f"bundle manifest is malformed: {what}")


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _check_tensor_infos(value: Any, key: str) -> None:
    _require(isinstance(value, list), f"{key!r} must be a list")
    for entry in value:
        _require(isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("dtype"), str), f"bad entry in {key!r}")
        shape = entry.get("shape")
        _require(shape is None or (isinstance(shape, list) and all(d is None or isinstance(d, (int, str)) for d in shape)), f"bad shape in {key!r}")


def validate_manifest(manifest: Any) -> None:
    """Check the manifest's version, keys and types (format version 1).

    Raises:
        BundleError: with what is wrong.
    """
    _require(isinstance(manifest, dict), "not a JSON object")
    if manifest.get("format") != FORMAT:
        raise BundleError(f"not an mgedump bundle: manifest format is {manifest.get('format')!r}, expected {FORMAT!r}")
    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise BundleError(f"bundle manifest has no valid format_version ({version!r})")
    if version > FORMAT_VERSION:
        raise BundleError(
            f"bundle format version {version} is newer than this mgedump reads (up to {FORMAT_VERSION})",
            hint="upgrade mgedump",
        )
    if version != FORMAT_VERSION:
        raise BundleError(f"unknown bundle format version {version} (this mgedump reads version {FORMAT_VERSION})")
    model = manifest.get("model")
    _require(isinstance(model, dict) and isinstance(model.get("member"), str) and isinstance(model.get("sha256"), str), "'model' must name a member and its sha256")
    _require(model.get("external_data") is None or isinstance(model.get("external_data"), str), "'model.external_data' must be a member name or null")
    _require(_is_str_list(manifest.get("optimizations")), "'optimizations' must be a list of strings")
    _require(_is_str_list(manifest.get("requirements")), "'requirements' must be a list of strings")
    _check_tensor_infos(manifest.get("inputs"), "inputs")
    _check_tensor_infos(manifest.get("outputs"), "outputs")
    assertion = manifest.get("assertion")
    _require(isinstance(assertion, dict), "'assertion' must be an object")
    _require(isinstance(assertion.get("enabled"), bool) and isinstance(assertion.get("verbose"), bool), "'assertion.enabled' and 'assertion.verbose' must be true or false")
    maxerr = assertion.get("maxerr")
    _require(isinstance(maxerr, (int, float)) and not isinstance(maxerr, bool) and math.isfinite(maxerr) and maxerr >= 0, "'assertion.maxerr' must be a number >= 0")
    cases = manifest.get("test_cases")
    _require(isinstance(cases, list) and cases, "'test_cases' must be a non-empty list")
    n_in, n_out = len(manifest["inputs"]), len(manifest["outputs"])
    for case in cases:
        _require(isinstance(case, dict) and isinstance(case.get("spec"), str), "each test case needs a 'spec'")
        _require(_is_str_list(case.get("inputs")) and len(case["inputs"]) == n_in, "each test case needs one input member per model input")
        outputs = case.get("outputs")
        _require(_is_str_list(outputs) and len(outputs) == (n_out if assertion["enabled"] else 0), "each test case needs one output member per model output when assertions are on, none when off")
    members = manifest.get("members")
    _require(isinstance(members, list), "'members' must be a list")
    for entry in members:
        _require(
            isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("sha256"), str)
            and isinstance(entry.get("size"), int) and entry["size"] >= 0,
            "each member needs a name, size and sha256",
        )
        check_member_name(entry["name"])
    listed = {entry["name"] for entry in members}
    _require(len(listed) == len(members), "a member is listed twice")
    referenced = [model["member"]] + ([model["external_data"]] if model.get("external_data") else [])
    for case in cases:
        referenced += case["inputs"] + case["outputs"]
    for name in referenced:
        if name not in listed:
            raise BundleError(f"bundle manifest refers to member {name!r}, which it does not list")


class Bundle:
    """A bundle opened for reading, its structure and every member hash checked.

    Members up to ``DEFER_HASH_BYTES`` are checked on opening; larger ones in a
    background thread, and :meth:`verified` waits for that (call it before
    trusting any result). Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._cancel = threading.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None
        if not os.path.exists(path):
            raise BundleError(f"bundle not found: {path}")
        if not os.path.isfile(path):
            raise BundleError(f"bundle path is not a file: {path}")
        try:
            self._zip = zipfile.ZipFile(path, "r")
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as exc:
            raise BundleError(f"{path}: not a bundle (corrupt or not a zip archive: {exc})") from None
        try:
            self.manifest = self._check()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "Bundle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._cancel.set()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._zip.close()

    def _check(self) -> dict[str, Any]:
        infos = self._zip.infolist()
        names = [info.filename for info in infos]
        for name in names:
            check_member_name(name)
        if len(set(names)) != len(names):
            raise BundleError(f"{self.path}: a member name appears twice in the archive")
        if not names or names[0] != MANIFEST:
            raise BundleError(f"{self.path}: not an mgedump bundle (the first member is not {MANIFEST})")
        for info in infos:
            if info.compress_type != zipfile.ZIP_STORED:
                raise BundleError(f"{self.path}: member {info.filename!r} is compressed; bundle members are stored")
        if infos[0].file_size > MAX_MANIFEST_BYTES:
            raise BundleError(f"{self.path}: manifest is larger than {MAX_MANIFEST_BYTES} bytes")
        try:
            manifest = json.loads(self._read(MANIFEST).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BundleError(f"{self.path}: manifest is not valid JSON ({exc})") from None
        validate_manifest(manifest)
        listed = [entry["name"] for entry in manifest["members"]]
        if listed != names[1:]:
            extra = [n for n in names[1:] if n not in listed]
            missing = [n for n in listed if n not in names]
            if extra:
                raise BundleError(f"{self.path}: member {extra[0]!r} is not listed in the manifest")
            if missing:
                raise BundleError(f"{self.path}: member {missing[0]!r} is listed in the manifest but missing")
            raise BundleError(f"{self.path}: members are not in the manifest's order")
        large = []
        for entry, info in zip(manifest["members"], infos[1:]):
            if info.file_size != entry["size"]:
                raise BundleError(f"{self.path}: member {entry['name']!r} is {info.file_size} bytes, manifest says {entry['size']}")
            if info.file_size > DEFER_HASH_BYTES:
                large.append(entry)
            else:
                self._check_hash(self._zip, entry)
        if large:
            # Large members (the weights) are hashed in a thread while the caller loads the model.
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="mgerun-hash")
            self._pending = self._pool.submit(self._check_large, large)
        return manifest

    def _check_hash(self, zf: zipfile.ZipFile, entry: dict[str, Any]) -> None:
        digest = hashlib.sha256()
        try:
            with zf.open(entry["name"]) as f:
                while (chunk := f.read(CHUNK)) and not self._cancel.is_set():
                    digest.update(chunk)
        except (zipfile.BadZipFile, OSError, KeyError) as exc:
            raise BundleError(f"{self.path}: member {entry['name']!r} is corrupt or tampered with ({exc})") from None
        if not self._cancel.is_set() and digest.hexdigest() != entry["sha256"]:
            raise BundleError(f"{self.path}: member {entry['name']!r} does not match its sha256 in the manifest (tampered or corrupt)")

    def _check_large(self, entries: list[dict[str, Any]]) -> None:
        with zipfile.ZipFile(self.path) as zf:
            for entry in entries:
                self._check_hash(zf, entry)

    def verified(self) -> None:
        """Wait for the hashes of large members, checked in the background.

        Raises:
            BundleError: a member does not match its hash.
        """
        if self._pending is not None:
            self._pending.result()

    def _open(self, name: str) -> IO[bytes]:
        try:
            return self._zip.open(name)
        except (zipfile.BadZipFile, OSError, KeyError) as exc:
            raise BundleError(f"{self.path}: cannot read member {name!r} ({exc})") from None

    def _read(self, name: str) -> bytes:
        try:
            with self._open(name) as f:
                return f.read()
        except (zipfile.BadZipFile, OSError) as exc:
            raise BundleError(f"{self.path}: cannot read member {name!r} ({exc})") from None

    def read(self, name: str) -> bytes:
        """A member's bytes."""
        return self._read(name)

    def extract(self, name: str, folder: str) -> str:
        """Copy one member into folder (under its base name), in the kernel; return the path.

        Members are stored, so their bytes are one range of the bundle file.
        """
        info = self._zip.getinfo(name)
        target = os.path.join(folder, os.path.basename(name))
        with open(self.path, "rb", buffering=0) as src, open(target, "wb") as dst:
            header = os.pread(src.fileno(), 30, info.header_offset)
            if len(header) != 30 or header[:4] != b"PK\x03\x04":
                raise BundleError(f"{self.path}: member {name!r} has no valid local header")
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            os.lseek(src.fileno(), info.header_offset + 30 + name_len + extra_len, os.SEEK_SET)
            copied = copy_range(src.fileno(), dst.fileno(), info.file_size)
        if copied != info.file_size:
            raise BundleError(f"{self.path}: member {name!r} is truncated")
        return target

    def tensor(self, name: str, expect_name: str) -> np.ndarray:
        """Read a TensorProto member; its name must be expect_name or empty."""
        from .tensorproto import decode

        try:
            array, tensor_name = decode(self._read(name))
        except ValueError as exc:
            raise BundleError(f"{self.path}: member {name!r} is not a valid TensorProto ({exc})") from None
        if tensor_name and tensor_name != expect_name:
            raise BundleError(f"{self.path}: member {name!r} holds tensor {tensor_name!r}, expected {expect_name!r}")
        return array
