"""Crafted files for the hostile-input suite and the fuzz tests: each is small, and lies about something.

Every function writes bytes it builds by hand (a header that declares more
than the file holds, a dtype no tensor has, an archive whose member runs past
the end) and returns the path, so a table of cases reads as one line each.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

from mgedump.model.protowire import write_varint


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------- .npy


def npy_bytes(
    descr: object, shape: tuple[int, ...], data: bytes = b"", *, version: int = 1, fortran: bool = False
) -> bytes:
    """A .npy file whose header says what the arguments say (``descr`` as numpy writes it: a string, or a list
    of fields), whatever data follows."""
    header = f"{{'descr': {descr!r}, 'fortran_order': {fortran}, 'shape': {shape!r}, }}".encode("latin1")
    prefix_len = 10 if version == 1 else 12
    header += b" " * ((64 - (prefix_len + len(header) + 1) % 64) % 64) + b"\n"
    size = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + size + header + data


def npy_raw_header(header: bytes, data: bytes = b"") -> bytes:
    """A version 1.0 .npy whose header is these bytes exactly (not necessarily a dict)."""
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data


# ---------------------------------------------------------------- zip archives (.npz, bundles)


def zip_members(path: Path, members: dict[str, bytes], *, compress: bool = False) -> Path:
    """A zip archive holding these members, in this order."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name), data, zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED)
    return path


def read_members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def patch_sizes(path: Path, member: str, size: int) -> Path:
    """Make a stored member's local and central headers declare ``size`` bytes (past the end of the file)."""
    data = bytearray(path.read_bytes())
    name = member.encode()
    for signature, offset in ((b"PK\x03\x04", 18), (b"PK\x01\x02", 20)):
        start = 0
        while (start := data.find(signature, start)) >= 0:
            name_at = start + (30 if signature == b"PK\x03\x04" else 46)
            if data[name_at : name_at + len(name)] == name:
                struct.pack_into("<II", data, start + offset, size, size)
                break
            start += 4
    path.write_bytes(bytes(data))
    return path


def set_flag_bits(path: Path, bits: int) -> Path:
    """Set general-purpose flag bits (1: encrypted) on every member's local and central header."""
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        start = 0
        while (start := data.find(signature, start)) >= 0:
            (flags,) = struct.unpack_from("<H", data, start + offset)
            struct.pack_into("<H", data, start + offset, flags | bits)
            start += 4
    path.write_bytes(bytes(data))
    return path


def zeros_npz(path: Path, n_bytes: int, name: str = "x") -> Path:
    """A small ``.npz`` holding one float32 array of zeros that expands to ``n_bytes`` (a real deflate stream).

    The stream repeats one fully flushed deflate block of 64 MiB of zeros, so writing a few GiB takes a moment,
    not the minute a compressor would take.
    """
    block = 64 << 20
    count = -(-n_bytes // block)
    header = npy_bytes("<f4", (count * block // 4,))
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = compressor.compress(header) + compressor.flush(zlib.Z_FULL_FLUSH)
    zeros = bytes(block)
    repeat = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    tail = compressor.flush(zlib.Z_FINISH)
    crc = zlib.crc32(header)
    for _ in range(count):
        crc = zlib.crc32(zeros, crc)
    compressed_size = len(head) + count * len(repeat) + len(tail)
    file_size = len(header) + count * block
    member = f"{name}.npy".encode()
    zip64_local = struct.pack("<HHQQ", 1, 16, file_size, compressed_size)
    local = (
        struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 45, 0, 8, 0, 0, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(member), 20)
        + member
        + zip64_local
    )
    zip64_central = struct.pack("<HHQQQ", 1, 24, file_size, compressed_size, 0)
    central = (
        struct.pack(
            "<4sHHHHHHIIIHHHHHII",
            b"PK\x01\x02",
            45,
            45,
            0,
            8,
            0,
            0,
            crc,
            0xFFFFFFFF,
            0xFFFFFFFF,
            len(member),
            28,
            0,
            0,
            0,
            0,
            0xFFFFFFFF,
        )
        + member
        + zip64_central
    )
    with open(path, "wb") as f:
        f.write(local + head)
        for _ in range(count):
            f.write(repeat)
        f.write(tail)
        cd_offset = f.tell()
        f.write(central)
        eocd64_offset = f.tell()
        f.write(struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, 1, 1, len(central), cd_offset))
        f.write(struct.pack("<4sIQI", b"PK\x06\x07", 0, eocd64_offset, 1))
        f.write(struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 1, 1, len(central), 0xFFFFFFFF, 0))
    return path


# ---------------------------------------------------------------- .pb (TensorProto)


def pb_bytes(dims: list[int], data_type: int, raw: bytes | None = None, *, extra: bytes = b"") -> bytes:
    """A TensorProto: dims (field 1), data_type (field 2), raw_data (field 9), then any extra field bytes."""
    out = b"".join(write_varint(1 << 3) + write_varint(d & (2**64 - 1)) for d in dims)
    out += write_varint(2 << 3) + write_varint(data_type)
    if raw is not None:
        out += write_varint(9 << 3 | 2) + write_varint(len(raw)) + raw
    return out + extra


def pb_external(location: str) -> bytes:
    """A float32 [4] TensorProto whose data lives in an external file at ``location``."""
    entry = write_varint(1 << 3 | 2) + write_varint(8) + b"location"
    entry += write_varint(2 << 3 | 2) + write_varint(len(location)) + location.encode()
    external = write_varint(13 << 3 | 2) + write_varint(len(entry)) + entry
    return pb_bytes([4], 1, extra=external + write_varint(14 << 3) + write_varint(1))


# ---------------------------------------------------------------- images


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def png_declaring(width: int, height: int) -> bytes:
    """A tiny PNG whose header declares width x height RGB pixels (its data holds one row at most)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 16)
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", idat) + _png_chunk(b"IEND", b"")


def bmp_declaring(width: int, height: int) -> bytes:
    """A BMP header declaring width x height 24-bit pixels, with no pixel data."""
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, 0, 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + len(info), 0, 0, 14 + len(info)) + info


def gif_declaring(width: int, height: int) -> bytes:
    """A GIF whose logical screen and only image declare width x height."""
    screen = b"GIF89a" + struct.pack("<HHBBB", width, height, 0, 0, 0)
    image = b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0) + b"\x02\x02\x44\x01\x00\x3b"
    return screen + image
