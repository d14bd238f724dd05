"""Data files read for test cases: ``.npy``, ``.npz``, ``.pb`` and images.

Every file is untrusted. Each reader checks what the file declares (its
header: dtype, shape, size) against the file itself and against the memory
this process can have before it allocates anything, and raises
:class:`~mgedump.base.errors.DataError` with one line for anything it cannot use:
a pickled or structured array, a header that promises more data than the file
holds, an archive that is not one, an image whose declared size is beyond
reason. Pillow reads only formats it decodes itself (never EPS or PDF, which
would start Ghostscript).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from typing import IO, Any, cast

import numpy as np

from ..base.deps import require
from ..base.errors import DataError
from ..base.limits import require_memory
from ..base.log import warn_once
from ..bundle.tensorproto import decode

MAX_PB_BYTES = 2 << 30
MAX_IMAGE_PIXELS = 1 << 28  # 268 million pixels: a 16384 x 16384 image
MAX_NPY_HEADER = 10_000  # numpy's own limit for headers it reads without trusting them
# formats Pillow decodes itself (no external program); OpenCV's own formats are read by OpenCV first
PILLOW_FORMATS = ("BMP", "DIB", "GIF", "ICO", "JPEG", "PCX", "PNG", "PPM", "QOI", "SGI", "TGA", "TIFF", "WEBP")


# ---------------------------------------------------------------- .npy


def _npy_header(f: IO[bytes], where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """Read and check a .npy header: (shape, fortran order, dtype).

    Raises:
        DataError: not a .npy header, a pickled (object) or structured dtype.
    """
    from numpy.lib import format as npy

    try:
        version = npy.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = npy.read_array_header_1_0(f, max_header_size=MAX_NPY_HEADER)
        elif version == (2, 0):
            shape, fortran, dtype = npy.read_array_header_2_0(f, max_header_size=MAX_NPY_HEADER)
        else:
            raise DataError(
                f"{where}: .npy format version {version[0]}.{version[1]} is not one mgedump reads (1.0, 2.0)"
            )
    except DataError:
        raise
    except Exception as exc:  # numpy parses the untrusted header as Python literals: any parse error means "not .npy"
        message = " ".join(str(exc).split())[:200]
        raise DataError(f"{where}: not a valid .npy file ({type(exc).__name__}: {message})") from None
    if dtype.hasobject:
        raise DataError(
            f"{where}: holds a pickled (object) array, which mgedump never loads", hint="save it with a numeric dtype"
        )
    if dtype.names is not None or dtype.kind == "V" or dtype.subdtype is not None:
        raise DataError(f"{where}: holds structured records ({dtype}), not a tensor", hint="save one numeric array")
    if any(int(d) < 0 for d in shape):
        raise DataError(f"{where}: the header declares a negative dim ({list(shape)}; crafted or corrupt)")
    return tuple(int(d) for d in shape), bool(fortran), dtype


def _check_size(shape: tuple[int, ...], dtype: np.dtype, available: int, where: str) -> int:
    """The bytes the header declares, checked against what the file holds and what memory allows."""
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > available:
        raise DataError(
            f"{where}: the header declares {list(shape)} of {dtype} ({nbytes} bytes), but the file holds "
            f"{available} bytes of data (truncated or crafted)"
        )
    require_memory(nbytes, where, DataError)
    return nbytes


def load_npy(path: str) -> np.ndarray:
    """Read a ``.npy`` file; pickled (object) and structured arrays are refused, never loaded."""
    try:
        with open(path, "rb") as f:
            shape, fortran, dtype = _npy_header(f, path)
            _check_size(shape, dtype, os.fstat(f.fileno()).st_size - f.tell(), path)
            array = np.fromfile(f, dtype=dtype, count=math.prod(shape))
    except OSError as exc:
        raise DataError(f"{path}: cannot read .npy file ({exc.strerror or exc})") from None
    return array.reshape(shape, order="F" if fortran else "C")


# ---------------------------------------------------------------- .npz


def load_npz(path: str, name: str) -> np.ndarray:
    """Read the array named like the input from a ``.npz`` archive, or its only array."""
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"PK\x03\x04":
        kind = "a .npy file" if magic == b"\x93NUM" else "not a zip archive"
        raise DataError(f"{path}: not a .npz archive ({kind})", hint="give a .npy file its .npy suffix")
    try:
        with zipfile.ZipFile(path) as zf:
            members = {
                info.filename.removesuffix(".npy"): info for info in zf.infolist() if info.filename.endswith(".npy")
            }
            if name in members:
                info = members[name]
            elif len(members) == 1:
                info = next(iter(members.values()))
            elif not members:
                raise DataError(f"{path}: holds no array (.npy member)")
            else:
                raise DataError(
                    f"{path}: has no array named {name!r} and holds several: {', '.join(map(repr, members))}"
                )
            where = f"{path}[{info.filename}]"
            if info.flag_bits & 0x1:
                raise DataError(f"{where}: the member is encrypted; mgedump reads plain .npz archives")
            with zf.open(info) as member:
                shape, fortran, dtype = _npy_header(member, where)
                _check_size(shape, dtype, info.file_size, where)
            with zf.open(info) as member:
                array = np.lib.format.read_array(member, allow_pickle=False, max_header_size=MAX_NPY_HEADER)
    except DataError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError, KeyError) as exc:
        raise DataError(f"{path}: not a valid .npz archive ({type(exc).__name__}: {exc})") from None
    return array


# ---------------------------------------------------------------- .pb


def load_pb(path: str) -> np.ndarray:
    """Read an ONNX ``TensorProto`` file (with the project's one TensorProto codec)."""
    size = os.path.getsize(path)
    if size > MAX_PB_BYTES:
        raise DataError(f"{path}: tensor file is larger than 2 GiB")
    require_memory(2 * size, path, DataError)  # the file's bytes and the array made from them
    with open(path, "rb") as f:
        data = f.read()
    try:
        array, _ = decode(data)
    except ValueError as exc:
        raise DataError(f"{path}: not a valid ONNX TensorProto file ({exc})") from None
    return array


# ---------------------------------------------------------------- images


@contextlib.contextmanager
def _pillow() -> Iterator[Any]:
    """Pillow, with mgedump's own pixel limit: Pillow refuses images over twice that (its decompression-bomb
    error), and its warning for images between once and twice is not printed (mgedump's own check names them)."""
    import warnings

    Image = require("PIL.Image", purpose="reading images")

    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS  # Pillow's own bound, held to mgedump's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        yield Image


def _probe_size(path: str) -> tuple[int, int] | None:
    """An image's (width, height) from its header alone, when Pillow knows the format; None otherwise.

    Raises:
        DataError: the header declares a size beyond reason.
    """
    UnidentifiedImageError = require("PIL", purpose="reading images").UnidentifiedImageError

    try:
        with _pillow() as Image, Image.open(path, formats=PILLOW_FORMATS) as img:
            return cast("tuple[int, int]", img.size)
    except Image.DecompressionBombError as exc:
        raise DataError(f"{path}: the image declares a size beyond reason ({exc})") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, TypeError, EOFError):
        return None


def _pillow_decode(path: str, channels: int) -> tuple[np.ndarray | None, str]:
    """Decode with Pillow: (the array, "") or (None, why not: "" when Pillow does not know the format)."""
    UnidentifiedImageError = require("PIL", purpose="reading images").UnidentifiedImageError

    try:
        with _pillow() as Image, Image.open(path, formats=PILLOW_FORMATS) as img:
            try:
                array = np.asarray(img.convert("L" if channels == 1 else "RGB"))
            except Image.DecompressionBombError as exc:
                raise DataError(f"{path}: the image declares a size beyond reason ({exc})") from None
            except (OSError, ValueError, SyntaxError, TypeError, EOFError) as exc:
                return None, f"{img.format}: {exc}"
    except DataError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, TypeError, EOFError):
        return None, ""
    return (array if channels == 1 else array[:, :, ::-1]), ""


def decode_image(path: str, channels: int) -> np.ndarray | None:
    """Decode an image to HxW (gray) or HxWx3 (BGR) uint8, with OpenCV, else Pillow; None if it is not an image.

    Raises:
        DataError: an image whose declared size is beyond reason or beyond the memory this process can have,
            or a file that a decoder recognises but cannot decode (damaged or cut short).
    """
    size = _probe_size(path)
    if size is not None:
        width, height = size
        if width * height > MAX_IMAGE_PIXELS:
            raise DataError(
                f"{path}: the image declares {width}x{height} pixels, more than the {MAX_IMAGE_PIXELS} mgedump reads"
            )
        require_memory(2 * width * height * max(channels, 3), f"{path} ({width}x{height})", DataError)
    cv2 = require("cv2", purpose="reading images")

    file_size = os.path.getsize(path)
    require_memory(file_size, path, DataError)
    raw = np.fromfile(path, dtype=np.uint8)
    image: Any = None
    said: list[str] = []
    if raw.size:
        with _native_messages() as said:
            try:
                image = cv2.imdecode(raw, cv2.IMREAD_GRAYSCALE if channels == 1 else cv2.IMREAD_COLOR)
            except cv2.error as exc:  # OpenCV refuses what it cannot or will not decode (its size limit included)
                message = " ".join(str(exc).split())
                raise DataError(f"{path}: OpenCV cannot decode the image ({message[-160:]})") from None
        if image is not None and said:
            # libjpeg and libpng fill in what a damaged file lacks: the data is not what the file meant to hold
            warn_once(f"{path}: the image decoder reported damage ({said[0][:160]}); check the file")
    if image is not None:
        return cast(np.ndarray, image)
    image, why = _pillow_decode(path, channels)
    if image is None and (why or said):
        raise DataError(f"{path}: a damaged or unsupported image ({why or said[0]})"[:400])
    return cast("np.ndarray | None", image)


@contextlib.contextmanager
def _native_messages() -> Iterator[list[str]]:
    """Hold what native code writes to the process's stderr while the block runs, and give it as lines.

    libjpeg, libpng and OpenCV print their warnings straight to file descriptor 2,
    which would break the promise of one line per error; here they become part
    of mgedump's own messages instead.
    """
    lines: list[str] = []
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to protect
        yield lines
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read(1 << 16).decode("utf-8", "replace")
            # OpenCV's lines start "[ WARN:0@0.887] global grfmt_png.cpp:793 readFromStreamOrBuffer ": keep the words
            text = re.sub(r"\[\s*\w+:\d+@[\d.]+\]\s+global\s+\S+\s+\S+\s+", "", text)
            lines.extend(line.strip() for line in text.splitlines() if line.strip())
