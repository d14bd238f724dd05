"""File data for an input: found, read (:mod:`.readers`, :mod:`.images`), repeated (``--repeat``), transformed
(``--input-transform``), checked against the input's shape and cast to its dtype, in that order."""

from __future__ import annotations

import os
from types import CodeType

import numpy as np

from ..base.errors import DataError, SpecError, UsageError
from ..base.limits import require_memory
from ..base.naming import option_name
from ..model.runtime import TensorInfo
from ..options import DataOptions
from .casts import cast_to
from .images import load_image
from .readers import load_npy, load_npz, load_pb
from .shapes import check_shape
from .spec import CaseSpec, FileSource


def _candidate(path: str, base_dir: str | None, cwd_first: bool) -> str:
    if (cwd_first and os.path.exists(path)) or os.path.isabs(path) or base_dir is None:
        return path
    return os.path.join(base_dir, path)


def find_file(path: str, base_dir: str | None, cwd_first: bool = True) -> str | None:
    """Where :func:`resolve_path` finds a data file, or None when it is not there (no error)."""
    try:
        found = _candidate(path, base_dir, cwd_first)
        return found if os.path.isfile(found) else None
    except (OSError, ValueError):
        return None


def resolve_path(path: str, base_dir: str | None, cwd_first: bool = True) -> str:
    """Find a data file: as given (relative to the current directory), then in base_dir."""
    found = _candidate(path, base_dir, cwd_first)
    if not os.path.exists(found):
        where = f" (also looked in {base_dir})" if base_dir and not os.path.isabs(path) else ""
        raise DataError(f"data file not found: {path}{where}")
    if not os.path.isfile(found):
        raise DataError(f"data path is not a file: {path}")
    return found


def load_file(path: str, info: TensorInfo, options: DataOptions) -> tuple[np.ndarray, bool]:
    """Read a data file for an input. Returns the array and whether it was an image."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".npy":
        return load_npy(path), False
    if suffix == ".npz":
        return load_npz(path, info.name), False
    if suffix == ".pb":
        return load_pb(path), False
    return load_image(path, info, options.resize_input), True


def _transform(array: np.ndarray, code: CodeType, options: DataOptions, info: TensorInfo, what: str) -> np.ndarray:
    try:
        result = eval(code, {"__builtins__": {}}, {"data": array, "np": np})  # noqa: S307 - the user's own CLI code
    except Exception as exc:
        raise SpecError(
            f"{option_name('input_transform')} {options.input_transform!r} failed on {what} for input {info.name!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    try:
        result = np.asarray(result)
    except Exception:
        result = None
    kinds = "US" if info.dtype == "str" else "biufc"  # complex is refused, with its own message, by cast_to
    if result is None or result.dtype.kind not in kinds:
        held = "nothing usable" if result is None else f"{result.dtype}"
        wanted = "an array of strings" if info.dtype == "str" else "a numeric array"
        raise SpecError(
            f"{option_name('input_transform')} {options.input_transform!r} gave {held}, not {wanted}, for input {info.name!r}"
        )
    return np.asarray(result)


def file_data(
    source: FileSource, info: TensorInfo, options: DataOptions, spec: CaseSpec, transform: CodeType | None = None
) -> tuple[np.ndarray, bool, str]:
    """Read, repeat, transform, check and cast one file for one input; return it, whether it was an image, and
    the file's path."""
    path = resolve_path(source.path, spec.base_dir, spec.cwd_first)
    array, is_image = load_file(path, info, options)
    what = f"{source.path!r}"
    if options.repeat > 1:
        if array.ndim == 0:
            raise DataError(f"{option_name('repeat')} cannot repeat the scalar in {what} for input {info.name!r}")
        require_memory(
            array.nbytes * (options.repeat + 1), f"{option_name('repeat')} {options.repeat} of {what}", UsageError
        )
        array = np.repeat(array, options.repeat, axis=0)
    if transform is not None:
        array = _transform(array, transform, options, info, what)
    check_shape(array, info, what, options.repeat)
    return cast_to(array, info, what), is_image, path
