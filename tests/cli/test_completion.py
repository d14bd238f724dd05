"""Shell completion: click completes the commands' options, and file and folder names where a value is a path."""

from __future__ import annotations

import pytest
from click.shell_completion import BashComplete, ZshComplete

from mgedump.cli import mgediff_command, mgedump_command, mgerun_command


def _complete(command, prog, args, incomplete, shell=BashComplete):
    return shell(command, {}, prog, f"_{prog.upper()}_COMPLETE").get_completions(args, incomplete)


@pytest.mark.parametrize(
    "command, prog, args",
    [
        (mgedump_command, "mgedump", []),  # MODEL
        (mgerun_command, "mgerun", []),  # BUNDLE_OR_MODEL...
        (mgerun_command, "mgerun", ["a.mgetest"]),  # and the next one
        (mgediff_command, "mgediff", ["a"]),  # B
        (mgedump_command, "mgedump", ["m.onnx", "-o"]),  # OUT
        (mgedump_command, "mgedump", ["m.onnx", "-d"]),  # a data file
        (mgerun_command, "mgerun", ["b.mgetest", "--report-json"]),
    ],
)
def test_paths_complete_as_files(command, prog, args):
    items = _complete(command, prog, args, "sam")
    assert [(i.type, i.value) for i in items] == [("file", "sam")]  # the shell lists the files


def test_folders_complete_as_folders():
    items = _complete(mgerun_command, "mgerun", ["b.mgetest", "--io-dump"], "du")
    assert [(i.type, i.value) for i in items] == [("dir", "du")]


def test_options_complete_from_the_declarations():
    names = {i.value for i in _complete(mgerun_command, "mgerun", ["b.mgetest"], "--rep")}
    assert names == {"--repeat", "--repeat-sweep", "--report-json", "--report-html"}
    choices = {i.value for i in _complete(mgerun_command, "mgerun", ["b.mgetest", "--graph-opt"], "")}
    assert choices == {"disable", "basic", "extended", "all"}


def test_the_completion_script_is_generated_for_each_shell():
    script = ZshComplete(mgedump_command, {}, "mgedump", "_MGEDUMP_COMPLETE").source()
    assert "_MGEDUMP_COMPLETE" in script and "compdef" in script
