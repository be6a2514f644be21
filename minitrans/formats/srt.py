"""SRT subtitles: translate each cue's text, keep numbering, timings and blank lines as they were.

A cue is a number line, a timing line (``00:00:01,000 --> 00:00:02,500``, with whatever
position settings follow) and text lines, then a blank line. Subtitles cut sentences across
cues ("We could go to the" / "beach tomorrow."), so the cues' texts are read as one stream,
split into sentences and each sentence translated once; a sentence that spans cues is split
back over them in proportion to the characters each cue held, at word boundaries, and each
cue's text is re-wrapped to its own number of lines (a sentence or a cue that comes back
unchanged keeps its own cut and lines: identity translation is byte for byte). Markup at the start or end of a line
(``<i>``, ``</font>``, ``{\an8}``) is kept there and never sent to the model (markup inside a
line is translated as text). A number line followed by a timing line
starts a cue even without the blank line before it (hand-edited files often lack it). Lines are
split on ``\n`` only, as :mod:`minitrans.text.textio` reads lines. Everything but the text lines is written
back byte for byte (the ``srt`` package would renumber and reformat timings, so the few lines
that read the layout are written here).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from minitrans.text import segment
from minitrans.errors import DataError
from minitrans.formats import TranslateTexts
from minitrans.formats.inline import wrap

_TIMING = re.compile(r"^\s*\d+:\d{2}:\d{2}[,.]\d{1,3}\s*-->\s*\d+:\d{2}:\d{2}[,.]\d{1,3}")


@dataclass
class _Cue:
    head: list[str]  # the number and timing lines, with their line ends
    lines: list[str]  # the text lines, without line ends
    ends: list[str]  # each text line's line end
    tail: list[str]  # the blank lines after it


def _lines(document: str) -> list[str]:
    """The document's lines with their ends, split on ``\n`` only (:mod:`minitrans.text.textio`'s
    rule: U+2028, ``\x0c`` and the other breaks of ``str.splitlines`` are text)."""
    return re.findall(r"[^\n]*\n|[^\n]+\Z", document)


def _blank(line: str) -> bool:
    return not line.strip(" \t\r\n")


def _cue_head(lines: list[str], i: int) -> bool:
    """Whether lines ``i`` and ``i + 1`` are a cue's number and timing."""
    return i + 1 < len(lines) and lines[i].strip(" \t\r\n").lstrip("\ufeff").isdigit() and bool(_TIMING.match(lines[i + 1]))


def read(document: str) -> tuple[str, list[_Cue]]:
    """``(preamble, cues)``: anything before the first cue (a BOM, blank lines) and the cues.
    A number line followed by a timing line starts a new cue, blank line before it or not
    (hand-edited files often lack it)."""
    lines = _lines(document)
    cues: list[_Cue] = []
    i = 0
    while i < len(lines) and _blank(lines[i]):
        i += 1
    preamble = "".join(lines[:i])
    while i < len(lines):
        if not _cue_head(lines, i):
            raise DataError(f"line {i + 1}: not the start of an SRT cue (a number, then a timing line such as "
                            "00:00:01,000 --> 00:00:02,000); is this an SRT file? (--format text translates lines)")
        cue = _Cue(lines[i:i + 2], [], [], [])
        i += 2
        while i < len(lines) and not _blank(lines[i]) and not _cue_head(lines, i):
            body = lines[i].rstrip("\r\n")
            cue.lines.append(body)
            cue.ends.append(lines[i][len(body):])
            i += 1
        while i < len(lines) and _blank(lines[i]):
            cue.tail.append(lines[i])
            i += 1
        cues.append(cue)
    return preamble, cues


#: Markup at the start or the end of a cue line: an HTML-like tag (``<i>``, ``</font>``) or an
#: ASS override (``{\an8}``), and the spaces around it.
_TAG = r"(?:</?[A-Za-z][^<>]*>|\{\\[^{}]*\})"
_EDGES = re.compile(rf"^((?:\s*{_TAG})*\s*)(.*?)(\s*(?:{_TAG}\s*)*)$", re.DOTALL)


def _edges(line: str) -> tuple[str, str, str]:
    """``(markup before, text, markup after)`` of a cue line: the markup is kept as it is and
    never sent to the model (markup inside a line is text here)."""
    m = _EDGES.match(line)
    return (m.group(1), m.group(2), m.group(3)) if m else ("", line, "")


_INLINE_BREAKS = str.maketrans({"\u2028": " ", "\u2029": " ", "\r": " "})


def translate(document: str, translate_texts: TranslateTexts, lang: str = "en") -> str:
    """The subtitles with every cue's text translated (see the module's docstring)."""
    preamble, cues = read(document)
    edges = [[_edges(line) for line in cue.lines] for cue in cues]
    texts = [" ".join(text for _, text, _ in lines if text) for lines in edges]
    stream, bounds = "", []  # the cues' texts as one stream; where each cue's text is in it
    for text in texts:
        if stream:
            stream += " "
        bounds.append((len(stream), len(stream) + len(text)))
        stream += text
    # A cue line is one line (split on \n only): a U+2028, U+2029 or lone \r inside it is no
    # sentence end, so the splitter reads it as the space it stands for (same length, so the
    # offsets hold; an unchanged sentence still gives back the cue's own characters).
    seg = segment.split(stream.translate(_INLINE_BREAKS), lang)
    translations = translate_texts(seg.sentences) if seg.sentences else []
    per_cue: list[list[str]] = [[] for _ in cues]
    at = 0
    for gap, sentence, translation in zip(seg.gaps, seg.sentences, translations):
        start = at + len(gap)
        end = start + len(sentence)
        at = end
        shares = [(c, max(start, a), min(end, b)) for c, (a, b) in enumerate(bounds) if min(end, b) > max(start, a)]
        if translation == sentence:  # unchanged: each cue gets back its own words
            parts = [stream[a:b].strip() for _, a, b in shares]
        else:
            parts = _split_words(translation, [b - a for _, a, b in shares])
        for (c, _, _), part in zip(shares, parts):
            if part:
                per_cue[c].append(part)
    out = [preamble]
    for cue, lines, text, parts in zip(cues, edges, texts, per_cue):
        out += cue.head
        if not text.strip():  # no words (a line of spaces, markup or an invisible character): as it was
            out += [line + end for line, end in zip(cue.lines, cue.ends)] + cue.tail
            continue
        worded = [k for k, (_, words, _) in enumerate(lines) if words]  # lines of markup only stay as they are
        if " ".join(parts) == text:  # the cue's text unchanged: its own lines, as they were
            wrapped = [lines[k][1] for k in worded]
        else:
            wrapped = wrap(" ".join(parts), len(worded), [len(lines[k][1]) + 1 for k in worded])
        written = {k: lines[k][0] + line + lines[k][2] for k, line in zip(worded, wrapped)}
        last = worded[len(wrapped) - 1]
        for k in worded[len(wrapped):]:  # fewer words than lines: their markup joins the last line kept
            written[last] += lines[k][0] + lines[k][2]
        out += [written.get(k, line) + end for k, (line, end) in enumerate(zip(cue.lines, cue.ends))
                if k in written or k not in worded]
        out += cue.tail
    return "".join(out)


def _split_words(text: str, weights: list[int]) -> list[str]:
    """``text`` cut at word boundaries into len(weights) parts, in proportion to the weights."""
    words = text.split()
    if len(weights) == 1:
        return [" ".join(words)]
    total = sum(weights)
    cuts, running = [], 0
    for w in weights[:-1]:
        running += w
        cuts.append(round(running / total * len(words)))
    if len(words) >= len(weights):  # every cue gets a word: an empty cue would end the file's layout
        previous = 0
        for k, cut in enumerate(cuts):
            cuts[k] = previous = min(max(cut, previous + 1), len(words) - (len(weights) - 1 - k))
    parts, last = [], 0
    for cut in cuts + [len(words)]:
        cut = max(cut, last)
        parts.append(" ".join(words[last:cut]))
        last = cut
    return parts
