#!/usr/bin/env python3
"""Throw mutated bundles at ``mgerun-native`` and check how each run ends (docs/native.md, "Robustness").

Packs a few sample bundles with ``mgedump`` (a model with two test cases and an io dump, two variants, external
data, sequences and maps, several inputs of several dtypes), then makes N mutations of them, each from
``(seed, index)`` alone, so any one is made again with ``--write-case INDEX PATH``:

- ``flip``: bytes of the file changed anywhere; ``truncate``: the file cut short;
- ``zipfield``: one field of a ZIP header (local, central or end record: sizes, offsets, counts, name and extra
  lengths, method, flags) set to a value that lies;
- ``manifest``: one value of the manifest replaced or removed, or its text damaged (deep nesting, NaN, a
  duplicate key, bad UTF-8, cut short); members and hashes kept valid so the reader gets past them;
- ``tensor``: a test data member's protobuf changed (dims, dtype, lengths, raw data, nested values, overlong
  varints), its size and sha256 fixed in the manifest so that the decoder sees it;
- ``names``: a member renamed (``../x``, an absolute path, a folder of another member, ...) in the archive and
  the manifest alike; ``member``: bytes of any member changed with its hash fixed (the model included);
- ``external``: the model's external data location pointed elsewhere (``/etc/hostname``, ``../..``).

Each run (``BINARY BUNDLE --iter 1 --warmup-iter 0 --silent``, under its own TMPDIR) must end within the time
limit with exit code 0, 1 or 2 and no signal; a refusal (2) is one line on stderr (once per variant at most, the
same line); nothing a sanitizer prints; nothing left in TMPDIR or beside the bundle. Every ``--strace-every``-th
run goes under ``strace -f``: the files it opens must be the bundle, its own temporary folder, or the run time
libraries (the C library, onnxruntime, /proc, /sys), never a file a bundle names.

Usage::

    python scripts/native_fuzz.py --binary build/d-asan/mgerun-native --count 10000 --jobs 2
    python scripts/native_fuzz.py --binary B --count 300 --json findings.json
    python scripts/native_fuzz.py --binary B --write-case 1234 case.mgetest   # make mutation 1234 again

Exits 1 when a run broke a rule (each one listed, with its index), 0 otherwise.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import io
import json
import os
import random
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mgedump.model.protowire import write_varint as varint

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"

# (name, mgedump arguments after the model); packed once per work folder.
SEEDS: list[tuple[str, list[str]]] = [
    ("cnn", ["cnn.onnx", "-d", "#rand(0,1)", "-d", "#rand(0,2)", "--embed-io-dump"]),
    ("variants", ["cnn.onnx", "-d", "#rand(0,1)", "--variants", "fp32,ioc16", "--maxerr", "0.01"]),
    ("external", ["external/mlp.onnx", "-d", "#rand(0,1)"]),
    ("sequences", ["values/sequences.onnx", "-d", "#rand(-1,1,2,3)"]),
    ("zipmap", ["values/zipmap_classifier.onnx", "-d", "#rand(-2,2,3,...)"]),
    ("multi", ["multi_input.onnx", "-d", "input:0:#rand(0,1);len:#const(7)"]),
    ("bool", ["if_branches.onnx", "-d", "c:#const(1);x:#rand(-1,1)"]),
]

MUTATORS = {  # name: weight
    "flip": 12,
    "truncate": 6,
    "zipfield": 18,
    "manifest": 20,
    "tensor": 26,
    "names": 6,
    "member": 8,
    "external": 4,
}

# onnxruntime's aarch64 library under qemu-user (an emulated CPU names no vendor) says so on stderr in every run:
# the emulator's, not the program's; dropped when a runner prefix is given
EMULATION_NOISE = re.compile(r"^onnxruntime cpuid_info warning: .*\n?", re.M)
SANITIZER = re.compile(r"(AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|==\d+==ERROR)")
ASAN_EXIT, UBSAN_EXIT = 86, 87
SAN_ENV = {
    "ASAN_OPTIONS": f"exitcode={ASAN_EXIT}:detect_leaks=0:abort_on_error=0:allocator_may_return_null=1",
    "UBSAN_OPTIONS": f"halt_on_error=1:exitcode={UBSAN_EXIT}:print_stacktrace=1",
}


# ---------------------------------------------------------------- the seeds


def pack_seeds(folder: Path, names: list[str] | None = None) -> dict[str, bytes]:
    """Pack the seed bundles into ``folder`` (kept between runs) and return their bytes by name."""
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    mgedump = shutil.which("mgedump", path=os.path.dirname(sys.executable)) or shutil.which("mgedump")
    if mgedump is None:
        sys.exit("native_fuzz: mgedump is not installed (pip install -e .)")
    out: dict[str, bytes] = {}
    for name, args in SEEDS:
        if names and name not in names:
            continue
        path = folder / f"{name}.mgetest"
        if not path.exists():
            cmd = [mgedump, *args, "-o", str(path), "-q"]
            done = subprocess.run(cmd, cwd=SAMPLES, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"native_fuzz: packing the seed {name} failed: {done.stderr.strip()}")
        out[name] = path.read_bytes()
    return out


def read_zip(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return [(info.filename, zf.read(info)) for info in zf.infolist()]


def write_zip(members: list[tuple[str, bytes]]) -> bytes:
    """A stored ZIP archive of these members in this order, with fixed times (the same bytes every time)."""
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w") as zf:
        warnings.simplefilter("ignore")  # a duplicate name is one of the mutations
        for name, data in members:
            zf.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data, zipfile.ZIP_STORED)
    return buf.getvalue()


def fix_manifest(members: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """Make the manifest's member list (and the model's sha256) agree with the members' bytes again."""
    manifest = json.loads(members[0][1])
    by_name = dict(members[1:])
    for entry in manifest.get("members", []):
        data = by_name.get(entry.get("name"))
        if data is not None:
            entry["size"] = len(data)
            entry["sha256"] = hashlib.sha256(data).hexdigest()
    models = [manifest.get("model")] + [v.get("model") for v in manifest.get("variants", []) if isinstance(v, dict)]
    for model in models:
        if isinstance(model, dict) and model.get("member") in by_name:
            model["sha256"] = hashlib.sha256(by_name[model["member"]]).hexdigest()
    text = json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=True) + "\n"
    return [(members[0][0], text.encode()), *members[1:]]


# ---------------------------------------------------------------- protobuf wire format


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


@dataclass
class Field:
    number: int
    wire: int
    value: int | bytes  # a varint's value, or the bytes of a fixed or length-delimited field


def parse_fields(buf: bytes) -> list[Field]:
    out, pos = [], 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
            out.append(Field(number, wire, value))
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > len(buf):
                raise ValueError("short fixed field")
            out.append(Field(number, wire, buf[pos : pos + size]))
            pos += size
        elif wire == 2:
            size, pos = read_varint(buf, pos)
            if pos + size > len(buf):
                raise ValueError("short field")
            out.append(Field(number, wire, buf[pos : pos + size]))
            pos += size
        else:
            raise ValueError("wire type")
    return out


def encode_fields(fields: list[Field]) -> bytes:
    out = bytearray()
    for f in fields:
        out += varint(f.number << 3 | f.wire)
        if f.wire == 0:
            assert isinstance(f.value, int)
            out += varint(f.value)
        elif f.wire == 2:
            assert isinstance(f.value, bytes)
            out += varint(len(f.value)) + f.value
        else:
            assert isinstance(f.value, bytes)
            out += f.value
    return bytes(out)


INTERESTING_INTS = [0, 1, 2, 3, 7, 8, 9, 16, 255, 256, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                    1 << 32, 1 << 40, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, (1 << 64) - 2]  # fmt: skip


def mutate_message(rng: random.Random, buf: bytes, depth: int = 0) -> bytes:
    """One change to a protobuf message (TensorProto, SequenceProto, MapProto, OptionalProto or a nested one)."""
    try:
        fields = parse_fields(buf)
    except ValueError:
        fields = []
    if not fields:
        return flip_bytes(rng, buf, 2) if buf else bytes(rng.randrange(256) for _ in range(4))
    nested = [i for i, f in enumerate(fields) if f.wire == 2 and isinstance(f.value, bytes) and _is_message(f.value)]
    if nested and depth < 4 and rng.random() < 0.35:
        i = rng.choice(nested)
        inner = fields[i].value
        assert isinstance(inner, bytes)
        fields[i] = Field(fields[i].number, 2, mutate_message(rng, inner, depth + 1))
        return encode_fields(fields)
    i = rng.randrange(len(fields))
    f = fields[i]
    kind = rng.choice(["value", "value", "delete", "duplicate", "insert", "length", "overlong", "resize", "wire"])
    if kind == "value":
        if f.wire == 0:
            fields[i] = Field(f.number, 0, rng.choice(INTERESTING_INTS + [f.value + 1, max(0, int(f.value) - 1)]))  # type: ignore[operator]
        elif f.wire == 2 and isinstance(f.value, bytes) and f.value:
            fields[i] = Field(f.number, 2, flip_bytes(rng, f.value, rng.randint(1, 4)))
        else:
            fields[i] = Field(f.number, f.wire, bytes(rng.randrange(256) for _ in range(len(f.value))))  # type: ignore[arg-type]
    elif kind == "delete":
        del fields[i]
    elif kind == "duplicate":
        fields.insert(i, f)
    elif kind == "insert":
        number = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 99, 536870911])
        wire = rng.choice([0, 1, 2, 5])
        value: int | bytes = (
            rng.choice(INTERESTING_INTS) if wire == 0 else bytes(rng.randrange(256) for _ in range(8 if wire == 1 else 4 if wire == 5 else rng.randint(0, 40)))
        )  # fmt: skip
        fields.insert(i, Field(number, wire, value))
    elif kind == "resize" and f.wire == 2 and isinstance(f.value, bytes):
        n = len(f.value)
        new = rng.choice([0, 1, max(0, n - 1), max(0, n - 4), n + 1, n + 4, n * 2, n + 4096])
        fields[i] = Field(f.number, 2, (f.value * (new // max(n, 1) + 1))[:new] if n else b"\x00" * new)
    elif kind in ("length", "overlong", "wire"):
        # changes the encoding itself: splice the re-encoded message by hand
        before, after = encode_fields(fields[:i]), encode_fields(fields[i + 1 :])
        key = varint(f.number << 3 | f.wire)
        if kind == "wire":
            key = varint(f.number << 3 | rng.choice([w for w in range(8) if w != f.wire]))
        body = encode_fields([f])[len(varint(f.number << 3 | f.wire)) :]
        if kind == "length" and f.wire == 2:
            body = varint(rng.choice(INTERESTING_INTS + [len(f.value) + 1, len(f.value) + 1000])) + f.value  # type: ignore[arg-type]
        elif kind == "overlong" and f.wire in (0, 2):
            head = body[: _varint_len(body)]
            body = bytes(b | 0x80 for b in head) + b"\x80" * rng.randint(1, 12) + b"\x00" + body[len(head) :]
        return before + key + body + after
    return encode_fields(fields)


def _varint_len(buf: bytes) -> int:
    for i, b in enumerate(buf):
        if not b & 0x80:
            return i + 1
    return len(buf)


def _is_message(buf: bytes) -> bool:
    try:
        fields = parse_fields(buf)
    except ValueError:
        return False
    return bool(fields) and all(1 <= f.number < 64 for f in fields)


# ---------------------------------------------------------------- mutators


def flip_bytes(rng: random.Random, data: bytes, n: int) -> bytes:
    out = bytearray(data)
    for _ in range(n):
        pos = rng.randrange(len(out))
        if rng.random() < 0.5:
            out[pos] ^= 1 << rng.randrange(8)
        else:
            out[pos] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
    return bytes(out)


def m_flip(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    n = rng.choice([1, 1, 2, 4, 16])
    return flip_bytes(rng, data, n), f"{n} byte(s) changed"


def m_truncate(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    cut = rng.choice([rng.randrange(len(data)), len(data) - rng.randint(1, 100), rng.randint(0, 64)])
    cut = max(0, min(len(data) - 1, cut))
    return data[:cut], f"cut at {cut} of {len(data)}"


LOCAL = [("version", 4, 2), ("flags", 6, 2), ("method", 8, 2), ("crc", 14, 4), ("csize", 18, 4), ("usize", 22, 4),
         ("namelen", 26, 2), ("extralen", 28, 2)]  # fmt: skip
CENTRAL = [("version_needed", 6, 2), ("flags", 8, 2), ("method", 10, 2), ("crc", 16, 4), ("csize", 20, 4),
           ("usize", 24, 4), ("namelen", 28, 2), ("extralen", 30, 2), ("commentlen", 32, 2), ("disk", 34, 2),
           ("offset", 42, 4)]  # fmt: skip
EOCD = [("disk", 4, 2), ("cd_disk", 6, 2), ("entries_disk", 8, 2), ("entries", 10, 2), ("cd_size", 12, 4),
        ("cd_offset", 16, 4), ("commentlen", 20, 2)]  # fmt: skip


def zip_fields(data: bytes) -> list[tuple[str, int, int]]:
    """Every header field of the archive: (what, offset, width)."""
    out: list[tuple[str, int, int]] = []
    end = data.rfind(b"PK\x05\x06")
    if end < 0:
        return out
    out += [(f"eocd.{n}", end + o, w) for n, o, w in EOCD]
    count, cd_offset = struct.unpack_from("<HxxxxI", data, end + 10)
    pos = cd_offset
    for k in range(count):
        if data[pos : pos + 4] != b"PK\x01\x02":
            break
        out += [(f"central[{k}].{n}", pos + o, w) for n, o, w in CENTRAL]
        namelen, extralen, commentlen = struct.unpack_from("<HHH", data, pos + 28)
        (local,) = struct.unpack_from("<I", data, pos + 42)
        if data[local : local + 4] == b"PK\x03\x04":
            out += [(f"local[{k}].{n}", local + o, w) for n, o, w in LOCAL]
        pos += 46 + namelen + extralen + commentlen
    return out


def m_zipfield(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    fields = zip_fields(data)
    if not fields:
        return m_flip(rng, data)
    what, off, width = rng.choice(fields)
    old = int.from_bytes(data[off : off + width], "little")
    top = (1 << (8 * width)) - 1
    new = rng.choice([0, 1, top, top - 1, 1 << (8 * width - 1), old + 1, old - 1, old * 2, len(data), len(data) - off,
                      len(data) + 1, rng.randrange(top + 1), 8, 0x0800, 12, 99])  # fmt: skip
    new &= top
    out = bytearray(data)
    out[off : off + width] = new.to_bytes(width, "little")
    return bytes(out), f"{what} {old} -> {new}"


JSON_VALUES: list[object] = [None, True, False, 0, -1, 1, 2, 3, 2**31, 2**63, 2**64 + 1, -(2**70), 1.5, 1e308, -0.0,
    "", "x", "model.onnx", "../x", "/etc/hostname", "test_data_set_0/input_0.pb", "float16", "str",
    "seq(tensor(float))", "map(int64,tensor(float))", "optional(tensor(float))", "a" * 5000, "\u00e9\u4e2d", [],
    {}, [None], {"": None}, [1, 2, 3], {"name": "x"}, "p99", "mean", "max", "nan", "0" * 64, "f" * 64]  # fmt: skip


def _paths(value: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


def m_manifest(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    members = read_zip(data)
    manifest = json.loads(members[0][1])
    if rng.random() < 0.25:  # damage the text itself
        text = members[0][1]
        kind = rng.choice(["deep", "nan", "dupkey", "utf8", "cut", "bom", "bignum", "garbage"])
        if kind == "deep":
            depth = rng.choice([100, 1000, 100000, 1000000])
            opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
            text = text.replace(
                b'"seed": ', b'"seed": ' + (opener * depth + "1" + closer * depth).encode() + b', "s": ', 1
            )
        elif kind == "nan":
            text = re.sub(rb'"maxerr": [0-9.e-]+', rng.choice([b'"maxerr": NaN', b'"maxerr": Infinity', b'"maxerr": 1e999', b'"maxerr": -1e-999']), text, count=1)  # fmt: skip
        elif kind == "dupkey":
            text = text.replace(b'"format_version": ', b'"format_version": 7, "format_version": ', 1)
        elif kind == "utf8":
            pos = rng.randrange(len(text))
            text = text[:pos] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\\ud800"]) + text[pos:]
        elif kind == "cut":
            text = text[: rng.randrange(len(text))]
        elif kind == "bom":
            text = b"\xef\xbb\xbf" + text
        elif kind == "bignum":
            text = text.replace(b'"seed": 0', b'"seed": ' + b"9" * rng.choice([20, 400, 100000]), 1)
        else:
            text = text + rng.choice([b"x", b"{}", b"\x00", b" " * 100])
        return write_zip([(members[0][0], text), *members[1:]]), f"manifest text: {kind}"
    paths = [p for p in _paths(manifest) if p]
    path = rng.choice(paths)
    parent = manifest
    for key in path[:-1]:
        parent = parent[key]
    if rng.random() < 0.2:
        del parent[path[-1]]
        what = "deleted"
    else:
        value = rng.choice(JSON_VALUES)
        if isinstance(parent[path[-1]], list) and parent[path[-1]] and rng.random() < 0.5:
            value = parent[path[-1]] * rng.choice([0, 2, 3000])  # emptied or repeated (a member read many times)
        parent[path[-1]] = value
        what = f"= {json.dumps(value)[:40]}"
    text = json.dumps(manifest, indent=1, sort_keys=True).encode() + b"\n"
    return write_zip([(members[0][0], text), *members[1:]]), f"manifest {'.'.join(map(str, path))} {what}"


def m_tensor(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    members = read_zip(data)
    pbs = [i for i, (name, _) in enumerate(members) if name.endswith(".pb") and not name.startswith("io_dump/")]
    if not pbs:
        return m_flip(rng, data)
    i = rng.choice(pbs)
    name, body = members[i]
    times = rng.choice([1, 1, 1, 2, 3])
    for _ in range(times):
        body = mutate_message(rng, body)
    members[i] = (name, body)
    return write_zip(fix_manifest(members)), f"tensor {name} ({times} change(s), hash fixed)"


HOSTILE_NAMES = ["../model.onnx", "/etc/hostname", "a/../../b", "./model.onnx", "test_data_set_0//input_0.pb",
                 "C:x", "x\\y", "model.onnx/x", "MODEL.ONNX", "test_data_set_0", "mgedump.json", "model.onnx.data",
                 "..", ".", "", "a" * 300, "test_data_set_0/input_0.pb/x"]  # fmt: skip


def m_names(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    members = read_zip(data)
    i = rng.randrange(1, len(members))
    old = members[i][0]
    new = rng.choice(HOSTILE_NAMES + [members[rng.randrange(len(members))][0]])
    if rng.random() < 0.5:  # renamed in the manifest too, so that only the name is wrong
        text = members[0][1].replace(json.dumps(old).encode(), json.dumps(new).encode())
        members[0] = (members[0][0], text)
    members[i] = (new, members[i][1])
    return write_zip(members), f"member {old} renamed {new!r}"


def m_member(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    members = read_zip(data)
    i = rng.randrange(1, len(members))
    name, body = members[i]
    if body and rng.random() < 0.7:
        body = flip_bytes(rng, body, rng.choice([1, 4, 32]))
    else:
        body = body[: rng.randrange(len(body) + 1)]
    members[i] = (name, body)
    return write_zip(fix_manifest(members)), f"member {name} changed (hash fixed)"


def _relocate(fields: list[Field], new: bytes) -> list[Field]:
    """The model's fields with every string "model.onnx.data" replaced by ``new``, length prefixes re-encoded
    (ModelProto.graph -> initializer -> external_data -> its value, or any nesting)."""
    out = []
    for f in fields:
        if f.wire == 2 and isinstance(f.value, bytes):
            if f.value == b"model.onnx.data":
                f = Field(f.number, 2, new)
            elif b"model.onnx.data" in f.value and _is_message(f.value):
                f = Field(f.number, 2, encode_fields(_relocate(parse_fields(f.value), new)))
        out.append(f)
    return out


LOCATIONS = ["/etc/hostname", "../../../../../../../../etc/hostname", "../model.onnx.data", "model.onnx",
             "mgedump.json", "test_data_set_0/input_0.pb", "./model.onnx.data", "model.onnx.data/..", "",
             "model.onnx.dat", "sub/../model.onnx.data", "/proc/self/mem"]  # fmt: skip


def m_external(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    members = read_zip(data)
    names = [n for n, _ in members]
    if "model.onnx.data" not in names:
        return m_member(rng, data)
    i = names.index("model.onnx")
    new = rng.choice(LOCATIONS)
    members[i] = ("model.onnx", encode_fields(_relocate(parse_fields(members[i][1]), new.encode())))
    return write_zip(fix_manifest(members)), f"external data location {new!r} (hash fixed)"


MUTATE = {
    "flip": m_flip,
    "truncate": m_truncate,
    "zipfield": m_zipfield,
    "manifest": m_manifest,
    "tensor": m_tensor,
    "names": m_names,
    "member": m_member,
    "external": m_external,
}


def make_case(seeds: dict[str, bytes], seed: int, index: int) -> tuple[str, str, str, bytes]:
    """Mutation ``index`` of run ``seed``: (seed bundle, mutator, what changed, the bytes)."""
    rng = random.Random(f"{seed}:{index}")
    base = rng.choice(sorted(seeds))
    kind = rng.choices(list(MUTATORS), weights=list(MUTATORS.values()))[0]
    if kind == "external" and base != "external" and "external" in seeds:
        base = "external"
    data, what = MUTATE[kind](rng, seeds[base])
    return base, kind, what, data


# ---------------------------------------------------------------- running


@dataclass
class Outcome:
    index: int
    base: str
    kind: str
    what: str
    code: int | None  # None: timed out
    seconds: float
    stderr: str
    stdout: str = ""
    problems: list[str] = field(default_factory=list)
    traced: bool = False
    compared: bool = False
    differences: list[str] = field(default_factory=list)  # from mgerun's verdict on the same bundle


ALLOWED_READ = ("/etc/ld.so.cache", "/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/local/lib/", "/proc/",
                "/sys/", "/dev/urandom", "/dev/null", "/usr/aarch64-linux-gnu/", "/etc/ld.so.preload",
                "/usr/share/zoneinfo/", "/etc/localtime", "/etc/os-release", "/usr/lib/os-release")  # fmt: skip
SHARED_LIBRARY = re.compile(r"/lib[^/]*\.so(\.\d+)*$")
OPEN_LINE = re.compile(
    r'^\d+\s+(open|openat|openat2|creat)\((?:AT_FDCWD|\d+)?,?\s*"((?:[^"\\]|\\.)*)"(?:,\s*([A-Z_|]+))?'
)


def refusal_shape(stderr: str) -> str:
    """A refusal's first line with its paths, quoted names and numbers taken out: which check refused."""
    lines = stderr.strip().splitlines()
    line = lines[0] if lines else ""
    line = re.sub(r"^[\w.-]+: error: ", "", line)
    line = re.sub(r"^\S+\.mgetest(:\S+)?: ", "", line)
    line = re.sub(r"'[^']*'", "'…'", line)
    line = re.sub(r"\d+", "N", line)
    return line[:120]


def check_trace(trace: str, allowed: list[str], writable: str) -> list[str]:
    """Files a run opened that it had no business opening."""
    bad = []
    for line in trace.splitlines():
        m = OPEN_LINE.match(line)
        if not m or line.rstrip().endswith(("ENOENT (No such file or directory)", "ENOTDIR (Not a directory)")):
            continue
        path, flags = m.group(2), m.group(3) or ""
        real = os.path.normpath(path)
        if real == writable or real.startswith(writable + os.sep):
            continue
        writes = any(flag in flags for flag in ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC")) or m.group(1) == "creat"
        if not writes and (
            real in allowed
            or real.startswith(ALLOWED_READ)
            or any(real.startswith(a + os.sep) for a in allowed)
            or "O_DIRECTORY" in flags  # a folder listed (onnxruntime's library looked for), no file's bytes read
            or SHARED_LIBRARY.search(real)  # a library the loader or the onnxruntime search opens
        ):
            continue
        bad.append(f"opened {path} ({flags or m.group(1)})")
    return bad


class Runner:
    def __init__(self, args: argparse.Namespace, work: Path, variants: dict[str, int]):
        self.binary = os.path.abspath(args.binary)
        self.prefix = shlex.split(args.prefix or "")
        self.ort_lib = args.ort_lib
        self.timeout = args.timeout
        self.strace_every = args.strace_every if shutil.which("strace") else 0
        self.work = work
        self.variants = variants
        self.allowed = [os.path.dirname(os.path.realpath(self.binary))]
        for lib in (self.ort_lib, os.environ.get("MGERUN_ORT_LIB")):
            if lib:
                self.allowed.append(os.path.dirname(os.path.realpath(lib)))
        self.extra_allowed = [os.path.realpath(p) for p in (args.allow_read or [])]
        self.allowed += self.extra_allowed
        self.compare_every = args.compare_every
        self.harness = None
        if self.compare_every:
            sys.path.insert(0, str(ROOT))
            from tests.native import harness  # the conformance corpus's comparison (docs/native.md)

            self.harness = harness

    def run(self, index: int, base: str, kind: str, what: str, data: bytes) -> Outcome:
        folder = Path(tempfile.mkdtemp(prefix=f"case{index}-", dir=self.work))
        try:
            return self._run(folder, index, base, kind, what, data)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _run(self, folder: Path, index: int, base: str, kind: str, what: str, data: bytes) -> Outcome:
        bundle = folder / "case.mgetest"
        bundle.write_bytes(data)
        tmp = folder / "tmp"
        tmp.mkdir()
        cmd = [*self.prefix, self.binary, str(bundle), "--iter", "1", "--warmup-iter", "0", "--silent"]
        if self.ort_lib:
            cmd += ["--ort-lib", self.ort_lib]
        traced = bool(self.strace_every) and index % self.strace_every == 0
        trace_file = folder / "trace.txt"
        if traced:
            cmd = ["strace", "-f", "-qq", "-e", "trace=open,openat,openat2,creat", "-o", str(trace_file), *cmd]
        env = {**os.environ, "TMPDIR": str(tmp), **SAN_ENV}
        # onnxruntime 1.32's own usage records (a session file in TMPDIR, a database under ~/.cache) are not the
        # program's: switched off (the library reads ORT_DISABLE_TELEMETRY) so that what is left is the program's
        env.setdefault("ORT_DISABLE_TELEMETRY", "1")
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, cwd=folder, start_new_session=True)  # fmt: skip
        try:
            out, err = proc.communicate(timeout=self.timeout)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            code = None
        seconds = time.perf_counter() - start
        text = err.decode("utf-8", "replace")
        if self.prefix:
            text = EMULATION_NOISE.sub("", text)
        outcome = Outcome(index, base, kind, what, code, seconds, text, out.decode("utf-8", "replace"), traced=traced)
        p = outcome.problems
        if code is None:
            p.append(f"no end within {self.timeout} s")
        elif code < 0:
            p.append(f"killed by signal {signal.Signals(-code).name}")
        elif code in (ASAN_EXIT, UBSAN_EXIT):
            p.append("sanitizer report")
        elif code not in (0, 1, 2):
            p.append(f"exit code {code}")
        if SANITIZER.search(text) and "sanitizer report" not in p:
            p.append("sanitizer report")
        if code == 2:
            lines = [line for line in text.splitlines() if line.strip()]
            runs = self.variants.get(base, 1)
            if not lines:
                p.append("refused with nothing on stderr")
            elif len(lines) > runs or len(set(lines)) > 1:
                p.append(f"refusal of {len(lines)} lines on stderr")
        left = sorted(os.listdir(tmp))
        if left:
            p.append(f"left in TMPDIR: {left[:3]}")
        beside = sorted(set(os.listdir(folder)) - {"case.mgetest", "tmp", "trace.txt"})
        if beside:
            p.append(f"wrote beside the bundle: {beside[:3]}")
        if traced and trace_file.exists():
            allowed = [str(bundle), *self.allowed]
            p += check_trace(trace_file.read_text(errors="replace"), allowed, str(tmp))[:5]
        if self.harness and code is not None and index % self.compare_every == 0:
            outcome.compared = True
            args = [str(bundle), "--iter", "1", "--warmup-iter", "0", "--silent"]
            reference = subprocess.run([self.mgerun, *args], capture_output=True, text=True, cwd=folder, env=env)
            mine = self.harness.Outcome(code, outcome.stdout, text)
            theirs = self.harness.Outcome(reference.returncode, reference.stdout, reference.stderr)
            outcome.differences = self.harness.differences(theirs, mine)
        return outcome

    @property
    def mgerun(self) -> str:
        return shutil.which("mgerun", path=os.path.dirname(sys.executable)) or shutil.which("mgerun") or "mgerun"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=os.environ.get("MGERUN_NATIVE") or shutil.which("mgerun-native"))
    parser.add_argument("--prefix", default=os.environ.get("MGERUN_NATIVE_PREFIX", ""),
                        help="a runner put before the binary, e.g. 'qemu-aarch64 -L /usr/aarch64-linux-gnu'")  # fmt: skip
    parser.add_argument("--ort-lib", default=None, help="passed on as --ort-lib")
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds one run may take")
    parser.add_argument("--budget", type=float, default=3600.0, help="seconds for the whole run: no new case after")
    parser.add_argument("--strace-every", type=int, default=25, help="every N-th run under strace (0: none)")
    parser.add_argument("--compare-every", type=int, default=0,
                        help="every N-th run also by mgerun: its verdict must be the same (0: none)")  # fmt: skip
    parser.add_argument("--allow-read", action="append", help="one more folder a run may read (repeatable)")
    parser.add_argument("--seeds", default=None, help="comma-separated seed bundles to use (default: all)")
    parser.add_argument("--work", default=None, help="folder for the seed bundles and the runs (default: a temp one)")
    parser.add_argument("--json", default=None, help="write every finding and the figures here")
    parser.add_argument("--write-case", nargs=2, metavar=("INDEX", "PATH"), help="write one mutation and stop")
    args = parser.parse_args(argv)

    own_work = args.work is None
    work = Path(args.work or tempfile.mkdtemp(prefix="native-fuzz-")).resolve()
    try:
        seeds = pack_seeds(work / "seeds", args.seeds.split(",") if args.seeds else None)
        if args.write_case:
            base, kind, what, data = make_case(seeds, args.seed, int(args.write_case[0]))
            Path(args.write_case[1]).write_bytes(data)
            print(f"case {args.write_case[0]}: {base}, {kind}: {what}")
            return 0
        if not args.binary or not os.path.exists(args.binary):
            parser.error("no mgerun-native: give --binary or MGERUN_NATIVE")
        variants = {
            name: max(1, len(json.loads(read_zip(data)[0][1]).get("variants", []))) for name, data in seeds.items()
        }
        runner = Runner(args, work, variants)
        return _fuzz(args, seeds, runner)
    finally:
        if own_work:
            shutil.rmtree(work, ignore_errors=True)


def _fuzz(args: argparse.Namespace, seeds: dict[str, bytes], runner: Runner) -> int:
    start = time.perf_counter()
    deadline = start + args.budget
    done: list[Outcome] = []
    findings: list[Outcome] = []
    differing: list[Outcome] = []
    stop = threading.Event()

    def one(index: int) -> Outcome | None:
        if stop.is_set() or time.perf_counter() > deadline:
            stop.set()
            return None
        base, kind, what, data = make_case(seeds, args.seed, index)
        return runner.run(index, base, kind, what, data)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for outcome in pool.map(one, range(args.count)):
            if outcome is None:
                continue
            done.append(outcome)
            if outcome.problems:
                findings.append(outcome)
                first = outcome.stderr.strip().splitlines()[:1]
                print(f"FINDING {outcome.index} [{outcome.base}, {outcome.kind}: {outcome.what}]: "
                      f"{'; '.join(outcome.problems)} | {first[0][:200] if first else ''}", flush=True)  # fmt: skip
            if outcome.differences:
                differing.append(outcome)
                print(f"DIFFERENCE {outcome.index} [{outcome.base}, {outcome.kind}: {outcome.what}]: "
                      f"{' / '.join(d.splitlines()[0] for d in outcome.differences)[:300]}", flush=True)  # fmt: skip
            if len(done) % 1000 == 0:
                print(
                    f"... {len(done)} runs, {time.perf_counter() - start:.0f} s, {len(findings)} finding(s)", flush=True
                )
    wall = time.perf_counter() - start
    codes = Counter("timeout" if o.code is None else str(o.code) for o in done)
    kinds = Counter(o.kind for o in done)
    slowest = max((o.seconds for o in done), default=0.0)
    traced = sum(o.traced for o in done)
    print(f"{len(done)} runs of {args.count} in {wall:.0f} s ({args.jobs} at a time, seed {args.seed}); "
          f"exit codes {dict(sorted(codes.items()))}; slowest run {slowest:.2f} s; {traced} under strace")  # fmt: skip
    print(f"mutations: {dict(sorted(kinds.items()))}")
    compared = sum(o.compared for o in done)
    if compared:
        print(f"{compared} run(s) also by mgerun: {len(differing)} with a different verdict")
    refusals = Counter(refusal_shape(o.stderr) for o in done if o.code == 2)
    print(f"{len(findings)} finding(s)")
    if args.json:
        report = {
            "runs": len(done),
            "asked": args.count,
            "seconds": round(wall, 1),
            "seed": args.seed,
            "jobs": args.jobs,
            "exit_codes": dict(codes),
            "mutations": dict(kinds),
            "slowest_run_seconds": round(slowest, 2),
            "traced": traced,
            "compared": compared,
            "refusals": dict(refusals.most_common(60)),
            "differences": [
                {
                    "index": o.index,
                    "seed_bundle": o.base,
                    "mutation": o.kind,
                    "what": o.what,
                    "differences": o.differences,
                }
                for o in differing
            ],
            "findings": [
                {
                    "index": o.index,
                    "seed_bundle": o.base,
                    "mutation": o.kind,
                    "what": o.what,
                    "exit_code": o.code,
                    "problems": o.problems,
                    "stderr": o.stderr[-2000:],
                }  # fmt: skip
                for o in findings
            ],
        }
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    incomplete = len(done) < args.count
    if incomplete:
        print(f"stopped at the budget ({args.budget:.0f} s): {len(done)} of {args.count} runs")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
