"""A command's outputs in one table: checked against each other and against every input before the first write,
and written all together or not at all.

Each command lists what it writes (:class:`Output`: the option that names it,
the path, whether it is a folder, whether standard output may take it, whether
the tool chose its name). :meth:`Outputs.check` refuses, in one place, two
outputs on one path, an output that is one of the command's inputs (the
model, its external data, list files, data files, bundles: compared by device
and inode after resolving links), an output that cannot be created, and a
name the tool chose (a model's external data beside ``--output-model``) on a
file that is there already, unless that file is the data of the model the
same call replaces (and of no other model beside it). The files written inside :func:`all_or_nothing`
(:func:`mgedump.base.fileio.atomic_output`) are renamed into place together
when it ends, and removed if it fails, so a failing command leaves no output
behind.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .errors import OutputError, UsageError
from .fileio import all_or_nothing, check_folder_target, check_target
from .naming import option_name
from .streams import stdout_closed

STDOUT = "-"

__all__ = ["STDOUT", "Output", "Outputs", "all_or_nothing", "is_stdout"]


def is_stdout(target: str | None) -> bool:
    """Whether a target is this process's standard output: ``-``, or a name of the file standard output is
    (``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/1``, or the log file it is redirected to). Those are written
    in place, never replaced by a new file (which would drop what was printed before)."""
    if not target:
        return False
    if target == STDOUT:
        return True
    try:
        there, out = os.stat(target), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return os.path.samestat(there, out) and not stat.S_ISDIR(there.st_mode)


@dataclass(frozen=True)
class Output:
    """One output of a command.

    Attributes:
        option: the option that names it, by its keyword (``report_json``); messages name it as the surface in
            use does (:func:`mgedump.base.naming.option_name`).
        path: where it goes.
        folder: it is a folder of files (``io_dump``), made if absent.
        stdout: ``-`` (standard output) may take it.
        chosen: the tool chose the name (beside another output): a file there already is refused, since it is
            nobody's output of this call...
        own: ...unless it is the tool's own: the data file of the model this call replaces (``model.onnx.data``
            of the model at ``--output-model``, which no other model there reads).
    """

    option: str
    path: str
    folder: bool = False
    stdout: bool = False
    chosen: bool = False
    own: bool = False

    @property
    def to_stdout(self) -> bool:
        return self.stdout and is_stdout(self.path)


class Outputs:
    """The table of a command's outputs."""

    def __init__(self, outputs: Iterable[Output] = ()) -> None:
        self.outputs: list[Output] = [o for o in outputs if o.path]

    def add(self, *outputs: Output) -> None:
        """More outputs, known later (the data file beside a model that turned out to have one)."""
        self.outputs += [o for o in outputs if o.path]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.outputs)

    @property
    def paths(self) -> list[str]:
        return [o.path for o in self.outputs]

    def check(self, inputs: Sequence[str] = ()) -> None:
        """Refuse, before anything is written, any output that would clash with another or with an input.

        Raises:
            UsageError: two outputs on one path, or two reports on standard output.
            OutputError: an output that is an input, that cannot be created, or a chosen name that is taken.
        """
        seen: dict[str, Output] = {}
        for out in self.outputs:
            if out.path == STDOUT and not out.stdout:
                raise UsageError(
                    f"{option_name(out.option)} - : this output is a file of its own, not text for standard "
                    "output; give a path"
                )
            key = STDOUT if out.to_stdout else os.path.realpath(out.path)
            if key in seen:
                where = "standard output" if key == STDOUT else repr(out.path)
                raise UsageError(
                    f"{option_name(seen[key].option)} and {option_name(out.option)} both write to {where}: "
                    "give each its own path"
                )
            seen[key] = out
            if out.to_stdout and stdout_closed():
                raise OutputError(
                    f"{option_name(out.option)} {out.path}: standard output is closed (the command was started "
                    "with it closed): give a file"
                )
            if out.to_stdout:
                continue
            if out.folder:
                check_folder_target(out.path, option_name(out.option), inputs)
            else:
                check_target(out.path, inputs)
            if out.chosen and not out.own and os.path.lexists(out.path):
                raise OutputError(
                    f"{option_name(out.option)} would write {out.path} beside it, and a file is there already "
                    "(not the data of a model this command replaces): move it or give another path"
                )
