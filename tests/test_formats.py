"""Documents (issue #28, part 3): HTML and SRT translated with their markup and timings kept.

* The skeleton — every tag with its attributes (``alt``/``title`` values aside), comments,
  doctype, the untouched elements' content; an SRT's numbers, timings and blank lines — of the
  output equals the input's, on hand-made documents and on Hypothesis-generated ones.
* With an identity "translation" an HTML document comes back byte for byte, and an SRT's words
  come back in order: nothing is lost or moved.
* The CLI picks the format by extension and writes the document atomically.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_main
from minitrans.errors import DataError
from minitrans.formats import format_for, html as html_format, srt as srt_format

UNTOUCHED = {"script", "style", "code", "pre", "textarea"}


class _Skeleton(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.items: list = []
        self.texts: list[str] = []
        self.depth: list[bool] = []

    def _keep(self) -> bool:
        return bool(self.depth) and self.depth[-1]

    def handle_starttag(self, tag, attrs):
        attrs = [(k, v if k not in ("alt", "title") or self._keep() else "*") for k, v in attrs]
        self.items.append(("start", tag, attrs))
        if tag not in html_format.VOID:
            marked = dict(attrs).get("translate")
            self.depth.append(marked == "no" or (self._keep() and marked != "yes") or tag in UNTOUCHED)

    def handle_startendtag(self, tag, attrs):
        self.items.append(("startend", tag, [(k, v if k not in ("alt", "title") else "*") for k, v in attrs]))

    def handle_endtag(self, tag):
        self.items.append(("end", tag))
        if self.depth and tag not in html_format.VOID:
            self.depth.pop()

    def handle_data(self, data):
        if self._keep():
            self.items.append(("kept", data))
        elif data.strip():
            self.texts.append(data)

    def handle_comment(self, data):
        self.items.append(("comment", data))

    def handle_decl(self, decl):
        self.items.append(("decl", decl))


def skeleton(document: str) -> _Skeleton:
    parser = _Skeleton()
    parser.feed(document)
    parser.close()
    return parser


def shout(texts: list[str]) -> list[str]:
    """A stand-in translation that changes every text visibly (and its length)."""
    return [f"«{t.upper()} ET PLUS»" for t in texts]


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Dogs &amp; cats</title>
<style>p { color: red; } /* The cat. */</style>
<script>var s = "The dog runs. <b>";</script></head>
<body>
  <!-- A comment. -->
  <h1 title="The main title">Two dogs</h1>
  <p class=intro>A <b>big <i>red</i> dog</b> runs &lt;fast&gt; &amp; far. <a href="/x?a=1&amp;b=2">A link</a> here.</p>
  <ul>
    <li>One cat.</li>
    <li translate="no">Do not translate me. <span translate="yes">But this.</span></li>
  </ul>
  <p>Run <code>ls -l</code> now.<br>Then stop.</p>
  <img src="d.png" alt="A dog in the snow." width=10>
  <pre>keep   this
  as it is</pre>
  <textarea>The form text.</textarea>
  <p>Unclosed paragraph.
  <div>A div<p>inside</div>
</body></html>
"""


def test_an_html_page_keeps_its_skeleton():
    out = html_format.translate(PAGE, shout)
    before, after = skeleton(PAGE), skeleton(out)
    assert after.items == before.items
    assert after.texts and all(t == t.upper() for t in after.texts), after.texts  # every text was translated
    assert "keep   this\n  as it is" in out and 'var s = "The dog runs. <b>";' in out and "ls -l" in out
    assert "Do not translate me." in out and "«BUT THIS. ET PLUS»" in out
    assert 'alt="«A DOG IN THE SNOW. ET PLUS»"' in out and 'title="«THE MAIN TITLE ET PLUS»"' in out
    assert "&lt;FAST&gt; &amp; FAR." in out  # text re-escaped
    assert "<b>" in out and out.index("<b>") < out.index("<i>") < out.index("</i>") < out.index("</b>")


def test_identity_gives_the_page_back():
    assert html_format.translate(PAGE, lambda texts: texts) == PAGE
    crlf = PAGE.replace("\n", "\r\n")
    assert html_format.translate(crlf, lambda texts: texts) == crlf


def test_a_sentence_is_translated_whole_across_inline_tags():
    seen = []
    html_format.translate("<p>A <b>big</b> dog runs. It <em>barks</em>.</p>", lambda t: seen.extend(t) or t)
    assert seen == ["A big dog runs.", "It barks."]


WORDS = st.sampled_from(["The", "cat", "eats.", "A", "dog", "runs!", "Dr.", "Smith", "is", "3.5", "&amp;", "&lt;b&gt;",
                         "\u00e9t\u00e9", "well...", "Really?"])
INLINE = st.sampled_from(["b", "i", "a", "span", "em", "strong"])
BLOCK = st.sampled_from(["p", "li", "div", "td", "h2"])


@st.composite
def phrase(draw, depth=0):
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 2 and draw(st.integers(0, 3)) == 0:
            tag = draw(INLINE)
            parts.append(f"<{tag}>{draw(phrase(depth + 1))}</{tag}>")
        else:
            parts.append(draw(WORDS))
    return " ".join(parts)


@st.composite
def documents(draw):
    blocks = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.integers(0, 5))
        if kind == 0:
            blocks.append(f"<pre>{draw(phrase())}</pre>")
        elif kind == 1:
            blocks.append(f"<!-- {draw(WORDS)} -->")
        elif kind == 2:
            blocks.append(f'<img alt="{draw(phrase(2))}">')
        else:
            tag = draw(BLOCK)
            marked = ' translate="no"' if kind == 3 else ""
            blocks.append(f"<{tag}{marked}>{draw(phrase())}</{tag}>")
    return "<html><body>\n" + draw(st.sampled_from(["\n", "\n  ", " "])).join(blocks) + "\n</body></html>"


@settings(max_examples=150, deadline=None)
@given(documents())
def test_generated_html_keeps_its_skeleton_and_identity_is_exact(document):
    assert html_format.translate(document, lambda texts: texts) == document
    assert skeleton(html_format.translate(document, shout)).items == skeleton(document).items


SUBTITLES = """1
00:00:01,000 --> 00:00:02,000
We could go to the

2
00:00:02,500 --> 00:00:04,000 X1:100 X2:200
beach tomorrow. It will be
sunny all day.

3
00:00:05,000 --> 00:00:06,000
Good night!

"""


def _srt_skeleton(document: str) -> list[str]:
    """Numbers, timings and blank lines, in order."""
    lines = document.splitlines()
    out, expect_head = [], True
    for i, line in enumerate(lines):
        if not line.strip():
            out.append("")
            expect_head = True
        elif expect_head:
            out.append(line)
            if re.match(r"\d+:\d\d", line):
                expect_head = False
    return out


def test_subtitles_keep_numbers_and_timings_and_translate_a_sentence_once():
    seen = []
    out = srt_format.translate(SUBTITLES, lambda t: seen.extend(t) or shout(t))
    assert seen == ["We could go to the beach tomorrow.", "It will be sunny all day.", "Good night!"]
    assert _srt_skeleton(out) == _srt_skeleton(SUBTITLES)
    _, cues = srt_format.read(out)
    assert len(cues) == 3 and all(cue.lines and all(line.strip() for line in cue.lines) for cue in cues)
    assert cues[1].lines and len(cues[1].lines) == 2 and out.endswith("\n\n")


@st.composite
def subtitles(draw):
    cues = []
    for n in range(1, draw(st.integers(1, 6)) + 1):
        lines = [draw(phrase(2)).replace("<", "").replace(">", "") for _ in range(draw(st.integers(1, 3)))]
        cues.append(f"{n}\n00:00:{n:02d},000 --> 00:00:{n:02d},900\n" + "\n".join(lines) + "\n")
    return draw(st.sampled_from(["", "\ufeff"])) + "\n".join(cues)


@settings(max_examples=150, deadline=None)
@given(subtitles())
def test_generated_subtitles_keep_their_skeleton_and_words(document):
    same = srt_format.translate(document, lambda texts: texts)
    assert _srt_skeleton(same) == _srt_skeleton(document)
    words = lambda doc: [w for cue in srt_format.read(doc)[1] for line in cue.lines for w in line.split()]  # noqa: E731
    assert words(same) == words(document)
    out = srt_format.translate(document, shout)
    assert _srt_skeleton(out) == _srt_skeleton(document)
    assert all(line.strip() for cue in srt_format.read(out)[1] for line in cue.lines)


def test_not_subtitles_is_one_clear_error():
    with pytest.raises(DataError, match="not the start of an SRT cue"):
        srt_format.read("Hello there.\nNot a subtitle.\n")


def test_the_format_comes_from_the_extension():
    assert [format_for("auto", p) for p in ("a.html", "b.HTM", "c.srt", "d.txt", "e", "f.md")] == \
        ["html", "html", "srt", "text", "text", "markdown"]
    assert format_for("srt", "a.html") == "srt"


def test_cli_translates_documents(capsys, tmp_path, trained_checkpoint):
    page, subs = tmp_path / "page.html", tmp_path / "talk.srt"
    page.write_text(PAGE, encoding="utf-8")
    subs.write_text(SUBTITLES, encoding="utf-8")
    code, _, err = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", page, "-o", tmp_path / "page.fr.html",
                            "--beam", "2")
    assert code == 0 and "wrote html" in err
    assert skeleton((tmp_path / "page.fr.html").read_text(encoding="utf-8")).items == skeleton(PAGE).items
    code, out, _ = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", subs, "--beam", "2")
    assert code == 0 and _srt_skeleton(out) == _srt_skeleton(SUBTITLES)
    notes = tmp_path / "notes.md"
    notes.write_text(NOTES, encoding="utf-8")
    code, out, _ = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", notes, "--beam", "2")
    assert code == 0 and md_skeleton(out) == md_skeleton(NOTES)
    code, _, err = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", page, "--json")
    assert code == 2 and "--format html" in err and len(err.splitlines()) == 1


NOTES = """# Notes on `minitrans`

A para with **bold**, *emphasis* and `code x` and [a link](http://x.y/z "t"). See https://example.com/a.
Second line of the same paragraph.

> A quoted sentence.
> Another one.

1. First item.
2. Second item with ![an image](img.png "The title").
   - A nested item.

| Column A | Column B |
|---|:---:|
| The cat eats. | A dog. |

```python
print("The cat eats.")  # never translated
```

    indented code stays

<div class="raw">An HTML block stays.</div>

Setext title
============

***
"""


def md_skeleton(document: str) -> list:
    """Block structure, code and HTML blocks, link targets and image sources, in order."""
    from markdown_it import MarkdownIt

    out = []
    for token in MarkdownIt("commonmark").enable("table").parse(document):
        if token.type in ("fence", "code_block", "html_block"):
            out.append((token.type, token.content))
        elif token.type == "inline":
            out += [(child.type, child.attrs.get("href"), child.attrs.get("src"), child.content if child.type in
                     ("code_inline", "html_inline") else None)
                    for child in token.children or [] if child.type not in ("text", "softbreak")]
        else:
            out.append((token.type, token.markup, token.info))
    return out


def test_markdown_keeps_its_markup_and_identity_is_exact():
    from minitrans.formats import markdown as md_format

    assert md_format.translate(NOTES, lambda texts: texts) == NOTES
    out = md_format.translate(NOTES, shout)
    assert md_skeleton(out) == md_skeleton(NOTES)
    assert 'print("The cat eats.")  # never translated' in out and "    indented code stays" in out
    assert "`code x`" in out and "https://example.com/a" in out and "(http://x.y/z \"t\")" in out
    assert "«THE CAT EATS. ET PLUS»" in out and len(out.splitlines()) == len(NOTES.splitlines())


@st.composite
def markdown_documents(draw):
    words = st.sampled_from(["The", "cat", "eats.", "A", "dog", "runs!", "Dr.", "Smith", "3.5", "well...",
                             "`code`", "**bold**", "*it*", "[link](http://a.b/c)", "https://x.org/y"])
    line = st.lists(words, min_size=1, max_size=6).map(" ".join)
    blocks = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.integers(0, 5))
        text = draw(line)
        blocks.append({0: f"# {text}", 1: f"- {text}\n- {draw(line)}", 2: f"> {text}",
                       3: f"```\n{text}\n```", 4: f"| {text} | x |\n|---|---|\n| {draw(line)} | y |"}.get(kind, text))
    return "\n\n".join(blocks) + "\n"


@settings(max_examples=100, deadline=None)
@given(markdown_documents())
def test_generated_markdown_keeps_its_skeleton_and_identity_is_exact(document):
    from minitrans.formats import markdown as md_format

    assert md_format.translate(document, lambda texts: texts) == document
    assert md_skeleton(md_format.translate(document, shout)) == md_skeleton(document), repr(document)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>/!-&;#x=\"' \n\tabpPBr.?*_`[]()|>#:0123456789\r\u2028é")), max_size=200)
       | st.text(max_size=120))
def test_any_text_as_a_document_never_crashes(text):
    """Odd input is translated or refused in one line (DataError), never a traceback; the
    identity translation gives Markdown back exactly and HTML back as the same text (a bare
    ``<`` may come back as ``&lt;``)."""
    import html
    from minitrans.formats import markdown as md_format

    for module in (html_format, md_format, srt_format):
        try:
            same = module.translate(text, lambda texts: texts)
            module.translate(text, shout)
        except DataError:
            continue
        if module is md_format:
            assert same == text
        elif module is html_format:
            assert html.unescape(same) == html.unescape(text)
