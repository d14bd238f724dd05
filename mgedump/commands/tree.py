"""The bundles a call names: a folder stands for every ``*.mgetest`` bundle of its tree.

A folder stands for its bundles sorted by their path inside it (``a.mgetest``, ``sub/b.mgetest``, ``z.mgetest``), without following a link to a
folder: a bundle behind a link is checked where the link's target is given, never twice, and a loop of links
cannot hang the walk. A link to a bundle file is a bundle. A folder reached twice by other means (a bind mount of
a folder inside itself) is a loop, and an error.

Each bundle found has a *key*: its path relative to the argument it came from, with ``/`` between parts
(``model_a/x.mgetest``; a file given alone is its file name). The key names the bundle in every report (without
its suffix: ``model_a/x``), so two ``model.mgetest`` in different subfolders stay apart, and decides its shard
(:mod:`.shards`), so the assignment depends on nothing but the bundle itself.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..base.errors import UsageError
from ..base.log import warn_once
from ..bundle.format import BUNDLE_SUFFIX


@dataclass(frozen=True)
class Found:
    """One path a call checks: ``path`` as it will be opened, ``key`` relative to the argument it came from."""

    path: str
    key: str

    @property
    def name(self) -> str:
        """What the reports call it: its key without the bundle suffix."""
        return self.key.removesuffix(BUNDLE_SUFFIX) or self.key


def expand_tree(paths: Sequence[str]) -> list[Found]:
    """The bundles named: a file as it is, a folder as every bundle of its tree (sorted).

    Raises:
        UsageError: no path; a folder that holds no bundle; a loop; a folder that cannot be read.
    """
    if not paths:
        raise UsageError("give a bundle (or a folder of *.mgetest bundles, or a model with -d)")
    found: list[Found] = []
    for path in paths:
        if os.path.isdir(path):
            inside = [Found(os.path.join(path, *rel), "/".join(rel)) for rel in sorted(_walk(path))]
            if not inside:
                raise UsageError(f"folder {path} holds no *{BUNDLE_SUFFIX} bundle (its subfolders neither)")
            found += inside
        else:
            found.append(Found(path, os.path.basename(os.path.normpath(path)) or path))
    return found


def _walk(root: str) -> Iterator[tuple[str, ...]]:
    """The relative parts of every bundle below ``root``, sorted depth first; links to folders are not followed."""
    seen: dict[tuple[int, int], str] = {}
    stack: list[tuple[str, ...]] = [()]
    while stack:
        rel = stack.pop()
        folder = os.path.join(root, *rel)
        try:
            info = os.stat(folder)
            names = sorted(os.listdir(folder))
        except OSError as exc:
            raise UsageError(f"cannot read folder {folder}: {exc.strerror or exc}") from None
        identity = (info.st_dev, info.st_ino)
        if identity in seen:
            raise UsageError(f"folder {folder} is {seen[identity]} again: a loop in the tree of {root}")
        seen[identity] = folder
        subfolders = []
        for name in names:
            entry = os.path.join(folder, name)
            kind = _kind(entry)
            if kind == "folder":
                subfolders.append((*rel, name))
            elif kind == "folder link":
                warn_once(f"{entry} is a link to a folder: not followed (give its target to check it)")
            elif kind == "file" and name.endswith(BUNDLE_SUFFIX):
                yield (*rel, name)
        stack += reversed(subfolders)


def _kind(entry: str) -> str:
    """``folder``, ``folder link``, ``file`` (a link to a file too) or ``other``.

    Raises:
        UsageError: a link that loops.
    """
    try:
        own = os.lstat(entry)
    except OSError:
        return "other"
    if stat.S_ISDIR(own.st_mode):
        return "folder"
    if stat.S_ISREG(own.st_mode):
        return "file"
    if not stat.S_ISLNK(own.st_mode):
        return "other"
    try:
        target = os.stat(entry)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the link leads back to itself
            raise UsageError(f"{entry} is a loop of links") from None
        return "file" if entry.endswith(BUNDLE_SUFFIX) else "other"  # a broken link to a bundle: reported as one
    if stat.S_ISDIR(target.st_mode):
        return "folder link"
    return "file" if stat.S_ISREG(target.st_mode) else "other"


def report_names(found: Sequence[Found]) -> list[str]:
    """What the reports call each bundle: its :attr:`Found.name`; where two different files share one (``mgerun
    x/m.mgetest y/m.mgetest``), as many of the last parts of their paths as tell them apart (``x/m``, ``y/m``)."""
    from ..report import unique_names

    names = [f.name for f in found]
    files: dict[str, set[str]] = {}
    for f in found:
        files.setdefault(f.name, set()).add(os.path.realpath(f.path))
    clashing = [k for k, f in enumerate(found) if len(files[f.name]) > 1]
    if clashing:
        for k, name in zip(clashing, unique_names([found[k].path for k in clashing]), strict=True):
            names[k] = name
    return names
