"""Bundles checked in worker processes (``mgerun PATHS --jobs N``): N at once, each worker one bundle at a time.

Each worker is a :class:`concurrent.futures.ProcessPoolExecutor` of one process, started with the ``spawn``
context (a fresh interpreter: nothing of this process's threads or onnxruntime state is copied). One executor per
worker, rather than one of N, because when a worker dies the standard library fails every task its executor
holds: with one task per executor, a crash (a segfault or an abort in onnxruntime, a kill for memory) fails
exactly the bundle that caused it, with the signal that ended it, and a fresh worker takes the next bundle. The
scheduling is :func:`concurrent.futures.wait` for the first task done: nothing of our own.

The parent holds no tensor and no record: each bundle's record comes back as JSON and goes to the caller
(:func:`run_checks` ``on_done``), which prints it and writes it to a file; so the parent's memory does not grow
with the number of bundles, and the workers' is that of the bundle each has open.

Timing figures taken while other workers run are not comparable. With more than one worker, the check runs each
test case once (no warm-up) and drops the timing figures; ``jobs_timing="serial"`` then times the bundles that ran
one after another, each alone in a worker, with the timing options given (:func:`time_one`), and their figures
replace the dropped ones. One worker checks and times as ``mgerun`` does without workers.

A time limit per run (``--timeout``) is kept by the parent: a worker writes when it starts a run (its "began" file),
and a run still going ``timeout`` seconds later has its worker killed (SIGKILL: a model stuck in onnxruntime's C++
code, a custom op that sleeps, holds no Python lock a signal could interrupt); the run fails naming the limit, and a
fresh worker takes the next. So a limit needs a worker: ``mgerun --timeout`` without ``--jobs`` checks in one.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import logging
import multiprocessing
import os
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..base.cpus import usable_cpus
from ..base.errors import EXIT_FAILED, MgeError
from ..base.limits import process_stopped
from ..base.naming import NO_VALUE, spoken_as
from ..options import VerifyOptions
from ..report import utc_timestamp

STOP_SECONDS = 10.0  # how long a killed worker may take to be reaped
STOP_POLL_SECONDS = 1.0  # how often the workers are looked at while none has finished
TIMING_KEYS = ("latency_ms", "latencies_ms", "warmup_ms", "wall_s", "inferences_per_s", "samples_per_s", "sweep")
UNTIMED: dict[str, Any] = {"latency_ms": {"count": 0}, "latencies_ms": [], "warmup_ms": [], "wall_s": None, "inferences_per_s": None,
           "samples_per_s": None, "sweep": []}  # fmt: skip


class WorkerError(MgeError):
    """What stopped a bundle in a worker (its own error, carried back), or the worker's crash (exit code 1)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class Done:
    """One run's outcome, as a worker sends it back: its record (JSON), or the error that stopped it."""

    index: int
    path: str
    variant: str | None
    record: dict[str, Any] | None = None
    verbose: bool = True
    files: list[str] = field(default_factory=list)
    error: str | None = None  # the one-line error that stopped it (plain values cross between processes)
    error_code: int = EXIT_FAILED
    seconds: float = 0.0
    peak_rss_mib: float | None = None
    started: str = ""  # when it started, ISO 8601 in UTC

    def failure(self) -> WorkerError | None:
        """The error that stopped the run, as an error of this process."""
        return None if self.error is None else WorkerError(self.error, self.error_code)


def check_options(options: VerifyOptions, workers: int, timing: str) -> VerifyOptions:
    """The options a worker checks with: with other workers beside it, one run per test case and no sweep (the
    figures are dropped), and onnxruntime's threads shared out between the workers unless ``--thread`` says."""
    if timing == "alone":
        return options
    usable = usable_cpus()
    session = dataclasses.replace(options.session, threads=options.session.threads or max(1, usable // workers))
    return dataclasses.replace(
        options, iters=1, warmup=0, duration_s=0.0, concurrency=1, repeat_sweep=(), session=session
    )


def timing_options(options: VerifyOptions) -> VerifyOptions:
    """The options of the serial timing pass: the timing asked for, no check, nothing written."""
    return dataclasses.replace(options, no_assert=True, profile=None, bin_out_dump=None, io_dump=None)


def untimed(record: dict[str, Any]) -> dict[str, Any]:
    """A record checked beside other workers: its timing figures dropped (they are not comparable)."""
    for case in record.get("test_cases") or []:
        case.update({key: (dict(value) if isinstance(value, dict) else value) for key, value in UNTIMED.items()})
        case["latencies_ms"], case["warmup_ms"], case["sweep"] = [], [], []
    if "cold_start" in record:
        record["cold_start"] = {"session_create_ms": None, "first_run_ms": None}
    return record


def with_timing(record: dict[str, Any], timed: dict[str, Any]) -> dict[str, Any]:
    """A checked record with the figures of its serial timing run (test case by test case, by index)."""
    figures = {case.get("index"): case for case in timed.get("test_cases") or []}
    for case in record.get("test_cases") or []:
        source = figures.get(case.get("index"))
        if source is not None and case.get("error") is None:
            case.update({key: source[key] for key in TIMING_KEYS if key in source})
    for key in ("cold_start", "session"):
        if key in timed:
            record[key] = timed[key]
    return record


# ---------------------------------------------------------------------------------------------------------------------
# In the worker


_BEGAN: list[str] = []  # in a worker: the file it writes when it starts a run (the parent's clock for --timeout)
STARTUP_S = 60.0  # with a time limit: how long a worker may take to start before its run's time counts anyway


def _start_worker(crash_file: str, verbosity: int, flags: dict[str, str], scratch: str, began: str = "") -> None:
    """A worker's start: a crash writes its Python stack to ``crash_file``; warnings go to stderr as ``mgerun``'s;
    messages name options as the command line does; its temporary files go under ``scratch``, inside the parent's
    folder, which the parent removes on every way out (a worker it stops has no time to remove its own)."""
    from ..base.log import setup

    os.environ["TMPDIR"] = tempfile.tempdir = scratch
    _BEGAN[:] = [began] if began else []
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the workers
    faulthandler.enable(open(crash_file, "w"))  # noqa: SIM115  # kept open for the worker's life
    setup(verbosity, prog="mgerun")

    def spell(name: str, value: Any = NO_VALUE) -> str:
        return flags.get(name, name) + ("" if value is NO_VALUE else f" {value}")

    spoken_as(spell).__enter__()  # for the worker's life


def check_one(index: int, path: str, variant: str | None, options: VerifyOptions, label: str) -> Done:
    """Verify one run in this worker (:func:`mgedump.commands.verify`): its record, or its error."""

    from ..base.limits import peak_rss_mib
    from .verify import verify

    began = time.perf_counter()
    for marker in _BEGAN:  # the parent times the run from here
        with open(marker, "w", encoding="ascii") as file:
            file.write(f"{index} {time.time()!r}")
    done = Done(index, path, variant, started=utc_timestamp())
    if variant is not None and options.variant != variant:
        options = dataclasses.replace(options, variant=variant)
    try:
        report = verify(path, options, label=label)
        done.record, done.verbose, done.files = report.record().to_json(), report.verbose, list(report.files)
    except MgeError as exc:
        done.error, done.error_code = exc.one_line(), exc.exit_code
    done.seconds, done.peak_rss_mib = time.perf_counter() - began, peak_rss_mib()
    return done


# ---------------------------------------------------------------------------------------------------------------------
# In the parent


@contextmanager
def _safe_path() -> Iterator[None]:
    """Processes started inside do not put the current folder first on their import path.

    A spawned worker (and multiprocessing's resource tracker) starts as ``python -c ...``, which puts the current
    folder first on ``sys.path`` before the parent's path replaces it: a ``selectors.py`` in the folder ``mgerun
    -j`` runs from would run in every worker. ``PYTHONSAFEPATH`` (Python 3.11 and later; the ``-P`` of ``-I``)
    leaves it out; the workers then take the parent's import path, as spawn gives them.
    """
    before = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = before


class _Worker:
    """One worker process: an executor of one, its crash file, and the process (to name the signal that ended it)."""

    def __init__(self, folder: str, number: int, verbosity: int, flags: dict[str, str]) -> None:
        self.crash_file = os.path.join(folder, f"worker-{number}.crash")
        self.began_file = os.path.join(folder, f"worker-{number}.began")
        scratch = os.path.join(folder, f"worker-{number}.tmp")
        os.mkdir(scratch, 0o700)
        with _safe_path():  # the executor starts the resource tracker
            self.executor = ProcessPoolExecutor(
                1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(self.crash_file, verbosity, flags, scratch, self.began_file),
            )
        self.process: Any = None
        self.submitted = 0.0  # time.time() of the last run handed over

    def deadline(self, index: int, limit: float) -> float:
        """When the run ``index`` runs out of time (``time.time()``): ``limit`` seconds after the worker began it,
        or, while it has not, after it was handed over and the worker had :data:`STARTUP_S` to start."""
        try:
            with open(self.began_file, encoding="ascii") as file:
                began_index, began = file.read().split()
            if int(began_index) == index:
                return float(began) + limit
        except (OSError, ValueError):
            pass
        return self.submitted + STARTUP_S + limit

    def submit(self, *args: Any) -> Future[Done]:
        self.submitted = time.time()
        with _safe_path():  # the executor starts its process on the first task
            future = self.executor.submit(check_one, *args)
        if self.process is None:  # the standard library keeps its processes by pid; there is one
            self.process = next(iter((getattr(self.executor, "_processes", None) or {}).values()), None)
        return future

    def crash_reason(self) -> str:
        """Why the process ended: its signal or exit code, and the first line faulthandler wrote."""
        process, code = self.process, None
        if process is not None:
            process.join(5)
            code = process.exitcode
            # the executor's own thread may reap the process at the same moment: our wait then finds no child and
            # leaves the exit code unset until that thread records it on the same process object
            deadline = time.monotonic() + 5
            while code is None and time.monotonic() < deadline:
                time.sleep(0.05)
                code = process.exitcode
        if code is not None and code < 0:
            try:
                what = f"killed by {signal.Signals(-code).name} ({signal.strsignal(-code)})"
            except ValueError:
                what = f"killed by signal {-code}"
        elif code is not None:
            what = f"exited with code {code}"
        else:
            what = "ended abruptly"
        try:
            with open(self.crash_file, encoding="utf-8", errors="replace") as file:
                first = next((line.strip() for line in file if line.strip()), "")
        except OSError:
            first = ""
        if code == -signal.SIGKILL:
            what += ": out of memory, or killed by hand"
        return f"its worker process crashed, {what}" + (f" ({first})" if first else "")

    def close(self, wait_for: bool = True) -> None:
        """Shut the worker down: let it finish (``wait_for``), or stop it now and reap it, a stopped (SIGSTOP) one
        included, so that no worker outlives the parent blocked on its result pipe."""
        process = self.process
        if not wait_for and process is not None and process.is_alive():
            process.kill()  # SIGKILL ends a stopped process too; it has nothing to save (its files are the parent's)
            process.join(STOP_SECONDS)
        self.executor.shutdown(wait=wait_for, cancel_futures=True)


class _Pool:
    """The workers by slot, each started when its slot first takes a run; a crashed one is replaced."""

    def __init__(self, folder: str, verbosity: int, flags: dict[str, str]) -> None:
        self.folder, self.verbosity, self.flags = folder, verbosity, flags
        self.live: dict[int, _Worker] = {}
        self.made = 0

    def __getitem__(self, slot: int) -> _Worker:
        if slot not in self.live:
            self.made += 1
            self.live[slot] = _Worker(self.folder, self.made, self.verbosity, self.flags)
        return self.live[slot]

    def discard(self, slot: int) -> None:
        self.live.pop(slot).close(wait_for=False)

    def close(self, wait_for: bool) -> None:
        for slot in list(self.live):
            self.live.pop(slot).close(wait_for=wait_for)


@contextmanager
def _pool(verbosity: int, flags: dict[str, str]) -> Iterator[_Pool]:
    """Workers, every one shut down on the way out (killed when the block fails: Ctrl-C, SIGTERM)."""
    with tempfile.TemporaryDirectory(prefix="mgerun-jobs-") as folder:
        pool = _Pool(folder, verbosity, flags)
        try:
            yield pool
        except BaseException:
            pool.close(wait_for=False)
            raise
        pool.close(wait_for=True)


def timed_out(
    run: tuple[int, str, str | None, VerifyOptions, str], limit: float, spent: float, flag: str | None = None
) -> Done:
    """A run stopped at its time limit: it fails, naming the limit and ``flag``, the option that set it (exit code
    1, as a model that failed to run)."""
    from ..base.naming import option_name

    done = Done(run[0], run[1], run[2], started=utc_timestamp(), seconds=spent)
    flag = flag or option_name("timeout_s")
    done.error = f"{run[1]}: timed out: still running after {limit:g} s ({flag} {limit:g}); stopped"
    return done


def run_checks(
    runs: Sequence[tuple[int, str, str | None, VerifyOptions, str]],
    workers: int,
    on_done: Callable[[Done], None],
    *,
    verbosity: int | None = None,
    flags: dict[str, str] | None = None,
    timeout: float | None = None,
    stop: Callable[[], bool] | None = None,
) -> None:
    """Check ``runs`` ((index, path, variant, options, label) each) in ``workers`` worker processes, at most one
    run per worker at a time; ``on_done`` is called in this process with each outcome as it comes, a crashed
    worker's run as a :class:`WorkerError` (exit code 1) naming the signal; with ``timeout`` (seconds), a run
    still going that long after it began has its worker killed and fails naming the limit. Once ``stop()`` says so
    (``--maxfail``), no run starts that had not: the runs going end, and the rest are never run."""
    if verbosity is None:
        verbosity = _verbosity()
    if flags is None:
        flags = speller_flags([f.name for f in dataclasses.fields(VerifyOptions)])
    pending = list(reversed(runs))
    running: dict[Future[Done], tuple[int, tuple[int, str, str | None, VerifyOptions, str]]] = {}
    with _pool(verbosity, flags) as pool:

        def start(slot: int) -> None:
            run = pending.pop()
            running[pool[slot].submit(*run)] = (slot, run)

        for slot in range(min(workers, len(pending))):
            start(slot)
        while running:
            wait_s = STOP_POLL_SECONDS  # a stopped worker answers never: looked at this often
            if timeout is not None:
                first = min(pool[slot].deadline(run[0], timeout) for slot, run in running.values())
                wait_s = min(1.0, max(0.0, first - time.time()))  # the began files come late: look again soon
            finished, _ = wait(list(running), timeout=wait_s, return_when=FIRST_COMPLETED)
            outcomes = []
            for future in finished:
                slot, run = running.pop(future)
                try:
                    outcomes.append(future.result())
                except BrokenProcessPool:
                    crashed = Done(run[0], run[1], run[2], error=f"{run[1]}: {pool[slot].crash_reason()}")
                    crashed.started = utc_timestamp()
                    outcomes.append(crashed)
                    pool.discard(slot)
                if pending:  # the next run starts before this process handles the outcome: the worker never waits
                    start(slot)
            for future, (slot, run) in list(running.items()):
                process = pool[slot].process
                if process is not None and not future.done() and process_stopped(process.pid):
                    del running[future]
                    stopped = Done(run[0], run[1], run[2], started=utc_timestamp())
                    stopped.error = f"{run[1]}: its worker process was stopped (SIGSTOP) and would never answer; killed"
                    outcomes.append(stopped)
                    pool.discard(slot)  # killed and reaped: a fresh worker takes the slot's next run
                    if pending:
                        start(slot)
            if timeout is not None:
                now = time.time()
                for future, (slot, run) in list(running.items()):
                    if now >= pool[slot].deadline(run[0], timeout) and not future.done():
                        del running[future]
                        outcomes.append(timed_out(run, timeout, now - pool[slot].submitted))
                        pool.discard(slot)  # killed and reaped: a fresh worker takes the slot's next run
                        if pending:
                            start(slot)
            for done in outcomes:
                on_done(done)
            if stop is not None and stop():
                pending.clear()


class Checker:
    """One worker process kept across calls (the pytest plugin's): :meth:`check` runs one bundle in it at a time; a
    crash fails that bundle alone, and the next call starts a fresh worker."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="mgerun-worker-")
        flags = speller_flags([f.name for f in dataclasses.fields(VerifyOptions)])
        self._pool = _Pool(self._folder.name, _verbosity(), flags)
        self._runs = 0  # the runs handed over, each its own index (the began file says which one began)

    def check(
        self, path: str, variant: str | None, options: VerifyOptions, timeout: float | None = None, flag: str = ""
    ) -> Done:
        """Verify one run in the worker (:func:`check_one`): its outcome, the crash of its worker, or with
        ``timeout`` (seconds, set by ``flag``), its worker killed when the run goes on that long (as
        :func:`run_checks` does)."""
        self._runs += 1
        worker = self._pool[0]
        future = worker.submit(self._runs, path, variant, options, "")
        try:
            while timeout is not None and not future.done():
                now = time.time()
                if now >= worker.deadline(self._runs, timeout):
                    self._pool.discard(0)
                    return timed_out((0, path, variant, options, ""), timeout, now - worker.submitted, flag)
                wait([future], timeout=min(1.0, max(0.0, worker.deadline(self._runs, timeout) - now)))
            return future.result()
        except BrokenProcessPool:
            done = Done(0, path, variant, error=f"{path}: {self._pool[0].crash_reason()}", started=utc_timestamp())
            self._pool.discard(0)
            return done

    def close(self) -> None:
        self._pool.close(wait_for=True)
        self._folder.cleanup()


def _verbosity() -> int:
    """This process's logging, as :func:`mgedump.base.log.setup` takes it: -1 quiet, 0 warnings, 1 debug."""
    from ..base.log import logger

    level = logger.getEffectiveLevel()
    return -1 if level > logging.WARNING else 0 if level == logging.WARNING else 1


def speller_flags(names: Sequence[str]) -> dict[str, str]:
    """How the command in use names these options (to name them alike in the workers)."""
    from ..base.naming import option_name

    return {name: option_name(name) for name in names}
