"""A sign of life on long work: what a command is doing, with the time it has taken, on a terminal only.

Loading a 512 MB model or hashing its weights takes seconds with nothing to print; on a terminal the user sees
one line on stderr, rewritten in place (``mgedump: running test case 3 of 40 (12s)``), its clock kept going by a
background thread while a step runs, and wiped when the command prints its result. Anywhere else (a pipe, a CI
log) it prints nothing: the result lines are what a log should hold.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO

from ..base.log import printable
from ..base.streams import is_terminal

TICK_S = 0.5  # how often the clock on the line moves
AFTER_S = 1.0  # a step shorter than this never shows: quick commands print nothing extra


class Status:
    """The status line; call it with each step (``status("hashing the weights")``), then :meth:`close`.

    Args:
        prog: the command's name, first on the line.
        stream: where the line goes (stderr); it is used only when it is a terminal.
        enabled: False turns it off whatever the stream is (``-q``).
    """

    def __init__(self, prog: str, stream: IO[str] | None = None, enabled: bool = True) -> None:
        self.prog = prog
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and is_terminal(self.stream)
        self.began = time.monotonic()
        self.text = ""
        self.shown = 0  # the width of what is on the line now
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __call__(self, text: str) -> None:
        """Show this step; ``""`` wipes the line (the command prints its own lines next)."""
        if not self.enabled:
            return
        if not text:
            self._wipe()
            return
        with self._lock:
            self.text = printable(text)
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="mgedump-status", daemon=True)
            self._ticker.start()
        self._draw()

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            self._draw()

    def _draw(self) -> None:
        with self._lock:
            elapsed = time.monotonic() - self.began
            if self._stop.is_set() or elapsed < AFTER_S or not self.text:
                return
            line = f"{self.prog}: {self.text} ({elapsed:.0f}s)"
            self.stream.write("\r" + line + " " * max(0, self.shown - len(line)))
            self.stream.flush()
            self.shown = len(line)

    def close(self) -> None:
        """Stop the clock and wipe the line, so that what is printed next starts on a clean line."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        self._wipe()

    def _wipe(self) -> None:
        with self._lock:
            self.text = ""
            if self.shown:
                self.stream.write("\r" + " " * self.shown + "\r")
                self.stream.flush()
                self.shown = 0

    def __enter__(self) -> Status:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
