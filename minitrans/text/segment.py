"""Sentence segmentation: text into the sentences the models were trained on, and back.

The models learned from single sentences (Tatoeba, Multi30k captions: 10-20 pieces each); a
paragraph given as one sequence comes back as its first sentence or two. So every entry
point splits its input into sentences, translates them in one batch and puts the text back
together with its own layout: :func:`split` gives the sentences and the text around them
(the *gaps*: spaces, tabs, line breaks, blank lines), and :meth:`Segmented.join` puts
translations back in their places. ``split(t).join(split(t).sentences) == t`` for every
string (tested with Hypothesis).

Sentences are found by `pysbd <https://github.com/nipunsadvilkar/pySBD>`_ (rule-based, English
and French, offline), chosen by measurement against ``sentencex``, ``syntok`` and an
end-punctuation regex on paragraphs joined from held-out sentences (``bench/segmentation.py``;
docs/translating.md#paragraphs-and-sentences). Around it:

* line breaks always end a sentence (a title line has no full stop);
* a piece with no letter or digit (a closing quote pysbd cut off) joins the sentence before it;
* a line pysbd would return whole is not given to it (:func:`_one_sentence`): most lines
  are one sentence, and pysbd takes ~240 µs a line where the check takes ~4 µs;
* a line longer than :data:`WINDOW` characters is first cut into windows at an end punctuation
  mark (else a space) followed by a space, because pysbd's time grows with the square of its
  input (60,000 characters of ``"a. "``: 97.6 s whole, 1.2 s in windows;
  ``python bench/segmentation.py --worst-case``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

#: Longest stretch of text pysbd is given at once (characters).
WINDOW = 500
#: Languages with their own rules; others use the English ones.
LANGUAGES = ("en", "fr")

_LINE_BREAK = re.compile(r"(\r\n|\n|\r|\u2028|\u2029)")
_WORDY = re.compile(r"\w")
_END_THEN_SPACE = re.compile(r"[.!?…][\"'»”)\]]*\s")
_END_MARK = re.compile(r"[.!?…。！？．]")
_FINAL_END_MARKS = re.compile(r"[!?…！？]*[.。．]*$")  # a final run pysbd keeps whole: any dots come last
_QUOTE_OR_BRACKET = re.compile(r"[\"“”„«»()\[\]{}]|['’‘](?!\w)")  # an apostrophe before a letter is no quote


@dataclass(frozen=True)
class Segmented:
    """A text as ``gaps[0] + sentences[0] + gaps[1] + ... + sentences[-1] + gaps[-1]``.

    ``sentences`` are what to translate (non-empty, no surrounding whitespace, no line break);
    ``gaps`` (one more than the sentences) are kept as they are."""

    sentences: list[str]
    gaps: list[str]

    def join(self, translations: list[str]) -> str:
        """The text with each sentence replaced by its translation, the gaps unchanged."""
        if len(translations) != len(self.sentences):
            raise ValueError(f"{len(translations)} translations for {len(self.sentences)} sentences")
        parts = [self.gaps[0]]
        for text, gap in zip(translations, self.gaps[1:]):
            parts += [text, gap]
        return "".join(parts)


@lru_cache(maxsize=None)
def _segmenter(lang: str):
    import pysbd

    return pysbd.Segmenter(language=lang if lang in LANGUAGES else "en", clean=False)


def _windows(line: str) -> list[tuple[int, int]]:
    """``(start, end)`` stretches of at most :data:`WINDOW` characters, cut after an end mark
    and a space where there is one (else after a space, else anywhere)."""
    spans, start = [], 0
    while len(line) - start > WINDOW:
        stretch = line[start:start + WINDOW]
        cut = max((m.end() for m in _END_THEN_SPACE.finditer(stretch)), default=0)
        if cut == 0:
            cut = stretch.rfind(" ") + 1 or WINDOW
        spans.append((start, start + cut))
        start += cut
    spans.append((start, len(line)))
    return spans


def _one_sentence(body: str) -> bool:
    """Whether pysbd returns ``body`` (a stripped line of at most :data:`WINDOW` characters)
    whole: it has no end mark before its final run of them, that run has any dots last (pysbd
    cuts ``a.!!`` after the dot), and no quote or bracket (pysbd also ends sentences at
    closing quotes and brackets). Checked against pysbd on the first
    20,000 lines of every corpus file, both languages: 191,970 such lines, no disagreement
    (``python bench/segmentation.py --fast-path``), and in the tests."""
    return not _END_MARK.search(_FINAL_END_MARKS.sub("", body, count=1)) and not _QUOTE_OR_BRACKET.search(body)


def _sentence_spans(line: str, lang: str) -> list[tuple[int, int]]:
    """Where the sentences of one line (no line break in it) are, as ``(start, end)``."""
    body = line.strip()
    if body and len(line) <= WINDOW and _one_sentence(body):
        start = len(line) - len(line.lstrip())
        return [(start, start + len(body))]
    spans: list[tuple[int, int]] = []
    for w_start, w_end in _windows(line):
        window = line[w_start:w_end]
        at = 0
        for piece in _segmenter(lang).segment(window):
            piece = piece.strip()
            if not piece:
                continue
            where = window.find(piece, at)
            if where < 0:  # pysbd changed the text: keep the rest of the window as one sentence
                rest = window[at:].strip()
                if rest:
                    where = window.index(rest, at)
                    spans.append((w_start + where, w_start + where + len(rest)))
                break
            start, end = w_start + where, w_start + where + len(piece)
            if spans and not _WORDY.search(piece):  # a lone closing quote or bracket
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
            at = where + len(piece)
    return spans


@lru_cache(maxsize=8192)
def _spans_of(line: str, lang: str) -> tuple[tuple[int, int], ...]:
    """:func:`_sentence_spans`, kept for lines met again (a document's runs are split again
    when their markup must stay in place; pysbd is slow)."""
    return tuple(_sentence_spans(line, lang))


def split(text: str, lang: str = "en") -> Segmented:
    """The sentences of ``text`` and the text around them; see :class:`Segmented`."""
    sentences, gaps, gap_start, offset = [], [], 0, 0
    for part in _LINE_BREAK.split(text):
        if part and not _LINE_BREAK.fullmatch(part):
            for start, end in _spans_of(part, lang):
                gaps.append(text[gap_start:offset + start])
                sentences.append(text[offset + start:offset + end])
                gap_start = offset + end
        offset += len(part)
    gaps.append(text[gap_start:])
    return Segmented(sentences, gaps)
