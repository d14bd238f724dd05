"""mgedump.tracing.tensor: the public Tensor and tensor(): dtype policy, values, immutability, traced copies."""

from __future__ import annotations

import numpy as np
import pytest

import mgedump
from mgedump import Tensor, tensor
from mgedump.jit import trace
from mgedump.tracing.dispatch import ORIGIN_CONST


def test_tensor_basics_and_dtype_policy():
    t = tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.dtype == np.float32 and t.shape == (2, 2) and t.ndim == 2 and t.size == 4 and len(t) == 2
    assert tensor([1, 2]).dtype == np.int32 and tensor(np.arange(3)).dtype == np.int32
    assert tensor([1, 2], dtype=np.int64).dtype == np.int64 and tensor([True]).dtype == np.bool_
    assert tensor(np.ones(2, np.float16)).dtype == np.float16
    assert (t + 1).dtype == np.float32 and (tensor([1]) + 1.5).dtype == np.float64  # numpy's promotion
    assert t[1, 0].item() == 3.0 and float(t[0, 1]) == 2.0 and int(t.sum()) == 10 and bool(t[0, 0])
    assert [row.numpy().tolist() for row in t] == [[1.0, 2.0], [3.0, 4.0]]
    assert "Tensor([[1., 2.]," in repr(t)
    a = np.ones(3, np.float32)
    u = tensor(a)
    a[0] = 5  # tensor() copies
    assert u.numpy().tolist() == [1, 1, 1]
    n = u.numpy()
    n[0] = 7  # numpy() copies
    assert u.numpy().tolist() == [1, 1, 1]
    with pytest.raises(TypeError, match="immutable"):
        u[0] = 1
    assert u[tensor([0, 1])].numpy().tolist() == [1, 1]  # advanced indexing
    with pytest.raises(TypeError, match="a bool as an index"):
        u[True]
    with pytest.raises(IndexError):
        u[3]
    with pytest.raises(ValueError, match="cannot reshape"):
        u.reshape(2, 2)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(u)
    with pytest.raises(TypeError, match="bool tensors"):
        tensor([1, 2]) & tensor([3, 1])
    with pytest.raises(TypeError, match="complex"):
        t + 1j
    assert isinstance(np.cumsum(u), np.ndarray)  # unsupported numpy function outside a trace: plain numpy
    assert {t: 1}[t] == 1
    assert len({tensor([1]), tensor([1])}) == 2  # hashed by identity, not by value


def test_tensor_refuses_other_data_and_reads_need_one_element():
    with pytest.raises(TypeError, match="bool, integer or floating-point data, not <U1"):
        tensor(["a"])
    with pytest.raises(TypeError, match="complex"):
        tensor([1j])
    with pytest.raises(ValueError, match=r"item\(\) needs a tensor with one element; this one has shape \(2,\)"):
        tensor([1, 2]).item()
    with pytest.raises(TypeError, match="0-d"):
        len(tensor(1.0))
    assert tensor(3).item() == 3 and tensor([[1, 2]]).tolist() == [[1, 2]]


def test_methods_and_names():
    t = Tensor(np.arange(6.0).reshape(2, 3), name="w")
    assert t.name == "w" and "name='w'" in repr(t)
    assert t.T.shape == (3, 2) and t.transpose((1, 0)).shape == (3, 2) and t.reshape((3, 2)).shape == (3, 2)
    assert t.flatten().tolist() == [0, 1, 2, 3, 4, 5] and t.astype(np.int32).dtype == np.int32
    assert t.clip(1, 4).tolist() == [[1, 1, 2], [3, 4, 4]] and t[:1].squeeze().shape == (3,)
    assert t.argmax().item() == 5 and t.argmin(axis=1).tolist() == [0, 0]
    assert t.prod(axis=1).tolist() == [0, 60] and t.max(axis=0, keepdims=True).shape == (1, 3)
    assert (+t) is t and (-t).tolist()[1] == [-3, -4, -5] and abs(-t).tolist() == t.tolist()
    assert np.asarray(t).dtype == np.float32 and np.asarray(t, dtype=np.float64).dtype == np.float64


def test_tensor_of_a_tensor_copies_eagerly_and_is_traced_inside_a_trace():
    x = tensor([1.0, 2.0])
    y = Tensor(x, np.int32)
    assert y.dtype == np.int32 and y.tolist() == [1, 2] and y._data is not x._data

    seen = {}

    @trace
    def f(v):
        copy = Tensor(v)  # an operation of the graph (identity), not a constant of v's first value
        seen["vid"], seen["origin"] = copy._vid, tensor([0.0])._origin
        return copy * 2

    assert f(tensor([1.0])).tolist() == [2.0]
    assert f(tensor([5.0])).tolist() == [10.0]
    assert seen["vid"] is not None and seen["origin"] == ORIGIN_CONST
    assert f._program.ops[0].name == "identity"


def test_repr_of_a_value_not_computed_yet():
    seen = {}

    @trace(symbolic=True)
    def f(x):
        seen["repr"] = repr(x + 1)
        return x

    f(tensor([1.0]))
    assert seen["repr"] == "Tensor(<no value yet>, shape=(1,), dtype=float32)"


def test_the_package_makes_tensors_and_the_submodule_stays_a_module():
    import mgedump.tracing.tensor as tensor_module

    assert mgedump.tensor is tensor_module.tensor and mgedump.Tensor is tensor_module.Tensor
    assert mgedump.tensor([1.5]).dtype == np.float32 and isinstance(mgedump.Tensor([1]), Tensor)
    assert tensor_module.__all__ == ["Parameter", "Tensor", "tensor"]
