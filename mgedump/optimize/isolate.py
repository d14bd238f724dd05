"""Open and run candidate models where a crash, or a hang, is survivable: in a child process.

onnxruntime can take the process down (SIGSEGV, SIGABRT) while it optimises a
rewritten model at session creation, a float16 candidate at its highest level
for one, or while it runs one (a QDQ candidate of a public EEG detector
segfaults onnxruntime in its first run). The searches open *and run* each
candidate in a child (one child per search, which imports onnxruntime once and
takes the candidates it is given one after the other); a child that dies is a
refusal, or a candidate skipped, that names the candidate and the signal, never
a crash of ``mgedump``, and a model that crashes onnxruntime is never bundled
(``mgerun`` would crash on it).

The child starts in Python's isolated mode (``-I``) with the parent's import
path less the current folder, so a ``json.py`` in the folder ``mgedump`` runs
from is never imported. Each candidate has :data:`CANDIDATE_SECONDS` to answer
(its session and every test case): a child that deadlocks in a provider is
killed when the time is up, one that is stopped (SIGSTOP) as soon as it is
seen stopped, and the candidate named as abandoned.

The session the child opens is the one a plain ``mgerun`` would run (CPU,
default optimisation level), so :meth:`Opener.run` also runs the test cases on
it and hands the outputs back: one session per candidate both proves it loads
and measures it.

The runs with every tensor exposed (the float16 search's reference, a
candidate's diagnosis) are made in the same child, under the same time limit:
:meth:`Opener.call` has it call a function of ``mgedump`` on the test cases,
the reference and the result crossing on disk (:mod:`.isolate_call`). A crash
or a hang there is named as a candidate's is; the searches go on without the
diagnosis.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from typing import Any

import numpy as np

from ..base.errors import OptimizeError
from ..base.limits import process_stopped
from ..base.log import logger
from ..base.naming import option_name
from ..base.streams import is_terminal
from .isolate_call import load_result, reply_error, save_cases

CANDIDATE_SECONDS = 600.0  # the time one candidate may take in the child: its session and every test case
STOP_POLL_SECONDS = (
    1.0  # how often a child that has not answered is looked at: stopped (SIGSTOP, SIGTSTP), it is abandoned
)


class CandidateFailed(OptimizeError):
    """The child died on a candidate (a signal), or gave no answer in time (stopped, deadlocked): a refusal, or,
    to a search that can go on without it, a candidate skipped. ``cause`` says which (``SIGSEGV``, ``no answer
    within 600 s``)."""

    def __init__(self, message: str, *, cause: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.cause = cause


_CHILD = """
import json
import sys
import numpy as np
import onnxruntime as ort
options = ort.SessionOptions()
options.log_severity_level = 4
for line in sys.stdin:
    job = json.loads(line)
    if "call" in job:  # a run with every tensor exposed: mgedump is imported only for those
        from mgedump.optimize.isolate_call import answer
        print(json.dumps(answer(job)), flush=True)
        continue
    try:
        session = ort.InferenceSession(job["model"], options, providers=["CPUExecutionProvider"])
    except Exception:  # a load error: the caller's own session reports it
        print(json.dumps({"ok": False, "error": ""}), flush=True)
        continue
    if not job.get("inputs"):
        print(json.dumps({"ok": True}), flush=True)
        del session
        continue
    try:
        names = [o.name for o in session.get_outputs()]
        got = {}
        with np.load(job["inputs"]) as data:
            for k, count in enumerate(job["cases"]):
                feeds = {name: data[f"c{k}_i{j}"] for j, name in enumerate(job["names"][:count])}
                for j, value in enumerate(session.run(names, feeds)):
                    got[f"c{k}_o{j}"] = value
        np.savez(job["outputs"], **got)
        print(json.dumps({"ok": True, "outputs": names}), flush=True)
    except Exception as exc:
        print(json.dumps({"ok": False, "error": " ".join(str(exc).split())[:300]}), flush=True)
    del session
"""


def worst_output(errs: Sequence[Mapping[str, float]]) -> tuple[float, str, int]:
    """(err, output, test case) of the worst output of a candidate's run: ``errs`` holds, per test case, each
    output's AssertEqual error."""
    found = (0.0, "", 0)
    for k, case in enumerate(errs):
        for name, err in case.items():
            if err > found[0] or not found[1]:
                found = (err, name, k)
    return found


def _child_path() -> list[str]:
    """The import path the child gets: the parent's, less the current folder (and the empty entry that stands for
    it), so that no module of the folder ``mgedump`` runs from shadows one the child imports."""
    here = os.path.realpath(os.getcwd())
    kept = []
    for entry in sys.path:
        if entry in ("", ".") or not os.path.isabs(entry):
            continue
        if os.path.realpath(entry) == here:
            continue
        kept.append(entry)
    return kept


def child_command(code: str) -> list[str]:
    """The command that runs ``code`` in a child: isolated mode (no current folder, no ``PYTHON*`` variables, no
    user site), with the parent's import path (less the current folder) set before anything is imported."""
    prelude = f"import sys\nsys.path[:] = {_child_path()!r}\n"
    return [sys.executable, "-I", "-c", prelude + code]


class Opener(AbstractContextManager["Opener"]):
    """A child process that creates an onnxruntime session (CPU, default optimisation level) on each model given,
    and runs the test cases on it.

    Use as a context manager; :meth:`check`, :meth:`run` and :meth:`call` raise :class:`CandidateFailed` when the
    child dies on a candidate or gives no answer within ``timeout`` seconds (default :data:`CANDIDATE_SECONDS`).
    """

    def __init__(self, timeout: float | None = None) -> None:
        self._child: subprocess.Popen[bytes] | None = None
        self.timeout = CANDIDATE_SECONDS if timeout is None else timeout
        self.sessions = 0  # sessions the child created

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            if child.stdin is not None:
                with suppress(OSError):
                    child.stdin.close()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            if child.stdout is not None:
                child.stdout.close()

    def _start(self) -> subprocess.Popen[bytes]:
        if self._child is None or self._child.poll() is not None:
            self._child = subprocess.Popen(
                child_command(_CHILD),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        return self._child

    def _answer(self, child: subprocess.Popen[bytes]) -> bytes | None:
        """The child's next line, or None when it gave none within the time limit."""
        assert child.stdout is not None
        fd = child.stdout.fileno()
        deadline = time.monotonic() + self.timeout
        chunks: list[bytes] = []
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or process_stopped(
                    child.pid
                ):  # a stopped child answers never: no need to wait out the limit
                    return None
                if not selector.select(min(left, STOP_POLL_SECONDS)):
                    continue
                chunk = os.read(fd, 1 << 16)
                chunks.append(chunk)
                if not chunk or chunk.endswith(b"\n"):
                    return b"".join(chunks)

    def _ask(
        self, job: Mapping[str, object], what: str, exposed: bool = False, hint: str | None = None
    ) -> dict[str, object]:
        """The child's reply to a job. ``exposed``: the job runs the model with every tensor exposed (a reference, a
        diagnosis), which the messages of a crash or a hang say; ``hint`` replaces theirs."""
        child = self._start()
        assert child.stdin is not None
        try:
            child.stdin.write(json.dumps(job).encode() + b"\n")
            child.stdin.flush()
            answer = self._answer(child)
        except (BrokenPipeError, OSError):
            answer = b""
        self.sessions += 1
        if answer:
            try:
                reply = json.loads(answer)
            except ValueError:
                reply = {"ok": False, "error": answer.decode("utf-8", "replace").strip()[:300]}
            return reply if isinstance(reply, dict) else {"ok": False, "error": ""}
        self._child = None
        hint = hint or f"keep more of the model float with {option_name('fp32_nodes')}"
        if answer is None:  # stopped or deadlocked: abandoned
            stopped = process_stopped(child.pid)
            child.kill()
            child.wait()
            cause = "no answer: its process was stopped" if stopped else f"no answer within {self.timeout:g} s"
            on = "running it with every tensor exposed" if exposed else "on the candidate"
            raise CandidateFailed(
                f"{what}: onnxruntime gave {cause} {on} ({'stopped' if stopped else 'stopped, or deadlocked'}): it "
                "was abandoned",
                cause=cause,
                hint=hint,
            )
        cause = _signal_name(child.wait())
        doing = (
            "running it with every tensor exposed"
            if exposed
            else "creating a session on the candidate, or running it, at its default optimisation level; such a "
            "model is never bundled, since mgerun would crash on it"
        )
        raise CandidateFailed(f"{what}: onnxruntime crashes ({cause}) {doing}", cause=cause, hint=hint)

    def check(self, path: str, what: str) -> None:
        """Open ``path`` in the child.

        Raises:
            CandidateFailed: the child died by a signal while opening it, or gave no answer in time.
        """
        self._ask({"model": path}, what)

    def run(
        self, path: str, cases: Sequence[Mapping[str, np.ndarray]], scratch: str, what: str
    ) -> list[dict[str, np.ndarray]]:
        """Open ``path`` in the child and run every test case on that session: each case's outputs by name.

        Raises:
            CandidateFailed: the child died opening or running it, or gave no answer in time.
            OptimizeError: the model fails to load or run.
        """
        inputs = os.path.join(scratch, "child-inputs.npz")
        outputs = os.path.join(scratch, "child-outputs.npz")
        saved = save_cases(cases, inputs)
        try:
            job = {"model": path, "inputs": inputs, "outputs": outputs, "names": saved["names"]}
            reply = self._ask({**job, "cases": saved["counts"]}, what)
            if not reply.get("ok"):
                detail = str(reply.get("error") or "it does not load")
                raise OptimizeError(f"{what}: onnxruntime fails on the candidate model: {detail}")
            out_names = [str(n) for n in reply.get("outputs", [])]  # type: ignore[attr-defined]
            with np.load(outputs) as data:
                return [{name: data[f"c{k}_o{j}"] for j, name in enumerate(out_names)} for k in range(len(cases))]
        finally:
            _remove(inputs, outputs)

    def call(
        self,
        function: str,
        cases: Sequence[Mapping[str, np.ndarray]],
        scratch: str,
        what: str,
        allowed: Sequence[type],
        hint: str | None = None,
        **args: Any,
    ) -> Any:
        """Have the child call ``function`` (``module:function``, of mgedump) with the test cases (``cases=``) and
        ``args`` (JSON values), and return what it returned: written into ``scratch`` as JSON and read back building
        the dataclasses ``allowed`` and no other (:mod:`.isolate_call`).

        Raises:
            CandidateFailed: the child died in the call, or gave no answer in time (``hint`` says what to do).
            MgeError: the call raised one (of the kind raised), or failed otherwise (an OptimizeError naming ``what``).
        """
        inputs = os.path.join(scratch, "child-call-inputs.npz")
        result = os.path.join(scratch, "child-call-result.json")
        job = {"call": function, "args": args, "cases": save_cases(cases, inputs), "result": result}
        try:
            reply = self._ask(job, what, exposed=True, hint=hint)
            if not reply.get("ok"):
                raise reply_error(reply, what)
            return load_result(result, allowed, what)
        finally:
            _remove(inputs, result)


def _remove(*paths: str) -> None:
    for path in paths:
        if os.path.exists(path):
            os.remove(path)


def _signal_name(code: int) -> str:
    if code >= 0:
        return f"exit code {code}"
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def say_progress(line: str) -> None:
    """A line of a search's progress: logged at -v, and printed on a terminal otherwise (unless -q)."""
    logger.debug(line)
    if is_terminal(sys.stderr) and not logger.isEnabledFor(logging.DEBUG) and logger.isEnabledFor(logging.WARNING):
        print(f"mgedump: {line}", file=sys.stderr, flush=True)
