"""A minimal writer of stored (uncompressed) ZIP archives, for bundles.

Python's :mod:`zipfile` reads bundles; this writes them, because packing a large
model must copy its bytes with the kernel (``copy_file_range``) and reuse the
CRC-32 computed while hashing, rather than pass every byte through Python
again. It writes only what bundles need: stored members, fixed timestamps
(1980-01-01 00:00), Unix mode 0644, and ZIP64 records when a size or offset
needs them (APPNOTE.TXT 6.3).
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

from ..base.fileio import READ_FLAGS

_DOS_TIME = 0
_DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01
_MAX32 = 0xFFFFFFFF
_ZIP64_LIMIT = _MAX32  # sizes and offsets from here on need ZIP64 records
_MAX16 = 0xFFFF
_UNIX_0644 = 0o100644 << 16


@dataclass
class _Entry:
    name: bytes
    flags: int
    crc: int
    size: int
    offset: int

    @property
    def zip64(self) -> bool:
        return self.size >= _ZIP64_LIMIT or self.offset >= _ZIP64_LIMIT


class StoredZipWriter:
    """Write stored members to a binary file opened for writing, then :meth:`close`."""

    def __init__(self, fileobj: IO[bytes]) -> None:
        self._f = fileobj
        self._entries: list[_Entry] = []
        self._pos = fileobj.tell()

    def _local_header(self, name: str, crc: int, size: int) -> _Entry:
        raw = name.encode("utf-8")
        flags = 0x800 if not name.isascii() else 0
        entry = _Entry(raw, flags, crc, size, self._pos)
        zip64 = size >= _ZIP64_LIMIT
        extra = struct.pack("<HHQQ", 0x0001, 16, size, size) if zip64 else b""
        header = struct.pack(
            "<IHHHHHIIIHH",
            0x04034B50,
            45 if zip64 else 20,
            flags,
            0,
            _DOS_TIME,
            _DOS_DATE,
            crc,
            _MAX32 if zip64 else size,
            _MAX32 if zip64 else size,
            len(raw),
            len(extra),
        )
        self._write(header + raw + extra)
        self._entries.append(entry)
        return entry

    def _write(self, data: bytes) -> None:
        self._f.write(data)
        self._pos += len(data)

    def add_bytes(self, name: str, data: bytes) -> None:
        """Add a member from memory."""
        self._local_header(name, zlib.crc32(data), len(data))
        self._write(data)

    def add_files(self, name: str, paths: Sequence[str], size: int, crc: int) -> None:
        """Add one member made of the files' bytes, in order, copied by the kernel.

        Args:
            size: the files' total size, and crc: their CRC-32, both computed
                beforehand (see :func:`mgedump.base.fileio.hash_files`).

        Raises:
            OSError: a file changed size while it was copied.
        """
        self._local_header(name, crc, size)
        self._f.flush()
        out_fd = self._f.fileno()
        os.lseek(out_fd, self._pos, os.SEEK_SET)
        copied = 0
        for path in paths:
            src = os.open(path, READ_FLAGS)  # no file object: 2,000 small files cost 2,000 opens
            try:
                copied += copy_range(src, out_fd, os.fstat(src).st_size)
            finally:
                os.close(src)
        if copied != size:
            raise OSError(f"{paths[0]} changed while it was being packed ({copied} bytes, expected {size})")
        self._pos += copied
        self._f.seek(self._pos)

    def close(self) -> None:
        """Write the central directory and the end records."""
        start = self._pos
        for entry in self._entries:
            zip64 = entry.zip64
            extra = b""
            if zip64:
                fields = []
                if entry.size >= _ZIP64_LIMIT:
                    fields += [entry.size, entry.size]
                if entry.offset >= _ZIP64_LIMIT:
                    fields.append(entry.offset)
                extra = struct.pack("<HH", 0x0001, 8 * len(fields)) + struct.pack(f"<{len(fields)}Q", *fields)
            version = 45 if zip64 else 20
            self._write(
                struct.pack(
                    "<IHHHHHHIIIHHHHHII",
                    0x02014B50,
                    (3 << 8) | version,
                    version,
                    entry.flags,
                    0,
                    _DOS_TIME,
                    _DOS_DATE,
                    entry.crc,
                    _MAX32 if entry.size >= _ZIP64_LIMIT else entry.size,
                    _MAX32 if entry.size >= _ZIP64_LIMIT else entry.size,
                    len(entry.name),
                    len(extra),
                    0,
                    0,
                    0,
                    _UNIX_0644,
                    _MAX32 if entry.offset >= _ZIP64_LIMIT else entry.offset,
                )
                + entry.name
                + extra
            )
        end = self._pos
        count, cd_size = len(self._entries), end - start
        if count >= _MAX16 or cd_size >= _ZIP64_LIMIT or start >= _ZIP64_LIMIT:
            self._write(
                struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, (3 << 8) | 45, 45, 0, 0, count, count, cd_size, start)
            )
            self._write(struct.pack("<IIQI", 0x07064B50, 0, end, 1))
        self._write(
            struct.pack(
                "<IHHHHIIH",
                0x06054B50,
                0,
                0,
                min(count, _MAX16),
                min(count, _MAX16),
                _MAX32 if cd_size >= _ZIP64_LIMIT else cd_size,
                _MAX32 if start >= _ZIP64_LIMIT else start,
                0,
            )
        )
        self._f.flush()


def copy_range(src: int, dst: int, size: int) -> int:
    """Copy up to size bytes from src's position to dst's, in the kernel where it can; return the count."""
    copied = 0
    copy = getattr(os, "copy_file_range", None)
    while copied < size:
        want = min(size - copied, 1 << 30)
        try:
            n = copy(src, dst, want) if copy else os.sendfile(dst, src, None, want)
        except OSError:
            if copy is None:
                raise
            copy = None  # e.g. across file systems on old kernels: fall back to sendfile
            continue
        if n == 0:
            break
        copied += n
    return copied
