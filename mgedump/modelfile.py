"""What packing needs to know about a model file, read without loading its weights.

:func:`uses_external_data` walks the protobuf wire format over a memory map,
skipping tensor bytes by their length, so a model with 1 GiB of embedded
weights costs a scan of its few thousand field headers, not a parse. Only a
model that keeps weights in external files is parsed (its protobuf is then
small), to point every external tensor at the bundle's one data member.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Iterator

from .errors import ModelError
from .tensorproto import read_varint

DATA_MEMBER = "model.onnx.data"

# protobuf field numbers (onnx.proto3)
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_SPARSE_INITIALIZER = 1, 5, 15
_NODE_ATTRIBUTE = 5
_ATTR_T, _ATTR_G, _ATTR_TENSORS, _ATTR_GRAPHS, _ATTR_SPARSE_TENSOR, _ATTR_SPARSE_TENSORS = 5, 6, 10, 11, 22, 23
_SPARSE_VALUES, _SPARSE_INDICES = 1, 2
_TENSOR_DATA_LOCATION = 14
_EXTERNAL = 1


class _WireError(ValueError):
    """The bytes are not the protobuf they should be."""


def _fields(buf: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """Yield (field, wire type, value or start, end) for each field of one message."""
    pos = start
    while pos < end:
        key, pos = read_varint(buf, pos, end)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos, end)
            yield field, 0, value, pos
        elif wire == 2:
            length, pos = read_varint(buf, pos, end)
            if pos + length > end:
                raise _WireError("field runs past its message")
            yield field, 2, pos, pos + length
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise _WireError(f"wire type {wire}")
    if pos != end:
        raise _WireError("message runs past its end")


def _tensor_is_external(buf: memoryview, start: int, end: int) -> bool:
    return any(f == _TENSOR_DATA_LOCATION and w == 0 and v == _EXTERNAL for f, w, v, _ in _fields(buf, start, end))


def _sparse_is_external(buf: memoryview, start: int, end: int) -> bool:
    return any(f in (_SPARSE_VALUES, _SPARSE_INDICES) and w == 2 and _tensor_is_external(buf, s, e) for f, w, s, e in _fields(buf, start, end))


def _graph_is_external(buf: memoryview, start: int, end: int, depth: int = 0) -> bool:
    if depth > 64:
        raise _WireError("subgraphs nested too deep")
    for field, wire, s, e in _fields(buf, start, end):
        if wire != 2:
            continue
        if field == _GRAPH_INITIALIZER and _tensor_is_external(buf, s, e):
            return True
        if field == _GRAPH_SPARSE_INITIALIZER and _sparse_is_external(buf, s, e):
            return True
        if field == _GRAPH_NODE:
            for nf, nw, ns, ne in _fields(buf, s, e):
                if nf != _NODE_ATTRIBUTE or nw != 2:
                    continue
                for af, aw, as_, ae in _fields(buf, ns, ne):
                    if aw != 2:
                        continue
                    if af in (_ATTR_T, _ATTR_TENSORS) and _tensor_is_external(buf, as_, ae):
                        return True
                    if af in (_ATTR_SPARSE_TENSOR, _ATTR_SPARSE_TENSORS) and _sparse_is_external(buf, as_, ae):
                        return True
                    if af in (_ATTR_G, _ATTR_GRAPHS) and _graph_is_external(buf, as_, ae, depth + 1):
                        return True
    return False


def uses_external_data(path: str) -> bool:
    """Whether any tensor of the model keeps its data in an external file.

    A file that is not valid protobuf gives False: onnxruntime then says what
    is wrong with it.
    """
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return False
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            buf = memoryview(mapped)
            try:
                for field, wire, s, e in _fields(buf, 0, len(buf)):
                    if field == _MODEL_GRAPH and wire == 2 and _graph_is_external(buf, s, e):
                        return True
                return False
            except (ValueError, IndexError):
                return False
            finally:
                buf.release()


@dataclass(frozen=True)
class ModelSource:
    """How a model goes into a bundle.

    Attributes:
        model_bytes: the rewritten model, or None to stream the file as it is.
        data_paths: the external data files, concatenated into ``model.onnx.data``.
    """

    model_bytes: bytes | None
    data_paths: tuple[str, ...]


def _all_tensors(graph) -> Iterator:
    for tensor in graph.initializer:
        yield tensor
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("sparse_tensor"):
                yield attr.sparse_tensor.values
                yield attr.sparse_tensor.indices
            for sparse in attr.sparse_tensors:
                yield sparse.values
                yield sparse.indices
            if attr.HasField("g"):
                yield from _all_tensors(attr.g)
            for sub in attr.graphs:
                yield from _all_tensors(sub)


def _point_to(tensor, location: str, offset: int, length: int) -> None:
    """Rewrite a tensor's external data reference (other keys, like checksum, are kept)."""
    kept = [(e.key, e.value) for e in tensor.external_data if e.key not in ("location", "offset", "length")]
    del tensor.external_data[:]
    for key, value in [("location", location), ("offset", str(offset)), ("length", str(length)), *kept]:
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value


def model_source(path: str) -> ModelSource:
    """Plan a model's members: the file as it is, or rewritten to one data member.

    Raises:
        ModelError: an external data reference is unsafe, missing or out of range.
    """
    if not uses_external_data(path):
        return ModelSource(None, ())
    import onnx
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data as tensor_external

    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise ModelError(f"{path}: not a valid ONNX model ({type(exc).__name__}: {exc})") from None
    folder = os.path.dirname(os.path.abspath(path))
    files: dict[str, tuple[int, int]] = {}  # real path -> (base offset, size)
    total = 0
    for tensor in _all_tensors(model.graph):
        if not tensor_external(tensor):
            continue
        info = ExternalDataInfo(tensor)
        location = info.location or ""
        where = f"{path}: tensor {tensor.name!r} keeps its data in {location!r}"
        if not location or os.path.isabs(location) or ".." in location.replace("\\", "/").split("/"):
            raise ModelError(f"{where}, which is not a safe relative path")
        real = os.path.join(folder, location)
        if not os.path.isfile(real):
            raise ModelError(f"{where}, which does not exist beside the model")
        if real not in files:
            size = os.path.getsize(real)
            files[real] = (total, size)
            total += size
        base, size = files[real]
        offset = int(info.offset or 0)
        length = int(info.length) if info.length is not None else size - offset
        if offset < 0 or length < 0 or offset + length > size:
            raise ModelError(f"{where} at offset {offset}, length {length}, past the file's {size} bytes")
        _point_to(tensor, DATA_MEMBER, base + offset, length)
    return ModelSource(model.SerializeToString(), tuple(files))
