"""The manifest's validation (format version 1) and member names: each rule of the spec refuses what breaks it."""

from __future__ import annotations

import copy

import pytest

from mgedump.base.errors import BundleError
from mgedump.bundle import check_member_name, validate_manifest


def _manifest() -> dict:
    return {
        "format": "mgedump-bundle",
        "format_version": 1,
        "generator": {"name": "mgedump", "version": "0"},
        "model": {"member": "model.onnx", "sha256": "0" * 64, "source_sha256": "0" * 64, "external_data": None},
        "optimizations": [],
        "requirements": [],
        "inputs": [{"name": "x", "dtype": "float32", "shape": [1, "N", None]}],
        "outputs": [{"name": "y", "dtype": "float32", "shape": None}],
        "assertion": {"enabled": True, "maxerr": 1e-4, "verbose": True},
        "seed": 0,
        "data_options": {},
        "test_cases": [
            {
                "dir": "test_data_set_0",
                "spec": "#rand(0,1)",
                "origin": "-d #1",
                "inputs": ["test_data_set_0/input_0.pb"],
                "outputs": ["test_data_set_0/output_0.pb"],
            }
        ],
        "members": [
            {"name": n, "size": 1, "sha256": "0" * 64}
            for n in ("model.onnx", "test_data_set_0/input_0.pb", "test_data_set_0/output_0.pb")
        ],
    }


def test_a_valid_manifest_passes():
    validate_manifest(_manifest())


def _set(path: str, value):
    def edit(m: dict) -> None:
        *parents, key = path.split(".")
        for p in parents:
            m = m[int(p)] if isinstance(m, list) else m[p]
        if isinstance(m, list):
            m[int(key)] = value
        elif value is _DELETE:
            del m[key]
        else:
            m[key] = value

    return edit


_DELETE = object()

CASES = [
    ("format", _set("format", "zip"), "not an mgedump bundle"),
    ("version-missing", _set("format_version", _DELETE), "no valid format_version"),
    ("version-bool", _set("format_version", True), "no valid format_version"),
    ("version-newer", _set("format_version", 3), "newer than this mgedump reads"),
    ("version-older", _set("format_version", 0), "unknown bundle format version 0"),
    ("model-not-object", _set("model", "model.onnx"), "'model' must name a member"),
    ("external-data-type", _set("model.external_data", 3), "'model.external_data'"),
    ("optimizations-type", _set("optimizations", "fp16"), "'optimizations' must be a list"),
    ("requirements-type", _set("requirements", [1]), "'requirements' must be a list"),
    ("inputs-type", _set("inputs", {}), "'inputs' must be a list"),
    ("input-entry", _set("inputs.0.name", 5), "bad entry in 'inputs'"),
    ("input-shape", _set("inputs.0.shape", [1.5]), "bad shape in 'inputs'"),
    ("assertion-type", _set("assertion", True), "'assertion' must be an object"),
    ("assertion-enabled", _set("assertion.enabled", "yes"), "must be true or false"),
    ("maxerr-negative", _set("assertion.maxerr", -1), "'assertion.maxerr' must be a number >= 0"),
    ("maxerr-nan", _set("assertion.maxerr", float("nan")), "'assertion.maxerr' must be a number >= 0"),
    ("no-test-cases", _set("test_cases", []), "'test_cases' must be a non-empty list"),
    ("case-spec", _set("test_cases.0.spec", None), "each test case needs a 'spec'"),
    ("case-inputs", _set("test_cases.0.inputs", []), "one input member per model input"),
    ("case-outputs", _set("test_cases.0.outputs", []), "one output member per model output"),
    ("members-type", _set("members", {}), "'members' must be a list"),
    ("member-size", _set("members.0.size", -1), "each member needs a name, size and sha256"),
    ("member-twice", _set("members.2.name", "model.onnx"), "a member is listed twice"),
    ("member-unsafe", _set("members.0.name", "../model.onnx"), "not a safe relative path"),
    ("referenced-unlisted", _set("test_cases.0.inputs", ["elsewhere.pb"]), "refers to member 'elsewhere.pb'"),
]


@pytest.mark.parametrize("case_id, edit, message", CASES, ids=[c[0] for c in CASES])
def test_each_rule(case_id, edit, message):
    manifest = copy.deepcopy(_manifest())
    edit(manifest)
    with pytest.raises(BundleError, match=message):
        validate_manifest(manifest)


@pytest.mark.parametrize("name", ["", "/abs", "a/../b", "..", "a//b", "./a", "a\\b", "c:x", "a\x00b"])
def test_unsafe_member_names(name):
    with pytest.raises(BundleError, match="not a safe relative path"):
        check_member_name(name)


@pytest.mark.parametrize("name", ["model.onnx", "test_data_set_0/input_0.pb", "a/b/c", "\u00e9t\u00e9.pb"])
def test_safe_member_names(name):
    check_member_name(name)
