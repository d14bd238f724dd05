"""What a command reads, known before it runs: the one list its outputs are checked against
(:meth:`mgedump.base.outputs.Outputs.check`), so that no output replaces a file the command reads."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from ..data import TestData
from ..model.modelfile import data_files

MAX_SIBLINGS = 200  # models beside an output model looked into for the data file they share


def files_read(
    *, models: Sequence[str] = (), data: Iterable[TestData | None] = (), others: Sequence[str] = ()
) -> list[str]:
    """Every file a command reads that its arguments name: each model and its external data, the list files and
    data files (images, ``.npy``, ``.npz``, ``.pb``) of its test data and calibration data, and any other (a
    bundle, an io dump's files), each once."""
    found: list[str] = []
    for model in models:
        found += [model, *data_files(model)]
    for given in data:
        if given is not None:
            found += [*given.list_files, *given.data_files]
    found += others
    return list(dict.fromkeys(found))


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
