"""A command's outputs, all or none: one check of every input and output before any work, the data file the tool
names beside ``--output-model`` (taken only when it is the data of the model the call replaces), a refusal after
some outputs were staged leaving none, ``trace.dump``'s model, bundle and strip info written together, and the
same command writing the same bytes.

The refusals themselves (each output on each input, exit 2, one line, nothing changed) are rows of
``tests/cli/test_hostile.py``; this file holds what succeeds, and what fails late.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from mgedump import PackOptions, pack
from mgedump.base.errors import MgeError, OutputError
from mgedump.base.outputs import Output, Outputs
from mgedump.model.runtime import infer, open_session
from tests.support import SAMPLES

EXTERNAL = SAMPLES / "external"


def _external(folder: Path, name: str = "mlp.onnx", location: str = "mlp.weights") -> Path:
    model = onnx.load(str(EXTERNAL / "mlp.onnx"))
    onnx.save_model(model, str(folder / name), save_as_external_data=True, location=location, size_threshold=0)
    return folder / name


def _files(folder: Path) -> dict[str, str]:
    """Every file under folder (hidden ones too: a temporary file left behind shows), with its sha256."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _run(model: Path) -> np.ndarray:
    session = open_session(str(model))
    name = session.get_inputs()[0].name
    return infer(session, {name: np.ones((1, 32), np.float32)})[0]


def test_packing_again_to_the_same_output_model_replaces_its_data(tmp_path):
    given = _external(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    options = PackOptions(cases=["#rand(0,1)"], model_out=str(out / "m.onnx"))
    pack(str(given), out / "b.mgetest", options)
    first = _files(out)
    assert set(first) == {"b.mgetest", "m.onnx", "model.onnx.data"}
    pack(str(given), out / "b.mgetest", options)  # the same call again: model.onnx.data is its own
    assert _files(out) == first  # the same bytes
    np.testing.assert_array_equal(_run(out / "m.onnx"), _run(given))


def test_a_data_file_another_model_reads_is_never_replaced(tmp_path):
    given = _external(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    options = PackOptions(cases=["#rand(0,1)"], model_out=str(out / "m.onnx"))
    pack(str(given), out / "b.mgetest", options)
    shutil.copyfile(out / "m.onnx", out / "sibling.onnx")  # a second model reading model.onnx.data
    before = _files(out)
    with pytest.raises(OutputError, match="would write .*model.onnx.data beside it, and a file is there already"):
        pack(str(given), out / "c.mgetest", options)
    assert _files(out) == before


def test_the_data_file_of_a_model_at_another_path_is_refused(tmp_path):
    given = _external(tmp_path)
    _external(tmp_path, "old.onnx", "model.onnx.data")
    before = _files(tmp_path)
    with pytest.raises(OutputError, match="a file is there already"):
        pack(str(given), tmp_path / "b.mgetest", PackOptions(cases=["#rand(0,1)"], model_out=str(tmp_path / "n.onnx")))
    assert _files(tmp_path) == before


def test_a_model_without_external_data_leaves_a_data_file_beside_alone(tmp_path):
    (tmp_path / "model.onnx.data").write_bytes(b"someone's")
    pack(
        str(SAMPLES / "cnn.onnx"),
        tmp_path / "b.mgetest",
        PackOptions(cases=["#rand(0,1)"], model_out=str(tmp_path / "m.onnx")),
    )
    assert (tmp_path / "model.onnx.data").read_bytes() == b"someone's"


@pytest.mark.parametrize("fails_in", ["_write_strip_info", "write_model_out"])
def test_a_refusal_after_outputs_were_staged_leaves_none(tmp_path, monkeypatch, fails_in):
    import mgedump.commands.pack as pack_module

    (tmp_path / "in").mkdir()
    given = _external(tmp_path / "in")
    out = tmp_path / "out"
    out.mkdir()
    (out / "b.mgetest").write_bytes(b"an older bundle")  # there before: must stay as it was
    real = getattr(pack_module, fails_in)

    def staged_then_refused(*args, **kwargs):
        real(*args, **kwargs)  # its files are staged beside their targets...
        raise OutputError("refused late")  # ...then the command fails

    monkeypatch.setattr(pack_module, fails_in, staged_then_refused)
    before = _files(out)
    options = PackOptions(cases=["#rand(0,1)"], model_out=str(out / "m.onnx"), strip_info=str(out / "b.json"))
    with pytest.raises(OutputError, match="refused late"):
        pack(str(given), out / "b.mgetest", options)
    assert _files(out) == before  # no bundle, model, data file, strip info or temporary file


def test_an_interruption_while_writing_leaves_nothing(tmp_path, monkeypatch):
    import mgedump.commands.pack as pack_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pack_module, "write_model_out", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pack(
            str(SAMPLES / "cnn.onnx"),
            tmp_path / "b.mgetest",
            PackOptions(cases=["#rand(0,1)"], model_out=str(tmp_path / "m.onnx")),
        )
    assert _files(tmp_path) == {}


def test_the_one_check_comes_before_any_work(tmp_path, monkeypatch):
    """Data files named by -d, calibration data and the model's external data are known before the model opens."""
    import mgedump.commands.pack as pack_module

    def never(*args, **kwargs):
        raise AssertionError("the model was opened before the outputs were checked")

    monkeypatch.setattr(pack_module, "open_session", never)
    given = _external(tmp_path)
    npy = tmp_path / "x.npy"
    np.save(npy, np.ones((1, 32), np.float32))
    calibration = tmp_path / "cal.txt"
    calibration.write_text(f"{npy}\n", encoding="utf-8")
    for options, output in [
        (PackOptions(cases=[str(npy)]), npy),
        (PackOptions(cases=[f"x:{npy}"]), npy),
        (PackOptions(cases=["#rand(0,1)"]), tmp_path / "mlp.weights"),
        (PackOptions(cases=["#rand(0,1)"], model_out=str(tmp_path / "mlp.weights")), tmp_path / "b.mgetest"),
        (PackOptions(cases=[str(npy)], model_out=str(npy)), tmp_path / "b.mgetest"),
        (PackOptions(cases=[f"@{calibration}"], model_out=str(npy)), tmp_path / "b.mgetest"),  # read through a list
    ]:
        with pytest.raises(MgeError, match="is the input"):
            pack(str(given), output, options)
    cnn = shutil.copyfile(SAMPLES / "cnn.onnx", tmp_path / "cnn.onnx")
    cnn_npy = tmp_path / "c.npy"
    np.save(cnn_npy, np.ones((1, 3, 32, 32), np.float32))
    calibration.write_text(f"{cnn_npy}\n", encoding="utf-8")
    from mgedump import OptimizeOptions

    int8 = OptimizeOptions(optimize_for_inference=True, precision="int8")
    for calibrate, output in [
        ([f"@{calibration}"], calibration),
        ([f"@{calibration}"], cnn_npy),
        ([str(cnn_npy)], cnn_npy),
    ]:
        options = PackOptions(cases=["#rand(0,1)"], optimize=int8, calibrate=calibrate)
        with pytest.raises(MgeError, match="is the input"):
            pack(str(cnn), output, options)


def test_the_same_command_writes_the_same_bytes(tmp_path):
    given = _external(tmp_path)
    sums = []
    for run in ("a", "b"):
        folder = tmp_path / run
        folder.mkdir()
        options = PackOptions(
            cases=["#rand(0,1)", "#rand(0,2)"], model_out=str(folder / "m.onnx"), strip_info=str(folder / "b.json")
        )
        pack(str(given), folder / "b.mgetest", options)
        sums.append(_files(folder))
    assert sums[0] == sums[1] and len(sums[0]) == 5


def test_the_table_refuses_a_chosen_name_unless_it_is_the_tools_own(tmp_path):
    (tmp_path / "d").write_bytes(b"x")
    with pytest.raises(OutputError, match="a file is there already"):
        Outputs([Output("model_out", str(tmp_path / "d"), chosen=True)]).check()
    Outputs([Output("model_out", str(tmp_path / "d"), chosen=True, own=True)]).check()
    with pytest.raises(OutputError, match="is the input"):
        Outputs([Output("model_out", str(tmp_path / "d"), chosen=True, own=True)]).check([str(tmp_path / "d")])


# ---------------------------------------------------------------- trace.dump: the model or bundle with its strip info


@pytest.fixture
def traced():
    from mgedump import tensor
    from mgedump.jit import trace

    @trace(capture_as_const=True)
    def f(x):
        return np.exp(x) * 2

    f(tensor(np.ones((1, 4), np.float32)))
    return f


@pytest.mark.parametrize("target", ["k.onnx", "k.mgetest"])
def test_dump_refuses_strip_info_on_its_own_file_before_any_work(traced, tmp_path, target):
    keywords = {"input_data": ["#rand(0,1)"]} if target.endswith(".mgetest") else {}
    with pytest.raises(ValueError, match="would be written over the dumped file"):
        traced.dump(str(tmp_path / target), strip_info_file=str(tmp_path / target), **keywords)
    config = tmp_path / "k.required_operators.config"  # the strip info's second file, beside k.json
    with pytest.raises(ValueError, match="would be written over the dumped file"):
        traced.dump(str(config), strip_info_file=str(tmp_path / "k.json"), **keywords)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("target", ["k.onnx", "k.mgetest"])
def test_dump_leaves_nothing_when_appending_its_strip_info_fails(traced, tmp_path, target):
    (tmp_path / "s.json").write_text("[1, 2]\n", encoding="utf-8")  # not a strip-info file to append to
    keywords = {"input_data": ["#rand(0,1)"]} if target.endswith(".mgetest") else {}
    with pytest.raises(OutputError, match="cannot append strip info"):
        traced.dump(str(tmp_path / target), strip_info_file=str(tmp_path / "s.json"), append_json=True, **keywords)
    assert _files(tmp_path) == {"s.json": hashlib.sha256(b"[1, 2]\n").hexdigest()}


@pytest.mark.parametrize("target", ["k.onnx", "k.mgetest"])
def test_dump_appends_its_strip_info_and_writes_both(traced, tmp_path, target):
    keywords = {"input_data": ["#rand(0,1)"]} if target.endswith(".mgetest") else {}
    traced.dump(str(tmp_path / "first.onnx"), strip_info_file=str(tmp_path / "s.json"))
    traced.dump(str(tmp_path / target), strip_info_file=str(tmp_path / "s.json"), append_json=True, **keywords)
    assert {"first.onnx", target, "s.json", "s.required_operators.config"} <= set(os.listdir(tmp_path))
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]


def test_dump_refuses_outputs_on_each_other_as_mgedump_does(traced, tmp_path):
    with pytest.raises(MgeError, match="is a folder"):
        traced.dump(str(tmp_path), strip_info_file=str(tmp_path / "s.json"))
    os.mkfifo(tmp_path / "q.json")
    with pytest.raises(MgeError, match="is a FIFO"):
        traced.dump(str(tmp_path / "k.onnx"), strip_info_file=str(tmp_path / "q.json"))
    assert sorted(os.listdir(tmp_path)) == ["q.json"]


def test_mgerun_writes_its_reports_together_or_none(tmp_path, monkeypatch):
    import mgedump.report.html as html
    from mgedump import VerifyOptions, verify_all

    bundle = tmp_path / "b.mgetest"
    pack(str(SAMPLES / "cnn.onnx"), bundle, PackOptions(cases=["#rand(0,1)"]))
    (tmp_path / "r.json").write_text("an older report\n", encoding="utf-8")

    def refused(report):
        raise OutputError("refused late")

    monkeypatch.setattr(html, "render_html", refused)
    before = _files(tmp_path)
    options = VerifyOptions(
        iters=1, report_json=str(tmp_path / "r.json"), junit_xml=str(tmp_path / "j.xml"),
        report_html=str(tmp_path / "r.html"),
    )  # fmt: skip
    with pytest.raises(OutputError, match="refused late"):
        verify_all([str(bundle)], options)
    assert _files(tmp_path) == before  # the JSON and the JUnit XML were staged, and went with the refusal


def test_an_output_model_through_a_link_loads_by_the_name_given(tmp_path):
    """The model is written through the link; its data goes beside the name given, where onnxruntime looks for
    it when the model is loaded by that name."""
    given = _external(tmp_path)
    (tmp_path / "real").mkdir()
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "m.onnx").symlink_to(tmp_path / "real" / "m.onnx")  # a link to a file yet to be
    options = PackOptions(cases=["#rand(0,1)"], model_out=str(tmp_path / "links" / "m.onnx"))
    pack(str(given), tmp_path / "b.mgetest", options)
    assert os.listdir(tmp_path / "real") == ["m.onnx"] and (tmp_path / "links" / "m.onnx").is_symlink()
    np.testing.assert_array_equal(_run(tmp_path / "links" / "m.onnx"), _run(given))
    pack(str(given), tmp_path / "b.mgetest", options)  # again: its own data, through the link


@pytest.mark.parametrize(
    ("output", "model_out", "said"),
    [
        ("", None, "output is empty"),
        ("{t}/new/", None, "names a folder, not a file"),
        ("{t}/" + "a" * 300, None, "File name too long"),
        ("{t}/b.mgetest", "{t}/" + "m" * 300 + ".onnx", "File name too long"),
        ("{t}/loop", None, "Too many levels of symbolic links"),
        ("{t}/b.mgetest", "{t}/sub/", "names a folder, not a file"),
    ],
)
def test_odd_output_paths_are_refused_before_any_work(tmp_path, monkeypatch, output, model_out, said):
    import mgedump.commands.pack as pack_module

    monkeypatch.setattr(pack_module, "open_session", lambda *a, **k: pytest.fail("opened the model"))
    (tmp_path / "loop").symlink_to("loop")
    options = PackOptions(cases=["#rand(0,1)"], model_out=model_out.format(t=tmp_path) if model_out else None)
    with pytest.raises(MgeError, match=said):
        pack(str(SAMPLES / "cnn.onnx"), output.format(t=tmp_path), options)
    assert os.listdir(tmp_path) == ["loop"]


def test_a_name_near_the_longest_allowed_is_written(tmp_path):
    out = tmp_path / ("b" * 240 + ".mgetest")  # 248 bytes: its temporary name beside it is cut to fit
    pack(str(SAMPLES / "cnn.onnx"), out, PackOptions(cases=["#rand(0,1)"]))
    assert os.listdir(tmp_path) == [out.name]


def test_the_files_read_are_looked_for_only_when_a_check_needs_them(tmp_path, monkeypatch):
    """A pack whose output is not there yet compares it with no input: its model's external data is not scanned for
    that check (the copy's plan scans it beside onnxruntime's loading); an output that is there is compared with
    every file read, the model's data files among them."""
    import mgedump.commands.inputs as inputs_module
    from mgedump.base.outputs import Output, Outputs
    from mgedump.commands.inputs import FilesRead, files_read

    given = _external(tmp_path)
    scanned = []
    real = inputs_module.data_files
    monkeypatch.setattr(inputs_module, "data_files", lambda path: scanned.append(path) or real(path))
    lazy = FilesRead(models=[str(given)])
    Outputs([Output("output", str(tmp_path / "new.mgetest"))]).check(lazy)
    assert scanned == []
    with pytest.raises(MgeError, match="is the input"):
        Outputs([Output("output", str(tmp_path / "mlp.weights"))]).check(lazy)
    assert scanned == [str(given)]
    assert list(lazy) == files_read(models=[str(given)]) and len(lazy) == 2 and lazy[1].endswith("mlp.weights")
