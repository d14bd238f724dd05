"""Shards: which of the bundles one machine of a CI matrix checks (``mgerun PATHS --shard I/N``).

A bundle's shard is decided by its key alone (its path relative to the argument it came from,
:class:`~.tree.Found`): the first 8 bytes of the key's SHA-256, modulo N, plus 1. So every bundle is in exactly
one shard, the shards' union is every bundle, and adding a bundle moves no other: nothing depends on the order,
the time or the other bundles.

``--shard auto`` reads GitLab's ``CI_NODE_INDEX`` (1-based) and ``CI_NODE_TOTAL`` (``parallel: N``);
``--shard auto/N`` reads the index from Kubernetes' ``JOB_COMPLETION_INDEX`` (0-based, an Indexed Job), else from
GitLab's. GitHub Actions' matrix passes the index itself (``--shard ${{ matrix.shard }}/4``).

``--shard-durations REPORT`` balances the shards by the seconds each bundle took in an earlier JSON report (the
idea of pytest-split): the bundles it has no time for are placed by the hash, counted at the mean time; then the
bundles it has, longest first, each go to the shard with the least time so far. Every machine of the matrix must
give the same report, so that they all compute the same assignment.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..base.errors import UsageError
from ..base.naming import option_name
from ..base.numbers import parse_int
from ..report.merge import MAX_SHARDS
from .tree import Found

GITLAB_INDEX, GITLAB_TOTAL = "CI_NODE_INDEX", "CI_NODE_TOTAL"
KUBERNETES_INDEX = "JOB_COMPLETION_INDEX"
_GIVEN = re.compile(r"^\s*([^/\s]+)\s*/\s*([^/\s]+)\s*$")
_AUTO = re.compile(r"^\s*auto\s*(?:/\s*(\S+)\s*)?$")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``total``, and where that came from (``--shard 2/4``, GitLab's variables ...)."""

    index: int
    total: int
    source: str

    def text(self) -> str:
        return f"shard {self.index} of {self.total} ({self.source})"


def shard_of(key: str, total: int) -> int:
    """The shard (1-based, of ``total``) of the bundle with this key: its hash, nothing else."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % total + 1


def resolve_shard(value: str, environ: Mapping[str, str]) -> Shard:
    """The shard ``--shard`` asks for: ``I/N``, ``auto`` or ``auto/N``, the last two read from ``environ``.

    Raises:
        UsageError: not one of those forms, an index outside 1..N, or for ``auto``, no variable set (or one that
            is not a whole number).
    """
    flag = option_name("shard")
    auto = _AUTO.match(value)
    given = None if auto else _GIVEN.match(value)
    if given:
        index, total = (parse_int(part, f"{flag} I/N") for part in given.groups())
        return _checked(index, total, f"{flag} {value.strip()}")
    if not auto:
        raise UsageError(f"{flag} takes I/N (shard I of N, from 1), auto or auto/N; got {value!r}")
    if auto.group(1) is None:
        if GITLAB_INDEX not in environ and GITLAB_TOTAL not in environ:
            raise UsageError(
                f"{flag} auto reads GitLab's {GITLAB_INDEX} and {GITLAB_TOTAL} (parallel: N), and neither is set",
                hint=f"give {flag} I/N, or {flag} auto/N where {KUBERNETES_INDEX} is set (a Kubernetes Indexed Job)",
            )
        index, total = _number(environ, GITLAB_INDEX), _number(environ, GITLAB_TOTAL)
        return _checked(index, total, f"GitLab's {GITLAB_INDEX}={index} and {GITLAB_TOTAL}={total}")
    total = parse_int(auto.group(1), f"{flag} auto/N")
    _checked(1, total, f"{flag} {value.strip()}")  # the count first: out of range says so, whatever is set
    if KUBERNETES_INDEX in environ:
        index = _number(environ, KUBERNETES_INDEX)
        return _checked(index + 1, total, f"Kubernetes' {KUBERNETES_INDEX}={index}, counted from 0")
    if GITLAB_INDEX in environ:
        index = _number(environ, GITLAB_INDEX)
        if GITLAB_TOTAL in environ and _number(environ, GITLAB_TOTAL) != total:
            raise UsageError(f"{flag} {value.strip()} says {total} shards, {GITLAB_TOTAL} says {environ[GITLAB_TOTAL]}")
        return _checked(index, total, f"GitLab's {GITLAB_INDEX}={index}")
    raise UsageError(
        f"{flag} auto/{total} reads the index from {KUBERNETES_INDEX} (a Kubernetes Indexed Job) or {GITLAB_INDEX} "
        "(GitLab's parallel:), and neither is set",
        hint=f"give {flag} I/{total}",
    )


def _number(environ: Mapping[str, str], name: str) -> int:
    raw = environ.get(name)
    if raw is None:
        raise UsageError(f"{option_name('shard')} auto: {name} is not set")
    return parse_int(raw, f"{option_name('shard')} auto: {name}")


def _checked(index: int, total: int, source: str) -> Shard:
    if not 1 <= total <= MAX_SHARDS:
        raise UsageError(
            f"{option_name('shard')}: the count of shards must be 1 to {MAX_SHARDS}, got {total} ({source})"
        )
    if not 1 <= index <= total:
        raise UsageError(f"{option_name('shard')}: shard {index} is not one of 1 to {total} ({source})")
    return Shard(index, total, source)


def select(
    found: Sequence[Found], names: Sequence[str], shard: Shard, durations: Mapping[str, float] | None = None
) -> list[Found]:
    """The bundles of ``shard``, in their order; ``names`` are what the reports call each (what ``durations``, name
    to seconds, are looked up by)."""
    if not durations:
        return [f for f in found if shard_of(f.key, shard.total) == shard.index]
    return [f for f, s in zip(found, balanced(found, names, shard.total, durations), strict=True) if s == shard.index]


def balanced(found: Sequence[Found], names: Sequence[str], total: int, durations: Mapping[str, float]) -> list[int]:
    """Each bundle's shard, balancing the known times (longest first, to the least loaded shard; ties to the
    lowest shard), the bundles without a time placed by the hash and counted at the mean time."""
    known = [k for k, name in enumerate(names) if name in durations]
    mean = sum(durations[names[k]] for k in known) / len(known) if known else 0.0
    shards = [0] * len(found)
    load = [0.0] * (total + 1)
    for k, bundle in enumerate(found):
        if names[k] not in durations:
            shards[k] = shard_of(bundle.key, total)
            load[shards[k]] += mean
    for k in sorted(known, key=lambda k: (-durations[names[k]], found[k].key)):
        shards[k] = min(range(1, total + 1), key=lambda s: (load[s], s))
        load[shards[k]] += durations[names[k]]
    return shards


def durations_of(report: Any) -> dict[str, float]:
    """Seconds per bundle name in a report's records (:class:`~mgedump.report.schema.RunReport`), its variants
    added up."""
    seconds: dict[str, float] = {}
    for bundle in report.bundles:
        name = bundle.name.removesuffix(f"[{bundle.variant}]") if bundle.variant is not None else bundle.name
        seconds[name] = seconds.get(name, 0.0) + max(0.0, float(bundle.seconds))
    return seconds


def shard_record(shard: Shard, chosen: int, of: int, by: str) -> dict[str, Any]:
    """What the report says of the shard (docs/reports.md, "The document")."""
    return {"index": shard.index, "total": shard.total, "from": shard.source, "by": by, "bundles": chosen, "of": of}


def pick(
    found: Sequence[Found], names: Sequence[str], shard: Shard, durations_report: str | None = None
) -> tuple[list[Found], list[str], dict[str, Any]]:
    """The bundles of ``shard``, their names, and the report's record of the shard; ``durations_report``, an
    earlier JSON report whose times balance the shards.

    Raises:
        ReportError: a durations report that cannot be read.
    """
    from ..report.checked import read_report

    durations = None
    by = "hash"
    if durations_report is not None:
        report, _ = read_report(durations_report, f"{option_name('shard_durations')} report")
        durations = durations_of(report)
        by = f"durations of {durations_report}"
    chosen = {id(f) for f in select(found, names, shard, durations)}
    kept = [(f, n) for f, n in zip(found, names, strict=True) if id(f) in chosen]
    record = shard_record(shard, len(kept), len(found), by)
    return [f for f, _ in kept], [n for _, n in kept], record
