"""Which attributes of a model can hold a tensor, asked of protobuf's own parser at native speed.

The model-file scan (:mod:`mgedump.model.modelfile`) walks the wire format in
Python, skipping weights by their length. An attribute is the one place where
that costs per element: a tree ensemble keeps millions of node values in
``floats``, ``ints`` and ``strings`` attributes, one protobuf field each, and a
Python walk of them took minutes where onnxruntime opens the model in seconds.

Only six fields of an ``AttributeProto`` can hold a tensor (``t``,
``tensors``, ``sparse_tensor``, ``sparse_tensors``) or a graph that holds one
(``g``, ``graphs``). A large attribute is parsed here as a message that
declares those six fields and nothing else: protobuf's parser (C, upb) skips
every other field at native speed and says whether any of the six is there.
Only an attribute that has one is walked in Python, and such an attribute is
its tensor or graph, few fields.

The message type is built from a descriptor at run time, so neither onnx nor
any generated code is needed (``mgerun`` runs without onnx; protobuf comes with
onnxruntime). Without protobuf, every attribute is walked in Python, as before.
"""

from __future__ import annotations

from typing import Any

from .protowire import WireError

# AttributeProto fields that hold a tensor or a graph (onnx.proto3): t, g, tensors, graphs, sparse_tensor, sparse_tensors
HOLDER_FIELDS = (5, 6, 10, 11, 22, 23)
PARSE_OVER = 4096  # bytes: a smaller attribute is walked in Python (a few fields), a larger one parsed here

_NOT_LOADED: Any = object()
_message_class: Any = _NOT_LOADED


def _build_class() -> Any:
    """The message class, or None when protobuf is not installed."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # type: ignore[import-untyped]
    except ImportError:
        return None
    file = descriptor_pb2.FileDescriptorProto(
        name="mgedump/attribute_holders.proto", package="mgedump_scan", syntax="proto2"
    )
    message = file.message_type.add(name="AttributeHolders")
    for number in HOLDER_FIELDS:
        message.field.add(
            name=f"field_{number}",
            number=number,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName("mgedump_scan.AttributeHolders")
    if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.22
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)  # pragma: no cover - older protobuf


def _holders_class() -> Any:
    global _message_class
    if _message_class is _NOT_LOADED:
        _message_class = _build_class()
    return _message_class


def native() -> bool:
    """Whether attributes are parsed by protobuf (else walked in Python)."""
    return _holders_class() is not None


def may_hold_tensors(payload: memoryview) -> bool:
    """Whether an attribute's bytes may hold a tensor or a graph: False only when protobuf's parser read them all
    and found none of the fields that can. A small attribute, or any without protobuf, is always walked (True).

    Raises:
        WireError: protobuf's parser refuses the bytes (truncated, a length past its end, too deep).
    """
    if len(payload) <= PARSE_OVER:  # before protobuf is imported: a model of small attributes never needs it
        return True
    cls = _holders_class()
    if cls is None:
        return True
    message = cls()
    try:
        message.ParseFromString(payload)
    except Exception as exc:  # protobuf's DecodeError (its module differs between implementations)
        raise WireError(f"attribute: {exc}") from None
    return bool(message.ListFields())
