"""The mgedump bundle format, version 1. This docstring is its specification.

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

Manifest keys (all REQUIRED unless marked):

``format``: ``"mgedump-bundle"``.
``format_version``: ``1``. A reader MUST refuse other versions; this version is
    independent of the package version.
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
    or null}``; dims are ints, str (symbolic) or null.
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
"""

from __future__ import annotations

import math
from typing import Any

from ..base.errors import BundleError
from ..base.jsontypes import has_fields, is_int, is_number, is_str_list

FORMAT = "mgedump-bundle"
FORMAT_VERSION = 1
MANIFEST = "mgedump.json"
MODEL_MEMBER = "model.onnx"
BUNDLE_SUFFIX = ".mgetest"  # what a bundle file is called; a folder given to mgerun stands for its *.mgetest files
DATA_MEMBER = "model.onnx.data"
IO_DUMP_FOLDER = "io_dump"
MAX_MANIFEST_BYTES = 16 << 20


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
        raise BundleError(f"bundle manifest is malformed: {what}")


def _check_tensor_infos(value: Any, key: str) -> None:
    _require(isinstance(value, list), f"{key!r} must be a list")
    for entry in value:
        _require(
            isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("dtype"), str),
            f"bad entry in {key!r}",
        )
        shape = entry.get("shape")
        _require(
            shape is None or (isinstance(shape, list) and all(d is None or isinstance(d, (int, str)) for d in shape)),
            f"bad shape in {key!r}",
        )


def validate_manifest(manifest: Any) -> None:
    """Check the manifest's version, keys and types (format version 1).

    Raises:
        BundleError: with what is wrong.
    """
    _require(isinstance(manifest, dict), "not a JSON object")
    _check_version(manifest)
    model = _check_model(manifest.get("model"))
    _require(is_str_list(manifest.get("optimizations")), "'optimizations' must be a list of strings")
    _require(is_str_list(manifest.get("requirements")), "'requirements' must be a list of strings")
    float16 = manifest.get("float16")
    _require(
        float16 is None or (isinstance(float16, dict) and isinstance(float16.get("kept_float32"), list)),
        "'float16' must be an object listing 'kept_float32'",
    )
    _check_tensor_infos(manifest.get("inputs"), "inputs")
    _check_tensor_infos(manifest.get("outputs"), "outputs")
    assertion = _check_assertion(manifest.get("assertion"), {entry["name"] for entry in manifest["outputs"]})
    seed = manifest.get("seed", 0)
    _require(is_int(seed) and seed >= 0, "'seed' must be a whole number >= 0")
    _require(isinstance(manifest.get("data_options", {}), dict), "'data_options' must be an object")
    environment = manifest.get("environment")
    _require(environment is None or isinstance(environment, dict), "'environment' must be an object")
    cases = manifest.get("test_cases")
    _check_cases(cases, len(manifest["inputs"]), len(manifest["outputs"]) if assertion["enabled"] else 0)
    listed = _check_members(manifest.get("members"))
    _check_io_dump(manifest.get("io_dump"), len(cases), listed)
    _check_references(model, cases, listed)


def _check_version(manifest: dict[str, Any]) -> None:
    """The format and its version: this reader's, else refused (a newer one with a hint to upgrade)."""
    if manifest.get("format") != FORMAT:
        raise BundleError(f"not an mgedump bundle: manifest format is {manifest.get('format')!r}, expected {FORMAT!r}")
    version = manifest.get("format_version")
    if not is_int(version):
        raise BundleError(f"bundle manifest has no valid format_version ({version!r})")
    if version > FORMAT_VERSION:
        raise BundleError(
            f"bundle format version {version} is newer than this mgedump reads (up to {FORMAT_VERSION})",
            hint="upgrade mgedump",
        )
    if version != FORMAT_VERSION:
        raise BundleError(f"unknown bundle format version {version} (this mgedump reads version {FORMAT_VERSION})")


def _check_model(model: Any) -> dict[str, Any]:
    """The model's member, its sha256, and its external data member, which must not share its file name."""
    _require(
        has_fields(model, member=str, sha256=str),
        "'model' must name a member and its sha256",
    )
    _require(
        model.get("external_data") is None or isinstance(model.get("external_data"), str),
        "'model.external_data' must be a member name or null",
    )
    if model.get("external_data") is not None:
        _require(
            model["external_data"].rsplit("/", 1)[-1] != model["member"].rsplit("/", 1)[-1],
            "'model.external_data' must not have the model member's file name (both are extracted side by side)",
        )
    return model


def _is_bound(value: Any) -> bool:
    """A maxerr: a finite number >= 0 (not a bool)."""
    return is_number(value) and math.isfinite(value) and value >= 0


def _check_assertion(assertion: Any, output_names: set[str]) -> dict[str, Any]:
    """Whether outputs are checked, how verbosely, the maxerr, and the outputs' own bounds (of outputs it has)."""
    _require(isinstance(assertion, dict), "'assertion' must be an object")
    _require(
        isinstance(assertion.get("enabled"), bool) and isinstance(assertion.get("verbose"), bool),
        "'assertion.enabled' and 'assertion.verbose' must be true or false",
    )
    _require(_is_bound(assertion.get("maxerr")), "'assertion.maxerr' must be a number >= 0")
    bounds = assertion.get("output_maxerr", {})
    _require(
        isinstance(bounds, dict) and all(name in output_names and _is_bound(b) for name, b in bounds.items()),
        "'assertion.output_maxerr' must map output names to numbers >= 0",
    )
    return assertion


def _check_cases(cases: Any, n_in: int, n_out: int) -> None:
    """At least one test case, each with its spec, one input member per model input and ``n_out`` output members."""
    _require(isinstance(cases, list) and bool(cases), "'test_cases' must be a non-empty list")
    for case in cases:
        _require(isinstance(case, dict) and isinstance(case.get("spec"), str), "each test case needs a 'spec'")
        _require(
            is_str_list(case.get("inputs")) and len(case["inputs"]) == n_in,
            "each test case needs one input member per model input",
        )
        outputs = case.get("outputs")
        _require(
            is_str_list(outputs) and len(outputs) == n_out,
            "each test case needs one output member per model output when assertions are on, none when off",
        )


def _check_members(members: Any) -> set[str]:
    """Every member with its name (a safe relative path), size and sha256, each listed once; the names."""
    _require(isinstance(members, list), "'members' must be a list")
    for entry in members:
        _require(
            has_fields(entry, name=str, sha256=str, size=int) and entry["size"] >= 0,
            "each member needs a name, size and sha256",
        )
        check_member_name(entry["name"])
    listed = {entry["name"] for entry in members}
    _require(len(listed) == len(members), "a member is listed twice")
    return listed


def _check_io_dump(io_dump: Any, n_cases: int, listed: set[str]) -> None:
    """The embedded io dump, if any: its folder, model and test cases, each case's index listed as a member."""
    if io_dump is None:
        return
    _require(
        isinstance(io_dump, dict)
        and io_dump.get("folder") == IO_DUMP_FOLDER
        and isinstance(io_dump.get("model_sha256"), str)
        and isinstance(io_dump.get("test_cases"), list)
        and all(is_int(n) and 0 <= n < n_cases for n in io_dump["test_cases"]),
        f"'io_dump' must give the folder {IO_DUMP_FOLDER!r}, the model's sha256 and test case numbers",
    )
    for n in io_dump["test_cases"]:
        _require(
            f"{IO_DUMP_FOLDER}/{case_folder(n)}/index.json" in listed,
            f"the io dump of test case {n} is not listed",
        )


def _check_references(model: dict[str, Any], cases: list[Any], listed: set[str]) -> None:
    """Every member the model and the test cases refer to is listed, and none is referred to twice (a bundle's work
    is bounded by its bytes: each tensor member stands for one tensor)."""
    referenced = [model["member"]] + ([model["external_data"]] if model.get("external_data") else [])
    for case in cases:
        referenced += case["inputs"] + case["outputs"]
    seen: set[str] = set()
    for name in referenced:
        if name not in listed:
            raise BundleError(f"bundle manifest refers to member {name!r}, which it does not list")
        if name in seen:
            raise BundleError(f"bundle manifest refers to member {name!r} more than once")
        seen.add(name)
