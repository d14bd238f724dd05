"""The command line: a thin click layer over the library.

Each command parses its flags (:mod:`.flags`: a group of flags per job, each
turning what the user gave into plain values), builds one options object of
the library (:mod:`mgedump.options`), calls the library, prints (:mod:`.output`)
and maps the outcome to an exit code (:func:`.common.invoke`): 0 passed, 1 an
assertion or run failure, 2 bad usage or input. Heavy modules (numpy, onnx, onnxruntime,
OpenCV) are imported only inside the commands, so ``--help`` stays fast.

- :mod:`.mgedump`: ``mgedump MODEL -d SPEC -o OUT``
- :mod:`.mgerun`: ``mgerun BUNDLE``
- :mod:`.mgediff`: ``mgediff A B``
- :mod:`.plugin_options`: the pytest plugin's options and the session settings' flags, read without click
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .mgediff import mgediff_command
    from .mgedump import mgedump_command
    from .mgerun import mgerun_command

__all__ = ["mgediff_command", "mgediff_main", "mgedump_command", "mgedump_main", "mgerun_command", "mgerun_main"]

# Each console script imports its own command only: a plain pack reads none of mgerun's or mgediff's modules.
_COMMANDS = {"mgedump_command": ".mgedump", "mgerun_command": ".mgerun", "mgediff_command": ".mgediff"}


def __getattr__(name: str) -> Any:
    """``mgedump.cli.mgedump_command`` and the others, imported when first asked for."""
    if name not in _COMMANDS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_COMMANDS[name], __name__), name)


def mgedump_main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``mgedump`` console script."""
    from .common import invoke
    from .mgedump import mgedump_command

    sys.exit(invoke(mgedump_command, "mgedump", argv))


def mgerun_main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``mgerun`` console script."""
    from .common import invoke
    from .mgerun import mgerun_command

    sys.exit(invoke(mgerun_command, "mgerun", argv))


def mgediff_main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``mgediff`` console script."""
    from .common import invoke
    from .mgediff import mgediff_command

    sys.exit(invoke(mgediff_command, "mgediff", argv))
