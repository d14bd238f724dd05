"""Io dumps: every tensor of a model's run on a test case, as files. This docstring is the format's specification.

An io dump (format ``mgedump-iodump``, version 1, independent of the package
version) is a folder::

    DIR/test_data_set_0/index.json
    DIR/test_data_set_0/0000.pb     one ONNX TensorProto per tensor, named after the tensor
    DIR/test_data_set_0/0001.pb
    DIR/test_data_set_1/...

The tensors of a test case are the model's graph inputs (initializers are not
inputs), then the outputs of every node of the main graph, in execution order
(the graph's node order, which ONNX requires to be topological), except the
tensors computed from weights alone (a dequantized or reshaped weight): they
are the same for every input, can be recomputed from the model, and would make
a dump of a weight-only quantized model many times the model's size. A value that
is not a tensor (a sequence, a map, an optional) is stored as ONNX stores it
in test data: a ``SequenceProto``, ``MapProto`` or ``OptionalProto``, its
``dtype`` onnxruntime's name of its type (``seq(map(int64,tensor(float)))``),
its ``shape`` empty and its statistics over every tensor it holds. File names are
numbers, so no tensor name needs escaping; the name is inside the TensorProto
and in the index.

``index.json`` (UTF-8 JSON object), all keys REQUIRED:

``format``: ``"mgedump-iodump"``. ``version``: ``1``; a reader MUST refuse
    other versions.
``model_sha256``: the sha256 of the model file that ran. Every test case of a
    folder MUST come from the same model.
``test_case``: the test case's number (the N of its folder).
``nodes``: the main graph's nodes in execution order: ``{"name", "op_type",
    "domain", "inputs": [str], "outputs": [str]}`` (names as in the model; an
    empty string is an omitted optional input).
``tensors``: ``{"name", "file", "dtype", "shape", "size", "sha256", "min",
    "max", "mean", "nan", "inf"}`` per tensor, in the order above: ``file`` is
    the TensorProto's file name in the folder, ``size`` its byte count and
    ``sha256`` its hash (a reader MUST refuse a file that does not match: the
    dump was edited), ``dtype`` a numpy dtype name, ``shape`` a list of ints;
    ``min``, ``max`` and ``mean`` are over the finite elements of a numeric
    tensor (null when there are none), ``nan`` and ``inf`` count the others.

A dump is made by running the model with every tensor exposed
(:mod:`.in_parts`, :mod:`.exposed`); this module writes, reads and checks the
format only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ..base import text
from ..base.errors import DataError, OutputError
from ..base.fileio import make_folder
from ..base.jsontypes import has_fields, is_int, is_number, is_str_list
from ..base.log import warn_once
from ..base.naming import option_name
from ..bundle.format import case_folder
from ..bundle.tensorproto import decode, encode_parts
from ..bundle.valueproto import decode_value
from ..model.valuetype import is_structured, parse
from .structured import Structured, write_structured

FORMAT = "mgedump-iodump"
VERSION = 1
INDEX = "index.json"
CASE_DIR = re.compile(r"^test_data_set_(\d+)$")
FILE_NAME = re.compile(r"^\d{4,}\.pb$")
MAX_INDEX_BYTES = 64 << 20


# ---------------------------------------------------------------- the graph's plan


@dataclass(frozen=True)
class NodeInfo:
    """A node of the main graph, as the index records it."""

    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op_type": self.op_type,
            "domain": self.domain,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
        }


@dataclass(frozen=True)
class Plan:
    """What a dump of one model holds: its nodes in execution order and the tensors to expose, in order."""

    nodes: tuple[NodeInfo, ...]
    inputs: tuple[str, ...]
    tensors: tuple[str, ...]  # graph inputs, then node outputs

    @classmethod
    def of(cls, model: Any) -> Plan:
        """The plan of an ONNX ModelProto (its weights need not be loaded): tensors computed from weights alone
        (:func:`weight_only_tensors`) are left out, and so are those whose names are not UTF-8 (onnx hands them
        over as bytes; onnxruntime's API cannot name them, so nothing can expose them). The nodes keep every
        name, such a name as text with its bytes recoverable (``\\xff``)."""
        graph = model.graph
        weights = {init.name for init in graph.initializer}
        inputs = tuple(v.name for v in graph.input if v.name not in weights and isinstance(v.name, str))
        order = _execution_order(graph)
        nodes = tuple(
            NodeInfo(
                _text(n.name),
                _text(n.op_type),
                _text(n.domain),
                tuple(_text(name) for name in n.input),
                tuple(_text(name) for name in n.output),
            )
            for n in order
        )
        constant = weight_only_tensors(model)
        seen = set(inputs) | constant
        tensors = list(inputs)
        unnamed = 0
        for node in order:
            for name in node.output:
                if not isinstance(name, str):
                    unnamed += 1
                elif name and name not in seen:
                    seen.add(name)
                    tensors.append(name)
        if unnamed:
            warn_once(
                f"{unnamed} tensor(s) of the model have names that are not UTF-8: onnxruntime cannot name them, so "
                "they are not exposed (the nodes that make them are listed)"
            )
        return cls(nodes, inputs, tuple(tensors))


_NOT_CONSTANT_OPS = ("If", "Loop", "Scan", "Multinomial", "Bernoulli")


def weight_only_tensors(model: Any) -> set[str]:
    """The main graph's tensors computed from weights alone (a dequantized weight, a reshaped constant): the same
    for every input, so a dump leaves them out and anyone can recompute them from the model.

    A node's outputs are such tensors when every input it reads is a weight (an initializer that is not also a graph
    input), a Constant's output or such a tensor; random and control-flow ops never are.
    """
    graph = model.graph
    listed = {v.name for v in graph.input}
    known = {init.name for init in graph.initializer if init.name not in listed}
    found: set[str] = set()
    for node in _execution_order(graph):
        op = node.op_type
        if op in _NOT_CONSTANT_OPS or op.startswith("Random") or node.domain not in ("", "ai.onnx"):
            continue
        if any(attr.HasField("g") or len(attr.graphs) for attr in node.attribute):
            continue
        if all(not name or name in known for name in node.input):
            produced = [name for name in node.output if name]
            known.update(produced)
            found.update(produced)
    return found


def _text(value: str | bytes) -> str:
    """A node's name, op type or domain as JSON can hold it: onnx hands names that are not UTF-8 over as bytes;
    they are kept recoverable (``\\xff``) rather than failing the dump."""
    return text.json(text.decoded(value))


def _execution_order(graph: Any) -> list[Any]:
    """The graph's nodes in the order they run: as stored, which ONNX requires to be topological."""
    return list(graph.node)


# ---------------------------------------------------------------- writing


def tensor_stats(array: np.ndarray) -> dict[str, Any]:
    """min, max and mean of the finite elements (null when none or not numeric), and the NaN and infinity counts."""
    stats: dict[str, Any] = {"min": None, "max": None, "mean": None, "nan": 0, "inf": 0}
    if array.dtype.kind not in "biuf" or array.size == 0:
        return stats
    values = array.view(np.uint8) if array.dtype.kind == "b" else array
    if array.dtype.kind == "f":
        finite = np.isfinite(values)
        if not finite.all():  # copy only when something is not finite
            stats["nan"] = int(np.count_nonzero(np.isnan(values)))
            stats["inf"] = int(values.size - np.count_nonzero(finite) - stats["nan"])
            values = values[finite]
    if values.size:
        stats["min"] = _number(values.min())
        stats["max"] = _number(values.max())
        stats["mean"] = float(values.mean(dtype=np.float64))
    return stats


def _number(value: Any) -> int | float:
    value = value.item() if isinstance(value, np.generic) else value
    return int(value) if isinstance(value, (bool, int)) else float(value)


def case_dir(folder: str, index: int) -> str:
    """The folder of test case ``index`` in a dump folder."""
    return os.path.join(folder, case_folder(index))


def write_case(
    folder: str,
    index: int,
    plan: Plan,
    model_sha256: str,
    tensors: Iterator[tuple[str, np.ndarray]],
) -> dict[str, Any]:
    """Write one test case's tensors (as they come) and its index into ``folder/test_data_set_N``.

    The case folder is written beside its final place and renamed into it, so
    a failed run leaves the earlier dump of that case as it was.

    Raises:
        OutputError: the folder cannot be written, or holds a dump of another model.
        RunError: the model failed to run (nothing is left behind).
    """
    _check_same_model(folder, model_sha256)
    target = case_dir(folder, index)
    make_folder(folder, option_name("io_dump"))
    try:
        staging = tempfile.mkdtemp(prefix=f".{case_folder(index)}.", dir=folder)
    except OSError as exc:
        raise OutputError(f"cannot write in {folder}: {exc.strerror or exc}") from None
    try:
        order = {name: k for k, name in enumerate(plan.tensors)}
        entries = []
        for name, array in tensors:
            file = f"{order[name]:04d}.pb"
            if isinstance(array, Structured):  # a sequence, a map or an optional
                entries.append(write_structured(staging, file, name, array, tensor_stats(array.flat())))
                continue
            head, payload = encode_parts(array, name)  # the tensor's own bytes, not a copy
            digest = hashlib.sha256(head)
            digest.update(payload)
            with open(os.path.join(staging, file), "wb") as f:
                f.write(head)
                f.write(payload)
            entries.append(
                {
                    "name": name,
                    "file": file,
                    "dtype": str(array.dtype) if array.dtype.kind not in "OUS" else "str",
                    "shape": [int(d) for d in array.shape],
                    "size": len(head) + payload.nbytes,
                    "sha256": digest.hexdigest(),
                    **tensor_stats(array),
                }
            )
            del head, payload, array
        index_doc = {
            "format": FORMAT,
            "version": VERSION,
            "model_sha256": model_sha256,
            "test_case": index,
            "nodes": [node.to_json() for node in plan.nodes],
            "tensors": entries,
        }
        with open(os.path.join(staging, INDEX), "w", encoding="utf-8") as f:
            json.dump(index_doc, f, indent=1, allow_nan=False)
        old = None
        if os.path.exists(target):
            old = tempfile.mkdtemp(prefix=f".old.{case_folder(index)}.", dir=folder)
            os.rmdir(old)
            os.replace(target, old)
        os.replace(staging, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return index_doc
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise OutputError(f"cannot write the io dump in {folder}: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _check_same_model(folder: str, model_sha256: str) -> None:
    """Refuse to add to a folder that holds a dump of another model (or something that is not a dump)."""
    if not os.path.exists(folder):
        return
    if not os.path.isdir(folder):
        raise OutputError(f"io dump target {folder} is not a folder")
    for entry in sorted(os.listdir(folder)):
        if entry.startswith("."):
            continue
        index_path = os.path.join(folder, entry, INDEX)
        if not CASE_DIR.match(entry) or not os.path.isfile(index_path):
            raise OutputError(
                f"io dump target {folder} holds {entry!r}, which is not part of an io dump; give an empty or new folder"
            )
        try:
            with open(index_path, encoding="utf-8") as f:
                other = json.load(f).get("model_sha256")
        except (OSError, ValueError, AttributeError):
            other = None
        if other != model_sha256:
            raise OutputError(
                f"io dump target {folder} holds a dump of another model ({entry}); give an empty or new folder"
            )


# ---------------------------------------------------------------- reading


@dataclass
class CaseDump:
    """One test case of an io dump, checked; tensors are read (and their hashes checked) when asked for."""

    folder: str
    index: dict[str, Any]
    by_name: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def nodes(self) -> list[NodeInfo]:
        return [
            NodeInfo(n["name"], n["op_type"], n["domain"], tuple(n["inputs"]), tuple(n["outputs"]))
            for n in self.index["nodes"]
        ]

    @property
    def names(self) -> list[str]:
        return [t["name"] for t in self.index["tensors"]]

    def entry(self, name: str) -> dict[str, Any]:
        return self.by_name[name]

    def tensor(self, name: str) -> np.ndarray:
        """A tensor's value.

        Raises:
            DataError: the file does not match the index (edited or damaged).
        """
        entry = self.by_name[name]
        path = os.path.join(self.folder, entry["file"])
        try:
            with open(path, "rb") as f:
                data = f.read(entry["size"] + 1)
        except OSError as exc:
            raise DataError(f"io dump {self.folder}: cannot read {entry['file']} ({exc.strerror or exc})") from None
        if len(data) != entry["size"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise DataError(
                f"io dump {self.folder}: {entry['file']} does not match its sha256 in {INDEX} (edited or damaged)"
            )
        try:
            if is_structured(entry["dtype"]):
                array, stored = decode_value(data, parse(entry["dtype"]))
            else:
                array, stored = decode(data)
        except ValueError as exc:
            raise DataError(f"io dump {self.folder}: {entry['file']} is not a valid TensorProto ({exc})") from None
        if stored and stored != name:
            raise DataError(f"io dump {self.folder}: {entry['file']} holds tensor {stored!r}, the index says {name!r}")
        return cast(np.ndarray, array)


@dataclass
class MemoryCase:
    """One test case's tensors held in memory, read as a :class:`CaseDump` is (for runs nobody keeps)."""

    nodes: list[NodeInfo]
    arrays: dict[str, np.ndarray]
    by_name: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return list(self.arrays)

    def entry(self, name: str) -> dict[str, Any]:
        return self.by_name[name]

    def tensor(self, name: str) -> np.ndarray:
        return self.arrays[name]

    @property
    def index(self) -> dict[str, Any]:
        return {"tensors": [self.by_name[name] for name in self.arrays]}


class MemoryDump:
    """Test cases held in memory, read as an :class:`IoDump` is."""

    def __init__(self, model_sha256: str, cases: dict[int, MemoryCase]) -> None:
        self.model_sha256 = model_sha256
        self.cases = cases

    @classmethod
    def collect(
        cls, plan: Plan, sha256: str, runs: Iterator[tuple[int, Iterator[tuple[str, np.ndarray]]]]
    ) -> MemoryDump:
        cases = {}
        for number, tensors in runs:
            arrays, entries = {}, {}
            for name, array in tensors:
                if isinstance(array, Structured):
                    arrays[name] = array.value
                    entries[name] = {"name": name, "dtype": array.vtype.text, "shape": [], **tensor_stats(array.flat())}
                    continue
                arrays[name] = array
                entries[name] = {
                    "name": name,
                    "dtype": str(array.dtype),
                    "shape": list(array.shape),
                    **tensor_stats(array),
                }
            cases[number] = MemoryCase(list(plan.nodes), arrays, entries)
        return cls(sha256, cases)


class IoDump:
    """An io dump folder, checked: every test case's index, its files' presence and sizes, one model throughout.

    Raises:
        DataError: not an io dump, an unknown version, an incomplete or edited
            case, or cases from different models.
    """

    def __init__(self, folder: str) -> None:
        self.folder = folder
        if not os.path.isdir(folder):
            raise DataError(f"io dump not found: {folder} is not a folder")
        self.cases: dict[int, CaseDump] = {}
        for entry in sorted(os.listdir(folder)):
            match = CASE_DIR.match(entry)
            if match and os.path.isdir(os.path.join(folder, entry)):
                number = int(match.group(1))
                if number in self.cases:  # test_data_set_1 and test_data_set_01
                    raise DataError(f"{folder}: test case {number} has two folders")
                self.cases[number] = self._read_case(os.path.join(folder, entry), number)
        if not self.cases:
            raise DataError(f"{folder} is not an io dump: it has no test_data_set_N folder with an {INDEX}")
        shas = {case.index["model_sha256"] for case in self.cases.values()}
        if len(shas) > 1:
            raise DataError(
                f"io dump {folder} mixes test cases of different models (model sha256 differs between cases)"
            )
        self.model_sha256 = shas.pop()

    def _read_case(self, path: str, number: int) -> CaseDump:
        index_path = os.path.join(path, INDEX)
        where = f"io dump {path}"
        if not os.path.isfile(index_path):
            raise DataError(f"{where}: no {INDEX} (incomplete dump)")
        if os.path.getsize(index_path) > MAX_INDEX_BYTES:
            raise DataError(f"{where}: {INDEX} is larger than {MAX_INDEX_BYTES} bytes")
        try:
            with open(index_path, encoding="utf-8") as f:
                index = json.load(f)
        except (OSError, ValueError, RecursionError) as exc:
            raise DataError(f"{where}: {INDEX} is not valid JSON ({type(exc).__name__})") from None
        _validate_index(index, where, number)
        case = CaseDump(path, index)
        for entry in index["tensors"]:
            file = os.path.join(path, entry["file"])
            if not os.path.isfile(file):
                raise DataError(f"{where}: {entry['file']} ({entry['name']!r}) is missing (incomplete dump)")
            if os.path.getsize(file) != entry["size"]:
                raise DataError(
                    f"{where}: {entry['file']} is {os.path.getsize(file)} bytes, {INDEX} says {entry['size']} (edited or damaged)"
                )
            if entry["name"] in case.by_name:
                raise DataError(f"{where}: tensor {entry['name']!r} is listed twice")
            case.by_name[entry["name"]] = entry
        return case


def _validate_index(index: Any, where: str, number: int) -> None:
    def require(ok: bool, what: str) -> None:
        if not ok:
            raise DataError(f"{where}: {INDEX} is malformed: {what}")

    require(isinstance(index, dict), "not a JSON object")
    if index.get("format") != FORMAT:
        raise DataError(f"{where}: not an io dump ({INDEX} format is {index.get('format')!r}, expected {FORMAT!r})")
    if index.get("version") != VERSION:
        raise DataError(f"{where}: io dump version {index.get('version')!r} is not one this mgedump reads ({VERSION})")
    require(isinstance(index.get("model_sha256"), str), "'model_sha256' must be a string")
    require(index.get("test_case") == number, f"'test_case' must be {number}, the number of its folder")
    nodes = index.get("nodes")
    require(isinstance(nodes, list), "'nodes' must be a list")
    for node in nodes:
        require(
            has_fields(node, name=str, op_type=str, domain=str)
            and is_str_list(node.get("inputs"))
            and is_str_list(node.get("outputs")),
            "each node needs name, op_type, domain, inputs and outputs",
        )
    tensors = index.get("tensors")
    require(isinstance(tensors, list), "'tensors' must be a list")
    for entry in tensors:
        require(
            has_fields(entry, name=str, file=str, size=int, sha256=str, dtype=str, shape=list)
            and FILE_NAME.match(entry["file"]) is not None
            and all(is_int(d) and d >= 0 for d in entry["shape"]),
            "each tensor needs a name, a file (NNNN.pb), a dtype, a size, a sha256 and a shape",
        )
        require(
            all(k in entry and (entry[k] is None or is_number(entry[k])) for k in ("min", "max", "mean"))
            and all(is_int(entry.get(k)) and entry[k] >= 0 for k in ("nan", "inf")),
            f"tensor {entry['name']!r} needs min, max and mean (numbers or null) and nan and inf counts",
        )


__all__ = [
    "CaseDump",
    "IoDump",
    "MemoryDump",
    "NodeInfo",
    "Plan",
    "case_dir",
    "tensor_stats",
    "weight_only_tensors",
    "write_case",
]
