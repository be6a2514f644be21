"""A corpus of real documents, gathered from what this machine has (issue #42): nothing is
committed, everything is read or generated at test time.

* **HTML**: this project's own docs site (built by mkdocs-material, a site generator's real
  output), ``pydoc``'s HTML pages of installed modules, and every ``.html`` page found in the
  Python environment, ``/usr/share/doc`` (Debian's package documentation), rustup's docs
  (rustdoc, the Rust book) and node's package folders.
* **Markdown**: this project's README and docs, the long descriptions (READMEs) of the installed
  Python packages, and every ``.md`` file found in the same places.
* **SRT**: the subtitle files found there (chardet's test files are real ones), and files
  written the ways subtitle editors write them (CRLF or LF, a BOM or none, numbering gaps, no
  blank line before a cue, italics and position tags, ``.`` or ``,`` in timings, a missing
  final blank line).

:func:`gather` samples at most ``limit`` documents per format (``None``: all), in a fixed order;
:func:`problem` says what is wrong with one (``None``: nothing): a traceback, markup lost, an
identity translation that is not byte for byte, or a text run left
untranslated without a report.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEARCHED = [Path(sys.prefix), Path("/usr/share/doc"), Path.home() / ".rustup" / "toolchains", Path("/usr/lib/node_modules"),
            Path("/usr/lib/google-cloud-sdk")]
EXTENSIONS = {"html": (".html", ".htm"), "markdown": (".md", ".markdown"), "srt": (".srt",)}
MAX_BYTES = 400_000  # larger files are rare and slow; they are skipped, and counted as skipped
PYDOC_MODULES = ["json", "html.parser", "argparse", "pathlib", "collections", "dataclasses", "logging", "re",
                 "textwrap", "unicodedata", "zipfile", "sacrebleu", "sentencepiece", "markdown_it", "pysbd",
                 "minitrans.text.segment", "minitrans.formats.html", "minitrans.translate", "minitrans.text.textio"]


def _files(fmt: str) -> list[Path]:
    found = []
    for root in SEARCHED:
        if not root.is_dir():
            continue
        for folder, _, names in os.walk(root):
            found += [Path(folder) / n for n in names if n.lower().endswith(EXTENSIONS[fmt])]
    return sorted(set(found))


def _read(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) > MAX_BYTES:
        return None
    for encoding in ("utf-8", "utf-16"):  # UTF-16 subtitles carry their BOM
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if encoding == "utf-16" and not data[:2] in (b"\xff\xfe", b"\xfe\xff"):
            return None
        return text.lstrip("\ufeff") if encoding == "utf-16" else text
    return None


def _pydoc_pages() -> list[tuple[str, str]]:
    import importlib
    import pydoc

    pages = []
    for name in PYDOC_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        doc = pydoc.HTMLDoc()
        pages.append((f"pydoc:{name}", doc.page(pydoc.describe(module), doc.document(module, name))))
    return pages


def _package_readmes() -> list[tuple[str, str]]:
    readmes = {}
    for dist in importlib.metadata.distributions():
        kind = dist.metadata.get("Description-Content-Type") or ""
        body = dist.metadata.get_payload() if hasattr(dist.metadata, "get_payload") else None
        if "markdown" in kind and body and body.strip():
            readmes[f"README of {dist.metadata['Name']}"] = body
    return sorted(readmes.items())


SPEECH = ["We could go to the", "beach tomorrow.", "It will be sunny all day.", "- Are you coming?", "- Yes!",
          "<i>Somewhere, a dog barks.</i>", "{\\an8}Paris, 1942", "Dr. Smith said it's 3.5 km away...",
          "♪ La la la ♪", "I don't know.", "WHAT?", "Five, four, three..."]


def _editor_subtitles() -> list[tuple[str, str]]:
    """SRT files as editors write them (Subtitle Edit, Aegisub, hand edits), seeded."""
    rng = random.Random(42)
    files = []
    for n in range(40):
        newline = rng.choice(["\n", "\r\n"])
        comma = rng.choice([",", "."])
        cues, number, at = [], rng.choice([0, 1]), 1000
        for _ in range(rng.randint(1, 12)):
            number += rng.choice([1, 1, 1, 2])
            end = at + rng.randint(800, 4000)
            stamp = [f"{t // 3600000:02d}:{t // 60000 % 60:02d}:{t // 1000 % 60:02d}{comma}{t % 1000:03d}" for t in (at, end)]
            position = rng.choice(["", "", " X1:100 X2:600 Y1:50 Y2:90"])
            lines = [rng.choice(SPEECH) for _ in range(rng.randint(1, 3))]
            gap = rng.choice([newline, newline, newline * 2, ""])  # "" : no blank line before the next cue
            cues.append(newline.join([str(number), f"{stamp[0]} --> {stamp[1]}{position}", *lines]) + newline + gap)
            at = end + rng.randint(0, 2000)
        text = "".join(cues)
        if rng.random() < 0.3:
            text = text.rstrip("\r\n")  # no final line end
        files.append((f"editor-like-{n}.srt", rng.choice(["", "\ufeff"]) + text))
    return files


def gather(site: Path | None, limit: int | None) -> dict[str, list[tuple[str, str]]]:
    """``{format: [(label, document)]}``: at most ``limit`` per format, sampled in a fixed order
    (the project's own documents always in), and ``skipped``: how many files were too large or
    not UTF-8."""
    corpus: dict[str, list[tuple[str, str]]] = {"html": [], "markdown": [], "srt": []}
    skipped = 0
    own = {"html": [(f"site:{p.relative_to(site)}", p.read_text(encoding="utf-8")) for p in sorted(site.rglob("*.html"))]
           if site else [],
           "markdown": [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))
                        for p in [ROOT / "README.md", ROOT / "data" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]],
           "srt": _editor_subtitles()}
    extra = {"html": _pydoc_pages(), "markdown": _package_readmes(), "srt": []}
    for fmt in corpus:
        paths = _files(fmt)
        rng = random.Random(0)
        rng.shuffle(paths)
        found = []
        for path in paths:
            if limit is not None and len(found) + len(extra[fmt]) >= limit:
                break
            text = _read(path)
            if text is None:
                skipped += 1
                continue
            found.append((str(path), text))
        corpus[fmt] = own[fmt] + extra[fmt] + found
    corpus["skipped"] = skipped  # type: ignore[assignment]
    return corpus


class _Reports(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def problem(fmt: str, document: str) -> str | None:
    """What is wrong with translating ``document`` (None: nothing)."""
    from minitrans.text.cleaning import has_words
    from minitrans.errors import DataError
    from minitrans.formats import translate_document
    from test_formats import _srt_skeleton, md_skeleton, shout, skeleton

    reports = _Reports()
    logger = logging.getLogger("minitrans.formats")
    logger.addHandler(reports)
    try:
        try:
            same = translate_document(fmt, document, lambda texts: texts)
            loud = translate_document(fmt, document, shout)
        except DataError as err:
            if fmt == "srt" and "not the start of an SRT cue" in str(err):
                return None  # a one-line refusal of what is not subtitles
            return f"refused: {err}"
        except Exception as err:  # noqa: BLE001 - the point: no traceback on any real document
            return f"{type(err).__name__}: {err}"
    finally:
        logger.removeHandler(reports)
    body, out = document.lstrip("\ufeff"), loud.lstrip("\ufeff")
    if fmt == "srt":
        if _srt_skeleton(same) != _srt_skeleton(document) or _srt_skeleton(loud) != _srt_skeleton(document):
            return "numbers, timings or blank lines changed"
        if same != document:
            at = next((i for i, (a, b) in enumerate(zip(same, document)) if a != b), min(len(same), len(document)))
            return f"identity is not byte for byte at character {at}: {document[max(0, at - 30):at + 30]!r}"
        return None
    if same != document:
        at = next((i for i, (a, b) in enumerate(zip(same, document)) if a != b), min(len(same), len(document)))
        return f"identity is not byte for byte at character {at}: {document[max(0, at - 30):at + 30]!r}"
    if fmt == "html":
        before, after = skeleton(body), skeleton(out)
        if before.items != after.items:
            return "markup changed"
        left = [t for t in after.texts if t != t.upper() and has_words(t)]  # "ⓘ" is no text to translate
        if left and not reports.messages:
            return f"text left untranslated, unreported: {left[0][:60]!r}"
        return None
    from minitrans.formats.markdown import front_matter

    head = front_matter(body)
    upper = out
    if not out.startswith(head) or md_skeleton(upper[len(head):]) != md_skeleton(body[len(head):]):
        return "block structure, code or link targets changed"
    from markdown_it import MarkdownIt

    # URLs stand for themselves (the translator keeps them): what is left must be translated.
    texts, autolink = [], False
    for token in MarkdownIt("commonmark").enable("table").parse(upper[len(head):]):
        for child in token.children or [] if token.type == "inline" else []:
            if child.type in ("link_open", "link_close"):
                autolink = child.type == "link_open" and child.markup == "autolink"  # its text is its target
            elif child.type == "text" and not autolink:
                texts.append(re.sub(r"\S*://\S*|\S+@\S+\.\w+", "", child.content))
    left = [t for t in texts if t != t.upper() and has_words(t)]
    if left and not reports.messages:
        return f"text left untranslated, unreported: {left[0][:60]!r}"
    return None
