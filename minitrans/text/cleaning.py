"""Cleaning text: the one normalisation every path applies, and the training-pair filter.

Torch-free and ``datasets``-free, so that inference (``Translator``, the server) can normalise
its input exactly as training did without importing the data stack.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass, field

from minitrans.errors import UsageError


def check_unicode(text: str, where: str) -> None:
    """Refuse text that no file or UTF-8 stream can hold: a lone surrogate such as ``"\\ud800"``
    (valid in JSON and in Python strings). One check for the Python API and the HTTP API; a
    :class:`UsageError` is a ``ValueError``, so request validators report it as they are."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise UsageError(f"{where} is not valid Unicode text: U+{ord(text[err.start]):04X} at character "
                         f"{err.start} is a lone surrogate; send UTF-8 text.") from None


def clean(text: str) -> str:
    """Unicode NFC, every run of whitespace (NBSP and narrow NBSP included) to one space, stripped."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def without_format_characters(text: str) -> str:
    """``text`` without format characters (Unicode category Cf: zero-width spaces and joiners,
    U+2060, a BOM, soft hyphens, direction marks): invisible, and a model trained on plain
    sentences invents words for them. Applied to what is translated, not to training data."""
    if text.isascii():
        return text
    return "".join(c for c in text if c < "\xad" or unicodedata.category(c) != "Cf")


def has_words(text: str) -> bool:
    """Whether ``text`` holds a letter or a digit: something a model can translate. Without one
    (punctuation, symbols, emoji) a text is given back as it is, never decoded into an invented
    sentence."""
    return any(unicodedata.category(c)[0] in "LN" for c in text)


@dataclass
class CleaningReport:
    """What cleaning dropped from the training split."""

    kept: int = 0
    dropped: Counter = field(default_factory=Counter)

    def __str__(self) -> str:
        dropped = ", ".join(f"{n} {why}" for why, n in sorted(self.dropped.items())) or "nothing"
        return f"kept {self.kept} pairs; dropped {dropped}"


def reject_reason(en: str, fr: str, max_chars: int) -> str | None:
    """Why a cleaned training pair is dropped (a reason of :class:`CleaningReport`), or None."""
    if not en or not fr:
        return "empty"
    if len(en) > max_chars or len(fr) > max_chars:
        return f"longer than {max_chars} characters"
    return None


def clean_train_pairs(pairs, max_chars: int = 400) -> tuple[list[tuple[str, str]], CleaningReport]:
    """Clean training pairs in memory: normalise, drop empty, over-long and exact-duplicate pairs.
    The reference that :func:`minitrans.data.stream.build_train_split` (what preparation uses, in
    bounded memory) is tested against."""
    report, seen, out = CleaningReport(), set(), []
    for en, fr in pairs:
        en, fr = clean(en), clean(fr)
        why = reject_reason(en, fr, max_chars)
        if why:
            report.dropped[why] += 1
        elif (en, fr) in seen:
            report.dropped["exact duplicates"] += 1
        else:
            seen.add((en, fr))
            out.append((en, fr))
    report.kept = len(out)
    return out, report
