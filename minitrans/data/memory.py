"""A user's own sentence pairs, read from the files they have: a translation memory (TMX), a
spreadsheet (CSV/TSV with a header), a plain ``English<TAB>French`` file, or line-aligned files.

Every reader returns ``(english, french)`` pairs, raw (cleaning comes later, as for every corpus),
whatever order the file holds the languages in; :func:`read_pairs` picks the reader by the
file's name. Readers never guess silently: a file they cannot read is one :class:`DataError`
naming the file, the line or element, and the fix.

* **TMX** (1.4, and the 1.1-1.3 files tools still write) is XML from outside, so it is parsed by
  `defusedxml <https://github.com/tiran/defusedxml>`_ over the standard library's expat: a DTD,
  an entity declaration or an external reference is refused (no billion laughs, no file read
  through an entity), and what is left is the standard parser. UTF-8 and UTF-16 with a BOM (as
  CAT tools write them) are both read; languages are matched by their primary subtag (``en``,
  ``en-US``, ``EN-GB``, ``fr-FR``, ``fr_CA``). A segment's inline markup (``<bpt>``, ``<ept>``,
  ``<ph>``, ``<it>``, ``<ut>``: the *native codes* of the document it came from, such as
  ``<b>`` or ``{1}``) is dropped, and ``<hi>`` keeps its text: the pair holds the text a reader
  sees. ``<prop>`` and ``<note>`` are ignored.
* **CSV/TSV with a header**: the columns are found by language code (``en``, ``en-US``,
  ``fr_CA``, ``English``, ``French``) or by ``source``/``target`` (read in the model's
  direction); quoting and newlines inside quotes as :mod:`csv` reads them. The delimiter is the
  extension's (``.csv``: comma, ``.tsv``: tab); other names are sniffed.
* **Headerless TSV**: ``English<TAB>French[<TAB>anything]``, as ``dataset: tsv`` reads it.
* **Line-aligned files**: ``NAME.en`` with ``NAME.fr`` beside it (either may be given).
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections import Counter
from pathlib import Path

from minitrans.errors import DataError
from minitrans.text.textio import read_lines

#: The two languages of a pair, in the order every reader returns them.
LANGUAGES = ("en", "fr")
#: Column names that mean a language, beside the codes themselves.
LANGUAGE_NAMES = {"english": "en", "anglais": "en", "french": "fr", "français": "fr", "francais": "fr"}
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
#: Inline elements holding the source document's codes, never words (TMX 1.4, section 3.7).
_CODES = {"bpt", "ept", "ph", "it", "ut"}


def language_of(code: str | None) -> str | None:
    """``en-US``, ``EN-GB``, ``fr_CA``, ``French`` -> ``en`` or ``fr``; anything else -> None."""
    if not code:
        return None
    code = code.strip().lower()
    if code in LANGUAGE_NAMES:
        return LANGUAGE_NAMES[code]
    primary = re.split(r"[-_]", code, maxsplit=1)[0]
    return primary if primary in LANGUAGES else None


def read_pairs(path: str | os.PathLike, source_lang: str = "en") -> list[tuple[str, str]]:
    """The ``(english, french)`` pairs of a user's file, by its name: ``.tmx``; ``.csv``/``.tsv``/
    ``.txt`` (a header is looked for; without one, English then French); ``NAME.en``/``NAME.fr``
    (line-aligned with its sibling). ``source_lang`` says which language a ``source`` column holds."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} not found (or not a file). Check the path.")
    suffix = path.suffix.lower()
    if suffix == ".tmx":
        pairs = read_tmx(path)
    elif suffix in (".en", ".fr"):
        pairs = read_aligned_pair(path)
    else:
        pairs = read_table(path, source_lang)
    if not pairs:
        raise DataError(f"{path} holds no sentence pairs. Give a file with English and French sentences.")
    return pairs


# -- TMX ------------------------------------------------------------------------------------------


def read_tmx(path: str | os.PathLike) -> list[tuple[str, str]]:
    """The English–French pairs of a TMX file: one per ``<tu>`` that has a segment in each
    language (the first, when it has several)."""
    from xml.etree.ElementTree import ParseError

    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import iterparse

    path = Path(path)
    pairs, found, units = [], Counter(), 0
    try:
        with open(path, "rb") as f:
            for _, element in iterparse(f, events=("end",)):
                if _local(element.tag) != "tu":
                    continue
                units += 1
                texts: dict[str, str] = {}
                for tuv in element:
                    if _local(tuv.tag) != "tuv":
                        continue
                    code = tuv.get(_XML_LANG) or tuv.get("lang")  # TMX 1.1 wrote `lang`
                    found[code or "?"] += 1
                    lang, seg = language_of(code), next((s for s in tuv if _local(s.tag) == "seg"), None)
                    if lang and seg is not None and lang not in texts:
                        texts[lang] = seen_text(seg)
                if "en" in texts and "fr" in texts:
                    pairs.append((texts["en"], texts["fr"]))
                element.clear()  # a TMX of a million units stays small in memory
    except ParseError as err:
        line, column = getattr(err, "position", (0, 0))
        raise DataError(f"{path}, line {line}, column {column}: not well-formed XML ({_reason(err)}). "
                        "Export the translation memory again from your tool.") from None
    except DefusedXmlException as err:
        raise DataError(f"{path}: {type(err).__name__}: the file declares a DTD, an entity or an external "
                        "reference, which minitrans refuses (they can expand without bound or read other "
                        "files). Export the translation memory again without them.") from None
    if units and not pairs:
        languages = ", ".join(f"{code} ({n})" for code, n in found.most_common(6)) or "none"
        raise DataError(f"{path}: none of its {units} translation units has both an English and a French "
                        f"segment; the languages found are {languages}. Export it with English and French.")
    if not units:
        raise DataError(f"{path}: no <tu> translation unit found; is it a TMX file?")
    return pairs


def seen_text(seg) -> str:
    """A ``<seg>``'s text as a reader sees it: the inline codes (``<bpt>``, ``<ept>``, ``<ph>``,
    ``<it>``, ``<ut>``) dropped, ``<hi>`` (highlighted text) kept, whitespace runs made one space."""
    parts = [seg.text or ""]
    for child in seg:
        if _local(child.tag) not in _CODES:
            parts.append(seen_text(child))
        parts.append(child.tail or "")
    return " ".join("".join(parts).split())


def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _reason(err) -> str:
    return str(err).split(":")[0]


# -- tables ---------------------------------------------------------------------------------------


def read_table(path: str | os.PathLike, source_lang: str = "en") -> list[tuple[str, str]]:
    """The pairs of a CSV/TSV file: columns by a header when it has one (language codes or
    ``source``/``target``), else English then French."""
    path = Path(path)
    text = "\n".join(read_lines(path, "Sentence-pair file"))  # UTF-8 checked, BOM dropped, as every reader
    if not text.strip():
        raise DataError(f"{path} is empty. Give a file with English and French sentences.")
    delimiter = _delimiter(path, text)
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    header = [c.strip().lower() for c in rows[0]]
    columns = _columns(header, source_lang)
    if columns is None:  # no header: English, then French (today's TSV)
        en_col, fr_col, start = 0, 1, 0
    else:
        en_col, fr_col = columns
        start = 1
    pairs = []
    for number, row in enumerate(rows[start:], start + 1):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) <= max(en_col, fr_col):
            what = repr(delimiter) if delimiter != "\t" else "a tab"
            raise DataError(f"{path}, row {number}: {len(row)} column(s), expected at least {max(en_col, fr_col) + 1} "
                            f"separated by {what}: {delimiter.join(row)[:80]!r}. Fix or delete that row.")
        pairs.append((row[en_col], row[fr_col]))
    return pairs


def _delimiter(path: Path, text: str) -> str:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return ","
    if suffix in (".tsv", ".tab", ".txt"):
        return "\t"
    first = text.split("\n", 1)[0]
    return "\t" if "\t" in first else ";" if first.count(";") > first.count(",") else ","


def _columns(header: list[str], source_lang: str) -> tuple[int, int] | None:
    """(English column, French column) from a header row, or None when it is no header."""
    langs = {i: language_of(name) for i, name in enumerate(header)}
    en = [i for i, lang in langs.items() if lang == "en"]
    fr = [i for i, lang in langs.items() if lang == "fr"]
    if en and fr:
        return en[0], fr[0]
    named = {name: i for i, name in enumerate(header)}
    pairs = [("source", "target"), ("src", "tgt"), ("sourcestring", "targetstring"), ("source_text", "target_text")]
    for src, tgt in pairs:
        if src in named and tgt in named:
            return (named[src], named[tgt]) if source_lang == "en" else (named[tgt], named[src])
    return None


# -- line-aligned files ---------------------------------------------------------------------------


def read_aligned_pair(path: str | os.PathLike) -> list[tuple[str, str]]:
    """``NAME.en`` and ``NAME.fr``, line by line (either name given; the other must be beside it)."""
    path = Path(path)
    en, fr = path.with_suffix(".en"), path.with_suffix(".fr")
    for p in (en, fr):
        if not p.is_file():
            raise DataError(f"{path}: line-aligned files come in pairs, and {p} is missing. Put it beside {path}, "
                            "or give a TMX, CSV or TSV file.")
    en_lines, fr_lines = read_lines(en, "English file"), read_lines(fr, "French file")
    if len(en_lines) != len(fr_lines):
        raise DataError(f"{en} has {len(en_lines)} lines but {fr} has {len(fr_lines)}: line-aligned files must "
                        "have one line per sentence, in the same order.")
    return [(e, f) for e, f in zip(en_lines, fr_lines) if e.strip() or f.strip()]


__all__ = ["LANGUAGES", "language_of", "read_pairs", "read_tmx", "read_table", "read_aligned_pair", "seen_text"]
