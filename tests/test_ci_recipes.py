"""The recipes of docs/ci.md, tested as far as this machine can: every YAML block parses, and the sharded recipes'
mgerun lines run on a zoo of bundles with the CI's variables set by hand (GitHub's matrix values, GitLab's
CI_NODE_INDEX and CI_NODE_TOTAL, Kubernetes' JOB_COMPLETION_INDEX and volumes as folders); the merge job's line
then gives the JUnit test cases, counts and verdicts of one unsharded run. The recipes' runs are slow checks
(``-m full``, which .ci/run runs too): mgerun's shards and merges are tested on their own in tests/commands/."""

from __future__ import annotations

import fnmatch
import json
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
    from mgedump.commands.shards import ENGINES, RUN_IDS

    ci = {"JOB_COMPLETION_INDEX", *(e.index for e in ENGINES), *(e.total for e in ENGINES), *(n for _, n in RUN_IDS)}
    clean = {k: v for k, v in os.environ.items() if k not in ci}
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
    assert len(found) == 6  # GitHub and GitLab on one machine, then GitHub, GitLab and Kubernetes (2 Jobs) sharded
    assert all(docs and all(isinstance(doc, dict) for doc in docs) for docs in found)


def test_github_recipes_may_publish_checks():
    """A default repository's token may not create check runs: the JUnit action needs checks: write."""
    workflows = [docs[0] for docs in recipes() if "jobs" in docs[0] and "runs-on" in str(docs[0])]
    assert len(workflows) == 2
    for workflow in workflows:
        assert workflow["permissions"] == {"contents": "read", "checks": "write"}


@pytest.mark.full
def test_github_single_machine_gates_latency_on_a_baseline(zoo, tmp_path):
    [workflow] = _recipe(lambda docs: "verify" in docs[0].get("jobs", {}) and "strategy" not in str(docs))
    [line] = [s["run"] for s in workflow["jobs"]["verify"]["steps"] if s.get("run", "").startswith("mgerun")]
    assert "--baseline baseline/report.json --max-slowdown 1.10" in line
    work = _workspace(zoo, tmp_path)
    made = sh("mkdir -p baseline && mgerun models/ --report-json baseline/report.json -q", work)
    assert made.returncode == 1, made.stderr  # the zoo's failing bundle
    summary = work / "step_summary.md"  # GitHub's file for the job summary, which it creates empty
    summary.touch()
    done = sh(line, work, GITHUB_RUN_ID="77", GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary))
    assert done.returncode == 1, done.stderr
    assert "latency gate (p90): 14 check(s)" in done.stdout
    shown = summary.read_text()
    assert shown.startswith("### mgerun: FAILED (exit 1)\n")
    assert "10 bundle(s): 9 passed, 1 failed, 0 could not run; 14 test case(s): 13 passed, 1 failed" in shown
    assert "| fails | test case 0 (-d #1: #rand(0,255)) | score: err=0.5 &gt; maxerr=0.0001 |" in shown
    assert "- latency gate (p90): 14 check(s)" in shown
    assert [x for x in done.stdout.splitlines() if x.startswith("::error ")] == [
        "::error file=models/fails.mgetest,title=mgerun%3A fails test case 0 (-d #1%3A #rand(0%2C255))::"
        "score: err=0.5 > maxerr=0.0001"
    ]
    report = json.loads((work / "report.json").read_text())
    assert report["run"] == {"id": "77", "from": "GitHub's GITHUB_RUN_ID"}
    assert report["latency_gate"]["max_slowdown"] == 1.10 and len(report["latency_gate"]["checks"]) == 14


@pytest.mark.full
def test_gitlab_single_machine_gates_latency_on_a_limit(zoo, tmp_path):
    [pipeline] = _recipe(lambda docs: "model-gate" in docs[0] and "model-gate-report" not in docs[0])
    [line] = [x for x in pipeline["model-gate"]["script"] if x.startswith("mgerun")]
    assert "--max-latency 50" in line
    work = _workspace(zoo, tmp_path)
    done = sh(line, work, CI_PIPELINE_ID="9")
    assert done.returncode == 1, done.stderr
    assert json.loads((work / "report.json").read_text())["latency_gate"]["percentile"] == "p90"


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
        done = sh(line.replace("${{ matrix.shard }}", str(shard)), work, GITHUB_RUN_ID="501")
        assert done.returncode in (0, 1), done.stderr
        assert (work / uploaded["with"]["path"].replace("${{ matrix.shard }}", str(shard))).is_file()
    [merge] = [s["run"] for s in report["steps"] if s.get("run", "").startswith("mgerun")]
    foreign = sh(merge, work, GITHUB_RUN_ID="502")  # artifacts of another workflow run
    assert foreign.returncode == 2 and "not of this run (run '502' (GitHub's GITHUB_RUN_ID))" in foreign.stderr
    summary = work / "step_summary.md"
    done = sh(merge, work, GITHUB_RUN_ID="501", GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary))
    assert done.returncode == 1, done.stderr
    assert _cases(work / "junit.xml") == _cases(zoo / "whole.xml")
    assert summary.read_text().startswith("### mgerun --merge: FAILED (exit 1)\n\n10 bundle(s): 9 passed, 1 failed")
    assert sum(x.startswith("::error file=models/fails.mgetest,") for x in done.stdout.splitlines()) == 1
    assert json.loads((work / "report.json").read_text())["run"]["id"] == "501"


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
            done = sh(line, work, CI_NODE_INDEX=str(index), CI_NODE_TOTAL=str(total), CI_PIPELINE_ID="41")
            assert done.returncode in (0, 1), done.stderr
            assert f"mgerun: shard {index} of 4 (GitLab's CI_NODE_INDEX={index} and CI_NODE_TOTAL=4)" in done.stderr
    kept = [p.name for p in work.iterdir() if any(fnmatch.fnmatch(p.name, g) for g in job["artifacts"]["paths"])]
    assert sorted(kept) == [f"report-{k}.json" for k in range(1, 5)]
    merges = [line for line in report["script"] if line.startswith("mgerun")]
    for line in merges:
        assert sh(line, work, CI_PIPELINE_ID="41").returncode == 1
    assert _cases(work / "junit.xml") == _cases(zoo / "whole.xml")
    # a shard's report left from another pipeline of a zoo of the same size: refused, not "all passed"
    stale = sh(lines[0], work, CI_NODE_INDEX="2", CI_NODE_TOTAL="4", CI_PIPELINE_ID="40")
    assert stale.returncode in (0, 1), stale.stderr
    for line in merges:
        refused = sh(line, work, CI_PIPELINE_ID="41")
        assert refused.returncode == 2 and "the reports are of different runs" in refused.stderr


def test_gitlab_without_parallel_is_one_shard(zoo, tmp_path):
    """GitLab without parallel: sets CI_NODE_TOTAL=1 and no CI_NODE_INDEX: --shard auto checks every bundle."""
    work = _workspace(zoo, tmp_path)
    done = sh("mgerun models/ --shard auto --iter 1 --report-json r.json -q", work, CI_NODE_TOTAL="1")
    assert done.returncode == 1, done.stderr
    assert "shard 1 of 1 (GitLab's CI_NODE_TOTAL=1 and no CI_NODE_INDEX), by hash: 10 of 10 bundle(s)" in done.stderr


@pytest.mark.full
def test_kubernetes_indexed_job(zoo, tmp_path):
    [shards] = _recipe(lambda docs: "Indexed" in str(docs))
    [merge] = _recipe(lambda docs: docs[0].get("metadata", {}).get("name") == "model-gate-report")
    spec = shards["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 4
    [container] = shards["spec"]["template"]["spec"]["containers"]
    [env] = container["env"]
    assert env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['batch.kubernetes.io/controller-uid']"
    script = CI.read_text(encoding="utf-8")
    assert 'sed "s/SHARDS_JOB_UID/$RUN_ID/" model-gate-report.yaml' in script
    volumes = {tmp_path / "zoo", tmp_path / "reports"}
    shutil.copytree(zoo / "models", tmp_path / "zoo" / "models")
    (tmp_path / "reports").mkdir()
    dead = tmp_path / "dead"  # an mgerun that dies before it writes anything (a pod killed for memory)
    dead.mkdir()
    (dead / "mgerun").write_text("#!/bin/sh\nkill -9 $$\n")
    (dead / "mgerun").chmod(0o755)

    def command(job: dict) -> str:
        [container] = job["spec"]["template"]["spec"]["containers"]
        assert container["command"] == ["sh", "-c"]
        text = re.sub(r'pip install "[^"]*" &&', "", container["args"][0])  # this venv has mgedump already
        for mount in container["volumeMounts"]:
            text = text.replace(mount["mountPath"], str(tmp_path / mount["mountPath"].strip("/")))
        return text

    def run_merge(uid: str) -> subprocess.CompletedProcess:
        [container] = merge["spec"]["template"]["spec"]["containers"]
        assert container["env"] == [{"name": "RUN_ID", "value": "SHARDS_JOB_UID"}]
        return sh(command(merge), tmp_path, RUN_ID=uid)

    assert {tmp_path / m["mountPath"].strip("/") for m in container["volumeMounts"]} == volumes
    for index in range(spec["completions"]):  # an earlier run leaves its reports on the volume
        assert sh(command(shards), tmp_path, JOB_COMPLETION_INDEX=str(index), RUN_ID="uid-old").returncode == 0
    for index in range(spec["completions"]):  # this run: shard 3's mgerun dies
        env = {"JOB_COMPLETION_INDEX": str(index), "RUN_ID": "uid-new"}
        if index == 3:
            env["PATH"] = f"{dead}{os.pathsep}{os.environ.get('PATH', '')}"
            died = subprocess.run(["sh", "-c", command(shards)], cwd=tmp_path, env={**os.environ, **env})
            assert died.returncode != 0  # its pod fails (and is retried): the old report is gone
            continue
        done = sh(command(shards), tmp_path, **env)
        assert done.returncode == 0, done.stderr  # a pod fails only when it wrote no report
        assert f"Kubernetes' JOB_COMPLETION_INDEX={index}, counted from 0" in done.stderr
    missing = run_merge("uid-new")
    assert missing.returncode == 2 and "shard(s) 4 of 4 missing" in missing.stderr
    done = sh(command(shards), tmp_path, JOB_COMPLETION_INDEX="3", RUN_ID="uid-new")  # the retried pod
    assert done.returncode == 0, done.stderr
    assert run_merge("uid-old").returncode == 2  # the merge of another run refuses this run's reports
    done = run_merge("uid-new")
    assert done.returncode == 1, done.stderr
    assert _cases(tmp_path / "reports" / "junit.xml") == _cases(zoo / "whole.xml")
    assert ET.parse(tmp_path / "reports" / "junit.xml").getroot().get("tests") == "14"
