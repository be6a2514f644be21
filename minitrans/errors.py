"""The one family of errors a user sees.

Every mistake a user can make (a missing file, a malformed line, a bad flag, a checkpoint
that does not match) raises a :class:`MinitransError` whose message says what went wrong,
where (``file:line`` when there is one) and how to fix it, in one line. The ``minitrans``
command prints that line and exits 1 (2 for :class:`UsageError`); ``--debug`` adds the
traceback. Any other exception reaching the user is a bug in minitrans.
"""

from __future__ import annotations


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

