"""Markdown: translate the text of headings, paragraphs, lists, quotes and table cells; keep
every line's markup, code blocks, inline code, link targets and URLs as they were.

The block structure is read with `markdown-it-py` (CommonMark + tables): each inline run (a
heading's text, a paragraph, a list item's text, a table cell) knows its source lines, and its
text is found in them and replaced there, so the line prefixes (``#``, ``-``, ``1.``, ``>``,
indentation, table pipes) and everything outside the runs — fenced and indented code, HTML
blocks, thematic breaks, blank lines — are written back byte for byte. A paragraph keeps its
number of lines (its translation is re-wrapped over them; a line is dropped only when the
translation has fewer words than the paragraph had lines). Inside a run, code spans, link and
image targets (``](url "title")``), inline HTML, emphasis markers and backslash escapes are
markup: not sent to the model, put back by position (:mod:`minitrans.formats.inline`); link
texts and image alt texts are translated. Code spans, autolinks and bare URLs stand for words
of their own: they stay where they are and the text on either side is translated apart.
"""

from __future__ import annotations

import re

from minitrans import segment
from minitrans.formats import TranslateTexts
from minitrans.formats.inline import Items, put_back, text_of, wrap

_MARKUP = re.compile(r"""
    (`+)[\s\S]*?\1                          # a code span
  | \]\(\s*<?[^)\s>]*>?(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)   # a link or image target
  | \]\[[^\]]*\]                            # a reference label
  | !?\[                                    # a link or image text opens
  | \]                                      # ... and closes (a shortcut reference)
  | <(?:https?|mailto|ftp):[^>\s]*>         # an autolink
  | </?[A-Za-z][^>]*>                       # inline HTML
  | (?:https?|ftp)://[^\s<>()]+[^\s<>().,;:!?'"]   # a bare URL
  | \\[!-/:-@\[-`{-~]                       # a backslash escape
  | \*{1,3}|_{1,3}(?=\S)|(?<=\S)_{1,3}|~~   # emphasis markers
""", re.VERBOSE)
_CLOSING = re.compile(r"^(?:\]|\]\(|\]\[|</)")
#: Markup that stands for words of its own (code, URLs): the text on either side is translated apart.
_ATOMIC = re.compile(r"^(?:`|<(?:https?|mailto|ftp):|(?:https?|ftp)://)")


def split_inline(content: str) -> Items:
    """A run's source as text and markup items (see the module's docstring). An emphasis
    marker closes a span when a word is before it and none after it."""
    items: Items = []
    last = 0
    for m in _MARKUP.finditer(content):
        if m.start() > last:
            items.append(("text", content[last:m.start()]))
        markup = m.group(0)
        if markup[0] in "*_~":
            before = content[m.start() - 1:m.start()]
            after = content[m.end():m.end() + 1]
            side = "close" if before.strip() and not (after.strip() and after.isalnum()) else "open"
            items.append((side, markup))
        elif _ATOMIC.match(markup):
            items.append(("atomic", markup))
        else:
            items.append(("close" if _closing(markup) else "open", markup))
        last = m.end()
    if last < len(content):
        items.append(("text", content[last:]))
    return items


def _closing(markup: str) -> bool:
    """Whether a piece of Markdown markup ends a span (for placing it after a word)."""
    return bool(_CLOSING.match(markup))


def translate(document: str, translate_texts: TranslateTexts, lang: str = "en") -> str:
    """The document with its text translated (see the module's docstring)."""
    from markdown_it import MarkdownIt

    lines = document.splitlines(keepends=True)
    runs = []  # (items, the split of their text, [(line, start, end)] where each content line is)
    cursors: dict[int, int] = {}  # how far each source line has been matched (table rows hold several runs)
    for token in MarkdownIt("commonmark").enable("table").parse(document):
        if token.type != "inline" or not token.map or not token.content.strip():
            continue
        places = []
        for j, content_line in enumerate(token.content.split("\n")):
            number = token.map[0] + j
            if number >= len(lines):
                break
            line, piece = lines[number], content_line.strip()
            start = line.find(piece, cursors.get(number, 0))
            if not piece or start < 0:  # e.g. a setext heading's underline, or text markdown-it rewrote
                continue
            places.append((number, start, start + len(piece)))
            cursors[number] = start + len(piece)
        if not places:
            continue
        source = " ".join(lines[n][s:e] for n, s, e in places)
        parts = []  # each stretch between atomic markup: (its items, the split of its text), or the markup
        stretch: Items = []
        for kind, value in split_inline(source) + [("atomic", "")]:
            if kind == "atomic":
                parts += [(stretch, segment.split(text_of(stretch), lang)), value]
                stretch = []
            else:
                stretch.append((kind, value))
        if any(isinstance(p, tuple) and p[1].sentences for p in parts):
            runs.append((parts, places, source))
    wanted = [s for parts, _, _ in runs for p in parts if isinstance(p, tuple) for s in p[1].sentences]
    done = translate_texts(wanted) if wanted else []
    edits: dict[int, list[tuple[int, int, str]]] = {}
    dropped: set[int] = set()
    at = 0
    for parts, places, source in runs:
        pieces = []
        for part in parts:
            if isinstance(part, str):
                pieces.append(part)
                continue
            items, seg = part
            pieces.append(put_back(items, seg, done[at:at + len(seg.sentences)]))
            at += len(seg.sentences)
        translated = "".join(pieces)
        if translated == source:
            continue  # unchanged: its lines stay exactly as they were
        wrapped = wrap(translated, len(places), [e - s + 1 for _, s, e in places])
        for (number, start, end), text in zip(places, wrapped):
            edits.setdefault(number, []).append((start, end, text))
        dropped |= {number for number, _, _ in places[len(wrapped):]}
    out = []
    for number, line in enumerate(lines):
        if number in dropped:  # fewer words than lines: a blank line would end the paragraph
            continue
        for start, end, text in sorted(edits.get(number, []), reverse=True):
            line = line[:start] + text + line[end:]
        out.append(line)
    return "".join(out)
