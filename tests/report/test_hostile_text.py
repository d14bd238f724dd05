"""Hostile text on every report surface: model input, output and node names holding control characters, NUL, ANSI
escapes, bidi and zero-width characters, newlines, markup, or bytes that are not UTF-8, and file names with bytes
that are not UTF-8, through mgedump, mgerun (console, JSON, JUnit, HTML) and mgediff.

Each row asserts the exit code, no traceback, no raw control or bidi character on stdout or stderr (which must be
UTF-8), HTML that parses balanced with no live markup, JUnit that is well-formed XML meeting Jenkins' schema, and
JSON that a strict parser accepts. Rows that fail for reasons outside the reports are marked with where they fail.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from tests.report.test_junit import xsd_problems
from tests.report.test_records import strict_json

NAMES = {
    "ansi": b"a\x1b[31mred\x07",
    "nul": b"a\x00b",
    "bidi": "ok\u202egnissap".encode(),
    "zero-width": "x\u200by\u2066z".encode(),
    "newline": b"l1\nl2\rl3",
    "markup": b"<script>alert(1)</script>&amp;",
    "not-utf8": b"x\xff\xfe",
}
# where a row fails outside the reports (file:line), found by these tests and left to those files' owners
ELSEWHERE: dict[tuple[str, str], str] = {}
# an input or output whose name is not UTF-8 cannot be named through onnxruntime's Python API (it raises
# decoding the name), so nothing could feed or check it: refused at pack, one line (a node's name is only shown)
REFUSED = {("not-utf8", "input"), ("not-utf8", "output")}
BAD = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")
PAGE_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "h4", "p", "table", "tr", "th", "td", "a",
    "span", "section", "article", "details", "summary", "pre", "div", "b", "svg", "text", "line", "rect", "circle",
    "polyline", "polygon", "tspan",
}  # fmt: skip
VOID = {"meta", "line", "rect", "circle", "polyline", "polygon"}  # self-closed in SVG, or void in HTML


def model_with(path: Path, input_name: bytes = b"x", output_name: bytes = b"y", node_name: bytes = b"n") -> Path:
    """A Relu model whose input, output and node are named with these exact bytes: placeholders of the same
    length are written with onnx.helper and swapped in the serialized model, so no length prefix changes (a
    placeholder byte that also stands elsewhere, in a length say, is not used)."""
    import onnx
    from onnx import TensorProto, helper

    for fills in ("~^|", "`_!", "^|~", "|~^", "!`_"):
        i, o, n = (fill * len(name) for fill, name in zip(fills, (input_name, output_name, node_name), strict=True))
        graph = helper.make_graph(
            [helper.make_node("Relu", [i], [o], name=n)],
            "g",
            [helper.make_tensor_value_info(i, TensorProto.FLOAT, [1, 4])],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, 4])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        data = model.SerializeToString()
        swaps = [(i.encode(), input_name, 2), (o.encode(), output_name, 2), (n.encode(), node_name, 1)]
        if all(data.count(holder) == count for holder, _, count in swaps):
            for holder, name, _ in swaps:
                data = data.replace(holder, name)
            onnx.load_from_string(data)  # still a model
            path.write_bytes(data)
            return path
    raise AssertionError("no placeholder stands only for the names")


@dataclass
class Done:
    returncode: int
    stdout: bytes
    stderr: bytes


@pytest.fixture
def run(capfdbinary):
    """Run mgedump, mgerun or mgediff in-process on these arguments (bytes as Python holds them from argv: with
    surrogateescape): its exit code and the raw bytes it wrote on stdout and stderr."""
    import mgedump.cli as cli

    def call(command: str, *args) -> Done:
        argv = [os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in args]
        capfdbinary.readouterr()
        try:
            getattr(cli, f"{command}_main")(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capfdbinary.readouterr()
        return Done(code, out, err)

    return call


def clean_streams(done: Done) -> None:
    """No traceback; stdout and stderr are UTF-8 with no raw control, bidi or zero-width character."""
    for name, data in (("stdout", done.stdout), ("stderr", done.stderr)):
        text = data.decode("utf-8")  # raises on raw bytes that are not UTF-8
        assert "Traceback" not in text, text
        found = BAD.search(text)
        assert found is None, f"{name} holds {found.group()!r}: {text!r}"


class Page(HTMLParser):
    """Tags, balance and text of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.open: list[str] = []
        self.text: list[str] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        for _, value in attrs:
            if value and BAD.search(value):
                self.problems.append(f"attribute holds {BAD.search(value).group()!r}")
        if tag not in VOID and tag != "meta":
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.add(tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.open or self.open[-1] != tag:
            self.problems.append(f"</{tag}> closes <{self.open[-1] if self.open else None}>")
            return
        self.open.pop()

    def handle_data(self, data):
        self.text.append(data)


def check_html(path: Path) -> str:
    raw = path.read_bytes().decode("utf-8")
    page = Page()
    page.feed(raw)
    page.close()
    assert page.problems == [] and page.open == [], (page.problems, page.open)
    assert page.tags <= PAGE_TAGS, page.tags - PAGE_TAGS  # no live markup from a name
    text = "".join(page.text)
    assert BAD.search(text.replace("\n", "").replace("\t", "")) is None
    return text


def check_reports(folder: Path, stem: str) -> None:
    strict_json((folder / f"{stem}.json").read_bytes())
    assert xsd_problems(ET.parse(folder / f"{stem}.xml").getroot()) == []
    check_html(folder / f"{stem}.html")


def _rows():
    for kind in NAMES:
        for where in ("input", "output", "node"):
            reason = ELSEWHERE.get((kind, where))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(kind, where, marks=marks, id=f"{kind}-{where}")


@pytest.mark.parametrize(("kind", "where"), list(_rows()))
def test_a_hostile_name_in_the_model(run, tmp_path, kind, where):
    name = NAMES[kind]
    names = {"input_name": b"x", "output_name": b"y", "node_name": b"n"}
    names[f"{where}_name"] = name
    model = model_with(tmp_path / "m.onnx", **names)
    bundle = tmp_path / "m.mgetest"

    packed = run("mgedump", model, "-d", "#rand(0,1)", "--embed-io-dump", "-o", bundle)
    clean_streams(packed)
    if (kind, where) in REFUSED:
        lines = packed.stderr.decode().strip().splitlines()
        assert packed.returncode == 2 and len(lines) == 1 and "is not UTF-8 text" in lines[0], lines
        assert not bundle.exists()
        return
    assert packed.returncode == 0, packed.stderr

    ran = run("mgerun", bundle, "--iter", "2", "-v", "--report-json", tmp_path / "r.json",
              "--junit-xml", tmp_path / "r.xml", "--report-html", tmp_path / "r.html")  # fmt: skip
    clean_streams(ran)
    assert ran.returncode == 0, ran.stderr
    check_reports(tmp_path, "r")
    if where == "output":
        shown = name.decode("utf-8", "surrogateescape")
        document = strict_json((tmp_path / "r.json").read_bytes())
        assert document["bundles"][0]["outputs"][0]["name"] == shown.replace("\udcff", "\\xff").replace(
            "\udcfe", "\\xfe"
        )

    diffed = run("mgediff", model, bundle, "--report-json", tmp_path / "d.json")
    clean_streams(diffed)
    assert diffed.returncode == 0, diffed.stderr
    strict_json((tmp_path / "d.json").read_bytes())


def test_a_failing_check_of_a_hostile_output_name(run, tmp_path):
    """The failure lines, the first divergence and the tables carry the name: escaped in every report."""
    from tests.support import rewrite_bundle

    model = model_with(tmp_path / "m.onnx", output_name="y\x1b]0;owned\x07<b>\u202e".encode())
    run("mgedump", model, "-d", "#rand(0,1)", "--embed-io-dump", "-o", tmp_path / "ok.mgetest")

    def other_expected(names, manifest, members):
        import onnx
        from onnx import numpy_helper

        member = "test_data_set_0/output_0.pb"
        tensor = onnx.load_tensor_from_string(members[member])
        members[member] = numpy_helper.from_array(numpy_helper.to_array(tensor) + 1, tensor.name).SerializeToString()

    rewrite_bundle(tmp_path / "ok.mgetest", tmp_path / "bad.mgetest", other_expected, fix_hashes=True)
    ran = run("mgerun", tmp_path / "bad.mgetest", "--iter", "2", "--report-json", tmp_path / "r.json",
              "--junit-xml", tmp_path / "r.xml", "--report-html", tmp_path / "r.html")  # fmt: skip
    clean_streams(ran)
    assert ran.returncode == 1
    assert "(name=y\\x1b]0;owned\\x07<b>\\u202e) FAILED" in ran.stdout.decode()
    check_reports(tmp_path, "r")
    text = check_html(tmp_path / "r.html")
    assert "(name=y\\x1b]0;owned\\x07<b>\\u202e) FAILED" in text
    failure = next(ET.parse(tmp_path / "r.xml").getroot().iter("failure"))
    assert "(name=y\\x1b]0;owned\\x07<b>\\u202e) FAILED" in failure.get("message")


@pytest.mark.parametrize("kind", ["not-utf8", "ansi", "bidi"])
def test_hostile_file_names(run, tmp_path, kind):
    """A data file and a bundle whose names hold bytes that are not UTF-8, escapes or bidi characters: packed,
    run among others (the console names each bundle) and compared."""
    part = {"not-utf8": b"\xff\xfe", "ansi": b"\x1b[2J", "bidi": "\u202e".encode()}[kind]
    folder = os.fsencode(tmp_path)
    np.save(tmp_path / "x.npy", np.random.default_rng(0).random((1, 4), dtype=np.float32))
    data = b"d" + part + b".npy"
    os.rename(os.path.join(folder, b"x.npy"), os.path.join(folder, data))
    model = model_with(tmp_path / "m.onnx")
    (tmp_path / "bundles").mkdir()
    bundle = os.path.join(folder, b"bundles", b"b" + part + b".mgetest")

    packed = run("mgedump", model, "-d", os.path.join(folder, data), "-o", bundle, "--output-strip-info")
    clean_streams(packed)
    assert packed.returncode == 0, packed.stderr
    import zipfile

    with zipfile.ZipFile(os.fsdecode(bundle)) as zf:
        manifest = strict_json(zf.read("mgedump.json"))  # the spec names the file: no lone surrogate
    assert manifest["test_cases"][0]["spec"].endswith(
        os.fsdecode(data).replace("\udcff", "\\xff").replace("\udcfe", "\\xfe")
    )
    strict_json(Path(os.fsdecode(bundle + b".json")).read_bytes())  # the strip info
    run("mgedump", model, "-d", "#rand(0,1)", "-o", tmp_path / "bundles" / "plain.mgetest")

    ran = run("mgerun", os.path.join(folder, b"bundles"), "--iter", "1", "-v", "--report-json", tmp_path / "r.json",
              "--junit-xml", tmp_path / "r.xml", "--report-html", tmp_path / "r.html")  # fmt: skip
    clean_streams(ran)
    assert ran.returncode == 0, ran.stderr
    check_reports(tmp_path, "r")
    ran_alone = run(
        "mgerun", model, "-d", os.path.join(folder, data), "--iter", "1", "--report-html", tmp_path / "a.html"
    )
    clean_streams(ran_alone)
    assert ran_alone.returncode == 0
    check_html(tmp_path / "a.html")


@pytest.mark.parametrize(
    "kind",
    ["not-utf8", "ansi", "bidi"],
)
def test_hostile_file_names_in_mgediff(run, tmp_path, kind):
    part = {"not-utf8": b"\xff\xfe", "ansi": b"\x1b[2J", "bidi": "\u202e".encode()}[kind]
    model = model_with(tmp_path / "m.onnx")
    bundle = os.path.join(os.fsencode(tmp_path), b"b" + part + b".mgetest")
    assert run("mgedump", model, "-d", "#rand(0,1)", "-o", bundle).returncode == 0
    diffed = run("mgediff", model, bundle, "--report-json", tmp_path / "d.json")
    clean_streams(diffed)
    assert diffed.returncode == 0, diffed.stderr
    strict_json((tmp_path / "d.json").read_bytes())


def test_a_bundle_that_cannot_be_read_names_itself_escaped(run, tmp_path):
    """One line on stderr, escaped, and the reports of the others still written."""
    folder = os.fsencode(tmp_path)
    bad = os.path.join(folder, b"bad\xff\x1b[31m.mgetest")
    with open(bad, "wb") as f:
        f.write(b"junk")
    done = run("mgerun", bad)
    clean_streams(done)
    assert done.returncode == 2 and len(done.stderr.decode().strip().splitlines()) == 1
    assert "bad\\xff\\x1b[31m.mgetest" in done.stderr.decode()


# ---------------------------------------------------------------- issue 26: the surfaces round four found


def model_with_inner(path: Path, inner: bytes) -> Path:
    """Relu then Neg, the tensor between them named with these exact bytes (input x, output y)."""
    import onnx
    from onnx import TensorProto, helper

    holder = "~" * len(inner)
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], [holder], name="a"), helper.make_node("Neg", [holder], ["y"], name="b")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    data = model.SerializeToString()
    assert data.count(holder.encode()) == 2
    path.write_bytes(data.replace(holder.encode(), inner))
    onnx.load(str(path))
    return path


@pytest.mark.parametrize(
    "inner", [b"t\xff\xfe", b"t\xed\xa0\x80", b"\xc0\xaf", b"a\x1b[2J\xff", b"\xf4\x90\x80\x80"], ids=str
)
def test_a_tensor_name_that_is_not_utf8_dumps_and_diffs(run, tmp_path, inner):
    """onnx hands such a name over as bytes: it cannot be exposed (onnxruntime cannot name it); the io dump, the
    embedded one and mgediff leave it out with a warning, and every JSON they write stays strict."""
    model = model_with_inner(tmp_path / "m.onnx", inner)
    other = model_with_inner(tmp_path / "o.onnx", inner)
    packed = run("mgedump", model, "-d", "#rand(0,1)", "--embed-io-dump", "-o", tmp_path / "m.mgetest")
    clean_streams(packed)
    assert packed.returncode == 0 and b"not UTF-8" in packed.stderr, packed.stderr
    ran = run("mgerun", tmp_path / "m.mgetest", "--iter", "1", "--io-dump", tmp_path / "dump",
              "--report-json", tmp_path / "r.json")  # fmt: skip
    clean_streams(ran)
    assert ran.returncode == 0, ran.stderr
    index = strict_json((tmp_path / "dump" / "test_data_set_0" / "index.json").read_bytes())
    assert [t["name"] for t in index["tensors"]] == ["x", "y"]
    assert index["nodes"][0]["outputs"] == index["nodes"][1]["inputs"] and "\\x" in index["nodes"][0]["outputs"][0]
    diffed = run("mgediff", model, other, "-d", "#rand(0,1)", "--report-json", tmp_path / "d.json")
    clean_streams(diffed)
    assert diffed.returncode == 0, diffed.stderr
    strict_json((tmp_path / "d.json").read_bytes())
    against_dump = run("mgediff", tmp_path / "dump", other)
    clean_streams(against_dump)
    assert against_dump.returncode == 0


def _complex_dump(src: Path, dst: Path, which: int = -1) -> Path:
    """A copy of an io dump whose tensor (the last: the output) is complex64, its size and hash fixed."""
    import hashlib
    import json
    import shutil

    from onnx import numpy_helper

    shutil.copytree(src, dst)
    case = dst / "test_data_set_0"
    index = json.loads((case / "index.json").read_text(encoding="utf-8"))
    entry = index["tensors"][which]
    array = np.ones((1, 10)).astype(np.complex64) * (1 + 2j)
    data = numpy_helper.from_array(array, entry["name"]).SerializeToString()
    (case / entry["file"]).write_bytes(data)
    entry.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data), dtype="complex64")
    (case / "index.json").write_text(json.dumps(index), encoding="utf-8")
    return dst


def test_a_complex_valued_tensor_does_not_crash_the_json_writer(run, tmp_path):
    from tests.support import SAMPLES

    bundle = tmp_path / "c.mgetest"
    assert run("mgedump", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--embed-io-dump", "-o", bundle).returncode == 0
    assert run("mgerun", bundle, "--iter", "1", "--io-dump", tmp_path / "a").returncode == 0
    _complex_dump(tmp_path / "a", tmp_path / "b")
    diffed = run("mgediff", tmp_path / "a", tmp_path / "b", "--report-json", tmp_path / "d.json")
    clean_streams(diffed)
    assert diffed.returncode == 1, diffed.stderr
    document = strict_json((tmp_path / "d.json").read_bytes())
    assert document["test_cases"][0]["worst"]["b"] == "(1+2j)"
    both = run("mgediff", tmp_path / "b", tmp_path / "b", "--report-json", "-")
    assert both.returncode == 0 and strict_json(both.stdout)["exit_code"] == 0


def test_json_values_of_every_kind_are_strict():
    from mgedump.report.jsonvalues import dumps, element, json_ready

    document = {
        "c": complex(1, -2),
        "nc": np.complex64(complex(float("nan"), 1)),
        "n": np.float32(float("inf")),
        "i": np.int64(3),
        "s": "a\udcff\ud800b",
        "\udcfe": [np.bool_(True), (1, 2)],
    }
    parsed = strict_json(dumps(document))
    assert parsed == {
        "c": "(1-2j)",
        "nc": "(nan+1j)",
        "n": "inf",
        "i": 3,
        "s": "a\\xff\\ud800b",
        "\\xfe": [True, [1, 2]],
    }
    assert element(np.complex128(3j)) == "3j" and json_ready(np.float64(2.5)) == 2.5


def test_an_escape_in_a_file_name_never_reaches_a_terminal_through_the_progress_line(tmp_path):
    """On a real terminal (a pty) the progress bar and the status line run; the only escapes are click's own
    (hiding and showing the cursor)."""
    import pty
    import select
    import subprocess

    from tests.support import SAMPLES, run_ok, script

    folder = os.fsencode(tmp_path)
    names = [b"a\x1b[31mred\x1b]0;title\x07.mgetest", b"b\x9b2J\xff\xe2\x80\xae.mgetest"]
    for name in names:
        run_ok("mgedump", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", os.fsdecode(os.path.join(folder, name)), "-q")
    for args in ([os.path.join(folder, names[0]), "--duration", "1.2"], [folder, "--duration", "1.2"]):
        master, slave = pty.openpty()
        child = subprocess.Popen([script("mgerun"), *args], stdin=slave, stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        seen = b""
        while True:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 1 << 16)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            elif child.poll() is not None:
                break
        os.close(master)
        assert child.wait(timeout=60) == 0
        if args[0] == folder:  # several bundles: the bar names each, escaped
            assert b"a\\x1b[31mred\\x1b]0;title\\x07" in seen and b"b\\x9b2J\\xff\\u202e" in seen, seen[:600]
        rest = seen.replace(b"\x1b[?25l", b"").replace(b"\x1b[?25h", b"")
        assert b"\x1b" not in rest and b"\x07" not in rest and b"\xc2\x9b" not in rest and b"\xe2\x80\xae" not in rest


def test_the_status_line_escapes_what_it_shows(monkeypatch):
    import io

    import mgedump.cli.status as status_module

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(status_module, "AFTER_S", 0.0)
    terminal = Terminal()
    with status_module.Status("mgedump", stream=terminal) as status:
        status("writing a\x1b]0;x\x07\u202e\udcff.mgetest")
    shown = terminal.getvalue()
    assert "a\\x1b]0;x\\x07\\u202e\\xff.mgetest" in shown and BAD.search(shown.replace("\r", "")) is None
