"""The map stays true: docs/architecture.md's table of rooms names every module of the package, in its room's row,
and names no module that is not there; its table of the test case's classes says where each one lives."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mgedump"
MAP = ROOT / "docs" / "architecture.md"


def _section(title: str) -> str:
    text = MAP.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def _rooms() -> dict[str, str]:
    """Each row of the table of rooms: its room (``model/``, ``options.py``) -> the rest of the row."""
    rows = {}
    for line in _section("The rooms").splitlines():
        found = re.match(r"\| `([^`]+)` \|(.*)\|\s*$", line)
        if found:
            rows[found.group(1)] = found.group(2)
    return rows


def _named(text: str) -> set[str]:
    return set(re.findall(r"`([\w/]+\.py)`", text))


def _modules() -> list[str]:
    """Every module of the package, as a path inside it (``model/target.py``); a package is its ``__init__.py``."""
    return sorted(path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py"))


def _missing(modules: list[str], rooms: dict[str, str]) -> list[str]:
    """The modules the map does not name: a module of a room (``model/target.py``, ``cli/flags/pack.py``) by its
    path inside the room in the room's row (``target.py``, ``flags/pack.py``), a module of the package's top by
    its own row or as ``mgedump/NAME.py`` in any row; a room's ``__init__.py`` is named by the room's row."""
    anywhere = set().union(*(_named(row) for row in rooms.values()))
    missing = []
    for module in modules:
        room, _, inside = module.partition("/")
        if not inside:
            if module not in rooms and f"mgedump/{module}" not in anywhere:
                missing.append(module)
        elif inside == "__init__.py":
            if f"{room}/" not in rooms:
                missing.append(module)
        elif f"{room}/" not in rooms or inside not in _named(rooms[f"{room}/"]):
            missing.append(module)
    return missing


def test_the_map_names_every_module_in_its_room():
    assert _missing(_modules(), _rooms()) == []


def test_the_map_names_no_module_that_is_not_there():
    gone = []
    for room, row in _rooms().items():
        for name in _named(row):
            path = PACKAGE / name.removeprefix("mgedump/") if name.startswith("mgedump/") else PACKAGE / room / name
            if room.endswith("/") and not path.is_file():
                gone.append(f"{room}{name}")
    assert gone == []


def test_a_module_left_out_is_found():
    """The check can fail: a new module of a room, a room of its own, a module at the top."""
    rooms = _rooms()
    assert _missing(["model/new.py", "newroom/__init__.py", "newtop.py", "model/target.py"], rooms) == [
        "model/new.py",
        "newroom/__init__.py",
        "newtop.py",
    ]
    assert _missing(["diagnose/runtime.py"], rooms) == ["diagnose/runtime.py"]  # named in model's row, not here


def test_the_table_of_test_cases_says_where_each_class_lives():
    rows = re.findall(r"^\| [^|]+ \| ([^|]+) \| `([\w/]+\.py)` \|", _section("A test case, stage by stage"), re.M)
    assert len(rows) == 11
    for classes, module in rows:
        defined = {n.name for n in ast.walk(ast.parse((PACKAGE / module).read_text())) if isinstance(n, ast.ClassDef)}
        for name in re.findall(r"`(\w+)`", classes):
            assert name in defined, f"{name} is not defined in {module}"


FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")


def _flags_in_code(source: str) -> list[tuple[int, str]]:
    """The flags a module's code spells in its strings (docstrings and comments aside)."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return [
        (node.lineno, found.group())
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        for found in FLAG.finditer(node.value)
    ]


def test_flags_are_spelled_only_in_the_command_line():
    """Outside cli/, code names an option by its keyword (base/naming.option_name), never by a flag's text: the
    pytest plugin reads its options from cli/plugin_options.py."""
    spelled = []
    for module in _modules():
        if not module.startswith("cli/"):
            spelled += [f"{module}:{line} {flag}" for line, flag in _flags_in_code((PACKAGE / module).read_text())]
    assert spelled == []
    assert _flags_in_code('"""--in-a-docstring"""\nx = f"--maxerr {y}"\n') == [(2, "--maxerr")]  # it can fail
