"""A folder is its whole tree: every bundle below it, sorted, named by its path relative to the folder given;
links to folders are not followed, a loop is an error."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mgedump.base.errors import UsageError
from mgedump.commands.tree import expand_tree, report_names
from tests.zoo import failing_bundle, small_bundle


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    """zoo/model_a/model.mgetest (passes), zoo/model_b/model.mgetest (fails), zoo/top.mgetest, zoo/deep/er/x.mgetest."""
    scratch = tmp_path_factory.mktemp("scratch")
    good = small_bundle(scratch)
    root = tmp_path_factory.mktemp("zoo")
    for rel in ("model_a/model.mgetest", "top.mgetest", "deep/er/x.mgetest"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(good.read_bytes())
    failing_bundle(good, root / "model_b" / "model.mgetest")
    (root / "model_b" / "notes.txt").write_text("not a bundle\n")
    return root


def test_a_folder_is_every_bundle_of_its_tree_sorted(zoo):
    found = expand_tree([str(zoo)])
    assert [f.key for f in found] == [
        "deep/er/x.mgetest", "model_a/model.mgetest", "model_b/model.mgetest", "top.mgetest",
    ]  # fmt: skip
    assert [f.name for f in found] == ["deep/er/x", "model_a/model", "model_b/model", "top"]
    assert all(Path(f.path) == zoo / f.key for f in found)


def test_a_file_given_alone_is_keyed_by_its_name(zoo):
    [found] = expand_tree([str(zoo / "model_a" / "model.mgetest")])
    assert found.key == "model.mgetest" and found.name == "model"


def test_two_files_of_one_name_are_told_apart(zoo):
    found = expand_tree([str(zoo / "model_a" / "model.mgetest"), str(zoo / "model_b" / "model.mgetest")])
    assert report_names(found) == ["model_a/model", "model_b/model"]


def test_the_same_name_under_two_folders_stays_apart_in_every_report(zoo, tmp_path, mgerun):
    result = mgerun(zoo, "--iter", "1", "--junit-xml", tmp_path / "j.xml", "--report-json", tmp_path / "r.json",
                    "--report-html", tmp_path / "r.html")  # fmt: skip
    assert result.code == 1, result.err
    suites = [suite.get("name") for suite in ET.parse(tmp_path / "j.xml").getroot()]
    assert suites == ["deep/er/x", "model_a/model", "model_b/model", "top"]
    document = json.loads((tmp_path / "r.json").read_text())
    assert [(b["name"], b["exit_code"]) for b in document["bundles"]] == [
        ("deep/er/x", 0), ("model_a/model", 0), ("model_b/model", 1), ("top", 0),
    ]  # fmt: skip
    page = (tmp_path / "r.html").read_text()
    assert "model_a/model" in page and "model_b/model" in page


def test_a_link_to_a_folder_is_not_followed(zoo, tmp_path, caplog):
    root = tmp_path / "linked"
    root.mkdir()
    (root / "one.mgetest").write_bytes((zoo / "top.mgetest").read_bytes())
    os.symlink(zoo, root / "elsewhere")
    os.symlink(root, root / "loop")  # a loop through a link: never walked
    found = expand_tree([str(root)])
    assert [f.key for f in found] == ["one.mgetest"]


def test_a_link_to_a_bundle_is_a_bundle(zoo, tmp_path):
    root = tmp_path / "files"
    root.mkdir()
    os.symlink(zoo / "top.mgetest", root / "alias.mgetest")
    assert [f.key for f in expand_tree([str(root)])] == ["alias.mgetest"]


def test_a_loop_of_links_is_an_error(tmp_path):
    root = tmp_path / "loops"
    root.mkdir()
    os.symlink(root / "a.mgetest", root / "b.mgetest")
    os.symlink(root / "b.mgetest", root / "a.mgetest")
    with pytest.raises(UsageError, match="a loop of links"):
        expand_tree([str(root)])


def test_a_folder_of_no_bundle_says_so_of_its_subfolders_too(tmp_path, mgerun):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    result = mgerun(tmp_path / "empty")
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        f"mgerun: error: folder {tmp_path / 'empty'} holds no *.mgetest bundle (its subfolders neither)"
    ]
