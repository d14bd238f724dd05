"""Open candidate models where a crash is survivable: in a child process.

onnxruntime can take the process down (SIGSEGV, SIGABRT) while it optimises a
rewritten model at session creation, a float16 candidate at its highest level
for one. The searches open each candidate in a child first (one child per
search, which imports onnxruntime once and opens the candidates it is given);
a child that dies is a refusal naming the cause, never a crash of ``mgedump``,
and a model that crashes onnxruntime is never bundled (``mgerun`` would crash
on it).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import IO

from ..errors import OptimizeError

_CHILD = """
import sys
import onnxruntime as ort
options = ort.SessionOptions()
options.log_severity_level = 4
for line in sys.stdin:
    try:
        ort.InferenceSession(line.rstrip("\\n"), options, providers=["CPUExecutionProvider"])
        print("ok", flush=True)
    except Exception:  # a load error: the caller's own session reports it
        print("error", flush=True)
"""


class Opener:
    """A child process that creates an onnxruntime session (CPU, default optimisation level) on each model given.

    Use as a context manager; :meth:`check` raises when the child dies on a model.
    """

    def __init__(self) -> None:
        self._child: subprocess.Popen[str] | None = None

    def __enter__(self) -> Opener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            if child.stdin is not None:
                child.stdin.close()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    def check(self, path: str, what: str) -> None:
        """Open ``path`` in the child.

        Raises:
            OptimizeError: the child died by a signal while opening it.
        """
        if self._child is None or self._child.poll() is not None:
            self._child = subprocess.Popen(
                [sys.executable, "-c", _CHILD],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        child = self._child
        stdin: IO[str] | None = child.stdin
        stdout: IO[str] | None = child.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(path + "\n")
            stdin.flush()
            answer = stdout.readline()
        except (BrokenPipeError, OSError):
            answer = ""
        if answer:
            return
        code = child.wait()
        self._child = None
        raise OptimizeError(
            f"{what}: onnxruntime crashes ({_signal_name(code)}) creating a session on the model at its default "
            "optimisation level; such a model is never bundled, since mgerun would crash on it",
            hint="keep more of the model float with --fp32-nodes, or leave the flag out",
        )


def _signal_name(code: int) -> str:
    if code >= 0:
        return f"exit code {code}"
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"
