"""Output files written beside their target and renamed into place; file hashing."""

from __future__ import annotations

import hashlib
import zlib

import pytest

from mgedump.base.errors import OutputError
from mgedump.base.fileio import atomic_output, check_target, hash_files, write_bytes_atomic


def test_hash_files_hashes_the_concatenation(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 10_000_000)
    (tmp_path / "b").write_bytes(b"yz")
    digest = hash_files([str(tmp_path / "a"), str(tmp_path / "b")])
    whole = b"x" * 10_000_000 + b"yz"
    assert digest.sha256 == hashlib.sha256(whole).hexdigest()
    assert digest.crc32 == zlib.crc32(whole) and digest.size == len(whole)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_output(str(target)) as f:
        f.write(b"half of the new")
        raise RuntimeError("stopped")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_a_write_replaces_the_file_whole(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old contents, longer than the new")
    write_bytes_atomic(str(target), b"new")
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda t: t, "is a folder"),
        (lambda t: t / "missing" / "out.bin", "output folder does not exist"),
        (lambda t: (t / "file").write_bytes(b"x") and t / "file" / "out.bin", "output folder is not a folder"),
    ],
)
def test_unwritable_targets(tmp_path, make, message):
    with pytest.raises(OutputError, match=message):
        check_target(str(make(tmp_path)))
