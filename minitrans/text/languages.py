"""Translation directions: which language a model reads and which it writes.

The corpora are English–French pairs; ``data.direction`` chooses the side that is the
source. A checkpoint records it in its data settings, and every consumer (translate,
evaluate, serve, the exports) asks :func:`of` instead of assuming English→French. A
checkpoint from before directions existed has none and is ``en-fr``.
"""

from __future__ import annotations

from minitrans.errors import CheckpointError, ConfigError

#: The directions minitrans trains: ``source-target`` codes (ISO 639-1).
DIRECTIONS = ("en-fr", "fr-en")
DEFAULT = "en-fr"
NAMES = {"en": "English", "fr": "French"}


def parse(direction: str) -> tuple[str, str]:
    """``"fr-en"`` → ``("fr", "en")``; a ConfigError naming the choices otherwise."""
    if direction not in DIRECTIONS:
        raise ConfigError(f"data.direction {direction!r} is not a direction minitrans trains: choose "
                          f"{' or '.join(DIRECTIONS)}.")
    source, target = direction.split("-")
    return source, target


def of(meta: dict) -> tuple[str, str]:
    """``(source, target)`` of a checkpoint or export, from its metadata's data settings."""
    return parse((meta.get("data") or {}).get("direction") or DEFAULT)


def name(code: str) -> str:
    """``"fr"`` → ``"French"`` (the code itself for a language minitrans has no name for)."""
    return NAMES.get(code, code)


def check_same(doing: str, first: tuple[str, dict], other: tuple[str, dict], error=CheckpointError) -> None:
    """Raise ``error`` when two models (``(path, metadata)``) translate in different directions:
    averaging, ensembling or evaluating them together would mix languages."""
    (first_path, first_meta), (other_path, other_meta) = first, other
    mine, theirs = of(first_meta), of(other_meta)
    if mine != theirs:
        raise error(f"Cannot {doing} {other_path} with {first_path}: they translate in different directions "
                    f"({'-'.join(theirs)} and {'-'.join(mine)}); {doing} models of one direction together.")

