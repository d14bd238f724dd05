"""MegEngine's naming in a dump: Module.name, operations scoped by module, tensors named by the user or by
their module's path, modules in containers, repeated operators numbered; each dump run on onnxruntime."""

from __future__ import annotations

import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import mgedump.functional as F
import mgedump.module as M
from mgedump import Parameter, Tensor, tensor
from mgedump.jit import trace

X = np.arange(6, dtype=np.float32).reshape(2, 3) / 7


def dumped(fn, **keywords):
    """Trace fn on X with capture_as_const, dump it as MegEngine's naming tests do; the model and the trace's output."""
    f = trace(fn, capture_as_const=True)
    expect = f(tensor(X)).numpy()
    buffer = io.BytesIO()
    options = {"optimize_for_inference": False, "keep_opr_name": True, "keep_var_name": 2}
    f.dump(buffer, **{**options, **keywords})
    model = onnx.load_from_string(buffer.getvalue())
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: X})[0]
    np.testing.assert_allclose(got, expect, rtol=1e-6)  # the names change nothing the graph computes
    return model


def producer(model, name):
    """The node that makes tensor ``name``."""
    return next(n for n in model.graph.node if name in n.output)


def test_module_name_is_assignable_after_init_and_in_the_constructor():
    class Net(M.Module):
        def __init__(self):
            super().__init__()
            self.name = "net"  # as MegEngine's modules do
            self.fc = M.Linear(3, 2)

        def forward(self, x):
            return self.fc(x)

    net = Net()
    assert net.name == "net" and M.Linear(3, 2, name="fc").name == "fc"
    assert net.fc.weight.name == "net.fc.weight" and net.fc.name is None
    net.name = "renamed"
    assert net.fc.weight.name == "renamed.fc.weight"  # the path follows a later rename
    net.name = None
    assert net.fc.weight.name == "fc.weight"
    with pytest.raises(TypeError, match="a module's name is a str or None, not int"):
        net.name = 3
    assert [n for n, _ in net.named_parameters()] == ["fc.weight", "fc.bias"]  # state keys are attribute paths


def test_operations_are_scoped_by_module_name_or_attribute_path():
    class Block(M.Module):
        def __init__(self):
            super().__init__()
            self.proj = M.Linear(3, 3)

        def forward(self, x):
            return F.relu(self.proj(x))

    class Net(M.Module):
        def __init__(self, name=None):
            super().__init__(name=name)
            self.block = Block()
            self.head = M.Linear(3, 2, name="classifier")  # a given name scopes it instead of the attribute

        def forward(self, x):
            return self.head(self.block(x)) * 2

    model = dumped(Net("net"))
    names = [n.name for n in model.graph.node]
    expect = ["net.block.proj.MatrixMul", "net.block.proj.ADD", "net.block.RELU"]
    assert names == [*expect, "net.classifier.MatrixMul", "net.classifier.ADD", "net.MUL"]
    assert [o.name for o in model.graph.output] == ["net.MUL"]  # the output is named as its operation
    assert "net.block.RELU" in producer(model, "net.block.RELU").output  # intermediate tensors too (keep_var_name=2)
    unnamed = dumped(Net())  # the outermost module without a name: no scope
    assert [n.name for n in unnamed.graph.node][-1] == "MUL" and unnamed.graph.node[0].name == "block.proj.MatrixMul"


def test_tensors_the_user_named_keep_their_names():
    class Net(M.Module):
        def __init__(self):
            super().__init__(name="net")
            self.scale = Parameter(np.float32(3.0), name="gain")  # a parameter named by the user
            self.shift = Tensor(np.ones(3, np.float32))

        def forward(self, x):
            y = x * self.scale
            y.name = "scaled"  # a result named by the user: the dump keeps the name, without scope
            return y + self.shift

    model = dumped(Net(), keep_param_name=True)
    assert {i.name for i in model.graph.initializer} >= {"net.gain", "net.shift"}
    assert producer(model, "scaled").name == "net.MUL" and producer(model, "scaled").input == ["arg_0", "net.gain"]
    renamed = dumped(Net(), keep_param_name=False, keep_var_name=1)  # numbered weights and tensors
    assert not {"net.gain", "net.shift", "scaled"} & {v for n in renamed.graph.node for v in [*n.input, *n.output]}

    class Returns(M.Module):
        def forward(self, x):
            y = F.exp(x)
            y.name = "probability"
            return y

    assert [o.name for o in dumped(Returns()).graph.output] == ["probability"]  # the output takes the user's name


def test_modules_in_lists_tuples_and_dicts_are_scoped_by_the_path_they_were_called_through():
    class Net(M.Module):
        def __init__(self):
            super().__init__()
            self.name = "net"
            self.blocks = [M.Linear(3, 3, bias=False) for _ in range(2)]
            self.same = tuple(self.blocks)
            self.by_key = {"first": self.blocks[0], "second": self.blocks[1]}

        def forward(self, x):
            x = self.blocks[1](x)
            x = self.same[0](x)
            return self.by_key["second"](x)

    net = Net()
    names = [n.name for n in dumped(net).graph.node]
    assert names == ["net.blocks.1.MatrixMul", "net.same.0.MatrixMul", "net.by_key.second.MatrixMul"]
    assert [n for n, _ in net.named_parameters()] == ["blocks.0.weight", "blocks.1.weight"]  # each tensor once
    assert [n for n, _ in net.named_children()] == ["blocks.0", "blocks.1"]
    state = {k: v + 1 for k, v in net.state_dict().items()}
    net.load_state_dict(state)  # replaces the tensors inside the containers
    np.testing.assert_array_equal(net.same[1].weight.numpy(), state["blocks.1.weight"])
    np.testing.assert_array_equal(net.by_key["first"].weight.numpy(), state["blocks.0.weight"])


def test_repeated_operators_are_numbered_in_order():
    class Net(M.Module):
        def __init__(self):
            super().__init__(name="net")

        def forward(self, x):
            return F.relu(F.relu(x) - 0.5) + F.relu(x)

    model = dumped(Net())
    assert [n.name for n in model.graph.node] == ["net.RELU[0]", "net.SUB", "net.RELU[1]", "net.RELU[2]", "net.ADD"]
    tensors = [v for n in model.graph.node for v in n.output]
    assert len(tensors) == len(set(tensors)) and "net.RELU[2]" in tensors


def test_functions_without_modules_and_input_names():
    model = dumped(lambda x: 2 * x)
    assert [(n.name, list(n.input)[0]) for n in model.graph.node] == [("MUL", "arg_0")]  # the tensor first
    f = trace(lambda x: x - 1, capture_as_const=True)
    f(tensor(X, name="data"))
    buffer = io.BytesIO()
    info = f.dump(buffer, keep_var_name=2, keep_opr_name=True)
    assert info.inputs == ["data"] and info.outputs == ["SUB"]


def test_default_output_names_stay_unique():
    f = trace(lambda x: (x + 1, x + 1, x, F.relu(x)), capture_as_const=True)
    f(tensor(X, name="x"))
    info = f.dump(io.BytesIO())
    assert info.outputs == ["ADD[0]", "ADD[1]", "output_2", "RELU"]  # an input returned as is gets output_N
    g = trace(lambda x: (F.relu(x), F.relu(x)), capture_as_const=True)
    g(tensor(X))
    y = g(tensor(X))[0]
    y.name = "RELU[0]"  # names given after the trace change nothing
    assert g.dump(io.BytesIO(), output_names=["a", "b"]).outputs == ["a", "b"]
