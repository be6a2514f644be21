"""A user's own pairs: TMX (UTF-8 and UTF-16, language variants, inline codes, hostile XML),
CSV/TSV with and without a header, line-aligned files; and the real TICO-19 memory when the
machine has it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minitrans.data.memory import language_of, read_pairs, read_table, read_tmx
from minitrans.errors import DataError

# Read when the file is collected: the session's corpus fixtures unset MINITRANS_DATA later.
SHARED = Path(os.environ.get("MINITRANS_DATA", "../shared/data"))

# As CAT tools write them: a header with srclang, properties and notes, language variants in
# either case, inline codes around words, a unit in one language only.
TMX = """<?xml version="1.0" encoding="{encoding}"?>
<!-- exported by a translation tool -->
<tmx version="1.4">
<header creationtool="SomeCAT" creationtoolversion="3.1" segtype="sentence" o-tmf="sdl" adminlang="en-US"
        srclang="en-US" datatype="html"><prop type="x-project">clinic</prop></header>
<body>
<tu tuid="1" creationdate="20240101T120000Z">
  <prop type="x-context">menu</prop><note>checked by the reviewer</note>
  <tuv xml:lang="en-US"><seg>Click <bpt i="1" x="1">&lt;b&gt;</bpt>Save<ept i="1">&lt;/b&gt;</ept> now.</seg></tuv>
  <tuv xml:lang="FR-fr"><seg>Cliquez sur <bpt i="1">&lt;b&gt;</bpt>Enregistrer<ept i="1">&lt;/b&gt;</ept> maintenant.</seg></tuv>
</tu>
<tu tuid="2">
  <tuv xml:lang="fr_CA"><seg>Bonjour <ph x="1">{{0}}</ph>, votre rendez-vous est <hi type="b">demain</hi>.</seg></tuv>
  <tuv xml:lang="EN-GB"><seg>Hello <ph x="1">{{0}}</ph>, your appointment is <hi type="b">tomorrow</hi>.</seg></tuv>
</tu>
<tu tuid="3"><tuv xml:lang="en"><seg>Only English here.</seg></tuv><tuv xml:lang="de"><seg>Nur Deutsch.</seg></tuv></tu>
<tu tuid="4">
  <tuv lang="en"><seg>An older   TMX
  wrote lang.</seg></tuv>
  <tuv lang="fr"><seg>Un TMX plus ancien écrivait lang.</seg></tuv>
</tu>
</body>
</tmx>
"""
WANT = [("Click Save now.", "Cliquez sur Enregistrer maintenant."),
        ("Hello , your appointment is tomorrow.", "Bonjour , votre rendez-vous est demain."),
        ("An older TMX wrote lang.", "Un TMX plus ancien écrivait lang.")]


@pytest.mark.parametrize("encoding", ["UTF-8", "UTF-16"])
def test_a_tmx_gives_the_text_a_reader_sees_in_both_encodings(tmp_path, encoding):
    path = tmp_path / "memory.tmx"
    text = TMX.format(encoding=encoding)
    path.write_bytes(text.encode("utf-8") if encoding == "UTF-8" else text.encode("utf-16"))  # utf-16: with a BOM
    if encoding == "UTF-16":
        assert path.read_bytes()[:2] in (b"\xff\xfe", b"\xfe\xff")
    assert read_pairs(path) == WANT


def test_language_codes_are_matched_by_their_primary_subtag():
    assert [language_of(c) for c in ("en", "en-US", "EN-GB", "fr-FR", "fr_CA", "French", "de", "", None, "eng")] == \
        ["en", "en", "en", "fr", "fr", "fr", None, None, None, None]


@pytest.mark.hostile
@pytest.mark.parametrize("xml, words", [
    ('<?xml version="1.0"?><!DOCTYPE tmx [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
     '<tmx><body><tu><tuv xml:lang="en"><seg>&b;</seg></tuv><tuv xml:lang="fr"><seg>x</seg></tuv></tu></body></tmx>',
     "EntitiesForbidden"),
    ('<?xml version="1.0"?><!DOCTYPE tmx [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
     '<tmx><body><tu><tuv xml:lang="en"><seg>&x;</seg></tuv><tuv xml:lang="fr"><seg>x</seg></tuv></tu></body></tmx>',
     "EntitiesForbidden"),
])
def test_entities_are_refused_never_expanded(tmp_path, xml, words):
    path = tmp_path / "bomb.tmx"
    path.write_text(xml, encoding="utf-8")
    with pytest.raises(DataError, match=f"bomb.tmx: {words}: the file declares a DTD, an entity"):
        read_tmx(path)


def test_a_broken_or_foreign_tmx_is_one_line_naming_what_was_found(tmp_path):
    broken = tmp_path / "broken.tmx"
    broken.write_text('<?xml version="1.0"?>\n<tmx><body>\n<tu><tuv xml:lang="en"><seg>x</tuv></tu></body></tmx>')
    with pytest.raises(DataError, match=r"broken.tmx, line 3, column \d+: not well-formed XML \(mismatched tag\)"):
        read_tmx(broken)
    foreign = tmp_path / "de-es.tmx"
    foreign.write_text('<tmx><body><tu><tuv xml:lang="de-DE"><seg>Hallo</seg></tuv><tuv xml:lang="es"><seg>Hola'
                       '</seg></tuv></tu></body></tmx>')
    with pytest.raises(DataError, match=r"none of its 1 translation units .* the languages found are de-DE \(1\), "
                                        r"es \(1\)"):
        read_tmx(foreign)
    not_tmx = tmp_path / "page.tmx"
    not_tmx.write_text("<html><body><p>Hello</p></body></html>")
    with pytest.raises(DataError, match="no <tu> translation unit found"):
        read_tmx(not_tmx)


def test_csv_columns_are_found_by_language_or_by_source_and_target(tmp_path):
    by_language = tmp_path / "pairs.csv"
    by_language.write_text('id,French,en-US,comment\n1,"Bonjour, le monde.","Hello, world.",x\n'
                           '2,"Deux lignes\ndans une cellule.","Two lines\nin one cell.",\n\n', encoding="utf-8")
    assert read_pairs(by_language) == [("Hello, world.", "Bonjour, le monde."),
                                       ("Two lines\nin one cell.", "Deux lignes\ndans une cellule.")]
    by_role = tmp_path / "glossary.tsv"
    by_role.write_text("source\ttarget\nBonjour.\tHello.\n", encoding="utf-8")
    assert read_table(by_role, source_lang="en") == [("Bonjour.", "Hello.")]  # source read as English
    assert read_table(by_role, source_lang="fr") == [("Hello.", "Bonjour.")]  # an fr-en model's direction
    headerless = tmp_path / "plain.tsv"
    headerless.write_text("\ufeffGood night.\tBonne nuit.\tCC-BY 2.0 (France) Attribution\n")
    assert read_pairs(headerless) == [("Good night.", "Bonne nuit.")]


def test_a_short_row_names_its_number(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("en\tfr\nHello.\tBonjour.\nno tab here\n")
    with pytest.raises(DataError, match=r"pairs.tsv, row 3: 1 column\(s\), expected at least 2 separated by a tab"):
        read_pairs(path)


def test_line_aligned_files_come_in_pairs(tmp_path):
    (tmp_path / "corpus.en").write_text("One.\nTwo.\n")
    (tmp_path / "corpus.fr").write_text("Un.\nDeux.\n")
    assert read_pairs(tmp_path / "corpus.fr") == [("One.", "Un."), ("Two.", "Deux.")]
    (tmp_path / "short.en").write_text("One.\nTwo.\n")
    (tmp_path / "short.fr").write_text("Un.\n")
    with pytest.raises(DataError, match="short.en has 2 lines but .*short.fr has 1"):
        read_pairs(tmp_path / "short.en")
    (tmp_path / "alone.en").write_text("One.\n")
    with pytest.raises(DataError, match="alone.fr is missing"):
        read_pairs(tmp_path / "alone.en")


def test_empty_or_missing_files_are_one_line(tmp_path):
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DataError, match="empty.csv is empty"):
        read_pairs(tmp_path / "empty.csv")
    with pytest.raises(DataError, match="nowhere.tmx not found"):
        read_pairs(tmp_path / "nowhere.tmx")
    (tmp_path / "header-only.csv").write_text("en,fr\n")
    with pytest.raises(DataError, match="header-only.csv holds no sentence pairs"):
        read_pairs(tmp_path / "header-only.csv")


def test_the_real_tico19_memory_and_term_list():
    """TICO-19's memory as its tool exported it (3,071 units) and a term list as published."""
    root = SHARED / "tico19"
    if not (root / "all.en-fr.tmx").is_file():
        pytest.skip("TICO-19 is not on this machine (set MINITRANS_DATA)")
    pairs = read_pairs(root / "all.en-fr.tmx")
    assert len(pairs) == 3071 and all(en.strip() and fr.strip() for en, fr in pairs)
    assert pairs[0] == ("about how long have these symptoms been going on?",
                        "depuis combien ressentez-vous ces symptômes ?")
    terms = read_pairs(root / "terms.google.en-fr.csv")  # sourceString / targetString columns
    assert ("contagious", "contagieux") in terms and len(terms) > 300


def test_a_doctype_naming_the_tmx_dtd_is_read_as_omegat_writes_it(tmp_path):
    """OmegaT (TMX 1.1, ``lang``, upper-case codes) names its DTD; nothing is fetched or expanded."""
    path = tmp_path / "project_save.tmx"
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE tmx SYSTEM "tmx11.dtd">\n<tmx version="1.1">'
                    '<header creationtool="OmegaT" o-tmf="OmegaT TMX" adminlang="EN-US" datatype="plaintext" '
                    'creationtoolversion="6.0.0" segtype="sentence" srclang="EN-US"/><body><tu><tuv lang="EN-US">'
                    '<seg>Hi.</seg></tuv><tuv lang="FR-FR"><seg>Salut.</seg></tuv></tu></body></tmx>')
    assert read_tmx(path) == [("Hi.", "Salut.")]
