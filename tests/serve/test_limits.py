"""Limits count what they are named after (issue #42, items 17 and 26): sentences after
splitting, on every route, and the message names what was counted."""

from __future__ import annotations

import pytest

from minitrans.serve.limits import LimitExceeded, check_pieces, count
from minitrans.serve.settings import ServerSettings

SETTINGS = ServerSettings(max_sentences=16, max_chars=120, max_queue=20)
SIXTY = " ".join(f"The cat number {i} eats." for i in range(60))


def test_one_text_of_sixty_sentences_counts_sixty():
    with pytest.raises(LimitExceeded, match=r"60 sentences after splitting \(text 0: 60\).*max_sentences") as err:
        count([SIXTY], SETTINGS, "en")
    assert not err.value.never_fits
    assert count(["The cat eats. The dog runs."] * 8, SETTINGS, "en") == 16


def test_an_empty_text_counts_as_one_and_split_false_counts_texts():
    assert count(["", " ", "One."], SETTINGS, "en") == 3
    assert count(["One. Two. Three."], SETTINGS, "en", split=False) == 1
    with pytest.raises(LimitExceeded, match="17 sentences"):
        count([""] * 17, SETTINGS, "en")


def test_a_long_sentence_is_named_by_text_and_sentence():
    long = "word " * 30  # 150 characters, one sentence
    with pytest.raises(LimitExceeded, match=r"text 1, sentence 1, has 149 characters; the limit is 120 characters "
                                            r"per sentence \(max_chars\)"):
        count(["Fine.", "Short one. " + long], SETTINGS, "en")
    with pytest.raises(LimitExceeded, match=r"text 0 \(split false: one sentence\) has 150 characters"):
        count([long], SETTINGS, "en", split=False)


def test_more_than_the_queue_holds_never_fits():
    settings = ServerSettings(max_sentences=64, max_chars=120, max_queue=20)
    with pytest.raises(LimitExceeded, match="more than the server ever queues") as err:
        count(["One. Two."] * 11, settings, "en")
    assert err.value.never_fits
    with pytest.raises(LimitExceeded, match="more than the server ever queues") as err:
        check_pieces(["A."] * 15, settings, before=10)
    assert err.value.never_fits and "its pages together" in str(err.value)


def test_the_request_as_a_whole_is_bounded():
    with pytest.raises(LimitExceeded, match=r"1,921 characters; the limit is 1,920 in all"):
        count(["x" * 1921], SETTINGS, "en")
