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

Front matter (``---`` YAML or ``+++`` TOML at the top of the file, as Jekyll, Hugo and MkDocs
read it) is kept as it is. Lines are counted as markdown-it counts them (``\n``, ``\r\n`` or
``\r``), never with ``str.splitlines``, whose extra breaks (U+2028, ``\x0c``, ...) markdown-it
reads as text; a run whose text cannot be found on its lines is reported, not skipped silently.
"""

from __future__ import annotations

import logging
import re

from minitrans.text import segment
from minitrans.formats import TranslateTexts
from minitrans.formats.inline import Items, put_back, text_of, wrap

log = logging.getLogger(__name__)

#: CommonMark's autolinks: ``<scheme:...>`` (any scheme of 2-32 characters) and ``<user@host>``.
_AUTOLINK = (r"<[A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*>"
             r"|<[A-Za-z0-9.!#$%&'*+/=?^_`{|}~\-]+@[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?"
             r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?)*>")
#: CommonMark's raw inline HTML: an open or closing tag (its attribute grammar, so that
#: ``<paginate.Page: 1 of 1>`` is text), a comment, a processing instruction, a declaration, CDATA.
_INLINE_HTML = (r"<[A-Za-z][A-Za-z0-9\-]*(?:\s+[A-Za-z_:][A-Za-z0-9_.:\-]*"
                r"(?:\s*=\s*(?:[^\s\"'=<>`]+|'[^']*'|\"[^\"]*\"))?)*\s*/?>"
                r"|</[A-Za-z][A-Za-z0-9\-]*\s*>|<!---?>|<!--[\s\S]*?-->|<\?[\s\S]*?\?>"
                r"|<![A-Za-z][^>]*>|<!\[CDATA\[[\s\S]*?\]\]>")
_MARKUP = re.compile(rf"""
    (`+)[\s\S]*?\1                          # a code span
  | \]\(\s*<?[^)\s>]*>?(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)   # a link or image target
  | \]\[[^\]]*\]                            # a reference label
  | !?\[                                    # a link or image text opens
  | \]                                      # ... and closes (a shortcut reference)
  | {_AUTOLINK}                             # an autolink
  | {_INLINE_HTML}                          # inline HTML
  | (?:https?|ftp)://[^\s<>()]+[^\s<>().,;:!?'"]   # a bare URL
  | \\[!-/:-@\[-`{{-~]                      # a backslash escape
  | \*{{1,3}}|_{{1,3}}(?=\S)|(?<=\S)_{{1,3}}|~~   # emphasis markers
""", re.VERBOSE)
_CLOSING = re.compile(r"^(?:\]|\]\(|\]\[|</)")
#: Markup that stands for words of its own (code, URLs): the text on either side is translated apart.
_ATOMIC = re.compile(rf"^(?:`|(?:{_AUTOLINK})$|(?:https?|ftp)://)")


def _link_brackets(content: str, references: frozenset[str]) -> set[int]:
    """Where the brackets of links are: a ``[...]`` followed by ``(`` or ``[``, or whose label
    the document defines as a reference. Any other bracket is text (``[...]`` in a quote)."""
    from markdown_it.common.utils import normalizeReference

    links: set[int] = set()
    stack: list[int] = []
    i = 0
    while i < len(content):
        c = content[i]
        if c == "\\":
            i += 2
            continue
        if c == "`":  # a code span's brackets are code
            run = len(content[i:]) - len(content[i:].lstrip("`"))
            close = content.find("`" * run, i + run)
            i = close + run if close >= 0 else i + run
            continue
        if c == "[":
            stack.append(i)
        elif c == "]" and stack:
            start = stack.pop()
            if content[i + 1:i + 2] in ("(", "[") or normalizeReference(content[start + 1:i]) in references:
                links |= {start, i}
        i += 1
    return links


def _emphasis_side(content: str, start: int, end: int, marker: str, open_markers: list[str]) -> str | None:
    """``open``, ``close`` or None (text: ``x_y``, ``a * b``): CommonMark's flanking rules for
    an emphasis run, and when it may do both (``a*b*c``) whether a run of the same character
    is open (``open_markers``)."""
    import unicodedata

    def kind(c: str) -> str:
        if not c or c.isspace():
            return "space"
        return "punct" if unicodedata.category(c)[0] in "PS" else "other"

    before, after = kind(content[start - 1:start]), kind(content[end:end + 1])
    left = after != "space" and (after != "punct" or before in ("space", "punct"))
    right = before != "space" and (before != "punct" or after in ("space", "punct"))
    if marker[0] == "_":
        can_open, can_close = left and (not right or before == "punct"), right and (not left or after == "punct")
    else:
        can_open, can_close = left, right
    if can_close and marker[0] in {m[0] for m in open_markers} and (not can_open or open_markers[-1][0] == marker[0]):
        while open_markers and open_markers.pop()[0] != marker[0]:
            pass
        return "close"
    if can_open:
        open_markers.append(marker)
        return "open"
    return "close" if can_close else None


def split_inline(content: str, references: frozenset[str] = frozenset()) -> Items:
    """A run's source as text and markup items (see the module's docstring). An emphasis
    marker closes a span when a word is before it and none after it. ``references``: the
    labels the document defines (normalised), for shortcut links ``[label]``."""
    items: Items = []
    last = 0
    links = _link_brackets(content, references) if "[" in content else set()
    open_markers: list[str] = []  # emphasis opened and not yet closed, innermost last
    for m in _MARKUP.finditer(content):
        markup = m.group(0)
        bracket = m.start() + (1 if markup.startswith("![") else 0)
        if markup in ("[", "![", "]") and bracket not in links:  # a bracket of text, not of a link
            continue
        side = _emphasis_side(content, m.start(), m.end(), markup, open_markers) if markup[0] in "*_~" else None
        if markup[0] in "*_~" and side is None:  # an asterisk or underscore that is text
            continue
        if m.start() > last:
            items.append(("text", content[last:m.start()]))
        if side is not None:
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


#: YAML (``---``) or TOML (``+++``) front matter at the top of a file, as Jekyll, Hugo and MkDocs
#: read it: kept as it is, never translated.
_FRONT_MATTER = re.compile(r"\A(?:---[ \t]*\r?\n(?:.*?\r?\n)??(?:---|\.\.\.)|\+\+\+[ \t]*\r?\n(?:.*?\r?\n)??\+\+\+)"
                           r"[ \t]*(?:\r\n|\r|\n|\Z)", re.DOTALL)
#: A line and its end, as markdown-it counts lines (``\r\n``, ``\r`` or ``\n``; not U+2028 and
#: the other breaks of ``str.splitlines``, which markdown-it reads as text).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def front_matter(document: str) -> str:
    """The document's front matter (its delimiters and line end included), or ``""``."""
    m = _FRONT_MATTER.match(document)
    return m.group(0) if m else ""


def lines_of(document: str) -> list[str]:
    """The document's lines with their ends, as markdown-it numbers them."""
    return _LINE.findall(document)


def _parts(source: str, references: frozenset[str], lang: str, careful: bool) -> list:
    """A run's source as stretches to translate, ``(items, split of their text)``, between
    markup that stays exactly where it is (a string). Code spans and URLs always stay; with
    ``careful`` every piece of markup does (emphasis, links, HTML), so nothing is placed by
    position -- the fallback for a run whose markup the placement would change."""
    parts: list = []
    stretch: Items = []
    for kind, value in split_inline(source, references) + [("atomic", "")]:
        if kind == "atomic" or (careful and kind != "text"):
            parts += [(stretch, segment.split(text_of(stretch), lang)), value]
            stretch = []
        else:
            stretch.append((kind, value))
    return parts


def _sentences(parts: list) -> list[str]:
    return [s for p in parts if isinstance(p, tuple) for s in p[1].sentences]


def _compose(parts: list, done: list[str], protect: dict[str, str]) -> str:
    """The run with ``done`` (its sentences' translations, in order) put in place; whitespace
    inside markup is written as ``protect``'s stand-ins, so that re-wrapping never breaks a
    piece of markup (``<br />``, a link's title) over two lines."""
    pieces, at = [], 0
    for part in parts:
        if isinstance(part, str):
            pieces.append(_protected(part, protect))
            continue
        items, seg = part
        items = [(k, v if k == "text" else _protected(v, protect)) for k, v in items]
        pieces.append(put_back(items, seg, done[at:at + len(seg.sentences)]))
        at += len(seg.sentences)
    return "".join(pieces)


def _protected(markup: str, protect: dict[str, str]) -> str:
    for char, stand_in in protect.items():
        markup = markup.replace(char, stand_in)
    return markup


#: The characters inline markup is made of: a text without any has no inline structure.
_MARKUP_CHARS = re.compile(r"[`*_\[\]<>!\\~]")


def _inline_structure(md, text: str, env: dict) -> list:
    """What of a run's inline markup must survive translation: links and their targets,
    emphasis, code, HTML and breaks, in order (its text aside)."""
    if not _MARKUP_CHARS.search(text):
        return []
    tokens = md.parseInline(text, dict(env))
    return [(t.type, t.attrs.get("href"), t.attrs.get("src"), t.content if t.type in ("code_inline", "html_inline")
             else None) for token in tokens for t in token.children or [] if t.type not in ("text", "softbreak")]


def structure(document: str) -> list[tuple[tuple, int]]:
    """The document's structure -- blocks, their markers, code, HTML, link targets, emphasis --
    with the source line each item belongs to; equal for a document and its translation."""
    from markdown_it import MarkdownIt

    out, line = [], 0
    for token in MarkdownIt("commonmark").enable("table").parse(document):
        line = token.map[0] if token.map else line
        if token.type in ("fence", "code_block", "html_block"):
            out.append(((token.type, token.content), line))
        elif token.type == "inline":
            out += [((t.type, t.attrs.get("href"), t.attrs.get("src"),
                      t.content if t.type in ("code_inline", "html_inline") else None), line)
                    for t in token.children or [] if t.type not in ("text", "softbreak")]
        else:
            out.append(((token.type, token.markup, token.info), line))
    return out


#: What makes a line's start a block of its own -- a heading, a quote, a list item, a thematic
#: break or setext underline, a fence, an HTML block: never at the start of a re-wrapped line.
_BLOCK_START = re.compile(r"(?:#{1,6}(?:\s|$)|>|[-+*](?:\s|$)|\d{1,9}[.)](?:\s|$)|[-*_=]{2,}\s*$|(?:`{3}|~{3})|<)")
#: A translation's own text that would start a block at the start of a paragraph: escaped.
_ESCAPABLE = re.compile(r"(?:#{1,6}(?=\s|$)|>|[-+*](?=\s|$)|[-*_=]{2,}(?=\s*$)|(?:`{3}|~{3}))")
_ORDINAL = re.compile(r"\d{1,9}(?=[.)](?:\s|$))")


def _placeable(lines: list[str]) -> list[str]:
    """Re-wrapped lines none of which starts a new block: a line that would is joined to the
    one before it; the first line's own text (``- 3``, ``# 1``, ``1. ``) is backslash-escaped."""
    out: list[str] = []
    for line in lines:
        if out and _BLOCK_START.match(line):
            out[-1] += " " + line
        else:
            out.append(line)
    first = out[0] if out else ""
    if _ESCAPABLE.match(first):
        out[0] = "\\" + first
    elif (m := _ORDINAL.match(first)) is not None:
        out[0] = first[:m.end()] + "\\" + first[m.end():]
    return out


def translate(document: str, translate_texts: TranslateTexts, lang: str = "en") -> str:
    """The document with its text translated (see the module's docstring)."""
    head = front_matter(document)
    if head:
        return head + translate(document[len(head):], translate_texts, lang)
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    lines = lines_of(document)
    searchable = [line.replace("\0", "\ufffd") for line in lines]  # markdown-it reads NUL as U+FFFD
    unplaced: list[int] = []
    runs = []  # [places [(line, start, end)] where each content line is, source, in a table cell]
    cursors: dict[int, int] = {}  # how far each source line has been matched (table rows hold several runs)
    env: dict = {}
    tokens = md.parse(document, env)
    references = frozenset(env.get("references", {}))
    for previous, token in zip([None, *tokens], tokens):
        if token.type != "inline" or not token.map or not token.content.strip():
            continue
        places = []
        for j, content_line in enumerate(token.content.split("\n")):
            number = token.map[0] + j
            if number >= len(lines):
                break
            line, piece = searchable[number], content_line.strip()
            if not piece:
                continue
            start = line.find(piece, cursors.get(number, 0))
            if start < 0 and "|" in piece:  # a table cell's "\|", which markdown-it unescapes
                piece = piece.replace("|", "\\|")
                start = line.find(piece, cursors.get(number, 0))
            if start < 0:  # text markdown-it rewrote (it should not): said, never skipped silently
                unplaced.append(number + 1)
                continue
            places.append((number, start, start + len(piece)))
            cursors[number] = start + len(piece)
        if places:
            cell = previous is not None and previous.type in ("th_open", "td_open")
            runs.append((places, " ".join(lines[n][s:e] for n, s, e in places), cell))
    # Stand-ins for whitespace inside markup while lines are re-wrapped (characters the document lacks).
    free = (chr(c) for c in range(0xE000, 0xF900) if chr(c) not in document)
    protect = dict(zip(" \t", free))
    restore = str.maketrans({v: k for k, v in protect.items()})

    # Each run is translated with its markup placed by position; a run whose markup that would
    # change (a word glued to a tag, a marker beside punctuation) is translated again with every
    # piece of markup kept in place; a run that changes even so keeps its text, and is reported.
    texts: dict[int, str] = {}
    pending = list(range(len(runs)))
    for careful in (False, True):
        plans = {i: _parts(runs[i][1], references, lang, careful) for i in pending}
        wanted = [s for i in pending for s in _sentences(plans[i])]
        done = translate_texts(wanted) if wanted else []
        at, failed = 0, []
        for i in pending:
            n = len(_sentences(plans[i]))
            text = _compose(plans[i], done[at:at + n], protect)
            at += n
            plain = text.translate(restore)
            if runs[i][2]:  # a table cell: a "|" of the translation is text
                plain = _escape_pipes(plain)
            if _inline_structure(md, plain, env) == _inline_structure(md, runs[i][1], env):
                texts[i] = text if not runs[i][2] else _escape_pipes(text)
            else:
                failed.append(i)
        pending = failed
        if not pending:
            break
    unplaced += [runs[i][0][0][0] + 1 for i in pending]

    def write(chosen: dict[int, str]) -> str:
        edits: dict[int, list[tuple[int, int, str]]] = {}
        dropped: set[int] = set()
        for i, text in chosen.items():
            places, source, _ = runs[i]
            plain = text.translate(restore)
            if plain == source:
                continue  # unchanged: its lines stay exactly as they were
            wrapped = _placeable(wrap(text, len(places), [e - s + 1 for _, s, e in places]))
            for (number, start, end), line in zip(places, wrapped):
                edits.setdefault(number, []).append((start, end, line.translate(restore)))
            dropped |= {number for number, _, _ in places[len(wrapped):]}
        out = []
        for number, line in enumerate(lines):
            if number in dropped:  # fewer words than lines: a blank line would end the paragraph
                continue
            for start, end, text in sorted(edits.get(number, []), reverse=True):
                line = line[:start] + text + line[end:]
            out.append(line)
        return "".join(out)

    # The whole document is read again: where its structure changed, the run at fault keeps its text.
    result = write(texts)
    base = structure(document) if result != document else []
    expected = [item for item, _ in base]
    for _ in range(len(texts) + 1):
        if result == document:
            break
        got = structure(result)
        at = next((k for k, ((item, _), want) in enumerate(zip(got, expected)) if item != want),
                  None if len(got) == len(expected) else min(len(got), len(expected)))
        if at is None:
            break
        line = base[min(at, len(base) - 1)][1] if base else 0
        culprit = _run_at(runs, texts, line)
        if culprit is None:  # nothing left to take back: the document as it was
            unplaced += [runs[i][0][0][0] + 1 for i in texts]
            texts, result = {}, document
            break
        unplaced.append(runs[culprit][0][0][0] + 1)
        del texts[culprit]
        result = write(texts)
    if unplaced:
        log.warning("%d run(s) of this Markdown could not be placed and were left untranslated: line %s",
                    len(unplaced), ", ".join(map(str, sorted(set(unplaced))[:10])))
    return result


def _run_at(runs: list, chosen: dict[int, str], line: int) -> int | None:
    """The translated run that holds ``line``, else the last one that starts before it."""
    best = None
    for i in sorted(chosen):
        first, last = runs[i][0][0][0], runs[i][0][-1][0]
        if first <= line <= last:
            return i
        if first <= line:
            best = i
    return best if best is not None else (min(chosen) if chosen else None)


def _escape_pipes(text: str) -> str:
    """A table cell's translation with a bare ``|`` escaped (it would end the cell; the
    source's own are escaped already, or they would have)."""
    return re.sub(r"(?<!\\)\|", r"\\|", text)
