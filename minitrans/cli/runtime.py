"""The allocator setting for PyTorch on CPU: on for the commands that decode, opt-in for training.

glibc's ``malloc`` serves large blocks (the (tokens × vocabulary) logits, their gradients,
activations, a decoding step's caches) with ``mmap`` and returns them to the kernel on
``free``, so every step maps fresh pages. Keeping freed memory in the heap (``M_MMAP_MAX = 0``,
a 1 GiB trim threshold) removes that kernel time.

It made decoding faster in greedy search on the small model and no slower elsewhere, with the
same outputs and about the same peak memory; in training it saved kernel time but not step
time, for more peak memory (docs/speed.md, "The allocator (on for decoding, opt-in for
training)"). So the ``minitrans`` command applies it for the commands that decode
(``minitrans.cli.parser.DECODING_COMMANDS``) unless ``MINITRANS_MALLOC=default``, and for training
only with ``MINITRANS_MALLOC=tuned``.

A Python program that imports minitrans keeps its allocator: the setting is process-wide, and
a library does not change its host's; :func:`tune_allocator` with ``force=True`` applies it.
Other C libraries than glibc are left alone.
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


def tune_allocator(force: bool = False, decoding: bool = False) -> bool:
    """Keep freed memory in glibc's heap instead of unmapping it, when ``force``, when
    ``MINITRANS_MALLOC=tuned``, or for ``decoding`` work unless ``MINITRANS_MALLOC=default``
    (or ``off``); returns whether the setting is in force."""
    global _applied
    if _applied:
        return True
    setting = os.environ.get("MINITRANS_MALLOC", "").lower()
    wanted = force or setting == "tuned" or (decoding and setting not in ("default", "off", "0"))
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
