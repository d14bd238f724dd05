"""The conformance corpus: bundles of every kind, passing, failing and crafted, that ``mgerun`` and
``mgerun-native`` must judge alike (docs/native.md).

Each entry is an id, a builder that writes one bundle into its own folder and returns its path, and the flags
both verifiers run it with. The ids are fixed here (the tests are parametrized by them before anything is built);
:func:`build` makes every bundle once, into a folder the test session shares.

The crafted bundles are every bundle case of the hostile-input suite (``tests/cli/test_hostile.py``, by id) and
those below: hash and size lies, members out of order or unlisted, manifest schema violations, ZIP64 headers that
lie, a model that is not ONNX, a requirement no reader knows.
"""

from __future__ import annotations

import json
import shutil
import struct
import warnings
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests import crafted
from tests.support import SAMPLES, rewrite_bundle, run_ok

# what both verifiers are given for every bundle (one checked run, nothing to time)
RUN = ("--iter", "1", "--warmup-iter", "0")


@dataclass(frozen=True)
class Entry:
    """One bundle of the corpus: ``build(folder)`` writes it and returns its path; ``args`` follow the path."""

    id: str
    kind: str  # "pass", "fail" (a check fails: exit 1) or "refuse" (bad input: exit 2): what mgerun says today
    build: Callable[[Path], Path]
    args: tuple[str, ...] = field(default=())


# ---------------------------------------------------------------- shared sources, packed once per build

_BASE: dict[str, Path] = {}


def _root() -> Path:
    return _BASE["root"]


def packed(name: str, model: Path | str, *flags: str) -> Path:
    """A bundle of ``model`` packed with ``flags`` (``-d`` included), once per corpus build."""
    target = _root() / "_base" / f"{name}.mgetest"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        run_ok("mgedump", model, *flags, "-o", target, "-q")
    return target


def sample_bundle(file: str, *flags: str, name: str | None = None) -> Path:
    """A sample model (``samples/models.json``) packed with its own spec and these flags."""
    from tests.support import sample

    entry = sample(file)
    return packed(name or entry.id.replace("/", "_"), entry.path, "-d", entry.spec, *flags)


def cnn() -> Path:
    return packed("cnn", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-d", "#rand(0,2)")


def copy_to(src: Path, folder: Path, name: str = "b.mgetest") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, folder / name)
    return folder / name


def edited(src: Path, folder: Path, edit, **kwargs) -> Path:
    """``src`` rewritten member by member (``tests.support.rewrite_bundle``) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns on a duplicate name, which some cases write on purpose
        return rewrite_bundle(src, folder / "b.mgetest", edit, **kwargs)


# ---------------------------------------------------------------- models written here


def _kinds_model(folder: Path) -> Path:
    """One float input, and an output of each kind the assertion treats apart: int64 (ArgMax), bool (Greater),
    float64 (a Cast), strings (a Constant) and an empty float tensor (a Constant of shape [0])."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("ArgMax", ["x"], ["idx"], axis=1, keepdims=0),
        helper.make_node("Greater", ["x", "half"], ["pos"]),
        helper.make_node("Cast", ["x"], ["x64"], to=TensorProto.DOUBLE),
        helper.make_node("Mul", ["x64", "k"], ["dbl"]),
        helper.make_node(
            "Constant", [], ["names"], value=helper.make_tensor("nv", TensorProto.STRING, [3], [b"cat", b"dog", b"owl"])
        ),
        helper.make_node("Constant", [], ["none"], value=helper.make_tensor("ev", TensorProto.FLOAT, [0], [])),
    ]
    graph = helper.make_graph(
        nodes,
        "kinds",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [
            helper.make_tensor_value_info("idx", TensorProto.INT64, [2]),
            helper.make_tensor_value_info("pos", TensorProto.BOOL, [2, 8]),
            helper.make_tensor_value_info("dbl", TensorProto.DOUBLE, [2, 8]),
            helper.make_tensor_value_info("names", TensorProto.STRING, [3]),
            helper.make_tensor_value_info("none", TensorProto.FLOAT, [0]),
        ],
        initializer=[
            helper.make_tensor("half", TensorProto.FLOAT, [], [0.5]),
            helper.make_tensor("k", TensorProto.DOUBLE, [], [1234.5678]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "kinds.onnx"
    onnx.save(model, str(path))
    return path


def kinds() -> Path:
    src = _kinds_model(_root() / "_base")
    return packed("kinds", src, "-d", "#rand(0,1)")


def _big_output_model(folder: Path) -> Path:
    """x [1,400] -> y = x * 3: 400 output elements, so one element's error moves the max but not the p99,
    the mean or the median."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "k"], ["y"]), helper.make_node("Add", ["x", "k"], ["z"])],
        "wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 400])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 400]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 400]),
        ],
        initializer=[helper.make_tensor("k", TensorProto.FLOAT, [], [3.0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "wide400.onnx"
    onnx.save(model, str(path))
    return path


def wide(name: str, *flags: str) -> Path:
    return packed(name, _big_output_model(_root() / "_base"), "-d", "#rand(0,1)", *flags)


# ---------------------------------------------------------------- edits of the expected outputs (hashes fixed)


def _tensor_edit(member: str, change: Callable[[np.ndarray], np.ndarray]):
    from mgedump.bundle.tensorproto import decode, encode

    def edit(names, manifest, members):
        array, name = decode(members[member])
        members[member] = encode(change(array.copy()), name)

    return edit


def _set(index, value):
    def change(a: np.ndarray) -> np.ndarray:
        a[index] = value
        return a

    return change


def _one_outlier(a: np.ndarray) -> np.ndarray:
    a[0, 7] += np.float32(0.5)  # one element of 400: the max error, but not the p99, mean or median
    return a


def _forty_percent_moved(a: np.ndarray) -> np.ndarray:
    a[0, :160] += np.float32(10)  # 160 of 400 elements (40%) far off: the max error, but not the median
    return a


def _changed_probability(row: int = 1, key: int = 2, by: float = 0.05):
    from mgedump.bundle.valueproto import decode_value, encode_value
    from mgedump.model.valuetype import parse

    vtype = parse("seq(map(int64,tensor(float)))")

    def edit(names, manifest, members):
        member = "test_data_set_0/output_1.pb"
        value, name = decode_value(members[member], vtype)
        value[row][key] = np.asarray(value[row][key] + by, np.float32)
        members[member] = encode_value(value, vtype, name)

    return edit


def _sequence_shorter(names, manifest, members):
    from mgedump.bundle.valueproto import decode_value, encode_value
    from mgedump.model.valuetype import parse

    vtype = parse("seq(tensor(float))")
    member = "test_data_set_0/output_0.pb"
    value, name = decode_value(members[member], vtype)
    members[member] = encode_value(value + value, vtype, name)  # one element more than the model gives


def _optional_emptied(names, manifest, members):
    from mgedump.bundle.valueproto import encode_value
    from mgedump.model.valuetype import parse

    members["test_data_set_0/output_2.pb"] = encode_value(None, parse("optional(tensor(float))"), "maybe")


def _manifest(**changes):
    def edit(names, manifest, members):
        for path, value in changes.items():
            where = manifest
            *parents, last = path.split("__")
            for key in parents:
                where = where[key]
            where[last] = value

    return edit


# ---------------------------------------------------------------- archives written by hand


def _stored_zip(members: list[tuple[str, bytes]], *, zip64: bool = False, lie: dict | None = None) -> bytes:
    """A stored ZIP archive of these members, written by hand. ``zip64``: every header carries a ZIP64 extra
    field and the archive ends with a ZIP64 end record (valid, as a large bundle is). ``lie``: member name ->
    the size its ZIP64 extra fields declare instead of the true one."""
    lie = lie or {}
    out, central = bytearray(), bytearray()
    for name, data in members:
        raw = name.encode()
        crc = 0 if name in lie else zlib.crc32(data)
        size = lie.get(name, len(data))
        offset = len(out)
        if zip64:
            local_extra = struct.pack("<HHQQ", 1, 16, size, size)
            out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                               len(raw), len(local_extra)) + raw + local_extra  # fmt: skip
            extra = struct.pack("<HHQQQ", 1, 24, size, size, offset)
            central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 45, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF,
                                   0xFFFFFFFF, len(raw), len(extra), 0, 0, 0, 0o644 << 16, 0xFFFFFFFF) + raw + extra  # fmt: skip
        else:
            out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, 0, 0, 0x21, crc, size, size, len(raw), 0) + raw
            central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, 0, 0, 0x21, crc, size, size,
                                   len(raw), 0, 0, 0, 0, 0o644 << 16, offset) + raw  # fmt: skip
        out += data
    cd_offset, count = len(out), len(members)
    out += central
    if zip64:
        eocd64 = len(out)
        out += struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, len(central), cd_offset)
        out += struct.pack("<4sIQI", b"PK\x06\x07", 0, eocd64, 1)
        out += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    else:
        out += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, len(central), cd_offset, 0)
    return bytes(out)


def _members(src: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(src) as zf:
        return [(info.filename, zf.read(info)) for info in zf.infolist()]


def rezipped(src: Path, folder: Path, **kwargs) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return crafted.write(folder / "b.mgetest", _stored_zip(_members(src), **kwargs))


def _eocd64_count_lie(src: Path, folder: Path) -> Path:
    """A ZIP64 archive whose end record claims 2^40 entries."""
    data = bytearray(_stored_zip(_members(src), zip64=True))
    at = data.rfind(b"PK\x06\x06")
    struct.pack_into("<QQ", data, at + 24, 1 << 40, 1 << 40)
    folder.mkdir(parents=True, exist_ok=True)
    return crafted.write(folder / "b.mgetest", bytes(data))


def _eocd64_past_end(src: Path, folder: Path) -> Path:
    """A ZIP64 locator that points past the end of the file."""
    data = bytearray(_stored_zip(_members(src), zip64=True))
    at = data.rfind(b"PK\x06\x07")
    struct.pack_into("<Q", data, at + 8, len(data) + 4096)
    folder.mkdir(parents=True, exist_ok=True)
    return crafted.write(folder / "b.mgetest", bytes(data))


def _hash_lie(src: Path, folder: Path) -> Path:
    """One byte of an input changed in place: same size, the manifest's sha256 no longer matches."""
    data = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as zf:
        info = zf.getinfo("test_data_set_0/input_0.pb")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + info.file_size - 1] ^= 0x55
    folder.mkdir(parents=True, exist_ok=True)
    return crafted.write(folder / "b.mgetest", bytes(data))


def _model_is(payload: bytes):
    def edit(names, manifest, members):
        members["model.onnx"] = payload

    return edit


def _model_source(path: Path):
    return _model_is(path.read_bytes())


def _drop(name: str):
    def edit(names, manifest, members):
        return [n for n in names if n != name]

    return edit


def _unlisted(names, manifest, members):
    members["extra.bin"] = b"extra"
    return [*names, "extra.bin"]


def _swap_inputs_and_outputs_order(names, manifest, members):
    i, j = names.index("test_data_set_0/input_0.pb"), names.index("test_data_set_0/output_0.pb")
    names[i], names[j] = names[j], names[i]
    return names


def _refers_unlisted(names, manifest, members):
    manifest["test_cases"][0]["outputs"][0] = "test_data_set_7/output_0.pb"


def _huge_manifest(names, manifest, members):
    manifest["padding"] = "x" * (17 << 20)  # over the 16 MiB a reader reads


def _strings_claim(names, manifest, members):
    """The string output's expected member declares 2^40 strings and holds three."""
    members["test_data_set_0/output_3.pb"] = crafted.pb_bytes([1 << 40], 8, extra=b"\x32\x01a" * 3 + b"\x42\x05names")


def _input_named(other: str):
    def edit(names, manifest, members):
        from mgedump.bundle.tensorproto import decode, encode

        array, _ = decode(members["test_data_set_0/input_0.pb"])
        members["test_data_set_0/input_0.pb"] = encode(array, other)

    return edit


def _input_int64_for_float(names, manifest, members):
    from mgedump.bundle.tensorproto import decode, encode

    array, name = decode(members["test_data_set_0/input_0.pb"])
    members["test_data_set_0/input_0.pb"] = encode(array.astype(np.int64), name)


def _gather_out_of_range(names, manifest, members):
    from mgedump.bundle.tensorproto import decode, encode

    for n in names:
        if n.startswith("test_data_set_0/input_"):
            array, name = decode(members[n])
            if array.dtype.kind == "i":
                members[n] = encode(np.full_like(array, 10_000), name)


# ---------------------------------------------------------------- the entries


def _hostile_ids() -> tuple[str, ...]:
    """The bundle cases of the hostile-input suite that run ``mgerun BUNDLE`` and nothing else."""
    return (
        "bundle-empty-file",
        "bundle-text",
        "bundle-is-a-model",
        "manifest-nested-deep",
        "manifest-5000-digit-int",
        "manifest-not-json",
        "manifest-a-list",
        "manifest-not-utf8",
        "manifest-maxerr-nan",
        "manifest-maxerr-negative",
        "manifest-maxerr-text",
        "manifest-version-text",
        "manifest-missing-members",
        "manifest-members-not-a-list",
        "manifest-test-cases-not-a-list",
        "manifest-case-names-missing-member",
        "member-past-the-end",
        "member-absolute-path",
        "member-backslash-path",
        "member-duplicate",
        "member-model-missing",
        "members-compressed",
        "member-input-declares-2^40",
        "member-input-unknown-type",
        "member-input-wrong-shape",
        "member-input-wrong-dtype",
        "member-input-external-data",
        "zip-encrypted",
        "bundle-member-file-and-folder",
        "bundle-members-differ-in-case",
        "bundle-data-named-like-model",
        "bundle-3000-cases-one-member",
        "bundle-millions-of-empty-strings",
        "bundle-external-data-absolute",
        "bundle-external-data-up",
    )


HOSTILE_OPTION_IDS = ("thread-negative", "iter-negative", "warmup-negative", "maxerr-nan-mgerun", "graph-opt-unknown")


def _hostile(case_id: str) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        from tests.cli import test_hostile as hostile

        hostile._ASSETS["root"] = _root() / "_hostile_assets"
        copy_to(cnn_one(), hostile._ASSETS["root"])
        case = next(c for c in hostile.CASES if c.id == case_id)
        folder.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            args = case.build(folder)
        assert len(args) == 1, (case_id, args)
        return Path(args[0])

    return build


_OPTION_FLAGS = {
    "thread-negative": ("--thread", "-1"),
    "iter-negative": ("--iter", "-5"),
    "warmup-negative": ("--warmup-iter", "-1"),
    "maxerr-nan-mgerun": ("--maxerr", "nan"),
    "graph-opt-unknown": ("--graph-opt", "max"),
}


def cnn_one() -> Path:
    return packed("cnn1", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)")


def external() -> Path:
    return sample_bundle("external/mlp.onnx")


def v2() -> Path:
    return packed("cnn_v2", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--variants", "fp32,ioc16,io16xc32",
                  "--maxerr", "0.01")  # fmt: skip


def _from(factory: Callable[[], Path]) -> Callable[[Path], Path]:
    return lambda folder: copy_to(factory(), folder)


def _edit_of(factory: Callable[[], Path], edit, **kwargs) -> Callable[[Path], Path]:
    return lambda folder: edited(factory(), folder, edit, **kwargs)


def _fixed(factory: Callable[[], Path], edit) -> Callable[[Path], Path]:
    return _edit_of(factory, edit, fix_hashes=True)


def _sample(file: str, *flags: str, name: str | None = None) -> Callable[[Path], Path]:
    return _from(lambda: sample_bundle(file, *flags, name=name))


def _gather_bundle() -> Path:
    return packed("gather", SAMPLES / "bad" / "gather_index.onnx", "-d", "#rand(0,3)")


def entries() -> list[Entry]:
    """Every entry of the corpus, in a fixed order."""
    out = [
        # -- passing, format version 1
        Entry("cnn", "pass", _from(cnn)),
        Entry("nhwc", "pass", _sample("nhwc.onnx")),
        Entry("gray", "pass", _sample("gray.onnx")),
        Entry("multi-input", "pass", _sample("multi_input.onnx")),
        Entry("dynamic-batch", "pass", _sample("dynamic_batch.onnx")),
        Entry("ir3-mlp", "pass", _sample("ir3_mlp.onnx")),
        Entry("free-width", "pass", _sample("free_width.onnx")),
        Entry("free-dims", "pass", _sample("free_dims.onnx")),
        Entry("if-branches", "pass", _sample("if_branches.onnx")),
        Entry("half-relu-float16-model", "pass", _sample("half_relu.onnx")),
        Entry("external-data", "pass", _from(external)),
        Entry("external-function-const", "pass", _sample("external/function_const.onnx")),
        Entry("zipmap-seq-of-maps", "pass", _sample("values/zipmap_classifier.onnx")),
        Entry("sequences-and-optional", "pass", _sample("values/sequences.onnx")),
        Entry("kinds-int-bool-double-str-empty", "pass", _from(kinds)),
        Entry(
            "ioc16",
            "pass",
            _sample(
                "wide_mlp.onnx", "--optimize-for-inference", "--enable-ioc16", "--maxerr", "0.01", name="wide_ioc16"
            ),
        ),
        Entry(
            "io16xc32",
            "pass",
            _sample("fan.onnx", "--optimize-for-inference", "--enable-io16xc32", "--maxerr", "0.01", name="fan_io16"),
        ),
        Entry(
            "float16-layernorm",
            "pass",
            _sample(
                "float16/layernorm_sum.onnx",
                "--optimize-for-inference",
                "--enable-ioc16",
                "--maxerr",
                "0.05",
                name="layernorm_ioc16",
            ),
        ),  # fmt: skip
        Entry("int8-static", "pass", _sample("cnn.onnx", "--quantize", "int8", "--maxerr", "0.2", name="cnn_int8")),
        Entry(
            "int8-dynamic",
            "pass",
            _sample(
                "wide_mlp.onnx", "--quantize", "int8", "--quantize-mode", "dynamic", "--maxerr", "0.2", name="wo_int8d"
            ),
        ),  # fmt: skip
        Entry("no-assert", "pass", _sample("gray.onnx", "--no-assert", name="gray_noassert")),
        Entry("silent", "pass", _sample("gray.onnx", "--silent", name="gray_silent")),
        Entry("silent-flag", "pass", _sample("nhwc.onnx"), ("--silent",)),
        Entry("zip64-headers", "pass", lambda folder: rezipped(cnn_one(), folder, zip64=True)),
        # -- statistics and bounds of their own
        Entry(
            "stat-p99-outlier-passes",
            "pass",
            _fixed(
                lambda: wide("w_p99", "--error-stat", "p99", "--maxerr", "0.001"),
                _tensor_edit("test_data_set_0/output_0.pb", _one_outlier),
            ),
        ),
        Entry(
            "stat-mean-outlier-passes",
            "pass",
            _fixed(
                lambda: wide("w_mean", "--error-stat", "mean", "--maxerr", "0.01"),
                _tensor_edit("test_data_set_0/output_0.pb", _one_outlier),
            ),
        ),
        Entry(
            "stat-median-outlier-passes",
            "pass",
            _fixed(
                lambda: wide("w_median", "--error-stat", "median", "--maxerr", "0.001"),
                _tensor_edit("test_data_set_0/output_0.pb", _one_outlier),
            ),
        ),
        Entry(  # issue 33: 40% of the elements moved by 10 pass a bound on the median; the line shows the max
            "stat-median-hides-moved",
            "pass",
            _fixed(
                lambda: wide("w_median40", "--error-stat", "median", "--maxerr", "0.0001"),
                _tensor_edit("test_data_set_0/output_0.pb", _forty_percent_moved),
            ),
        ),
        Entry(  # mgerun --error-stat max takes back the largest-error check
            "stat-median-max-again",
            "fail",
            _fixed(
                lambda: wide("w_median40", "--error-stat", "median", "--maxerr", "0.0001"),
                _tensor_edit("test_data_set_0/output_0.pb", _forty_percent_moved),
            ),
            ("--error-stat", "max"),
        ),
        Entry(  # and OUTPUT:STAT bounds one output's median
            "stat-given-per-output",
            "pass",
            _fixed(
                lambda: wide("w_median40", "--error-stat", "median", "--maxerr", "0.0001"),
                _tensor_edit("test_data_set_0/output_0.pb", _forty_percent_moved),
            ),
            ("--error-stat", "max", "--error-stat", "y:median"),
        ),
        Entry(
            "stat-mean-fails",
            "fail",
            _fixed(
                lambda: wide("w_mean2", "--error-stat", "mean", "--maxerr", "0.0001"),
                _tensor_edit("test_data_set_0/output_0.pb", _one_outlier),
            ),
        ),
        Entry(
            "stat-per-output",
            "fail",
            _fixed(
                lambda: wide("w_outstat", "--error-stat", "y:p99", "--maxerr", "0.001"),
                _tensor_edit("test_data_set_0/output_1.pb", _one_outlier),
            ),
        ),
        Entry(
            "bound-per-output-passes",
            "pass",
            _fixed(
                lambda: wide("w_outmax", "--maxerr", "0.0001", "--maxerr", "y:1"),
                _tensor_edit("test_data_set_0/output_0.pb", _one_outlier),
            ),
        ),
        Entry(
            "bound-per-output-fails",
            "fail",
            _fixed(
                lambda: wide("w_outmax2", "--maxerr", "1", "--maxerr", "z:0.0001"),
                _tensor_edit("test_data_set_0/output_1.pb", _one_outlier),
            ),
        ),
        # -- --maxerr on the run
        Entry(
            "run-maxerr-fails",
            "fail",
            _sample(
                "wide_mlp.onnx", "--optimize-for-inference", "--enable-ioc16", "--maxerr", "0.01", name="wide_ioc16"
            ),
            ("--maxerr", "1e-7"),
        ),  # fmt: skip
        Entry(
            "run-maxerr-output-fails",
            "fail",
            _fixed(lambda: wide("w_plain"), _tensor_edit("test_data_set_0/output_0.pb", _one_outlier)),
            ("--maxerr", "1", "--maxerr", "y:0.1"),
        ),
        Entry(
            "run-maxerr-loosens",
            "pass",
            _fixed(lambda: wide("w_plain"), _tensor_edit("test_data_set_0/output_0.pb", _one_outlier)),
            ("--maxerr", "0.5"),
        ),
        # -- format version 2
        Entry("v2-all-variants", "pass", _from(v2)),
        Entry("v2-variant-ioc16", "pass", _from(v2), ("--variant", "ioc16")),
        Entry("v2-maxerr-fails-float16", "fail", _from(v2), ("--maxerr", "1e-7")),
        Entry(
            "v2-int8",
            "pass",
            _from(
                lambda: packed(
                    "mlp_v2",
                    SAMPLES / "wide_mlp.onnx",
                    "-d",
                    "#rand(0,1)",
                    "--variants",
                    "fp32,int8",
                    "--maxerr",
                    "0.5",
                )
            ),
        ),
        Entry(
            "v2-external",
            "pass",
            _from(
                lambda: packed(
                    "ext_v2",
                    SAMPLES / "external" / "mlp.onnx",
                    "-d",
                    "#rand(0,1)",
                    "--variants",
                    "fp32,ioc16",
                    "--maxerr",
                    "0.05",
                )
            ),
        ),
        Entry(
            "v2-tampered-reference-fails",
            "fail",
            _fixed(v2, _tensor_edit("test_data_set_0/output_0.pb", _set((0, 3), 0.9))),
        ),
        # -- failing checks
        Entry("expected-shifted", "fail", lambda folder: _zoo_failing(folder)),
        Entry("weight-changed", "fail", lambda folder: _weight_changed(folder)),
        Entry(
            "zipmap-probability-changed",
            "fail",
            _fixed(lambda: sample_bundle("values/zipmap_classifier.onnx"), _changed_probability()),
        ),
        Entry(
            "sequence-length-differs", "fail", _fixed(lambda: sample_bundle("values/sequences.onnx"), _sequence_shorter)
        ),
        Entry(
            "optional-empty-in-expect",
            "fail",
            _fixed(lambda: sample_bundle("values/sequences.onnx"), _optional_emptied),
        ),
        Entry("expected-nan", "fail", _fixed(cnn, _tensor_edit("test_data_set_1/output_0.pb", _set((0, 4), np.nan)))),
        Entry("expected-inf", "fail", _fixed(cnn, _tensor_edit("test_data_set_0/output_0.pb", _set((0, 0), np.inf)))),
        Entry(
            "expected-shape-differs",
            "fail",
            _fixed(cnn, _tensor_edit("test_data_set_0/output_0.pb", lambda a: a[:, :5].copy())),
        ),
        Entry(
            "expected-dtype-differs",
            "fail",
            _fixed(cnn, _tensor_edit("test_data_set_0/output_0.pb", lambda a: a.astype(np.float64))),
        ),
        Entry("int-differs", "fail", _fixed(kinds, _tensor_edit("test_data_set_0/output_0.pb", lambda a: a + 3))),
        Entry("bool-differs", "fail", _fixed(kinds, _tensor_edit("test_data_set_0/output_1.pb", lambda a: ~a))),
        Entry(
            "double-differs",
            "fail",
            _fixed(kinds, _tensor_edit("test_data_set_0/output_2.pb", lambda a: a * (1 + 1e-3))),
        ),
        Entry("strings-differ", "fail", _fixed(kinds, _tensor_edit("test_data_set_0/output_3.pb", _set(1, "cow")))),
        Entry("model-fails-to-run", "fail", _fixed(_gather_bundle, _gather_out_of_range)),
        # -- crafted: refused with one line and exit 2
        Entry("hash-lie", "refuse", lambda folder: _hash_lie(cnn_one(), folder)),
        Entry("size-lie", "refuse", _edit_of(cnn_one, _manifest_size_lie)),
        Entry("member-missing", "refuse", _edit_of(cnn_one, _drop("test_data_set_0/output_0.pb"))),
        Entry("member-unlisted", "refuse", _edit_of(cnn_one, _unlisted)),
        Entry("members-out-of-order", "refuse", _edit_of(cnn_one, _swap_inputs_and_outputs_order)),
        Entry("manifest-not-first", "refuse", _edit_of(cnn_one, lambda n, m, mem: [*n[1:], n[0]])),
        Entry("manifest-over-16-mib", "refuse", _edit_of(cnn_one, _huge_manifest)),
        Entry("manifest-format-other", "refuse", _edit_of(cnn_one, _manifest(format="other-bundle"))),
        Entry("manifest-version-newer", "refuse", _edit_of(cnn_one, _manifest(format_version=3))),
        Entry("manifest-version-zero", "refuse", _edit_of(cnn_one, _manifest(format_version=0))),
        Entry("manifest-cpu-a-list", "refuse", _edit_of(cnn_one, _manifest(environment__cpu=[]))),
        Entry("manifest-dtype-unknown", "refuse", _edit_of(cnn_one, _dtype_unknown)),
        Entry("manifest-sha256-not-hex", "refuse", _edit_of(cnn_one, _sha_not_hex)),
        Entry("manifest-refers-unlisted", "refuse", _edit_of(cnn_one, _refers_unlisted)),
        Entry("manifest-no-test-cases", "refuse", _edit_of(cnn_one, _manifest(test_cases=[]))),
        Entry("requirement-unknown", "refuse", _edit_of(cnn_one, _manifest(requirements=["quantum-cpu"]))),
        Entry("model-not-onnx", "refuse", _fixed(cnn_one, _model_source(SAMPLES / "bad" / "not_onnx.onnx"))),
        Entry("model-truncated", "refuse", _fixed(cnn_one, _model_source(SAMPLES / "bad" / "truncated.onnx"))),
        Entry("model-ir-too-new", "refuse", _fixed(cnn_one, _model_source(SAMPLES / "bad" / "ir_too_new.onnx"))),
        Entry("model-other-io", "refuse", _fixed(cnn_one, _model_source(SAMPLES / "gray.onnx"))),
        Entry("input-named-otherwise", "refuse", _fixed(cnn_one, _input_named("not_data"))),
        Entry("input-int64-for-float", "refuse", _fixed(cnn_one, _input_int64_for_float)),
        Entry("strings-claim-2^40", "refuse", _fixed(kinds, _strings_claim)),
        Entry(
            "zip64-size-lie",
            "refuse",
            lambda folder: rezipped(cnn_one(), folder, zip64=True, lie={"model.onnx": 1 << 40}),
        ),
        Entry("zip64-count-lie", "pass", lambda folder: _eocd64_count_lie(cnn_one(), folder)),
        Entry("zip64-locator-past-end", "pass", lambda folder: _eocd64_past_end(cnn_one(), folder)),
        Entry("external-data-member-tampered", "refuse", lambda folder: _external_tampered(folder)),
        Entry("v2-variant-unknown", "refuse", _from(v2), ("--variant", "int4")),
        Entry("v1-variant-other", "refuse", _from(cnn_one), ("--variant", "ioc16")),
    ]
    out += [Entry(f"hostile-{case_id}", "refuse", _hostile(case_id)) for case_id in _hostile_ids()]
    out += [
        Entry(f"option-{case_id}", "refuse", _from(cnn_one), _OPTION_FLAGS[case_id]) for case_id in HOSTILE_OPTION_IDS
    ]
    return out


def _zoo_failing(folder: Path) -> Path:
    from tests.zoo import failing_bundle

    folder.mkdir(parents=True, exist_ok=True)
    return failing_bundle(cnn(), folder / "b.mgetest")


def _weight_changed(folder: Path) -> Path:
    from tests.support import with_changed_weight

    folder.mkdir(parents=True, exist_ok=True)
    return with_changed_weight(cnn(), folder / "b.mgetest")


def _manifest_size_lie(names, manifest, members):
    entry = next(e for e in manifest["members"] if e["name"] == "test_data_set_0/input_0.pb")
    entry["size"] += 1


def _dtype_unknown(names, manifest, members):
    manifest["inputs"][0]["dtype"] = "float7"


def _sha_not_hex(names, manifest, members):
    manifest["model"]["sha256"] = "Z" * 64


def _external_tampered(folder: Path) -> Path:
    """The external data member of a bundle changed after packing (its size kept, its hash not fixed)."""

    def edit(names, manifest, members):
        data = bytearray(members["model.onnx.data"])
        data[len(data) // 2] ^= 0xFF
        members["model.onnx.data"] = bytes(data)

    return edited(external(), folder, edit)


# ---------------------------------------------------------------- building


def build(root: Path) -> dict[str, dict]:
    """Build every entry under ``root`` (``root/ID/...``); return the index: id -> {path, args, kind}, also
    written to ``root/index.json``."""
    _BASE["root"] = root
    index = {}
    for entry in entries():
        path = entry.build(root / entry.id)
        index[entry.id] = {"path": str(path), "args": list(entry.args), "kind": entry.kind}
    (root / "index.json").write_text(json.dumps(index, indent=1), encoding="utf-8")
    return index
