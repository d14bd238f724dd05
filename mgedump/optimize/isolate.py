"""Open candidate models where a crash is survivable: in a child process.

onnxruntime can take the process down (SIGSEGV, SIGABRT) while it optimises a
rewritten model at session creation, a float16 candidate at its highest level
for one. The searches open each candidate in a child first (one child per
search, which imports onnxruntime once and opens the candidates it is given);
a child that dies is a refusal naming the cause, never a crash of ``mgedump``,
and a model that crashes onnxruntime is never bundled (``mgerun`` would crash
on it).

The session the child opens is the one a plain ``mgerun`` would run (CPU,
default optimisation level), so :meth:`Opener.run` also runs the test cases on
it and hands the outputs back: one session per candidate both proves it loads
and measures it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import IO

import numpy as np

from ..base.errors import OptimizeError

_CHILD = """
import json
import sys
import numpy as np
import onnxruntime as ort
options = ort.SessionOptions()
options.log_severity_level = 4
for line in sys.stdin:
    job = json.loads(line)
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


class Opener(AbstractContextManager["Opener"]):
    """A child process that creates an onnxruntime session (CPU, default optimisation level) on each model given.

    Use as a context manager; :meth:`check` and :meth:`run` raise when the child dies on a model.
    """

    def __init__(self) -> None:
        self._child: subprocess.Popen[str] | None = None
        self.sessions = 0  # sessions the child created

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

    def _ask(self, job: Mapping[str, object], what: str) -> dict[str, object]:
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
            stdin.write(json.dumps(job) + "\n")
            stdin.flush()
            answer = stdout.readline()
        except (BrokenPipeError, OSError):
            answer = ""
        self.sessions += 1
        if answer:
            try:
                reply = json.loads(answer)
            except ValueError:
                reply = {"ok": False, "error": answer.strip()[:300]}
            return reply if isinstance(reply, dict) else {"ok": False, "error": ""}
        code = child.wait()
        self._child = None
        raise OptimizeError(
            f"{what}: onnxruntime crashes ({_signal_name(code)}) creating a session on the model at its default "
            "optimisation level; such a model is never bundled, since mgerun would crash on it",
            hint="keep more of the model float with --fp32-nodes, or leave the flag out",
        )

    def check(self, path: str, what: str) -> None:
        """Open ``path`` in the child.

        Raises:
            OptimizeError: the child died by a signal while opening it.
        """
        self._ask({"model": path}, what)

    def run(
        self, path: str, cases: Sequence[Mapping[str, np.ndarray]], scratch: str, what: str
    ) -> list[dict[str, np.ndarray]]:
        """Open ``path`` in the child and run every test case on that session: each case's outputs by name.

        Raises:
            OptimizeError: the child died opening or running it, or the model fails to load or run.
        """
        names: list[str] = []
        for feeds in cases:
            names += [n for n in feeds if n not in names]
        arrays = {}
        counts = []
        for k, feeds in enumerate(cases):
            order = [n for n in names if n in feeds]
            if order != names[: len(order)]:  # every case gives the same inputs, in one order
                raise ValueError("test cases give different inputs")
            counts.append(len(order))
            arrays.update({f"c{k}_i{j}": np.asarray(feeds[n]) for j, n in enumerate(order)})
        inputs = os.path.join(scratch, "child-inputs.npz")
        outputs = os.path.join(scratch, "child-outputs.npz")
        np.savez(inputs, **arrays)  # type: ignore[arg-type]
        try:
            reply = self._ask(
                {"model": path, "inputs": inputs, "outputs": outputs, "names": names, "cases": counts}, what
            )
            if not reply.get("ok"):
                detail = str(reply.get("error") or "it does not load")
                raise OptimizeError(f"{what}: onnxruntime fails on the candidate model: {detail}")
            out_names = [str(n) for n in reply.get("outputs", [])]  # type: ignore[attr-defined]
            with np.load(outputs) as data:
                return [{name: data[f"c{k}_o{j}"] for j, name in enumerate(out_names)} for k in range(len(cases))]
        finally:
            for path_ in (inputs, outputs):
                if os.path.exists(path_):
                    os.remove(path_)


def _signal_name(code: int) -> str:
    if code >= 0:
        return f"exit code {code}"
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"
