"""A JSON report read back (--merge, --shard-durations): every field damaged in turn, in every way, is either still
a report that renders, or one ReportError naming the field; never another exception."""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path

import pytest

from mgedump.report.checked import ReportError, check_report, read_report
from mgedump.report.html import render_html
from mgedump.report.junit import render_junit
from mgedump.report.merge import MergeError, merge
from mgedump.report.schema import dumps
from tests.zoo import failing_bundle, small_bundle

WRONG = [None, True, -1, 2**70, 1.5, "x", "inf", [], [1, "a"], {}, {"a": 1}]


@pytest.fixture(scope="module")
def document(tmp_path_factory) -> dict:
    """A real report: a passing bundle, a failing one (with failure lines and statistics), one that is not a bundle,
    run as shard 1 of 1 with one worker."""
    from tests.support import run_ok

    folder = tmp_path_factory.mktemp("checked")
    zoo = folder / "zoo"
    good = small_bundle(zoo)
    failing_bundle(good, zoo / "fails.mgetest")
    (zoo / "junk.mgetest").write_text("no\n")
    target = folder / "r.json"
    with contextlib.suppress(AssertionError):  # exits 2: the bundle that is not one
        run_ok("mgerun", zoo, "--iter", "2", "--jobs", "1", "--shard", "1/1", "--report-json", target, "-q")
    return json.loads(target.read_text())


def _paths(value, path=()):
    """Every place in a document: (path, value)."""
    yield path, value
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value[:3]):
            yield from _paths(inner, (*path, index))


def _set(document, path, value, delete=False):
    target = document
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value


def _render(report) -> None:
    try:
        merged = merge([("r.json", report)])
    except MergeError:
        return
    render_junit(merged)
    render_html(merged)
    dumps(merged.to_json())


def test_the_real_report_reads_back_and_renders(document):
    _render(check_report(document, "report r.json"))


def test_every_field_damaged_is_one_error_or_still_a_report(document):
    places = [path for path, _ in _paths(document) if path]
    assert len(places) > 150
    outcomes = {"error": 0, "fine": 0}
    for path in places:
        for damage in [*WRONG, "delete"]:
            damaged = copy.deepcopy(document)
            if isinstance(path[-1], int) and damage == "delete":
                continue
            _set(damaged, path, damage, delete=damage == "delete")
            try:
                report = check_report(json.loads(json.dumps(damaged)), "report r.json")
            except ReportError as exc:
                assert "\n" not in exc.one_line() and exc.one_line().startswith("report r.json")
                outcomes["error"] += 1
                continue
            _render(report)  # what the check lets through renders
            outcomes["fine"] += 1
    assert outcomes["error"] > 500 and outcomes["fine"] > 100


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xfe", "is not a JSON report"),
        (b'{"report_version": 2, "exit_code": Infinity}', "(Infinity is not JSON)"),
        (b"[" * 100000 + b"]" * 100000, "is not a JSON report"),
        (b'{"report_version": true, "exit_code": 0}', "is report version true"),
        (b'{"report_version": 2, "exit_code": 4}', "exit_code: expected an exit code (0, 1, 2 or 3), got 4"),
        (b'{"report_version": 2, "exit_code": 0, "bundles": {}}', "bundles: expected a list, got {}"),
        (b'{"report_version": 2, "exit_code": 0, "bundles": [{"source": "a"}]}', "bundles[0].exit_code is missing"),
        (b'{"report_version": 2, "exit_code": 0, "environment": {"cpu": "x"}}', "environment.cpu: expected an object"),
    ],
)
def test_crafted_files(tmp_path: Path, data, message):
    path = tmp_path / "r.json"
    path.write_bytes(data)
    with pytest.raises(ReportError) as caught:
        read_report(str(path))
    assert message in caught.value.one_line() and str(path) in caught.value.one_line()
