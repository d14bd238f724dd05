"""The tracing framework: eager tensor code, traced into an ONNX graph (MegEngine's ``jit.trace``, for inference).

Users import it through the stable paths ``mgedump.tensor``/``mgedump.Tensor``,
``mgedump.functional``, ``mgedump.module`` and ``mgedump.jit``; see
docs/trace.md. The modules, bottom to top (each imports only modules listed
before it):

    ops        the op table: for each operation, its numpy compute and its ONNX emitter
    dispatch   apply(op, inputs, attrs), the one point every operation goes through:
               numpy now, or handed to the traced call in progress; the registry of
               that call (thread-local) and of the Tensor class; TensorBase, a
               tensor's value mechanics
    arguments  the type checks of what users give trace() and dump() (TypeErrors naming the
               type expected)
    functional the tensor functions (dtype promotion, argument checks), built on apply
    numpy_api  __array_ufunc__ / __array_function__: numpy calls mapped onto functional
    tensor     the public Tensor (operators and methods) and tensor(); registers Tensor
               with dispatch
    module     Module and the layers (Conv2d, BatchNorm2d, Linear, ...)
    graph      Program, Recorder and Replayer (traced calls that register with
               dispatch while they run), and the ONNX model of a recording
    dump       trace.dump's work with the tool: optimise, pack a bundle, strip info
    jit        trace, exclude_from_trace, TraceMismatchError

How an operation flows: ``x + 1`` calls ``Tensor.__add__`` (tensor), which calls
``functional.binary``, which casts the operands and calls ``dispatch.apply``.
With no trace running, apply computes ``ops.OPS["add"]`` with numpy. While a
traced function runs, the graph's Recorder or Replayer is the thread's current
call and apply hands the operation to it instead. Neither tensor nor functional
imports the tracer, and the tracer never imports jit: the graph has no cycle.

Only ``dump`` imports the tool's higher modules (options, optimize, packer,
stripinfo, fileio, bundle, spec); the other modules use at most
``mgedump.model.runtime``.
"""

# Importing any module of this package imports tensor first, so that the Tensor class is
# registered with dispatch before a function of functional or dispatch makes a tensor.
from . import tensor as _tensor  # noqa: F401
