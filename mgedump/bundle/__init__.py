"""The bundle: one file holding a model and its test cases.

- :mod:`~mgedump.bundle.format`: the format's constants and manifest validation (docs/bundle.md);
- :mod:`~mgedump.bundle.manifest`: :class:`Manifest`, the manifest as typed records;
- :mod:`~mgedump.bundle.requirements`: what a bundled model needs at run time, and whether this machine has it;
- :mod:`~mgedump.bundle.reader`: :class:`Bundle`, which checks everything it reads;
- :mod:`~mgedump.bundle.writer`: :func:`write_bundle`;
- :mod:`~mgedump.bundle.tensorproto`: the ONNX TensorProto codec that every
  ``.pb`` reader and writer of the project uses.
"""

from __future__ import annotations

from .format import (
    DATA_MEMBER,
    FORMAT,
    FORMAT_VERSION,
    IO_DUMP_FOLDER,
    MANIFEST,
    MODEL_MEMBER,
    case_folder,
    check_member_name,
    validate_manifest,
)
from .manifest import AssertionEntry, CaseEntry, Manifest, ModelEntry, VariantEntry
from .reader import Bundle
from .writer import Member, tensor_bytes, write_bundle

__all__ = [
    "DATA_MEMBER",
    "FORMAT",
    "FORMAT_VERSION",
    "IO_DUMP_FOLDER",
    "MANIFEST",
    "MODEL_MEMBER",
    "AssertionEntry",
    "Bundle",
    "CaseEntry",
    "Manifest",
    "ModelEntry",
    "VariantEntry",
    "case_folder",
    "Member",
    "check_member_name",
    "tensor_bytes",
    "validate_manifest",
    "write_bundle",
]
