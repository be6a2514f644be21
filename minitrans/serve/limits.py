"""What one request may hold, counted the same way on every route (``/v1``, LibreTranslate's).

The limits are named in sentences, so sentences are what is counted: each text is split as it
will be translated (:func:`minitrans.text.segment.split`), and a text counts as its sentences, at
least one. A request holds at most ``max_sentences`` of them (``max_queue`` if that is lower:
more could never be queued), each of at most ``max_chars`` characters, and at most
``max_sentences × max_chars`` characters in all (the longest text the schema allows). A
message names what was counted: the text, the sentence, the number and the limit's name.
"""

from __future__ import annotations

from dataclasses import dataclass

from minitrans.text import segment
from minitrans.serve.settings import ServerSettings


@dataclass
class LimitExceeded(Exception):
    """A request over a limit: ``message`` says which, ``never_fits`` when no wait would help
    (more sentences than the queue ever holds: 413 on every route)."""

    message: str
    never_fits: bool = False

    def __str__(self) -> str:
        return self.message


def count(texts: list[str], settings: ServerSettings, lang: str, split: bool = True) -> int:
    """The sentences ``texts`` hold, checked against ``settings``' limits (a
    :class:`LimitExceeded` naming what was counted)."""
    total = sum(len(text) for text in texts)
    if total > settings.max_request_chars:
        raise LimitExceeded(f"the request holds {total:,} characters; the limit is {settings.max_request_chars:,} in "
                            f"all (max_sentences × max_chars). Split the request.")
    sentences, most = 0, (0, 0)  # (sentences, text) of the text with the most sentences
    for i, text in enumerate(texts):
        parts = segment.split(text.strip(), lang).sentences if split else [text]
        for j, sentence in enumerate(parts):
            if len(sentence) > settings.max_chars:
                where = f"text {i}, sentence {j}," if split else f"text {i} (split false: one sentence)"
                raise LimitExceeded(f"{where} has {len(sentence):,} characters; the limit is {settings.max_chars:,} "
                                    f"characters per sentence (max_chars). Split it into shorter sentences.")
        sentences += max(1, len(parts))
        most = max(most, (len(parts), i))
    counted = f"{sentences} sentences" + (f" after splitting (text {most[1]}: {most[0]})" if split and most[0] > 1 else "")
    return _within(sentences, counted, settings, "Split the request.")


def _within(total: int, counted: str, settings: ServerSettings, fix: str) -> int:
    """``total`` if it is within ``max_sentences`` and ``max_queue``, else a :class:`LimitExceeded`
    saying what was ``counted`` and how to ``fix`` it."""
    if total > settings.max_sentences:
        raise LimitExceeded(f"the request holds {counted}; the limit is {settings.max_sentences} sentences per "
                            f"request (max_sentences). {fix}")
    if total > settings.max_queue:
        raise LimitExceeded(f"the request holds {counted}, more than the server ever queues ({settings.max_queue}, "
                            f"max_queue). {fix}", never_fits=True)
    return total


def check_pieces(pieces: list[str], settings: ServerSettings, before: int = 0) -> int:
    """The sentences and attribute texts of a page (LibreTranslate's ``format=html``), checked
    like a request's sentences, with ``before`` counted already for the request's other pages.
    Returns the request's count so far."""
    too_long = next((i for i, p in enumerate(pieces) if len(p) > settings.max_chars), None)
    if too_long is not None:
        raise LimitExceeded(f"the page's sentence {too_long} has {len(pieces[too_long]):,} characters; the limit is "
                            f"{settings.max_chars:,} characters per sentence (max_chars).")
    total = before + len(pieces)
    counted = f"{total} sentences and attribute texts" + (" (its pages together)" if before else "")
    return _within(total, counted, settings, "Send the page in parts.")
