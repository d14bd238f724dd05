"""Fuzzing names: arbitrary bytes as an output's, a node's and a data file's name, through pack, run (console,
JSON, JUnit, HTML) and diff. Whatever the bytes, each command either works or refuses in one line (exit 2);
nothing ends in a traceback, no raw control, bidi or zero-width character reaches a terminal, and every report
parses strictly. Derandomized: the same examples on every run."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.report.test_hostile_text import check_html, clean_streams, model_with, strict_json
from tests.report.test_hostile_text import run as run  # noqa: F401 - the fixture, used by name

# bytes of every kind: controls, escapes, markup, bidi and zero-width characters in UTF-8, bytes that are not UTF-8
_PIECES = st.sampled_from(
    [b"\x1b[31m", b"\x00", b"\n", b"<b>&amp;", "\u202e".encode(), "\u200b".encode(), b"\xff\xfe", b"\xc3", b"a"]
)
_NAMES = st.lists(st.one_of(_PIECES, st.binary(min_size=1, max_size=4)), min_size=1, max_size=4).map(b"".join)


def _refused_in_one_line(done) -> bool:
    return done.returncode == 2 and len(done.stderr.decode().strip().splitlines()) == 1


@settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(output_name=_NAMES, node_name=_NAMES, file_part=_NAMES)
def test_any_bytes_as_names(run, tmp_path_factory, output_name, node_name, file_part):
    folder = tmp_path_factory.mktemp("fuzz")
    names = {"output_name": output_name, "node_name": node_name}
    if b"\x00" in output_name or output_name == b"x":
        names["output_name"] = b"y"  # a NUL ends a C string, x is the input: neither can name a distinct output
    try:
        model = model_with(folder / "m.onnx", **names)
    except AssertionError:  # the placeholder could not be swapped in alone: no model to test with these bytes
        return
    data = os.path.join(os.fsencode(folder), b"d" + file_part.replace(b"/", b"_").replace(b"\x00", b"_") + b".npy")
    np.save(os.fsdecode(data), np.random.default_rng(0).random((1, 4), dtype=np.float32))
    bundle = folder / "b.mgetest"

    packed = run("mgedump", model, "-d", data, "--embed-io-dump", "-o", bundle)
    clean_streams(packed)
    if packed.returncode != 0:
        assert _refused_in_one_line(packed), packed.stderr
        assert not bundle.exists()
        return

    ran = run("mgerun", bundle, "--iter", "1", "-v", "--report-json", folder / "r.json",
              "--junit-xml", folder / "r.xml", "--report-html", folder / "r.html")  # fmt: skip
    clean_streams(ran)
    assert ran.returncode == 0, ran.stderr
    strict_json(Path(folder / "r.json").read_bytes())
    ET.parse(folder / "r.xml")
    check_html(folder / "r.html")

    diffed = run("mgediff", model, bundle, "--report-json", folder / "d.json")
    clean_streams(diffed)
    assert diffed.returncode == 0, diffed.stderr
    strict_json(Path(folder / "d.json").read_bytes())
