"""Reading lines and writing files, the same way everywhere.

* **Lines** are separated by ``\\n`` only (a ``\\r`` before it is dropped), exactly as
  ``wc -l`` counts them. ``str.splitlines`` and Python's universal newlines also break on
  U+2028, U+0085, ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e`` and lone ``\\r``, which would misalign a
  translation or a reference file with its source; minitrans never uses them on user text.
  A UTF-8 byte-order mark at the start of a file is dropped. Bytes that are not UTF-8 raise a
  :class:`DataError` naming the file and line.
* **Outputs** appear whole or not at all: :func:`atomic_output` writes to a temporary file
  beside the target and renames it over the target only when writing succeeded, with the mode
  (and, where permitted, owner and group) of the file it replaces. That is right
  for regular files only, so the target is looked at first (:func:`output_target`): a symlink
  is followed and its *target* is replaced atomically (the link stays a link); a FIFO or a
  character device (``/dev/null``, ``/dev/stdout``, a named pipe) is written straight into,
  never replaced by a regular file; anything else that is not a regular file is refused.
* **Failed writes** (disk full, file size limit, permission) raise a one-line
  :class:`WriteError` naming the path and the cause; the previous file is kept whole.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import shutil
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from minitrans.errors import DISK_FULL, DataError, UsageError, write_failed

BOM = "\ufeff"


def decode_line(raw: bytes, where: str, number: int) -> str:
    """One raw line (without its ``\\n``) as text: UTF-8, trailing ``\\r`` dropped."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(
            f"{where}, line {number}: byte {err.start + 1} is not UTF-8 ({raw[err.start:err.start + 4]!r}). "
            f"Convert the file to UTF-8, e.g. `iconv -f LATIN1 -t UTF-8 IN > OUT`."
        ) from None
    if number == 1 and text.startswith(BOM):
        text = text[1:]
    return text


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def decode_text(data: bytes, where: str) -> str:
    """A whole file (a document) as text: UTF-8, an error naming its line as
    :func:`decode_line` does. A byte-order mark is kept (the document formats write it back)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line_start = data.rfind(b"\n", 0, err.start) + 1
        line = data.count(b"\n", 0, err.start) + 1
        raise DataError(
            f"{where}, line {line}: byte {err.start - line_start + 1} is not UTF-8 "
            f"({data[err.start:err.start + 4]!r}). Convert the file to UTF-8, e.g. `iconv -f LATIN1 -t UTF-8 IN > OUT`."
        ) from None


def iter_lines(stream: IO[bytes], where: str) -> Iterator[str]:
    """Lines of a binary stream, decoded with :func:`decode_line`. A final line without
    ``\\n`` counts; an empty stream has no lines."""
    for number, raw in enumerate(stream, 1):
        yield decode_line(raw[:-1] if raw.endswith(b"\n") else raw, where, number)


def read_lines(path: str | os.PathLike, what: str = "File") -> list[str]:
    """Every line of a file (see the module docstring), with a clear error if it is missing."""
    path = Path(path)
    if not is_readable_file(path):
        raise DataError(f"{what} not found: {path}. Check the path.")
    with open(path, "rb") as f:
        return list(iter_lines(f, str(path)))


def is_readable_file(path: str | os.PathLike) -> bool:
    """A regular file, or something read like one: a FIFO (``<(cmd)``, ``mkfifo``) or a
    character device (``/dev/stdin``). ``Path.is_file`` says no to the last two."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def output_target(path: str | os.PathLike) -> tuple[Path, bool]:
    """Where writing ``path`` really goes, and whether it is a stream.

    Returns ``(target, stream)``: a symlink's resolved target (so that an atomic rename
    replaces the file the link points to, not the link); ``stream`` is true for a FIFO or a
    character device, which are written in place. A folder, a socket or a block device is a
    :class:`UsageError`.
    """
    path = Path(path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target, False
    if stat.S_ISREG(mode):
        return target, False
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return target, True
    if stat.S_ISDIR(mode):
        raise UsageError(f"{path} is a folder; give a file path.")
    kind = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
    raise UsageError(f"{path} is {kind}; minitrans writes regular files, pipes and character devices only. "
                     "Choose a file path.")


def check_writable(path: str | os.PathLike, flag: str) -> Path:
    """Fail before any long work if ``path`` cannot be written (no such folder, no permission,
    a folder in the way, a socket or block device)."""
    if str(path) == "-":
        raise UsageError(f"{flag} -: this command writes a file, not standard output; give a file path.")
    path = Path(path)
    try:
        if path.is_dir():
            raise UsageError(f"{path} is a directory; give a file path.")
        target, stream = output_target(path)
    except UsageError as err:
        raise UsageError(f"{flag} {err}") from None
    except OSError as err:  # a name too long, a loop of links: what only the file system knows
        raise UsageError(f"{flag} {path} cannot be written: {err.strerror or err}; choose another path.") from None
    if stream:  # written in place: only the device or pipe itself must be writable
        if not os.access(target, os.W_OK):
            raise UsageError(f"{flag} {path} is not writable; choose another path.")
        return path
    path = target
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: folder {parent} does not exist; create it first.")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{flag} {path} is not writable; choose another path.")
    _probe(path, flag)
    return path


def _probe(path: Path, flag: str) -> None:
    """Create and remove the temporary that writing ``path`` will use, so that what only the
    file system knows (a name too long, a read-only mount) is said before any work."""
    tmp = temporary_path(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # this process is writing it already
        return
    except OSError as err:
        raise UsageError(f"{flag} {path} cannot be written: {err.strerror or err}; choose another path.") from None
    os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)


def check_writable_folder(path: str | os.PathLike, flag: str) -> Path:
    """Fail before any long work if folder ``path`` cannot be created or written: its nearest
    existing ancestor must be a folder where a folder can be made (for a command's ``flag``,
    a :class:`UsageError`; :func:`check_folder_writable` is the same test for
    :func:`atomic_folder`'s outputs)."""
    folder = Path(path)
    existing = next((p for p in (folder, *folder.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        raise UsageError(f"{flag} {path}: {existing} is a file, not a folder; choose another path.")
    err = _probe_folder(existing / f".minitrans-probe.tmp{os.getpid()}")
    if err is not None:
        raise UsageError(f"{flag} {path} is not writable ({err.strerror or err}); choose another folder.")
    return folder


def _probe_folder(folder: Path) -> OSError | None:
    """Make and remove the empty ``folder``: what a write there would meet (read-only,
    permission, a full disk, a name too long), or None. The one test of both folder checks:
    asked of the file system, never of ``os.access``, which says yes to root whatever the
    folder's mode and knows nothing of a full disk."""
    try:
        folder.mkdir()
    except FileExistsError:
        return None
    except OSError as err:
        return err
    folder.rmdir()
    return None


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name the same existing file (or the same not-yet-existing path)."""
    a, b = Path(a), Path(b)
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


#: The longest file name most file systems take (bytes, NAME_MAX).
NAME_MAX = 255


def _temporary_stem(path: Path) -> str:
    """``.NAME``, or for a name too long to take ``.tmpPID`` within :data:`NAME_MAX` a short
    stand-in made from its hash (a legal 250-byte name must not fail after hours of work)."""
    stem = f".{path.name}"
    if len(os.fsencode(stem)) + len(".tmp") + 10 <= NAME_MAX:
        return stem
    return f".minitrans-{hashlib.sha256(os.fsencode(path.name)).hexdigest()[:24]}"


def temporary_path(path: str | os.PathLike) -> Path:
    """Where this process writes ``path`` before renaming it: a hidden sibling named after
    the target and this process, ``.NAME.tmpPID`` (a hash for a long name)."""
    path = Path(path)
    return path.with_name(f"{_temporary_stem(path)}.tmp{os.getpid()}")


def remove_stale_temporaries(path: str | os.PathLike) -> list[Path]:
    """Delete the temporaries of earlier writes of ``path`` whose process is gone (killed
    mid-write); returns what was removed. Temporaries of live processes are left alone."""
    path = Path(path)
    removed = []
    for tmp in path.parent.glob(f"{glob.escape(_temporary_stem(path))}.tmp*"):
        pid = tmp.name.rsplit(".tmp", 1)[-1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(tmp) if tmp.is_dir() else tmp.unlink()
            removed.append(tmp)
        except PermissionError:  # another user's live process
            pass
    return removed


def _is_write_failure(err: BaseException, tmp: Path) -> bool:
    """An OSError about the file being written (not, say, about an input being read)."""
    return isinstance(err, OSError) and getattr(err, "filename", None) in (None, str(tmp), tmp)


def keep_permissions(old: Path, new: Path) -> None:
    """Give ``new`` (about to replace ``old``) the mode, and where permitted the owner and
    group, of ``old``: a ``chmod 600`` output stays private after it is rewritten."""
    try:
        st = os.stat(old)
    except FileNotFoundError:
        return
    if hasattr(os, "chown") and (st.st_uid, st.st_gid) != (os.stat(new).st_uid, os.stat(new).st_gid):
        try:  # only root may give a file away ...
            os.chown(new, st.st_uid, st.st_gid)
        except PermissionError:  # ... a user may give it a group of theirs
            with contextlib.suppress(PermissionError):
                os.chown(new, -1, st.st_gid)
    os.chmod(new, stat.S_IMODE(st.st_mode))  # after chown, which may clear set-id bits


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing; on success it replaces ``path``,
    on any error it is removed and ``path`` is untouched. A kill leaves only the temporary,
    which the next write of ``path`` removes.

    ``path`` is first resolved by :func:`output_target`: through a symlink the link's target is
    replaced; a FIFO or character device is opened and written in place (there is nothing to
    keep whole). Text mode writes UTF-8 with ``\n`` line ends. A failed write raises
    :class:`WriteError`.
    """
    path, stream = output_target(path)
    text = {"encoding": "utf-8", "newline": "\n"} if "b" not in mode else {}
    if stream:
        with open(path, mode, **text) as f:
            yield f
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp = temporary_path(path)
    try:
        with open(tmp, mode, **text) as f:
            keep_permissions(path, tmp)  # before a byte is written: a private file's text never shows
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if _is_write_failure(err, tmp):
            raise write_failed(path, err) from None
        raise


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike, replace: bool = False, follow_links: bool = True) -> Iterator[Path]:
    """A temporary folder beside ``path`` to fill; on success it becomes ``path``.

    An existing ``path`` is replaced only when ``replace`` is true (it is moved aside first
    and deleted once the new folder is in place), so a failure or a kill never leaves a
    half-written folder under the final name. Whether a folder *may* be replaced is the
    caller's decision (``minitrans export`` replaces only its own exports). ``path`` is
    resolved first: ``.`` has a name, and through a symlink the link's target is replaced;
    with ``follow_links`` false (the cache: it writes only into folders it made) a link at
    ``path`` is itself replaced, and what it points to is left alone.
    """
    path = Path(os.path.realpath(path)) if follow_links else Path(os.path.realpath(Path(path).parent)) / Path(path).name
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp = temporary_path(path)
    try:
        tmp.mkdir()
        yield tmp
        old = path.with_name(f"{_temporary_stem(path)}.old{os.getpid()}")
        if path.exists() or path.is_symlink():
            if not replace:
                raise FileExistsError(f"{path} exists")
            if not path.is_symlink():
                keep_permissions(path, tmp)
            os.replace(path, old)
        os.replace(tmp, path)
        if old.is_symlink():
            old.unlink()  # the link only, never the folder it pointed to
        else:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError) and (err.errno in DISK_FULL or _about(err, tmp) or _about(err, path)):
            raise write_failed(path, err) from None  # the path asked for, never the temporary
        raise


def _about(err: OSError, folder: Path) -> bool:
    """Whether ``err`` is about ``folder`` or a file in it."""
    for name in (err.filename, getattr(err, "filename2", None)):
        if name is not None and (Path(name) == folder or folder in Path(name).parents):
            return True
    return False


def check_folder_writable(path: str | os.PathLike) -> None:
    """Fail before any long work if the folder ``path`` cannot be written as
    :func:`atomic_folder` writes it: its temporary is made and removed beside it now, so a
    read-only folder, a full disk or a name too long is one line naming ``path``
    (:class:`WriteError`), never the temporary's name after the work."""
    path = Path(os.path.realpath(path))
    parent = next((p for p in path.parents if p.exists()), Path("/"))
    probe = temporary_path(path) if parent == path.parent else parent / f".minitrans-probe.tmp{os.getpid()}"
    err = _probe_folder(probe)
    if err is not None:
        raise write_failed(path, err)


def write_text_atomic(path: str | os.PathLike, lines: Iterable[str]) -> Path:
    """Write ``lines`` (each followed by ``\\n``) to ``path`` atomically."""
    with atomic_output(path) as f:
        for line in lines:
            f.write(line + "\n")
    return Path(path)


def check_replaceable_folder(output_dir: str | os.PathLike, source: str | os.PathLike, force: bool,
                             files: Iterable[str], is_ours, writer: str) -> None:
    """Refuse an output folder whose replacement could lose a user's files (every ``minitrans
    export`` format that writes a folder asks this first).

    A missing or empty folder may be written; a folder that ``is_ours(folder)`` recognises and
    that holds only plain files named in ``files`` may be replaced with ``force``. Anything else
    is refused, ``--force`` or not: a folder holding other files, the folder of ``source`` (the
    checkpoint being exported), the current folder or one above it. ``writer`` names the
    command in the message.
    """
    out = Path(output_dir)
    if not out.exists() and not out.is_symlink():
        check_folder_writable(out)
        return
    if not out.is_dir():
        raise UsageError(f"{out} is a file, not a folder; choose a folder name for the exported model.")
    real = Path(os.path.realpath(out))
    if real in Path(os.path.realpath(source)).parents:
        raise UsageError(f"{out} holds the checkpoint being exported ({source}); replacing it would delete "
                         "the checkpoint. Export to a new folder.")
    here = Path.cwd().resolve()
    if real == here or real in here.parents:
        raise UsageError(f"{out} is the current folder (or holds it); export to a new folder inside it instead.")
    entries = sorted(out.iterdir())
    if not entries:
        check_folder_writable(out)
        return
    known = set(files)
    foreign = [e.name for e in entries if e.name not in known or not e.is_file() or e.is_symlink()]
    if foreign or not is_ours(out):
        what = f"holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}" if foreign else \
            f"is not a folder written by `{writer}`"
        raise UsageError(f"{out} {what}; --force replaces only a minitrans export, never other files. "
                         "Choose a new folder.")
    if not force:
        raise UsageError(f"{out} already exists; pass --force to replace it, or choose a new folder.")
    check_folder_writable(out)

