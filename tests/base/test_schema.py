"""The JSON Schema subset validator: each keyword the schemas use, the path and words of its first problem, its
bounds (the schema's depth, not the document's), and agreement with the ``jsonschema`` package (a test dependency
only) on the published schemas and on fuzzed manifests."""

from __future__ import annotations

import copy
import json
import math
import zipfile

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mgedump.base.schema import KEYWORDS, first_problem, path_text, unknown_keywords
from mgedump.bundle.format import OPEN_ENDS, SCHEMA, published_schema, reader_schema
from tests.support import ROOT, SAMPLES, pack_two_variants, run_ok


def problem(schema, document) -> str | None:
    found = first_problem(schema, document)
    return None if found is None else str(found)


@pytest.mark.parametrize(
    ("schema", "document", "expected"),
    [
        ({"type": "object"}, [], "(top): expected an object, got a list"),
        ({"type": ["string", "null"]}, 3, "(top): expected a string or null, got a number"),
        ({"type": "integer"}, True, "(top): expected a whole number, got true or false"),
        ({"type": "integer"}, 1.0, "(top): expected a whole number, got a number"),
        ({"type": "number"}, math.inf, "(top): expected a number, got an infinity"),
        ({"type": "number", "minimum": 0}, -1, "(top): expected a number >= 0, got -1"),
        ({"type": "number", "exclusiveMaximum": 1}, 1, "(top): expected a number < 1, got 1"),
        ({"const": 1}, True, "(top): expected 1"),
        ({"enum": ["a", None]}, "b", '(top): expected one of "a", null'),
        ({"type": "string", "minLength": 1}, "", "(top): expected a string that is not empty"),
        ({"type": "string", "maxLength": 2}, "abc", "(top): longer than 2 characters"),
        ({"type": "string", "pattern": "^a+$"}, "ab", '(top): "ab" is not of the form this field takes'),
        ({"type": "array", "minItems": 1}, [], "(top): expected a list that is not empty"),
        ({"type": "array", "items": {"type": "string"}}, ["a", 2], "[1]: expected a string, got a number"),
        ({"type": "array", "uniqueItems": True}, [1, 1.0], "[1]: listed twice"),
        ({"type": "array", "uniqueItems": True}, [1, True], None),
        ({"type": "object", "required": ["a"]}, {}, "a: missing"),
        ({"type": "object", "additionalProperties": False}, {"b c": 1}, "['b c']: not a key this object has"),
        ({"additionalProperties": {"type": "number"}}, {"k": "x"}, "k: expected a number, got a string"),
        ({"type": "object", "minProperties": 1}, {}, "(top): expected an object that is not empty"),
        ({"dependentRequired": {"a": ["b"]}}, {"a": 1}, "b: missing (it goes with 'a')"),
        ({"properties": {"a": False}}, {"a": 1}, "a: not allowed here"),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "x", "(top): expected a whole number or null, got a string"),
        ({"oneOf": [{"type": "null"}, {"type": "object", "required": ["k"]}]}, {}, "k: missing"),
        ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 1, "(top): fits more than one of the forms allowed here"),
        ({"allOf": [{"type": "object"}, {"required": ["z"]}]}, {}, "z: missing"),
        ({"if": {"properties": {"v": {"const": 1}}}, "then": {"required": ["a"]}, "else": {"required": ["b"]}},
         {"v": 2}, "b: missing"),
        ({"$defs": {"n": {"type": "null"}}, "properties": {"x": {"$ref": "#/$defs/n"}}}, {"x": 0},
         "x: expected null, got a number"),
    ],
)  # fmt: skip
def test_each_keyword(schema, document, expected):
    assert problem(schema, document) == expected


def test_paths_read_as_code_and_quote_what_is_not_a_name():
    assert path_text(("variants", 0, "certified", "prob")) == "variants[0].certified.prob"
    assert path_text(("assertion", "output_maxerr", "y:0")) == "assertion.output_maxerr['y:0']"
    assert path_text(("k", "\x1b[31m" * 20)).endswith("...']")
    assert path_text(()) == "(top)"


def test_a_document_nested_far_deeper_than_the_schema_is_one_wrong_type():
    deep: object = "leaf"
    for _ in range(100_000):  # deeper than Python's recursion limit: never walked
        deep = [deep]
    schema = {"type": "object", "properties": {"origin": {"type": "string"}}}
    assert problem(schema, {"origin": deep}) == "origin: expected a string, got a list"
    assert problem({"type": "array", "uniqueItems": True}, [deep, [deep]]) is None  # compared without recursing


def test_every_keyword_of_the_published_schemas_is_one_it_checks():
    for path in [ROOT / "mgedump" / "bundle" / SCHEMA, *sorted((ROOT / "docs" / "schemas").glob("*.json"))]:
        assert unknown_keywords(json.loads(path.read_text(encoding="utf-8"))) == set(), path.name
    assert unknown_keywords({"properties": {"a": {"propertyNames": {}}}}) == {"propertyNames"}
    assert "type" in KEYWORDS and "description" not in KEYWORDS


def test_the_package_ships_the_schema_the_docs_link_to():
    shipped = ROOT / "mgedump" / "bundle" / SCHEMA
    assert published_schema() == json.loads(shipped.read_text(encoding="utf-8"))
    assert not (ROOT / "docs" / "schemas" / SCHEMA).exists()  # one file, not a copy
    for page in ("bundle.md", "README.md"):
        assert f"](../mgedump/bundle/{SCHEMA})" in (ROOT / "docs" / page).read_text(encoding="utf-8"), page
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'"bundle/{SCHEMA}"' in pyproject  # package data: in the wheel


def test_the_reader_is_open_only_where_it_says():
    published, reader = published_schema(), reader_schema()
    for pointer, opened in OPEN_ENDS.items():
        node = reader
        for part in pointer.strip("/").split("/"):
            node = node[part]
        assert node == opened
    assert "additionalProperties" not in json.dumps(reader).replace('"additionalProperties": {', "")
    assert published["additionalProperties"] is False  # what mgedump writes stays exact
    assert published_schema() is published  # loaded once


def test_the_error_statistics_are_those_the_options_take():
    from mgedump.base.bounds import ERROR_STATS

    assert published_schema()["$defs"]["errorStat"]["enum"] == list(ERROR_STATS)


# ---------------------------------------------------------------- agreement with jsonschema on fuzzed manifests


@pytest.fixture(scope="module")
def manifests(tmp_path_factory) -> list[dict]:
    """Real manifests: one model (with an io dump and an error statistic) and several variants."""
    folder = tmp_path_factory.mktemp("agree")
    one, several = folder / "one.mgetest", folder / "several.mgetest"
    run_ok("mgedump", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--embed-io-dump", "--error-stat", "p99", "-o", one)
    pack_two_variants(several)
    found = []
    for bundle in (one, several):
        with zipfile.ZipFile(bundle) as zf:
            found.append(json.loads(zf.read("mgedump.json")))
    assert found[1]["format_version"] == 2 and found[0]["assertion"]["error_stat"] == "p99"
    return found


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _outside_json(value) -> bool:
    """Values the two validators may see differently by design: a whole number written 1.0, NaN, infinities."""
    if isinstance(value, float):
        return not math.isfinite(value) or value.is_integer()
    if isinstance(value, dict):
        return any(_outside_json(v) for v in value.values())
    if isinstance(value, list):
        return any(_outside_json(v) for v in value)
    return False


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**65), 2**65)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["model.onnx", "float32", "max", "p99", "0" * 64, "test_data_set_0", "x86-avx2", "ioc16"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=5,
)


def test_it_agrees_with_jsonschema_on_fuzzed_manifests(manifests):
    validator = jsonschema.Draft202012Validator(published_schema())
    for manifest in manifests:
        assert validator.is_valid(manifest) and first_problem(published_schema(), manifest) is None

    @settings(max_examples=400, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
    @given(st.sampled_from([0, 1]), st.data(), st.one_of(st.just("delete"), st.just("add"), JSON))
    def check(which, data, value):
        edited = copy.deepcopy(manifests[which])
        path = data.draw(st.sampled_from([p for p in _paths(edited) if p]))
        parent = edited
        for key in path[:-1]:
            parent = parent[key]
        if value == "delete":
            del parent[path[-1]]
        elif value == "add" and isinstance(parent[path[-1]], dict):
            parent[path[-1]]["unknown"] = 1
        else:
            parent[path[-1]] = value
        ours = first_problem(published_schema(), edited)
        theirs = validator.is_valid(edited)
        if _outside_json(edited):
            assert ours is not None or theirs  # stricter only
        else:
            assert (ours is None) == theirs, (path, value, ours)

    check()


def test_the_schema_refuses_what_a_reader_could_not_use(manifests):
    one, several = manifests
    for edit, where in [
        (lambda m: m["environment"].__setitem__("cpu", ["x86_64"]), "environment.cpu: expected an object"),
        (lambda m: m["environment"]["cpu"].__setitem__("flags", [{"avx": 1}]), "environment.cpu.flags[0]"),
        (lambda m: m["environment"]["cpu"].__setitem__("flags", [None]), "environment.cpu.flags[0]"),
        (lambda m: m["test_cases"][0].__setitem__("origin", 7), "test_cases[0].origin: expected a string"),
        (lambda m: m["test_cases"][0].__setitem__("origin", None), "test_cases[0].origin: expected a string"),
        (lambda m: m["generator"].__setitem__("version", ""), "generator.version: expected a string that is not"),
    ]:
        edited = copy.deepcopy(one)
        edit(edited)
        assert str(first_problem(reader_schema(), edited)).startswith(where)
    for edit, where in [
        (lambda m: m["variants"][0].__setitem__("certified", {"prob": "0.1"}), "variants[0].certified.prob"),
        (lambda m: m["variants"][1]["options"].__setitem__("fp32_nodes", [["x"]]), "variants[1].options.fp32_nodes[0]"),
        (lambda m: m["variants"][0]["model"].__setitem__("member", "model.onnx"), "variants[0].model.member"),
        (lambda m: m.__setitem__("optimizations", []), "optimizations: not allowed here"),
        (lambda m: m.__setitem__("left_out", [{"name": "int8"}]), "left_out[0].reason: missing"),
        (lambda m: m.__setitem__("model", {"member": "model.onnx"}), "model.source_sha256: missing"),
    ]:
        edited = copy.deepcopy(several)
        edit(edited)
        assert str(first_problem(reader_schema(), edited)).startswith(where), first_problem(reader_schema(), edited)


def test_unknown_keys_are_ignored_and_the_open_ends_read(manifests):
    one = copy.deepcopy(manifests[0])
    one["written_later"] = "by a newer mgedump"
    one["environment"]["cpu"]["cache_kib"] = 512
    one["optimizations"] = ["bf16w"]  # a mode registered at run time
    one["bf16w"] = {"weights_rounded": 3}
    one["requirements"] = ["npu-v9"]  # refused by name when run, not as malformed
    assert first_problem(reader_schema(), one) is None
    assert first_problem(published_schema(), one) is not None


def test_a_large_manifest_is_checked_quickly(manifests):
    import time

    one = copy.deepcopy(manifests[0])
    case = one["test_cases"][0]
    one["test_cases"] = [case] * 20_000
    began = time.thread_time()  # CPU time: other work on the machine does not lengthen it
    assert first_problem(reader_schema(), one) is None
    assert time.thread_time() - began < 5
