"""Atomic output files: write beside the target, then rename into place."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from typing import IO, Iterator

from .errors import OutputError

CHUNK = 1 << 20


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
        handle = tempfile.NamedTemporaryFile(dir=folder, prefix=f".{base}.", suffix=".tmp", delete=False)
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


def sha256_file(path: str) -> tuple[str, int]:
    """The sha256 hex digest and size of a file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size
