"""A checkpoint's CTranslate2 conversion, made once and kept in the user's cache (issue #45).

``--engine auto`` decodes a ``.ckpt`` with CTranslate2 when it can (:mod:`minitrans.engines.auto_engine`).
The conversion (:mod:`minitrans.engines.ctranslate2_export`, float32 weights: the compute type is chosen
when the folder is loaded) takes a second or two; it happens the first time a checkpoint is
decoded and later runs reuse it:

* the folder is ``<cache>/ctranslate2/<key>``, where ``<cache>`` is ``$MINITRANS_CACHE``, else
  ``$XDG_CACHE_HOME/minitrans``, else ``~/.cache/minitrans``, and ``<key>`` is a digest of the
  checkpoint's sha256, this exporter's version and CTranslate2's: a retrained, averaged or
  edited checkpoint, or a new CTranslate2, gets a new folder;
* it is written atomically (:func:`minitrans.text.textio.atomic_folder`) under a file lock: a second
  process converting the same checkpoint waits for the first and reuses its folder;
* a cached folder is checked before use (its files, the weights' sha256 recorded at export, the
  checkpoint it came from); a damaged one is converted again;
* the cache is the user's own (:mod:`minitrans.engines.usercache`): created ``0700``; a folder or entry
  another user owns or may write is never loaded (a warning, then a private conversion in a
  temporary folder); a link in an entry's place is replaced as a link;
* it is bounded: after a conversion, the least recently used others go until the conversions
  take at most ``$MINITRANS_CACHE_MB`` MiB (default 1024); an entry being converted or loaded
  (its lock held) is never removed. ``minitrans cache`` lists it, ``minitrans cache --clear``
  empties it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from minitrans.errors import CheckpointError
from minitrans.text.textio import file_sha256
from minitrans.engines.usercache import (UntrustedCache, cache_root, discard, evict, limit_bytes, make_private,
                                 private_fallback, touch, trusted_entry, trusted_folder)

log = logging.getLogger(__name__)
#: Part of every key: raise it when the export's layout or conventions change.
EXPORT_VERSION = 1


def key(checkpoint_sha256: str) -> str:
    """The folder name of a checkpoint's conversion: 16 hex digits of a digest of its sha256,
    :data:`EXPORT_VERSION` and the installed CTranslate2's version."""
    from minitrans.engines.ctranslate2_engine import import_ctranslate2

    stamp = json.dumps({"checkpoint": checkpoint_sha256, "export": EXPORT_VERSION,
                        "ctranslate2": import_ctranslate2().__version__}, sort_keys=True)
    return f"{checkpoint_sha256[:12]}-{hashlib.sha256(stamp.encode()).hexdigest()[:16]}"


def is_valid(folder: Path, checkpoint_sha256: str) -> bool:
    """Whether ``folder`` is a complete conversion of the checkpoint with that sha256: an export
    whose metadata names it and whose weights are the ones recorded (a truncated or replaced
    ``model.bin`` fails)."""
    from minitrans.engines.ctranslate2_engine import is_export, read_metadata

    if not is_export(folder):
        return False
    try:
        meta = read_metadata(folder)
        return (meta.get("source_checkpoint_sha256") == checkpoint_sha256
                and meta.get("model_sha256") == file_sha256(folder / "model.bin"))
    except (CheckpointError, OSError):
        return False


KIND = "ctranslate2"
__all__ = ["cache_root", "converted", "in_use", "is_valid", "key"]


def _lock(entry: Path, timeout: float = -1) -> FileLock:
    return FileLock(str(entry.with_name(f"{entry.name}.lock")), timeout=timeout)


@contextlib.contextmanager
def _try_lock(entry: Path) -> Iterator[bool]:
    """Hold ``entry``'s lock if no other process holds it: whether it was taken."""
    lock = _lock(entry, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def converted(checkpoint: str | os.PathLike) -> Path:
    """The cached CTranslate2 folder of ``checkpoint``, converted now if it is missing or damaged
    (:func:`in_use`, released on return)."""
    with in_use(checkpoint) as folder:
        return folder


@contextlib.contextmanager
def in_use(checkpoint: str | os.PathLike) -> Iterator[Path]:
    """The checkpoint's conversion, held (its lock) while the caller loads it: no other process
    converts it again or evicts it meanwhile. Converted now if missing, damaged or untrusted.

    Raises whatever the conversion raises (a damaged checkpoint: :class:`CheckpointError`; a
    cache that cannot be written: :class:`OSError`); :mod:`minitrans.engines.auto_engine` then decodes
    with the native engine."""
    from minitrans.engines.ctranslate2_engine import EXPORT_FILES
    from minitrans.engines.ctranslate2_export import export_ctranslate2

    sha = file_sha256(checkpoint)
    try:
        parent, shared = trusted_folder(KIND), True
    except UntrustedCache as err:
        parent, shared = private_fallback(KIND, str(err)), False
    folder = parent / key(sha)
    with _lock(folder):
        if folder.exists() or folder.is_symlink():
            why = trusted_entry(folder)
            if why is None and is_valid(folder, sha):
                touch(folder)
                yield folder
                return
            log.warning("%s: %s in the cache; converting %s again.", folder,
                        f"an entry not to trust ({why})" if why else "a damaged CTranslate2 conversion", checkpoint)
            try:
                discard(folder, EXPORT_FILES)
            except (UntrustedCache, OSError) as err:  # not ours to remove: convert privately
                folder, shared = private_fallback(KIND, str(err)) / folder.name, False
                if is_valid(folder, sha):  # converted privately before, in this process
                    yield folder
                    return
        export_ctranslate2(checkpoint, folder, "float32")
        if not is_valid(folder, sha):  # the checkpoint changed while it was read
            raise CheckpointError(f"{checkpoint} changed while it was converted for CTranslate2; try again.")
        make_private(folder)
        if shared:
            evict(parent, limit_bytes(), folder, _try_lock)
        yield folder


def entries() -> list[tuple[Path, int]]:
    """The cached conversions with their sizes in bytes, most recently used first."""
    from minitrans.engines.usercache import entries_in, folder_size

    return [(p, folder_size(p)) for p in entries_in(cache_root() / KIND)]


def clear() -> list[Path]:
    """Remove every conversion no other process is converting or loading; returns them."""
    folder = trusted_folder(KIND)
    return evict(folder, 0, folder / "-", _try_lock)
