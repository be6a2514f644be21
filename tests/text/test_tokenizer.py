import pytest
import torch

from minitrans.text.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer, TokenizerError


@pytest.fixture(scope="module")
def tokenizer():
    from conftest import synthetic_pairs

    pairs = synthetic_pairs(400)
    return Tokenizer.train([e for e, _ in pairs] + [f for _, f in pairs], vocab_size=320)


@pytest.mark.parametrize("text", [
    "Élodie a dit « c’est l’été » à 10 h 30.",
    "I don't speak French. Je n'parle pas.",
    "Les 42 élèves 🙂🎉 sont là — ok?",
    "Ĳsselmeer, Ærø, 漢字, Ελληνικά, עברית, ñandú",
    "ALL CAPS SENTENCE WITH ÀÉÎÕÜ",
])
def test_exact_round_trip(tokenizer, text):
    ids = tokenizer.encode([text])[0]
    assert UNK_ID not in ids
    assert tokenizer.decode([ids])[0] == text


def test_special_ids_and_decode_skips_them(tokenizer):
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2, 3)
    ids = tokenizer.encode(["The cat."])[0]
    assert tokenizer.decode([[BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]]) == ["The cat."]
    assert tokenizer.vocab_size == 320


def test_fingerprint_and_tensor_round_trip(tokenizer, tmp_path):
    again = Tokenizer.from_tensor(tokenizer.to_tensor())
    assert again.fingerprint() == tokenizer.fingerprint()
    assert tokenizer.to_tensor().dtype == torch.uint8
    tokenizer.save(tmp_path / "spm.model")
    assert Tokenizer.load(tmp_path / "spm.model").fingerprint()["sha256"] == tokenizer.fingerprint()["sha256"]


def test_bad_sizes_fail_with_advice():
    with pytest.raises(TokenizerError, match="256 byte-fallback pieces"):
        Tokenizer.train(["a b c"] * 10, vocab_size=100)
    with pytest.raises(TokenizerError, match="empty"):
        Tokenizer.train([], vocab_size=300)
