"""Read a bundle: check its structure, manifest and every member's hash before anything is trusted."""

from __future__ import annotations

import collections
import hashlib
import json
import os
import struct
import threading
import zipfile
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import IO, Any, cast

import numpy as np

from ..base.errors import BundleError
from ..base.fileio import CHUNK
from .format import MANIFEST, MAX_MANIFEST_BYTES, check_member_name, validate_manifest
from .manifest import Manifest
from .tensorproto import decode
from .valueproto import decode_value
from .zipwrite import copy_range

DEFER_HASH_BYTES = 16 << 20
# what reading a damaged or crafted archive raises, from zipfile, zlib and the file system
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    OSError,
    EOFError,
    KeyError,
    ValueError,
    NotImplementedError,
    RuntimeError,
    zlib.error,
    struct.error,
)


class Bundle(AbstractContextManager["Bundle"]):
    """A bundle opened for reading, its structure and every member hash checked.

    Members up to ``DEFER_HASH_BYTES`` are checked on opening; larger ones in a
    background thread, and :meth:`verified` waits for that (call it before
    trusting any result). Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._cancel = threading.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None
        if not os.path.exists(path):
            raise BundleError(f"bundle not found: {path}")
        if not os.path.isfile(path):
            raise BundleError(f"bundle path is not a file: {path}")
        try:
            self._zip = zipfile.ZipFile(path, "r")
        except _ZIP_ERRORS as exc:
            raise BundleError(f"{path}: not a bundle (corrupt or not a zip archive: {exc})") from None
        try:
            self.document = self._check()
            self.manifest = Manifest.from_json(self.document)
        except BaseException:
            self.close()
            raise

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
            twice = sorted(name for name, count in collections.Counter(names).items() if count > 1)
            raise BundleError(f"{self.path}: member {twice[0]!r} appears twice in the archive")
        _check_layout(self.path, names)
        if not names or names[0] != MANIFEST:
            raise BundleError(f"{self.path}: not an mgedump bundle (the first member is not {MANIFEST})")
        for info in infos:
            if info.compress_type != zipfile.ZIP_STORED:
                raise BundleError(f"{self.path}: member {info.filename!r} is compressed; bundle members are stored")
        if infos[0].file_size > MAX_MANIFEST_BYTES:
            raise BundleError(f"{self.path}: manifest is larger than {MAX_MANIFEST_BYTES} bytes")
        try:
            manifest = json.loads(self._read(MANIFEST).decode("utf-8"))
        except RecursionError:
            raise BundleError(f"{self.path}: manifest is not valid JSON (nested too deep)") from None
        except ValueError as exc:  # JSON errors, undecodable text, integers too long to read
            reason = "a number with thousands of digits" if "integer string conversion" in str(exc) else str(exc)
            raise BundleError(f"{self.path}: manifest is not valid JSON ({reason})") from None
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
        large: list[dict[str, Any]] = []
        small: list[dict[str, Any]] = []
        archive_size = os.path.getsize(self.path)
        for entry, info in zip(manifest["members"], infos[1:], strict=True):
            if info.header_offset + info.compress_size > archive_size:
                raise BundleError(
                    f"{self.path}: member {entry['name']!r} runs past the end of the file (truncated or crafted)"
                )
            if info.file_size != entry["size"]:
                raise BundleError(
                    f"{self.path}: member {entry['name']!r} is {info.file_size} bytes, manifest says {entry['size']}"
                )
            (large if info.file_size > DEFER_HASH_BYTES else small).append(entry)
        if large:
            # Large members (the weights) are hashed in a thread, from now on: beside the small members' hashes
            # and while the caller loads the model, which reads them too (docs/bundle.md, "What a reader checks").
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="mgerun-hash")
            self._pending = self._pool.submit(self._check_large, large)
        for entry in small:
            self._check_hash(self._zip, entry)
        return cast("dict[str, Any]", manifest)

    def _check_hash(self, zf: zipfile.ZipFile, entry: dict[str, Any]) -> None:
        digest = hashlib.sha256()
        try:
            with zf.open(entry["name"]) as f:
                while (chunk := f.read(CHUNK)) and not self._cancel.is_set():
                    digest.update(chunk)
        except _ZIP_ERRORS as exc:
            raise BundleError(f"{self.path}: member {entry['name']!r} is corrupt or tampered with ({exc})") from None
        if not self._cancel.is_set() and digest.hexdigest() != entry["sha256"]:
            raise BundleError(
                f"{self.path}: member {entry['name']!r} does not match its sha256 in the manifest (tampered or corrupt)"
            )

    def _check_large(self, entries: list[dict[str, Any]]) -> None:
        """Hash the large members straight from their range of the bundle file, into one reused buffer (no CRC-32
        beside the sha256, which zipfile computes as it reads, and no new bytes object a chunk; a memory map would
        count the whole member in the process's resident memory)."""
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        for entry in entries:
            start, size = self.span(entry["name"])
            digest = hashlib.sha256()
            try:
                with open(self.path, "rb", buffering=0) as f:
                    f.seek(start)
                    left = size
                    while left and not self._cancel.is_set():
                        got = f.readinto(view[: min(CHUNK, left)])
                        if not got:
                            raise BundleError(f"{self.path}: member {entry['name']!r} is truncated")
                        digest.update(view[:got])
                        left -= got
            except OSError as exc:
                raise BundleError(f"{self.path}: member {entry['name']!r} cannot be read ({exc})") from None
            if self._cancel.is_set():
                return
            if digest.hexdigest() != entry["sha256"]:
                raise BundleError(
                    f"{self.path}: member {entry['name']!r} does not match its sha256 in the manifest (tampered or "
                    "corrupt)"
                )

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
        except _ZIP_ERRORS as exc:
            raise BundleError(f"{self.path}: cannot read member {name!r} ({exc})") from None

    def _read(self, name: str) -> bytes:
        try:
            with self._open(name) as f:
                return f.read()
        except _ZIP_ERRORS as exc:
            raise BundleError(f"{self.path}: cannot read member {name!r} ({exc})") from None

    def read(self, name: str) -> bytes:
        """A member's bytes."""
        return self._read(name)

    def span(self, name: str) -> tuple[int, int]:
        """Where a member's bytes lie in the bundle file: (offset, size). Members are stored, so their bytes are
        one range of the file, after the member's local header.

        Raises:
            BundleError: the member has no valid local header, or runs past the end of the file.
        """
        info = self._zip.getinfo(name)
        with open(self.path, "rb", buffering=0) as src:
            header = os.pread(src.fileno(), 30, info.header_offset)
            if len(header) != 30 or header[:4] != b"PK\x03\x04":
                raise BundleError(f"{self.path}: member {name!r} has no valid local header")
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            start = info.header_offset + 30 + name_len + extra_len
            if start + info.file_size > os.fstat(src.fileno()).st_size:
                raise BundleError(f"{self.path}: member {name!r} is truncated")
        return start, info.file_size

    def extract(self, name: str, folder: str) -> str:
        """Copy one member into folder (under its base name), in the kernel; return the path."""
        start, size = self.span(name)
        target = os.path.join(folder, os.path.basename(name))
        with open(self.path, "rb", buffering=0) as src, open(target, "wb") as dst:
            os.lseek(src.fileno(), start, os.SEEK_SET)
            copied = copy_range(src.fileno(), dst.fileno(), size)
        if copied != size:
            raise BundleError(f"{self.path}: member {name!r} is truncated")
        return target

    def extract_folder(self, prefix: str, folder: str) -> str:
        """Copy every member under ``prefix/`` into folder, keeping their relative paths; return folder/prefix."""
        for info in self._zip.infolist():
            if info.filename.startswith(prefix + "/"):
                target = os.path.join(folder, *info.filename.split("/")[:-1])
                os.makedirs(target, exist_ok=True)
                self.extract(info.filename, target)
        return os.path.join(folder, prefix)

    def tensor(self, name: str, expect_name: str) -> np.ndarray:
        """Read a TensorProto member; its name must be expect_name or empty."""
        try:
            array, tensor_name = decode(self._read(name))
        except ValueError as exc:
            raise BundleError(f"{self.path}: member {name!r} is not a valid TensorProto ({exc})") from None
        if tensor_name and tensor_name != expect_name:
            raise BundleError(f"{self.path}: member {name!r} holds tensor {tensor_name!r}, expected {expect_name!r}")
        return array

    def value(self, name: str, info: Any) -> Any:
        """Read a test-data member as the model's type for it says (a :class:`~mgedump.model.runtime.TensorInfo`):
        a TensorProto for a tensor, a SequenceProto, MapProto or OptionalProto for the others
        (:mod:`.valueproto`); its name must be the input's or output's, or empty."""
        return self.tensor(name, info.name) if info.is_tensor else _value(self, name, info)


def _value(bundle: Bundle, name: str, info: Any) -> Any:
    """A test-data member of a sequence, map or optional type (a SequenceProto, MapProto or OptionalProto)."""
    try:
        value, stored = decode_value(bundle.read(name), info.value_type)
    except ValueError as exc:
        raise BundleError(f"{bundle.path}: member {name!r} is not a valid {info.dtype} ({exc})") from None
    if stored and stored != info.name:
        raise BundleError(f"{bundle.path}: member {name!r} holds {stored!r}, expected {info.name!r}")
    return value


def _check_layout(path: str, names: list[str]) -> None:
    """Refuse member names that cannot all be extracted: one that is also the folder of another (``a/b`` and
    ``a/b/c``), or two that differ only in case (one file on a case-insensitive file system).

    Raises:
        BundleError: naming the two members.
    """
    files = set(names)
    for name in names:
        parts = name.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in files:
                raise BundleError(f"{path}: member {folder!r} is a file and also the folder of {name!r}")
    folded: dict[str, str] = {}
    for name in names:
        other = folded.setdefault(name.casefold(), name)
        if other != name:
            raise BundleError(f"{path}: members {other!r} and {name!r} differ only in case")


def peek_variants(path: str) -> list[str]:
    """The variants a bundle names in its manifest, read with the manifest checked and nothing else (none: a
    bundle of one model, or one that cannot be read or whose manifest is malformed, which verifying it then says,
    once). Only a regular file is opened: a FIFO would block."""
    manifest = _peek_manifest(path)
    return [variant["name"] for variant in manifest.get("variants", ())] if manifest is not None else []


def peek_model_sha256(path: str, variant: str | None) -> str | None:
    """The sha256 of a variant's model as the manifest records it (of the one model, in a bundle of one; of
    ``variant``, in a bundle of several); None where the bundle cannot be read or holds no such variant."""
    manifest = _peek_manifest(path)
    if manifest is None:
        return None
    if not manifest.get("variants"):
        return cast(str | None, manifest.get("model", {}).get("sha256"))
    entry = next((v for v in manifest["variants"] if v.get("name") == variant), None)
    return None if entry is None else cast(str | None, entry.get("model", {}).get("sha256"))


def _peek_manifest(path: str) -> dict[str, Any] | None:
    """A bundle's manifest, checked, and nothing else read; None where it cannot be read (see
    :func:`peek_variants`)."""
    if not os.path.isfile(path):
        return None
    try:
        with zipfile.ZipFile(path) as zf:
            info = zf.getinfo(MANIFEST)
            if info.file_size > MAX_MANIFEST_BYTES:
                return None
            manifest = json.loads(zf.read(MANIFEST).decode("utf-8"))
        validate_manifest(manifest)
    except (*_ZIP_ERRORS, RecursionError, AttributeError, BundleError):
        return None
    return manifest if isinstance(manifest, dict) else None
