"""Document formats: translate a whole file's text and keep everything else as it was.

A format is one module with a ``translate(document, translate_texts, lang) -> str`` function and an
entry in :data:`FORMATS`; ``translate_texts`` maps a list of texts (each may hold several
sentences) to their translations, in one batched call (:meth:`Translator.translate`). Plain
text needs no module: ``minitrans translate`` maps its lines one to one. :func:`format_for`
picks the format from ``--format`` or the input file's extension.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Callable

from minitrans.errors import UsageError

TranslateTexts = Callable[[list[str]], list[str]]

#: Format name -> the module that translates it (None: line by line, the default path).
FORMATS: dict[str, str | None] = {"text": None, "html": "minitrans.formats.html", "markdown": "minitrans.formats.markdown",
                                  "srt": "minitrans.formats.srt"}
#: File extensions (lower case) and their formats; any other is plain text.
EXTENSIONS = {".html": "html", ".htm": "html", ".xhtml": "html", ".md": "markdown", ".markdown": "markdown",
              ".srt": "srt"}


def format_for(name: str | None, path: str | os.PathLike | None) -> str:
    """The format to use: ``name`` when given (not ``auto``), else by ``path``'s extension."""
    if name and name != "auto":
        if name not in FORMATS:
            raise UsageError(f"--format {name}: not a format; choose one of auto, {', '.join(FORMATS)}.")
        return name
    return EXTENSIONS.get(Path(path).suffix.lower(), "text") if path else "text"


def translate_document(fmt: str, document: str, translate_texts: TranslateTexts, lang: str = "en") -> str:
    """``document`` in format ``fmt`` with its text translated and its markup unchanged; its
    sentences are found with the rules of ``lang``, the document's language."""
    module = FORMATS[fmt]
    if module is None:
        raise ValueError("plain text is translated line by line, not as a document")
    return importlib.import_module(module).translate(document, translate_texts, lang)
