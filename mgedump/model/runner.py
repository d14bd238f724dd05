"""The seam between mgedump and what runs a model: the :class:`Runner` protocol.

Verification, timing and diagnosis take a runner, never a runtime's own session. onnxruntime's runner is
:class:`mgedump.model.runtime.OrtRunner` (:func:`~mgedump.model.runtime.open_runner` opens one on a model with
:class:`~mgedump.model.session.SessionSettings`); another runtime is one module beside it with a class of these
members and a function that opens it (docs/architecture.md, "Adding a session setting or a runner").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .runtime import TensorInfo


class Runner(Protocol):
    """A model, open and ready to run.

    Attributes:
        inputs: the model's inputs (graph inputs that are not initializers), in order.
        outputs: the model's outputs, in order.
        providers: what it runs on, in the order it falls back (a report's ``providers``).
    """

    @property
    def inputs(self) -> list[TensorInfo]: ...

    @property
    def outputs(self) -> list[TensorInfo]: ...

    @property
    def providers(self) -> list[str]: ...

    def run(self, feeds: Mapping[str, Any], /) -> list[Any]:
        """Every output, in order, for these inputs by name. Raises what the runtime raises: the caller reports it
        as one line (:func:`mgedump.model.runtime.run_error`)."""
        ...

    def end_profiling(self) -> str:
        """The file of the runtime's profile, when the settings asked for one (``mgerun --profile``)."""
        ...

    def close(self) -> None:
        """Let the model's memory go; the runner runs no more."""
        ...
