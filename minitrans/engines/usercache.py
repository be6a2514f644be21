"""The user's cache folder: where minitrans keeps what it makes unasked, and who may touch it.

minitrans keeps two kinds of copies there: a checkpoint's CTranslate2 conversion
(:mod:`minitrans.engines.ctranslate2_cache`, float32 weights of the user's model) and the page's
onnxruntime-web files (:mod:`minitrans.export.web_runtime`). The folder is ``$MINITRANS_CACHE``, else
``$XDG_CACHE_HOME/minitrans``, else ``~/.cache/minitrans``.

What is loaded from it is trusted as the user's own, so the rules are ssh's for ``~/.ssh``:

* the root is created ``0700``; a root of the user's that others may read but not write (an
  older minitrans made it ``0755``) is tightened to ``0700``; each kind's folder under it is the
  user's own and ``0700`` too: a private checkpoint's weights never become readable by others;
* a root, a kind's folder or an entry **not owned by the user, or writable by group or others**
  is not trusted: :class:`UntrustedCache` says which and why, and the callers warn and work in a
  private temporary folder instead (a conversion planted there by another user is never loaded);
* an entry is replaced only as a folder minitrans made: a symlink in its place is removed as a
  link (the folder it points to is left alone), a folder holding other files is refused.

Conversions are bounded (:func:`evict`): least recently used first, never one in use.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from minitrans.errors import MinitransError

log = logging.getLogger(__name__)
#: The cache's size bound for conversions, in MiB, unless ``$MINITRANS_CACHE_MB`` says otherwise.
DEFAULT_LIMIT_MB = 1024


class UntrustedCache(MinitransError):
    """A cache folder another user could have written: nothing in it is loaded."""


def cache_root() -> Path:
    """``$MINITRANS_CACHE``, else ``$XDG_CACHE_HOME/minitrans``, else ``~/.cache/minitrans``."""
    if os.environ.get("MINITRANS_CACHE"):
        return Path(os.environ["MINITRANS_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "minitrans"


def limit_bytes() -> int:
    """The conversions' size bound: ``$MINITRANS_CACHE_MB`` MiB (default :data:`DEFAULT_LIMIT_MB`)."""
    text = os.environ.get("MINITRANS_CACHE_MB", "").strip()
    if not text:
        return DEFAULT_LIMIT_MB << 20
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1e12:  # a bad bound never stops a translation: said, and the default kept
        log.warning("MINITRANS_CACHE_MB=%r is not a size in MiB (a number such as 1024; 0 keeps only the "
                    "conversion in use); bounding the cache at the default, %d MiB.", text, DEFAULT_LIMIT_MB)
        return DEFAULT_LIMIT_MB << 20
    return int(value * (1 << 20))


def _untrusted_why(path: Path, st: os.stat_result) -> str | None:
    """Why a folder or file of the cache cannot be trusted, or None."""
    if st.st_uid != os.getuid():
        return f"it is owned by another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"others may write it (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _own_folder(path: Path, what: str) -> Path:
    """``path``, a folder of the user's that only they may write, made ``0700`` if missing and
    tightened to ``0700`` if others may read it; :class:`UntrustedCache` otherwise."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as err:
        raise UntrustedCache(f"cannot create the cache folder {path}: {err.strerror or err}") from None
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UntrustedCache(f"{what} {path} is not a folder minitrans made (a link or a file)")
    why = _untrusted_why(path, st)
    if why:
        raise UntrustedCache(f"{what} {path} is not safe: {why}")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def trusted_folder(kind: str) -> Path:
    """``<root>/<kind>``, checked (see the module notes): the root and the kind's folder are
    the user's own and private. The root may be reached through a symlink (``~/.cache`` on
    another disk); a root in a folder anyone may write without the sticky bit is refused."""
    root = Path(os.path.realpath(cache_root()))
    parent = root.parent
    try:
        parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        pst = os.stat(parent)
    except OSError as err:
        raise UntrustedCache(f"cannot create the cache folder {root}: {err.strerror or err}") from None
    if pst.st_mode & stat.S_IWOTH and not pst.st_mode & stat.S_ISVTX:
        raise UntrustedCache(f"the cache folder {root} lies in {parent}, which anyone may write")
    _own_folder(root, "the cache folder")
    return _own_folder(root / kind, "the cache folder")


def trusted_entry(entry: Path) -> str | None:
    """Why an existing entry (a folder under a kind's folder) cannot be trusted, or None: it and
    everything in it must be the user's own and writable by no one else, and none a link."""
    try:
        items = [entry, *entry.rglob("*")] if not entry.is_symlink() else [entry]
        for item in items:
            st = os.lstat(item)
            if stat.S_ISLNK(st.st_mode):
                return f"{item} is a link"
            why = _untrusted_why(item, st)
            if why:
                return f"{item}: {why}"
    except OSError as err:
        return f"{entry}: {err.strerror or err}"
    return None


def discard(entry: Path, files: Iterable[str]) -> None:
    """Remove an entry minitrans may replace: a link (the link only, never what it points to),
    or a folder holding only ``files``. Anything else is :class:`UntrustedCache`."""
    if entry.is_symlink() or entry.is_file():
        entry.unlink()
        return
    if not entry.exists():
        return
    known = set(files)
    foreign = [p.name for p in entry.iterdir() if p.name not in known or p.is_symlink() or not p.is_file()]
    if foreign:
        raise UntrustedCache(f"{entry} holds {', '.join(sorted(foreign)[:3])}, which minitrans did not write; "
                             "it replaces only its own files there")
    shutil.rmtree(entry)


_fallback: Path | None = None
_warned: set[str] = set()


def private_fallback(kind: str, why: str) -> Path:
    """A private temporary folder (``0700``, removed at exit) for this process's copies when
    the cache cannot be trusted; warns once per reason, with the fix."""
    global _fallback
    if _fallback is None:
        _fallback = Path(tempfile.mkdtemp(prefix="minitrans-cache-"))
        atexit.register(shutil.rmtree, _fallback, True)
    if why not in _warned:
        _warned.add(why)
        log.warning("not using the cache: %s. Working in a private temporary folder instead (nothing is kept); "
                    "make the cache yours (`chmod 700`, or set MINITRANS_CACHE to a folder of yours).", why)
    folder = _fallback / kind
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def make_private(folder: Path) -> None:
    """Make a folder minitrans just wrote readable and writable by the user alone (``0700``
    folders, ``0600`` files), whatever the umask: the cache copies a private checkpoint."""
    for item in (folder, *folder.rglob("*")):
        if not item.is_symlink():
            os.chmod(item, 0o700 if item.is_dir() else 0o600)


def folder_size(folder: Path) -> int:
    """Bytes of the plain files in ``folder`` (not following links)."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if not p.is_symlink() and p.is_file())


def _last_used(entry: Path) -> float:
    try:
        return entry.stat().st_mtime
    except OSError:  # removed meanwhile by another process
        return 0.0


def entries_in(folder: Path) -> list[Path]:
    """The finished entries of a kind's folder (real folders; no temporaries, links or lock
    files), most recently used first."""
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")]
    return sorted(found, key=_last_used, reverse=True)


def touch(entry: Path) -> None:
    """Mark ``entry`` as just used (its modification time orders eviction)."""
    try:
        os.utime(entry)
    except OSError:
        pass


def evict(folder: Path, limit: int, keep: Path, try_lock) -> list[Path]:
    """Remove the least recently used entries of ``folder`` (by modification time) until the
    entries take at most ``limit`` bytes; never ``keep``, never an entry whose lock
    ``try_lock(entry)`` cannot take (another process converting or loading it). Returns what
    was removed."""
    entries = entries_in(folder)
    sizes = {p: folder_size(p) for p in entries}
    total = sum(sizes.values())
    removed = []
    for entry in reversed(entries):  # least recently used first
        if total <= limit:
            break
        if entry == keep:
            continue
        with try_lock(entry) as held:
            if not held or not entry.is_dir():
                continue
            shutil.rmtree(entry, ignore_errors=True)
        total -= sizes[entry]
        removed.append(entry)
        log.info("cache: removed %s (%.1f MB, least recently used; the bound is MINITRANS_CACHE_MB=%d).",
                 entry.name, sizes[entry] / 1e6, limit >> 20)
    return removed
