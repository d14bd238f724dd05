"""The mgedump bundle format, versions 1 and 2. This docstring is its specification.

Version 1 holds one model; version 2 holds several variants of one model
(float32, float16, int8, ...), each proved on the same test cases, for the
target to choose among (``mgerun --fitting``). A bundle of one variant is
written as version 1.

A bundle is a ZIP archive whose members are all stored (uncompressed), in this
order::

    mgedump.json                    the manifest (UTF-8 JSON object)
    model.onnx                      the model as it will run
    model.onnx.data                 only when the model keeps weights outside
    test_data_set_0/input_0.pb      one ONNX TensorProto per model input
    test_data_set_0/output_0.pb     expected outputs (absent when assertions are off)
    test_data_set_1/...
    io_dump/test_data_set_0/...     OPTIONAL: the reference io dump (``--embed-io-dump``)

Unzipped, it is the ONNX model-zoo test layout: ``model.onnx`` beside
``test_data_set_N/{input,output}_K.pb``, numbered from 0 with no gaps, inputs in
model input order and each TensorProto named after its graph input or output.

Member names MUST be relative, use ``/``, and contain no ``..``, no ``\\`` and
no empty component. Every member MUST be listed, in archive order, in the
manifest's ``members`` with its size and sha256; a reader MUST refuse a bundle
with a member it does not list, a listed member it lacks, or any hash that does
not match. Timestamps are fixed (1980-01-01 00:00) and no host path or clock
time is recorded, so the same input gives the same bytes.

Manifest keys (all REQUIRED unless marked). Their types are also the JSON
Schema this package ships (``manifest.schema.json``, :func:`published_schema`),
against which a reader MUST check a manifest before using any of it; a reader
ignores keys it does not know:

``format``: ``"mgedump-bundle"``.
``format_version``: ``1`` (one model) or ``2`` (several variants, below). A
    reader MUST refuse other versions; this version is independent of the
    package version.
``generator``: ``{"name": "mgedump", "version": str}``.
``model``: ``{"member": "model.onnx", "sha256": str, "source_sha256": str,
    "external_data": str or null}``: the bundled model, the hash of the model
    file it was made from, and the member holding external data, if any.
``optimizations``: list of str, the rewrites applied (empty: the model as given).
``float16`` (OPTIONAL, present when a float16 mode was applied): ``{"mode":
    "ioc16" or "io16xc32", "kept_float32": [{"node": str, "op_type": str,
    "why": str}], "weights_float32": [{"weight": str, "why": str}],
    "search_rounds": int}``: the nodes and weights that stay float32, and why.
``requirements``: list of str, what the bundled model needs at run time beyond
    a standard ONNX runtime (e.g. ``"onnxruntime"``, ``"x86-avx2"``).
``inputs``, ``outputs``: lists of ``{"name": str, "dtype": str, "shape": list
    or null}``; dims are ints, str (symbolic) or null. A sequence, map or
    optional has onnxruntime's name of its type as ``dtype``
    (``seq(map(int64,tensor(float)))``, :mod:`mgedump.model.valuetype`), a
    null shape, and ONNX's ``SequenceProto``, ``MapProto`` or ``OptionalProto``
    as its test-data members (:mod:`.valueproto`).
``assertion``: ``{"enabled": bool, "maxerr": float, "verbose": bool}``.
``seed``: int, the seed of the data generators.
``data_options``: ``{"repeat": int, "resize_input": bool, "input_transform": str
    or null}``, as given to the packer (recorded, never evaluated by a reader).
``test_cases``: list of ``{"dir": str, "spec": str, "origin": str,
    "inputs": [member, ...], "outputs": [member, ...]}``.
``members``: list of ``{"name": str, "size": int, "sha256": str}`` for every
    member after the manifest.
``io_dump`` (OPTIONAL): ``{"folder": "io_dump", "test_cases": [int, ...],
    "model_sha256": str}``: the io dump (format ``mgedump-iodump``, see
    :mod:`mgedump.diagnose.iodump`) of the model as given, on these test cases,
    as members under ``folder/`` (each test case's ``index.json`` and tensor
    files), listed and hashed like every other member. A verifier that finds
    a test case failing compares its own run against it to name the node that
    first diverges.
``target_runtime`` (OPTIONAL, ``--target-runtime``): ``{"onnxruntime": "X.Y",
    "ir_version": int, "opset": int, "ml_opset": int, "converted": [str]}``:
    the onnxruntime the bundled model was written for, the newest IR and
    opsets it loads (absent when it is at least the packing machine's), and
    what was lowered (empty: nothing needed to be).
``environment`` (OPTIONAL): where the bundle was packed
    (:func:`mgedump.model.environment.pack_environment`): versions, OS, CPU and
    its instruction sets; no host name and no clock time.

Version 2 (several variants): ``model`` holds ``source_sha256`` only;
``optimizations``, ``requirements`` and the precision records MUST be absent at
the top and are per variant instead. Its keys besides version 1's:

``variants``: non-empty list of ``{"name": str, "model": {"member":
    "variants/NAME/model.onnx", "sha256": str, "external_data":
    "variants/NAME/model.onnx.data" or null}, "optimizations": [str],
    "requirements": [str], "inputs": [...], "outputs": [...], "certified":
    {output: float or null}, "options": {str: value}}`` plus the variant's
    precision record (``float16``, ``int8``) when it has one; names are
    lower-case letters, digits and ``-``, each once. The test cases are stored
    once, in the dtypes of the model as given, its outputs the reference.
``left_out`` (OPTIONAL): list of ``{"name": str, "reason": str}``, the
    variants asked for that were not made.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any, cast

from ..base.errors import BundleError
from ..base.schema import first_problem
from ..model.valuetype import is_structured, parse

FORMAT = "mgedump-bundle"
FORMAT_VERSION = 2  # the newest version this mgedump reads; a bundle of one variant is written as version 1
SINGLE_VERSION = 1
VARIANTS_FOLDER = "variants"
MANIFEST = "mgedump.json"
MODEL_MEMBER = "model.onnx"
BUNDLE_SUFFIX = ".mgetest"  # what a bundle file is called; a folder given to mgerun stands for its *.mgetest files
DATA_MEMBER = "model.onnx.data"
IO_DUMP_FOLDER = "io_dump"
MAX_MANIFEST_BYTES = 16 << 20
SCHEMA = "manifest.schema.json"  # this package's file: the manifest's published JSON Schema (docs/bundle.md links it)
MALFORMED = "this bundle's manifest is malformed"
# Where a reader takes more than the schema, which is exact for what this mgedump's built-in modes write. Keys it
# does not know are ignored at any depth (an optional key added later keeps the format version: docs/bundle.md,
# Versioning); a precision mode registered at run time (mgedump.optimize.precisions.register) adds its name to
# `optimizations`; a requirement this mgedump does not know is refused by name when the bundle is run
# (mgedump.bundle.requirements.check_requirements: "upgrade mgedump"), not as a malformed manifest.
OPEN_ENDS: dict[str, Any] = {
    "/properties/optimizations/items": {"type": "string"},
    "/properties/requirements/items": {"type": "string"},
}


@functools.cache
def published_schema() -> dict[str, Any]:
    """The manifest's JSON Schema as published (``mgedump/bundle/manifest.schema.json``)."""
    from importlib import resources  # here: a pack writes manifests without reading the schema

    text = resources.files(__package__).joinpath(SCHEMA).read_text(encoding="utf-8")
    return dict(json.loads(text))


@functools.cache
def reader_schema() -> dict[str, Any]:
    """The schema a manifest read from a bundle must meet: the published one, open where :data:`OPEN_ENDS` says."""
    schema = _ignoring_unknown_keys(copy.deepcopy(published_schema()))
    for pointer, replacement in OPEN_ENDS.items():
        *parents, last = pointer.strip("/").split("/")
        node = schema
        for part in parents:
            node = node[part]
        if last not in node:
            raise KeyError(f"{SCHEMA} has no {pointer} to open")
        node[last] = replacement
    return cast("dict[str, Any]", schema)


def _ignoring_unknown_keys(schema: Any) -> Any:
    """The schema with every ``"additionalProperties": false`` dropped, in place."""
    if isinstance(schema, dict):
        if schema.get("additionalProperties") is False:
            del schema["additionalProperties"]
        for value in schema.values():
            _ignoring_unknown_keys(value)
    elif isinstance(schema, list):
        for value in schema:
            _ignoring_unknown_keys(value)
    return schema


def case_folder(index: int) -> str:
    """The folder of test case ``index``: ``test_data_set_N``, the ONNX test layout's name, in bundles and io dumps."""
    return f"test_data_set_{index}"


def check_member_name(name: str) -> None:
    """Refuse absolute, backslashed, empty-component or ``..`` member names."""
    parts = name.split("/")
    if (
        not name
        or name.startswith("/")
        or "\\" in name
        or "\x00" in name
        or (len(name) > 1 and name[1] == ":")
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise BundleError(f"bundle member name {name!r} is not a safe relative path")


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise BundleError(f"{MALFORMED}: {what}")


def validate_manifest(manifest: Any) -> None:
    """Check the manifest's version, then every field's type against the published schema (:func:`reader_schema`),
    then what a schema cannot say (each member referred to is listed, once; bounds name outputs there are; a test
    case has a member per input and output).

    Raises:
        BundleError: with what is wrong: a malformed field is named by its path
            (``this bundle's manifest is malformed: environment.cpu: expected an object, got a list``).
    """
    _require(isinstance(manifest, dict), "expected a JSON object")
    if manifest.get("format") != FORMAT:
        raise BundleError(f"not an mgedump bundle: manifest format is {manifest.get('format')!r}, expected {FORMAT!r}")
    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise BundleError(f"bundle manifest has no valid format_version ({version!r})")
    if version > FORMAT_VERSION:
        raise BundleError(
            f"bundle format version {version} is newer than this mgedump reads (up to {FORMAT_VERSION})",
            hint="upgrade mgedump",
        )
    if version not in (SINGLE_VERSION, FORMAT_VERSION):
        raise BundleError(f"unknown bundle format version {version} (this mgedump reads versions 1 and 2)")
    _check_value_types(manifest)  # before the schema: the grammar of a type says more than its pattern
    problem = first_problem(reader_schema(), manifest)
    if problem is not None:
        raise BundleError(f"{MALFORMED}: {problem}")
    models = [manifest["model"]] if version == SINGLE_VERSION else [v["model"] for v in manifest["variants"]]
    names = [v["name"] for v in manifest.get("variants", ())]
    _require(len(set(names)) == len(names), "a variant is listed twice")
    _check_assertion(manifest["assertion"], {entry["name"] for entry in manifest["outputs"]})
    cases = manifest["test_cases"]
    _check_cases(cases, len(manifest["inputs"]), len(manifest["outputs"]), manifest["assertion"]["enabled"])
    listed = _check_members(manifest["members"])
    _check_io_dump(manifest.get("io_dump"), len(cases), listed)
    _check_models(manifest, names, {entry["name"]: entry["sha256"] for entry in manifest["members"]})
    referenced = [name for model in models for name in (model["member"], model["external_data"]) if name]
    for case in cases:
        referenced += case["inputs"] + case["outputs"]
    seen: set[str] = set()
    for name in referenced:
        if name not in listed:
            raise BundleError(f"bundle manifest refers to member {name!r}, which it does not list")
        if name in seen:  # a bundle's work is bounded by its bytes: each tensor member stands for one tensor
            raise BundleError(f"bundle manifest refers to member {name!r} more than once")
        seen.add(name)


def _check_value_types(manifest: dict[str, Any]) -> None:
    """A sequence's, map's or optional's type (an input's or output's, or a variant's) must be one onnxruntime names:
    parsed wherever one is written, whatever else the manifest holds (the schema checks its form only)."""
    variants = manifest.get("variants")
    places = [("", manifest)] + [
        (f"variants[{k}].", v) for k, v in enumerate(variants if isinstance(variants, list) else ())
    ]
    for where, entry in places:
        for key in ("inputs", "outputs"):
            infos = entry.get(key) if isinstance(entry, dict) else None
            for k, info in enumerate(infos if isinstance(infos, list) else ()):
                dtype = info.get("dtype") if isinstance(info, dict) else None
                if not isinstance(dtype, str) or not is_structured(dtype):
                    continue
                try:
                    parse(dtype)
                except ValueError as exc:
                    shown, reason = _short(dtype), _short(str(exc), 80)
                    raise BundleError(
                        f"{MALFORMED}: {where}{key}[{k}].dtype: {shown!r} is not a type ({reason})"
                    ) from None


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_assertion(assertion: dict[str, Any], output_names: set[str]) -> None:
    for key in ("output_maxerr", "output_error_stat"):
        unknown = [name for name in assertion.get(key, {}) if name not in output_names]
        _require(not unknown, f"assertion.{key} names {unknown[:1]!r}, which is no output of the model")


def _check_cases(cases: list[dict[str, Any]], n_in: int, n_out: int, asserted: bool) -> None:
    for k, case in enumerate(cases):
        _require(len(case["inputs"]) == n_in, f"test_cases[{k}].inputs: expected one member per model input")
        _require(
            len(case["outputs"]) == (n_out if asserted else 0),
            f"test_cases[{k}].outputs: expected one member per model output when assertions are on, none when off",
        )


def _check_models(manifest: dict[str, Any], names: list[str], hashes: dict[str, str]) -> None:
    """What a manifest says of each model is tied to the members: its ``sha256`` is that of the member it names
    (an io dump records it as the model that ran), and a variant's members are those of its own name (an ``fp32``
    entry cannot run ``variants/int8/model.onnx``)."""
    if manifest["format_version"] == SINGLE_VERSION:
        places = [("model", manifest["model"], MODEL_MEMBER, DATA_MEMBER)]
    else:
        places = [
            (f"variants[{k}].model", v["model"], f"{VARIANTS_FOLDER}/{name}/{MODEL_MEMBER}",
             f"{VARIANTS_FOLDER}/{name}/{DATA_MEMBER}")
            for k, (v, name) in enumerate(zip(manifest["variants"], names, strict=True))
        ]  # fmt: skip
    for where, model, member, data in places:
        _require(model["member"] == member, f"{where}.member: {_short(model['member'])!r}, expected {member!r}")
        _require(
            model["external_data"] in (None, data),
            f"{where}.external_data: {_short(str(model['external_data']))!r}, expected {data!r} or null",
        )
        _require(
            hashes.get(member) in (None, model["sha256"]),
            f"{where}.sha256 is not the sha256 the members list gives {member!r}",
        )


def _check_members(members: list[dict[str, Any]]) -> set[str]:
    for entry in members:
        check_member_name(entry["name"])
    listed = {entry["name"] for entry in members}
    _require(len(listed) == len(members), "a member is listed twice")
    return listed


def _check_io_dump(io_dump: dict[str, Any] | None, cases: int, listed: set[str]) -> None:
    if io_dump is None:
        return
    _require(all(n < cases for n in io_dump["test_cases"]), "io_dump.test_cases: a test case the bundle lacks")
    for n in io_dump["test_cases"]:
        _require(
            f"{IO_DUMP_FOLDER}/{case_folder(n)}/index.json" in listed, f"the io dump of test case {n} is not listed"
        )
