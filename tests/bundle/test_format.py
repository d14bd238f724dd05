"""The manifest's validation (format versions 1 and 2) and member names: each rule of the spec refuses what breaks
it, naming the field."""

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
        "data_options": {"repeat": 1, "resize_input": False, "input_transform": None},
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

M = "this bundle's manifest is malformed: "
CASES = [
    ("format", _set("format", "zip"), "not an mgedump bundle"),
    ("version-missing", _set("format_version", _DELETE), "no valid format_version"),
    ("version-bool", _set("format_version", True), "no valid format_version"),
    ("version-newer", _set("format_version", 3), "newer than this mgedump reads"),
    ("version-older", _set("format_version", 0), "unknown bundle format version 0"),
    ("model-not-object", _set("model", "model.onnx"), M + "model: expected an object, got a string"),
    ("model-member", _set("model.member", "../x.onnx"), M + 'model.member: expected "model.onnx"'),
    ("external-data-type", _set("model.external_data", 3), M + "model.external_data: expected one of"),
    ("optimizations-type", _set("optimizations", "fp16"), M + "optimizations: expected a list, got a string"),
    ("optimizations-missing", _set("optimizations", _DELETE), M + "optimizations: missing"),
    ("requirements-type", _set("requirements", [1]), M + r"requirements\[0\]: expected a string, got a number"),
    ("inputs-type", _set("inputs", {}), M + "inputs: expected a list, got an object"),
    ("input-entry", _set("inputs.0.name", 5), M + r"inputs\[0\].name: expected a string"),
    ("input-shape", _set("inputs.0.shape", [1.5]), M + r"inputs\[0\].shape\[0\]: expected"),
    ("input-dtype", _set("inputs.0.dtype", "seq(nonsense)"), M + r"inputs\[0\].dtype: 'seq\(nonsense\)' is not a"),
    ("assertion-type", _set("assertion", True), M + "assertion: expected an object, got true or false"),
    ("assertion-enabled", _set("assertion.enabled", "yes"), M + "assertion.enabled: expected true or false"),
    ("maxerr-negative", _set("assertion.maxerr", -1), M + "assertion.maxerr: expected a number >= 0"),
    ("maxerr-nan", _set("assertion.maxerr", float("nan")), M + "assertion.maxerr: expected a number, got NaN"),
    ("maxerr-of-no-output", _set("assertion.output_maxerr", {"z": 1}), M + "assertion.output_maxerr names"),
    ("error-stat", _set("assertion.error_stat", "worst"), M + "assertion.error_stat: expected one of"),
    ("no-test-cases", _set("test_cases", []), M + "test_cases: expected a list that is not empty"),
    ("case-spec", _set("test_cases.0.spec", None), M + r"test_cases\[0\].spec: expected a string, got null"),
    ("case-origin", _set("test_cases.0.origin", {"a": [[[]]]}), M + r"test_cases\[0\].origin: expected a string"),
    ("case-inputs", _set("test_cases.0.inputs", []), "one member per model input"),
    ("case-outputs", _set("test_cases.0.outputs", []), "one member per model output"),
    ("members-type", _set("members", {}), M + "members: expected a list, got an object"),
    ("member-size", _set("members.0.size", -1), M + r"members\[0\].size: expected a number >= 0"),
    ("member-twice", _set("members.2.name", "model.onnx"), "a member is listed twice"),
    ("member-unsafe", _set("members.0.name", "../model.onnx"), M + r"members\[0\].name: .* is not of the form"),
    ("referenced-unlisted", _set("test_cases.0.inputs", ["test_data_set_0/input_9.pb"]), "refers to member"),
    ("seed-float", _set("seed", 1.0), M + "seed: expected a whole number, got a number"),
    ("environment-cpu-list", _set("environment", {"cpu": []}), M + "environment.mgedump: missing"),
    ("generator-null", _set("generator", None), M + "generator: expected an object, got null"),
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
