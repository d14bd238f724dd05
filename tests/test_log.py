"""The one logger: warnings on stderr prefixed by the program, a repeated warning printed once, -q and -v."""

from __future__ import annotations

from mgedump import log


def test_levels_and_once(capsys):
    log.setup(0, prog="prog")
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
