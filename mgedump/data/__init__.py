"""Test data: what the user gave, parsed once (:class:`TestData`), and the input arrays built from it.

The grammar of ``-d`` specs is docs/data-specs.md; :mod:`.spec` parses it.

Generators draw from one seeded stream per (test case, input), so the same
command gives the same data. File data (images, ``.npy``, ``.npz``, ``.pb``) is
read, laid out for the model, repeated (``--repeat``), transformed
(``--input-transform``) and cast to the input's dtype, in that order.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType

import numpy as np

from ..base.deps import require
from ..base.errors import DataError, SpecError, UsageError
from ..base.limits import require_memory
from ..base.log import warn_once
from ..model.runtime import TensorInfo
from ..options import DataOptions
from .readers import decode_image, load_npy, load_npz, load_pb
from .spec import MAX_LIST_CASES, CaseSpec, FileSource, Generator, Item, expand_specs, parse_case
from .values import element_info, wrap

ARRAY_SUFFIXES = (".npy", ".npz", ".pb")


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
    def parse(cls, given: TestData | Sequence[object]) -> TestData:
        """Parse ``-d`` texts (reading ``@FILE`` list files), :class:`CaseSpec` objects, arrays and dicts of arrays.

        Raises:
            SpecError: no test case, a list file that is missing, unreadable or empty.
            UsageError: a test case of a type that is none of these.
        """
        if isinstance(given, TestData):
            return given
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


# ---------------------------------------------------------------- dtype casts


_NOT_NUMBERS = {"c": "complex numbers", "M": "dates", "m": "time spans", "V": "raw or structured records"}


def cast_to(array: np.ndarray, info: TensorInfo, what: str) -> np.ndarray:
    """Cast data to an input's dtype, warning when the cast rounds values.

    Raises:
        DataError: data a cast would silently corrupt: complex numbers, dates,
            time spans, records, objects; strings for a numeric input and back;
            values outside the input dtype's range (or NaN for an integer input).
    """
    target = info.np_dtype
    kind = array.dtype.kind
    if kind in _NOT_NUMBERS or (kind == "O" and info.dtype != "str"):
        held = _NOT_NUMBERS.get(kind, "Python objects")
        raise DataError(f"input {info.name!r} takes {info.dtype}, but {what} holds {held} ({array.dtype})")
    if info.dtype == "str":
        if array.dtype.kind not in "USO":
            raise DataError(f"input {info.name!r} takes strings, but {what} holds {array.dtype}")
        return array.astype(object)
    if array.dtype.kind in "USO":
        raise DataError(f"input {info.name!r} takes {info.dtype}, but {what} holds strings")
    if array.dtype == target:
        return array
    _check_range(array, info, what)
    with np.errstate(all="ignore"):
        out = array.astype(target)
        if array.dtype.kind in "fc" and target.kind in "fc":
            changed = int(np.count_nonzero(np.isfinite(array) & ~np.isfinite(out)))
        elif array.size:
            changed = int(array.size - np.count_nonzero(out.astype(array.dtype) == array))
        else:
            changed = 0
    if changed:
        warn_once(
            f"input {info.name!r}: casting {what} from {array.dtype} to {info.dtype} changes "
            f"{changed} of {array.size} values"
        )
    return out


def _check_range(array: np.ndarray, info: TensorInfo, what: str) -> None:
    """Refuse values the input's dtype cannot hold: a cast would wrap them, or make them infinite."""
    target = info.np_dtype
    if not array.size or target.kind not in "iuf" or array.dtype.kind not in "iuf":
        return
    with np.errstate(all="ignore"):
        if target.kind == "f":
            if array.dtype.kind != "f" or np.finfo(target).max >= np.finfo(array.dtype).max:
                return
            top = float(np.finfo(target).max)
            outside = np.isfinite(array) & (np.abs(array) > top)
            bounds = f"[{-top:g}, {top:g}]"
        else:
            lo, hi = int(np.iinfo(target).min), int(np.iinfo(target).max)
            if array.dtype.kind == "f":  # the bounds as floats are powers of two (exact): hi + 1 is the first too big
                outside = ~np.isfinite(array) | (array < float(lo)) | (array >= float(hi) + 1)
            else:
                outside = (array < lo) | (array > hi)
            bounds = f"[{lo}, {hi}]"
        count = int(np.count_nonzero(outside))
    if count:
        raise DataError(
            f"input {info.name!r} takes {info.dtype}, but {what} holds {count} value(s) outside its range {bounds}",
            hint="give data within the input's range",
        )


# ---------------------------------------------------------------- generators


def _generator_shape(gen: Generator, info: TensorInfo, defaulted: list[str] | None = None) -> tuple[int, ...]:
    model = info.shape
    if gen.dims is not None and not gen.rest:
        shape = gen.dims
        if model is not None and len(model) != len(shape):
            raise SpecError(
                f"{gen.text} gives {len(shape)} dims, but input {info.name!r} has rank {len(model)} "
                f"(shape {info.shape_text()})"
            )
    else:
        lead = gen.dims or ()
        if model is None:
            raise SpecError(
                f"input {info.name!r} has no known shape in the model; give the full shape",
                hint=f"{info.name}:#{gen.kind}(...,d0,d1,...)",
            )
        if len(lead) > len(model):
            raise SpecError(f"{gen.text} gives {len(lead)} dims, but input {info.name!r} has rank {len(model)}")
        tail = []
        for axis in range(len(lead), len(model)):
            dim = model[axis]
            if isinstance(dim, int) and dim >= 0:
                tail.append(dim)
                continue
            label = repr(dim) if dim is not None else "unnamed"
            placeholders = [str(d) if isinstance(d, int) else f"<{d or '?'}>" for d in model]
            warn_once(
                f"input {info.name!r} dim {axis} ({label}) is symbolic: using 1; give the dims the model leaves "
                f"free with --input-shape {info.name}:{','.join(placeholders)} or in the spec, e.g. "
                f"{info.name}:#{gen.kind}({','.join(str(p) for p in gen.params)},{','.join(placeholders)})"
            )
            if defaulted is not None:
                defaulted.append(f"{info.name!r} dim {axis} ({label})")
            tail.append(1)
        shape = tuple(lead) + tuple(tail)
    if model is not None:
        for axis, (want, got) in enumerate(zip(model, shape, strict=True)):
            if isinstance(want, int) and want >= 0 and want != got:
                raise SpecError(
                    f"{gen.text}: dim {axis} is {got}, but input {info.name!r} fixes it to {want} "
                    f"(shape {info.shape_text()})"
                )
    # the generator draws float64 (8 bytes an element) and casts to the input's dtype
    require_memory(
        math.prod(shape) * (8 + info.np_dtype.itemsize),
        f"{gen.text} for input {info.name!r} ({list(shape)})",
        SpecError,
    )
    return shape


def generate(
    gen: Generator, info: TensorInfo, rng: np.random.Generator, defaulted: list[str] | None = None
) -> np.ndarray:
    """Draw a generator's data for one input (an array, also for a scalar input)."""
    return np.asarray(_draw(gen, info, rng, _generator_shape(gen, info, defaulted)))


def _draw(gen: Generator, info: TensorInfo, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    dtype = info.np_dtype
    kind = dtype.kind
    if info.dtype == "str":
        raise SpecError(f"input {info.name!r} takes strings; generators make numbers", hint="give a .npy or .pb file")
    if gen.kind == "const":
        value = gen.params[0]
        with np.errstate(all="ignore"):
            return cast_to(np.full(shape, value), info, f"#const({value})")
    if kind in "iu" or kind == "b":
        lo, hi = gen.params
        if gen.kind == "randn":
            if kind == "b":
                raise SpecError(
                    f"{gen.text}: #randn makes no sense for bool input {info.name!r}", hint="use #rand(0,1)"
                )
            return cast_to(np.rint(np.asarray(rng.normal(lo, hi, shape))), info, gen.text)
        lo, hi = math.ceil(lo), math.floor(hi)
        if kind == "b":
            lo, hi = max(lo, 0), min(hi, 1)
            if lo > hi:
                raise SpecError(
                    f"{gen.text}: no value of bool input {info.name!r} lies in [{gen.params[0]}, {gen.params[1]}]"
                )
            return rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(bool)
        limits = np.iinfo(dtype)
        if lo > hi:
            raise SpecError(
                f"{gen.text}: no integer lies in [{gen.params[0]}, {gen.params[1]}] for input {info.name!r}"
            )
        if lo < limits.min or hi > limits.max:
            raise SpecError(
                f"{gen.text}: range does not fit {info.dtype} input {info.name!r} ([{limits.min}, {limits.max}])"
            )
        return rng.integers(lo, hi, size=shape, endpoint=True, dtype=dtype)
    if gen.kind == "rand":
        array = rng.uniform(gen.params[0], gen.params[1], shape)
    else:
        array = rng.normal(gen.params[0], gen.params[1], shape)
    return cast_to(np.asarray(array), info, gen.text)


# ---------------------------------------------------------------- files


def resolve_path(path: str, base_dir: str | None, cwd_first: bool = True) -> str:
    """Find a data file: as given (relative to the current directory), then in base_dir."""
    if (cwd_first and os.path.exists(path)) or os.path.isabs(path) or base_dir is None:
        found = path
    else:
        found = os.path.join(base_dir, path)
    if not os.path.exists(found):
        where = f" (also looked in {base_dir})" if base_dir and not os.path.isabs(path) else ""
        raise DataError(f"data file not found: {path}{where}")
    if not os.path.isfile(found):
        raise DataError(f"data path is not a file: {path}")
    return found


def image_layout(info: TensorInfo) -> tuple[str, int, int | str | None, int | str | None]:
    """Where an image goes in an input: (layout, channels, H, W).

    The layout is ``NCHW``, ``NHWC``, ``CHW`` or ``HWC``, chosen by where a fixed
    dim of 1 or 3 sits.
    """
    shape = info.shape
    if shape is not None and len(shape) == 4:
        if shape[1] in (1, 3):
            return "NCHW", int(shape[1]), shape[2], shape[3]
        if shape[3] in (1, 3):
            return "NHWC", int(shape[3]), shape[1], shape[2]
    if shape is not None and len(shape) == 3:
        if shape[0] in (1, 3):
            return "CHW", int(shape[0]), shape[1], shape[2]
        if shape[2] in (1, 3):
            return "HWC", int(shape[2]), shape[0], shape[1]
    raise DataError(
        f"cannot lay out an image for input {info.name!r} (shape {info.shape_text()}): it needs a fixed channel dim "
        "of 1 or 3 at axis 1 (NCHW) or axis 3 (NHWC)",
        hint="give the data as .npy instead",
    )


def load_image(path: str, info: TensorInfo, resize: bool) -> np.ndarray:
    """Read an image as BGR (or gray) uint8 laid out for the input."""
    layout, channels, height, width = image_layout(info)
    image = decode_image(path, channels)
    if image is None:
        raise DataError(
            f"{path}: neither an image (any format OpenCV or Pillow reads) nor an array file (.npy, .npz, .pb)"
        )
    if resize:
        if not (isinstance(height, int) and isinstance(width, int)):
            raise DataError(
                f"--resize-input needs input {info.name!r} to fix H and W, but its shape is {info.shape_text()}"
            )
        # the resized image, its copy laid out for the input, and that cast to a 4-byte input dtype
        require_memory(6 * width * height * channels, f"--resize-input to {width}x{height} for {path}", UsageError)
        cv2 = require("cv2", purpose="reading images")

        try:
            image = cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)
        except cv2.error as exc:
            message = " ".join(str(exc).split())
            raise DataError(f"{path}: OpenCV cannot resize the image to {width}x{height} ({message[-160:]})") from None
    got_h, got_w = image.shape[:2]
    for want, got in ((height, got_h), (width, got_w)):
        if isinstance(want, int) and want != got:
            raise DataError(
                f"{path}: image is {got_w}x{got_h} (WxH), but input {info.name!r} takes "
                f"{width}x{height} ({info.shape_text()})",
                hint="pass --resize-input",
            )
    if image.ndim == 2:
        image = image[:, :, None]
    if layout in ("NCHW", "CHW"):
        image = image.transpose(2, 0, 1)
    if layout in ("NCHW", "NHWC"):
        image = image[None]
    return np.ascontiguousarray(image)


def load_file(path: str, info: TensorInfo, options: DataOptions) -> tuple[np.ndarray, bool]:
    """Read a data file for an input. Returns the array and whether it was an image."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".npy":
        return load_npy(path), False
    if suffix == ".npz":
        return load_npz(path, info.name), False
    if suffix == ".pb":
        return load_pb(path), False
    return load_image(path, info, options.resize_input), True


def check_shape(array: np.ndarray, info: TensorInfo, what: str, repeat: int = 1) -> None:
    """Check data against the input's rank and the dims the model fixes (a batch made by ``--repeat`` warns).

    Raises:
        DataError: another rank, or another size of a fixed dim.
    """
    model = info.shape
    if model is None:
        return
    if array.ndim != len(model):
        raise DataError(
            f"input {info.name!r} has rank {len(model)} (shape {info.shape_text()}), but {what} has shape "
            f"{list(array.shape)} (rank {array.ndim})"
        )
    for axis, (want, got) in enumerate(zip(model, array.shape, strict=True)):
        if not isinstance(want, int) or want < 0 or want == got:
            continue
        if axis == 0 and repeat > 1:
            warn_once(
                f"input {info.name!r}: batch dim is {got} after --repeat {repeat}, but the model fixes it to {want}"
            )
            continue
        raise DataError(
            f"input {info.name!r} fixes dim {axis} to {want} (shape {info.shape_text()}), but {what} has shape "
            f"{list(array.shape)}"
        )


def _transform(array: np.ndarray, code: CodeType, options: DataOptions, info: TensorInfo, what: str) -> np.ndarray:
    try:
        result = eval(code, {"__builtins__": {}}, {"data": array, "np": np})  # noqa: S307 - the user's own CLI code
    except Exception as exc:
        raise SpecError(
            f"--input-transform {options.input_transform!r} failed on {what} for input {info.name!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    try:
        result = np.asarray(result)
    except Exception:
        result = None
    kinds = "US" if info.dtype == "str" else "biufc"  # complex is refused, with its own message, by cast_to
    if result is None or result.dtype.kind not in kinds:
        held = "nothing usable" if result is None else f"{result.dtype}"
        wanted = "an array of strings" if info.dtype == "str" else "a numeric array"
        raise SpecError(
            f"--input-transform {options.input_transform!r} gave {held}, not {wanted}, for input {info.name!r}"
        )
    return result


def file_data(
    source: FileSource, info: TensorInfo, options: DataOptions, spec: CaseSpec, transform: CodeType | None = None
) -> tuple[np.ndarray, bool, str]:
    """Read, repeat, transform, check and cast one file for one input; return it, whether it was an image, and
    the file's path."""
    path = resolve_path(source.path, spec.base_dir, spec.cwd_first)
    array, is_image = load_file(path, info, options)
    what = f"{source.path!r}"
    if options.repeat > 1:
        if array.ndim == 0:
            raise DataError(f"--repeat cannot repeat the scalar in {what} for input {info.name!r}")
        require_memory(array.nbytes * (options.repeat + 1), f"--repeat {options.repeat} of {what}", UsageError)
        array = np.repeat(array, options.repeat, axis=0)
    if transform is not None:
        array = _transform(array, transform, options, info, what)
    check_shape(array, info, what, options.repeat)
    return cast_to(array, info, what), is_image, path


# ---------------------------------------------------------------- test cases


def with_input_shapes(
    inputs: Sequence[TensorInfo], shapes: Sequence[tuple[str | None, tuple[int, ...]]]
) -> list[TensorInfo]:
    """The model's inputs with the shapes ``--input-shape`` gives (which fix symbolic dims for every source).

    Raises:
        UsageError: an unknown input, a shape of another rank, or one that contradicts a dim the model fixes.
    """
    by_name = {info.name: info for info in inputs}
    seen: set[str] = set()
    for name, dims in shapes:
        if name is None:
            if len(inputs) != 1:
                raise UsageError(
                    f"--input-shape without a name needs a one-input model; give NAME:d0,d1,... for one of "
                    f"{', '.join(repr(i.name) for i in inputs)}"
                )
            name = inputs[0].name
        info = by_name.get(name)
        if info is None:
            raise UsageError(
                f"--input-shape names {name!r}; the model's inputs are {', '.join(repr(i.name) for i in inputs)}"
            )
        if name in seen:
            raise UsageError(f"--input-shape gives input {name!r} twice")
        seen.add(name)
        if info.shape is not None:
            if len(info.shape) != len(dims):
                raise UsageError(
                    f"--input-shape gives {name!r} {len(dims)} dims, but it has rank {len(info.shape)} ({info.shape_text()})"
                )
            for axis, (model_dim, dim) in enumerate(zip(info.shape, dims, strict=True)):
                if isinstance(model_dim, int) and model_dim >= 0 and model_dim != dim:
                    raise UsageError(
                        f"--input-shape gives {name!r} dim {axis} = {dim}, but the model fixes it to {model_dim} "
                        f"({info.shape_text()})"
                    )
        by_name[name] = TensorInfo(info.name, info.dtype, tuple(dims))
    return [by_name[info.name] for info in inputs]


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
        transform = compile(options.input_transform, "<--input-transform>", "eval")
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
            "--resize-input applies to image files, and no test case has one (it cannot apply to generators)"
        )
    if options.input_transform is not None and not saw_file:
        raise UsageError(
            "--input-transform applies to file data, and no test case has any (it cannot apply to generators)"
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
