"""The protobuf wire format, read without a protobuf library.

Two readers need it: the TensorProto codec (test data, a few fields) and the
model-file scan (which skips weights by their length instead of parsing them).
Both read untrusted bytes, so every length is checked against its message.
"""

from __future__ import annotations

from collections.abc import Iterator

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5


class WireError(ValueError):
    """The bytes are not the protobuf message they should be."""


def read_varint(buf: memoryview | bytes, pos: int, end: int | None = None) -> tuple[int, int]:
    """Read a varint at pos (before end); return it and the position after it.

    Raises:
        WireError: the varint is truncated or longer than 64 bits.
    """
    end = len(buf) if end is None else end
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


_ONE_BYTE = [bytes([value]) for value in range(0x80)]


def write_varint(value: int) -> bytes:
    """A varint's bytes (negative values as their 64-bit two's complement, as protobuf does)."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def fields(buf: memoryview | bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """Yield ``(field number, wire type, value or payload start, payload end)`` for each field of one message.

    For a varint field the third item is its value; for a length-delimited
    field, the payload is ``buf[start:end]``; fixed-width fields are skipped
    over (their position is given).

    Raises:
        WireError: a field runs past the message, or a wire type is unknown.
    """
    pos = start
    while pos < end:
        key = buf[pos]  # one byte, the common case, read here; longer varints by read_varint
        if key < 0x80:
            pos += 1
        else:
            key, pos = read_varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            value, pos = read_varint(buf, pos, end)
            yield number, wire, value, pos
        elif wire == LENGTH_DELIMITED:
            if pos < end and buf[pos] < 0x80:
                length = buf[pos]
                pos += 1
            else:
                length, pos = read_varint(buf, pos, end)
            if pos + length > end:
                raise WireError("field runs past its message")
            yield number, wire, pos, pos + length
            pos += length
        elif wire in (FIXED64, FIXED32):
            width = 8 if wire == FIXED64 else 4
            yield number, wire, pos, pos + width
            pos += width
        else:
            raise WireError(f"wire type {wire}")
    if pos != end:
        raise WireError("message runs past its end")
