"""Shell completion: click completes the commands' options, and file and folder names where a value is a path; an
environment the shell's completion script did not set up (``COMP_CWORD`` missing or not a number, ``COMP_WORDS``
missing) gives one line, never click's traceback."""

from __future__ import annotations

import os
import subprocess

import pytest
from click.shell_completion import BashComplete, ZshComplete

from mgedump.cli import mgediff_command, mgedump_command, mgerun_command
from tests.support import script


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


# ---------------------------------------------------------------- an environment the shell did not set up


@pytest.mark.parametrize(
    ("prog", "env", "said"),
    [
        ("mgedump", {"_MGEDUMP_COMPLETE": "bash_complete", "COMP_WORDS": "mgedump --"}, "COMP_CWORD is not set"),
        ("mgerun", {"_MGERUN_COMPLETE": "bash_complete", "COMP_WORDS": "mgerun", "COMP_CWORD": "x"}, "'x', not the"),
        ("mgerun", {"_MGERUN_COMPLETE": "zsh_complete", "COMP_WORDS": "mgerun", "COMP_CWORD": "1.5"}, "'1.5', not"),
        ("mgediff", {"_MGEDIFF_COMPLETE": "zsh_complete", "COMP_WORDS": "mgediff", "COMP_CWORD": ""}, "'', not the"),
        ("mgediff", {"_MGEDIFF_COMPLETE": "fish_complete", "COMP_CWORD": "--re"}, "COMP_WORDS is not set"),
        ("mgedump", {"_MGEDUMP_COMPLETE": "bash_complete", "COMP_CWORD": "1"}, "COMP_WORDS is not set"),
        ("mgerun", {"_MGERUN_COMPLETE": "bash_complete", "COMP_WORDS": "m", "COMP_CWORD": "\x1b[2J" * 9}, r"\x1b[2J"),
    ],
)
def test_a_completion_environment_that_is_not_the_shells_gives_one_line(prog, env, said):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COMP_", "_MGE"))}
    done = subprocess.run([script(prog)], env={**base, **env}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert "Traceback" not in done.stderr and "\x1b" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"{prog}: error: shell completion: ") and said in line, line


@pytest.mark.parametrize(
    "env",
    [
        {"COMP_WORDS": "mgerun b --rep", "COMP_CWORD": "2"},  # the real thing
        {"COMP_WORDS": "mgerun b --rep", "COMP_CWORD": "-7"},  # out of range: nothing to complete
        {"COMP_WORDS": "mgerun b --rep", "COMP_CWORD": "99999999999999999999999"},
        {"COMP_WORDS": "mgerun 'b --rep", "COMP_CWORD": "2"},  # an unclosed quote
        {"COMP_WORDS": "", "COMP_CWORD": "0"},
        {"COMP_WORDS": "mgerun \udcff --rep", "COMP_CWORD": " 2 "},
    ],
)
def test_odd_but_numeric_completion_environments_complete_or_give_nothing(env):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COMP_", "_MGE"))}
    env = {
        k: v.encode("utf-8", "surrogateescape") for k, v in {**base, "_MGERUN_COMPLETE": "bash_complete", **env}.items()
    }
    done = subprocess.run([script("mgerun")], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stderr == b"", done.stderr


def test_an_unknown_completion_instruction_is_no_completion():
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COMP_", "_MGE"))}
    done = subprocess.run(
        [script("mgedump")], env={**base, "_MGEDUMP_COMPLETE": "tcsh_complete"}, capture_output=True, timeout=60
    )
    assert done.returncode != 0 and done.stdout == b"" and b"Traceback" not in done.stderr
