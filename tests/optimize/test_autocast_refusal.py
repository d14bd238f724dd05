"""The float16 search's refusal: a ranking that flips is told from an error, and the reordering op is named."""

from __future__ import annotations

from mgedump.optimize import autocast_refusal, autocast_trials


def test_a_ranking_that_flips_is_told_from_an_error():
    """A detector's TopK picks boxes by score: float16 can reorder near-equal scores. The values then match as a set
    and not in order: that is a flipped ranking, and the TopK on the way to the output is the one named."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Conv", ["x", "W"], ["scores4"], name="conv"),
        helper.make_node("Flatten", ["scores4"], ["scores"], name="flat"),
        helper.make_node("TopK", ["scores", "k"], ["top", "index"], name="topk"),
    ]
    graph = helper.make_graph(
        nodes,
        "detector",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("top", TensorProto.FLOAT, [1, 3])],
        initializer=[
            numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "W"),
            numpy_helper.from_array(np.array([3], np.int64), "k"),
        ],
    )
    model = helper.make_model(graph)
    assert autocast_refusal.reordering_between(model, "conv", "top").name == "topk"
    want = {"top": np.array([[0.9, 0.8, 0.7]], np.float32)}
    flipped = autocast_trials.Trial({}, False, model, "", None, [{}], [{"top": want["top"][:, [1, 0, 2]]}], [want], 1)
    wrong = autocast_trials.Trial({}, False, model, "", None, [{}], [{"top": want["top"] + 0.5}], [want], 1)
    assert autocast_refusal.flips(flipped, "top", 0, 1e-2) and not autocast_refusal.flips(wrong, "top", 0, 1e-2)
