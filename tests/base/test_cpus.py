"""The CPUs this process may use: its affinity, at most its cgroup's CPU quota rounded up (a pod's limit, ``docker
--cpus``), read from a fake cgroup tree; ``taskset -c 0`` gives fitting one core and ``--jobs auto`` one worker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from mgedump.base.cpus import cpu_quota, usable_cpus
from tests.support import packed_once, script


def _cgroup(tmp_path, membership: str, files: dict[str, str]):
    """A fake cgroup mount (``root``) and a fake ``/proc/self/cgroup`` (``membership``)."""
    root = tmp_path / "cgroup"
    root.mkdir()
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(membership)
    return str(root), str(proc)


def test_a_v2_quota_at_the_mount_is_rounded_up(tmp_path):
    """A container's own cgroup at the mount (``docker --cpus 1.5``): 2 CPUs of the 8 it may run on."""
    root, proc = _cgroup(tmp_path, "0::/\n", {"cpu.max": "150000 100000\n"})
    assert cpu_quota(root, proc) == 1.5
    assert usable_cpus(root, proc, affinity=8) == 2
    assert usable_cpus(root, proc, affinity=1) == 1  # the affinity when it is less


def test_the_least_quota_along_the_cgroups_path(tmp_path):
    """A pod's limit on its parent folder, none on the container's own: the parent's holds."""
    root, proc = _cgroup(
        tmp_path,
        "0::/kubepods/pod1/c1\n",
        {"kubepods/pod1/cpu.max": "300000 100000", "kubepods/pod1/c1/cpu.max": "max 100000", "cpu.max": "max"},
    )
    assert cpu_quota(root, proc) == 3.0 and usable_cpus(root, proc, affinity=64) == 3


def test_a_path_the_mount_does_not_hold_reads_the_mount(tmp_path):
    """Inside a container /proc/self/cgroup may name the host's folder: the container's mount is its cgroup."""
    root, proc = _cgroup(tmp_path, "0::/docker/abc\n", {"cpu.max": "50000 100000"})
    assert usable_cpus(root, proc, affinity=4) == 1


def test_a_v1_quota(tmp_path):
    root, proc = _cgroup(
        tmp_path,
        "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n0::/\n",
        {"cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "250000\n", "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000"},
    )
    assert cpu_quota(root, proc) == 2.5 and usable_cpus(root, proc, affinity=16) == 3


@pytest.mark.parametrize(
    ("membership", "files"),
    [
        ("0::/\n", {"cpu.max": "max 100000"}),  # v2, no quota
        ("1:cpu:/\n", {"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"}),  # v1, no quota
        ("0::/\n", {"cpu.max": "nonsense\n"}),
        ("0::/\n", {"cpu.max": "inf 100000"}),
        ("0::/\n", {"cpu.max": "100000 0"}),
        ("0::/\n", {}),  # the root cgroup: no cpu.max
        ("garbage", {"cpu.max": "100000 100000"}),  # no line of the shape ID:CONTROLLERS:PATH
    ],
)
def test_no_quota_is_the_affinity(tmp_path, membership, files):
    root, proc = _cgroup(tmp_path, membership, files)
    assert cpu_quota(root, proc) is None and usable_cpus(root, proc, affinity=6) == 6


def test_no_cgroup_to_read_is_the_affinity(tmp_path):
    assert usable_cpus(str(tmp_path / "none"), str(tmp_path / "none.txt"), affinity=3) == 3


def test_this_process(tmp_path):
    """Here, read only: never more than the CPUs it may run on."""
    assert 1 <= usable_cpus() <= len(os.sched_getaffinity(0))


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is not installed")
def test_taskset_one_cpu_gives_fitting_one_thread_and_jobs_auto_one_worker(tmp_path):
    """``taskset -c 0 mgerun --fitting`` times no setting of more threads than the one CPU it may use (it timed
    2-thread settings: os.cpu_count()), and ``--jobs auto`` starts one worker."""
    bundle = packed_once("cnn.onnx", "-d", "#rand(0,1)")
    first = sorted(os.sched_getaffinity(0))[0]
    taskset = [shutil.which("taskset") or "taskset", "-c", str(first)]
    fitted = subprocess.run(
        [*taskset, script("mgerun"), str(bundle), "--fitting", "--fitting-budget", "1", "--iter", "1",
         "--report-json", str(tmp_path / "r.json")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert fitted.returncode == 0, fitted.stderr
    rows = json.loads((tmp_path / "r.json").read_text())["bundles"][0]["fitting"]["rows"]
    assert {row["threads"] for row in rows} <= {1, None}, rows  # None: onnxruntime's defaults
    jobs = subprocess.run(
        [*taskset, script("mgerun"), str(bundle), "--jobs", "auto", "--iter", "1", "--report-json",
         str(tmp_path / "j.json")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert jobs.returncode == 0, jobs.stderr
    assert json.loads((tmp_path / "j.json").read_text())["jobs"]["workers"] == 1
