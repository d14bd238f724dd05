"""Test data: what the user gave, parsed once (:class:`TestData`), and the input arrays built from it.

The grammar of ``-d`` specs is docs/data-specs.md. One module a job:

- :mod:`.spec`: the ``-d`` text parsed and bound to the model's inputs (``@FILE`` lists read);
- :mod:`.generators`: the registry of generators (``#rand``, ``#randn``, ``#const``): a new one is one entry;
- :mod:`.readers`: ``.npy``, ``.npz``, ``.pb`` and image files read without trusting them;
- :mod:`.images`: an image laid out for an input (NCHW, NHWC, ...), resized when asked;
- :mod:`.files`: a file found, read, repeated, transformed, checked and cast for an input;
- :mod:`.shapes`: a generator's shape, data checked against the model's dims, ``--input-shape``;
- :mod:`.casts`: data cast to an input's dtype, refused where a cast would corrupt it;
- :mod:`.cases`: the test cases (:class:`TestData`, :class:`TestCase`) and :func:`build_cases`.
"""

from __future__ import annotations

from .cases import ArrayCase, TestCase, TestData, build_cases, generate
from .casts import cast_to
from .files import file_data, load_file, resolve_path
from .generators import GENERATORS, Draw, GeneratorKind, register_generator
from .images import image_layout, load_image
from .shapes import check_shape, generator_shape, with_input_shapes

__all__ = [
    "GENERATORS",
    "ArrayCase",
    "Draw",
    "GeneratorKind",
    "TestCase",
    "TestData",
    "build_cases",
    "cast_to",
    "check_shape",
    "file_data",
    "generate",
    "generator_shape",
    "image_layout",
    "load_file",
    "load_image",
    "register_generator",
    "resolve_path",
    "with_input_shapes",
]
