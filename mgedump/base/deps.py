"""Optional dependencies: import one, or say in one line which install provides it.

The core install is numpy and click; everything else comes with an extra
(``pyproject.toml``, README "Installing"): the runtime with ``cpu``
(onnxruntime) or ``gpu`` (onnxruntime-gpu), and what packing needs with
``pack`` (onnx, OpenCV, Pillow). A command that reaches a module its install
left out stops with a :class:`~mgedump.base.errors.UsageError` naming the pip install
that adds it, rather than a ModuleNotFoundError traceback::

    onnx = require("onnx", purpose="naming the node where a check first fails")
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from .errors import UsageError

# top-level module -> (what the user knows it as, the install that provides it)
PROVIDERS: dict[str, tuple[str, str]] = {
    "onnx": ("onnx", "pip install 'mgedump[pack]'"),
    "cv2": ("OpenCV (cv2)", "pip install 'mgedump[pack]'"),
    "PIL": ("Pillow (PIL)", "pip install 'mgedump[pack]'"),
    "onnxruntime": ("onnxruntime", "pip install 'mgedump[cpu]' (or 'mgedump[gpu]' for CUDA)"),
}


def require(module: str, *, purpose: str | None = None) -> Any:
    """Import ``module`` (``"onnx"``, ``"onnx.helper"``, ``"PIL.Image"``, ...) and return it.

    Args:
        module: a module of one of the optional dependencies in :data:`PROVIDERS`.
        purpose: what needs it, for the message (``"reading images"``); default ``"this"``.

    Raises:
        UsageError: the dependency is not installed (or is installed but does not load), naming the pip install
            that provides it.
        ValueError: ``module`` is not an optional dependency (a bug in the caller).
    """
    top, shown, install = _provider(module)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if not _installed(top):
            raise _missing(module, purpose) from exc
        raise UsageError(
            f"{shown} is installed but cannot be imported: {exc}", hint=f"{install} installs it with what it needs"
        ) from exc
    except ImportError as exc:  # present but broken: a shared library that does not load, a version mismatch
        raise UsageError(f"{shown} is installed but cannot be imported: {exc}") from exc


def require_installed(module: str, *, purpose: str | None = None) -> None:
    """Check that ``module``'s distribution is installed, without importing it: a command's check up front of what
    only some of its paths import (a plain pack never imports onnx; importing it would cost a tenth of the pack).

    Raises:
        UsageError: it is not installed (the line :func:`require` gives).
        ValueError: ``module`` is not an optional dependency (a bug in the caller).
    """
    if not _installed(_provider(module)[0]):
        raise _missing(module, purpose)


def _provider(module: str) -> tuple[str, str, str]:
    """(top-level package, its name as shown, the pip install that provides it)."""
    top = module.partition(".")[0]
    if top not in PROVIDERS:
        raise ValueError(f"{module!r} is not an optional dependency of mgedump (known: {', '.join(PROVIDERS)})")
    return (top, *PROVIDERS[top])


def _missing(module: str, purpose: str | None) -> UsageError:
    _, shown, install = _provider(module)
    return UsageError(f"{shown} is not installed: {purpose or 'this'} needs {install}")


def _installed(top: str) -> bool:
    """Whether the top-level package can be found at all (else: found, but something it imports is missing)."""
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False
