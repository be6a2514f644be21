"""cleaning at translation time: format characters never reach the model, and a text without a
letter or digit is not decoded into an invented sentence (issue #42, item 7)."""

from __future__ import annotations

import unicodedata

import pytest
from fastapi.testclient import TestClient

from minitrans.text.cleaning import has_words, without_format_characters
from minitrans.serve.app import create_app
from minitrans.translate import Translator

INVISIBLE = ["\u200b", "\ufeff", "\u200c\u200d", "\u2060", "\u200b \u2060", "\u200c" * 5, "\u00ad"]


def test_format_characters_are_every_cf_and_nothing_else():
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    kept = without_format_characters(every)
    assert not any(unicodedata.category(c) == "Cf" for c in kept)
    assert len(every) - len(kept) == sum(unicodedata.category(c) == "Cf" for c in every)
    assert without_format_characters("Bon\u200bjour\u2060 !") == "Bonjour !"


@pytest.mark.parametrize("text, words", [("", False), ("…", False), ("?!", False), ("🙂", False), ("—", False),
                                         ("a", True), ("7", True), ("日本", True), ("Ça", True)])
def test_has_words_means_a_letter_or_a_digit(text, words):
    assert has_words(text) is words


@pytest.fixture(scope="module")
def translator(trained_checkpoint):
    return Translator.load(trained_checkpoint)


def test_invisible_text_translates_to_nothing(translator):
    results = translator.translate_detailed(INVISIBLE + ["🙂", "?!"])
    assert [r.text for r in results] == [""] * len(INVISIBLE) + ["🙂", "?!"]
    assert all(r.confidence is None and r.low_confidence is None for r in results)


def test_format_characters_inside_a_sentence_do_not_change_it(translator):
    plain, padded = translator.translate(["The cat eats.", "The\u200b cat\u2060 eats.\ufeff"])
    assert padded == plain


def test_invisible_text_on_every_route(translator):
    with TestClient(create_app(translator)) as client:
        v1 = client.post("/v1/translate", json={"q": INVISIBLE}).json()["translations"]
        assert [t["translation"] for t in v1] == [""] * len(INVISIBLE)
        lt = client.post("/translate", json={"q": INVISIBLE, "source": "en", "target": "fr"}).json()
        assert lt["translatedText"] == [""] * len(INVISIBLE)
        html = client.post("/translate", json={"q": "<p>&zwnj;&#8203;</p><p>\u2060</p>", "source": "en",
                                               "target": "fr", "format": "html"}).json()
        assert html["translatedText"] == "<p>&zwnj;&#8203;</p><p>\u2060</p>"
