"""An opt-in allocator setting for PyTorch on CPU (``MINITRANS_MALLOC=tuned``).

glibc's ``malloc`` serves large blocks (the (tokens × vocabulary) logits, their gradients,
activations) with ``mmap`` and returns them to the kernel on ``free``, so every training step
maps fresh pages: 58 million minor page faults and 133 of 1,195 CPU seconds in the kernel in a
10-minute training run. Keeping freed memory in the heap (``M_MMAP_MAX = 0``, a 1 GiB trim
threshold) removes the system time, but the step rate did not follow: six alternated pairs of
``bench/benchmark_train.py --settings "bf16 explicit" --steps 30 --allocator {default,tuned}``
gave 0.94-1.24x, median 1.02x (system CPU 5-6 s -> 1 s per 30 steps, user CPU up by about as
much), for ~17% more peak memory (4.0 vs 3.4 GiB in 10-minute runs). So it is off unless asked
for; the ``minitrans`` command applies it when ``MINITRANS_MALLOC=tuned``. Other C libraries
are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

log = logging.getLogger(__name__)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX = -1, -2, -4
_applied = False


def tune_allocator(force: bool = False) -> bool:
    """Keep freed memory in glibc's heap instead of unmapping it, when ``force`` or
    ``MINITRANS_MALLOC=tuned``; returns whether the setting is in force."""
    global _applied
    if _applied:
        return True
    wanted = force or os.environ.get("MINITRANS_MALLOC", "").lower() == "tuned"
    if not wanted or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, ...)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = all(mallopt(param, value) == 1 for param, value in
             ((M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, 1 << 30), (M_TOP_PAD, 64 << 20)))
    _applied = ok
    log.debug("glibc allocator tuned: %s", ok)
    return ok
