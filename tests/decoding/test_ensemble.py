"""Ensemble decoding: several checkpoints searched as one model."""

from __future__ import annotations

import json

import pytest
import torch

from conftest import run_main, synthetic_pairs
from minitrans import Translator
from minitrans.checkpoint import load_checkpoint, save_atomic
from minitrans.errors import CheckpointError
from minitrans.text.tokenizer import Tokenizer

SENTENCES = [e for e, _ in synthetic_pairs(25, seed=31)] + ["", "The cat."]


@pytest.fixture(scope="module")
def perturbed(trained_checkpoint, tmp_path_factory):
    """The trained model with noise on its weights: a second, different member."""
    checkpoint = load_checkpoint(trained_checkpoint)
    generator = torch.Generator().manual_seed(3)
    checkpoint["state_dict"] = {k: v + 0.02 * torch.randn(v.shape, generator=generator) if v.is_floating_point() else v
                                for k, v in checkpoint["state_dict"].items()}
    checkpoint["minitrans"].pop("tokenizer_binding", None)
    path = tmp_path_factory.mktemp("perturbed") / "perturbed.ckpt"
    save_atomic(checkpoint, path)
    return path


def test_two_identical_members_decode_like_one(trained_checkpoint):
    one = Translator.from_checkpoint(trained_checkpoint)
    two = Translator.from_checkpoints([trained_checkpoint, trained_checkpoint])
    for beam in (1, 4):
        ours, theirs = one.translate_detailed(SENTENCES, beam_size=beam), two.translate_detailed(SENTENCES, beam_size=beam)
        assert [r.text for r in theirs] == [r.text for r in ours]
        assert [r.score for r in theirs] == pytest.approx([r.score for r in ours], abs=1e-4)


def test_ensemble_cache_equals_recomputation(trained_checkpoint, perturbed):
    ensemble = Translator.from_checkpoints([trained_checkpoint, perturbed], precision="fp32")  # exact to 1e-4
    cached = ensemble.translate_detailed(SENTENCES, beam_size=3, nbest=2)
    recomputed = ensemble.translate_detailed(SENTENCES, beam_size=3, nbest=2, use_cache=False)
    assert [[t for t, _ in r.nbest] for r in cached] == [[t for t, _ in r.nbest] for r in recomputed]
    assert [s for r in cached for _, s in r.nbest] == pytest.approx([s for r in recomputed for _, s in r.nbest],
                                                                    abs=1e-4)


def test_the_ensemble_averages_probabilities(trained_checkpoint, perturbed):
    """Its next-token distribution is the mean of the members' distributions."""
    a, b = (Translator.from_checkpoint(p, precision="fp32") for p in (trained_checkpoint, perturbed))
    ensemble = Translator.from_checkpoints([trained_checkpoint, perturbed], precision="fp32")
    src = torch.tensor([a.tokenizer.encode(["The cat sees a book."])[0] + [3]])
    tgt = torch.tensor([[2] + a.tokenizer.encode(["Le chat voit un livre."])[0]])
    probs = [torch.softmax(t.model.decode(t.model.encode(src), None, tgt), -1) for t in (a, b)]
    mixed = ensemble.model.decode(ensemble.model.encode(src), None, tgt).exp()
    torch.testing.assert_close(mixed, (probs[0] + probs[1]) / 2, rtol=1e-4, atol=1e-6)


def test_members_must_share_the_tokenizer(trained_checkpoint, tmp_path):
    checkpoint = load_checkpoint(trained_checkpoint)
    other = Tokenizer.train([f"{e} {f}" for e, f in synthetic_pairs(300, seed=9)] + ["zzz qqq"], vocab_size=320)
    checkpoint["minitrans"].update(tokenizer=other.to_tensor(), tokenizer_fingerprint=other.fingerprint())
    checkpoint["minitrans"].pop("tokenizer_binding", None)
    save_atomic(checkpoint, tmp_path / "other.ckpt")
    with pytest.raises(CheckpointError, match="different SentencePiece models"):
        Translator.from_checkpoints([trained_checkpoint, tmp_path / "other.ckpt"])


def test_cli_ensemble(trained_checkpoint, perturbed, tmp_path, capsys):
    code, single, _ = run_main(capsys, "translate", "-m", trained_checkpoint, SENTENCES[0], SENTENCES[1])
    assert code == 0
    assert run_main(capsys, "translate", "-m", trained_checkpoint, "-m", trained_checkpoint, "--ensemble",
               SENTENCES[0], SENTENCES[1])[1] == single
    code, _, err = run_main(capsys, "translate", "-m", trained_checkpoint, "-m", perturbed, SENTENCES[0])
    assert code == 2 and "--ensemble" in err
    code, out, _ = run_main(capsys, "evaluate", "-m", trained_checkpoint, perturbed, "--ensemble", "--dataset", "multi30k",
                       "--beam", 2, "-o", tmp_path)
    report = json.loads(out)
    assert code == 0 and report["sentences"] == 30 and " + " in report["checkpoint"]
