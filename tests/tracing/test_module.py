"""mgedump.tracing.module: parameter names and kinds, state dicts, modes, Sequential."""

from __future__ import annotations

import numpy as np
import pytest

import mgedump.module as M
from mgedump import Tensor, tensor
from tests.tracing.support import SmallCNN, batch, make_cnn


def test_parameters_and_buffers_are_named_by_attribute_path(cnn):
    names = [n for n, _ in cnn.named_parameters()]
    assert names == [
        "conv1.weight",
        "conv1.bias",
        "bn1.weight",
        "bn1.bias",
        "conv2.weight",
        "conv2.bias",
        "bn2.weight",
        "bn2.bias",
        "fc.weight",
        "fc.bias",
    ]
    assert [n for n, _ in cnn.named_buffers()] == [
        "bn1.running_mean",
        "bn1.running_var",
        "bn2.running_mean",
        "bn2.running_var",
    ]
    assert all(t.name == n for n, t in cnn.named_tensors())
    assert [n for n, _ in cnn.named_modules()] == ["", "conv1", "bn1", "conv2", "bn2", "fc"]
    assert len(list(cnn.parameters())) == 10 and len(list(cnn.buffers())) == 4


def test_module_state_dict_roundtrip(cnn):
    other = make_cnn(seed=5)
    x = batch()
    assert not np.allclose(other(x).numpy(), cnn(x).numpy())
    other.load_state_dict(cnn.state_dict())
    np.testing.assert_array_equal(other(x).numpy(), cnn(x).numpy())
    assert other.bn1.running_mean.name == "bn1.running_mean"
    with pytest.raises(KeyError, match="missing"):
        other.load_state_dict({"fc.weight": np.zeros((10, 256))})
    with pytest.raises(ValueError, match="shape"):
        other.load_state_dict({"fc.weight": np.zeros((3, 3))}, strict=False)
    training = SmallCNN()(x)  # training mode: BatchNorm normalises by the batch's statistics, as MegEngine
    assert training.shape == (2, 10) and np.isfinite(training.numpy()).all()


def test_modes_and_sequential():
    np.random.seed(0)
    seq = M.Sequential(M.Linear(3, 4), M.ReLU(), M.Linear(4, 2, bias=False), M.Softmax(axis=1))
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight"]
    assert seq[2].bias is None and len(seq) == 4 and seq.training
    assert not seq.eval().training and not seq[0].training and seq.train().training
    x = tensor(np.random.rand(5, 3))
    w0, b0, w2 = (t.numpy() for t in seq.parameters())
    h = np.maximum(x.numpy() @ w0.T + b0, 0) @ w2.T
    e = np.exp(h - h.max(axis=1, keepdims=True))
    np.testing.assert_allclose(seq(x).numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    outer = M.Sequential({"body": seq})
    assert [n for n, _ in outer.named_parameters()][0] == "body.0.weight" and seq[0].weight.name == "body.0.weight"
    with pytest.raises(TypeError, match="Sequential takes modules"):
        M.Sequential(lambda x: x)


def test_attributes_before_super_init_and_forward():
    class Early(M.Module):  # MegEngine's XORNet sets plain attributes first
        def __init__(self):
            self.mid_dim = 3
            self.w = Tensor([1.0, 2.0, 3.0])
            super().__init__()
            self.fc = M.Linear(self.mid_dim, 2)

        def forward(self, x):
            return self.fc(x * self.w)

    net = Early()
    assert net.mid_dim == 3 and [n for n, _ in net.named_parameters()] == ["w", "fc.weight", "fc.bias"]
    assert net(tensor(np.ones((4, 3), np.float32))).shape == (4, 2)
    with pytest.raises(NotImplementedError, match="has no forward"):
        M.Module()(tensor([1.0]))
    with pytest.raises(ValueError, match="divisible by groups"):
        M.Conv2d(3, 8, 3, groups=2)
