"""The ``-d`` generators (docs/data-specs.md): one registry, one entry a generator.

A generator is written ``#NAME(PARAMS[,d0,d1,...][,...])``. Its entry says
what its parameters are called (all of them required), checks their values
when a spec is parsed (:mod:`.spec` parses with this registry), and draws its
data for one input of one test case from that input's own seeded stream
(:func:`mgedump.data.cases.generate` resolves the shape and calls it).

Adding a generator is adding one entry::

    @register_generator("ones", ())
    def _ones(draw: Draw) -> np.ndarray:
        return cast_to(np.ones(draw.shape), draw.info, draw.text)

after which ``-d '#ones(...)'`` is accepted everywhere ``-d`` is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..base.errors import SpecError
from ..model.runtime import TensorInfo
from .casts import cast_to

Params = tuple[int | float, ...]


@dataclass(frozen=True)
class Draw:
    """What a generator draws for: one input of one test case.

    Attributes:
        params: the parameters as written (ints stay ints, so large int64 constants are exact).
        shape: the shape to draw, resolved from the spec and the model.
        info: the input (its name and dtype).
        rng: the stream of this (test case, input).
        text: the generator as written, for messages.
    """

    params: Params
    shape: tuple[int, ...]
    info: TensorInfo
    rng: np.random.Generator
    text: str


@dataclass(frozen=True)
class GeneratorKind:
    """One generator of the registry.

    Attributes:
        name: what follows ``#``.
        params: its parameters' names, all required (``("MIN", "MAX")``).
        draw: the data for one input, already of the input's dtype (:func:`~.casts.cast_to`).
        check: refuses parameter values that make no sense (raises SpecError), given the params and the text.
    """

    name: str
    params: tuple[str, ...]
    draw: Callable[[Draw], np.ndarray]
    check: Callable[[Params, str], None] | None = None

    def usage(self, dims: bool = False) -> str:
        """``#rand(MIN,MAX)``, or with ``dims`` ``#rand(MIN,MAX,d0,d1,...)``."""
        return f"#{self.name}({','.join(self.params + (('d0', 'd1', '...') if dims else ()))})"


GENERATORS: dict[str, GeneratorKind] = {}


def register_generator(
    name: str, params: Sequence[str], *, check: Callable[[Params, str], None] | None = None
) -> Callable[[Callable[[Draw], np.ndarray]], Callable[[Draw], np.ndarray]]:
    """Register the decorated function as the generator ``#name(params...)``.

    Raises:
        ValueError: a generator of that name exists already.
    """

    def add(draw: Callable[[Draw], np.ndarray]) -> Callable[[Draw], np.ndarray]:
        if name in GENERATORS:
            raise ValueError(f"a generator #{name} is registered already")
        GENERATORS[name] = GeneratorKind(name, tuple(params), draw, check)
        return draw

    return add


def or_list(items: Sequence[str]) -> str:
    """``a, b or c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


# ---------------------------------------------------------------- the generators


def _min_max(params: Params, text: str) -> None:
    if params[0] > params[1]:
        raise SpecError(f"#rand MIN > MAX in {text!r}")


def _std(params: Params, text: str) -> None:
    if params[1] < 0:
        raise SpecError(f"#randn STD < 0 in {text!r}")


@register_generator("rand", ("MIN", "MAX"), check=_min_max)
def _rand(draw: Draw) -> np.ndarray:
    """Uniform in [MIN, MAX); for an integer or bool input, the integers in [MIN, MAX] (both included)."""
    if draw.info.np_dtype.kind in "iub":
        return _integers(draw)
    return cast_to(np.asarray(draw.rng.uniform(draw.params[0], draw.params[1], draw.shape)), draw.info, draw.text)


def _integers(draw: Draw) -> np.ndarray:
    info, dtype = draw.info, draw.info.np_dtype
    lo, hi = math.ceil(draw.params[0]), math.floor(draw.params[1])
    if dtype.kind == "b":
        lo, hi = max(lo, 0), min(hi, 1)
        if lo > hi:
            raise SpecError(
                f"{draw.text}: no value of bool input {info.name!r} lies in [{draw.params[0]}, {draw.params[1]}]"
            )
        return draw.rng.integers(lo, hi, size=draw.shape, endpoint=True, dtype=np.int64).astype(bool)
    limits = np.iinfo(dtype)
    if lo > hi:
        raise SpecError(f"{draw.text}: no integer lies in [{draw.params[0]}, {draw.params[1]}] for input {info.name!r}")
    if lo < limits.min or hi > limits.max:
        raise SpecError(
            f"{draw.text}: range does not fit {info.dtype} input {info.name!r} ([{limits.min}, {limits.max}])"
        )
    return draw.rng.integers(lo, hi, size=draw.shape, endpoint=True, dtype=dtype)


@register_generator("randn", ("MEAN", "STD"), check=_std)
def _randn(draw: Draw) -> np.ndarray:
    """Normal with MEAN and STD; rounded for an integer input, refused for a bool one."""
    kind = draw.info.np_dtype.kind
    if kind == "b":
        raise SpecError(f"{draw.text}: #randn makes no sense for bool input {draw.info.name!r}", hint="use #rand(0,1)")
    values = np.asarray(draw.rng.normal(draw.params[0], draw.params[1], draw.shape))
    return cast_to(np.rint(values) if kind in "iu" else values, draw.info, draw.text)


@register_generator("const", ("VALUE",))
def _const(draw: Draw) -> np.ndarray:
    """Every element VALUE."""
    value = draw.params[0]
    with np.errstate(all="ignore"):
        return cast_to(np.full(draw.shape, value), draw.info, f"#const({value})")
