"""``minitrans export --format hf`` against the real ``transformers``: the folder loads with the
Auto classes, computes minitrans's logits and generates minitrans's greedy output."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from conftest import run_main, synthetic_pairs, train_tiny  # noqa: E402
from minitrans.checkpoint import load_checkpoint, load_for_inference, save_atomic  # noqa: E402
from minitrans.model.config import ModelConfig  # noqa: E402
from minitrans.errors import UsageError  # noqa: E402
from minitrans.export.hf import export, permutation  # noqa: E402
from minitrans.model.layers import sinusoidal_table  # noqa: E402
from minitrans.model.transformer import Transformer  # noqa: E402
from minitrans.translate import Translator  # noqa: E402
from minitrans.text.vocab import BOS_ID, EOS_ID  # noqa: E402

SENTENCES = [en for en, _ in synthetic_pairs(16, seed=5)] + ["The cat eats an apple in the garden today."]
TOLERANCE = 1e-4  # largest |difference| of a logit, float32


def load(folder):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    return AutoModelForSeq2SeqLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def minitrans_greedy(translator: Translator, sentences: list[str]) -> list[list[int]]:
    ids = [s + [EOS_ID] for s in translator.tokenizer.encode(sentences)]
    hyps = translator.engine.search(ids, 1, 0.0, 1, translator.max_len_a, translator.max_len_b)
    return [h[0].tokens for h in hyps]


def check_logits(checkpoint, folder) -> float:
    """The largest logit difference, teacher-forced on the test sentences' greedy outputs."""
    model, tok, _ = load_for_inference(checkpoint)
    hf, hf_tok = load(folder)
    src = [s + [EOS_ID] for s in tok.encode(SENTENCES)]
    tgt = [[BOS_ID] + s for s in tok.encode(SENTENCES)]
    worst = 0.0
    with torch.no_grad():
        for s, t in zip(src, tgt):
            ours = model(torch.tensor([s]), torch.tensor([t]))  # (1, T, V)
            theirs = hf(input_ids=torch.tensor([s]), decoder_input_ids=torch.tensor([t])).logits
            worst = max(worst, (ours - theirs).abs().max().item())
    return worst


@pytest.fixture(scope="module")
def pre_norm(trained_checkpoint, tmp_path_factory):
    return export(trained_checkpoint, tmp_path_factory.mktemp("hf") / "pre-norm")


@pytest.fixture(scope="module")
def post_norm_checkpoint(prepared, tmp_path_factory):
    return train_tiny(prepared, tmp_path_factory.mktemp("ckpt-post-norm"), norm_first=False)


def test_the_residual_permutation_turns_interleaved_sinusoids_into_halves():
    ours = sinusoidal_table(50, 16)
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    theirs = MarianSinusoidalPositionalEmbedding(50, 16)
    if hasattr(theirs, "create_weight"):
        reference = theirs.create_weight()
    else:  # transformers < 5 fills the table at construction
        reference = theirs.weight
    assert torch.allclose(ours[:, permutation(16)], reference.float(), atol=1e-6)


def test_a_pre_norm_model_goes_out_as_pegasus_with_minitrans_logits(trained_checkpoint, pre_norm):
    config = json.loads((pre_norm / "config.json").read_text())
    assert config["model_type"] == "pegasus"
    hf, tok = load(pre_norm)
    assert type(hf).__name__ == "PegasusForConditionalGeneration" and type(tok).__name__ == "MarianTokenizer"
    assert check_logits(trained_checkpoint, pre_norm) < TOLERANCE


def test_generate_gives_minitrans_greedy_tokens_and_text(trained_checkpoint, pre_norm):
    native = Translator.from_checkpoint(trained_checkpoint, precision="fp32")
    hf, tok = load(pre_norm)
    batch = tok(SENTENCES, return_tensors="pt", padding=True)
    # The tokenizer is minitrans's: the same ids, </s> appended.
    assert [ids[: int(m.sum())] for ids, m in zip(batch["input_ids"].tolist(), batch["attention_mask"])] == \
        [s + [EOS_ID] for s in native.tokenizer.encode(SENTENCES)]
    with torch.no_grad():
        out = hf.generate(**batch)  # generation_config.json: greedy, minitrans's start token
    got = [[t for t in row[1:] if t not in (0, EOS_ID)] for row in out.tolist()]
    assert got == minitrans_greedy(native, SENTENCES)
    assert tok.batch_decode(out, skip_special_tokens=True) == native.translate(SENTENCES, beam_size=1, split=False)


def test_a_post_norm_model_goes_out_as_marian(post_norm_checkpoint, tmp_path):
    folder = export(post_norm_checkpoint, tmp_path / "post-norm")
    hf, tok = load(folder)
    assert type(hf).__name__ == "MarianMTModel"
    assert check_logits(post_norm_checkpoint, folder) < TOLERANCE
    native = Translator.from_checkpoint(post_norm_checkpoint, precision="fp32")
    with torch.no_grad():
        out = hf.generate(**tok(SENTENCES, return_tensors="pt", padding=True))
    assert [[t for t in row[1:] if t not in (0, EOS_ID)] for row in out.tolist()] == minitrans_greedy(native, SENTENCES)


def _variant(trained_checkpoint, tmp_path, **changes):
    checkpoint = load_checkpoint(trained_checkpoint)
    config = dataclasses.replace(ModelConfig.from_dict(checkpoint["minitrans"]["model_config"]), **changes)
    torch.manual_seed(1)
    model = Transformer(config)
    meta = {**checkpoint["minitrans"], "model_config": config.to_dict()}
    meta.pop("tokenizer_binding", None)
    path = tmp_path / "variant.ckpt"
    save_atomic({"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}, "minitrans": meta}, path)
    return path


def test_the_position_table_is_read_from_the_file(trained_checkpoint, tmp_path):
    """transformers reads embed_positions from model.safetensors (it does not recompute it): the
    table written is the one used, so learned positions can go out too."""
    from safetensors.torch import load_file, save_file

    folder = export(trained_checkpoint, tmp_path / "hf")
    stored = load_file(str(folder / "model.safetensors"))
    stored["model.encoder.embed_positions.weight"] = torch.zeros_like(stored["model.encoder.embed_positions.weight"])
    save_file(stored, str(folder / "model.safetensors"), metadata={"format": "pt"})
    hf, _ = load(folder)
    assert not hf.model.encoder.embed_positions.weight.any()


def test_learned_positions_go_out_as_their_tables(trained_checkpoint, tmp_path):
    path = _variant(trained_checkpoint, tmp_path, positional="learned")
    folder = export(path, tmp_path / "learned")
    assert check_logits(path, folder) < TOLERANCE


@pytest.mark.parametrize("changes, says", [(dict(share_embeddings=False), "share_embeddings"),
                                           (dict(layer_norm_eps=1e-6), "layer_norm_eps")])
def test_what_neither_class_can_hold_is_refused(trained_checkpoint, tmp_path, changes, says):
    path = _variant(trained_checkpoint, tmp_path, **changes)
    with pytest.raises(UsageError, match=says):
        export(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_export_never_replaces_other_files(trained_checkpoint, pre_norm, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(UsageError, match="never other files"):
        export(trained_checkpoint, tmp_path / "mine", force=True)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    with pytest.raises(UsageError, match="--force"):
        export(trained_checkpoint, pre_norm)


def test_cli_export_hf(trained_checkpoint, tmp_path, capsys):
    code, out, err = run_main(capsys, "export", "-m", trained_checkpoint, "--format", "hf", "-o", tmp_path / "hf")
    assert code == 0, err
    assert "from_pretrained" in out and (tmp_path / "hf" / "model.safetensors").is_file()
    code, _, err = run_main(capsys, "export", "-m", trained_checkpoint, "--format", "hf", "-o", tmp_path / "q",
                            "--quantization", "int8")
    assert code == 2 and "float32" in err
