"""Text with inline markup: its sentences translated, the markup put back by position.

Used by the document formats for a block of text that holds inline markup (HTML's ``<b>``,
``<a>``; Markdown's ``**``, links, code spans). The markup is not sent to the model; the
block's text is split into sentences, and each piece of markup inside a sentence goes to the
same relative position of that sentence's translation, snapped to a word boundary (an opening
piece before a word, a closing one after a word), in its original order. This is position, not
word alignment: the markup's order and nesting are always kept, the words it surrounds may
differ. Markup between sentences stays exactly between them.
"""

from __future__ import annotations

import re
from typing import Callable

from minitrans.text import segment

_WORD = re.compile(r"\w+")

#: ("text", decoded text) or markup written as it is: ("open", m) or ("close", m) when its side is
#: known, ("tag", m) to let ``closing`` decide; in document order.
Items = list[tuple[str, str]]


def text_of(items: Items) -> str:
    """The text a reader sees: the text items joined."""
    return "".join(v for k, v in items if k == "text")


def put_back(items: Items, seg: segment.Segmented, translations: list[str],
             escape: Callable[[str], str] = lambda t: t, closing: Callable[[str], bool] | None = None,
             source: Callable[[int, int], str | None] | None = None) -> str:
    """The items with ``seg`` (the split of :func:`text_of`) translated, the markup in place.
    ``escape`` is applied to text written out; ``closing(markup)`` says whether a piece ends a
    span (default: it starts with ``</``). ``source(start, end)``, when given, spells
    ``text_of(items)[start:end]`` as the document had it (HTML's ``&eacute;``); text that comes
    out as it went in (the gaps, a sentence whose translation is itself) is written that way,
    unless ``source`` says None."""
    is_closing = closing or (lambda raw: raw.startswith("</"))
    sentences = []  # (start, end) in the block's text, start in the output, translation
    text_at = out_at = 0
    for gap, sentence, trans in zip(seg.gaps, seg.sentences, translations):
        text_at, out_at = text_at + len(gap), out_at + len(gap)  # gaps are written as they are
        sentences.append((text_at, text_at + len(sentence), out_at, trans, trans == sentence))
        text_at, out_at = text_at + len(sentence), out_at + len(trans)
    output_text = seg.join(translations)
    copied = []  # (start in the output, end, start in the text): stretches written as they came in
    for gap, (start, end, out_start, trans, unchanged) in zip(seg.gaps, sentences):
        copied.append((out_start - len(gap), out_start, start - len(gap)))
        if unchanged:
            copied.append((out_start, out_start + len(trans), start))
    last_gap = seg.gaps[-1]
    copied.append((len(output_text) - len(last_gap), len(output_text), len(text_of(items)) - len(last_gap)))

    def write(a: int, b: int) -> str:
        """``output_text[a:b]`` as written out: escaped, or as the source spelled it."""
        if source is None:
            return escape(output_text[a:b])
        pieces, at = [], a
        for out_lo, out_hi, text_lo in copied:
            lo, hi = max(out_lo, a), min(out_hi, b)
            if lo >= hi:
                continue
            kept = source(text_lo + lo - out_lo, text_lo + hi - out_lo)
            if kept is None:
                continue  # written escaped below, with the text around it
            if at < lo:
                pieces.append(escape(output_text[at:lo]))
            pieces.append(kept)
            at = hi
        if at < b:
            pieces.append(escape(output_text[at:b]))
        return "".join(pieces)

    def output_position(pos: int, ends_span: bool) -> tuple[int, bool]:
        """Where markup at ``pos`` of the text goes in the output, and whether exactly (in a
        gap, or in a sentence that came back as it was)."""
        before_in = before_out = 0  # where the gap before the next sentence starts
        for start, end, out_start, trans, unchanged in sentences:
            if pos < start:
                return before_out + pos - before_in, True
            if pos <= end:
                if unchanged:  # a sentence that came back as it was keeps its markup exactly
                    return out_start + pos - start, True
                if pos == start or pos == end:
                    return out_start + (len(trans) if pos == end else 0), False
                return out_start + snap(trans, (pos - start) / (end - start), ends_span), False
            before_in, before_out = end, out_start + len(trans)
        return before_out + pos - before_in, True

    result, last, position = [], 0, 0
    opened_at, words_since = None, False  # where the last opening piece went; text after it in the source?
    for kind, value in items:
        if kind == "text":
            position += len(value)
            words_since = words_since or bool(value.strip())
            continue
        ends_span = kind == "close" or (kind == "tag" and is_closing(value))
        where, exact = output_position(position, ends_span)
        where = max(where, last)  # markup keeps its order
        if not exact and ends_span:  # a closing piece follows a word, not a space ...
            while where > last and output_text[where - 1].isspace():
                where -= 1
        elif not exact:  # ... and an opening one comes before a word
            while where < len(output_text) and output_text[where].isspace():
                where += 1
        if ends_span and where == opened_at and words_since:  # a span that held words is not emptied
            following = _WORD.search(output_text, where)
            where = following.end() if following else len(output_text)
        opened_at, words_since = (None, words_since) if ends_span else (where, False)
        result += [write(last, where), value]
        last = where
    result.append(write(last, len(output_text)))
    return "".join(result)


def snap(text: str, share: float, closing: bool) -> int:
    """The word boundary of ``text`` nearest to ``share`` of its length: the end of a word
    (before its trailing punctuation) for a closing piece, the start of one for an opening one."""
    target = share * len(text)
    if closing:  # after a word, or after it and its punctuation: never after a space
        candidates = [m.end() for m in re.finditer(r"\w+", text)] + [m.start() for m in re.finditer(r"(?<=\S)\s", text)]
        candidates.append(len(text))
    else:  # before a word, or before its opening punctuation: never before a space
        candidates = [m.start() for m in re.finditer(r"(?<!\w)\w", text)] + [m.end() for m in re.finditer(r"\s(?=\S)", text)]
        candidates.append(0)
    return min(candidates, key=lambda c: abs(c - target))


def wrap(text: str, n_lines: int, weights: list[int] | None = None) -> list[str]:
    """``text`` over ``n_lines`` lines (words kept whole), cut where the ``weights`` (the
    original lines' lengths; default equal) put the breaks, or over fewer lines when it has
    fewer words (a blank line would end an SRT cue or a Markdown paragraph). Text with no word
    at all reads "…" (an SRT cue's part of a sentence whose translation had fewer words than
    the cues it spans)."""
    words = text.split() or ["…"]
    n_lines = min(n_lines, len(words))
    if n_lines <= 1:  # one line: the text as it is (its own spacing kept)
        return [text if text.strip() else "…"]
    text = " ".join(words)
    weights = (weights or [1] * n_lines)[:n_lines]
    total = sum(weights) or n_lines
    ends = [len(" ".join(words[:j])) for j in range(len(words) + 1)]  # where a line ending after word j ends
    lines, previous, running = [], 0, 0
    for k in range(1, n_lines):  # each line gets a word or more
        running += weights[k - 1]
        target = len(text) * running / total
        cut = min(range(previous + 1, len(words) - (n_lines - k) + 1), key=lambda j: abs(ends[j] - target))
        lines.append(" ".join(words[previous:cut]))
        previous = cut
    lines.append(" ".join(words[previous:]))
    return lines
