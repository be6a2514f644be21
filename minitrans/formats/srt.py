"""SRT subtitles: translate each cue's text, keep numbering, timings and blank lines as they were.

A cue is a number line, a timing line (``00:00:01,000 --> 00:00:02,500``, with whatever
position settings follow) and text lines, then a blank line. Subtitles cut sentences across
cues ("We could go to the" / "beach tomorrow."), so the cues' texts are read as one stream,
split into sentences and each sentence translated once; a sentence that spans cues is split
back over them in proportion to the characters each cue held, at word boundaries, and each
cue's text is re-wrapped to its own number of lines. Everything but the text lines is written
back byte for byte (the ``srt`` package would renumber and reformat timings, so the few lines
that read the layout are written here).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from minitrans import segment
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


def read(document: str) -> tuple[str, list[_Cue]]:
    """``(preamble, cues)``: anything before the first cue (a BOM, blank lines) and the cues."""
    lines = document.splitlines(keepends=True)
    cues: list[_Cue] = []
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    preamble = "".join(lines[:i])
    while i < len(lines):
        if i + 1 >= len(lines) or not lines[i].strip().lstrip("\ufeff").isdigit() or not _TIMING.match(lines[i + 1]):
            raise DataError(f"line {i + 1}: not the start of an SRT cue (a number, then a timing line such as "
                            "00:00:01,000 --> 00:00:02,000); is this an SRT file? (--format text translates lines)")
        cue = _Cue(lines[i:i + 2], [], [], [])
        i += 2
        while i < len(lines) and lines[i].strip():
            body = lines[i].rstrip("\r\n")
            cue.lines.append(body)
            cue.ends.append(lines[i][len(body):])
            i += 1
        while i < len(lines) and not lines[i].strip():
            cue.tail.append(lines[i])
            i += 1
        cues.append(cue)
    return preamble, cues


def translate(document: str, translate_texts: TranslateTexts, lang: str = "en") -> str:
    """The subtitles with every cue's text translated (see the module's docstring)."""
    preamble, cues = read(document)
    texts = [" ".join(line.strip() for line in cue.lines) for cue in cues]
    stream, bounds = "", []  # the cues' texts as one stream; where each cue's text is in it
    for text in texts:
        if stream:
            stream += " "
        bounds.append((len(stream), len(stream) + len(text)))
        stream += text
    seg = segment.split(stream, lang)
    translations = translate_texts(seg.sentences) if seg.sentences else []
    per_cue: list[list[str]] = [[] for _ in cues]
    at = 0
    for gap, sentence, translation in zip(seg.gaps, seg.sentences, translations):
        start = at + len(gap)
        end = start + len(sentence)
        at = end
        shares = [(c, min(end, b) - max(start, a)) for c, (a, b) in enumerate(bounds) if min(end, b) > max(start, a)]
        for (c, _), part in zip(shares, _split_words(translation, [n for _, n in shares])):
            if part:
                per_cue[c].append(part)
    out = [preamble]
    for cue, parts in zip(cues, per_cue):
        out += cue.head
        wrapped = wrap(" ".join(parts), len(cue.lines), [len(line) + 1 for line in cue.lines])
        out += [line + end for line, end in zip(wrapped, cue.ends)]
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
