"""The one logger: warnings on stderr prefixed by the program, a repeated warning printed once, -q and -v."""

from __future__ import annotations

from mgedump.base import log


def test_levels_and_once(capsys):
    log.setup(0, prog="prog")
    with log.warnings_scope():
        log.warn_once("careful")
        log.warn_once("careful")
    log.logger.debug("detail")
    assert capsys.readouterr().err == "prog: warning: careful\n"
    log.setup(1, prog="prog")
    log.logger.debug("detail")
    assert capsys.readouterr().err == "prog: debug: detail\n"
    log.setup(-1, prog="prog")
    log.warn_once("quiet now")
    assert capsys.readouterr().err == ""


def test_printable_escapes_what_could_drive_a_terminal():
    assert log.printable("plain text, ünïcode and 中文 stay") == "plain text, ünïcode and 中文 stay"
    assert log.printable("a\nb\rc\td") == "a\\x0ab\\x0dc\\x09d"
    assert log.printable("\x1b[2J\x07\x9b") == "\\x1b[2J\\x07\\x9b"
    # bidirectional overrides and zero-width characters could make a line read as something else
    assert log.printable("ok\u202egnissap\u200b") == "ok\\u202egnissap\\u200b"


def test_a_warning_from_a_file_is_escaped(capsys):
    log.setup(0, prog="prog")
    log.warn_once("input 'x\x1b[31m': careful")
    assert capsys.readouterr().err == "prog: warning: input 'x\\x1b[31m': careful\n"


def test_printable_is_the_terminal_cleaning_and_keeps_bytes_recoverable():
    from mgedump.base import text

    name = b"\xff\xfe.npy".decode("utf-8", "surrogateescape")  # how Python holds a file name that is not UTF-8
    assert log.printable(name) == text.terminal(name) == "\\xff\\xfe.npy"
    assert log.printable(b"x\xffy") == "x\\xffy" and log.printable("\ud800") == "\\ud800"
    log.printable(name).encode("utf-8")  # no lone surrogate is left: it prints anywhere


def test_each_library_call_says_its_warnings_again(capsys, tmp_path):
    """The memory of what was said lasts one call of a command, not the process: a library user who packs twice
    sees a warning twice (it went silent after the first call)."""
    import numpy as np

    from mgedump import PackOptions, pack
    from tests.support import sample

    log.setup(0, prog="prog")
    case = {"input:0": np.zeros((1, 16), np.float32), "len": np.array(7.5)}  # 7.5 cast to int64: a warning
    model = str(sample("multi_input.onnx").path)
    options = PackOptions(cases=[case, case])
    pack(model, tmp_path / "a.mgetest", options)
    first = capsys.readouterr().err
    pack(model, tmp_path / "b.mgetest", options)
    second = capsys.readouterr().err
    assert "warning: " in first and first == second, (first, second)


def test_nested_scopes_start_afresh(capsys):
    log.setup(0, prog="prog")
    with log.warnings_scope():
        log.warn_once("w")
        with log.warnings_scope():
            log.warn_once("w")
        log.warn_once("w")
    assert capsys.readouterr().err == "prog: warning: w\n" * 2
