"""How many CPUs this process may use: the CPUs it may run on (its affinity: ``taskset``, a cpuset), and no more
than its cgroup's CPU quota allows (a Kubernetes pod's ``limits.cpu``, ``docker --cpus``), rounded up.

``os.cpu_count()`` counts the machine's CPUs whatever this process may use: 2-thread sessions timed under
``taskset -c 0`` share one CPU, and ``--jobs auto`` in a pod limited to 2 CPUs of a 64-CPU node would start 64
workers. What reads it: fitting's thread counts and ``--jobs auto`` (docs/fitting.md, docs/verify.md).

The quota is read from cgroup v2's ``cpu.max`` (``QUOTA PERIOD``, or ``max``) and cgroup v1's
``cpu.cfs_quota_us`` over ``cpu.cfs_period_us`` (-1: none), in the process's own cgroup (``/proc/self/cgroup``)
and each of its parents below the mount: the least of them is the limit. Inside a container the mount is the
container's own cgroup, so its files are read at the mount's top as well.
"""

from __future__ import annotations

import math
import os

CGROUP_ROOT = "/sys/fs/cgroup"
MEMBERSHIP = "/proc/self/cgroup"  # one line per hierarchy: ``ID:CONTROLLERS:PATH`` (``0::PATH`` for cgroup v2)


def usable_cpus(root: str = CGROUP_ROOT, membership: str = MEMBERSHIP, affinity: int | None = None) -> int:
    """The CPUs this process may use: its affinity (``affinity`` when given), at most the quota rounded up; 1 at
    least."""
    if affinity is None:
        affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cpu_quota(root, membership)
    return max(1, min(affinity, math.ceil(quota)) if quota is not None else affinity)


def cpu_quota(root: str = CGROUP_ROOT, membership: str = MEMBERSHIP) -> float | None:
    """The CPUs the cgroup quota allows (quota over period: 1.5 for ``docker --cpus 1.5``), the least along the
    process's cgroup and its parents; None: no quota, or no cgroup to read."""
    limits = []
    for controllers, path in _memberships(membership):
        if controllers == "":  # cgroup v2: the unified hierarchy, at the mount or at its unified/ (hybrid)
            for mount in (root, os.path.join(root, "unified")):
                limits += [_v2_limit(folder) for folder in _folders(mount, path)]
        elif "cpu" in controllers.split(","):
            for mount in dict.fromkeys((os.path.join(root, controllers), os.path.join(root, "cpu"))):
                limits += [_v1_limit(folder) for folder in _folders(mount, path)]
    found = [limit for limit in limits if limit is not None]
    return min(found) if found else None


def _memberships(membership: str) -> list[tuple[str, str]]:
    """``(controllers, path)`` of each line of ``/proc/self/cgroup``; none where it cannot be read."""
    try:
        with open(membership, encoding="utf-8", errors="replace") as f:
            lines = f.read(1 << 16).splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            out.append((parts[1], parts[2]))
    return out


def _folders(mount: str, path: str) -> list[str]:
    """The process's cgroup folder under ``mount`` and each parent up to the mount, those that exist (inside a
    container the path names the host's folder, which the container's mount does not hold: the mount is read)."""
    folders = []
    parts = [p for p in path.split("/") if p and p not in (".", "..")]
    for k in range(len(parts), -1, -1):
        folder = os.path.join(mount, *parts[:k])
        if os.path.isdir(folder):
            folders.append(folder)
    return folders


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(256).strip()
    except OSError:
        return None


def _v2_limit(folder: str) -> float | None:
    """``cpu.max``: ``QUOTA PERIOD`` in microseconds, or ``max PERIOD`` (no quota)."""
    text = _read(os.path.join(folder, "cpu.max"))
    fields = (text or "").split()
    try:
        quota, period = float(fields[0]), float(fields[1]) if len(fields) > 1 else 100000.0
    except (IndexError, ValueError):  # "max", nothing, or not numbers
        return None
    return _ratio(quota, period)


def _v1_limit(folder: str) -> float | None:
    """``cpu.cfs_quota_us`` over ``cpu.cfs_period_us`` (a quota of -1: none)."""
    try:
        quota = float(_read(os.path.join(folder, "cpu.cfs_quota_us")) or "")
        period = float(_read(os.path.join(folder, "cpu.cfs_period_us")) or "")
    except ValueError:
        return None
    return _ratio(quota, period)


def _ratio(quota: float, period: float) -> float | None:
    """CPUs of a quota over its period; None for no quota (-1, 0) or numbers that are not one."""
    if not (quota > 0 and period > 0):  # NaN too
        return None
    share = quota / period
    return share if math.isfinite(share) and share > 0 else None
