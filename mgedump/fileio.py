"""Atomic output files: write beside the target, then rename into place."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO

from .errors import OutputError

CHUNK = 8 << 20


def check_target(path: str) -> str:
    """Check that an output file can be created at path; return its absolute path.

    Raises:
        OutputError: the folder is missing or not a folder, or path is a folder.
    """
    target = os.path.abspath(path)
    folder = os.path.dirname(target)
    if os.path.isdir(target):
        raise OutputError(f"output {path} is a folder; give a file name")
    if not os.path.exists(folder):
        raise OutputError(f"output folder does not exist: {os.path.dirname(path) or '.'}")
    if not os.path.isdir(folder):
        raise OutputError(f"output folder is not a folder: {os.path.dirname(path)}")
    if not os.access(folder, os.W_OK):
        raise OutputError(f"output folder is not writable: {os.path.dirname(path) or '.'}")
    return target


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[IO[bytes]]:
    """Open a temporary file beside path; on success it replaces path at once.

    On any error the temporary file is removed and an existing file at path is
    left as it was.

    Raises:
        OutputError: the folder cannot be written.
    """
    target = check_target(path)
    folder, base = os.path.split(target)
    try:
        # closed by the `with handle:` below, once it exists
        handle = tempfile.NamedTemporaryFile(dir=folder, prefix=f".{base}.", suffix=".tmp", delete=False)  # noqa: SIM115
    except OSError as exc:
        raise OutputError(f"cannot write in {os.path.dirname(path) or '.'}: {exc.strerror or exc}") from None
    try:
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        mode = 0o666 & ~_umask()
        os.chmod(handle.name, mode)
        os.replace(handle.name, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(handle.name)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Write a whole file atomically."""
    with atomic_output(path) as f:
        f.write(data)


@dataclass(frozen=True)
class FileDigest:
    """The sha256, size and CRC-32 of a file's bytes (or several files' bytes, in order)."""

    sha256: str
    size: int
    crc32: int


def hash_files(paths: Sequence[str], cancel: threading.Event | None = None) -> FileDigest:
    """Hash files in one read: sha256 and CRC-32 of their concatenated bytes.

    Both hash functions release the GIL on large buffers, so this runs well in
    a thread beside onnxruntime's session creation; setting ``cancel`` stops it
    early (the result is then meaningless).
    """
    digest = hashlib.sha256()
    crc = 0
    size = 0
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while (n := f.readinto(buffer)) and not (cancel is not None and cancel.is_set()):
                chunk = view[:n]
                digest.update(chunk)
                crc = zlib.crc32(chunk, crc)
                size += n
    return FileDigest(digest.hexdigest(), size, crc)
