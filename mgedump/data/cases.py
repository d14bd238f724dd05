"""Test cases: what the user gave, parsed once (:class:`TestData`), and the input arrays built from it
(:func:`build_cases`): each input's data from a generator (:mod:`.generators`) or a file (:mod:`.files`).

Generators draw from one seeded stream per (test case, input), so the same
command gives the same data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..base.errors import SpecError, UsageError
from ..base.naming import option_name
from ..model.runtime import TensorInfo
from ..options import DataOptions, GivenCases
from .casts import cast_to
from .files import file_data, find_file
from .generators import GENERATORS, Draw
from .shapes import check_shape, generator_shape, with_input_shapes
from .spec import MAX_LIST_CASES, CaseSpec, Generator, Item, expand_specs, parse_case
from .values import element_info, wrap


@dataclass(frozen=True)
class ArrayCase:
    """A test case given as arrays from code: one per input by name, or one for a one-input model (name None)."""

    arrays: Mapping[str | None, np.ndarray]
    origin: str

    @property
    def text(self) -> str:
        """How the test case is recorded: each input's dtype and shape (``x: float32[1, 3, 32, 32]``)."""
        return "; ".join(
            f"{'' if name is None else name + ': '}{np.asarray(a).dtype}{list(np.shape(a))}"
            for name, a in self.arrays.items()
        )


@dataclass(frozen=True)
class TestData:
    """Test cases as the user gave them, parsed once: ``-d`` texts with their list files read, and arrays.

    Build it with :meth:`parse` (commands accept it wherever they accept the raw values, and parse nothing
    again); :meth:`build` makes the input arrays for a model.
    """

    cases: tuple[CaseSpec | ArrayCase, ...]

    @classmethod
    def parse(cls, given: GivenCases) -> TestData:
        """Parse ``-d`` texts (reading ``@FILE`` list files), :class:`CaseSpec` objects, arrays and dicts of arrays.

        Raises:
            SpecError: no test case, a list file that is missing, unreadable or empty.
            UsageError: a test case of a type that is none of these, or test data parsed by something else.
        """
        if isinstance(given, TestData):
            return given
        if not isinstance(given, Iterable):
            raise UsageError(f"test cases must be a list, or TestData; got {type(given).__name__}")
        parsed: list[CaseSpec | ArrayCase] = []
        texts: list[tuple[int, str | CaseSpec]] = []
        for index, case in enumerate(given):
            if isinstance(case, (str, CaseSpec)):
                texts.append((len(parsed), case))
                parsed.append(CaseSpec("", ""))  # a place, filled below
            elif isinstance(case, np.ndarray) or np.isscalar(case):
                parsed.append(ArrayCase({None: np.asarray(case)}, f"cases[{index}]"))
            elif isinstance(case, Mapping) and all(isinstance(k, str) for k in case):
                parsed.append(ArrayCase({k: np.asarray(v) for k, v in case.items()}, f"cases[{index}]"))
            else:
                raise UsageError(
                    f"test case {index} is of type {type(case).__name__}: give a -d text, an array, or a dict "
                    "of input name to array"
                )
        if not parsed:
            expand_specs([])  # raises the one "no test data" error
        expanded = _expand_in_place(texts)
        result: list[CaseSpec | ArrayCase] = []
        for position, case in enumerate(parsed):
            result += expanded.get(position, [case])
        if len(result) > MAX_LIST_CASES:
            raise SpecError(f"more than {MAX_LIST_CASES} test cases")
        return cls(tuple(result))

    @property
    def list_files(self) -> list[str]:
        """The list files the test cases were read from (outputs must never overwrite them)."""
        return sorted({c.list_file for c in self.cases if isinstance(c, CaseSpec) and c.list_file})

    @property
    def data_files(self) -> list[str]:
        """The data files the test cases name (images, ``.npy``, ``.npz``, ``.pb``), found as :meth:`build` finds
        them, known before any model is read: outputs must never overwrite them. A best effort that errs on the
        side of more: an item ``NAME:PATH`` counts its whole text and what follows each ``:`` (an input name may
        hold one), when such a file exists."""
        found: set[str] = set()
        for case in self.cases:
            if not isinstance(case, CaseSpec):
                continue
            for item in case.text.split(";"):
                item = item.strip()
                tails = [item] + [item[k + 1 :] for k, char in enumerate(item) if char == ":"]
                for tail in (t.strip() for t in tails):
                    if not tail or tail.startswith("#") or "\x00" in tail:
                        continue
                    path = find_file(tail, case.base_dir, case.cwd_first)
                    if path is not None:
                        found.add(path)
        return sorted(found)

    def build(self, inputs: Sequence[TensorInfo], options: DataOptions) -> list[TestCase]:
        """The input arrays of every test case, for a model with these inputs (see :func:`build_cases`)."""
        return build_cases(self.cases, inputs, options)


def _expand_in_place(texts: Sequence[tuple[int, str | CaseSpec]]) -> dict[int, list[CaseSpec | ArrayCase]]:
    """Expand ``-d`` texts (list files into their lines), each at its place among the test cases, numbered as the
    texts alone would be (``-d #2`` is the second ``-d``)."""
    if not texts:
        return {}
    found: dict[int, list[CaseSpec | ArrayCase]] = {}
    for number, (position, text) in enumerate(texts):
        specs = expand_specs([text])
        if isinstance(text, str) and not text.startswith("@"):
            specs = [CaseSpec(text, f"-d #{number + 1}")]
        found[position] = list(specs)
    return found


@dataclass
class TestCase:
    """A test case's input arrays, in model input order, and where they came from.

    Attributes:
        spec: the test case as written.
        inputs: (input name, array) in model input order.
        files: the data files it read (outputs must never overwrite them).
        defaulted: the symbolic dims a generator set to 1 (``"'x' dim 2 ('H')"``), for messages when the model
            then fails to run.
    """

    spec: CaseSpec
    inputs: list[tuple[str, np.ndarray]]
    files: list[str] = field(default_factory=list)
    defaulted: list[str] = field(default_factory=list)


def generate(
    gen: Generator, info: TensorInfo, rng: np.random.Generator, defaulted: list[str] | None = None
) -> np.ndarray:
    """Draw a generator's data for one input (an array, also for a scalar input).

    Raises:
        SpecError: a shape that does not fit the input, a string input, or parameters the input's dtype cannot
            take.
    """
    shape = generator_shape(gen, info, defaulted)
    if info.dtype == "str":
        raise SpecError(f"input {info.name!r} takes strings; generators make numbers", hint="give a .npy or .pb file")
    return np.asarray(GENERATORS[gen.kind].draw(Draw(gen.params, shape, info, rng, gen.text)))


def build_cases(
    case_specs: Sequence[CaseSpec | ArrayCase], inputs: Sequence[TensorInfo], options: DataOptions
) -> list[TestCase]:
    """Parse every test case and build its input arrays.

    Arrays given from code (:class:`ArrayCase`) are used as given: checked against the input's shape and cast
    to its dtype (``repeat`` and ``input_transform`` apply to file data only).

    Raises:
        SpecError: a spec is malformed or does not fit the model, or a flag
            (--resize-input, --input-transform) applies to no data.
        DataError: a data file is missing, unreadable or does not fit.
    """
    inputs = with_input_shapes(inputs, options.input_shapes)
    names = [info.name for info in inputs]
    transform = None
    if options.input_transform is not None:  # DataOptions checked that it compiles
        transform = compile(options.input_transform, "<input_transform>", "eval")
    cases = []
    saw_file = saw_image = False
    for case_index, spec in enumerate(case_specs):
        if isinstance(spec, ArrayCase):
            cases.append(_array_case(spec, inputs))
            continue
        try:
            items = parse_case(spec.text, names)
        except SpecError as exc:
            raise SpecError(f"{spec.origin}: {exc.message}", hint=exc.hint) from None
        case = TestCase(spec, [])
        for input_index, given in enumerate(inputs):
            item: Item = items[0] if items[0].name is None else items[input_index]
            info = element_info(given)  # the input, or the tensor its sequence or optional holds
            if isinstance(item.source, Generator):
                rng = np.random.default_rng([options.seed, case_index, input_index])
                array = generate(item.source, info, rng, case.defaulted)
            else:
                array, is_image, path = file_data(item.source, info, options, spec, transform)
                case.files.append(path)
                saw_file = True
                saw_image = saw_image or is_image
            case.inputs.append((info.name, wrap(given, array)))
        cases.append(case)
    if options.resize_input and not saw_image:
        raise UsageError(
            f"{option_name('resize_input')} applies to image files, and no test case has one (it cannot apply to "
            "generators)"
        )
    if options.input_transform is not None and not saw_file:
        raise UsageError(
            f"{option_name('input_transform')} applies to file data, and no test case has any (it cannot apply to "
            "generators)"
        )
    return cases


def _array_case(given: ArrayCase, inputs: Sequence[TensorInfo]) -> TestCase:
    """A test case of arrays from code, bound to the model's inputs by name (or to its one input)."""
    names = [info.name for info in inputs]
    arrays = dict(given.arrays)
    if None in arrays:
        if len(inputs) != 1:
            raise SpecError(
                f"{given.origin}: one array for a model with {len(inputs)} inputs; give a dict of input name to "
                f"array ({', '.join(repr(n) for n in names)})"
            )
        arrays = {names[0]: arrays[None]}
    unknown = [name for name in arrays if name not in names]
    if unknown:
        raise SpecError(
            f"{given.origin}: the model has no input {unknown[0]!r} (inputs: {', '.join(map(repr, names))})"
        )
    missing = [name for name in names if name not in arrays]
    if missing:
        raise SpecError(f"{given.origin}: no array for input {missing[0]!r}")
    case = TestCase(CaseSpec(given.text, given.origin), [])
    for info in inputs:
        if not info.is_tensor:  # a sequence or an optional, as given: onnxruntime checks it
            case.inputs.append((info.name, arrays[info.name]))
            continue
        array = np.asarray(arrays[info.name])
        what = f"{given.origin}[{info.name!r}]"
        check_shape(array, info, what)
        case.inputs.append((info.name, cast_to(array, info, what)))
    return case
