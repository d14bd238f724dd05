"""Hostile and awkward input, by class: every case exits 2 with one line and no traceback, and no file changes.

Each case is one row: the command, a builder that makes its files in the test's own temporary folder and
returns the arguments, and a piece of the one line the command must print. Around every case the folder is
snapshot with ``lstat`` (a FIFO, device or socket is never opened): afterwards every file, link and node
must be as it was, byte for byte, and no new file may be left behind. FIFOs are watched, so a command that
opens one blocks only a few seconds and then fails its case instead of hanging the suite.

The cases that once allocated tens of GiB run in ``test_hostile_memory.py``, under an address-space limit.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests import crafted
from tests.support import SAMPLES, rewrite_bundle, run_ok

SENTINEL = b"existing output, must survive\n"


# ---------------------------------------------------------------- the files a case starts from


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> Path:
    """Made once for the module: a good bundle of cnn.onnx, and an io dump of it."""
    folder = tmp_path_factory.mktemp("assets")
    run_ok("mgedump", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", folder / "b.mgetest", "-q")
    run_ok("mgerun", folder / "b.mgetest", "--iter", "1", "--io-dump", folder / "dump", "-q", "--silent")
    _ASSETS["root"] = folder
    return folder


_ASSETS: dict[str, Path] = {}


def model(t: Path, name: str = "m.onnx") -> Path:
    """cnn.onnx, copied into the case's folder."""
    return _copy(SAMPLES / "cnn.onnx", t / name)


def bundle(t: Path, name: str = "b.mgetest") -> Path:
    """A good bundle of cnn.onnx, copied into the case's folder."""
    return _copy(_ASSETS["root"] / "b.mgetest", t / name)


def dump(t: Path) -> Path:
    target = t / "dump"
    if not target.exists():
        shutil.copytree(_ASSETS["root"] / "dump", target)
    return target


def data(t: Path, name: str = "in.npy") -> Path:
    """A valid input of cnn.onnx as .npy."""
    path = t / name
    if not path.exists():
        np.save(path, np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32))
    return path


def listing(t: Path, name: str = "l.txt") -> Path:
    """A list file naming the .npy of :func:`data`."""
    path = t / name
    if not path.exists():
        path.write_text(f"# one test case\n{data(t)}\n", encoding="utf-8")
    return path


def bundle_with(t: Path, edit, **kwargs) -> Path:
    return rewrite_bundle(bundle(t, "good.mgetest"), t / "e.mgetest", edit, **kwargs)


def raw_bundle(t: Path, **replace: bytes) -> Path:
    """The good bundle's members with some replaced by raw bytes (``mgedump_json=b'...'`` for the manifest)."""
    members = crafted.read_members(bundle(t, "good.mgetest"))
    for key, value in replace.items():
        members[key.replace("mgedump_json", "mgedump.json")] = value
    return crafted.zip_members(t / "e.mgetest", members)


def _copy(src: Path, dst: Path) -> Path:
    if not dst.exists():
        shutil.copyfile(src, dst)
    return dst


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def chardev(path: Path) -> Path:
    """A character device node (the null device's numbers) inside the test's folder."""
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    return path


def unix_socket(path: Path) -> Path:
    here = os.getcwd()
    os.chdir(path.parent)  # socket paths are limited to about 100 bytes: bind by the short relative name
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(path.name)
    finally:
        os.chdir(here)
    return path


def folder(path: Path) -> Path:
    path.mkdir()
    return path


def link(path: Path, to: Path) -> Path:
    path.symlink_to(to)
    return path


# ---------------------------------------------------------------- snapshots and the FIFO watch


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under root, by lstat: a file's sha256, a link's target, a node's type and device numbers."""
    entries = {}
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(here, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    entries[os.path.relpath(path, root)] = ("file", hashlib.sha256(f.read()).hexdigest())
            elif stat.S_ISLNK(st.st_mode):
                entries[os.path.relpath(path, root)] = ("link", os.readlink(path))
            else:
                entries[os.path.relpath(path, root)] = (stat.S_IFMT(st.st_mode), st.st_rdev)
    return entries


class FifoWatch:
    """After a grace period, opens the other end of every FIFO under a folder, so a command blocked on one
    goes on (and fails its case) instead of hanging; records that it had to."""

    def __init__(self, root: Path, grace: float = 5.0) -> None:
        self.fifos = [
            os.path.join(here, n) for here, _, names in os.walk(root) for n in names if _is_fifo(os.path.join(here, n))
        ]
        self.grace, self.stop, self.blocked = grace, threading.Event(), []
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> FifoWatch:
        if self.fifos:
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        if self.fifos:
            self.thread.join()

    def _watch(self) -> None:
        if self.stop.wait(self.grace):
            return
        while not self.stop.wait(0.05):
            for path in self.fifos:
                for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
                    try:
                        fd = os.open(path, flags)
                    except OSError:
                        continue  # nobody holds the other end
                    if flags & os.O_WRONLY:
                        self.blocked.append(path)  # a reader was waiting
                    os.close(fd)


def _is_fifo(path: str) -> bool:
    return stat.S_ISFIFO(os.lstat(path).st_mode)


# ---------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Case:
    id: str
    prog: str  # mgedump, mgerun or mgediff
    build: Callable[[Path], list]
    needle: str


def case(id: str, prog: str, build: Callable[[Path], list], needle: str) -> Case:
    return Case(id, prog, build, needle)


def file_case(id: str, name: str, payload: bytes | Callable[[Path], bytes], needle: str, *flags: str) -> Case:
    """mgedump on cnn.onnx with one crafted data file (its bytes, or made from the case's folder) as the test case."""

    def build(t: Path) -> list:
        data = payload(t) if callable(payload) else payload
        return [model(t), "-d", crafted.write(t / name, data), *flags]

    return Case(id, "mgedump", build, needle)


# -- outputs: never anything but a regular file (or a folder where a folder is written), never an input

_NODES = {
    "fifo": (fifo, "is a FIFO"),
    "chardev": (chardev, "is a character device"),
    "socket": (unix_socket, "is a socket"),
}


def _d(t: Path) -> list:
    """The data arguments of an output case: a list file naming a .npy."""
    return ["-d", f"@{listing(t)}"]


_CAT = SAMPLES / "images" / "cat.png"


def _file_output_cases() -> list[Case]:
    """Every flag that writes a file, aimed at every kind of thing that is not a new or regular file."""
    # (flag id, program, output file name, args(t, out, model, data args) -> list)
    flags = [
        ("mgedump-o", "mgedump", "o.mgetest", lambda t, out, m, d: [m, *d, "-o", out]),
        (
            "mgedump-strip-json",
            "mgedump",
            "o.mgetest.json",
            lambda t, out, m, d: [m, *d, "-o", str(out).removesuffix(".json"), "--output-strip-info"],
        ),
        (
            "mgedump-strip-config",
            "mgedump",
            "o.required_operators.config",
            lambda t, out, m, d: [
                m,
                *d,
                "-o",
                str(out).removesuffix(".required_operators.config"),
                "--output-strip-info",
            ],
        ),
        ("mgedump-model-out", "mgedump", "o16.onnx", lambda t, out, m, d: [m, *d, "--output-model", out]),
        ("mgerun-report", "mgerun", "r.json", lambda t, out, m, d: [m, *d, "--report-json", out]),
        ("mgerun-profile", "mgerun", "p.json", lambda t, out, m, d: [m, *d, "--profile", out]),
        ("mgerun-junit", "mgerun", "j.xml", lambda t, out, m, d: [m, *d, "--junit-xml", out]),
        ("mgerun-html", "mgerun", "r.html", lambda t, out, m, d: [m, *d, "--report-html", out]),
        ("mgediff-report", "mgediff", "r.json", lambda t, out, m, d: [m, m, *d, "--report-json", out]),
    ]
    cases = []
    for flag, prog, name, args in flags:
        for kind, (make, needle) in {**_NODES, "folder": (folder, "is a folder")}.items():
            cases.append(
                case(
                    f"{flag}-{kind}", prog, lambda t, a=args, mk=make, n=name: a(t, mk(t / n), model(t), _d(t)), needle
                )
            )
        # the output is one of the inputs: the model, an image read as data, the list file; or a link to the model
        cases += [
            case(
                f"{flag}-is-model",
                prog,
                lambda t, a=args, n=name: a(t, model(t, n), model(t, n), _d(t)),
                "is the input",
            ),
            case(
                f"{flag}-is-data",
                prog,
                lambda t, a=args, n=name: a(t, t / n, model(t), ["-d", _copy(_CAT, t / n), "--resize-input"]),
                "is the input",
            ),
            case(f"{flag}-is-list", prog, lambda t, a=args: a(t, listing(t), model(t), _d(t)), "is the input"),
            case(
                f"{flag}-links-to-model",
                prog,
                lambda t, a=args, n=name: a(t, link(t / n, model(t)), model(t), _d(t)),
                "is the input",
            ),
        ]
    # a bundle is mgerun's and mgediff's input too
    cases += [
        case("mgerun-report-is-bundle", "mgerun", lambda t: [bundle(t), "--report-json", bundle(t)], "is the input"),
        case("mgerun-profile-is-bundle", "mgerun", lambda t: [bundle(t), "--profile", bundle(t)], "is the input"),
        case(
            "mgerun-report-links-to-bundle",
            "mgerun",
            lambda t: [bundle(t), "--report-json", link(t / "r.json", bundle(t))],
            "is the input",
        ),
        case(
            "mgediff-report-is-bundle",
            "mgediff",
            lambda t: [model(t), bundle(t), "--report-json", bundle(t)],
            "is the input",
        ),
        case(
            "mgediff-report-in-dump",
            "mgediff",
            lambda t: [dump(t), bundle(t), "--report-json", dump(t) / "test_data_set_0" / "0001.pb"],
            "is the input",
        ),
    ]
    return cases


def _folder_output_cases() -> list[Case]:
    """The flags that write a folder, aimed at a FIFO, a device, a socket, a file, and the bundle itself."""
    cases = []
    for flag in ("--bin-out-dump", "--io-dump"):
        flag_id = flag.strip("-")
        for kind, (make, needle) in _NODES.items():
            cases.append(
                case(f"{flag_id}-{kind}", "mgerun", lambda t, f=flag, mk=make: [bundle(t), f, mk(t / "d")], needle)
            )
        cases += [
            case(f"{flag_id}-is-bundle", "mgerun", lambda t, f=flag: [bundle(t), f, bundle(t)], "is a file"),
            case(
                f"{flag_id}-links-to-fifo",
                "mgerun",
                lambda t, f=flag: [bundle(t), f, link(t / "d", fifo(t / "q"))],
                "is a FIFO",
            ),
        ]
    return cases


# -- files read as inputs: models, bundles, list files, data files of every kind

_NOT_A_FILE = {"fifo": fifo, "chardev": chardev, "socket": unix_socket, "folder": folder}


def _input_node_cases() -> list[Case]:
    """A FIFO, a device, a socket or a folder where a model, a bundle, a list or a data file should be."""
    cases = []
    for kind, make in _NOT_A_FILE.items():
        cases += [
            case(f"model-{kind}", "mgedump", lambda t, mk=make: [mk(t / "m.onnx"), "-d", "#rand(0,1)"], "m.onnx"),
            case(f"bundle-{kind}", "mgerun", lambda t, mk=make: [mk(t / "b.mgetest")], "b.mgetest"),
            case(f"plain-model-{kind}", "mgerun", lambda t, mk=make: [mk(t / "m.onnx"), "-d", "#rand(0,1)"], "m.onnx"),
            case(
                f"list-{kind}",
                "mgedump",
                lambda t, mk=make: [model(t), "-d", f"@{mk(t / 'l.txt')}"],
                "is not a regular file",
            ),
            case(f"npy-{kind}", "mgedump", lambda t, mk=make: [model(t), "-d", mk(t / "x.npy")], "x.npy"),
            case(f"image-{kind}", "mgedump", lambda t, mk=make: [model(t), "-d", mk(t / "x.png")], "x.png"),
        ]
        if kind != "folder":  # a folder is an io dump to mgediff
            cases.append(
                case(f"mgediff-side-{kind}", "mgediff", lambda t, mk=make: [model(t), mk(t / "b.onnx")], "b.onnx")
            )
    return cases


def _at(path: Path) -> str:
    return f"@{path}"


def _big_list(t: Path) -> Path:
    path = t / "big.txt"
    line = b"#rand(0,1)\n"
    with open(path, "wb") as f:
        f.write(line * ((65 << 20) // len(line)))
    return path


def _self_list(t: Path) -> Path:
    path = t / "self.txt"
    path.write_text(f"@{path}\n", encoding="utf-8")
    return path


LIST_CASES = [
    case("list-over-64-mib", "mgedump", lambda t: [model(t), "-d", f"@{_big_list(t)}"], "64 MiB"),
    case("list-includes-itself", "mgedump", lambda t: [model(t), "-d", f"@{_self_list(t)}"], "other list files"),
    case(
        "list-only-comments",
        "mgedump",
        lambda t: [model(t), "-d", _at(crafted.write(t / "c.txt", b"# nothing\n\n   \n"))],
        "c.txt",
    ),
    case(
        "list-not-utf8",
        "mgedump",
        lambda t: [model(t), "-d", _at(crafted.write(t / "c.txt", b"#rand(0,1)\n\xff\xfe\n"))],
        "not UTF-8",
    ),
    case(
        "list-with-nul",
        "mgedump",
        lambda t: [model(t), "-d", _at(crafted.write(t / "c.txt", b"#rand(0,1)\x00\n"))],
        "c.txt",
    ),
    case(
        "list-names-missing-file",
        "mgedump",
        lambda t: [model(t), "-d", _at(crafted.write(t / "c.txt", b"nope.npy\n"))],
        "data file not found",
    ),
]

_F4 = np.zeros(3 * 32 * 32, np.float32).tobytes()

NPY_CASES = [
    file_case("npy-declares-2^40", "x.npy", crafted.npy_bytes("<f4", (1 << 40,), b"\0" * 64), "truncated or crafted"),
    file_case(
        "npy-declares-more-than-it-holds",
        "x.npy",
        crafted.npy_bytes("<f4", (1, 3, 32, 32), _F4[:-4]),
        "truncated or crafted",
    ),
    file_case(
        "npy-structured",
        "x.npy",
        crafted.npy_bytes([("a", "<f4"), ("b", "<i4")], (2,), b"\0" * 16),
        "structured records",
    ),
    file_case("npy-void", "x.npy", crafted.npy_bytes("|V8", (2,), b"\0" * 16), "structured records"),
    file_case("npy-object", "x.npy", crafted.npy_bytes("|O", (1,), b"\x80\x04N."), "pickled"),
    file_case("npy-subarray-dtype", "x.npy", crafted.npy_bytes(("<f4", (3,)), (1,), b"\0" * 12), "x.npy"),
    case(
        "npy-version-3",
        "mgedump",
        lambda t: [
            model(t),
            "-d",
            crafted.write(
                t / "x.npy", crafted.npy_bytes("<f4", (1,), b"\0" * 4, version=2)[:6] + b"\x09\x00" + b"\0" * 60
            ),
        ],
        "x.npy",
    ),
    file_case("npy-header-not-a-dict", "x.npy", crafted.npy_raw_header(b"__import__('os')\n"), "not a valid .npy"),
    file_case(
        "npy-header-huge", "x.npy", crafted.npy_bytes("<f4", (1,), b"", version=2)[:8] + b"\xff\xff\xff\x7f", "x.npy"
    ),
    file_case("npy-magic-only", "x.npy", b"\x93NUMPY", "x.npy"),
    file_case("npy-empty", "x.npy", b"", "x.npy"),
    file_case("npy-complex", "x.npy", crafted.npy_bytes("<c8", (1, 3, 32, 32), _F4 * 2), "complex"),
    file_case("npy-datetime", "x.npy", crafted.npy_bytes("<M8[s]", (1, 3, 32, 32), _F4 * 2), "datetime"),
    file_case("npy-timedelta", "x.npy", crafted.npy_bytes("<m8[s]", (1, 3, 32, 32), _F4 * 2), "timedelta"),
    file_case("npy-strings", "x.npy", crafted.npy_bytes("<U1", (1, 3, 32, 32), _F4), "x.npy"),
    file_case("npy-negative-dim", "x.npy", crafted.npy_bytes("<f4", (-1, 3, 32, 32), _F4), "negative dim"),
]


def _npz(t: Path, members: dict[str, bytes], **kw) -> Path:
    return crafted.zip_members(t / "x.npz", members, **kw)


_GOOD_NPY = crafted.npy_bytes("<f4", (1, 3, 32, 32), _F4)

NPZ_CASES = [
    file_case("npz-is-npy", "x.npz", _GOOD_NPY, "not a .npz archive (a .npy file)"),
    file_case("npz-is-text", "x.npz", b"hello", "not a .npz"),
    file_case("npz-truncated", "x.npz", lambda t: _npz(t, {"x.npy": _GOOD_NPY}).read_bytes()[:200], "not a valid .npz"),
    case("npz-no-arrays", "mgedump", lambda t: [model(t), "-d", _npz(t, {"notes.txt": b"x"})], "holds no array"),
    case(
        "npz-several-arrays",
        "mgedump",
        lambda t: [model(t), "-d", _npz(t, {"a.npy": _GOOD_NPY, "b.npy": _GOOD_NPY})],
        "holds several",
    ),
    case(
        "npz-member-declares-more",
        "mgedump",
        lambda t: [model(t), "-d", _npz(t, {"x.npy": crafted.npy_bytes("<f4", (1 << 40,), b"\0" * 64)})],
        "truncated or crafted",
    ),
    case(
        "npz-member-pickled",
        "mgedump",
        lambda t: [model(t), "-d", _npz(t, {"x.npy": crafted.npy_bytes("|O", (1,), b"\x80\x04N.")})],
        "pickled",
    ),
    case(
        "npz-member-structured",
        "mgedump",
        lambda t: [model(t), "-d", _npz(t, {"x.npy": crafted.npy_bytes("|V4", (1,), b"\0" * 4)})],
        "structured",
    ),
    case(
        "npz-member-encrypted",
        "mgedump",
        lambda t: [model(t), "-d", crafted.set_flag_bits(_npz(t, {"x.npy": _GOOD_NPY}), 1)],
        "x.npz",
    ),
    case(
        "npz-member-shorter-than-its-array",
        "mgedump",
        lambda t: [model(t), "-d", crafted.patch_sizes(_npz(t, {"x.npy": _GOOD_NPY}), "x.npy", 200)],
        "x.npz",
    ),
    case(
        "npz-member-bad-deflate",
        "mgedump",
        lambda t: [model(t), "-d", _corrupt_deflate(_npz(t, {"x.npy": _GOOD_NPY}, compress=True))],
        "x.npz",
    ),
]


def _corrupt_deflate(path: Path) -> Path:
    data = bytearray(path.read_bytes())
    start = 30 + len("x.npy")
    data[start : start + 8] = b"\xff" * 8
    path.write_bytes(bytes(data))
    return path


PB_CASES = [
    file_case("pb-unknown-data-type", "x.pb", crafted.pb_bytes([1, 3, 32, 32], 99, _F4), "unknown data_type 99"),
    file_case("pb-declares-2^40", "x.pb", crafted.pb_bytes([1 << 40], 1, b"\0" * 16), "not a valid ONNX TensorProto"),
    file_case(
        "pb-negative-dim", "x.pb", crafted.pb_bytes([-1, 3, 32, 32], 1, _F4), "negative dim in dims [-1, 3, 32, 32]"
    ),
    file_case(
        "pb-raw-too-short", "x.pb", crafted.pb_bytes([1, 3, 32, 32], 1, _F4[:-1]), "not a valid ONNX TensorProto"
    ),
    file_case("pb-truncated-varint", "x.pb", b"\x08\xff\xff", "not a valid ONNX TensorProto"),
    file_case("pb-external-data", "x.pb", lambda t: crafted.pb_external(str(data(t))), "external data"),
    file_case("pb-strings", "x.pb", crafted.pb_bytes([1], 8, extra=b"\x32\x01a"), "x.pb"),
    file_case("pb-complex", "x.pb", crafted.pb_bytes([1, 3, 32, 32], 14, _F4 * 2), "complex"),
    file_case("pb-empty", "x.pb", b"", "x.pb"),
]

_CAT_PNG = _CAT.read_bytes()
_DOG = (SAMPLES / "images" / "dog.jpg").read_bytes()

IMAGE_CASES = [
    file_case("png-declares-huge", "x.png", crafted.png_declaring(100_000, 100_000), "beyond reason", "--resize-input"),
    file_case("png-declares-above-limit", "x.png", crafted.png_declaring(20_000, 20_000), "x.png", "--resize-input"),
    file_case("bmp-declares-huge", "x.bmp", crafted.bmp_declaring(60_000, 60_000), "x.bmp", "--resize-input"),
    file_case("gif-declares-huge", "x.gif", crafted.gif_declaring(65_535, 65_535), "x.gif", "--resize-input"),
    file_case("png-truncated", "x.png", _CAT_PNG[:120], "a damaged or unsupported image (PNG", "--resize-input"),
    file_case("jpeg-truncated", "x.jpg", _DOG[:1000], "a damaged or unsupported image (JPEG", "--resize-input"),
    file_case(
        "eps-never-decoded",
        "x.eps",
        b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 32 32\nshowpage\n",
        "neither an image",
    ),
    file_case("pdf-never-decoded", "x.pdf", b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n", "neither an image"),
    file_case("image-empty", "x.png", b"", "x.png"),
    file_case("image-text-named-jpg", "x.jpg", b"not an image at all", "neither an image"),
]


# -- models

MODEL_CASES = [
    case("model-empty", "mgedump", lambda t: [crafted.write(t / "m.onnx", b""), "-d", "#rand(0,1)"], "m.onnx"),
    case(
        "model-is-a-bundle",
        "mgedump",
        lambda t: [bundle(t, "m.onnx"), "-d", "#rand(0,1)"],
        "m.onnx",
    ),
    case(
        "model-random-bytes",
        "mgedump",
        lambda t: [crafted.write(t / "m.onnx", bytes(range(256)) * 8), "-d", "#rand(0,1)"],
        "m.onnx",
    ),
    case(
        "external-data-link-leaves-folder",
        "mgedump",
        lambda t: [_linked_external(t), "-d", "#rand(0,1)"],
        "outside",
    ),
    case(
        "mgerun-model-truncated",
        "mgerun",
        lambda t: [crafted.write(t / "m.onnx", (SAMPLES / "cnn.onnx").read_bytes()[:2000]), "-d", "#rand(0,1)"],
        "m.onnx",
    ),
    case(
        "mgediff-dump-folder-empty",
        "mgediff",
        lambda t: [folder(t / "empty"), model(t), "-d", "#rand(0,1)"],
        "empty",
    ),
]


def _linked_external(t: Path, *, relative: bool = False, loop: bool = False) -> Path:
    """external/mlp.onnx whose weight file is a link to the sample's, outside the model's folder (or a relative
    link up to a copy beside the folder, or a link to itself)."""
    (t / "m").mkdir()
    shutil.copyfile(SAMPLES / "external" / "mlp.onnx", t / "m" / "mlp.onnx")
    if loop:
        (t / "m" / "mlp.weights").symlink_to("mlp.weights")
    elif relative:
        shutil.copyfile(SAMPLES / "external" / "mlp.weights", t / "w")
        (t / "m" / "mlp.weights").symlink_to("../w")
    else:
        (t / "m" / "mlp.weights").symlink_to(SAMPLES / "external" / "mlp.weights")
    return t / "m" / "mlp.onnx"


# -- bundles


def _nested(depth: int) -> bytes:
    return b'{"format_version": 1, "x": ' + b"[" * depth + b"]" * depth + b"}"


def _manifest_edit(**changes):
    def edit(names, manifest, members):
        manifest.update(changes)

    return edit


def _member_rename(old: str, new: str):
    def edit(names, manifest, members):
        members[new] = members.pop(old)
        for entry in manifest["members"]:
            if entry["name"] == old:
                entry["name"] = new
        return [new if n == old else n for n in names]

    return edit


def _duplicate_member(names, manifest, members):
    return names + ["model.onnx"]


def _drop_member(name: str):
    def edit(names, manifest, members):
        return [n for n in names if n != name]

    return edit


def _replace_input(payload: bytes):
    def edit(names, manifest, members):
        members["test_data_set_0/input_0.pb"] = payload

    return edit


def _case_names_missing_member(names, manifest, members):
    manifest["test_cases"][0]["inputs"][0] = "test_data_set_9/input_0.pb"


BUNDLE_CASES = [
    case("bundle-empty-file", "mgerun", lambda t: [crafted.write(t / "e.mgetest", b"")], "not a bundle"),
    case("bundle-text", "mgerun", lambda t: [crafted.write(t / "e.mgetest", b"hello\n")], "not a bundle"),
    case("bundle-is-a-model", "mgerun", lambda t: [_copy(SAMPLES / "cnn.onnx", t / "e.mgetest")], "not a bundle"),
    case(
        "manifest-nested-deep",
        "mgerun",
        lambda t: [raw_bundle(t, mgedump_json=_nested(100_000))],
        "manifest",
    ),
    case(
        "manifest-5000-digit-int",
        "mgerun",
        lambda t: [raw_bundle(t, mgedump_json=b'{"format_version": 1' + b"0" * 5000 + b"}")],
        "a number with thousands of digits",
    ),
    case("manifest-not-json", "mgerun", lambda t: [raw_bundle(t, mgedump_json=b"{")], "manifest"),
    case("manifest-a-list", "mgerun", lambda t: [raw_bundle(t, mgedump_json=b"[]")], "manifest"),
    case("manifest-not-utf8", "mgerun", lambda t: [raw_bundle(t, mgedump_json=b'{"a": "\xff"}')], "manifest"),
    case(
        "manifest-maxerr-nan",
        "mgerun",
        lambda t: [bundle_with(t, lambda n, m, mem: m["assertion"].update(maxerr=float("nan")))],
        "maxerr",
    ),
    case(
        "manifest-maxerr-negative",
        "mgerun",
        lambda t: [bundle_with(t, lambda n, m, mem: m["assertion"].update(maxerr=-1))],
        "maxerr",
    ),
    case(
        "manifest-maxerr-text",
        "mgerun",
        lambda t: [bundle_with(t, lambda n, m, mem: m["assertion"].update(maxerr="small"))],
        "maxerr",
    ),
    case(
        "manifest-version-text",
        "mgerun",
        lambda t: [bundle_with(t, _manifest_edit(format_version="1"))],
        "format",
    ),
    case(
        "manifest-missing-members",
        "mgerun",
        lambda t: [bundle_with(t, lambda n, m, mem: m.pop("members") and None)],
        "members",
    ),
    case(
        "manifest-members-not-a-list",
        "mgerun",
        lambda t: [bundle_with(t, _manifest_edit(members={"a": 1}))],
        "members",
    ),
    case(
        "manifest-test-cases-not-a-list",
        "mgerun",
        lambda t: [bundle_with(t, _manifest_edit(test_cases="all"))],
        "test_cases",
    ),
    case(
        "manifest-case-names-missing-member",
        "mgerun",
        lambda t: [bundle_with(t, _case_names_missing_member, fix_hashes=True)],
        "test_data_set_9/input_0.pb",
    ),
    case(
        "member-past-the-end",
        "mgerun",
        lambda t: [crafted.patch_sizes(bundle(t, "e.mgetest"), "model.onnx", 1 << 30)],
        "e.mgetest",
    ),
    case(
        "member-absolute-path",
        "mgerun",
        lambda t: [bundle_with(t, _member_rename("model.onnx", "/tmp/model.onnx"))],
        "not a safe relative path",
    ),
    case(
        "member-backslash-path",
        "mgerun",
        lambda t: [bundle_with(t, _member_rename("model.onnx", "..\\model.onnx"))],
        "not a safe relative path",
    ),
    case("member-duplicate", "mgerun", lambda t: [bundle_with(t, _duplicate_member)], "'model.onnx' appears twice"),
    case("member-model-missing", "mgerun", lambda t: [bundle_with(t, _drop_member("model.onnx"))], "model.onnx"),
    case("members-compressed", "mgerun", lambda t: [bundle_with(t, None, compress=True)], "e.mgetest"),
    case(
        "member-input-declares-2^40",
        "mgerun",
        lambda t: [bundle_with(t, _replace_input(crafted.pb_bytes([1 << 40], 1, b"\0" * 16)), fix_hashes=True)],
        "input_0.pb",
    ),
    case(
        "member-input-unknown-type",
        "mgerun",
        lambda t: [bundle_with(t, _replace_input(crafted.pb_bytes([1, 3, 32, 32], 99, _F4)), fix_hashes=True)],
        "unknown data_type 99",
    ),
    case(
        "member-input-wrong-shape",
        "mgerun",
        lambda t: [
            bundle_with(t, _replace_input(crafted.pb_bytes([1, 3, 16, 16], 1, _F4[: 3 * 16 * 16 * 4])), fix_hashes=True)
        ],
        "fixes dim 2 to 32",
    ),
    case(
        "member-input-wrong-dtype",
        "mgerun",
        lambda t: [bundle_with(t, _replace_input(crafted.pb_bytes([1, 3, 32, 32], 11, _F4 * 2)), fix_hashes=True)],
        "holds float64",
    ),
    case(
        "member-input-external-data",
        "mgerun",
        lambda t: [bundle_with(t, _replace_input(crafted.pb_external("/etc/hostname")), fix_hashes=True)],
        "external data",
    ),
    case(
        "zip-encrypted",
        "mgerun",
        lambda t: [crafted.set_flag_bits(bundle(t, "e.mgetest"), 1)],
        "e.mgetest",
    ),
]


# -- options and specs

OPTION_CASES = [
    case("thread-huge", "mgerun", lambda t: [bundle(t), "--thread", str(2**40)], "--thread"),
    case("thread-negative", "mgerun", lambda t: [bundle(t), "--thread", "-1"], "--thread"),
    case("iter-negative", "mgerun", lambda t: [bundle(t), "--iter", "-5"], "--iter"),
    case("warmup-negative", "mgerun", lambda t: [bundle(t), "--warmup-iter", "-1"], "--warmup-iter"),
    case("repeat-sweep-zero", "mgerun", lambda t: [bundle(t), "--repeat-sweep", "0"], "--repeat-sweep"),
    case("repeat-sweep-text", "mgerun", lambda t: [bundle(t), "--repeat-sweep", "1,a"], "--repeat-sweep"),
    case(
        "repeat-sweep-empty-item",
        "mgerun",
        lambda t: [bundle(t), "--repeat-sweep", "1,,2"],
        "not a comma-separated list",
    ),
    case("maxerr-nan-mgerun", "mgerun", lambda t: [bundle(t), "--maxerr", "nan"], "--maxerr"),
    case("maxerr-nan-mgedump", "mgedump", lambda t: [model(t), "-d", "#rand(0,1)", "--maxerr", "nan"], "--maxerr"),
    case("maxerr-nan-mgediff", "mgediff", lambda t: [model(t), bundle(t), "--maxerr", "nan"], "--maxerr"),
    case("repeat-negative", "mgedump", lambda t: [model(t), "-d", data(t), "--repeat", "-3"], "--repeat"),
    case("seed-negative", "mgedump", lambda t: [model(t), "-d", "#rand(0,1)", "--seed", "-1"], "--seed"),
    case("provider-unknown", "mgerun", lambda t: [bundle(t), "--provider", "Quantum"], "Quantum"),
    case("graph-opt-unknown", "mgerun", lambda t: [bundle(t), "--graph-opt", "max"], "--graph-opt"),
    case(
        "io-dump-budget-negative",
        "mgerun",
        lambda t: [bundle(t), "--io-dump", t / "d", "--io-dump-budget", "-1"],
        "--io-dump-budget",
    ),
    case(
        "mgediff-budget-zero", "mgediff", lambda t: [model(t), bundle(t), "--io-dump-budget", "0"], "--io-dump-budget"
    ),
    case(
        "embed-io-dump-text",
        "mgedump",
        lambda t: [model(t), "-d", "#rand(0,1)", "--embed-io-dump", "all"],
        "'all' is not a valid integer",
    ),
    case(
        "fp32-nodes-empty",
        "mgedump",
        lambda t: [model(t), "-d", "#rand(0,1)", "--optimize-for-inference", "--enable-ioc16", "--fp32-nodes", ","],
        "--fp32-nodes",
    ),
    case(
        "input-transform-name-error",
        "mgedump",
        lambda t: [model(t), "-d", data(t), "--input-transform", "dta/255"],
        "--input-transform",
    ),
    case(
        "input-transform-returns-text",
        "mgedump",
        lambda t: [model(t), "-d", data(t), "--input-transform", "'text'"],
        "--input-transform",
    ),
    case(
        "input-transform-complex",
        "mgedump",
        lambda t: [model(t), "-d", data(t), "--input-transform", "data * 1j"],
        "complex",
    ),
    case(
        "input-shape-syntax",
        "mgedump",
        lambda t: [model(t), "-d", "#rand(0,1)", "--input-shape", "x:1,a"],
        "--input-shape",
    ),
    case(
        "input-shape-unknown-name",
        "mgedump",
        lambda t: [model(t), "-d", "#rand(0,1)", "--input-shape", "nope:1,3,32,32"],
        "nope",
    ),
    case(
        "input-shape-wrong-rank",
        "mgedump",
        lambda t: [model(t), "-d", "#rand(0,1)", "--input-shape", "1,3,32"],
        "rank",
    ),
    case(
        "input-shape-against-fixed-dim",
        "mgedump",
        lambda t: [model(t), "-d", "#rand(0,1)", "--input-shape", "1,3,64,64"],
        "--input-shape",
    ),
    case(
        "input-shape-negative",
        "mgedump",
        lambda t: [_copy(SAMPLES / "free_dims.onnx", t / "f.onnx"), "-d", "#rand(0,1)", "--input-shape", "1,3,-64,64"],
        "--input-shape",
    ),
    case(
        "input-shape-twice",
        "mgerun",
        lambda t: [
            _copy(SAMPLES / "free_dims.onnx", t / "f.onnx"),
            "-d",
            "#rand(0,1)",
            "--input-shape",
            "x:1,3,8,8",
            "--input-shape",
            "x:1,3,16,16",
        ],
        "twice",
    ),
    case(
        "input-shape-on-bundle",
        "mgerun",
        lambda t: [bundle(t), "--input-shape", "1,3,32,32"],
        "--input-shape applies to a plain model",
    ),
    case("spec-max-infinite", "mgedump", lambda t: [model(t), "-d", "#rand(0,1e400)"], "finite"),
    case("spec-nan", "mgedump", lambda t: [model(t), "-d", "#rand(nan,1)"], "finite"),
    case("spec-negative-std", "mgedump", lambda t: [model(t), "-d", "#randn(0,-1)"], "#randn"),
    case(
        "spec-negative-dim",
        "mgedump",
        lambda t: [_copy(SAMPLES / "dynamic_batch.onnx", t / "d.onnx"), "-d", "#rand(0,1,-2,...)"],
        "#rand",
    ),
    case("spec-const-infinite", "mgedump", lambda t: [model(t), "-d", "#const(1e400)"], "finite"),
    case("spec-empty-name", "mgedump", lambda t: [model(t), "-d", ":#rand(0,1)"], "name"),
    case("spec-empty-source", "mgedump", lambda t: [model(t), "-d", "x:"], "x:"),
    case("spec-only-separators", "mgedump", lambda t: [model(t), "-d", ";;"], "empty test case"),
    case("spec-beyond-float32", "mgedump", lambda t: [model(t), "-d", "#randn(0,1e308)"], "outside its range"),
    case(
        "expected-outputs-infinite",
        "mgedump",
        lambda t: [model(t), "-d", "#rand(0,3e38)"],
        "holds NaN or infinity",
    ),
    case(
        "int-input-out-of-range",
        "mgedump",
        lambda t: [_copy(SAMPLES / "multi_input.onnx", t / "mi.onnx"), "-d", "input:0:#rand(0,1);len:#const(1e30)"],
        "outside its range",
    ),
    case(
        "model-fails-at-pack",
        "mgedump",
        lambda t: [_copy(SAMPLES / "bad" / "gather_index.onnx", t / "g.onnx"), "-d", "#rand(0,100)"],
        "failed to run",
    ),
]

# -- third round: crafted bundles that collide on extraction, amplification, external data, outputs that clash,
# file-system errors


def _member_also_folder(n, m, mem):
    """test_data_set_0/input_0.pb is a file and also the folder of another member."""
    mem["test_data_set_0/input_0.pb/x"] = b"x"
    m["members"].append({"name": "test_data_set_0/input_0.pb/x", "size": 1, "sha256": ""})
    return [*n, "test_data_set_0/input_0.pb/x"]


def _case_twins(n, m, mem):
    mem["TEST_data_set_0/input_0.pb"] = b"x"
    m["members"].append({"name": "TEST_data_set_0/input_0.pb", "size": 1, "sha256": ""})
    return [*n, "TEST_data_set_0/input_0.pb"]


def _data_named_like_model(n, m, mem):
    m["model"]["external_data"] = "other/model.onnx"
    mem["other/model.onnx"] = b"weights"
    m["members"].append({"name": "other/model.onnx", "size": 7, "sha256": ""})
    return [*n, "other/model.onnx"]


def _shared_member(copies: int):
    """Every test case reads the same input member: the work a bundle asks for grows past what its bytes hold."""

    def edit(n, m, mem):
        first = m["test_cases"][0]
        m["test_cases"] = [dict(first, dir=f"test_data_set_{k}") for k in range(copies)]

    return edit


def _many_empty_strings(t: Path) -> Path:
    """A bundle whose one input is a string tensor of 3 million empty strings (6 MB of protobuf)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["s"], ["y"])],
        "strings",
        [helper.make_tensor_value_info("s", TensorProto.STRING, [None])],
        [helper.make_tensor_value_info("y", TensorProto.STRING, [None])],
    )
    model_path = t / "s.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model_path)
    run_ok("mgedump", model_path, "-d", crafted.write(t / "s.npy", _npy_strings()), "-o", t / "good.mgetest", "-q")
    count = 3_000_000
    tensor = crafted.pb_bytes([count], TensorProto.STRING, extra=b"\x32\x00" * count)  # string_data = ""
    tensor += b"\x42\x01s"  # name "s"

    def edit(n, m, mem):
        mem["test_data_set_0/input_0.pb"] = tensor
        mem["test_data_set_0/output_0.pb"] = tensor[:-3] + b"\x42\x01y"

    return rewrite_bundle(t / "good.mgetest", t / "e.mgetest", edit, fix_hashes=True)


def _npy_strings() -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, np.array(["a", "b"]))
    return buffer.getvalue()


def _external_at(location: str):
    def build(t: Path) -> list:
        import onnx

        run_ok("mgedump", SAMPLES / "external" / "mlp.onnx", "-d", "#rand(0,1)", "-o", t / "x.mgetest", "-q")
        members = crafted.read_members(t / "x.mgetest")
        proto = onnx.ModelProto.FromString(members["model.onnx"])
        for tensor in proto.graph.initializer:
            for entry in tensor.external_data:
                if entry.key == "location":
                    entry.value = location
        model_bytes = proto.SerializeToString()

        def edit(n, m, mem):
            mem["model.onnx"] = model_bytes

        return [rewrite_bundle(t / "x.mgetest", t / "e.mgetest", edit, fix_hashes=True)]

    return build


def _link_loop(t: Path) -> Path:
    os.symlink(t / "loop_b", t / "loop_a")
    os.symlink(t / "loop_a", t / "loop_b")
    return t / "loop_a"


THIRD_ROUND_CASES = [
    case(
        "bundle-member-file-and-folder",
        "mgerun",
        lambda t: [bundle_with(t, _member_also_folder, fix_hashes=True)],
        "is a file and also the folder of",
    ),
    case(
        "bundle-member-file-and-folder-diff",
        "mgediff",
        lambda t: [model(t), bundle_with(t, _member_also_folder, fix_hashes=True)],
        "is a file and also the folder of",
    ),
    case(
        "bundle-members-differ-in-case",
        "mgerun",
        lambda t: [bundle_with(t, _case_twins, fix_hashes=True)],
        "differ only in case",
    ),
    case(
        "bundle-data-named-like-model",
        "mgerun",
        lambda t: [bundle_with(t, _data_named_like_model, fix_hashes=True)],
        "manifest is malformed: model.external_data: expected one of",
    ),
    case(
        "bundle-3000-cases-one-member",
        "mgerun",
        lambda t: [bundle_with(t, _shared_member(3000))],
        "refers to member 'test_data_set_0/input_0.pb' more than once",
    ),
    case(
        "bundle-3000-cases-one-member-diff",
        "mgediff",
        lambda t: [model(t), bundle_with(t, _shared_member(3000))],
        "more than once",
    ),
    case(
        "bundle-millions-of-empty-strings", "mgerun", lambda t: [_many_empty_strings(t)], "more than its bytes justify"
    ),
    case(
        "bundle-external-data-absolute",
        "mgerun",
        _external_at("/etc/passwd"),
        "the model reads external data from '/etc/passwd'",
    ),
    case(
        "bundle-external-data-up",
        "mgerun",
        _external_at("../../model.onnx.data"),
        "the model reads external data from '../../model.onnx.data'",
    ),
    case(
        "outputs-report-json-html-junit-one-path",
        "mgerun",
        lambda t: [bundle(t), "--report-json", t / "r", "--report-html", t / "r", "--junit-xml", t / "r"],
        "--report-json and --junit-xml both write to",
    ),
    case(
        "outputs-profile-is-report",
        "mgerun",
        lambda t: [bundle(t), "--report-json", t / "r.json", "--profile", t / "." / "r.json"],
        "--report-json and --profile both write to",
    ),
    case(
        "outputs-io-dump-is-bin-out-dump",
        "mgerun",
        lambda t: [bundle(t), "--report-json", t / "r.json", "--io-dump", t / "q", "--bin-out-dump", t / "q"],
        "--bin-out-dump and --io-dump both write to",
    ),
    case(
        "io-dump-link-loop",
        "mgerun",
        lambda t: [bundle(t), "--io-dump", _link_loop(t)],
        "is a link that leads nowhere",
    ),
    case(
        "io-dump-parent-is-a-file",
        "mgerun",
        lambda t: [bundle(t), "--io-dump", crafted.write(t / "plain", b"x") / "sub"],
        "is not a folder",
    ),
    case(
        "bin-out-dump-link-loop-many",
        "mgerun",
        lambda t: [bundle(t), bundle(t, "c.mgetest"), "--bin-out-dump", _link_loop(t)],
        "is a link that leads nowhere",
    ),
]


# -- fourth round (issue 26): every file a command reads and every file it writes, in one check before any work


def ext_model(t: Path, name: str = "mlp.onnx", location: str = "mlp.weights") -> Path:
    """external/mlp.onnx in the case's folder, keeping its weights in ``location`` beside it."""
    import onnx

    path = t / name
    if not path.exists():
        model = onnx.load(str(SAMPLES / "external" / "mlp.onnx"))
        onnx.save_model(model, str(path), save_as_external_data=True, location=location, size_threshold=0)
    return path


def _replaced_model_shared(t: Path) -> Path:
    """m.onnx, a model whose data is model.onnx.data, and o.onnx beside it reading the same file."""
    ext_model(t, "m.onnx", "model.onnx.data")
    shutil.copyfile(t / "m.onnx", t / "o.onnx")
    return t / "m.onnx"


def _other_models_data(t: Path) -> list:
    """A pack whose --output-model would write model.onnx.data where another model keeps its weights."""
    ext_model(t, "other.onnx", "model.onnx.data")
    return [ext_model(t), "-d", "#rand(0,1)", "--output-model", t / "n.onnx", "-o", t / "b.mgetest"]


def _calibration_list(t: Path) -> Path:
    path = t / "cal.txt"
    path.write_text(f"{data(t, 'cal.npy')}\n", encoding="utf-8")
    return path


_Q = ["--quantize", "int8", "--maxerr", "1"]
FOURTH_ROUND_CASES = [
    case(
        "model-out-data-is-bundle",
        "mgedump",
        lambda t: [ext_model(t), "-d", "#rand(0,1)", "--output-model", t / "m.onnx", "-o", t / "model.onnx.data"],
        "-o and --output-model both write to",
    ),
    case("model-out-data-of-another-model", "mgedump", lambda t: _other_models_data(t), "a file is there already"),
    case(
        "model-out-data-shared-by-a-sibling",
        "mgedump",
        lambda t: [
            ext_model(t),
            "-d",
            "#rand(0,1)",
            "--output-model",
            _replaced_model_shared(t),
            "-o",
            t / "b.mgetest",
        ],
        "a file is there already",
    ),
    case(
        "model-out-data-is-the-models-own",
        "mgedump",
        lambda t: [ext_model(t, "x.onnx", "model.onnx.data"), "-d", "#rand(0,1)", "--output-model", t / "n.onnx"],
        "is the input",
    ),
    case(
        "bundle-is-external-data",
        "mgedump",
        lambda t: [ext_model(t), "-d", "#rand(0,1)", "-o", t / "mlp.weights"],
        "is the input",
    ),
    case(
        "bundle-links-to-external-data",
        "mgedump",
        lambda t: [ext_model(t), "-d", "#rand(0,1)", "-o", link(t / "o.mgetest", t / "mlp.weights")],
        "is the input",
    ),
    case(
        "model-out-is-external-data",
        "mgedump",
        lambda t: [ext_model(t), "-d", "#rand(0,1)", "--output-model", t / "mlp.weights"],
        "is the input",
    ),
    case(
        "strip-info-is-external-data",
        "mgedump",
        lambda t: [ext_model(t, location="w.json"), "-d", "#rand(0,1)", "-o", t / "w", "--output-strip-info"],
        "is the input",
    ),
    case(
        "calibration-list-is-bundle",
        "mgedump",
        lambda t: [model(t), "-d", "#rand(0,1)", *_Q, "--calibrate", f"@{listing(t)}", "-o", listing(t)],
        "is the input",
    ),
    case(
        "calibration-list-is-model-out",
        "mgedump",
        lambda t: [model(t), "-d", "#rand(0,1)", *_Q, "--calibrate", f"@{listing(t)}", "--output-model", listing(t)],
        "is the input",
    ),
    case(
        "calibration-npy-is-bundle",
        "mgedump",
        lambda t: [model(t), "-d", "#rand(0,1)", *_Q, "--calibrate", data(t), "-o", data(t)],
        "is the input",
    ),
    case(
        "calibration-list-data-is-model-out",
        "mgedump",
        lambda t: (
            [model(t), "-d", "#rand(0,1)", *_Q, "--calibrate", f"@{_calibration_list(t)}"]
            + ["--output-model", t / "cal.npy"]
        ),
        "is the input",
    ),
    case(
        "named-data-is-model-out",
        "mgedump",
        lambda t: [model(t), "-d", f"data:{data(t)}", "--output-model", data(t)],
        "is the input",
    ),
    case(
        "strip-info-is-list",
        "mgedump",
        lambda t: [model(t), "-d", f"@{listing(t, 'o.mgetest.json')}", "-o", t / "o.mgetest", "--output-strip-info"],
        "is the input",
    ),
    case(
        "image-is-model-out",
        "mgedump",
        lambda t: [model(t), "-d", _copy(_CAT, t / "c.png"), "--resize-input", "--output-model", t / "c.png"],
        "is the input",
    ),
    case(
        "plain-model-report-is-external-data",
        "mgerun",
        lambda t: [ext_model(t), "-d", "#rand(0,1)", "--report-json", t / "mlp.weights"],
        "is the input",
    ),
    case(
        "plain-model-profile-is-data",
        "mgerun",
        lambda t: [model(t), "-d", data(t), "--profile", data(t)],
        "is the input",
    ),
    case(
        "plain-model-bin-out-dump-is-external-data",
        "mgerun",
        lambda t: [ext_model(t), "-d", "#rand(0,1)", "--bin-out-dump", t / "mlp.weights"],
        "is a file",
    ),
    case(
        "diff-report-is-external-data",
        "mgediff",
        lambda t: [ext_model(t), ext_model(t), "-d", "#rand(0,1)", "--report-json", t / "mlp.weights"],
        "is the input",
    ),
    case(
        "diff-report-is-data",
        "mgediff",
        lambda t: [model(t), model(t), "-d", data(t), "--report-json", data(t)],
        "is the input",
    ),
    case(
        "diff-report-links-to-list",
        "mgediff",
        lambda t: [model(t), model(t), "-d", f"@{listing(t)}", "--report-json", link(t / "r.json", listing(t))],
        "is the input",
    ),
    case(
        "mgerun-external-data-link-leaves-folder",
        "mgerun",
        lambda t: [_linked_external(t), "-d", "#rand(0,1)"],
        "mlp.onnx: the model keeps weights in 'mlp.weights', a link to ",
    ),
    case(
        "mgediff-external-data-link-leaves-folder",
        "mgediff",
        lambda t: [_linked_external(t), model(t), "-d", "#rand(0,1)"],
        "outside the model's folder: onnxruntime reads weights from the model's folder only (hint: copy the file",
    ),
    case(
        "mgerun-external-data-relative-link-up",
        "mgerun",
        lambda t: [_linked_external(t, relative=True), "-d", "#rand(0,1)"],
        "outside the model's folder",
    ),
    case(
        "mgerun-external-data-link-loop",
        "mgerun",
        lambda t: [_linked_external(t, loop=True), "-d", "#rand(0,1)"],
        "the model keeps weights in 'mlp.weights', which is not a file beside the model",
    ),
    case(
        "mgerun-external-data-missing",
        "mgerun",
        lambda t: [_copy(SAMPLES / "external" / "mlp.onnx", t / "mlp.onnx"), "-d", "#rand(0,1)"],
        "the model keeps weights in 'mlp.weights', which is not a file beside the model",
    ),
    case("bundle-path-empty", "mgedump", lambda t: [model(t), "-d", "#rand(0,1)", "-o", ""], "is empty"),
    case(
        "bundle-path-ends-in-slash",
        "mgedump",
        lambda t: [model(t), "-d", "#rand(0,1)", "-o", f"{t}/new/"],
        "names a folder",
    ),
    case("model-out-empty", "mgedump", lambda t: [model(t), "-d", "#rand(0,1)", "--output-model", ""], "is empty"),
    case("report-empty", "mgerun", lambda t: [bundle(t), "--report-json", ""], "--report-json': is empty"),
    case("io-dump-empty", "mgerun", lambda t: [bundle(t), "--io-dump", ""], "--io-dump': is empty"),
    case(
        "diff-report-empty", "mgediff", lambda t: [model(t), model(t), "-d", "#rand(0,1)", "--report-json", ""], "empty"
    ),
    case(
        "report-name-too-long", "mgerun", lambda t: [bundle(t), "--report-json", t / ("r" * 300)], "File name too long"
    ),
    case(
        "model-out-stdout",
        "mgedump",
        lambda t: [model(t), "-d", "#rand(0,1)", "--output-model", "-"],
        "--output-model - : this output is a file of its own",
    ),
]


CASES = (
    _file_output_cases()
    + _folder_output_cases()
    + _input_node_cases()
    + LIST_CASES
    + NPY_CASES
    + NPZ_CASES
    + PB_CASES
    + IMAGE_CASES
    + MODEL_CASES
    + BUNDLE_CASES
    + OPTION_CASES
    + THIRD_ROUND_CASES
    + FOURTH_ROUND_CASES
)


def test_the_table_covers_every_class():
    assert len(CASES) >= 120
    assert len({c.id for c in CASES}) == len(CASES)  # ids are unique


@pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")  # the zipfile module, writing a crafted bundle
@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_hostile_input_exits_2_with_one_line_and_changes_nothing(c, assets, tmp_path, mgedump, mgerun, mgediff):
    args = [str(a) for a in c.build(tmp_path)]
    existing = tmp_path / "existing.out"
    existing.write_bytes(SENTINEL)
    if c.prog == "mgedump" and "-o" not in args:
        args += ["-o", str(existing)]
    if c.prog != "mgedump" and "--report-json" not in args:
        args += ["--report-json", str(existing)]
    before, assets_before = snapshot(tmp_path), snapshot(assets)
    started = time.monotonic()
    with FifoWatch(tmp_path) as watch:
        result = {"mgedump": mgedump, "mgerun": mgerun, "mgediff": mgediff}[c.prog](*args)
    assert not watch.blocked, f"opened a FIFO and waited on it: {watch.blocked}"
    assert time.monotonic() - started < 60
    assert "Traceback" not in result.err + result.out
    assert result.code == 2, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith(f"{c.prog}: error: "), lines[0]
    assert c.needle in lines[0], lines[0]
    assert "External data path" not in lines[0]  # said in mgedump's words, not quoted from onnxruntime
    assert snapshot(tmp_path) == before
    assert snapshot(assets) == assets_before
