"""The published JSON Schemas (``docs/schemas/``) describe exactly what the commands write.

The artefacts are real: bundles packed from the sample models in every mode
that shapes the manifest, ``mgerun --report-json`` over passing, failing,
crafted and unreadable bundles (with ``--profile``, ``--repeat-sweep``,
``--concurrency``, a model that fails to run and an embedded io dump's
diagnosis), and ``mgediff --report-json`` over io dumps, bundles and models.
Each is validated against its schema, and the branches the schemas describe
are checked to be present, so a schema cannot pass by never seeing them. Real
documents with a required key removed, an unknown key added or a wrong type
must fail.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import zipfile
from collections.abc import Callable
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from tests.shared import made_once
from tests.support import ROOT, SAMPLES, rewrite_bundle, with_changed_weight

DOCS = ROOT / "docs"
SCHEMAS = DOCS / "schemas"
SHARED_DEFS = ("tensorErr", "nodeDiff", "index", "finiteOrNot", "element")


def schema_path(name: str) -> Path:
    """The manifest's schema ships inside the package (mgerun checks what it reads against it); the reports' are
    in docs/schemas."""
    if name == "manifest":
        return ROOT / "mgedump" / "bundle" / "manifest.schema.json"
    return SCHEMAS / f"{name}.schema.json"


def schema(name: str) -> dict:
    return json.loads(schema_path(name).read_text(encoding="utf-8"))


@functools.cache
def validator(name: str):
    return jsonschema.Draft202012Validator(schema(name))


def problems(name: str, document: dict) -> list[str]:
    """Every way the document breaks the schema, as readable lines (empty when it is valid)."""
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message[:300]}"
        for error in validator(name).iter_errors(document)
    ]


def call(program: str, *args) -> int:
    """Run mgedump, mgerun or mgediff in-process, as the console script does; return its exit code."""
    import mgedump.cli as cli

    try:
        getattr(cli, f"{program}_main")([str(a) for a in args])
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def manifest_of(bundle: Path) -> dict:
    with zipfile.ZipFile(bundle) as zf:
        return json.loads(zf.read("mgedump.json"))


def tensor_pb(array: np.ndarray, name: str) -> bytes:
    from onnx import numpy_helper

    return numpy_helper.from_array(array, name).SerializeToString()


def has_avx2() -> bool:
    try:
        from mgedump.bundle.requirements import cpu_has_avx2
    except ImportError:  # before the requirements moved into the bundle package
        from mgedump.optimize.requirements import cpu_has_avx2  # type: ignore[no-redef]
    return cpu_has_avx2()


# how each bundle is packed: (model under samples/, mgedump arguments after the model)
PACKS = {
    "plain": ("cnn.onnx", ["-d", "#rand(0,1)"]),
    "list": ("cnn.onnx", ["-d", f"@{SAMPLES / 'testcases.txt'}", "--seed", "5"]),
    "no_assert": ("nhwc.onnx", ["-d", "#rand(0,255)", "--no-assert", "--silent"]),
    "io16xc32": (
        "wide_mlp.onnx",
        ["-d", "#rand(0,1)", "--optimize-for-inference", "--enable-io16xc32", "--maxerr", "1e-2"],
    ),
    "ioc16": (
        "float16/overflow_chain.onnx",
        ["-d", "#rand(0,10)", "--optimize-for-inference", "--enable-ioc16", "--maxerr", "1e-2"],
    ),
    "fused": (
        "cnn.onnx",
        ["-d", "#rand(0,1)", "--optimize-for-inference", "--enable-fuse-conv-bias-nonlinearity", "--discard-var-name"],
    ),
    "embedded": ("cnn.onnx", ["-d", "#rand(0,1)", "-d", "#rand(0,2)", "--embed-io-dump", "2"]),
    "variants": (
        "cnn.onnx",
        ["-d", "#rand(0,1)", "-d", "#rand(0,2)", "--variants", "fp32,ioc16,io16xc32", "--maxerr", "1e-6"]
        + ["--error-stat", "p99", "--error-stat", "prob:mean"],
    ),
    "external": ("external/mlp.onnx", ["-d", "#rand(0,1)"]),
    "names": (
        "multi_input.onnx",
        ["-d", "input:0:#rand(0,1);len:#const(7)", "-d", SAMPLES / "data" / "multi_input.npz"],
    ),
    "symbolic": ("dynamic_batch.onnx", ["-d", "x:#rand(0,1,2,...)"]),
    "several": ("cnn.onnx", ["-d", "#rand(0,1)", "--variants", "fp32,ioc16,int8", "--maxerr", "1e-2"]),
    "error_stat": (
        "cnn.onnx",
        ["-d", "#rand(0,1)", "--error-stat", "p99", "--error-stat", "prob:mean", "--maxerr", "prob:1e-3"],
    ),
    "transformed": (
        "dynamic_batch.onnx",
        ["-d", SAMPLES / "images" / "cat.png", "--resize-input", "--repeat", "2", "--input-transform", "data/255"],
    ),
}
if has_avx2():
    PACKS["nchw88"] = ("cnn.onnx", ["-d", "#rand(0,1)", "--optimize-for-inference", "--enable-nchw88"])


@pytest.fixture(scope="module")
def bundles() -> dict[str, Path]:
    """Every pack of PACKS, plus a bundle of cnn.onnx with a changed weight and one with crafted expected outputs
    (made once per test run: read only)."""

    def make(work: Path) -> None:
        for name, (model, args) in PACKS.items():
            code = call("mgedump", SAMPLES / model, *args, "-o", work / f"{name}.mgetest")
            assert code == 0, f"packing {name} exited {code}"
        with_changed_weight(work / "embedded.mgetest", work / "broken.mgetest")

        def craft(names, manifest, members):
            # test case 0 expects another shape; test case 1 expects NaN: neither can pass, for reasons of their own
            members["test_data_set_0/output_0.pb"] = tensor_pb(np.zeros((1, 5), np.float32), "prob")
            members["test_data_set_1/output_0.pb"] = tensor_pb(np.full((1, 10), np.nan, np.float32), "prob")

        rewrite_bundle(work / "list.mgetest", work / "crafted.mgetest", craft, fix_hashes=True)

    work = made_once(f"tests/test_schemas.py's bundles: {sorted(PACKS)}", make)
    return {name: work / f"{name}.mgetest" for name in [*PACKS, "broken", "crafted"]}


def _documents(name: str, calls: Callable[[Path], dict[str, list]], program: str) -> dict[str, tuple[int, dict]]:
    """The ``--report-json`` documents and exit codes of ``program``'s calls (``calls(folder)``: name -> arguments,
    which may write into the folder), made once per test run."""

    def make(work: Path) -> None:
        codes = {}
        for key, args in calls(work).items():
            codes[key] = call(program, *args, "--report-json", work / f"{key}.json")
        (work / "exit_codes.json").write_text(json.dumps(codes), encoding="utf-8")

    work = made_once(name, make)
    codes = json.loads((work / "exit_codes.json").read_text(encoding="utf-8"))
    return {key: (code, json.loads((work / f"{key}.json").read_text(encoding="utf-8"))) for key, code in codes.items()}


@pytest.fixture(scope="module")
def reports(bundles) -> dict[str, tuple[int, dict]]:
    """mgerun --report-json documents and exit codes, by call."""

    def calls(work: Path) -> dict[str, list]:
        junk = work / "junk.mgetest"
        junk.write_bytes(b"not a zip archive")
        return {
            # every bundle in one call, one of them unreadable: profiled, with the embedded dump's diagnosis
            "many": [*bundles.values(), junk, "--iter", "2", "--profile", work / "prof.json"],
            # a plain model with a free batch: the batch sweep under concurrent load
            "sweep": [SAMPLES / "dynamic_batch.onnx", "-d", "x:#rand(0,1,2,...)", "--iter", "3"]
            + ["--repeat-sweep", "1,2", "--concurrency", "2", "--thread", "1"],
            # a model that fails to run on its data at verify time
            "run_fails": [SAMPLES / "bad" / "gather_index.onnx", "-d", "#rand(0,100)", "--iter", "1"],
            # a bundle of variants fitted on this machine
            "fitting": [bundles["variants"], "--fitting", "--fitting-budget", "1", "--iter", "1"],
            # an optimised bundle held to a maxerr float16 cannot meet, without warm-up runs
            "tight": [
                bundles["io16xc32"],
                "--maxerr",
                "0",
                "--iter",
                "1",
                "--warmup-iter",
                "0",
                "--graph-opt",
                "basic",
            ],
        }

    return _documents("tests/test_schemas.py's mgerun reports", calls, "mgerun")


@pytest.fixture(scope="module")
def diffs(bundles) -> dict[str, tuple[int, dict]]:
    """mgediff --report-json documents and exit codes, by call."""

    def calls(work: Path) -> dict[str, list]:
        dumped = call("mgerun", bundles["embedded"], bundles["broken"], "--iter", "1", "--io-dump", work / "dumps")
        assert dumped == 1
        return {
            "dumps": [work / "dumps" / "embedded", work / "dumps" / "broken"],
            "float16": [SAMPLES / "float16" / "overflow_chain.onnx", bundles["ioc16"]],
            "given": [bundles["plain"], SAMPLES / "cnn.onnx", "--maxerr", "1e-3"],
        }

    return _documents("tests/test_schemas.py's mgediff reports", calls, "mgediff")


# ---------------------------------------------------------------- the schemas themselves


@pytest.mark.parametrize("name", ["manifest", "report", "diff-report"])
def test_schema_is_draft_2020_12(name):
    document = schema(name)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(document)
    assert "add" in document["description"] and "tests/test_schemas.py" in document["description"]


def test_shared_definitions_are_the_same_in_both_reports():
    report, diff = schema("report")["$defs"], schema("diff-report")["$defs"]
    for name in SHARED_DEFS:
        assert report[name] == diff[name], name


def test_dtypes_are_those_the_runtime_reports():
    from mgedump.model.runtime import _ORT_DTYPES

    tensors, structured = schema("manifest")["$defs"]["dtype"]["anyOf"]  # tensors' dtypes; seq(...), map(...)
    assert set(tensors["enum"]) == set(_ORT_DTYPES.values())
    assert structured["pattern"].startswith("^(seq|map|optional)")
    assert schema("report")["$defs"]["dtype"] == schema("manifest")["$defs"]["dtype"]


def test_requirements_are_those_mgerun_knows():
    try:
        from mgedump.bundle.requirements import KNOWN
    except ImportError:  # before the requirements moved into the bundle package
        from mgedump.optimize.requirements import KNOWN  # type: ignore[no-redef]

    assert set(schema("manifest")["properties"]["requirements"]["items"]["enum"]) == set(KNOWN)


# ---------------------------------------------------------------- real documents are valid


def test_manifests_match_the_schema(bundles):
    manifests = {name: manifest_of(path) for name, path in bundles.items()}
    for name, manifest in manifests.items():
        assert problems("manifest", manifest) == [], name
    # the branches the schema describes were all written
    assert manifests["no_assert"]["assertion"] == {"enabled": False, "maxerr": 0.0001, "verbose": False}
    assert all(case["outputs"] == [] for case in manifests["no_assert"]["test_cases"])
    assert manifests["io16xc32"]["float16"]["mode"] == "io16xc32"
    assert manifests["io16xc32"]["inputs"][0]["dtype"] == "float16"
    ioc16 = manifests["ioc16"]["float16"]
    assert ioc16["kept_float32"] and ioc16["weights_float32"] and ioc16["search_rounds"] >= 1
    assert manifests["fused"]["requirements"] == ["onnxruntime"]
    assert "discard-var-name" in manifests["fused"]["optimizations"]
    assert manifests["embedded"]["io_dump"]["test_cases"] == [0, 1]
    variants = manifests["variants"]
    assert variants["format_version"] == 2 and [v["name"] for v in variants["variants"]][0] == "fp32"
    assert "io16xc32" in {e["name"] for e in variants["left_out"]}  # its float16 outputs alone miss 1e-6
    assert variants["assertion"]["error_stat"] == "p99" and variants["assertion"]["output_error_stat"] == {
        "prob": "mean"
    }
    assert manifests["external"]["model"]["external_data"] == "model.onnx.data"
    assert manifests["external"]["model"]["sha256"] != manifests["external"]["model"]["source_sha256"]
    assert [case["origin"].rsplit(":", 1)[1] for case in manifests["list"]["test_cases"]] == ["1", "2", "3", "4"]
    assert manifests["names"]["inputs"][0]["name"] == "input:0"
    assert isinstance(manifests["symbolic"]["inputs"][0]["shape"][0], str)
    assert manifests["transformed"]["data_options"] == {
        "repeat": 2,
        "resize_input": True,
        "input_transform": "data/255",
    }
    several = manifests["several"]
    assert several["format_version"] == 2 and [v["name"] for v in several["variants"]][:2] == ["fp32", "ioc16"]
    assert several["variants"][1]["float16"]["mode"] == "ioc16" and "optimizations" not in several
    assert manifests["error_stat"]["assertion"]["error_stat"] == "p99"
    assert manifests["error_stat"]["assertion"]["output_error_stat"] == {"prob": "mean"}
    if "nchw88" in manifests:
        assert set(manifests["nchw88"]["requirements"]) == {"onnxruntime", "onnxruntime-cpu", "x86-avx2"}


def test_reports_match_the_schema(reports):
    for name, (code, document) in reports.items():
        assert problems("report", document) == [], name
        assert document["exit_code"] == code, name
    # the branches the schema describes were all written
    code, many = reports["many"]
    assert code == 2
    ran = {Path(b["source"]).stem: b for b in many["bundles"] if b["error"] is None}
    failed = [b for b in many["bundles"] if b["error"] is not None]
    assert len(failed) == 1 and failed[0]["exit_code"] == 2 and failed[0]["test_cases"] == []
    assert all(b["op_profile"] for b in ran.values()) and all(b["profile"] for b in ran.values())
    assert all(case["diagnosis"]["first_divergence"]["node"] == "conv2" for case in ran["broken"]["test_cases"])
    assert all(case["diagnosis"] is None for case in ran["embedded"]["test_cases"])
    shape_differs, nan_expected = (case["outputs"][0] for case in ran["crafted"]["test_cases"][:2])
    assert shape_differs["err"] is None and shape_differs["reason"].startswith("shape differs")
    assert "abs_err_max" not in shape_differs["stats"]
    assert nan_expected["expect"] == "nan" and nan_expected["stats"]["expect_min"] is None
    assert ran["no_assert"]["assertion"]["enabled"] is False and ran["no_assert"]["test_cases"][0]["outputs"] == []

    code, sweep = reports["sweep"]
    bundle = sweep["bundles"][0]
    assert code == 0 and bundle["kind"] == "model" and bundle["session"]["concurrency"] == 2
    case = bundle["test_cases"][0]
    assert [entry["batch"] for entry in case["sweep"]] == [2, 4] and case["samples_per_s"] is not None

    code, run_fails = reports["run_fails"]
    case = run_fails["bundles"][0]["test_cases"][0]
    assert code == 1 and case["error"] and case["latency_ms"] == {"count": 0} and case["wall_s"] is None

    code, tight = reports["tight"]
    bundle = tight["bundles"][0]
    assert code == 1 and bundle["assertion"]["maxerr"] == 0 and bundle["test_cases"][0]["warmup_ms"] == []
    assert bundle["test_cases"][0]["outputs"][0]["failure"]


def test_diff_reports_match_the_schema(diffs):
    for name, (code, document) in diffs.items():
        assert problems("diff-report", document) == [], name
        assert document["exit_code"] == code, name
    code, dumps = diffs["dumps"]
    assert code == 1 and dumps["a"].endswith("(io dump)")
    assert all(case["first_divergence"]["node"] == "conv2" and case["top"] for case in dumps["test_cases"])
    assert diffs["float16"][1]["maxerr_source"] == "float16 on one side: float16's precision"
    assert diffs["float16"][1]["test_cases"][0]["only_b"]  # the Casts float16 added
    code, given = diffs["given"]
    assert code == 0 and given["maxerr_source"] == "given" and given["test_cases"][0]["first_divergence"] is None


# ---------------------------------------------------------------- wrong documents fail


def _mutated(document: dict, path: tuple, change: str, value=None) -> dict:
    """A copy with the key at ``path`` deleted (``change="del"``), set to ``value`` (``"set"``), or with an unknown
    key added to the object at ``path`` (``"add"``)."""
    document = copy.deepcopy(document)
    parent = document
    for key in path[:-1] if change != "add" else path:
        parent = parent[key]
    if change == "del":
        del parent[path[-1]]
    elif change == "set":
        parent[path[-1]] = value
    else:
        parent["added_without_the_schema"] = 1
    return document


MANIFEST_MUTATIONS = [
    (("members",), "del", None),
    (("test_cases", 0, "spec"), "del", None),
    (("model", "source_sha256"), "del", None),
    ((), "add", None),
    (("assertion",), "add", None),
    (("test_cases", 0), "add", None),
    (("seed",), "set", "0"),
    (("format_version",), "set", 2),
    (("assertion", "maxerr"), "set", -1.0),
    (("members", 0, "sha256"), "set", "not a hash"),
    (("members", 0, "name"), "set", "../model.onnx"),
    (("inputs", 0, "dtype"), "set", "float8"),
    (("requirements",), "set", ["gpu"]),
]


@pytest.mark.parametrize(("path", "change", "value"), MANIFEST_MUTATIONS)
def test_a_wrong_manifest_fails(bundles, path, change, value):
    manifest = manifest_of(bundles["plain"])
    assert problems("manifest", manifest) == []
    assert problems("manifest", _mutated(manifest, path, change, value))


REPORT_MUTATIONS = [
    (("report_version",), "del", None),
    (("bundles", 0, "session"), "del", None),
    (("bundles", 0, "test_cases", 0, "latency_ms", "median"), "del", None),
    (("bundles", 0, "test_cases", 0, "outputs", 0, "stats", "expect_min"), "del", None),
    ((), "add", None),
    (("bundles", 0), "add", None),
    (("bundles", 0, "test_cases", 0), "add", None),
    (("bundles", 0, "test_cases", 0, "outputs", 0), "add", None),
    (("bundles", 0, "test_cases", 0, "latency_ms"), "add", None),
    (("bundles", 0, "test_cases", 0, "outputs", 0, "err"), "set", "small"),
    (("bundles", 0, "test_cases", 0, "outputs", 0, "failure"), "set", ["a passing output has no failure lines"]),
    (("bundles", 0, "error"), "set", "an error beside test cases that ran"),
    (("exit_code",), "set", 3),
]


@pytest.mark.parametrize(("path", "change", "value"), REPORT_MUTATIONS)
def test_a_wrong_report_fails(reports, path, change, value):
    document = dict(reports["many"][1])
    document["bundles"] = document["bundles"][:1]  # "plain", which passed
    assert document["bundles"][0]["test_cases"][0]["outputs"][0]["passed"]
    assert problems("report", document) == []
    assert problems("report", _mutated(document, path, change, value))


DIFF_MUTATIONS = [
    (("maxerr_source",), "del", None),
    (("test_cases", 0, "first_divergence", "domain"), "del", None),
    (("test_cases", 0, "worst"), "add", None),
    (("test_cases", 0, "top", 0, "output"), "add", None),
    ((), "add", None),
    (("exit_code",), "set", 2),
    (("test_cases", 0, "worst", "err"), "set", "infinite"),
]


@pytest.mark.parametrize(("path", "change", "value"), DIFF_MUTATIONS)
def test_a_wrong_diff_report_fails(diffs, path, change, value):
    document = diffs["dumps"][1]
    assert problems("diff-report", document) == []
    assert problems("diff-report", _mutated(document, path, change, value))


# ---------------------------------------------------------------- the docs describe the schemas


def _keys(node) -> set[str]:
    """Every property name a schema declares, at any depth."""
    found = set()
    if isinstance(node, dict):
        found |= set(node.get("properties", {}))
        for value in node.values():
            found |= _keys(value)
    elif isinstance(node, list):
        for value in node:
            found |= _keys(value)
    return found


@pytest.mark.parametrize(
    ("name", "page"), [("manifest", "bundle.md"), ("report", "reports.md"), ("diff-report", "reports.md")]
)
def test_every_schema_key_is_documented(name, page):
    text = (DOCS / page).read_text(encoding="utf-8")
    missing = sorted(key for key in _keys(schema(name)) if f"`{key}`" not in text and f'"{key}"' not in text)
    assert missing == [], f"docs/{page} does not describe {missing}"


def _anchor(heading: str) -> str:
    """The anchor a Markdown heading gets (GitHub's rule: lower case, punctuation dropped, spaces to hyphens)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_the_docs_resolve():
    link = re.compile(r"\]\(([^)\s]+)\)")
    anchors = {}
    for page in DOCS.glob("*.md"):
        text = page.read_text(encoding="utf-8")
        anchors[page.name] = {_anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}
    broken = []
    for page in DOCS.glob("*.md"):
        for target in link.findall(page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://")):
                continue
            file, _, anchor = target.partition("#")
            resolved = (page.parent / file).resolve() if file else page
            known = anchors.get(resolved.name) if resolved.parent == DOCS else None
            if not resolved.exists() or (anchor and known is not None and anchor not in known):
                broken.append(f"{page.name}: {target}")
    assert broken == []
