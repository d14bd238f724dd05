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
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..base.errors import BundleError
from ..base.jsontypes import is_number, is_str_list
from ..model.valuetype import is_structured, parse
from ..options import ERROR_STATS

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


def _check_model(model: Any, where: str) -> None:
    _require(
        isinstance(model, dict) and isinstance(model.get("member"), str) and isinstance(model.get("sha256"), str),
        f"{where!r} must name a member and its sha256",
    )
    _require(
        model.get("external_data") is None or isinstance(model.get("external_data"), str),
        f"'{where}.external_data' must be a member name or null",
    )
    if model.get("external_data") is not None:
        _require(
            model["external_data"].rsplit("/", 1)[-1] != model["member"].rsplit("/", 1)[-1],
            f"'{where}.external_data' must not have the model member's file name (both are extracted side by side)",
        )


def _check_precision(entry: dict[str, Any], where: str) -> None:
    """The rewrites of one model: its optimizations, requirements and float16 record."""
    _require(is_str_list(entry.get("optimizations")), f"'{where}optimizations' must be a list of strings")
    _require(is_str_list(entry.get("requirements")), f"'{where}requirements' must be a list of strings")
    float16 = entry.get("float16")
    _require(
        float16 is None or (isinstance(float16, dict) and isinstance(float16.get("kept_float32"), list)),
        f"'{where}float16' must be an object listing 'kept_float32'",
    )


_VARIANT_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


def _check_variants(manifest: dict[str, Any]) -> None:
    """Version 2: the variants, each a model of its own with its proof, and the ones left out."""
    model = manifest.get("model")
    _require(isinstance(model, dict) and isinstance(model.get("source_sha256"), str), "'model' must give source_sha256")
    variants = manifest.get("variants")
    if not isinstance(variants, list) or not variants:
        raise BundleError("bundle manifest is malformed: 'variants' must be a non-empty list")
    names = set()
    for k, variant in enumerate(variants):
        where = f"variants[{k}]"
        _require(isinstance(variant, dict), f"{where!r} must be an object")
        name = variant.get("name")
        _require(isinstance(name, str) and bool(_VARIANT_NAME.match(name)), f"'{where}.name' must be a variant name")
        _require(name not in names, f"variant {name!r} is listed twice")
        names.add(name)
        _check_model(variant.get("model"), f"{where}.model")
        _check_precision(variant, f"{where}.")
        _check_tensor_infos(variant.get("inputs"), f"{where}.inputs")
        _check_tensor_infos(variant.get("outputs"), f"{where}.outputs")
        certified = variant.get("certified")
        _require(
            isinstance(certified, dict)
            and all((is_number(v) and math.isfinite(v)) or v is None for v in certified.values()),
            f"'{where}.certified' must map output names to numbers",
        )
        _require(isinstance(variant.get("options", {}), dict), f"'{where}.options' must be an object")
    left_out = manifest.get("left_out", [])
    _require(
        isinstance(left_out, list)
        and all(
            isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get("reason"), str)
            for e in left_out
        ),
        "'left_out' must list names and reasons",
    )


def _check_tensor_infos(value: Any, key: str) -> None:
    _require(isinstance(value, list), f"{key!r} must be a list")
    for entry in value:
        _require(
            isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("dtype"), str),
            f"bad entry in {key!r}",
        )
        if is_structured(entry["dtype"]):
            try:
                parse(entry["dtype"])
            except ValueError as exc:
                raise BundleError(
                    f"bundle manifest is malformed: {key!r} names type {entry['dtype']!r} ({exc})"
                ) from None
        shape = entry.get("shape")
        _require(
            shape is None or (isinstance(shape, list) and all(d is None or isinstance(d, (int, str)) for d in shape)),
            f"bad shape in {key!r}",
        )


def _check_target_runtime(target: Any) -> None:
    """``target_runtime`` (``--target-runtime``), when present: an object naming the onnxruntime version."""
    _require(
        target is None or (isinstance(target, dict) and isinstance(target.get("onnxruntime"), str)),
        "'target_runtime' must be an object naming the onnxruntime version",
    )


def validate_manifest(manifest: Any) -> None:
    """Check the manifest's version, keys and types (format versions 1 and 2).

    Raises:
        BundleError: with what is wrong.
    """
    _require(isinstance(manifest, dict), "not a JSON object")
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
    if version == SINGLE_VERSION:
        _check_model(manifest.get("model"), "model")
        _check_precision(manifest, "")
    else:
        _check_variants(manifest)
    _check_tensor_infos(manifest.get("inputs"), "inputs")
    _check_tensor_infos(manifest.get("outputs"), "outputs")
    _check_assertion(manifest.get("assertion"), {entry["name"] for entry in manifest["outputs"]})
    seed = manifest.get("seed", 0)
    _require(isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0, "'seed' must be a whole number >= 0")
    _require(isinstance(manifest.get("data_options", {}), dict), "'data_options' must be an object")
    environment = manifest.get("environment")
    _require(environment is None or isinstance(environment, dict), "'environment' must be an object")
    _check_target_runtime(manifest.get("target_runtime"))
    cases = manifest.get("test_cases")
    _check_cases(cases, len(manifest["inputs"]), len(manifest["outputs"]), manifest["assertion"]["enabled"])
    listed = _check_members(manifest.get("members"))
    _check_io_dump(manifest.get("io_dump"), len(cases), listed)
    referenced = [
        name
        for entry in ([manifest["model"]] if version == SINGLE_VERSION else [v["model"] for v in manifest["variants"]])
        for name in (entry["member"], entry.get("external_data"))
        if name
    ]
    for case in cases:
        referenced += case["inputs"] + case["outputs"]
    seen: set[str] = set()
    for name in referenced:
        if name not in listed:
            raise BundleError(f"bundle manifest refers to member {name!r}, which it does not list")
        if name in seen:  # a bundle's work is bounded by its bytes: each tensor member stands for one tensor
            raise BundleError(f"bundle manifest refers to member {name!r} more than once")
        seen.add(name)


def _check_assertion(assertion: Any, output_names: set[str]) -> None:
    _require(isinstance(assertion, dict), "'assertion' must be an object")
    _require(
        isinstance(assertion.get("enabled"), bool) and isinstance(assertion.get("verbose"), bool),
        "'assertion.enabled' and 'assertion.verbose' must be true or false",
    )
    maxerr = assertion.get("maxerr")
    _require(is_number(maxerr) and math.isfinite(maxerr) and maxerr >= 0, "'assertion.maxerr' must be a number >= 0")
    bounds = assertion.get("output_maxerr", {})
    _require(
        isinstance(bounds, dict)
        and all(name in output_names and is_number(b) and math.isfinite(b) and b >= 0 for name, b in bounds.items()),
        "'assertion.output_maxerr' must map output names to numbers >= 0",
    )
    _require(
        assertion.get("error_stat", "max") in ERROR_STATS,
        f"'assertion.error_stat' must be one of {', '.join(ERROR_STATS)}",
    )
    stats = assertion.get("output_error_stat", {})
    _require(
        isinstance(stats, dict) and all(name in output_names and stat in ERROR_STATS for name, stat in stats.items()),
        "'assertion.output_error_stat' must map output names to error statistics",
    )


def _check_cases(cases: Any, n_in: int, n_out: int, asserted: bool) -> None:
    _require(isinstance(cases, list) and bool(cases), "'test_cases' must be a non-empty list")
    for case in cases:
        _require(isinstance(case, dict) and isinstance(case.get("spec"), str), "each test case needs a 'spec'")
        _require(
            is_str_list(case.get("inputs")) and len(case["inputs"]) == n_in,
            "each test case needs one input member per model input",
        )
        outputs = case.get("outputs")
        _require(
            is_str_list(outputs) and len(outputs) == (n_out if asserted else 0),
            "each test case needs one output member per model output when assertions are on, none when off",
        )


def _check_members(members: Any) -> set[str]:
    _require(isinstance(members, list), "'members' must be a list")
    for entry in members:
        _require(
            isinstance(entry, dict)
            and isinstance(entry.get("name"), str)
            and isinstance(entry.get("sha256"), str)
            and isinstance(entry.get("size"), int)
            and entry["size"] >= 0,
            "each member needs a name, size and sha256",
        )
        check_member_name(entry["name"])
    listed = {entry["name"] for entry in members}
    _require(len(listed) == len(members), "a member is listed twice")
    return listed


def _check_io_dump(io_dump: Any, cases: int, listed: set[str]) -> None:
    if io_dump is None:
        return
    _require(
        isinstance(io_dump, dict)
        and io_dump.get("folder") == IO_DUMP_FOLDER
        and isinstance(io_dump.get("model_sha256"), str)
        and isinstance(io_dump.get("test_cases"), list)
        and all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < cases for n in io_dump["test_cases"]),
        f"'io_dump' must give the folder {IO_DUMP_FOLDER!r}, the model's sha256 and test case numbers",
    )
    for n in io_dump["test_cases"]:
        _require(
            f"{IO_DUMP_FOLDER}/{case_folder(n)}/index.json" in listed, f"the io dump of test case {n} is not listed"
        )
