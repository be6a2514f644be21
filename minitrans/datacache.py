"""The prepared-data cache: a folder of tokenised Arrow splits and the SentencePiece model,
keyed by the data settings and the raw files' sizes and times, built once and published whole.

* :func:`cache_path` — ``cache_dir/<dataset>-<12 hex digits>``: a sha256 of the settings stamp
  (:func:`settings_stamp`)
  plus each raw file's resolved path, size and modification time, so a changed setting or a
  touched corpus file gives a new cache and the same ones reuse it in seconds.
* :func:`build` — the one-time work in a folder of this process's own, then a rename into
  place: the cache appears whole or not at all. A failed build leaves nothing behind; a full
  disk (or a file-size limit) is one line naming the cache, in whichever phase it is met, even
  when a library wrapped the error in its own. The check, build and rename hold a lock file beside the
  cache (``<cache>.lock``, an OS lock the kernel releases if the process dies), so two
  ``prepare`` runs started together do the work once: the second waits and reuses the first's
  cache. Without it, the second could find no cache, then delete the first's just published
  one as if a killed run had left it, while the first was reading it.
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

from filelock import FileLock

from minitrans.textio import disk_full, write_failed

log = logging.getLogger(__name__)
#: Part of every cache key: raise it when the cache's layout or content changes.
CACHE_VERSION = 1
DONE = "done.json"


#: The data settings every cache key holds (``data.*``).
KEYED = ("dataset", "files", "hub_id", "vocab_size", "spm_model_type", "max_len", "valid_size", "test_size", "seed",
         "corpora")


def settings_stamp(settings, mixture: bool, default_direction: str, tokenizer_sha256: str | None) -> dict[str, Any]:
    """The part of the key that the data settings give (``settings``: the data module's
    hyper-parameters). Entries are added only where they matter, so that the keys of settings
    made before them stay as they were: ``corpora`` and ``temperature`` for a mixture (its
    tokenizer is trained on the weighted sample), ``direction`` off the default one, ``tokenizer``
    (its sha256) when ``data.tokenizer`` gives one instead of training it."""
    stamp: dict[str, Any] = {k: settings[k] for k in KEYED}
    if mixture:
        stamp["temperature"] = settings["temperature"]
    else:
        del stamp["corpora"]
    if settings["direction"] != default_direction:
        stamp["direction"] = settings["direction"]
    if tokenizer_sha256:
        stamp["tokenizer"] = tokenizer_sha256
    return stamp


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
    cache first (it is complete and equal; this process waited for it and built nothing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.with_name(f"{path.name}.lock"))):
        if is_ready(path):
            return False
        return _build_and_publish(path, fill)


def _build_and_publish(path: Path, fill: Callable[[Path, Path], dict[str, Any]]) -> bool:
    """:func:`build`'s work, under its lock."""
    started = time.perf_counter()
    for stale in path.parent.glob(f"{path.name}.tmp*"):  # killed builds' folders: nobody else holds the lock
        shutil.rmtree(stale, ignore_errors=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    scratch = tmp / "_build"
    scratch.mkdir(parents=True)
    try:
        report = fill(tmp, scratch)
        shutil.rmtree(scratch)
    except BaseException as err:  # nothing of a failed preparation stays behind
        shutil.rmtree(tmp, ignore_errors=True)
        full = disk_full(err)  # however deep a library wrapped it
        if full is not None:  # one line naming the cache, not a traceback
            raise write_failed(path, full) from None
        raise
    report["seconds"] = round(time.perf_counter() - started, 1)
    (tmp / DONE).write_text(json.dumps(report, indent=2))
    shutil.rmtree(path, ignore_errors=True)  # an incomplete cache (copied in by hand, or an older version's)
    tmp.rename(path)
    return True
