"""The ``minitrans`` command: the top of the house, the one folder nothing else imports.

* :mod:`~minitrans.cli.parser` — the parser (every flag once, with its help), the dispatch to a
  handler and the error boundary around it; :func:`main` is the console script.
* :mod:`~minitrans.cli.commands` — the plain commands' handlers, each a function of typed
  arguments named as its flags (``translate``, ``evaluate``, ``serve``, ``export``, ...).
* :mod:`~minitrans.cli.train` — ``minitrans train``: Lightning's CLI over the training folder,
  imported only to train.
* :mod:`~minitrans.cli.progress` — a line of progress on stderr for long work.
* :mod:`~minitrans.cli.runtime` — the glibc allocator setting for the commands that decode.

A new command is a handler in ``commands.py`` plus its subparser in ``parser.py``. The face is
lazy: importing it loads nothing (``main`` imports the parser when called).
"""


def main(argv: list[str] | None = None) -> None:
    """``minitrans ARGS`` (also the console script of installs made before the parser moved
    into ``minitrans.cli.parser``, issue #60)."""
    from minitrans.cli.parser import main as run

    run(argv)


def __getattr__(name: str):
    """``minitrans.cli.X`` for the parser's names: before #60 the parser was this module."""
    import importlib

    if not name.startswith("_") and name not in ("parser", "commands", "train", "progress", "runtime"):
        parser = importlib.import_module("minitrans.cli.parser")
        if hasattr(parser, name):
            return getattr(parser, name)
    raise AttributeError(f"module 'minitrans.cli' has no attribute {name!r}")
