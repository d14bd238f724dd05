"""Helpers the tracing tests share: the test network, example batches, and comparing outputs."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

import mgedump.functional as F
import mgedump.module as M
from mgedump import Tensor, tensor
from mgedump.jit import TraceError, trace


class SmallCNN(M.Module):
    """Conv2d, BatchNorm2d, relu, pooling, Linear, softmax: the issue's test network."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = M.Conv2d(3, 8, 3, padding=1)
        self.bn1 = M.BatchNorm2d(8)
        self.conv2 = M.Conv2d(8, 16, 3, padding=1)
        self.bn2 = M.BatchNorm2d(16)
        self.fc = M.Linear(16 * 4 * 4, 10)

    def forward(self, x: Tensor) -> Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.avg_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return F.softmax(self.fc(F.flatten(x, 1)))


def make_cnn(seed: int = 0) -> SmallCNN:
    """A SmallCNN in eval mode with random weights and BatchNorm statistics that are not the identity."""
    np.random.seed(seed)
    net = SmallCNN().eval()
    for bn in (net.bn1, net.bn2):
        n = bn.num_features
        bn.running_mean = tensor(np.random.randn(n) * 0.1)
        bn.running_var = tensor(np.random.rand(n) + 0.5)
        bn.weight = tensor(np.random.rand(n) + 0.5)
        bn.bias = tensor(np.random.randn(n) * 0.1)
    return net


def batch(n: int = 2, seed: int = 1) -> Tensor:
    """n random 3x16x16 images in [0, 1)."""
    return tensor(np.random.default_rng(seed).random((n, 3, 16, 16), dtype=np.float32))


def flat(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def check_outputs(got: Any, expect: Any, name: str) -> None:
    """Same number of outputs, and each of the same shape, dtype and (within tolerance) values."""
    got, expect = flat(got), flat(expect)
    assert len(got) == len(expect), (name, f"{len(got)} output(s), expected {len(expect)}")
    for k, (g, e) in enumerate(zip(got, expect, strict=True)):
        g = g.numpy() if isinstance(g, Tensor) else np.asarray(g)
        e = e.numpy() if isinstance(e, Tensor) else np.asarray(e)
        assert g.shape == e.shape, (name, k, g.shape, e.shape)
        assert g.dtype == e.dtype, (name, k, g.dtype, e.dtype)
        tol = 1e-2 if g.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(
            g.astype(np.float64), e.astype(np.float64), rtol=tol, atol=tol, err_msg=f"{name} output {k}"
        )


def check_eager_and_traced(
    name: str, fn: Callable[..., Any], arrays: Sequence[np.ndarray], reference: Callable[..., Any] | None
) -> None:
    """Eager result == the numpy reference (when given) == each call of a trace, symbolic or not."""
    inputs = [tensor(a, a.dtype) for a in arrays]
    eager = fn(*inputs)
    if reference is not None:
        check_outputs(eager, reference(*arrays), f"{name} (eager vs numpy)")
    for symbolic in (False, True):
        f = trace(fn, symbolic=symbolic)
        check_outputs(f(*inputs), eager, f"{name} (first call, symbolic={symbolic})")
        check_outputs(f(*inputs), eager, f"{name} (compiled, symbolic={symbolic})")


@contextlib.contextmanager
def raises_trace_error(reason: str, detail: str = "") -> Iterator[pytest.ExceptionInfo[TraceError]]:
    """The block raises TraceError whose str is exactly MegEngine's ``trace error because <reason>``, and whose
    detail (also its exception note) matches the regex ``detail``."""
    with pytest.raises(TraceError) as caught:
        yield caught
    error = caught.value
    assert str(error) == f"trace error because {reason}", str(error)
    assert error.reason == reason and re.search(detail, error.detail), error.detail
    assert getattr(error, "__notes__", []) == ([error.detail] if error.detail else [])
