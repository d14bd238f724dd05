"""mgedump: pack an ONNX model with its test cases into one bundle, then verify and time it.

The library API (imported lazily, so ``import mgedump`` stays cheap)::

    from mgedump import pack, verify, PackOptions, VerifyOptions, DataOptions, MgeError
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "pack": "mgedump.pack",
    "PackOptions": "mgedump.pack",
    "PackResult": "mgedump.pack",
    "verify": "mgedump.verify",
    "VerifyOptions": "mgedump.verify",
    "Report": "mgedump.verify",
    "DataOptions": "mgedump.data",
    "MgeError": "mgedump.errors",
    "Tensor": "mgedump.tensor",
    "tensor": "mgedump.tensor",
    "functional": "mgedump.functional",
    "module": "mgedump.module",
    "jit": "mgedump.jit",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mgedump' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
