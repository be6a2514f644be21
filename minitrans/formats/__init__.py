"""Document formats: translate a whole file's text and keep everything else as it was.

A format is one module with a ``translate(document, translate_texts, lang) -> str`` function and an
entry in :data:`FORMATS`; ``translate_texts`` maps a list of texts (each may hold several
sentences) to their translations, in one batched call (:meth:`Translator.translate`). Plain
text needs no module: ``minitrans translate`` maps its lines one to one. :func:`format_for`
picks the format from ``--format`` or the input file's extension. Texts without a letter or a
digit are never sent to ``translate_texts``: they stay as written.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Callable

from minitrans.text.cleaning import has_words
from minitrans.errors import UsageError
from minitrans.text.textio import BOM

TranslateTexts = Callable[[list[str]], list[str]]

#: Format name -> the module that translates it (None: line by line, the default path).
FORMATS: dict[str, str | None] = {"text": None, "html": "minitrans.formats.html", "markdown": "minitrans.formats.markdown",
                                  "srt": "minitrans.formats.srt"}
#: File extensions (lower case) and their formats; any other is plain text.
EXTENSIONS = {".html": "html", ".htm": "html", ".xhtml": "html", ".md": "markdown", ".markdown": "markdown",
              ".srt": "srt"}


def extension_list() -> str:
    """The extensions each format is read from, for help texts: ``.html/.htm/... (html), ...``."""
    by_format: dict[str, list[str]] = {}
    for extension, name in EXTENSIONS.items():
        by_format.setdefault(name, []).append(extension)
    return ", ".join(f"{'/'.join(extensions)} ({name})" for name, extensions in by_format.items())


def format_for(name: str | None, path: str | os.PathLike | None) -> str:
    """The format to use: ``name`` when given (not ``auto``), else by ``path``'s extension."""
    if name and name != "auto":
        if name not in FORMATS:
            raise UsageError(f"--format {name}: not a format; choose one of auto, {', '.join(FORMATS)}.")
        return name
    return EXTENSIONS.get(Path(path).suffix.lower(), "text") if path else "text"


def translate_document(fmt: str, document: str, translate_texts: TranslateTexts, lang: str = "en") -> str:
    """``document`` in format ``fmt`` with its text translated and its markup unchanged; its
    sentences are found with the rules of ``lang``, the document's language. A byte-order mark
    is read as the line readers read it (dropped: it is no text, and an HTML parser or
    markdown-it would take it for some) and written back."""
    module = FORMATS[fmt]
    if module is None:
        raise ValueError("plain text is translated line by line, not as a document")
    bom = BOM if document.startswith(BOM) else ""
    return bom + importlib.import_module(module).translate(document[len(bom):], _worded(translate_texts), lang)


def _worded(translate_texts: TranslateTexts) -> TranslateTexts:
    """``translate_texts`` for the texts with a letter or a digit; the others (``&zwnj;``
    padding, a lone U+2060, punctuation) come back as they are, so their markup and entities
    stay as written."""

    def translate(texts: list[str]) -> list[str]:
        out = list(texts)
        todo = [i for i, t in enumerate(texts) if has_words(t)]
        for i, translation in zip(todo, translate_texts([texts[i] for i in todo]) if todo else []):
            out[i] = translation
        return out

    return translate
