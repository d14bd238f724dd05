"""Shards: which of the bundles one machine of a CI matrix checks (``mgerun PATHS --shard I/N``).

A bundle's shard is decided by its key alone (its path relative to the argument it came from,
:class:`~.tree.Found`): the first 8 bytes of the key's SHA-256, modulo N, plus 1. So every bundle is in exactly
one shard, the shards' union is every bundle, and adding a bundle moves no other: nothing depends on the order,
the time or the other bundles.

``--shard auto`` reads the parallel-job variables of GitLab, CircleCI, Buildkite, Azure Pipelines or Bitbucket
(:data:`ENGINES`, each with the base its index counts from); ``--shard auto/N`` reads Kubernetes'
``JOB_COMPLETION_INDEX`` (0-based, an Indexed Job) first. No index set is shard 1 of 1, with a note. GitHub
Actions' matrix and Jenkins' parallel stages pass the index themselves (``--shard ${{ matrix.shard }}/4``).

A run's identity (:func:`resolve_run`: ``--run-id``, or the CI's run variable) and the hash of the bundles the
paths hold (:func:`list_hash`) go into each shard's report, so that ``--merge`` refuses shards of other runs.

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
from ..report.spread import ShardRecord
from .tree import Found


@dataclass(frozen=True)
class Engine:
    """A CI engine's parallel-job variables: the index of this job, the count of jobs, and what the index counts
    from (docs/verify.md#many-machines-shards-and-merged-reports)."""

    name: str
    index: str
    total: str
    base: int

    @property
    def owner(self) -> str:
        """``GitLab's``, ``Azure Pipelines'``."""
        return f"{self.name}'" if self.name.endswith("s") else f"{self.name}'s"


# the engines --shard auto reads, in the order it looks (each engine's own documentation names its variables)
ENGINES = (
    Engine("GitLab", "CI_NODE_INDEX", "CI_NODE_TOTAL", 1),
    Engine("CircleCI", "CIRCLE_NODE_INDEX", "CIRCLE_NODE_TOTAL", 0),
    Engine("Buildkite", "BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", 0),
    Engine("Azure Pipelines", "SYSTEM_JOBPOSITIONINPHASE", "SYSTEM_TOTALJOBSINPHASE", 1),
    Engine("Bitbucket", "BITBUCKET_PARALLEL_STEP", "BITBUCKET_PARALLEL_STEP_COUNT", 0),
)
GITLAB_INDEX, GITLAB_TOTAL = ENGINES[0].index, ENGINES[0].total
KUBERNETES_INDEX = "JOB_COMPLETION_INDEX"
# where a run's identity comes from (--run-id, else the first of these set): one value for every job of one run
RUN_IDS = (
    ("GitHub", "GITHUB_RUN_ID"),
    ("GitLab", "CI_PIPELINE_ID"),
    ("CircleCI", "CIRCLE_WORKFLOW_ID"),
    ("Buildkite", "BUILDKITE_BUILD_ID"),
    ("Azure Pipelines", "BUILD_BUILDID"),
    ("Bitbucket", "BITBUCKET_BUILD_NUMBER"),
    ("Jenkins", "BUILD_TAG"),
)
MAX_RUN_ID = 200  # characters of a run's identity
_GIVEN = re.compile(r"^\s*([^/\s]+)\s*/\s*([^/\s]+)\s*$")
_AUTO = re.compile(r"^\s*auto\s*(?:/\s*(\S+)\s*)?$")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``total``, and where that came from (``--shard 2/4``, GitLab's variables ...);
    ``note``: what to tell the user (``auto`` found no index and checks every bundle)."""

    index: int
    total: int
    source: str
    note: str | None = None

    def text(self) -> str:
        return f"shard {self.index} of {self.total} ({self.source})"


def shard_of(key: str, total: int) -> int:
    """The shard (1-based, of ``total``) of the bundle with this key: its hash, nothing else."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % total + 1


def _looked_for() -> str:
    pairs = [f"{e.owner} {e.index}/{e.total}" for e in ENGINES]
    return f"{KUBERNETES_INDEX} (Kubernetes, with auto/N), " + ", ".join(pairs)


def resolve_shard(value: str, environ: Mapping[str, str]) -> Shard:
    """The shard ``--shard`` asks for: ``I/N``, ``auto`` or ``auto/N``, the last two read from ``environ``.

    ``auto`` reads the first engine of :data:`ENGINES` whose variables are set; none set, or a count of 1 and no
    index (GitLab without ``parallel:``), is shard 1 of 1, with a note naming what was looked for.

    Raises:
        UsageError: not one of those forms, an index outside 1..N, a count without an index (or an index without a
            count) over 1 job, or a variable that is not a whole number.
    """
    flag = option_name("shard")
    auto = _AUTO.match(value)
    given = None if auto else _GIVEN.match(value)
    if given:
        index, total = (parse_int(part, f"{flag} I/N") for part in given.groups())
        return _checked(index, total, f"{flag} {value.strip()}")
    if not auto:
        raise UsageError(f"{flag} takes I/N (shard I of N, from 1), auto or auto/N; got {value!r}")
    wanted = None
    if auto.group(1) is not None:
        wanted = parse_int(auto.group(1), f"{flag} auto/N")
        _checked(1, wanted, f"{flag} {value.strip()}")  # the count first: out of range says so, whatever is set
        if KUBERNETES_INDEX in environ:
            index = _number(environ, KUBERNETES_INDEX)
            return _checked(index + 1, wanted, f"Kubernetes' {KUBERNETES_INDEX}={index}, counted from 0")
    for engine in ENGINES:
        if engine.index in environ or engine.total in environ:
            return _from_engine(engine, environ, wanted, value.strip())
    if wanted is not None and wanted > 1:
        raise UsageError(
            f"{flag} {value.strip()} reads this job's index, and none is set (looked for {_looked_for()})",
            hint=f"give {flag} I/{wanted}",
        )
    return Shard(
        1,
        1,
        "no CI index set",
        note=f"{flag} auto: no CI index set (looked for {_looked_for()}): shard 1 of 1, every bundle",
    )


def _from_engine(engine: Engine, environ: Mapping[str, str], wanted: int | None, given: str) -> Shard:
    flag = option_name("shard")
    total = _number(environ, engine.total) if engine.total in environ else None
    if wanted is not None and total is not None and total != wanted:
        raise UsageError(f"{flag} {given} says {wanted} shards, {engine.total} says {environ[engine.total]}")
    total = total if total is not None else wanted
    counted = "" if engine.base == 1 else ", counted from 0"
    if engine.index not in environ:
        if total == 1:  # GitLab without parallel: sets CI_NODE_TOTAL=1 and no index
            return Shard(1, 1, f"{engine.owner} {engine.total}=1 and no {engine.index}")
        raise UsageError(
            f"{flag} {given}: {engine.owner} {engine.total} is {environ[engine.total]} and {engine.index} is not set"
        )
    index = _number(environ, engine.index)
    if total is None:
        raise UsageError(
            f"{flag} {given}: {engine.owner} {engine.index} is set and {engine.total} is not",
            hint=f"give {flag} auto/N (N: the count of jobs)",
        )
    source = f"{engine.owner} {engine.index}={index}"
    if engine.total in environ:
        source += f" and {engine.total}={total}"
    return _checked(index + 1 - engine.base, total, source + counted)


def resolve_run(run_id: str | None, environ: Mapping[str, str]) -> dict[str, str] | None:
    """The run's identity: ``--run-id``, else the first CI variable of :data:`RUN_IDS` set (none: unknown).

    Raises:
        UsageError: an empty identity, or one over :data:`MAX_RUN_ID` characters.
    """
    if run_id is not None:
        found, source = run_id.strip(), option_name("run_id")
    else:
        named = next(((engine, name) for engine, name in RUN_IDS if environ.get(name, "").strip()), None)
        if named is None:
            return None
        found, source = environ[named[1]].strip(), f"{named[0]}'s {named[1]}"
    if not found or len(found) > MAX_RUN_ID:
        raise UsageError(f"{source}: a run's identity is 1 to {MAX_RUN_ID} characters; got {found[:40]!r}")
    return {"id": found, "from": source}


def list_hash(names: Sequence[str]) -> str:
    """The identity of the bundles a call's paths hold (every shard's, before sharding): the SHA-256 of their
    names, sorted, one a line."""
    text = "\n".join(sorted(names))
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


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
        name = bundle.base_name
        seconds[name] = seconds.get(name, 0.0) + max(0.0, float(bundle.seconds))
    return seconds


def shard_record(shard: Shard, chosen: int, of: int, by: str, listed: str) -> ShardRecord:
    """What the report says of the shard (docs/reports.md, "Shards, jobs and merged reports")."""
    return {
        "index": shard.index, "total": shard.total, "from": shard.source, "by": by, "bundles": chosen, "of": of,
        "list": listed,
    }  # fmt: skip


def pick(
    found: Sequence[Found], names: Sequence[str], shard: Shard, durations_report: str | None = None
) -> tuple[list[Found], list[str], ShardRecord]:
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
    record = shard_record(shard, len(kept), len(found), by, list_hash(names))
    return [f for f, _ in kept], [n for _, n in kept], record
