"""The error bound: how far each output of a model may be from its expected output, and of which statistic of its
element errors (docs/assertion.md). One value, :class:`Bounds`, answers "the bound of output X" everywhere: the
pack proves its models to it and records it in the manifest, ``mgerun`` checks with it (its ``--maxerr`` over the
bundle's, :meth:`Bounds.overridden_by`), the precision modes' searches aim at it, and the reports print it.

A :class:`Bounds` holds a default (a bound, a statistic) and outputs with a bound or a statistic of their own; a
part not given is ``None``, so that it can be told from one given (``mgerun --maxerr prob:1e-3`` overrides one
output and keeps the bundle's default). Read through :meth:`Bounds.of`, a part not given is
:data:`DEFAULT_MAXERR` or ``"max"`` (MegEngine's AssertEqual).

The command line's grammar, ``[OUTPUT:]X`` for ``--maxerr`` and ``[OUTPUT:]STAT`` for ``--error-stat`` (each
repeatable), is :func:`parse_bounds`: ``mgedump``, ``mgerun`` and the pytest plugin read their flags with it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .errors import UsageError
from .naming import option_name
from .numbers import parse_float

DEFAULT_MAXERR = 1e-4  # AssertEqual's threshold when none is given (docs/assertion.md)
ERROR_STATS = ("max", "p99", "mean", "median")  # what a bound applies to, over an output's element errors
DEFAULT_STAT = ERROR_STATS[0]

OutputBounds = Mapping[str, float] | Iterable[tuple[str, float]]
"""Outputs' own bounds as a caller gives them: a mapping of output name to bound, or (name, bound) pairs."""
OutputStats = Mapping[str, str] | Iterable[tuple[str, str]]
"""Outputs' own statistics as a caller gives them: a mapping of output name to statistic, or (name, stat) pairs."""
BoundsJson = dict[str, float | str | dict[str, float] | dict[str, str]]
"""The manifest's keys of the bound (docs/bundle.md#assertion): ``maxerr``, and when given ``output_maxerr``,
``error_stat`` and ``output_error_stat``."""


class Bound(NamedTuple):
    """The bound of one output: the largest error it may show, and the statistic of its element errors it bounds."""

    maxerr: float
    stat: str


def check_maxerr(maxerr: object, name: str = "maxerr", output: str | None = None) -> float:
    """A bound of the AssertEqual error as a float.

    Args:
        name: the option it came from, for the message.
        output: the output the bound is for (``maxerr NAME:X``), if one.

    Raises:
        UsageError: negative, NaN, infinite or not a number.
    """
    if isinstance(maxerr, bool) or not isinstance(maxerr, (int, float)) or not math.isfinite(maxerr) or maxerr < 0:
        what = option_name("output_maxerr", output) if output is not None else option_name(name)
        raise UsageError(f"{what} must be a finite number >= 0, got {maxerr}")
    return float(maxerr)


def check_stat(stat: object, output: str | None = None) -> str:
    """A statistic of the element errors, one of :data:`ERROR_STATS`.

    Raises:
        UsageError: another value.
    """
    if stat not in ERROR_STATS or not isinstance(stat, str):
        what = option_name("output_error_stat", output) if output is not None else option_name("error_stat")
        raise UsageError(f"{what} must be one of {', '.join(ERROR_STATS)}, got {stat!r}")
    return stat


def _pairs(value: object, kind: str, what: str) -> list[tuple[str, object]]:
    """(output name, value) pairs from a mapping or pairs, in the order given; a name given twice keeps its first
    place and its last value.

    Raises:
        UsageError: neither a mapping nor pairs of an output name and a value.
    """
    items = value.items() if isinstance(value, Mapping) else value
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise UsageError(f"{option_name(kind)} takes output names and {what}, got {value!r}")
    named: dict[str, object] = {}
    for item in items:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str)):
            raise UsageError(f"{option_name(kind)} takes output names and {what}, got {item!r}")
        named[item[0]] = item[1]
    return list(named.items())


@dataclass(frozen=True)
class Bounds:
    """Every output's error bound: a default, and outputs with their own (docs/assertion.md).

    Attributes:
        maxerr: the bound of every output without one of its own (none: not given, :data:`DEFAULT_MAXERR`).
        error_stat: the statistic of the element errors the bounds apply to (none: not given, ``max``).
        output_maxerr: outputs with a bound of their own, as (name, bound) pairs in the order given.
        output_error_stat: outputs with a statistic of their own, as (name, statistic) pairs.

    Each value is checked when it is made (:class:`~mgedump.base.errors.UsageError`); a mapping is taken for the
    pairs too (:meth:`given` says so to the type checker).
    """

    maxerr: float | None = None
    error_stat: str | None = None
    output_maxerr: tuple[tuple[str, float], ...] = ()
    output_error_stat: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        own = tuple(
            (name, check_maxerr(bound, output=name))
            for name, bound in _pairs(self.output_maxerr, "output_maxerr", "bounds")
        )
        stats = tuple(
            (name, check_stat(stat, output=name))
            for name, stat in _pairs(self.output_error_stat, "output_error_stat", "statistics")
        )
        object.__setattr__(self, "maxerr", None if self.maxerr is None else check_maxerr(self.maxerr))
        object.__setattr__(self, "error_stat", None if self.error_stat is None else check_stat(self.error_stat))
        object.__setattr__(self, "output_maxerr", own)
        object.__setattr__(self, "output_error_stat", stats)

    @classmethod
    def given(
        cls,
        maxerr: float | None = None,
        error_stat: str | None = None,
        output_maxerr: OutputBounds = (),
        output_error_stat: OutputStats = (),
    ) -> Bounds:
        """Bounds as a caller gives them: the outputs' own as a mapping or as pairs."""
        own = output_maxerr.items() if isinstance(output_maxerr, Mapping) else output_maxerr
        stats = output_error_stat.items() if isinstance(output_error_stat, Mapping) else output_error_stat
        return cls(maxerr, error_stat, tuple(own), tuple(stats))

    @property
    def default(self) -> Bound:
        """The bound of an output without one of its own."""
        return Bound(
            DEFAULT_MAXERR if self.maxerr is None else self.maxerr,
            DEFAULT_STAT if self.error_stat is None else self.error_stat,
        )

    def of(self, output: str) -> Bound:
        """The bound of one output and the statistic it applies to: its own, else the default."""
        default = self.default
        return Bound(
            dict(self.output_maxerr).get(output, default.maxerr),
            dict(self.output_error_stat).get(output, default.stat),
        )

    def tightest(self, outputs: Iterable[str] | None = None) -> float:
        """The tightest bound: of these outputs (the default when there are none), or, none named, of the default
        and every output's own (what the precision modes' searches aim at)."""
        if outputs is None:
            return min([self.default.maxerr, *(bound for _, bound in self.output_maxerr)])
        return min((self.of(name).maxerr for name in outputs), default=self.default.maxerr)

    def overridden_by(self, other: Bounds) -> Bounds:
        """These bounds with ``other``'s given over them (``mgerun --maxerr`` over a bundle's): a default given
        replaces every bound (the outputs' own too), then ``other``'s outputs set their own; statistics alike."""
        own = dict(self.output_maxerr) if other.maxerr is None else {}
        own.update(other.output_maxerr)
        stats = dict(self.output_error_stat) if other.error_stat is None else {}
        stats.update(other.output_error_stat)
        return Bounds(
            self.maxerr if other.maxerr is None else other.maxerr,
            self.error_stat if other.error_stat is None else other.error_stat,
            tuple(own.items()),
            tuple(stats.items()),
        )

    def replaced(
        self,
        maxerr: float | None = None,
        error_stat: str | None = None,
        output_maxerr: OutputBounds | None = None,
        output_error_stat: OutputStats | None = None,
    ) -> Bounds:
        """These bounds with each part given replaced (an options dataclass's keywords, ``PackOptions(maxerr=...)``);
        a part given as none or empty keeps this one's."""
        parts = Bounds.given(maxerr, error_stat, output_maxerr or (), output_error_stat or ())
        return dataclasses.replace(
            self,
            maxerr=self.maxerr if maxerr is None else parts.maxerr,
            error_stat=self.error_stat if error_stat is None else parts.error_stat,
            output_maxerr=parts.output_maxerr or self.output_maxerr,
            output_error_stat=parts.output_error_stat or self.output_error_stat,
        )

    def check_outputs(self, names: Sequence[str]) -> None:
        """Refuse an output's own bound or statistic for an output the model does not have.

        Raises:
            UsageError: naming the option and the model's outputs.
        """
        for kind, given in (("output_maxerr", self.output_maxerr), ("output_error_stat", self.output_error_stat)):
            for name, _ in given:
                if name not in names:
                    raise UsageError(
                        f"{option_name(kind, name)} names no output of the model "
                        f"(its outputs: {', '.join(map(repr, names))})"
                    )

    def text(self) -> str:
        """``0.0001``, ``0.0001 of the p99 error (prob:0.001)``: the bound as a message states it."""
        default = self.default
        own = ", ".join(f"{name}:{bound:g}" for name, bound in self.output_maxerr)
        stat = "" if default.stat == DEFAULT_STAT else f" of the {default.stat} error"
        return f"{default.maxerr:g}{stat}" + (f" ({own})" if own else "")

    def to_json(self) -> BoundsJson:
        """The manifest's keys (docs/bundle.md#assertion): ``maxerr`` always, the others when given."""
        default = self.default
        document: BoundsJson = {"maxerr": default.maxerr}
        if self.output_maxerr:
            document["output_maxerr"] = dict(self.output_maxerr)
        if default.stat != DEFAULT_STAT:
            document["error_stat"] = default.stat
        if self.output_error_stat:
            document["output_error_stat"] = dict(self.output_error_stat)
        return document

    @classmethod
    def from_json(cls, document: Mapping[str, object]) -> Bounds:
        """The bounds a manifest's ``assertion`` records (checked against its schema before).

        Raises:
            UsageError: a value that is no bound or statistic.
        """
        own = _pairs(document.get("output_maxerr") or {}, "output_maxerr", "bounds")
        stats = _pairs(document.get("output_error_stat") or {}, "output_error_stat", "statistics")
        return cls(
            check_maxerr(document["maxerr"]),
            check_stat(document.get("error_stat", DEFAULT_STAT)),
            tuple((name, check_maxerr(bound, output=name)) for name, bound in own),
            tuple((name, check_stat(stat, output=name)) for name, stat in stats),
        )


def err_text(err: float | None, stat: str = DEFAULT_STAT, largest: float | None = None) -> str:
    """``AssertEqual: err=X``, as every check's line begins; under another statistic than max, the statistic and
    the largest element error beside it (``AssertEqual median: err=0 (max 10)``): a bound on the median can pass a
    tensor whose elements are far off, and the line shows it (docs/assertion.md#error-statistics)."""
    text = f"AssertEqual{'' if stat == 'max' else ' ' + stat}: err={'n/a' if err is None else f'{err:g}'}"
    return text if stat == "max" or largest is None else f"{text} (max {largest:g})"


def _number(text: str) -> float:
    """A bound's number, read as every number is (ASCII digits, bounded: :mod:`.numbers`); ValueError if not one."""
    try:
        return parse_float(text, "a bound")
    except UsageError:
        raise ValueError(text) from None


def parse_bounds(maxerr: Sequence[str] = (), error_stat: Sequence[str] = ()) -> Bounds:
    """The command line's ``--maxerr [OUTPUT:]X`` and ``--error-stat [OUTPUT:]STAT`` (each repeatable; the last
    given wins) as :class:`Bounds`: a part not given is none. The output's name is everything before the last ``:``.

    Raises:
        UsageError: a value that is neither a number (a statistic) nor OUTPUT:number (OUTPUT:STAT), or a bound that
            is not a number >= 0; one line, naming the option as the surface in use does.
    """
    every: float | None = None
    named: dict[str, float] = {}
    for text in maxerr:
        try:
            every = check_maxerr(_number(text))
            continue
        except ValueError:
            pass
        name, sep, number = text.rpartition(":")
        try:
            value = _number(number)
        except ValueError:
            value = None
        if not sep or not name or value is None:
            raise UsageError(
                f"{option_name('maxerr')} {text!r}: give a number (e.g. 1e-4) or OUTPUT:number (e.g. prob:1e-3)"
            )
        named[name] = check_maxerr(value, output=name)
    stat: str | None = None
    stats: dict[str, str] = {}
    for text in error_stat:
        name, sep, value_text = text.rpartition(":")
        if value_text not in ERROR_STATS:
            raise UsageError(
                f"{option_name('error_stat')} {text!r}: give one of {', '.join(ERROR_STATS)}, or OUTPUT:STAT"
            )
        if sep:
            stats[name] = value_text
        else:
            stat = value_text
    return Bounds(every, stat, tuple(named.items()), tuple(stats.items()))
