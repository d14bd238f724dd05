"""Small model zoos for the tests of many bundles (shards, jobs, merged reports, the pytest plugin): real bundles
packed from the samples, copied into trees; a bundle that fails its check, one that is not a bundle, and one that
runs until it is killed (to crash a worker)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np

from tests.shared import copy_of, made_once
from tests.support import packed_once, rewrite_bundle, run_ok


def small_bundle(folder: Path, name: str = "gray.mgetest") -> Path:
    """A bundle of samples/gray.onnx with one test case, in ``folder`` (copied there once)."""
    target = folder / name
    if not target.exists():
        copy_of(packed_once("gray.onnx", "-d", "#rand(0,255)"), target)
    return target


def two_case_bundle(folder: Path, name: str = "cnn.mgetest") -> Path:
    """A bundle of samples/cnn.onnx with two test cases, in ``folder`` (copied there once)."""
    target = folder / name
    if not target.exists():
        copy_of(packed_once("cnn.onnx", "-d", "#rand(0,1)", "-d", "#rand(0,2)"), target)
    return target


def failing_bundle(good: Path, out: Path) -> Path:
    """A copy of ``good`` whose expected output is off by 0.5: its first test case fails its check."""
    from mgedump.bundle.tensorproto import decode, encode

    def shift(names, manifest, members):
        array, name = decode(members["test_data_set_0/output_0.pb"])
        members["test_data_set_0/output_0.pb"] = encode(array + np.float32(0.5), name)

    out.parent.mkdir(parents=True, exist_ok=True)
    return rewrite_bundle(good, out, shift, fix_hashes=True)


def tree(root: Path, bundle: Path, count: int, folders: int) -> list[Path]:
    """``count`` copies of ``bundle`` spread over ``folders`` subfolders of ``root`` (``f3/b017.mgetest``)."""
    made = []
    for k in range(count):
        target = root / f"f{k % folders}" / f"b{k:03d}.mgetest"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(bundle, target)
        made.append(target)
    return made


def slow_bundle(folder: Path, name: str = "slow.mgetest") -> Path:
    """A bundle whose model loops a [256, 256] MatMul a million times: it runs until it is killed. Packed with one
    iteration; then the trip count is raised in the bundled model (its hashes fixed)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def model(trips: int) -> onnx.ModelProto:
        body = helper.make_graph(
            [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("MatMul", ["v", "W"], ["v_out"])],
            "body",
            [helper.make_tensor_value_info("i", TensorProto.INT64, []),
             helper.make_tensor_value_info("c", TensorProto.BOOL, []),
             helper.make_tensor_value_info("v", TensorProto.FLOAT, [256, 256])],
            [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
             helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [256, 256])],
        )  # fmt: skip
        weight = numpy_helper.from_array((np.eye(256) * 0.5).astype(np.float32), "W")
        graph = helper.make_graph(
            [helper.make_node("Loop", ["M", "cond", "x"], ["y"], body=body)],
            "slow",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 256])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 256])],
            initializer=[
                numpy_helper.from_array(np.array(trips, np.int64), "M"),
                numpy_helper.from_array(np.array(True), "cond"),
                weight,
            ],
        )
        made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        made.ir_version = 8
        return made

    def make(folder: Path) -> None:
        quick = folder / "quick_loop.onnx"
        onnx.save(model(1), str(quick))
        run_ok("mgedump", quick, "-d", "#rand(0,1)", "-o", folder / "quick.mgetest", "-q")
        slow = model(1_000_000).SerializeToString()
        rewrite_bundle(
            folder / "quick.mgetest",
            folder / "slow.mgetest",
            lambda n, m, members: members.update({"model.onnx": slow}),
            fix_hashes=True,
        )

    return copy_of(made_once("a bundle of a million 256x256 MatMul", make) / "slow.mgetest", folder / name)


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if int(fields[1]) == pid and b"spawn_main" in cmdline:
            found.append(int(entry))
    return found


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kill_busy_worker(process: subprocess.Popen, cpu_s: float = 1.5, timeout: float = 120.0) -> int | None:
    """Kill (SIGKILL) the first worker process of ``process`` (or of its descendants) that has used ``cpu_s``
    seconds of CPU: the one running the slow bundle. Returns its pid (None: ``process`` ended first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        parents = [process.pid, *_children_any(process.pid)]
        for parent in parents:
            for worker in _children(parent):
                if _cpu_seconds(worker) >= cpu_s:
                    os.kill(worker, signal.SIGKILL)
                    return worker
        time.sleep(0.2)
    return None


def _children_any(pid: int) -> list[int]:
    """Every process whose parent is ``pid`` (pytest-xdist's workers, say)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except OSError:
                continue
    return found


def looped_bundle(folder: Path, trips: int, name: str = "loop.mgetest") -> Path:
    """A bundle whose model multiplies a [128, 128] input by the identity ``trips`` times in a Loop: the same outputs
    (its check passes) for any ``trips``, each trip more work. Packed with one trip; then the trip count is set in
    the bundled model (its hashes fixed), so that every copy has the same test case and bundle name."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def model(count: int) -> onnx.ModelProto:
        body = helper.make_graph(
            [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("MatMul", ["v", "W"], ["v_out"])],
            "body",
            [helper.make_tensor_value_info("i", TensorProto.INT64, []),
             helper.make_tensor_value_info("c", TensorProto.BOOL, []),
             helper.make_tensor_value_info("v", TensorProto.FLOAT, [128, 128])],
            [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
             helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [128, 128])],
        )  # fmt: skip
        graph = helper.make_graph(
            [helper.make_node("Loop", ["M", "cond", "x"], ["y"], body=body)],
            "looped",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [128, 128])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [128, 128])],
            initializer=[
                numpy_helper.from_array(np.array(count, np.int64), "M"),
                numpy_helper.from_array(np.array(True), "cond"),
                numpy_helper.from_array(np.eye(128, dtype=np.float32), "W"),
            ],
        )
        made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        made.ir_version = 8
        return made

    def make(where: Path) -> None:
        one = where / "loop.onnx"
        onnx.save(model(1), str(one))
        run_ok("mgedump", one, "-d", "#rand(0,1)", "-o", where / "loop.mgetest", "-q")
        if trips != 1:
            looped = model(trips).SerializeToString()
            rewrite_bundle(
                where / "loop.mgetest",
                where / f"loop{trips}.mgetest",
                lambda n, m, members: members.update({"model.onnx": looped}),
                fix_hashes=True,
            )

    made = made_once(f"a bundle looping a [128, 128] MatMul {trips} times", make)
    return copy_of(made / ("loop.mgetest" if trips == 1 else f"loop{trips}.mgetest"), folder / name)
