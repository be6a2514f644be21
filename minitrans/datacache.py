"""The prepared-data cache: a folder of tokenised Arrow splits and the SentencePiece model,
keyed by the data settings and the raw files' sizes and times, built once and published whole.

* :func:`cache_path` — ``cache_dir/<dataset>-<12 hex digits>``: a sha256 of the settings stamp
  plus each raw file's resolved path, size and modification time, so a changed setting or a
  touched corpus file gives a new cache and the same ones reuse it in seconds.
* :func:`build` — the one-time work in a folder of this process's own (two ``prepare`` runs
  started together never share one), then a rename into place: the cache appears whole or not
  at all. A failed build leaves nothing behind; a full disk is one line naming the cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minitrans.textio import DISK_FULL, write_failed

log = logging.getLogger(__name__)
#: Part of every cache key: raise it when the cache's layout or content changes.
CACHE_VERSION = 1
DONE = "done.json"


def cache_path(cache_dir: str | os.PathLike, dataset: str, stamp: dict[str, Any], sources: list[Path]) -> Path:
    """Where the cache of these settings (``stamp``) and raw files lives."""
    stamp = {**stamp, "version": CACHE_VERSION,
             "sources": [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in sources if p.exists()]}
    digest = hashlib.sha256(json.dumps(stamp, sort_keys=True).encode()).hexdigest()[:12]
    return Path(cache_dir) / f"{dataset}-{digest}"


def is_ready(path: Path) -> bool:
    """Whether a complete cache is at ``path``."""
    return (path / DONE).exists()


def read_report(path: Path) -> dict:
    """What the build recorded (cleaning, split sizes, seconds, mixture)."""
    return json.loads((path / DONE).read_text())


def build(path: Path, fill: Callable[[Path, Path], dict[str, Any]]) -> bool:
    """Build the cache at ``path`` with ``fill(folder, scratch)``, which writes the cache's
    files into ``folder`` (``scratch`` is for intermediate files and is deleted after) and
    returns the report to record. Returns False when another process published the same
    cache first (its cache is complete and equal; this one's is discarded)."""
    started = time.perf_counter()
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    scratch = tmp / "_build"
    scratch.mkdir(parents=True)
    try:
        report = fill(tmp, scratch)
        shutil.rmtree(scratch)
    except BaseException as err:  # nothing of a failed preparation stays behind
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError) and err.errno in DISK_FULL:  # one line naming the cache, not a traceback
            raise write_failed(path, err) from None
        raise
    report["seconds"] = round(time.perf_counter() - started, 1)
    (tmp / DONE).write_text(json.dumps(report, indent=2))
    try:
        if is_ready(path):  # another process finished first: keep its cache
            raise FileExistsError(path)
        shutil.rmtree(path, ignore_errors=True)  # an incomplete cache of a killed run
        tmp.rename(path)
    except OSError:  # lost the race to rename
        shutil.rmtree(tmp, ignore_errors=True)
        return False
    return True
