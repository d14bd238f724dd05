"""Output files: checked before anything is written, written beside the target, then renamed into place.

An output is a regular file (or a folder, for the outputs that are folders);
a FIFO, a device, a socket, or any file that is one of the run's inputs (the
model, a data file, a list file, a bundle), compared by device and inode after
resolving links, is refused. A symbolic link is written through: the file it
points to is replaced, and the link stays.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import mmap
import os
import secrets
import stat
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import IO

from .errors import OutputError

CHUNK = 8 << 20
READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)  # os.open of a file read


_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of a small file a command reads (a report, a choice, a list): opened without blocking, so a FIFO
    never hangs the command, and refused unless it is a regular file of at most ``limit`` bytes (a device such as
    ``/dev/zero`` would be read until memory runs out).

    Raises:
        OSError: it cannot be opened, is not a regular file, or is larger than ``limit`` (``strerror`` says which).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
            raise OSError(errno.EINVAL, f"{kind}, not a regular file" if kind != "not a regular file" else kind)
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than the {limit} bytes such a file may hold")
    return data


def check_not_input(path: str, inputs: Iterable[str], what: str = "output") -> None:
    """Refuse an output that is the same file as one of the inputs (after resolving links).

    Raises:
        OutputError: naming the input it would overwrite.
    """
    target = _identity(path)
    if target is None:
        return
    for name in inputs:
        if _identity(name) == target:
            raise OutputError(f"{what} {path} is the input {name}: writing it would destroy it; give another path")


def check_target(path: str, inputs: Iterable[str] = ()) -> str:
    """Check that an output file can be created at path; return where it will be written.

    That is path itself, or the file a symbolic link at path points to.

    Raises:
        OutputError: the folder is missing or not a folder; path is a folder,
            a FIFO, a device or a socket; or path is one of the inputs.
    """
    if not path:
        raise OutputError("an output path is empty: give a file name")
    if path.endswith(("/", os.sep)):
        raise OutputError(f"output {path!r} names a folder, not a file: give a file name")
    target = os.path.realpath(path)
    folder = os.path.dirname(target)
    try:
        mode: int | None = os.stat(path).st_mode  # through links: what writing would reach (/dev/stdout: a pipe)
    except (FileNotFoundError, NotADirectoryError, ValueError):
        mode = None  # a new file (the folder is checked below)
    except OSError as exc:  # a name too long, a loop of links, a folder that cannot be searched
        raise OutputError(f"output {path}: {exc.strerror or exc}") from None
    if mode is not None:
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            suffix = "give a file name" if kind == "a folder" else "give a regular file"
            raise OutputError(f"output {path} is {kind}; {suffix}")
        check_not_input(target, inputs)
    if not os.path.exists(folder):
        raise OutputError(f"output folder does not exist: {os.path.dirname(path) or '.'}")
    if not os.path.isdir(folder):
        raise OutputError(f"output folder is not a folder: {os.path.dirname(path)}")
    if not os.access(folder, os.W_OK):
        raise OutputError(f"output folder is not writable: {os.path.dirname(path) or '.'}")
    return target


_pending: ContextVar[list[tuple[str, str]] | None] = ContextVar("mgedump_pending_outputs", default=None)


@contextlib.contextmanager
def all_or_nothing() -> Iterator[None]:
    """The files :func:`atomic_output` writes inside this block replace their targets together when it ends; if
    the block fails, none of them does (each is removed), and the files that were there stay as they were. A
    block inside another joins it: its files wait for the outer block (a command that packs, then writes more).

    Raises:
        OutputError: a rename fails (the targets renamed before it stay renamed: the file system offers no
            rename of several files at once).
    """
    if _pending.get() is not None:
        yield
        return
    pending: list[tuple[str, str]] = []
    token = _pending.set(pending)
    try:
        yield
    except BaseException:
        for temporary, _ in pending:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise
    finally:
        _pending.reset(token)
    for k, (temporary, target) in enumerate(pending):
        try:
            os.replace(temporary, target)
        except OSError as exc:
            for left, _ in pending[k:]:
                with contextlib.suppress(OSError):
                    os.unlink(left)
            raise OutputError(f"cannot write {target}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def atomic_output(path: str, inputs: Iterable[str] = ()) -> Iterator[IO[bytes]]:
    """Open a temporary file beside path; on success it replaces path at once (inside :func:`all_or_nothing`:
    when that block ends, with the other outputs).

    On any error the temporary file is removed and an existing file at path is
    left as it was.

    Raises:
        OutputError: the folder cannot be written.
    """
    target = check_target(path, inputs)
    folder, base = os.path.split(target)
    try:
        temporary, fd = _create_beside(folder, base)
    except OSError as exc:
        raise OutputError(f"cannot write in {os.path.dirname(path) or '.'}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        pending = _pending.get()
        if pending is None:
            os.replace(temporary, target)
        else:
            pending.append((temporary, target))
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


def _create_beside(folder: str, base: str) -> tuple[str, int]:
    """A new file ``.BASE.XXXXXXXX.tmp`` in folder, open for writing, with the mode a new file gets (0o666 less
    the process's umask, applied by the system: the umask itself is never changed, so threads are safe)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):  # the target's name, cut: a name near the longest allowed still leaves room for the rest
        name = os.path.join(folder or ".", f".{base[:120]}.{secrets.token_hex(4)}.tmp")
        try:
            return name, os.open(name, flags, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {base}")


def write_bytes_atomic(path: str, data: bytes, inputs: Iterable[str] = ()) -> None:
    """Write a whole file atomically (refusing a target that is one of ``inputs``)."""
    with atomic_output(path, inputs) as f:
        f.write(data)


def check_folder_target(path: str, flag: str, inputs: Iterable[str] = ()) -> None:
    """Check an output that is a folder (``--bin-out-dump``, ``--io-dump``): absent or a folder, in a folder.

    Raises:
        OutputError: path is a file or something else, is an input, or its parent is missing.
    """
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.islink(path) and not os.path.exists(path):
        raise OutputError(f"{flag} {path} is a link that leads nowhere (a loop, or a missing target); give a folder")
    if os.path.exists(path) and not os.path.isdir(path):
        mode = os.stat(path).st_mode
        kind = "a file" if stat.S_ISREG(mode) else _KINDS.get(stat.S_IFMT(mode), "not a folder")
        raise OutputError(f"{flag} {path} is {kind}; give a folder")
    if os.path.exists(parent) and not os.path.isdir(parent):
        raise OutputError(f"{flag}: {parent} is not a folder")
    if not os.path.isdir(parent):
        raise OutputError(f"{flag}: folder {parent} does not exist")
    if not os.access(parent if not os.path.isdir(path) else path, os.W_OK | os.X_OK):
        raise OutputError(f"{flag}: {path if os.path.isdir(path) else parent} is not writable")
    check_not_input(path, inputs, flag)


def make_folder(path: str, flag: str) -> None:
    """Create an output folder (and none of its parents), or use the one there; any failure is one line.

    Raises:
        OutputError: the folder cannot be made or used.
    """
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{flag}: cannot make folder {path}: {exc.strerror or exc}") from None


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
    # an anonymous map: its pages are touched as reads fill them (a model's small files cost a few each), where a
    # bytearray of CHUNK would first write 8 MiB of zeroes (7 ms a call)
    with mmap.mmap(-1, CHUNK) as buffer, memoryview(buffer) as view:
        for path in paths:
            fd = os.open(path, READ_FLAGS)
            try:
                while (n := os.readv(fd, [view])) and not (cancel is not None and cancel.is_set()):
                    with view[:n] as chunk:
                        digest.update(chunk)
                        crc = zlib.crc32(chunk, crc)
                    size += n
            finally:
                os.close(fd)
    return FileDigest(digest.hexdigest(), size, crc)
