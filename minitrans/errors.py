"""The one family of errors a user sees.

Every mistake a user can make (a missing file, a malformed line, a bad flag, a checkpoint
that does not match) raises a :class:`MinitransError` whose message says what went wrong,
where (``file:line`` when there is one) and how to fix it, in one line. The ``minitrans``
command prints that line and exits 1 (2 for :class:`UsageError`); ``--debug`` adds the
traceback. Any other exception reaching the user is a bug in minitrans.

:func:`error_boundary` is where every entry point a user runs (``minitrans``, ``python -m
minitrans.export.web_runtime``, the scripts) turns these errors, a failed write or Ctrl-C into
that one line and an exit code.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator

#: The errors of a full disk or of a file-size limit (``ulimit -f``).
DISK_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


class MinitransError(ValueError):
    """A user-facing error: what, where and how to fix, in one line."""

    exit_code = 1


class UsageError(MinitransError):
    """A command-line argument that cannot work (checked before any model is loaded)."""

    exit_code = 2


class DataError(MinitransError):
    """A problem with the user's data: the message names the file, the problem and the fix."""


class CheckpointError(MinitransError):
    """A checkpoint that is missing, unsafe, not minitrans's, or does not match."""


class TokenizerError(MinitransError):
    """A tokenizer that cannot be used as asked (bad size, mismatched fingerprint, ...)."""


class ConfigError(MinitransError):
    """A model or training setting outside its valid range, named by its config key."""


class WriteError(MinitransError):
    """Writing an output failed (disk full, size limit, permission); nothing was half-written."""


def disk_full(err: BaseException | None) -> OSError | None:
    """The full-disk (or file-size limit) error behind ``err``, if any: libraries wrap it in
    their own (``datasets``' DatasetGenerationError), so its causes are followed."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in DISK_FULL:
            return err
        err = err.__cause__ or err.__context__
    return None


def write_failed(path: str | os.PathLike, err: BaseException) -> WriteError:
    """The one-line error for a failed write of ``path`` (the old file, if any, is kept)."""
    cause = err.strerror if isinstance(err, OSError) and err.strerror else str(err).splitlines()[0]
    if isinstance(err, OSError) and err.errno in DISK_FULL:
        cause += ": free disk space (or raise the file-size limit, `ulimit -f`)"
    return WriteError(f"cannot write {path}: {cause}. Nothing was half-written; an existing file is kept as it was.")


def _one_line(text: str) -> str:
    return " ".join(text.split())


@contextlib.contextmanager
def error_boundary(prog: str, debug: bool = False) -> Iterator[None]:
    """The one error boundary of every entry point a user runs (``minitrans``, ``python -m
    minitrans.export.web_runtime``, the scripts): a :class:`MinitransError` is printed as ``PROG:
    error: MESSAGE`` on one line (exit 1, or 2 for usage errors), as is an :class:`OSError`
    (disk full, permission denied) or a library's error wrapped around a full disk; ``debug``
    shows the traceback instead. Ctrl-C exits 130; a reader that left the pipe, 141, quietly."""
    try:
        yield
    except MinitransError as err:
        if debug:
            raise
        print(f"{prog}: error: {_one_line(str(err))}", file=sys.stderr)
        raise SystemExit(err.exit_code) from None
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except BrokenPipeError:  # the reader left (`| head -1`): stop quietly, as Unix tools do on SIGPIPE
        _silence_stdout()
        raise SystemExit(128 + 13) from None
    except OSError as err:  # disk full, permission denied, ... while reading or writing
        if debug:
            raise
        where = f": {err.filename}" if getattr(err, "filename", None) else ""
        print(f"{prog}: error: {_one_line(str(err.strerror or err))}{where}", file=sys.stderr)
        raise SystemExit(1) from None
    except Exception as err:  # a library's own error wrapped around a full disk: still one line
        full = disk_full(err)
        if debug or full is None:
            raise
        print(f"{prog}: error: {_one_line(str(write_failed(full.filename or '?', full)))}", file=sys.stderr)
        raise SystemExit(1) from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not fail on the closed pipe."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
