"""What reading a model's needs costs against onnxruntime opening it, on a generated tree ensemble.

The ``needs`` section (``python scripts/bench.py --sections needs``) runs
:func:`measure_needs` in a worker process and renders it.

The model is a scikit-learn-like ``ai.onnx.ml.TreeEnsembleClassifier`` followed
by ``ZipMap``, as skl2onnx exports a random forest: every tree node is an
element of a dozen ``ints``, ``floats`` and ``strings`` attributes, one protobuf
field each, so a ~200 MB model is tens of millions of fields in one node.

Measured, alternated round by round in one process:

(a) reading what packing needs: :func:`mgedump.model.modelfile.model_source`
    (does the model keep data outside, and where), what ``mgedump`` does
    before it opens the model;
(b) reading what verifying needs: :func:`mgedump.model.modelfile.external_locations`,
    what ``mgerun`` checks of a bundled model before it opens it;
(c) onnxruntime's session creation on the same file (``mgedump``'s session options).

Target: (a) / (c) and (b) / (c) <= 0.2.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import Check, Context, Table, at_most, fmt, fmt_ratio, mib, run_worker

TARGET = 0.2
BYTES_PER_TREE_NODE = 52  # about, in the saved model (depth 10, 3 classes): what sizes the trees for a wanted size


def write_tree_ensemble(path: str, nodes: int, *, features: int = 16, classes: int = 3, depth: int = 10) -> int:
    """A random forest of full binary trees of ``depth`` levels, ``nodes`` tree nodes in all (rounded to whole
    trees), as TreeEnsembleClassifier + ZipMap (ai.onnx.ml 1, ai.onnx 13): input ``X`` float [N, features], outputs
    ``label`` int64 [N] and ``probabilities`` seq(map(int64, tensor(float))). Returns the file's size."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(27)
    per_tree = 2**depth - 1
    trees = max(1, nodes // per_tree)
    node_ids = np.arange(per_tree, dtype=np.int64)
    leaf = node_ids >= per_tree // 2
    true_ids = np.where(leaf, 0, 2 * node_ids + 1)
    false_ids = np.where(leaf, 0, 2 * node_ids + 2)
    leaves = node_ids[leaf]
    total = trees * per_tree
    attrs: dict[str, Any] = {
        "nodes_treeids": np.repeat(np.arange(trees), per_tree).tolist(),
        "nodes_nodeids": np.tile(node_ids, trees).tolist(),
        "nodes_featureids": rng.integers(0, features, total).tolist(),
        "nodes_values": rng.standard_normal(total).astype(np.float32).tolist(),
        "nodes_modes": np.tile(np.where(leaf, "LEAF", "BRANCH_LEQ"), trees).tolist(),
        "nodes_truenodeids": np.tile(true_ids, trees).tolist(),
        "nodes_falsenodeids": np.tile(false_ids, trees).tolist(),
        "nodes_missing_value_tracks_true": np.zeros(total, dtype=np.int64).tolist(),
        "nodes_hitrates": np.ones(total, dtype=np.float32).tolist(),
        "class_treeids": np.repeat(np.arange(trees), len(leaves) * classes).tolist(),
        "class_nodeids": np.tile(np.repeat(leaves, classes), trees).tolist(),
        "class_ids": np.tile(np.arange(classes), trees * len(leaves)).tolist(),
        "class_weights": (rng.random(trees * len(leaves) * classes) / trees).astype(np.float32).tolist(),
    }
    forest = helper.make_node(
        "TreeEnsembleClassifier",
        ["X"],
        ["label", "scores"],
        name="forest",
        domain="ai.onnx.ml",
        classlabels_int64s=list(range(classes)),
        post_transform="NONE",
        **attrs,
    )
    zipmap = helper.make_node(
        "ZipMap",
        ["scores"],
        ["probabilities"],
        name="zipmap",
        domain="ai.onnx.ml",
        classlabels_int64s=list(range(classes)),
    )
    probabilities = helper.make_tensor_sequence_value_info("probabilities", 0, None)
    probabilities.type.sequence_type.elem_type.CopyFrom(
        helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, []))
    )
    graph = helper.make_graph(
        [forest, zipmap],
        "forest",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", features])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]), probabilities],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 1)], ir_version=8
    )
    onnx.save(model, path)
    return Path(path).stat().st_size


def measure_needs(folder: str, mb: float, runs: int) -> dict[str, Any]:
    """Generate a tree ensemble of about ``mb`` MB in ``folder`` and time (a), (b) and (c) of the module's docstring,
    alternated for ``runs`` rounds; per-round seconds and the medians of the ratios."""
    from mgedump.model.holders import native
    from mgedump.model.modelfile import external_locations, forget_scans, model_source
    from mgedump.model.runtime import open_session

    path = str(Path(folder) / "forest.onnx")
    began = time.perf_counter()
    size = write_tree_ensemble(path, int(mb * 1e6 / BYTES_PER_TREE_NODE))
    generated_s = time.perf_counter() - began

    def pack_needs() -> None:
        forget_scans()  # each step reads the file afresh, as one command does
        model_source(path, "model.onnx.data")

    def verify_needs() -> None:
        forget_scans()
        external_locations(path)

    def session() -> None:
        open_session(path)

    steps = {"pack_needs_s": pack_needs, "verify_needs_s": verify_needs, "session_s": session}
    rounds = []
    for run in range(runs):
        names = list(steps)
        names = names[run % 3 :] + names[: run % 3]
        entry = {}
        for name in names:
            start = time.perf_counter()
            steps[name]()
            entry[name] = time.perf_counter() - start
        rounds.append(entry)
    pack_ratio = statistics.median(r["pack_needs_s"] / r["session_s"] for r in rounds)
    verify_ratio = statistics.median(r["verify_needs_s"] / r["session_s"] for r in rounds)
    return {
        "size": size,
        "generated_s": generated_s,
        "native": native(),
        "rounds": rounds,
        "pack_ratio": pack_ratio,
        "verify_ratio": verify_ratio,
        "target": TARGET,
    }


def section(ctx: Context) -> Table:
    """Reading a big attribute-heavy model's needs (pack's and mgerun's) against onnxruntime opening it."""
    mb = 5.0 if ctx.quick else 200.0
    result = run_worker("needs", ctx.tmp, folder=str(ctx.tmp), mb=mb, runs=max(3, ctx.runs))
    table = Table(
        "Reading a model's needs",
        f"A generated TreeEnsembleClassifier + ZipMap of {mib(result['size'])} (`scripts/bench/needs.py`: every tree "
        "node is an element of a dozen ints, floats and strings attributes), in one worker process, alternated round "
        "by round: (a) `model_source`, what `mgedump` reads before it opens the model; (b) `external_locations`, what "
        "`mgerun` checks of a bundled model; (c) onnxruntime's session creation on the same file. Target: (a) / (c) "
        f"and (b) / (c) <= {result['target']}.",
        ["round", "(a) pack needs (s)", "(b) mgerun needs (s)", "(c) session (s)", "(a) / (c)", "(b) / (c)"],
    )
    for index, entry in enumerate(result["rounds"], 1):
        a, b, c = entry["pack_needs_s"], entry["verify_needs_s"], entry["session_s"]
        table.rows.append([str(index), fmt(a), fmt(b), fmt(c), fmt_ratio(a / c), fmt_ratio(b / c)])
    table.rows.append(
        ["**median**", "", "", "", f"**{fmt_ratio(result['pack_ratio'])}**", f"**{fmt_ratio(result['verify_ratio'])}**"]
    )
    for what, key in (("pack", "pack_ratio"), ("mgerun", "verify_ratio")):
        table.checks.append(
            Check(
                f"needs: {what} / session creation ({mib(result['size'])} tree ensemble)",
                f"<= {result['target']}",
                fmt_ratio(result[key]),
                at_most(result[key], result["target"]),
            )
        )
    if not result["native"]:
        table.notes.append("protobuf is not installed: attributes were walked in Python.")
    return table


# the functions of this file that run in a worker process (python scripts/bench.py --worker NAME ...)
WORKERS: dict[str, Callable[..., Any]] = {
    "needs": measure_needs,
}
