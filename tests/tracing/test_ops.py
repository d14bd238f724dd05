"""mgedump.tracing.ops: the op table is covered by the eager-vs-traced tables; index normalisation."""

from __future__ import annotations

import numpy as np
import pytest

from mgedump import tensor
from mgedump.jit import trace
from mgedump.tracing.ops import OPS, index_key, normalize_index
from tests.tracing import test_functional, test_numpy_api


def test_every_op_is_checked_by_an_eager_vs_traced_case():
    issued: set[str] = set()
    for table in (test_functional.CASES, test_numpy_api.CASES):
        for fn, arrays, _ in table.values():
            f = trace(fn, symbolic=True)  # records without compiling
            f(*[tensor(a, a.dtype) for a in arrays])
            program = f._program
            issued |= {op.name for op in program.ops} | {program.effective(k).name for k in range(len(program.ops))}
    assert sorted(set(OPS) - issued) == []


@pytest.mark.parametrize(
    ("key", "shape"),
    [((1, ...), (3, 4, 5)), ((None, slice(None, None, -2)), (5,)), ((Ellipsis, -1), (2, 3)), (slice(-9, 9), (4,))],
)
def test_normalized_index_selects_what_numpy_does(key, shape):
    a = np.arange(int(np.prod(shape))).reshape(shape)
    normalized = normalize_index(key, shape)
    assert len([item for item in normalized if item[0] != "new"]) == len(shape)  # every axis has an entry
    np.testing.assert_array_equal(a[index_key(normalized)], a[key])


def test_normalize_index_refuses_what_cannot_be_traced():
    with pytest.raises(TypeError, match=r"index \[0, 1\] \(list\) is not supported"):
        normalize_index([0, 1], (3,))  # the functional layer turns lists into tensors first
    with pytest.raises(TypeError, match="not an integer or an integer tensor"):
        normalize_index(slice(0.5, 2), (3,))
    with pytest.raises(IndexError, match="single ellipsis"):
        normalize_index((..., ...), (3,))
    with pytest.raises(IndexError, match="too many indices for a tensor of rank 1: 2 were given"):
        normalize_index((0, 0), (3,))
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        normalize_index(3, (3,))
    with pytest.raises(TypeError, match="is not supported"):
        normalize_index(True, (3,))  # a bool is not an integer index
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        normalize_index(slice(0, 2, 0), (3,))
