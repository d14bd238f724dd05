"""What a command reads, known before it runs: the one list its outputs are checked against
(:meth:`mgedump.base.outputs.Outputs.check`), so that no output replaces a file the command reads."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from ..data import TestData
from ..model.modelfile import data_files

MAX_SIBLINGS = 200  # models beside an output model looked into for the data file they share


# the options that name a file a command reads besides its models and data: a fitting choice, the report whose
# times balance the shards. A new option of that kind is one name here, and every command's outputs are checked
# against it.
READ_BY_OPTION = ("config", "shard_durations")


def files_read(
    *,
    models: Sequence[str] = (),
    data: Iterable[TestData | None] = (),
    others: Sequence[str] = (),
    options: Sequence[object] = (),
) -> list[str]:
    """Every file a command reads that its arguments name: each model and its external data, the list files and
    data files (images, ``.npy``, ``.npz``, ``.pb``) of its test data and calibration data, the files its
    ``options`` name (:data:`READ_BY_OPTION`), and any other (a bundle, an io dump's files), each once."""
    found: list[str] = []
    for given_options in options:
        for name in READ_BY_OPTION:
            path = getattr(given_options, name, None)
            if isinstance(path, str) and path:
                found.append(path)
    for model in models:
        found += [model, *data_files(model)]
    for given in data:
        if given is not None:
            found += [*given.list_files, *given.data_files]
    found += others
    return list(dict.fromkeys(found))


class FilesRead(Sequence[str]):
    """:func:`files_read`'s list, made when it is first looked at: a check that needs no input (a pack whose
    output is not there yet compares it with nothing) leaves a model of 2,000 external files unscanned until the
    copy is planned, beside onnxruntime's loading of it."""

    def __init__(self, **given: Any) -> None:
        self._given = given
        self._found: list[str] | None = None

    def _list(self) -> list[str]:
        if self._found is None:
            self._found = files_read(**self._given)
        return self._found

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._list()[index]

    def __len__(self) -> int:
        return len(self._list())

    def __iter__(self) -> Iterator[str]:
        return iter(self._list())


def only_data_of(model: str, data: str) -> bool:
    """Whether ``data`` is the external data of the model at ``model`` (all of it) and of no other model in that
    folder: the file a new model written at ``model`` may replace with its own data, as the old model goes."""
    if not os.path.isfile(model):
        return False
    target = os.path.realpath(data)
    if [os.path.realpath(p) for p in data_files(model)] != [target]:
        return False
    folder = os.path.dirname(os.path.abspath(model))
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".onnx"))
    except OSError:
        return False
    others = [
        os.path.join(folder, n) for n in names if os.path.realpath(os.path.join(folder, n)) != os.path.realpath(model)
    ]
    if len(others) > MAX_SIBLINGS:
        return False  # too many to look into: the data file stays a file to refuse
    return not any(target in {os.path.realpath(p) for p in data_files(other)} for other in others)
