"""The recipes of docs/ci.md, tested as far as this machine can: every YAML block parses, and the sharded recipes'
mgerun lines run on a zoo of bundles with the CI's variables set by hand (GitHub's matrix values, GitLab's
CI_NODE_INDEX and CI_NODE_TOTAL, Kubernetes' JOB_COMPLETION_INDEX and volumes as folders); the merge job's line
then gives the JUnit test cases, counts and verdicts of one unsharded run. The recipes' runs are slow checks
(``-m full``, which .ci/run runs too): mgerun's shards and merges are tested on their own in tests/commands/."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from tests.commands.test_merge import _cases
from tests.shared import made_once
from tests.support import ROOT
from tests.zoo import failing_bundle, small_bundle, tree, two_case_bundle

CI = ROOT / "docs" / "ci.md"


def recipes() -> list[list[dict]]:
    """Every ```yaml block of docs/ci.md, parsed (a block may hold several documents)."""
    blocks = re.findall(r"^```yaml\n(.*?)^```", CI.read_text(encoding="utf-8"), re.DOTALL | re.MULTILINE)
    return [list(yaml.safe_load_all(block)) for block in blocks]


def _recipe(test) -> list[dict]:
    found = [docs for docs in recipes() if test(docs)]
    assert len(found) == 1, "docs/ci.md should hold that recipe once"
    return found[0]


def sh(command: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """A recipe's line through the shell, this interpreter's console scripts first on the PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    clean = {k: v for k, v in os.environ.items() if k not in ("CI_NODE_INDEX", "CI_NODE_TOTAL", "JOB_COMPLETION_INDEX")}
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env={**clean, "PATH": path, **env}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def zoo() -> Path:
    """models/: 10 bundles in 3 subfolders, one failing; and the JUnit report of one unsharded run over it (made once
    per test run: each test copies models/)."""

    def make(root: Path) -> None:
        scratch = root / "scratch"
        tree(root / "models" / "vision", two_case_bundle(scratch), 4, 2)
        tree(root / "models" / "gray", small_bundle(scratch), 5, 1)
        failing_bundle(small_bundle(scratch), root / "models" / "fails.mgetest")
        shutil.rmtree(scratch)
        done = sh("mgerun models/ --iter 1 --junit-xml whole.xml -q", root)
        assert done.returncode == 1, done.stderr

    return made_once("docs/ci.md's zoo and its unsharded JUnit report", make)


def _workspace(zoo: Path, tmp_path: Path) -> Path:
    shutil.copytree(zoo / "models", tmp_path / "models")
    return tmp_path


def test_every_recipe_parses():
    found = recipes()
    assert len(found) == 5  # GitHub and GitLab on one machine, then GitHub, GitLab and Kubernetes sharded
    assert all(docs and all(isinstance(doc, dict) for doc in docs) for docs in found)


@pytest.mark.full
def test_github_actions_matrix(zoo, tmp_path):
    [workflow] = _recipe(lambda docs: "strategy" in str(docs))
    verify, report = workflow["jobs"]["verify"], workflow["jobs"]["report"]
    shards = verify["strategy"]["matrix"]["shard"]
    assert shards == [1, 2, 3, 4] and verify["strategy"]["fail-fast"] is False
    assert report["needs"] == "verify" and report["if"] == "always()"
    uploaded = next(s for s in verify["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    downloaded = next(s for s in report["steps"] if s.get("uses", "").startswith("actions/download-artifact"))
    assert uploaded["if"] == "always()" and downloaded["with"]["merge-multiple"] is True
    work = _workspace(zoo, tmp_path)
    [line] = [s["run"] for s in verify["steps"] if s.get("run", "").startswith("mgerun")]
    for shard in shards:
        name = uploaded["with"]["name"].replace("${{ matrix.shard }}", str(shard))
        assert fnmatch.fnmatch(name, downloaded["with"]["pattern"])
        done = sh(line.replace("${{ matrix.shard }}", str(shard)), work)
        assert done.returncode in (0, 1), done.stderr
        assert (work / uploaded["with"]["path"].replace("${{ matrix.shard }}", str(shard))).is_file()
    [merge] = [s["run"] for s in report["steps"] if s.get("run", "").startswith("mgerun")]
    done = sh(merge, work)
    assert done.returncode == 1, done.stderr
    assert _cases(work / "junit.xml") == _cases(zoo / "whole.xml")


@pytest.mark.full
def test_gitlab_parallel(zoo, tmp_path):
    [pipeline] = _recipe(lambda docs: "model-gate-report" in docs[0])
    job, report = pipeline["model-gate"], pipeline["model-gate-report"]
    total = job["parallel"]
    assert total == 4 and report["needs"] == ["model-gate"] and report["when"] == "always"
    assert job["artifacts"]["when"] == "always" and report["artifacts"]["reports"]["junit"] == "junit.xml"
    work = _workspace(zoo, tmp_path)
    lines = [line for line in job["script"] if line.startswith("mgerun")]
    for index in range(1, total + 1):
        for line in lines:
            done = sh(line, work, CI_NODE_INDEX=str(index), CI_NODE_TOTAL=str(total))
            assert done.returncode in (0, 1), done.stderr
            assert f"mgerun: shard {index} of 4 (GitLab's CI_NODE_INDEX={index} and CI_NODE_TOTAL=4)" in done.stderr
    kept = [p.name for p in work.iterdir() if any(fnmatch.fnmatch(p.name, g) for g in job["artifacts"]["paths"])]
    assert sorted(kept) == [f"report-{k}.json" for k in range(1, 5)]
    for line in (line for line in report["script"] if line.startswith("mgerun")):
        assert sh(line, work).returncode == 1
    assert _cases(work / "junit.xml") == _cases(zoo / "whole.xml")


@pytest.mark.full
def test_kubernetes_indexed_job(zoo, tmp_path):
    shards, merge = _recipe(lambda docs: "Indexed" in str(docs))
    spec = shards["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 4
    volumes = {tmp_path / "zoo", tmp_path / "reports"}
    shutil.copytree(zoo / "models", tmp_path / "zoo" / "models")
    (tmp_path / "reports").mkdir()

    def command(job: dict) -> str:
        [container] = job["spec"]["template"]["spec"]["containers"]
        assert container["command"] == ["sh", "-c"]
        text = container["args"][0].split("&&", 1)[1]  # the install is the wheel's: this venv has mgedump already
        for mount in container["volumeMounts"]:
            text = text.replace(mount["mountPath"], str(tmp_path / mount["mountPath"].strip("/")))
        return text

    assert {tmp_path / m["mountPath"].strip("/") for m in shards["spec"]["template"]["spec"]["containers"][0]
            ["volumeMounts"]} == volumes  # fmt: skip
    for index in range(spec["completions"]):
        done = sh(command(shards), tmp_path, JOB_COMPLETION_INDEX=str(index))
        assert done.returncode == 0, done.stderr  # a pod fails only when it wrote no report
        assert f"Kubernetes' JOB_COMPLETION_INDEX={index}, counted from 0" in done.stderr
    done = sh(command(merge), tmp_path)
    assert done.returncode == 1, done.stderr
    assert _cases(tmp_path / "reports" / "junit.xml") == _cases(zoo / "whole.xml")
    assert ET.parse(tmp_path / "reports" / "junit.xml").getroot().get("tests") == "14"
