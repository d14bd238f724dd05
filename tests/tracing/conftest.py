"""Fixtures of the tracing tests."""

from __future__ import annotations

import pytest

from tests.tracing.support import SmallCNN, make_cnn


@pytest.fixture(scope="module")
def cnn() -> SmallCNN:
    """The test network with seed 0 (shared by a test module: do not change its weights)."""
    return make_cnn()
