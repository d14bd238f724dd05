"""What packing needs to know about a model file, read without loading its weights.

:func:`uses_external_data` walks the protobuf wire format over a memory map,
skipping tensor bytes by their length, so a model with 1 GiB of embedded
weights costs a scan of its few thousand field headers, not a parse. A large
attribute (a tree ensemble's millions of node values) is first asked of
protobuf's own parser (:mod:`~mgedump.model.holders`), and walked only when it
can hold a tensor. A model that keeps weights in external files is rewritten
on the wire format too (:func:`model_source`), to point every external tensor
at the bundle's one data member: only those tensors' entries and the lengths
of the fields around them change, and no onnx or protobuf is imported.
"""

from __future__ import annotations

import functools
import mmap
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..base.errors import BundleError, ModelError
from .holders import HOLDER_FIELDS, may_hold_tensors
from .protowire import LENGTH_DELIMITED, VARINT, WireError, fields, read_varint, write_varint

# protobuf field numbers (onnx.proto3)
_MODEL_GRAPH, _MODEL_FUNCTIONS = 7, 25
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_SPARSE_INITIALIZER = 1, 5, 15
_FUNCTION_NODE, _FUNCTION_ATTRIBUTE_PROTO = 7, 11
_NODE_ATTRIBUTE = 5
_ATTR_T, _ATTR_G, _ATTR_TENSORS, _ATTR_GRAPHS, _ATTR_SPARSE_TENSOR, _ATTR_SPARSE_TENSORS = 5, 6, 10, 11, 22, 23
_SPARSE_VALUES, _SPARSE_INDICES = 1, 2
_TENSOR_DATA_LOCATION = 14
_EXTERNAL = 1
_MAX_DEPTH = 64


_TENSOR_EXTERNAL_DATA = 13
_ENTRY_KEY, _ENTRY_VALUE = 1, 2
Span = tuple[int, int]


def _sparse_spans(buf: memoryview, start: int, end: int) -> Iterator[Span]:
    for f, w, s, e in fields(buf, start, end):
        if f in (_SPARSE_VALUES, _SPARSE_INDICES) and w == LENGTH_DELIMITED:
            yield s, e


def _attribute_spans(buf: memoryview, start: int, end: int, depth: int) -> Iterator[Span]:
    view = buf[start:end]
    try:  # a large attribute of numbers or strings is checked at native speed
        holds = may_hold_tensors(view)
    finally:
        view.release()  # even when the parse failed: the memory map closes only when no view is left
    if not holds:
        return
    for field, wire, s, e in fields(buf, start, end):
        if wire != LENGTH_DELIMITED:
            continue
        if field in (_ATTR_T, _ATTR_TENSORS):
            yield s, e
        elif field in (_ATTR_SPARSE_TENSOR, _ATTR_SPARSE_TENSORS):
            yield from _sparse_spans(buf, s, e)
        elif field in (_ATTR_G, _ATTR_GRAPHS):
            yield from _graph_spans(buf, s, e, depth + 1)


def _node_spans(buf: memoryview, start: int, end: int, depth: int) -> Iterator[Span]:
    for field, wire, s, e in fields(buf, start, end):
        if field == _NODE_ATTRIBUTE and wire == LENGTH_DELIMITED:
            yield from _attribute_spans(buf, s, e, depth)


def _graph_spans(buf: memoryview, start: int, end: int, depth: int = 0) -> Iterator[Span]:
    if depth > _MAX_DEPTH:
        raise ValueError("subgraphs nested too deep")
    for field, wire, s, e in fields(buf, start, end):
        if wire != LENGTH_DELIMITED:
            continue
        if field == _GRAPH_INITIALIZER:
            yield s, e
        elif field == _GRAPH_SPARSE_INITIALIZER:
            yield from _sparse_spans(buf, s, e)
        elif field == _GRAPH_NODE:
            yield from _node_spans(buf, s, e, depth)


def _function_spans(buf: memoryview, start: int, end: int) -> Iterator[Span]:
    """A model-local function: its nodes' attributes (subgraphs included) and its attributes' defaults."""
    for field, wire, s, e in fields(buf, start, end):
        if wire != LENGTH_DELIMITED:
            continue
        if field == _FUNCTION_NODE:
            yield from _node_spans(buf, s, e, 0)
        elif field == _FUNCTION_ATTRIBUTE_PROTO:
            yield from _attribute_spans(buf, s, e, 0)


def _model_spans(buf: memoryview) -> Iterator[Span]:
    """Every TensorProto of a serialized model (graphs, subgraphs, local functions), as byte spans: the weights
    are skipped by their lengths, never parsed."""
    for field, wire, s, e in fields(buf, 0, len(buf)):
        if wire != LENGTH_DELIMITED:
            continue
        if field == _MODEL_GRAPH:
            yield from _graph_spans(buf, s, e)
        elif field == _MODEL_FUNCTIONS:
            yield from _function_spans(buf, s, e)


def _is_external(buf: memoryview, span: Span) -> bool:
    return any(f == _TENSOR_DATA_LOCATION and w == VARINT and v == _EXTERNAL for f, w, v, _ in fields(buf, *span))


def _external_location(buf: memoryview, span: Span) -> str | None:
    """An external tensor's ``location`` entry ("" when it has none); None for a tensor that is not external. One
    pass over the tensor's fields (a model of 2,000 external tensors is scanned at every pack)."""
    external = False
    location: str | None = None
    for field, wire, s, e in fields(buf, *span):
        if field == _TENSOR_DATA_LOCATION:
            external = external or (wire == VARINT and s == _EXTERNAL)
        elif field == _TENSOR_EXTERNAL_DATA and wire == LENGTH_DELIMITED and location is None:
            entry = {f: bytes(buf[a:b]) for f, w, a, b in fields(buf, s, e) if w == LENGTH_DELIMITED}
            if entry.get(_ENTRY_KEY) == b"location":
                location = entry.get(_ENTRY_VALUE, b"").decode("utf-8", "surrogateescape")
    if not external:
        return None
    return location or ""


def _scan(path: str, found: Callable[[memoryview, Iterator[Span]], Any], empty: Any) -> Any:
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return empty
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            buf = memoryview(mapped)
            try:
                return found(buf, _model_spans(buf))
            finally:
                buf.release()


def uses_external_data(path: str) -> bool:
    """Whether any tensor of the model keeps its data in an external file.

    A file that is not valid protobuf gives False: onnxruntime then says what
    is wrong with it.
    """
    try:
        return bool(external_locations(path))
    except ModelError:
        return False


def external_locations(path: str) -> set[str]:
    """The files the model's external tensors name (their ``location`` entries), read from the wire format. A
    command asks this of its model several times (its inputs' check, the pack's copy): one scan per file as it is.

    Raises:
        ModelError: the file is not valid protobuf.
    """
    st = os.stat(path)
    return set(_locations(os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino))


@functools.lru_cache(maxsize=16)
def _locations(path: str, size: int, mtime_ns: int, inode: int) -> frozenset[str]:
    """:func:`external_locations` of the file at ``path`` while it has this size, time and inode."""
    try:
        return frozenset(_scan(path, _external_locations, set()))
    except (ValueError, IndexError) as exc:
        raise ModelError(f"{path}: not a valid ONNX model ({exc})") from None


def _external_locations(buf: memoryview, spans: Iterator[Span]) -> set[str]:
    found = set()
    for span in spans:
        location = _external_location(buf, span)
        if location is not None:
            found.add(location)
    return found


def forget_scans() -> None:
    """Forget the scans :func:`external_locations` remembers (a benchmark times the scan itself)."""
    _locations.cache_clear()


def data_files(path: str) -> list[str]:
    """The external data files a model names, as paths beside it (read from the wire format, no weight loaded):
    files a command reads with the model, that no output may overwrite. A best effort: none for a file that is
    not a model, or not there."""
    try:
        if not os.path.isfile(path):
            return []
        locations = external_locations(path)
    except (ModelError, OSError, ValueError):
        return []
    folder = os.path.dirname(os.path.abspath(path))
    return sorted(os.path.normpath(os.path.join(folder, location)) for location in locations if location)


_OUTSIDE_HINT = "copy the file beside the model instead of linking it"


def external_data_problem(path: str) -> ModelError | None:
    """What is wrong with the external data a model file names, in mgedump's words (None: nothing this can see):
    a location that is not a safe relative path, a file that is not beside the model, or a link that leads out
    of the model's folder (onnxruntime refuses that last with a message of its own). Read from the wire format;
    no weight is loaded."""
    try:
        locations = sorted(external_locations(path))
    except (ModelError, OSError, ValueError):
        return None
    places = _Locations(os.path.dirname(os.path.abspath(path)))
    for location in locations:
        try:
            places.resolve(f"{path}: the model keeps weights in {location!r}", location)
        except ModelError as problem:
            return problem
    return None


class _Locations:
    """The external data locations of one model's folder, each checked and resolved to its real path once (a
    model of 2,000 tensors in 2,000 files asks for each twice, and the folder's real path is the same for all)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.real_folder = os.path.realpath(folder)
        self._prefix, self._real_prefix = os.path.join(folder, ""), os.path.join(self.real_folder, "")
        self._resolved: dict[str, str] = {}
        self._sizes: dict[str, int] = {}  # real path -> size, from the stat that checked it

    def resolve(self, where: str, location: str) -> str:
        """The real path of the file a location names: two spellings of one file (``./w.bin``, ``w.bin``) give one
        path.

        Raises:
            ModelError: not a safe relative path, not a file, or a link out of the folder.
        """
        found = self._resolved.get(location)
        if found is not None:
            return found
        if not location or os.path.isabs(location) or ".." in location.replace("\\", "/").split("/"):
            raise ModelError(f"{where}, which is not a safe relative path")
        joined = self._prefix + location  # os.path.join of the folder and a relative path
        try:
            st = os.lstat(joined)
        except (OSError, ValueError):  # ValueError: a NUL in the name
            st = None
        plain = location if "/" not in location and "\\" not in location else os.path.normpath(location)
        if st is not None and stat.S_ISREG(st.st_mode) and "/" not in plain:  # a file right in the folder, no link
            resolved = self._real_prefix + plain
        else:
            try:
                st = os.stat(joined)
            except (OSError, ValueError):
                st = None
            if st is None or not stat.S_ISREG(st.st_mode):
                raise ModelError(f"{where}, which is not a file beside the model")
            resolved = os.path.realpath(joined)  # a link may lead out of the folder the text stays in
            if os.path.commonpath([resolved, self.real_folder]) != self.real_folder:
                raise ModelError(
                    f"{where}, a link to {resolved}, outside the model's folder: onnxruntime reads weights from the "
                    "model's folder only",
                    hint=_OUTSIDE_HINT,
                )
        self._resolved[location] = resolved
        self._sizes.setdefault(resolved, st.st_size)
        return resolved

    def size(self, real: str) -> int:
        """The size of a file :meth:`resolve` gave."""
        return self._sizes[real]


# a model file up to this size is read whole and walked once to plan its copy (a model with external data is
# small); a larger one is first scanned over a memory map, and read only when it keeps weights outside
READ_WHOLE = 8 << 20


@dataclass(frozen=True)
class ModelSource:
    """How a model is copied: as its file, or rewritten so all its external data is one file.

    Attributes:
        model_bytes: the rewritten model, or None to copy the file as it is.
        data_paths: the external data files, to be concatenated into the one
            data file the rewritten model points at.
    """

    model_bytes: bytes | None
    data_paths: tuple[str, ...]


Field = tuple[int, int, int]  # a length-delimited field: where its tag starts, where its payload starts and ends
Chain = tuple[Field, ...]  # the fields a tensor lies in, from the model's own field down to the tensor's


def _fields_at(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """:func:`~mgedump.model.protowire.fields`, each with where its tag starts."""
    at = start
    for number, wire, s, e in fields(buf, start, end):
        yield number, wire, s, e, at
        at = e


def _at_most_once(found: list[Chain], what: str) -> list[Chain]:
    """A field protobuf holds once: given twice, protobuf would merge the two messages into one tensor or graph,
    which a rewrite in place cannot follow (onnx never writes that)."""
    if len(found) > 1:
        raise WireError(f"{what} given twice")
    return found


def _sparse_chains(buf: bytes, chain: Chain) -> list[Chain]:
    values, indices = [], []
    for field, wire, s, e, at in _fields_at(buf, chain[-1][1], chain[-1][2]):
        if wire == LENGTH_DELIMITED and field == _SPARSE_VALUES:
            values.append((*chain, (at, s, e)))
        elif wire == LENGTH_DELIMITED and field == _SPARSE_INDICES:
            indices.append((*chain, (at, s, e)))
    return _at_most_once(values, "a sparse tensor's values") + _at_most_once(indices, "a sparse tensor's indices")


def _attribute_chains(buf: bytes, chain: Chain, depth: int) -> list[Chain]:
    """An attribute's tensors in the order onnx walks them: ``t``, ``tensors``, ``sparse_tensor``,
    ``sparse_tensors``, then those of ``g`` and ``graphs``."""
    _, start, end = chain[-1]
    whole = memoryview(buf)
    view = whole[start:end]
    try:  # a large attribute of numbers or strings is checked at native speed
        holds = may_hold_tensors(view)
    finally:
        view.release()
        whole.release()
    if not holds:
        return []
    found: dict[int, list[Chain]] = {number: [] for number in HOLDER_FIELDS}
    for field, wire, s, e, at in _fields_at(buf, start, end):
        if wire == LENGTH_DELIMITED and field in found:
            found[field].append((*chain, (at, s, e)))
    t = _at_most_once(found[_ATTR_T], "an attribute's tensor")
    sparse = _at_most_once(found[_ATTR_SPARSE_TENSOR], "an attribute's sparse tensor")
    graphs = _at_most_once(found[_ATTR_G], "an attribute's graph") + found[_ATTR_GRAPHS]
    return [
        *t,
        *found[_ATTR_TENSORS],
        *(c for field in [*sparse, *found[_ATTR_SPARSE_TENSORS]] for c in _sparse_chains(buf, field)),
        *(c for field in graphs for c in _graph_chains(buf, field, depth + 1)),
    ]


_ATTRIBUTE_TAG = bytes([_NODE_ATTRIBUTE << 3 | LENGTH_DELIMITED])


def _node_chains(buf: bytes, chain: Chain, depth: int) -> list[Chain]:
    found: list[Chain] = []
    at, end = chain[-1][1], chain[-1][2]
    if buf.find(_ATTRIBUTE_TAG, at, end) < 0:  # no byte of the node can start an attribute (a MatMul's has none)
        return found
    for field, wire, s, e in fields(buf, at, end):
        if field == _NODE_ATTRIBUTE and wire == LENGTH_DELIMITED:
            found += _attribute_chains(buf, (*chain, (at, s, e)), depth)
        at = e
    return found


def _graph_chains(buf: bytes, chain: Chain, depth: int = 0) -> list[Chain]:
    """A graph's tensors in the order onnx walks them: its initializers, its sparse initializers' values and
    indices, then its nodes' attributes' (subgraphs included)."""
    if depth > _MAX_DEPTH:
        raise WireError("subgraphs nested too deep")
    initializers, sparse, nodes = [], [], []
    at = chain[-1][1]
    for field, wire, s, e in fields(buf, at, chain[-1][2]):
        if wire == LENGTH_DELIMITED:
            if field == _GRAPH_INITIALIZER:
                initializers.append((*chain, (at, s, e)))
            elif field == _GRAPH_SPARSE_INITIALIZER:
                sparse += _sparse_chains(buf, (*chain, (at, s, e)))
            elif field == _GRAPH_NODE:
                nodes += _node_chains(buf, (*chain, (at, s, e)), depth)
        at = e
    return initializers + sparse + nodes


def _function_chains(buf: bytes, chain: Chain) -> list[Chain]:
    """A model-local function's tensors: its nodes' attributes' (subgraphs included), then its attributes'
    defaults'."""
    nodes, attributes = [], []
    for field, wire, s, e, at in _fields_at(buf, chain[-1][1], chain[-1][2]):
        if wire != LENGTH_DELIMITED:
            continue
        if field == _FUNCTION_NODE:
            nodes += _node_chains(buf, (*chain, (at, s, e)), 0)
        elif field == _FUNCTION_ATTRIBUTE_PROTO:
            attributes += _attribute_chains(buf, (*chain, (at, s, e)), 0)
    return nodes + attributes


def _model_chains(buf: bytes) -> list[Chain]:
    """Every TensorProto of a serialized model, as the fields it lies in, in the order onnx's own walk of a loaded
    model visits them (the graph's, its subgraphs', then the local functions'): the order the data member's files
    are laid out in."""
    graph: list[Chain] = []
    functions: list[Chain] = []
    for field, wire, s, e, at in _fields_at(buf, 0, len(buf)):
        if wire != LENGTH_DELIMITED:
            continue
        if field == _MODEL_GRAPH:
            graph.append(((at, s, e),))
        elif field == _MODEL_FUNCTIONS:
            functions += _function_chains(buf, ((at, s, e),))
    return [c for field in _at_most_once(graph, "the model's graph") for c in _graph_chains(buf, field)] + functions


Entry = tuple[int, int, bytes, bytes]  # an external_data entry: where its field starts and ends, its key and value


def _external_entries(buf: bytes, field: Field) -> tuple[str, list[Entry]] | None:
    """An external tensor's name and ``external_data`` entries; None for a tensor that is not external. As
    protobuf reads them: the last ``data_location`` of a known value counts, and an entry's last key and value."""
    data_location, name, entries = None, b"", []
    at = field[1]
    for number, wire, s, e in fields(buf, field[1], field[2]):
        if number == _TENSOR_EXTERNAL_DATA and wire == LENGTH_DELIMITED:
            entries.append((at, e, *_key_value(buf, s, e)))
        elif number == _TENSOR_DATA_LOCATION and wire == VARINT and s in (0, _EXTERNAL):
            data_location = s
        elif number == _TENSOR_NAME and wire == LENGTH_DELIMITED:
            name = buf[s:e]
        at = e
    if data_location != _EXTERNAL:
        return None
    return name.decode("utf-8", "replace"), entries


_KEY_TAG, _VALUE_TAG = _ENTRY_KEY << 3 | LENGTH_DELIMITED, _ENTRY_VALUE << 3 | LENGTH_DELIMITED
_ENTRY_TAG = write_varint(_TENSOR_EXTERNAL_DATA << 3 | LENGTH_DELIMITED)


def _key_value(buf: bytes, start: int, end: int) -> tuple[bytes, bytes]:
    """An entry's key and value (the last of each, as protobuf reads them)."""
    if end - start >= 4 and buf[start] == _KEY_TAG and buf[start + 1] < 0x80:  # as protobuf writes one, read inline
        key_end = start + 2 + buf[start + 1]
        if (
            key_end + 2 <= end
            and buf[key_end] == _VALUE_TAG
            and buf[key_end + 1] < 0x80
            and key_end + 2 + buf[key_end + 1] == end
        ):
            return buf[start + 2 : key_end], buf[key_end + 2 : end]
    key = value = b""
    for part, wire, a, b in fields(buf, start, end):
        if part == _ENTRY_KEY and wire == LENGTH_DELIMITED:
            key = buf[a:b]
        elif part == _ENTRY_VALUE and wire == LENGTH_DELIMITED:
            value = buf[a:b]
    return key, value


_REWRITTEN = (b"location", b"offset", b"length")


def _pointed_to(entries: list[Entry], location: bytes, offset: int, length: int) -> list[tuple[int, int, bytes]]:
    """The edits that point a tensor at ``location``: entries in onnx's order (``location``, ``offset``,
    ``length``) get their values where they are; else the first entry's field becomes those three followed by
    the other keys (a checksum, ...) and the other entries' fields go, as onnx writes a list it was given anew."""
    values = (location, str(offset).encode(), str(length).encode())
    if len(entries) == 3 and (entries[0][2], entries[1][2], entries[2][2]) == _REWRITTEN:
        fresh = [_location_field(location), _entry_field(b"offset", values[1]), _entry_field(b"length", values[2])]
        (first, after_first, _, _), (second, after_second, _, _), (third, end, _, _) = entries
        if after_first == second and after_second == third:  # side by side, as onnx writes them: one edit
            return [(first, end, b"".join(fresh))]
        return [(at, after, data) for (at, after, _, _), data in zip(entries, fresh, strict=True)]
    kept = [(key, value) for _, _, key, value in entries if key not in _REWRITTEN]
    whole = b"".join(_entry_field(key, value) for key, value in [*zip(_REWRITTEN, values, strict=True), *kept])
    (first_at, first_end, _, _), *others = entries
    return [(first_at, first_end, whole), *((at, end, b"") for at, end, _, _ in others)]


def _spliced_in_place(buf: bytes, edits: list[tuple[int, int, bytes]], grown: list[tuple[Chain, int]]) -> bytes:
    """The model with ``edits`` made (byte ranges replaced) and the length of every field around them written
    anew; every other byte as it was. ``grown``: each edited tensor's chain, and how many bytes it grew by."""
    growth: dict[Field, int] = {}
    parent: dict[Field, Field | None] = {}
    depth: dict[Field, int] = {}
    for chain, delta in grown:
        for k, field in enumerate(chain):
            growth.setdefault(field, 0)
            parent[field], depth[field] = (chain[k - 1] if k else None), k
        growth[chain[-1]] += delta
    pieces = list(edits)
    for field in sorted(growth, key=depth.__getitem__, reverse=True):  # inner fields first
        change = growth[field]
        if not change:
            continue
        at, start, end = field
        _, tag_end = read_varint(buf, at, start)
        prefix = write_varint(end - start + change)
        pieces.append((tag_end, start, prefix))
        above = parent[field]
        if above is not None:
            growth[above] += change + len(prefix) - (start - tag_end)
    out: list[bytes] = []
    pos = 0
    for start, end, data in sorted(pieces, key=lambda piece: piece[0]):
        out += (buf[pos:start], data)
        pos = end
    out.append(buf[pos:])
    return b"".join(out)


def model_source(path: str, data_location: str) -> ModelSource:
    """Plan how to copy a model: the file as it is, or rewritten to point at one data file.

    The rewrite is made on the wire format, without onnx: each external tensor's entries get the data file, its
    offset in it and its length, and the fields around them their new lengths; every other byte stays as written.
    For a model onnx wrote, these are the bytes onnx's own rewrite gives (docs/bundle.md, "Layout").

    Args:
        path: the model file.
        data_location: the name of the one data file, beside the rewritten
            model, into which every external data file is concatenated.

    Raises:
        ModelError: not a valid model, or an external data reference is unsafe, missing or out of range.
    """
    if os.path.getsize(path) > READ_WHOLE and not uses_external_data(path):  # its weights embedded: left unread
        return ModelSource(None, ())
    with open(path, "rb") as f:
        data = f.read()
    try:
        return _rewritten(path, data, data_location)
    except (ValueError, IndexError) as exc:  # the wire reader's WireError
        if not uses_external_data(path):  # nothing of it is copied but the file: onnxruntime judges it
            return ModelSource(None, ())
        raise ModelError(f"{path}: not a valid ONNX model ({exc})") from None


def _rewritten(path: str, buf: bytes, data_location: str) -> ModelSource:
    """The model rewritten to read every external tensor from ``data_location`` (the file as it is when none is
    external), and the files laid end to end there."""
    places = _Locations(os.path.dirname(os.path.abspath(path)))
    files: dict[str, tuple[int, int]] = {}  # real path -> (base offset, size): a file named two ways is one file
    total = 0
    edits: list[tuple[int, int, bytes]] = []
    grown: list[tuple[Chain, int]] = []
    target = data_location.encode("utf-8", "surrogateescape")
    for chain in _model_chains(buf):
        found = _external_entries(buf, chain[-1])
        if found is None:
            continue
        name, entries = found
        info = {
            key.decode("utf-8", "surrogateescape"): value.decode("utf-8", "surrogateescape")
            for _, _, key, value in entries
        }  # the last of a key given twice, as onnx reads them
        location = info.get("location") or ""
        where = f"{path}: tensor {name!r} keeps its data in {location!r}"
        real = places.resolve(where, location)
        if real not in files:
            size = places.size(real)
            files[real] = (total, size)
            total += size
        base, size = files[real]
        offset = _number(info, "offset", where) or 0
        given_length = _number(info, "length", where)
        length = size - offset if given_length is None else given_length
        if offset < 0 or length < 0 or offset + length > size:
            raise ModelError(f"{where} at offset {offset}, length {length}, past the file's {size} bytes")
        made = _pointed_to(entries, target, base + offset, length)
        edits += made
        grown.append((chain, sum(len(data) - (end - start) for start, end, data in made)))
    if not grown:
        return ModelSource(None, ())
    return ModelSource(_spliced_in_place(buf, edits, grown), tuple(files))


def _number(info: dict[str, str], key: str, where: str) -> int | None:
    """An external tensor's ``offset`` or ``length`` (None: not given).

    Raises:
        ModelError: not a number.
    """
    if key not in info:
        return None
    try:
        return int(info[key])
    except ValueError:
        raise ModelError(f"{where} at {key} {info[key]!r}, which is not a number of bytes") from None


_TENSOR_NAME = 8


def _entry(key: str, value: str) -> bytes:
    """A ``StringStringEntryProto`` field of a TensorProto's ``external_data``."""
    return _entry_field(key.encode(), value.encode())


@functools.lru_cache(maxsize=4)
def _location_field(location: bytes) -> bytes:
    """The ``location`` entry every external tensor of a rewritten model gets (made once)."""
    return _entry_field(b"location", location)


def _entry_field(key: bytes, value: bytes) -> bytes:
    """A ``StringStringEntryProto`` field of a TensorProto's ``external_data``, as protobuf writes one: its key,
    then its value."""
    entry = b"%c%b%b%c%b%b" % (_KEY_TAG, write_varint(len(key)), key, _VALUE_TAG, write_varint(len(value)), value)
    return _ENTRY_TAG + write_varint(len(entry)) + entry


def _pointed(buf: memoryview, span: Span, allowed: str, file_name: str, base: int, size: int, label: str) -> bytes:
    """An external tensor's bytes, reading from ``file_name`` at ``base`` plus its offset (see :func:`point_into`).

    Raises:
        BundleError: it names another file than ``allowed``, or lies outside its ``size`` bytes.
    """
    kept, entries, name = [], [], ""
    pos = span[0]
    for field, wire, s, e in fields(buf, *span):
        if field == _TENSOR_EXTERNAL_DATA and wire == LENGTH_DELIMITED:
            entry = {f: bytes(buf[a:b]) for f, w, a, b in fields(buf, s, e) if w == LENGTH_DELIMITED}
            key = entry.get(_ENTRY_KEY, b"").decode("utf-8", "replace")
            value = entry.get(_ENTRY_VALUE, b"").decode("utf-8", "replace")
            if key in ("location", "offset", "length"):
                entries.append((key, value))
                pos = e
                continue
        elif field == _TENSOR_NAME and wire == LENGTH_DELIMITED:
            name = bytes(buf[s:e]).decode("utf-8", "replace")
        kept.append(bytes(buf[pos:e]))
        pos = e
    where = f"{label}: tensor {name!r}"
    locations = [value for key, value in entries if key == "location"]
    if locations != [allowed]:
        shown = repr(locations[0]) if len(locations) == 1 else "no one file"
        raise BundleError(
            f"{label}: the model reads external data from {shown}; a bundled model may read its data member only"
        )
    offset = _external_number(entries, "offset", where)
    length = _external_number(entries, "length", where)
    offset = offset or 0
    length = size - offset if length is None else length
    if offset + length > size:
        raise BundleError(f"{where} reads bytes {offset}..{offset + length} of its data member, which holds {size}")
    entries_out = _entry("location", file_name) + _entry("offset", str(base + offset)) + _entry("length", str(length))
    return b"".join(kept) + entries_out


def _external_number(entries: list[tuple[str, str]], key: str, where: str) -> int | None:
    """An external tensor's ``offset`` or ``length``, as the digits it is written in (None: not given)."""
    values = [value for k, value in entries if k == key]
    if not values:
        return None
    if len(values) > 1 or not values[0].isascii() or not values[0].isdigit():
        raise BundleError(f"{where}: its {key} {', '.join(map(repr, values))} is not one number of bytes")
    return int(values[0])


def _spliced(buf: memoryview, start: int, end: int, edits: list[tuple[int, int, bytes]]) -> bytes:
    """The message at ``buf[start:end]`` with the payloads ``edits`` name replaced (sorted, none overlapping),
    every message around them given its new length."""
    out, pos, k = [], start, 0
    for _, wire, s, e in fields(buf, start, end):
        inside = []
        while k < len(edits) and edits[k][1] <= e and wire == LENGTH_DELIMITED:
            inside.append(edits[k])
            k += 1
        if not inside:
            out.append(bytes(buf[pos:e]))
        else:
            _, tag_end = read_varint(buf, pos, s)
            payload = inside[0][2] if [edit[:2] for edit in inside] == [(s, e)] else _spliced(buf, s, e, inside)
            out.append(bytes(buf[pos:tag_end]) + write_varint(len(payload)) + payload)
        pos = e
    if k != len(edits):
        raise WireError("a tensor lies outside the message that holds it")
    return b"".join(out)


def point_into(model_bytes: bytes, member: str, file_name: str, base: int, size: int, label: str) -> bytes:
    """A bundled model rewritten to read its weights where they lie: inside the bundle file itself, the data
    member's ``size`` bytes from offset ``base`` (docs/bundle.md, "Reading the weights in place"). Every external
    tensor must name the data member (check 8 of "What a reader checks") and lie within it; it then names
    ``file_name`` (the bundle's own name, found in the folder a session is given) at ``base`` plus its offset, with
    its length written out (none meant "to the end of the file"). Read and written on the wire format: ``mgerun``
    runs without onnx.

    Raises:
        BundleError: a tensor that names another file, or lies outside the member.
        ModelError: the bytes are not a model.
    """
    allowed = member.rsplit("/", 1)[-1]
    buf = memoryview(model_bytes)
    try:
        edits = [
            (sp[0], sp[1], _pointed(buf, sp, allowed, file_name, base, size, label))
            for sp in _model_spans(buf)
            if _is_external(buf, sp)
        ]
        return _spliced(buf, 0, len(buf), sorted(edits))
    except (ValueError, IndexError) as exc:
        raise ModelError(f"{label}: not a valid ONNX model ({exc})") from None
    finally:
        buf.release()
