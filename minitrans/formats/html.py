"""HTML: translate the text and the ``alt``/``title`` attributes, keep every tag as it was.

The document is read with the standard library's :class:`html.parser.HTMLParser` (tolerant of
real-world HTML) into events whose raw source slices spell the document exactly, by
construction: whatever the parser skips (``</>``) is kept as markup of its own. Text is
gathered into *blocks*: the text between two block-level tags (``p``, ``li``, ``td``, ``br``,
...), inline tags (``b``, ``a``, ``span``, ...) and comments included. A block's text is split
into sentences and translated; every tag, comment, doctype and the whitespace between blocks
is written back byte for byte, and so is every stretch of text whose translation is itself
(entities such as ``&eacute;`` and ``&nbsp;`` keep their spelling). Untouched: ``script``,
``style``, ``code``, ``pre``, ``textarea``, ``svg``, ``math`` and any element marked
``translate="no"`` (down to a ``translate="yes"`` inside it).

Where browsers and the parser disagree, the page is read as a browser shows it (HTML5): an
unclosed ``<!--`` hides the rest of the page (it stays a comment), ``<![...]>`` is a bogus
comment, and a tag left open at the end of the file is no text. ``alt`` and ``title`` values
are found by HTML5's attribute rules within the tag the parser read (a value that merely
*contains* ``title=`` is not an attribute), checked against the parser's own reading; a
translation is escaped and written only inside the quotes of the value it replaces.

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
import logging
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from minitrans.text import segment
from minitrans.errors import DataError
from minitrans.formats import TranslateTexts
from minitrans.formats.inline import put_back, text_of

log = logging.getLogger(__name__)

INLINE = {"a", "abbr", "b", "bdi", "bdo", "cite", "data", "del", "dfn", "em", "font", "i", "ins", "label", "mark",
          "q", "s", "small", "span", "strong", "sub", "sup", "time", "u", "var"}
UNTOUCHED = {"script", "style", "code", "pre", "textarea", "svg", "math", "template"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
#: The attributes whose values are text a reader sees (tooltips, image descriptions).
TRANSLATED_ATTRIBUTES = ("alt", "title")
_SPACE = " \t\n\r\f"  # HTML's whitespace (ASCII only)
#: What a leftover starts with when the parser stopped at a construct it found unfinished.
_UNFINISHED = re.compile(r"<[A-Za-z/!?]")


@dataclass
class _Event:
    kind: str  # start, startend, end, text, comment, other, leftover
    tag: str = ""
    attrs: list = field(default_factory=list)  # the parser's (name, value) pairs, names lower-cased
    raw: str = ""
    text: str = ""  # a text event's decoded text
    expected: str = ""  # a start tag's or text event's own source (raw may run on past it)


class _Reader(HTMLParser):
    """Events with their start positions (line, column); raw slices are cut afterwards.

    Three HTML5 readings the standard parser does not make (and that differ between Python
    versions) are made here: an unclosed comment, a bogus marked section and a construct left
    open at the end of the file are markup, never text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)  # entities as their own events: their spelling is kept
        self.events: list[tuple[tuple[int, int], _Event]] = []

    def _add(self, event: _Event) -> None:
        self.events.append((self.getpos(), event))

    def handle_starttag(self, tag, attrs):
        self._add(_Event("start", tag, _lower(attrs), expected=self.get_starttag_text() or ""))

    def handle_startendtag(self, tag, attrs):
        self._add(_Event("startend", tag, _lower(attrs), expected=self.get_starttag_text() or ""))

    def handle_endtag(self, tag):
        self._add(_Event("end", tag))

    def handle_data(self, data):
        self._add(_Event("text", text=data, expected=data))

    def handle_entityref(self, name):
        self._add(_Event("text", expected="&" + name))  # the ";" and the decoded text: read()

    def handle_charref(self, name):
        self._add(_Event("text", expected="&#" + name))

    def handle_comment(self, data):
        self._add(_Event("comment"))

    def handle_decl(self, decl):
        self._add(_Event("other"))

    def handle_pi(self, data):
        self._add(_Event("other"))

    def unknown_decl(self, data):
        self._add(_Event("other"))

    def parse_comment(self, i, report=1):
        for empty in ("<!-->", "<!--->"):  # HTML5's empty comments; the parser waits for a "-->"
            if self.rawdata.startswith(empty, i):
                self.handle_comment("")
                return i + len(empty)
        return super().parse_comment(i, report)

    def parse_marked_section(self, i, report=1):
        """``<![CDATA[...]]>`` (kept whole), else HTML5's bogus comment up to the first ``>``:
        the parser's own version raises AssertionError on ``<![x]>``."""
        rawdata = self.rawdata
        if rawdata.startswith("<![CDATA[", i):
            end = rawdata.find("]]>", i + 9)
            if end < 0:
                return -1
            self.unknown_decl(rawdata[i + 3:end])
            return end + 3
        end = rawdata.find(">", i + 3)
        if end < 0:
            return -1
        self.handle_comment(rawdata[i + 2:end])
        return end + 1

    def close(self):
        # What the parser kept waiting for: an unclosed comment, tag or declaration. A browser
        # shows none of it (a comment to the end, a tag never finished), so it stays markup.
        if self.cdata_elem is None and _UNFINISHED.match(self.rawdata):
            self._add(_Event("leftover"))
            self.rawdata = ""
        super().close()


def _lower(attrs) -> list:
    return [(k.lower(), v) for k, v in attrs]


def read(document: str) -> list[_Event]:
    """The document's events; their ``raw`` slices join back to ``document`` exactly."""
    reader = _Reader()
    try:
        reader.feed(document)
        reader.close()
    except (AssertionError, ValueError, IndexError) as err:  # the parser's own checks, on what it cannot read
        raise DataError(f"this HTML could not be read ({err}); translate it as plain text (--format text).") from None
    line_starts = [0] + [m.end() for m in re.finditer("\n", document)]
    offsets = [line_starts[line - 1] + col for (line, col), _ in reader.events]
    found = [event for _, event in reader.events]
    if not offsets or offsets[0] != 0:  # something before the first event (a skipped "</>")
        found.insert(0, _Event("leftover"))
        offsets.insert(0, 0)
    events = []
    for event, start, end in zip(found, offsets, offsets[1:] + [len(document)]):
        event.raw = document[start:end]
        own = _own_source(event)
        events.append(event)
        if own is not None and len(own) < len(event.raw):  # the parser skipped what follows (e.g. "</>")
            events.append(_Event("leftover", raw=event.raw[len(own):]))
            event.raw = own
    if "".join(e.raw for e in events) != document:
        raise DataError("This HTML could not be read back exactly; translate it as plain text (--format text).")
    return events


def _own_source(event: _Event) -> str | None:
    """The part of ``event.raw`` that is the event's own source (None: all of it), setting a
    text event's decoded text."""
    raw = event.raw
    if event.kind in ("start", "startend"):
        return event.expected if event.expected and raw.startswith(event.expected) else None
    if event.kind != "text":
        return None
    if event.expected.startswith("&"):  # an entity or character reference, with its ";" if it has one
        own = event.expected + (";" if raw[len(event.expected):len(event.expected) + 1] == ";" else "")
        event.text = html.unescape(own)
        return own if raw.startswith(own) else None
    event.text = event.expected
    return event.expected if raw.startswith(event.expected) else None


# -- attribute values -----------------------------------------------------------------------
def attribute_values(tag: str) -> list[tuple[str, int, int, str]]:
    """``(name, start, end, quote)`` of each attribute *with a value* in the start tag ``tag``
    (its source, ``<`` to ``>``), by HTML5's tokenizer rules: ``tag[start:end]`` is the raw
    value, ``quote`` is ``"``, ``'`` or ``""`` (unquoted). Names are lower-cased."""
    n, i = len(tag), 1
    while i < n and tag[i] not in _SPACE + "/>":  # the tag name
        i += 1
    found = []
    while i < n:
        if tag[i] in _SPACE + "/":
            i += 1
            continue
        if tag[i] == ">":
            break
        start = i
        i += 1  # a name's first character may be "=" (HTML5)
        while i < n and tag[i] not in _SPACE + "/>=":
            i += 1
        name = tag[start:i].lower()
        j = i
        while j < n and tag[j] in _SPACE:
            j += 1
        if j >= n or tag[j] != "=":
            i = j
            continue
        j += 1
        while j < n and tag[j] in _SPACE:
            j += 1
        if j < n and tag[j] in "\"'":
            end = tag.find(tag[j], j + 1)
            end = n if end < 0 else end
            found.append((name, j + 1, end, tag[j]))
            i = end + 1
        else:
            end = j
            while end < n and tag[end] not in _SPACE + ">":
                end += 1
            if end > j:
                found.append((name, j, end, ""))
            i = end
    return found


@dataclass
class _AttributeTag:
    """A start tag with values to translate: ``spans`` are ``(start, end, quote, text)``."""

    raw: str
    spans: list[tuple[int, int, str, str]]

    def render(self, translations: list[str]) -> str:
        pieces, last = [], 0
        for (start, end, quote, text), done in zip(self.spans, translations):
            value = self.raw[start:end] if done == text else html.escape(done, quote=True)  # unchanged: as it was
            if not quote and done != text:
                pieces += [self.raw[last:start], f'"{value}"']
            else:
                pieces += [self.raw[last:start], value]
            last = end
        return "".join(pieces) + self.raw[last:]


def _attribute_plan(event: _Event, skipped: list[str]) -> str | _AttributeTag:
    """A start tag as it is, or with the values of its alt/title attributes to translate. A tag
    whose attributes this reading and the parser's disagree on is kept as it is (and reported)."""
    raw = event.raw
    if not any(name in TRANSLATED_ATTRIBUTES for name, _ in event.attrs):
        return raw
    values = attribute_values(raw)
    theirs = [(k, v) for k, v in event.attrs if v]
    ours = [(name, html.unescape(raw[start:end])) for name, start, end, _ in values]
    if [pair for pair in ours if pair[1]] != theirs:
        skipped.append(raw)
        return raw
    spans = [(start, end, quote, value) for (name, start, end, quote), (_, value) in zip(values, ours)
             if name in TRANSLATED_ATTRIBUTES and value.strip()]
    return _AttributeTag(raw, spans) if spans else raw


# -- blocks -----------------------------------------------------------------------------------
@dataclass
class _Block:
    """Text and inline markup between two block boundaries."""

    items: list = field(default_factory=list)  # ("text", decoded), ("tag", str | _AttributeTag)
    raws: list[str] = field(default_factory=list)  # each text item's source, in order

    def add_text(self, event: _Event) -> None:
        self.items.append(("text", event.text))
        self.raws.append(event.raw)

    def source(self, start: int, end: int) -> str | None:
        """The source of ``text_of(items)[start:end]``, or None when a reference (``&amp;``)
        is cut in two."""
        out, at, k = [], 0, 0
        total = sum(len(value) for kind, value in self.items if kind == "text")
        for kind, value in self.items:
            if kind != "text":
                continue
            raw, lo, hi = self.raws[k], at, at + len(value)
            k, at = k + 1, hi
            if lo == hi:  # a reference that spells nothing ("&#1"): with the stretch it starts
                if start <= lo < end or lo == end == total:
                    out.append(raw)
                continue
            if hi <= start or lo >= end:
                continue
            if raw == value:
                out.append(raw[max(start, lo) - lo:min(end, hi) - lo])
            elif start <= lo and hi <= end:
                out.append(raw)
            else:
                return None
        return "".join(out)


def _untouched(event: _Event, inside: bool) -> bool:
    """Whether the element this start tag opens is left as it is."""
    marked = (dict(event.attrs).get("translate") or "").strip().lower()
    if marked == "no":
        return True
    if marked == "yes":
        return False
    return inside or event.tag in UNTOUCHED


def translate(document: str, translate_texts: TranslateTexts, lang: str = "en") -> str:
    """The document with its text translated (see the module's docstring)."""
    plan: list = []  # raw strings, _Block objects and _AttributeTag objects
    block = _Block()
    stack: list[tuple[str, bool]] = []  # open elements: (tag, untouched)
    skipped: list[str] = []

    def flush() -> None:
        nonlocal block
        if block.items:
            plan.append(block)
            block = _Block()

    for event in read(document):
        inside = bool(stack) and stack[-1][1]
        if event.kind in ("start", "startend"):
            untouched = _untouched(event, inside)
            tag_out = event.raw if untouched else _attribute_plan(event, skipped)
            if event.tag in INLINE and not untouched:
                block.items.append(("tag", tag_out))
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
        elif event.kind == "text" and not inside:
            block.add_text(event)
        elif event.kind in ("comment", "leftover") and not inside:
            block.items.append(("tag", event.raw))
        else:
            flush()
            plan.append(event.raw)
    flush()
    if skipped:
        log.warning("%d tag(s) with alt/title were kept untranslated: their attributes read two ways (first: %.80s)",
                    len(skipped), skipped[0])
    return _assemble(plan, translate_texts, lang)


def _assemble(plan: list, translate_texts: TranslateTexts, lang: str) -> str:
    """Translate every block's sentences and attribute value in one call, then write it out."""
    wanted: list[str] = []
    tags = [item for item in plan if isinstance(item, _AttributeTag)]
    tags += [value for item in plan if isinstance(item, _Block) for kind, value in item.items
             if isinstance(value, _AttributeTag)]
    for tag in tags:
        wanted += [text for _, _, _, text in tag.spans]
    splits = {}
    for i, item in enumerate(plan):
        if isinstance(item, _Block):
            seg = segment.split(text_of(item.items), lang)
            if seg.sentences:
                splits[i] = (seg, len(wanted))
                wanted += seg.sentences
    done = translate_texts(wanted) if wanted else []
    if len(done) != len(wanted):
        raise ValueError(f"{len(done)} translations for {len(wanted)} texts")
    rendered, at = {}, 0
    for tag in tags:
        rendered[id(tag)] = tag.render(done[at:at + len(tag.spans)])
        at += len(tag.spans)
    out = []
    for i, item in enumerate(plan):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, _AttributeTag):
            out.append(rendered[id(item)])
        else:
            items = [(kind, rendered[id(value)] if isinstance(value, _AttributeTag) else value)
                     for kind, value in item.items]
            if i in splits:
                seg, first = splits[i]
                out.append(put_back(items, seg, done[first:first + len(seg.sentences)], _escape,
                                    source=item.source))
            else:  # whitespace and markup only: as it was
                raws = iter(item.raws)
                out.append("".join(next(raws) if kind == "text" else value for kind, value in items))
    return "".join(out)


def _escape(text: str) -> str:
    return html.escape(text, quote=False)
