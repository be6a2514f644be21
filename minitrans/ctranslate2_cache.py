"""A checkpoint's CTranslate2 conversion, made once and kept in the user's cache (issue #45).

``--engine auto`` decodes a ``.ckpt`` with CTranslate2 when it can (:mod:`minitrans.auto_engine`).
The conversion (:mod:`minitrans.ctranslate2_export`, float32 weights: the compute type is chosen
when the folder is loaded) takes a second or two; it happens the first time a checkpoint is
decoded and later runs reuse it:

* the folder is ``<cache>/ctranslate2/<key>``, where ``<cache>`` is ``$MINITRANS_CACHE``, else
  ``$XDG_CACHE_HOME/minitrans``, else ``~/.cache/minitrans``, and ``<key>`` is a digest of the
  checkpoint's sha256, this exporter's version and CTranslate2's: a retrained, averaged or
  edited checkpoint, or a new CTranslate2, gets a new folder;
* it is written atomically (:func:`minitrans.textio.atomic_folder`) under a file lock: a second
  process converting the same checkpoint waits for the first and reuses its folder;
* a cached folder is checked before use (its files, the weights' sha256 recorded at export, the
  checkpoint it came from); a damaged one is converted again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

from filelock import FileLock

from minitrans.errors import CheckpointError
from minitrans.textio import file_sha256

log = logging.getLogger(__name__)
#: Part of every key: raise it when the export's layout or conventions change.
EXPORT_VERSION = 1


def cache_root() -> Path:
    """``$MINITRANS_CACHE``, else ``$XDG_CACHE_HOME/minitrans``, else ``~/.cache/minitrans``."""
    if os.environ.get("MINITRANS_CACHE"):
        return Path(os.environ["MINITRANS_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "minitrans"


def key(checkpoint_sha256: str) -> str:
    """The folder name of a checkpoint's conversion: 16 hex digits of a digest of its sha256,
    :data:`EXPORT_VERSION` and the installed CTranslate2's version."""
    from minitrans.ctranslate2_engine import import_ctranslate2

    stamp = json.dumps({"checkpoint": checkpoint_sha256, "export": EXPORT_VERSION,
                        "ctranslate2": import_ctranslate2().__version__}, sort_keys=True)
    return f"{checkpoint_sha256[:12]}-{hashlib.sha256(stamp.encode()).hexdigest()[:16]}"


def is_valid(folder: Path, checkpoint_sha256: str) -> bool:
    """Whether ``folder`` is a complete conversion of the checkpoint with that sha256: an export
    whose metadata names it and whose weights are the ones recorded (a truncated or replaced
    ``model.bin`` fails)."""
    from minitrans.ctranslate2_engine import is_export, read_metadata

    if not is_export(folder):
        return False
    try:
        meta = read_metadata(folder)
        return (meta.get("source_checkpoint_sha256") == checkpoint_sha256
                and meta.get("model_sha256") == file_sha256(folder / "model.bin"))
    except (CheckpointError, OSError):
        return False


def converted(checkpoint: str | os.PathLike) -> Path:
    """The cached CTranslate2 folder of ``checkpoint``, converted now if it is missing or damaged.

    Raises whatever the conversion raises (a damaged checkpoint: :class:`CheckpointError`; a
    cache that cannot be written: :class:`OSError`); :mod:`minitrans.auto_engine` then decodes
    with the native engine."""
    from minitrans.ctranslate2_export import export_ctranslate2

    sha = file_sha256(checkpoint)
    folder = cache_root() / "ctranslate2" / key(sha)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder.with_name(f"{folder.name}.lock"))):
        if is_valid(folder, sha):
            return folder
        if folder.exists():
            log.warning("%s: a damaged CTranslate2 conversion in the cache; converting %s again.", folder, checkpoint)
            shutil.rmtree(folder, ignore_errors=True)
        export_ctranslate2(checkpoint, folder, "float32")
        if not is_valid(folder, sha):  # the checkpoint changed while it was read
            raise CheckpointError(f"{checkpoint} changed while it was converted for CTranslate2; try again.")
        return folder
