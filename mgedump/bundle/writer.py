"""Write a bundle: the manifest with every member's hash, then the members, stored, into one file renamed into place."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base import text
from ..base.fileio import FileDigest, atomic_output, hash_files
from .format import MANIFEST, check_member_name
from .manifest import Manifest
from .tensorproto import encode
from .zipwrite import StoredZipWriter


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
    return encode(array, name)


def write_bundle(path: str, manifest: Manifest, members: Sequence[Member], inputs: Sequence[str] = ()) -> Manifest:
    """Write a bundle atomically: the manifest (with member hashes), then the members.

    Args:
        path: the bundle file to create or replace.
        manifest: the manifest; its ``members`` are filled here.
        members: the members after the manifest, in order.
        inputs: files the bundle must not overwrite (the model, its data, the test data).

    Returns:
        The manifest as written.

    Raises:
        OutputError: the file cannot be written.
    """
    digests = []
    for member in members:
        check_member_name(member.name)
        digests.append(member.hashed())
    listed = [{"name": m.name, "size": d.size, "sha256": d.sha256} for m, d in zip(members, digests, strict=True)]
    manifest = dataclasses.replace(manifest, members=listed)
    document = _strict(manifest.to_json())  # a spec naming a file whose name is not UTF-8: no lone surrogate
    manifest_bytes = (
        json.dumps(document, indent=1, sort_keys=True, ensure_ascii=True, allow_nan=False) + "\n"
    ).encode()
    with atomic_output(path, inputs) as f:
        writer = StoredZipWriter(f)
        writer.add_bytes(MANIFEST, manifest_bytes)
        for member, digest in zip(members, digests, strict=True):
            if member.data is not None:
                writer.add_bytes(member.name, member.data)
            else:
                writer.add_files(member.name, member.paths, digest.size, digest.crc32)
        writer.close()
    return manifest


def _strict(value: Any) -> Any:
    """A JSON value whose strings strict parsers accept: lone surrogates (bytes of a file name that were not
    UTF-8, in a spec or an origin) written as visible text (``\\xff``) by :func:`mgedump.base.text.json`."""
    if isinstance(value, str):
        return text.json(value)
    if isinstance(value, dict):
        return {text.json(k): _strict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strict(v) for v in value]
    return value
