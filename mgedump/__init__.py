"""mgedump: pack an ONNX model with its test cases into one bundle, then verify and time it.

The library API (imported lazily, so ``import mgedump`` stays cheap)::

    from mgedump import pack, verify, verify_all, diff, PackOptions, VerifyOptions, DiffOptions, DataOptions, \
        OptimizeOptions, Bounds, TestData, MgeError

The tracing framework (:mod:`mgedump.tracing`) turns eager tensor code into an
ONNX graph::

    from mgedump import tensor, Tensor
    import mgedump.functional as F, mgedump.module as M
    from mgedump.jit import trace
"""

from __future__ import annotations

import importlib
import os
from typing import Any

# onnxruntime writes telemetry files outside any output (~/.cache/Microsoft/DeveloperTools/.onnxruntime/ and
# $TMPDIR/.ses) unless this is set before it is imported; a verification tool writes its named outputs only. A
# value the user set is kept.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

__version__ = "0.1.0"

# public name -> the module that defines it
_LAZY = {
    "pack": "mgedump.commands.pack",
    "PackResult": "mgedump.commands.pack",
    "verify": "mgedump.commands.verify",
    "Report": "mgedump.commands.verify",
    "verify_all": "mgedump.commands.verify_many",
    "diff": "mgedump.commands.diff",
    "TestData": "mgedump.data",
    "DiffOptions": "mgedump.options",
    "PackOptions": "mgedump.options",
    "VerifyOptions": "mgedump.options",
    "DataOptions": "mgedump.options",
    "OptimizeOptions": "mgedump.options",
    "MgeError": "mgedump.base.errors",
    "Bounds": "mgedump.base.bounds",
    "Tensor": "mgedump.tracing.tensor",
    "tensor": "mgedump.tracing.tensor",
    "Parameter": "mgedump.tracing.tensor",
}
# submodules reachable as attributes (``mgedump.functional.relu``) before anyone imports them
_SUBMODULES = ("functional", "module", "jit", "random", "tracing")

__all__ = ["__version__", *_LAZY, *_SUBMODULES]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"mgedump.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mgedump' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value
