"""The one error boundary of every entry point a user runs: ``minitrans`` (:func:`minitrans.cli.main`),
``python -m minitrans.web_runtime`` and the scripts. Whatever the entry point, a user's mistake
or a failed write ends in one line, ``PROG: error: what, where, how to fix``, never a traceback
(``--debug`` shows it).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from minitrans.errors import MinitransError
from minitrans.text.textio import disk_full, write_failed


def _one_line(text: str) -> str:
    return " ".join(text.split())


@contextlib.contextmanager
def error_boundary(prog: str, debug: bool = False) -> Iterator[None]:
    """The one error boundary of every entry point a user runs (``minitrans``, ``python -m
    minitrans.web_runtime``, the scripts): a :class:`MinitransError` is printed as ``PROG:
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
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
