"""mgedump.tracing as a package: the stable import paths, and the layering its docstring documents."""

from __future__ import annotations

import importlib

import pytest

import mgedump
import mgedump.functional
import mgedump.jit
import mgedump.module
import mgedump.tracing

# bottom to top, as mgedump/tracing/__init__.py lists them: each module imports only modules before it
LAYERS = [
    "ops",
    "dispatch",
    "arguments",
    "functional",
    "random",
    "numpy_api",
    "tensor",
    "module",
    "graph",
    "dump",
    "jit",
]
# what the tracing modules other than dump may import from the tool
LOW_LEVEL = {"mgedump", "mgedump.model.runtime", "mgedump.model.session", "mgedump.base.errors", "mgedump.base.log"}


@pytest.mark.parametrize("name", ["functional", "module", "jit"])
def test_stable_paths_are_the_tracing_modules(name):
    alias = importlib.import_module(f"mgedump.{name}")
    real = importlib.import_module(f"mgedump.tracing.{name}")
    assert alias.__all__ == real.__all__
    for public in real.__all__:
        assert getattr(alias, public) is getattr(real, public), public
    assert getattr(mgedump, name) is alias  # mgedump.functional.relu works without importing it first


def test_names_users_and_docs_use():
    from mgedump import Tensor, tensor
    from mgedump.jit import TraceMismatchError, exclude_from_trace, trace
    from mgedump.tracing import jit
    from mgedump.tracing import tensor as tensor_module

    assert tensor is tensor_module.tensor and Tensor is tensor_module.Tensor
    assert trace is jit.trace and exclude_from_trace is jit.exclude_from_trace
    assert issubclass(TraceMismatchError, RuntimeError) and mgedump.jit.TraceMismatchError is TraceMismatchError
    assert mgedump.functional.relu(tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]
    assert isinstance(mgedump.module.Linear(2, 3), mgedump.module.Module)
    assert mgedump.tensor([1, 2]).tolist() == [1, 2]
    assert not hasattr(
        mgedump.tracing, "Tensor"
    )  # the package exports no tensor names (mgedump.tracing.tensor is the module)


@pytest.fixture(scope="module")
def graph():
    grimp = pytest.importorskip("grimp")  # installed with the test extras (import-linter)
    return grimp.build_graph("mgedump")


def _imports(graph, module: str) -> set[str]:
    return {m for m in graph.find_modules_directly_imported_by(module) if m.startswith("mgedump")}


def test_the_layers_are_those_documented(graph):
    tracing = {m for m in graph.modules if m.startswith("mgedump.tracing.")}
    assert tracing == {f"mgedump.tracing.{name}" for name in LAYERS}
    for i, name in enumerate(LAYERS):
        inside = {m for m in _imports(graph, f"mgedump.tracing.{name}") if m.startswith("mgedump.tracing")}
        allowed = {f"mgedump.tracing.{below}" for below in LAYERS[:i]}
        assert inside <= allowed, f"{name} imports {sorted(inside - allowed)}, which are not below it"
    assert _imports(graph, "mgedump.tracing") == {"mgedump.tracing.tensor"}  # registers Tensor, nothing else


def test_only_dump_uses_the_tool_beyond_its_low_level_modules(graph):
    for name in LAYERS:
        outside = {m for m in _imports(graph, f"mgedump.tracing.{name}") if not m.startswith("mgedump.tracing")}
        if name == "dump":
            assert outside and not any(m.startswith("mgedump.cli") for m in outside)
        else:
            assert outside <= LOW_LEVEL, f"{name} imports {sorted(outside - LOW_LEVEL)}"
    assert not graph.chain_exists("mgedump.tracing", "mgedump.cli", as_packages=True)
