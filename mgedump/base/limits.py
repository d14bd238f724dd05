"""How much a request may take: memory checked before allocating, so a request that cannot fit is refused with
one line that says what it needs, instead of ending in a MemoryError, an OOM kill or a crash."""

from __future__ import annotations

import os
import resource
import sys
from typing import Any

from .errors import MgeError

GIB = 1 << 30


def available_memory() -> int:
    """Bytes this process can still allocate: the memory available on the machine, and no more than its
    address-space limit (``ulimit -v``, a container's or a test's) leaves."""
    available = _meminfo_available()
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        available = min(available, max(soft - _address_space_used(), 0))
    return available


def _proc_kib(path: str, key: str) -> int | None:
    """A ``key: N kB`` line of a /proc file, in bytes; None where there is no such file or line."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def _meminfo_available() -> int:
    available = _proc_kib("/proc/meminfo", "MemAvailable")
    if available is not None:
        return available
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62  # no way to tell: do not refuse on our own account


def _address_space_used() -> int:
    return _proc_kib("/proc/self/status", "VmSize") or 0


def size_text(n_bytes: float) -> str:
    if n_bytes >= GIB:
        return f"{n_bytes / GIB:.1f} GiB"
    return f"{n_bytes / (1 << 20):.0f} MiB"


def require_memory(n_bytes: float, what: str, error: type[MgeError]) -> None:
    """Refuse a request that needs more memory than this process can have.

    Args:
        n_bytes: what the request needs, estimated before allocating.
        what: the request, as the message names it (``"#rand(0,1,...) for input 'x'"``).
        error: the error type to raise (a bad option, bad data, ...).

    Raises:
        error: with what the request needs and what is available.
    """
    available = available_memory()
    if n_bytes > available:
        raise error(
            f"{what} needs {size_text(n_bytes)} of memory, and this process can have {size_text(available)}",
            hint="ask for less (a smaller shape, count or repeat)",
        )


def peak_rss_mib() -> float:
    """This process's peak resident memory so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


def rss_mib() -> float | None:
    """This process's resident memory now, in MiB (None where ``/proc`` does not say)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    except (OSError, ValueError, IndexError):
        return None


def process_stopped(pid: int) -> bool:
    """Whether a process is stopped (state T, or t when traced: SIGSTOP, SIGTSTP): it answers nothing until someone
    continues it, so whoever waits on it stops waiting."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("T", "t")


def release_memory() -> None:
    """Hand the memory this process freed back to the system: glibc keeps freed blocks (and what onnxruntime's
    threads free, in their own arenas) for the process, so a closed session or a run in parts would still count in
    its footprint and its peak; nothing where the C library has no ``malloc_trim``."""
    global _malloc_trim
    if _malloc_trim is None:
        import ctypes
        import ctypes.util

        try:
            _malloc_trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim: Any = None
