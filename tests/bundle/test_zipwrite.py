"""The stored-ZIP writer: zipfile and unzip read what it writes, ZIP64 records included."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
import zlib

import pytest

from mgedump.base.fileio import hash_files
from mgedump.bundle import zipwrite


def _write(path, files):
    with open(path, "wb") as f:
        writer = zipwrite.StoredZipWriter(f)
        writer.add_bytes("a.json", b'{"x": 1}\n')
        digest = hash_files(files)
        writer.add_files("dir/data.bin", files, digest.size, digest.crc32)
        writer.add_bytes("dir/\u00e9t\u00e9.pb", b"")
        writer.close()


@pytest.mark.parametrize("zip64", [False, True])
def test_zipfile_reads_members_and_crc(tmp_path, monkeypatch, zip64):
    if zip64:
        monkeypatch.setattr(zipwrite, "_ZIP64_LIMIT", 5)  # every size and offset past 5 bytes takes ZIP64 records
    parts = [tmp_path / "p1", tmp_path / "p2"]
    parts[0].write_bytes(b"hello " * 1000)
    parts[1].write_bytes(bytes(range(256)) * 3)
    out = tmp_path / "x.zip"
    _write(out, [str(p) for p in parts])
    with zipfile.ZipFile(out) as zf:
        assert zf.testzip() is None
        assert zf.namelist() == ["a.json", "dir/data.bin", "dir/\u00e9t\u00e9.pb"]
        assert zf.read("dir/data.bin") == parts[0].read_bytes() + parts[1].read_bytes()
        info = zf.getinfo("dir/data.bin")
        assert info.compress_type == zipfile.ZIP_STORED and info.date_time == (1980, 1, 1, 0, 0, 0)
        assert info.external_attr >> 16 == 0o100644
    if shutil.which("unzip"):
        result = subprocess.run(["unzip", "-tq", str(out)], capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr


def test_file_changed_while_copying_is_an_error(tmp_path):
    src = tmp_path / "s"
    src.write_bytes(b"abc")
    with pytest.raises(OSError, match="changed"), open(tmp_path / "x.zip", "wb") as f:
        zipwrite.StoredZipWriter(f).add_files("s", [str(src)], 10, zlib.crc32(b"abc"))
