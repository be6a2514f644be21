"""HTML: translate the text and the ``alt``/``title`` attributes, keep every tag as it was.

The document is read with the standard library's :class:`html.parser.HTMLParser` (tolerant of
real-world HTML) into events whose raw source slices spell the document exactly. Text is
gathered into *blocks*: the text between two block-level tags (``p``, ``li``, ``td``, ``br``,
...), inline tags (``b``, ``a``, ``span``, ...) and comments included. A block's text is split
into sentences and translated; every tag, comment, doctype and the whitespace between blocks
is written back byte for byte. Untouched: ``script``, ``style``, ``code``, ``pre``,
``textarea``, ``svg``, ``math`` and any element marked ``translate="no"`` (down to a
``translate="yes"`` inside it).

**Inline markup inside a sentence** cannot be placed by word alignment here (CTranslate2 returns
no attention, and attention is not alignment): a tag inside a sentence is put at the same
relative position of that sentence's translation, snapped to a word boundary (an opening tag
before a word, a closing one after a word), in its original order, so nesting and the tag
sequence are always kept but a tag may land around different words. A tag between sentences
stays exactly between them. An inline element that must stay untranslated (``code``,
``translate="no"``) ends the block there, so the text on either side is translated apart.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from minitrans import segment
from minitrans.errors import DataError
from minitrans.formats import TranslateTexts
from minitrans.formats.inline import put_back, text_of

INLINE = {"a", "abbr", "b", "bdi", "bdo", "cite", "data", "del", "dfn", "em", "font", "i", "ins", "label", "mark",
          "q", "s", "small", "span", "strong", "sub", "sup", "time", "u", "var"}
UNTOUCHED = {"script", "style", "code", "pre", "textarea", "svg", "math", "template"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
_ATTRIBUTE = re.compile(r"""(\s(?:alt|title)\s*=\s*)("([^"]*)"|'([^']*)'|([^\s"'=<>`]+))""", re.IGNORECASE)


@dataclass
class _Event:
    kind: str  # start, startend, end, data, comment, other
    tag: str
    attrs: dict
    raw: str = ""
    text: str = ""  # decoded text of a data event


class _Reader(HTMLParser):
    """Events with their start positions (line, column); raw slices are cut afterwards."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.events: list[tuple[tuple[int, int], _Event]] = []

    def _add(self, event: _Event) -> None:
        self.events.append((self.getpos(), event))

    def handle_starttag(self, tag, attrs):
        self._add(_Event("start", tag, {k.lower(): (v or "") for k, v in attrs}))

    def handle_startendtag(self, tag, attrs):
        self._add(_Event("startend", tag, {k.lower(): (v or "") for k, v in attrs}))

    def handle_endtag(self, tag):
        self._add(_Event("end", tag, {}))

    def handle_data(self, data):
        self._add(_Event("data", "", {}, text=data))

    def handle_comment(self, data):
        self._add(_Event("comment", "", {}))

    def handle_decl(self, decl):
        self._add(_Event("other", "", {}))

    def handle_pi(self, data):
        self._add(_Event("other", "", {}))

    def unknown_decl(self, data):
        self._add(_Event("other", "", {}))


def read(document: str) -> list[_Event]:
    """The document's events; their ``raw`` slices join back to ``document`` exactly."""
    reader = _Reader()
    reader.feed(document)
    reader.close()
    line_starts = [0] + [m.end() for m in re.finditer("\n", document)]
    offsets = [line_starts[line - 1] + col for (line, col), _ in reader.events]
    events = []
    for (_, event), start, end in zip(reader.events, offsets, offsets[1:] + [len(document)]):
        event.raw = document[start:end]
        events.append(event)
    if "".join(e.raw for e in events) != document or (offsets and offsets[0] != 0):
        raise DataError("This HTML could not be read back exactly; translate it as plain text (--format text).")
    return events


@dataclass
class _Block:
    """Text and inline markup between two block boundaries."""

    items: list[tuple[str, str]] = field(default_factory=list)  # ("text", decoded) or ("tag", raw)


def _untouched(event: _Event, inside: bool) -> bool:
    """Whether the element this start tag opens is left as it is."""
    marked = event.attrs.get("translate", "").strip().lower()
    if marked == "no":
        return True
    if marked == "yes":
        return False
    return inside or event.tag in UNTOUCHED


def translate(document: str, translate_texts: TranslateTexts, lang: str = "en") -> str:
    """The document with its text translated (see the module's docstring)."""
    plan: list = []  # raw strings, _Block objects and (raw tag, [attribute spans]) pairs
    block = _Block()
    stack: list[tuple[str, bool]] = []  # open elements: (tag, untouched)

    def flush() -> None:
        nonlocal block
        if block.items:
            plan.append(block)
            block = _Block()

    for event in read(document):
        inside = bool(stack) and stack[-1][1]
        if event.kind in ("start", "startend"):
            untouched = _untouched(event, inside)
            tag_out = event.raw if untouched else _attribute_plan(event.raw)
            if event.tag in INLINE and not untouched:
                block.items.append(("tag", tag_out))  # type: ignore[arg-type]
            else:
                flush()
                plan.append(tag_out)
            if event.kind == "start" and event.tag not in VOID:
                stack.append((event.tag, untouched))
        elif event.kind == "end":
            names = [name for name, _ in stack]
            closing_untouched = event.tag in names and stack[len(names) - 1 - names[::-1].index(event.tag)][1]
            if event.tag in INLINE and not closing_untouched and not inside:
                block.items.append(("tag", event.raw))
            else:
                flush()
                plan.append(event.raw)
            if event.tag in names:
                del stack[len(names) - 1 - names[::-1].index(event.tag):]
        elif event.kind == "data" and not inside:
            block.items.append(("text", event.text))
        elif event.kind == "comment" and not inside:
            block.items.append(("tag", event.raw))
        else:
            flush()
            plan.append(event.raw)
    flush()
    return _assemble(plan, translate_texts, lang)


def _attribute_plan(raw: str):
    """A start tag whose alt/title values are to be translated: ``(raw, [(start, end, text)])``."""
    spans = []
    for m in _ATTRIBUTE.finditer(raw):
        group = next(g for g in (3, 4, 5) if m.group(g) is not None)
        value = html.unescape(m.group(group))
        if value.strip():
            spans.append((m.start(group), m.end(group), value))
    return (raw, spans) if spans else raw


def _assemble(plan: list, translate_texts: TranslateTexts, lang: str) -> str:
    """Translate every block's sentences and attribute value in one call, then write it out."""
    wanted: list[str] = []
    split_blocks = {}
    for i, item in enumerate(plan):
        if isinstance(item, _Block):
            seg = segment.split(text_of(item.items), lang)
            if seg.sentences:
                split_blocks[i] = (seg, len(wanted))
                wanted += seg.sentences
        elif isinstance(item, tuple):
            wanted += [text for _, _, text in item[1]]
    done = translate_texts(wanted) if wanted else []
    out, at = [], 0
    for i, item in enumerate(plan):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, tuple):
            raw, spans = item
            pieces, last = [], 0
            for start, end, _ in spans:
                quoted = raw[start - 1] in "\"'"
                pieces += [raw[last:start], html.escape(done[at], quote=quoted) if quoted else _unquoted(done[at])]
                last, at = end, at + 1
            out.append("".join(pieces) + raw[last:])
        elif i in split_blocks:
            seg, first = split_blocks[i]
            out.append(put_back(item.items, seg, done[first:first + len(seg.sentences)], _escape))
            at = first + len(seg.sentences)
        else:  # whitespace and markup only
            out.append("".join(v if k == "tag" else html.escape(v, quote=False) for k, v in item.items))
    return "".join(out)


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def _unquoted(text: str) -> str:
    """An attribute value that was unquoted, quoted now if its translation needs it."""
    return f'"{html.escape(text)}"' if re.search(r"[\s\"'=<>`]", text) or not text else html.escape(text)
