"""The registry of precision modes: one mode, one file (docs/architecture.md, "Adding a precision mode").

A precision mode turns the float32 model (after the portable rewrites) into a
model of another precision and proves it on the test data. Its entry
(:class:`Precision`) is all that the rest of mgedump knows of it: its name
(what ``precision=`` takes, and the manifest's ``optimizations`` entry), what
it needs from the other rewrites, which options apply to it, how it is made,
what a target needs to run it, the manifest key of its record, and the lines
a pack prints about it. The modes are the modules listed in :data:`_MODULES`;
:func:`register` adds one more (a plugin, a test).

The command line offers a mode as a flag of its own where MegEngine has one
(``--enable-ioc16``), and every mode by name; the library never sees the flag.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...base.bounds import Bounds
from ...base.errors import UsageError
from ...base.naming import option_name
from ...options import CALIBRATE_METHODS, FLOAT16_MARGIN, FLOAT32, INT8_WEIGHTS, OptimizeOptions


@dataclass(frozen=True)
class Job:
    """What a mode is given to make its model.

    Attributes:
        source: the model as given (a file): what the mode's model is proved against.
        model: the ``onnx.ModelProto`` to convert: the model after the portable rewrites.
        options: every rewrite's options (a mode reads the ones :attr:`Precision.reads` lists).
        test_inputs: the test cases' inputs (none: a mode that can decides from the weights alone).
        bounds: what every output must meet (:class:`~mgedump.base.bounds.Bounds`: ``bounds.of(name)`` is an
            output's bound and the statistic of its element errors it applies to).
        calibration: the cases a calibrated mode calibrates on (none: the test cases), and where they came from.
        scratch: a folder for the mode's candidates.
        external: the model keeps its weights in an external data file (beyond protobuf's 2 GiB).
    """

    source: str
    model: Any
    options: OptimizeOptions
    test_inputs: Sequence[Mapping[str, Any]]
    bounds: Bounds
    calibration: Sequence[Mapping[str, Any]]
    calibration_specs: Sequence[str]
    scratch: str
    external: bool


@dataclass
class Made:
    """A mode's model and what it says of it.

    Attributes:
        model: the ``onnx.ModelProto`` of the new precision.
        record: the manifest's record of how it was made (stored under :attr:`Precision.manifest_key`).
        notes: remarks for the user.
    """

    model: Any
    record: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def _none(record: Mapping[str, Any]) -> list[str]:
    return []


def _agrees(model: Any, record: Mapping[str, Any]) -> str | None:
    return None


@dataclass(frozen=True)
class Precision:
    """One precision mode.

    Attributes:
        name: what ``precision=`` takes, e.g. ``"ioc16"``.
        about: what it does, in one line (``--help``, docs).
        make: makes and proves the model (:class:`Job` -> :class:`Made`); raises
            :class:`~mgedump.base.errors.OptimizeError` when no model of this precision meets maxerr.
        manifest_key: the manifest key of its record (``"float16"``, ``"int8"``).
        optimization: its entry in the manifest's ``optimizations`` (default: its name).
        rank: how far from float32 it is: float16 1, int8 2. Where two modes run as fast, the lower rank is the
            one to ship.
        reads: the options that apply to it (fields of :class:`~mgedump.options.OptimizeOptions`, and
            ``calibrate`` for calibration data); any other mode-specific option given is refused.
        portable: ``"needed"``: it needs ``optimize_for_inference`` (MegEngine's rule for its ``enable_*`` modes);
            ``"implied"``: it runs the portable rewrites itself, whatever the options say.
        needs_data: it is proved on test data and cannot be made without.
        rounds_inputs: the bundle stores the model's inputs in the mode's own dtype; a pack then says the error
            the user sees end to end beside the certified one.
        requirements: what a target needs to run its model, from its record (docs/bundle.md).
        lines: what a pack prints about its record.
        record_mode: the ``mode`` its record holds (default: its name), which tells a one-model bundle's mode
            among those that share a manifest key.
        check: what its record says that the model made does not hold, read off the model's operators (none: they
            agree); the pipeline refuses a model its record misdescribes.
    """

    name: str
    about: str
    make: Callable[[Job], Made]
    manifest_key: str
    optimization: str = ""
    rank: int = 1
    reads: frozenset[str] = frozenset()
    portable: str = "needed"
    needs_data: bool = False
    rounds_inputs: bool = False
    requirements: Callable[[Mapping[str, Any]], list[str]] = _none
    lines: Callable[[Mapping[str, Any]], list[str]] = _none
    record_mode: str = ""
    check: Callable[[Any, Mapping[str, Any]], str | None] = _agrees

    @property
    def entry(self) -> str:
        """Its entry in the manifest's ``optimizations``."""
        return self.optimization or self.name


_MODULES = ("ioc16", "io16xc32", "int8", "int8_dynamic")  # mgedump.optimize.precisions.<module>.MODE, in this order
_REGISTRY: dict[str, Precision] = {}

# The options that apply to some modes only, and what each does (a mode lists the ones it reads).
MODE_OPTIONS = {
    "fp32_nodes": ("keeps nodes float in a float16 or int8 mode", ()),
    "keep_io_types": ("keeps a float16 model's inputs and outputs float32", False),
    "float16_margin": ("applies to the float16 search", FLOAT16_MARGIN),
    "calibrate_method": ("applies to int8's static calibration", CALIBRATE_METHODS[0]),
    "int8_weights": ("applies to int8 weights", INT8_WEIGHTS[0]),
    "calibrate": ("gives calibration data to int8's static calibration", ()),
}


AUTO = "auto"  # every variant a model can have


def variant_names(names: Sequence[str]) -> list[str]:
    """The variants asked for, in order, each once: ``auto`` stands for ``fp32`` and every mode.

    Raises:
        UsageError: an unknown name, or none.
    """
    known = [FLOAT32, *registry()]
    chosen: list[str] = []
    for name in names:
        for each in known if name == AUTO else [name]:
            if each not in known:
                raise UsageError(
                    f"{option_name('variants')} {name!r} is not a variant: one of {', '.join(known)}, or {AUTO}"
                )
            if each not in chosen:
                chosen.append(each)
    if not chosen:
        raise UsageError(f"{option_name('variants')} names no variant: one of {', '.join(known)}, or {AUTO}")
    return chosen


def variant_of(records: Mapping[str, Any]) -> str:
    """The variant a one-model bundle holds, from its manifest's precision records (``fp32`` when none)."""
    if not records:  # a plain bundle: no mode's modules to import (mgerun's start)
        return FLOAT32
    for mode in registry().values():
        record = records.get(mode.manifest_key)
        if isinstance(record, Mapping) and record.get("mode") == (mode.record_mode or mode.name):
            return mode.name
    return FLOAT32


def register(mode: Precision) -> Precision:
    """Add a mode (a plugin's, a test's); a name already taken is refused."""
    registry()
    if mode.name in _REGISTRY:
        raise ValueError(f"a precision mode named {mode.name!r} is registered already")
    _REGISTRY[mode.name] = mode
    return mode


def unregister(name: str) -> None:
    """Remove a mode that :func:`register` added."""
    _REGISTRY.pop(name, None)


def registry() -> dict[str, Precision]:
    """Every mode by name, the built-in ones first."""
    if not _REGISTRY:
        for module in _MODULES:
            mode = importlib.import_module(f"{__name__}.{module}").MODE
            _REGISTRY[mode.name] = mode
    return _REGISTRY


def precision(name: str) -> Precision:
    """The mode of that name.

    Raises:
        UsageError: no mode has that name.
    """
    modes = registry()
    if name not in modes:
        raise UsageError(f"{option_name('precision')} {name!r} is not a precision mode: one of {', '.join(modes)}")
    return modes[name]


def check_options(options: OptimizeOptions, calibrate: bool = False, among_variants: bool = False) -> Precision | None:
    """The chosen mode, once the options are checked against it.

    Args:
        calibrate: calibration data was given.
        among_variants: the mode makes one of a pack's ``variants``: a refusal names the variant and what works
            with ``variants`` (which refuses a precision flag).

    Raises:
        UsageError: an unknown mode, a mode that needs ``optimize_for_inference`` without it, or an option that
            applies to other modes only.
    """
    mode = precision(options.precision) if options.precision is not None else None
    if mode is not None and mode.portable == "needed" and not options.optimize_for_inference:
        raise UsageError(
            f"{option_name('precision', mode.name)} needs {option_name('optimize_for_inference')}",
            hint=f"add {option_name('optimize_for_inference')}",
        )
    given = {
        name for name, (_, default) in MODE_OPTIONS.items() if name != "calibrate" and getattr(options, name) != default
    }
    if calibrate:
        given.add("calibrate")
    for name in (n for n in MODE_OPTIONS if n in given):
        if mode is not None and name in mode.reads:
            continue
        phrase = MODE_OPTIONS[name][0]
        readers = [m for m in registry().values() if name in m.reads]
        if among_variants:
            raise UsageError(
                f"{option_name(name)} {phrase}, not to the {mode.name if mode else FLOAT32} variant: "
                f"{_among_variants(name, mode.name if mode else FLOAT32, readers)}"
            )
        if mode is not None:
            raise UsageError(f"{option_name(name)} {phrase}, not to {option_name('precision', mode.name)}")
        raise UsageError(f"{option_name(name)} {phrase}: add {_either(readers)}")
    return mode


def _among_variants(name: str, refused: str, readers: Sequence[Precision]) -> str:
    """What works with ``variants`` when a variant refuses an option: calibration data is used by the variants that
    read it (the pack checks it against one only when none does); every other mode option must suit every
    variant."""
    variants = option_name("variants")
    if name == "calibrate":
        return f"name {_either_name(readers)} in {variants}"
    return (
        f"leave {refused} out of {variants} (it applies to {_either_name(readers)}), or leave {option_name(name)} out"
    )


def _either_name(modes: Sequence[Precision]) -> str:
    names = [m.name for m in modes]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _either(modes: Sequence[Precision]) -> str:
    names = [option_name("precision", m.name) for m in modes]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
