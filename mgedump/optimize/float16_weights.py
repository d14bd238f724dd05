"""The float16 search's weights, kept in files: each float32 weight once as float32, and once as float16 when a
candidate first stores it so (docs/float16.md, "What a search costs").

The search converts the float32 model many times, once per candidate. Its candidates never hold weights: the base
model's float32 weights are external data in the scratch folder (where they already were, for a model that keeps
its weights outside; written there once otherwise), and a candidate that stores a weight as float16 points at its
float16 copy, converted and written once for the whole search. A candidate is then a graph of a few kilobytes,
copied and converted in no time, saved beside the weights and opened by onnxruntime from its path. The model the
search keeps gets its weights back (:meth:`WeightFiles.load`), exactly as the conversion in memory would have
made them: the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .nodes import subgraphs

FLOAT32_FILE, FLOAT16_FILE = "weights32.bin", "weights16.bin"
MIN_BYTES = 1024  # weights smaller than this stay in the graph (as onnx's own external data leaves them)
ALIGN = 4096  # each weight starts on a page of its file
_FLOAT, _FLOAT16, _EXTERNAL = 1, 10, 1  # onnx.TensorProto.FLOAT, FLOAT16, EXTERNAL


def graphs_of(graph: Any) -> Iterator[Any]:
    """The graph and every subgraph in it, depth first."""
    yield graph
    for node in graph.node:
        for sub in subgraphs(node):
            yield from graphs_of(sub)


@dataclass
class _Slice:
    """Where a weight's bytes lie: a file of the folder, an offset, a length."""

    location: str
    offset: int
    length: int


class WeightFiles:
    """The weights of a model the search converts, in files of ``folder`` (the search's scratch folder).

    :meth:`hold` takes the weights out of the base model; :meth:`largest` and :meth:`to_float16` are what the
    conversion asks of a weight (:func:`mgedump.optimize.float16.convert`); :meth:`load` gives the model kept its
    weights back. ``read`` counts the bytes read from the weight files, ``written16`` those written as float16
    (each weight at most once).
    """

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.read = 0
        self.written16 = 0
        self._location: dict[tuple[str, int], tuple[bool, int]] = {}  # our float32 slices -> data_location as it was
        self._largest: dict[tuple[str, int], Any] = {}
        self._float16: dict[tuple[str, int], _Slice] = {}

    # -- the base model

    def hold(self, model: Any) -> None:
        """Take the float32 weights out of the model: those in external data already in :attr:`folder` stay where
        they are; the others of at least :data:`MIN_BYTES` are written to one file of it. The model then holds no
        float32 weight's bytes."""
        path = os.path.join(self.folder, FLOAT32_FILE)
        with open(path, "ab") as out:
            for graph in graphs_of(model.graph):
                for init in graph.initializer:
                    if init.data_location == _EXTERNAL:
                        here = self._slice(init)
                        if here is None:
                            continue  # not in the folder: left to what onnx makes of it
                        self._location[(here.location, here.offset)] = (True, 0)  # as onnx.load leaves it
                    elif init.data_type == _FLOAT and len(init.raw_data) >= MIN_BYTES:
                        was = (init.HasField("data_location"), init.data_location)
                        offset = _pad(out)
                        out.write(init.raw_data)
                        _point(init, FLOAT32_FILE, offset, len(init.raw_data))
                        self._location[(FLOAT32_FILE, offset)] = was

    def _slice(self, init: Any) -> _Slice | None:
        """Where an external weight lies, if in a file of :attr:`folder` (offset and length as onnx reads them)."""
        entries = {entry.key: entry.value for entry in init.external_data}
        location = entries.get("location", "")
        if not location or os.path.dirname(os.path.normpath(location)) or location in (".", ".."):
            return None
        if not os.path.isfile(os.path.join(self.folder, location)):
            return None
        offset = int(entries.get("offset") or 0)
        length = int(entries["length"]) if entries.get("length") else self._size(location) - offset
        return _Slice(location, offset, length)

    def _size(self, location: str) -> int:
        return os.path.getsize(os.path.join(self.folder, location))

    def holds(self, init: Any) -> bool:
        """Whether a weight's bytes lie in these files (the conversion then asks them here)."""
        if init.data_location != _EXTERNAL:
            return False
        here = self._slice(init)
        return here is not None and (here.location, here.offset) in self._location

    def _bytes(self, where: _Slice) -> bytes:
        with open(os.path.join(self.folder, where.location), "rb") as f:
            f.seek(where.offset)
            data = f.read(where.length)
        if len(data) != where.length:
            raise OSError(f"{where.location}: {where.length} bytes wanted at offset {where.offset}, {len(data)} there")
        self.read += len(data)
        return data

    def values(self, init: Any) -> np.ndarray:
        """A float32 weight held here, as an array."""
        here = self._slice(init)
        assert here is not None
        return np.frombuffer(self._bytes(here), dtype="<f4").reshape(tuple(init.dims))

    # -- what the conversion asks

    def largest(self, init: Any) -> Any:
        """The largest finite magnitude of a float32 weight held here (0 when it has none), read once."""
        here = self._slice(init)
        assert here is not None
        key = (here.location, here.offset)
        if key not in self._largest:
            self._largest[key] = largest(self.values(init))
        return self._largest[key]

    def to_float16(self, init: Any) -> None:
        """Store a float32 weight held here as float16: pointed at its float16 copy, written the first time."""
        here = self._slice(init)
        assert here is not None
        key = (here.location, here.offset)
        if key not in self._float16:
            half = self.values(init).astype(np.float16).astype("<f2").tobytes()
            with open(os.path.join(self.folder, FLOAT16_FILE), "ab") as out:
                offset = _pad(out)
                out.write(half)
            self.written16 += len(half)
            self._float16[key] = _Slice(FLOAT16_FILE, offset, len(half))
        made = self._float16[key]
        name, dims = init.name, list(init.dims)
        init.Clear()  # as a conversion in memory makes it: a new tensor of the weight's name, dims and float16 bytes
        init.name = name
        init.dims.extend(dims)
        init.data_type = _FLOAT16
        _point(init, made.location, made.offset, made.length)

    # -- the model kept

    def load(self, model: Any) -> None:
        """Give a model made from the base its weights back, in memory, as the conversion in memory leaves them."""
        halves = {(s.location, s.offset) for s in self._float16.values()}
        for graph in graphs_of(model.graph):
            for init in graph.initializer:
                if init.data_location != _EXTERNAL:
                    continue
                here = self._slice(init)
                if here is None:
                    continue
                key = (here.location, here.offset)
                if key not in self._location and key not in halves:
                    continue
                init.raw_data = self._bytes(here)
                del init.external_data[:]
                had, value = self._location.get(key, (False, 0))
                if had:
                    init.data_location = value
                else:
                    init.ClearField("data_location")


def largest(values: np.ndarray) -> Any:
    """The largest finite magnitude of an array (0 when it has none)."""
    if not values.size:
        return 0.0
    top = np.abs(values).max()
    if np.isfinite(top):  # every value finite (a NaN or an infinity would be the largest): no mask to copy
        return top
    finite = np.abs(values[np.isfinite(values)])
    return finite.max() if finite.size else 0.0


def _pad(out: Any) -> int:
    """Pad an open file to the next :data:`ALIGN` boundary; the offset reached."""
    end = int(out.seek(0, os.SEEK_END))
    gap = -end % ALIGN
    if gap:
        out.write(b"\0" * gap)
    return end + gap


def _point(init: Any, location: str, offset: int, length: int) -> None:
    """Make a weight external data at ``location`` (a file of the folder), ``offset``, ``length``: its bytes there."""
    init.ClearField("raw_data")
    del init.external_data[:]
    init.data_location = _EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = init.external_data.add()
        entry.key, entry.value = key, value
