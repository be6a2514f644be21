"""Texts, not lines (issue #28): sentence splitting and putting the text back together.

* ``segment.split`` loses nothing: the gaps and sentences spell the input exactly (Hypothesis);
  sentences are stripped, non-empty and hold no line break; it never hands pysbd more than
  ``WINDOW`` characters (its time grows with the square of its input).
* Known cases: abbreviations, numbers, ellipses, quotes, French, lines without full stops.
* A translated paragraph is its sentences' translations in their places: the same as
  translating them one by one, with the text's spacing and line breaks; N texts in, N out, on
  both engines' path (the Translator), the CLI and the API.
"""

from __future__ import annotations

import json
from unittest import mock

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from conftest import run_main, synthetic_pairs
from minitrans.text import segment
from minitrans.text.segment import split

BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab. !?…\"'»«“”()\n\r\t \u00a0\u2028AZ3.,;:-éÉ")), max_size=300)
       | st.text(max_size=200))
def test_split_loses_nothing(text):
    seg = split(text)
    assert seg.join(seg.sentences) == text
    assert len(seg.gaps) == len(seg.sentences) + 1
    for sentence in seg.sentences:
        assert sentence and sentence == sentence.strip() and not any(c in sentence for c in "\n\r\u2028\u2029")
    assert all(not g.strip() or not any(ch.isalnum() for ch in g) for g in seg.gaps), seg  # no word left out


def test_windows_bound_what_pysbd_is_given(monkeypatch):
    seen = []
    real = segment._segmenter("en")

    class Recording:
        def segment(self, text):
            seen.append(len(text))
            return real.segment(text)

    monkeypatch.setattr(segment, "_segmenter", lambda lang: Recording())
    for text in ("a. " * 2000, "A" * 3000, "The cat sat. " * 300, "word " * 1000):
        seg = split(text)
        assert seg.join(seg.sentences) == text
    assert seen and max(seen) <= segment.WINDOW


_WORD = st.text(alphabet=st.sampled_from(list("abzAZé3'’,;:-")), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None, derandomize=True)  # the same examples in every run (CI)
@given(st.lists(_WORD, min_size=1, max_size=12).map(" ".join), st.text(alphabet=st.sampled_from(list(".!?…")), max_size=3),
       st.sampled_from(["", " ", "  ", "\t", "\u00a0"]), st.sampled_from(["en", "fr"]))
def test_lines_kept_whole_are_what_pysbd_returns(words, ends, pad, lang):
    """A line minitrans keeps whole without asking pysbd (one sentence ending in its marks)
    gives pysbd's own spans."""
    line = pad + words + ends + pad
    assume(segment._one_sentence(line.strip()))
    fast = segment._sentence_spans(line, lang)
    with mock.patch.object(segment, "_one_sentence", lambda body: False):
        assert fast == segment._sentence_spans(line, lang)


@pytest.mark.parametrize("line, count", [
    ('"I know what I want on his tombstone" Hagman said in 1988.', 2),  # pysbd ends sentences at quotes
    ("(wind surfing au lieu de hang gliding) Une personne fait de la planche à voile.", 2),  # ... and brackets
    ("A man runs. A dog sleeps", 2), ("Wait... what", 1), ("It costs 3.5 euros", 1),  # an end mark inside
    ("Stop.!!", 1),  # dots before other marks: pysbd keeps "Stop." and leaves "!!" between sentences
])
def test_lines_pysbd_may_cut_go_to_pysbd(line, count):
    assert not segment._one_sentence(line)
    calls = []
    real = segment._segmenter("en")

    class Recording:
        def segment(self, text):
            calls.append(text)
            return real.segment(text)

    with mock.patch.object(segment, "_segmenter", lambda lang: Recording()):
        split(line)
    assert calls == [line]
    assert len(split(line).sentences) == count


@pytest.mark.parametrize("text, sentences", [
    ("Dr. Smith arrived at 3.5 p.m. and left! Really?! Yes.",
     ["Dr. Smith arrived at 3.5 p.m. and left!", "Really?!", "Yes."]),
    ("He paid $4.50 for it... Then he went home.", ["He paid $4.50 for it...", "Then he went home."]),
    ('"It\'s water." he said. Any ride would be "fun."', ['"It\'s water." he said.', 'Any ride would be "fun."']),
    ("It took an hour to get the first person off the ride.\"", ["It took an hour to get the first person off the ride.\""]),
    ("Title without a stop\nA man runs. A dog sleeps.", ["Title without a stop", "A man runs.", "A dog sleeps."]),
    ("no punctuation at all", ["no punctuation at all"]),
    ("", []), ("   \n\n  ", []),
])
def test_known_english_cases(text, sentences):
    assert split(text).sentences == sentences


def test_french_rules():
    assert split("M. Dupont est arrivé à 15 h. Il a dit bonjour. Puis il est parti.", "fr").sentences == \
        ["M. Dupont est arrivé à 15 h.", "Il a dit bonjour.", "Puis il est parti."]


# -- the Translator, the CLI and the API ---------------------------------------------------------
@pytest.fixture(scope="module")
def translator(trained_checkpoint):
    from minitrans import Translator

    return Translator.from_checkpoint(trained_checkpoint)


SENTENCES = [e for e, _ in synthetic_pairs(9, seed=31)]


def test_a_paragraph_is_its_sentences_translated_in_place(translator):
    one_by_one = translator.translate(SENTENCES, beam_size=3, split=False)
    text = f"{SENTENCES[0]}  {SENTENCES[1]}\t{SENTENCES[2]}\n\n{SENTENCES[3]}"
    inputs = [text, "", SENTENCES[4], "  ", " ".join(SENTENCES[5:])]
    out = translator.translate_detailed(inputs, beam_size=3, nbest=2)
    assert len(out) == len(inputs)
    assert out[0].text == f"{one_by_one[0]}  {one_by_one[1]}\t{one_by_one[2]}\n\n{one_by_one[3]}"
    assert [s.text for s in out[0].sentences] == one_by_one[:4] and [s.source for s in out[0].sentences] == SENTENCES[:4]
    assert out[1].text == "" and out[3].text == "" and not out[1].sentences
    assert out[2].text == one_by_one[4] and len(out[2].sentences) == 1
    assert out[4].text == " ".join(one_by_one[5:])
    assert out[0].score == pytest.approx(sum(s.score for s in out[0].sentences) / 4)
    assert out[0].nbest[0][0] == out[0].text and len(out[0].nbest) == 2
    # split=False is the one-sentence path, unchanged
    assert [t.text for t in translator.translate_detailed(SENTENCES, beam_size=3, split=False)] == one_by_one
    assert all(not t.sentences for t in translator.translate_detailed(SENTENCES[:2], beam_size=3, split=False))


def test_attention_is_per_sentence(translator):
    one, two = translator.translate_detailed([SENTENCES[0], f"{SENTENCES[0]} {SENTENCES[1]}"], beam_size=2,
                                             attention=True)
    assert one.attention is not None and one.attention.equal(one.sentences[0].attention)
    assert two.attention is None and all(s.attention is not None for s in two.sentences)
    assert two.sentences[0].attention.equal(one.attention)


def test_cli_keeps_lines_and_reports_sentences(capsys, tmp_path, trained_checkpoint):
    src = tmp_path / "in.txt"
    src.write_text(f"{SENTENCES[0]} {SENTENCES[1]}\n\n{SENTENCES[2]}\u2028{SENTENCES[3]}\n", encoding="utf-8")
    code, out, _ = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", src, "--beam", "2")
    assert code == 0 and len(out.splitlines()) == 3 and out.count("\n") == 3 and out.splitlines()[1] == ""
    code, out, _ = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", src, "--beam", "2", "--json")
    records = [json.loads(line) for line in out.splitlines()]
    assert [len(r["sentences"]) for r in records] == [2, 0, 2]
    code, whole, _ = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", src, "--beam", "2", "--no-split",
                              "--json")
    assert [r["sentences"] for r in map(json.loads, whole.splitlines())] == [[], [], []]


def test_the_api_translates_texts(trained_checkpoint):
    from fastapi.testclient import TestClient

    from minitrans.serve.app import create_app

    from minitrans import Translator

    with TestClient(create_app(Translator.from_checkpoint(trained_checkpoint))) as client:
        text = f"{SENTENCES[0]} {SENTENCES[1]}\n{SENTENCES[2]}"
        body = client.post("/v1/translate", json={"q": [text, SENTENCES[0]], "beam": 2, "attention": True}).json()
        first, single = body["translations"]
        assert len(first["sentences"]) == 3 and first["translation"].count("\n") == 1
        assert "attention" not in first and all(s["attention"]["layers"] for s in first["sentences"])
        assert single["attention"]["layers"] and len(single["sentences"]) == 1
        whole = client.post("/v1/translate", json={"q": text, "beam": 2, "split": False}).json()["translations"][0]
        assert "sentences" not in whole
