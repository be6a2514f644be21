"""Progress of long work on stderr: a line every few seconds, nothing for short work.

``Progress`` is what the engines' ``progress(n)`` hook is given: it adds up the sentences done
and, at most every ``every_s`` seconds, prints ``what: done/total sentences (rate sent/s)``.
Work that ends before the first interval prints nothing, so short commands stay quiet."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Counts sentences done and reports them to ``stream`` (stderr) now and then."""

    def __init__(self, total: int | None, what: str, every_s: float = 10.0, stream: TextIO | None = None):
        self.total, self.what, self.every_s = total, what, every_s
        self.stream = stream
        self.done = 0
        self.started = self._last = time.perf_counter()

    def __call__(self, n: int) -> None:
        self.done += n
        now = time.perf_counter()
        if now - self._last >= self.every_s:
            self._last = now
            rate = self.done / max(now - self.started, 1e-9)
            of = f"/{self.total:,}" if self.total is not None else ""
            print(f"{self.what}: {self.done:,}{of} sentences ({rate:.1f} sent/s)",
                  file=self.stream or sys.stderr, flush=True)
