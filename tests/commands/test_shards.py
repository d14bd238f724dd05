"""Shards: stable by each bundle's path relative to its folder, disjoint, their union the tree; adding a bundle
moves no other; --shard auto and auto/N read CI's variables and say which; --shard-durations balances."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mgedump.commands.shards import ENGINES, balanced, list_hash, resolve_shard, shard_of
from mgedump.commands.tree import Found, expand_tree, report_names
from mgedump.commands.verify_many import plan_runs
from mgedump.options import SpreadOptions
from tests.zoo import small_bundle, tree


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    """200 bundles in 10 subfolders."""
    root = tmp_path_factory.mktemp("zoo200")
    tree(root, small_bundle(tmp_path_factory.mktemp("one")), 200, 10)
    return root


def _shard(root: Path, spec: str, **spread) -> list[str]:
    plan = plan_runs([str(root)], spread=SpreadOptions(shard=spec, **spread), environ=spread.pop("environ", {}))
    return [str(Path(p).relative_to(root)) for p in plan.bundles]


@pytest.mark.parametrize("total", range(1, 8))
def test_shards_are_disjoint_and_cover_the_tree(zoo, total):
    every = _shard(zoo, "1/1")
    assert len(every) == 200 and len({p.split("/")[0] for p in every}) == 10
    shards = [_shard(zoo, f"{i}/{total}") for i in range(1, total + 1)]
    assert sum(len(s) for s in shards) == 200
    assert sorted(p for s in shards for p in s) == sorted(every)
    if total > 1:
        assert all(shards), "a shard of 200 bundles is empty"


@pytest.mark.parametrize("total", range(1, 8))
def test_adding_a_bundle_moves_no_other(zoo, tmp_path, total):
    import shutil

    shutil.copytree(zoo, tmp_path / "zoo")
    before = {i: set(_shard(tmp_path / "zoo", f"{i}/{total}")) for i in range(1, total + 1)}
    shutil.copyfile(zoo / "f0" / "b000.mgetest", tmp_path / "zoo" / "f3" / "new.mgetest")
    after = {i: set(_shard(tmp_path / "zoo", f"{i}/{total}")) for i in range(1, total + 1)}
    added = [i for i in after if after[i] - before[i]]
    assert len(added) == 1 and after[added[0]] - before[added[0]] == {"f3/new.mgetest"}
    assert all(before[i] <= after[i] for i in before)


def test_the_shard_is_the_hash_of_the_key_alone():
    """The same in every process on every machine (not Python's hash(), salted per process): pinned values."""
    keys = ["f1/b001.mgetest", "b0.mgetest", "vision/resnet.mgetest", "a/\u00fc.mgetest"]
    assert [shard_of(key, 4) for key in keys] == [1, 2, 2, 1]
    assert [shard_of(key, 7) for key in keys] == [7, 3, 3, 5]
    assert {shard_of(f"b{k}.mgetest", 3) for k in range(50)} == {1, 2, 3}


@pytest.mark.parametrize(
    ("spec", "environ", "index", "total", "source"),
    [
        ("2/4", {}, 2, 4, "--shard 2/4"),
        ("auto", {"CI_NODE_INDEX": "3", "CI_NODE_TOTAL": "5"}, 3, 5, "GitLab's CI_NODE_INDEX=3 and CI_NODE_TOTAL=5"),
        ("auto/4", {"JOB_COMPLETION_INDEX": "0"}, 1, 4, "Kubernetes' JOB_COMPLETION_INDEX=0, counted from 0"),
        ("auto/4", {"JOB_COMPLETION_INDEX": "3", "CI_NODE_INDEX": "1"}, 4, 4, "Kubernetes' JOB_COMPLETION_INDEX=3"),
        ("auto/4", {"CI_NODE_INDEX": "2"}, 2, 4, "GitLab's CI_NODE_INDEX=2"),
        # the other engines, each with its own base (their documentation: CircleCI, Buildkite and Bitbucket count
        # from 0, Azure Pipelines from 1)
        ("auto", {"CIRCLE_NODE_INDEX": "0", "CIRCLE_NODE_TOTAL": "4"}, 1, 4, "CircleCI's CIRCLE_NODE_INDEX=0 and"),
        ("auto", {"BUILDKITE_PARALLEL_JOB": "3", "BUILDKITE_PARALLEL_JOB_COUNT": "4"}, 4, 4, "Buildkite's"),
        ("auto", {"SYSTEM_JOBPOSITIONINPHASE": "1", "SYSTEM_TOTALJOBSINPHASE": "4"}, 1, 4, "Azure Pipelines' SYSTEM_"),
        ("auto", {"BITBUCKET_PARALLEL_STEP": "1", "BITBUCKET_PARALLEL_STEP_COUNT": "2"}, 2, 2, "Bitbucket's"),
        ("auto/4", {"CIRCLE_NODE_INDEX": "2"}, 3, 4, "CircleCI's CIRCLE_NODE_INDEX=2, counted from 0"),
        # GitLab without parallel: sets CI_NODE_TOTAL=1 and no index; no CI at all: every bundle, with a note
        ("auto", {"CI_NODE_TOTAL": "1"}, 1, 1, "GitLab's CI_NODE_TOTAL=1 and no CI_NODE_INDEX"),
        ("auto", {}, 1, 1, "no CI index set"),
        ("auto/1", {}, 1, 1, "no CI index set"),
    ],
)
def test_where_the_shard_comes_from(spec, environ, index, total, source):
    from mgedump.base.naming import spoken_as

    with spoken_as(lambda name, value=None: "--" + name.replace("_", "-")):
        shard = resolve_shard(spec, environ)
    assert (shard.index, shard.total) == (index, total) and shard.source.startswith(source)
    if source == "no CI index set":  # the note names every variable looked for
        assert shard.note is not None and all(e.index in shard.note and e.total in shard.note for e in ENGINES)
        assert "JOB_COMPLETION_INDEX" in shard.note


def test_no_ci_index_checks_every_bundle_with_a_note(zoo, mgerun, monkeypatch):
    for engine in ENGINES:
        monkeypatch.delenv(engine.index, raising=False)
        monkeypatch.delenv(engine.total, raising=False)
    result = mgerun(zoo, "--shard", "auto", "--iter", "1", "-q", "--no-assert")
    assert result.code == 0, result.err
    [note] = [line for line in result.err.splitlines() if line.startswith("mgerun: note: ")]
    assert "no CI index set (looked for JOB_COMPLETION_INDEX" in note and note.endswith("shard 1 of 1, every bundle")
    assert "by hash: 200 of 200 bundle(s)" in result.err


@pytest.mark.parametrize(
    ("spec", "environ", "message"),
    [
        ("auto/3", {}, "--shard auto/3 reads this job's index, and none is set (looked for JOB_COMPLETION_INDEX"),
        ("auto", {"CI_NODE_INDEX": "1"}, "--shard auto: GitLab's CI_NODE_INDEX is set and CI_NODE_TOTAL is not"),
        ("auto", {"CI_NODE_TOTAL": "3"}, "--shard auto: GitLab's CI_NODE_TOTAL is 3 and CI_NODE_INDEX is not set"),
        ("auto", {"CIRCLE_NODE_INDEX": "4", "CIRCLE_NODE_TOTAL": "4"}, "shard 5 is not one of 1 to 4"),
        (
            "auto",
            {"CI_NODE_INDEX": "x", "CI_NODE_TOTAL": "2"},
            "CI_NODE_INDEX takes a whole number in ASCII digits; got 'x'",
        ),
        ("auto/3", {"JOB_COMPLETION_INDEX": "3"}, "shard 4 is not one of 1 to 3"),
        ("auto/3", {"CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "4"}, "says 3 shards, CI_NODE_TOTAL says 4"),
        ("0/4", {}, "shard 0 is not one of 1 to 4"),
        ("5/4", {}, "shard 5 is not one of 1 to 4"),
        ("1/0", {}, "the count of shards must be 1 to"),
        ("half", {}, "--shard takes I/N (shard I of N, from 1), auto or auto/N; got 'half'"),
        # numbers are ASCII digits, bounded: no traceback past Python's integer-string limit, no '²' (isdigit())
        ("1/" + "9" * 5000, {}, "--shard I/N takes a whole number in ASCII digits; got '999"),
        ("auto", {"CI_NODE_INDEX": "²", "CI_NODE_TOTAL": "2"}, "CI_NODE_INDEX takes a whole number in ASCII digits"),
        ("auto", {"CI_NODE_INDEX": "9" * 5000, "CI_NODE_TOTAL": "2"}, "(5000 characters)"),
        ("１/２", {}, "--shard I/N takes a whole number in ASCII digits; got '１'"),
        ("auto/100001", {}, "the count of shards must be 1 to 100000, got 100001"),  # not "neither is set"
    ],
)
def test_a_shard_that_cannot_be_resolved_is_one_line(spec, environ, message, mgerun, tmp_path, monkeypatch):
    for name in ["JOB_COMPLETION_INDEX", *(e.index for e in ENGINES), *(e.total for e in ENGINES)]:
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    result = mgerun(tmp_path, "--shard", spec)
    assert result.code == 2 and result.out == ""
    [line] = result.err.strip().splitlines()
    assert line.startswith("mgerun: error: ") and message in line


def test_mgerun_says_which_shard_and_the_report_records_it(zoo, mgerun, tmp_path, monkeypatch):
    monkeypatch.setenv("CI_NODE_INDEX", "2")
    monkeypatch.setenv("CI_NODE_TOTAL", "7")
    result = mgerun(zoo, "--shard", "auto", "--iter", "1", "--report-json", tmp_path / "r.json", "-q")
    assert result.code == 0, result.err
    chosen = len(_shard(zoo, "2/7"))
    assert (
        f"mgerun: shard 2 of 7 (GitLab's CI_NODE_INDEX=2 and CI_NODE_TOTAL=7), by hash: {chosen} of 200 bundle(s)"
        in result.err.splitlines()
    )
    document = json.loads((tmp_path / "r.json").read_text())
    assert document["shard"] == {
        "index": 2, "total": 7, "from": "GitLab's CI_NODE_INDEX=2 and CI_NODE_TOTAL=7", "by": "hash",
        "bundles": chosen, "of": 200, "list": list_hash(report_names(expand_tree([str(zoo)]))),
    }  # fmt: skip
    assert len(document["bundles"]) == chosen


def test_balancing_by_durations_evens_the_load():
    found = [Found(f"b{k}.mgetest", f"b{k}.mgetest") for k in range(12)]
    names = [f.name for f in found]
    durations = {f"b{k}": float(10 if k < 2 else 1) for k in range(10)}  # two slow, eight quick, two unknown
    shards = balanced(found, names, 2, durations)
    load = {s: sum(durations.get(n, 1.6) for n, t in zip(names, shards, strict=True) if t == s) for s in (1, 2)}
    assert shards[0] != shards[1]  # the two slow ones apart
    assert abs(load[1] - load[2]) <= 2.6
    assert shards[10] == shard_of("b10.mgetest", 2) and shards[11] == shard_of("b11.mgetest", 2)  # unknown: hashed
    assert balanced(found, names, 2, durations) == shards  # every machine computes the same


def test_shard_durations_reads_an_earlier_report(zoo, mgerun, tmp_path):
    report = tmp_path / "earlier.json"
    assert mgerun(zoo / "f1", "--iter", "1", "--report-json", report, "-q").code == 0
    shards = [_shard(zoo, f"{i}/3", shard_durations=str(report)) for i in (1, 2, 3)]
    assert sorted(p for s in shards for p in s) == sorted(_shard(zoo, "1/1"))
    result = mgerun(zoo, "--shard", "1/3", "--shard-durations", report, "--iter", "1", "-q")
    assert f"by durations of {report}" in result.err


def test_a_durations_report_that_is_not_one_is_one_line(zoo, mgerun, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(
        '{"report_version": 2, "exit_code": 0, "bundles": [{"source": "x", "exit_code": 0, "seconds": "long"}]}'
    )
    result = mgerun(zoo, "--shard", "1/2", "--shard-durations", bad)
    assert result.code == 2
    assert result.err.strip() == (
        f'mgerun: error: --shard-durations report {bad}: bundles[0].seconds: expected a finite number or null, got "long"'
    )


def test_shard_durations_needs_shard(zoo, mgerun, tmp_path):
    result = mgerun(zoo, "--shard-durations", tmp_path / "x.json")
    assert result.code == 2 and "--shard-durations balances --shard: give that too" in result.err


def test_a_bundle_is_named_by_its_path_below_the_folder_given(zoo, monkeypatch):
    """docs/reports.md#a-bundle: however the folder is spelled, the same names; given one level down, other names
    (so --shard-durations wants the folder given as the run that wrote its report gave it, docs/verify.md)."""
    spelled = [str(zoo), f"{zoo}/", "./" + zoo.name]
    monkeypatch.chdir(zoo.parent)
    names = [plan_runs([path]).names for path in spelled]
    assert names[0] == names[1] == names[2]
    assert names[0][:2] == ("f0/b000", "f0/b010") and len(names[0]) == 200
    below = plan_runs([str(zoo / "f1")]).names
    assert below[:2] == ("b001", "b011")  # the same bundles, named below f1
    alone = plan_runs([str(zoo / "f1" / "b001.mgetest"), str(zoo / "f2" / "b002.mgetest")]).names
    assert alone == ("b001", "b002")  # a bundle given alone: its file name
