"""Corpus mixtures: sampling weights, leak-free splits across corpora, per-corpus validation
and evaluation."""

import json
from collections import Counter
from pathlib import Path

import datasets
import lightning as L
import pytest

from conftest import make_mixture
from minitrans import ModelConfig
from minitrans.cli import parser as cli
from minitrans.data.batching import TokenBatchSampler
from minitrans.errors import DataError
from minitrans.data.datamodule import TranslationDataModule
from minitrans.data.heldout import eval_sets
from minitrans.data.mixture import CorpusSpec, check_specs, epoch_rows, probabilities
from minitrans.training.module import TranslationModule


def test_probabilities_follow_weights_or_temperature():
    assert probabilities([100, 900], [1.0, 3.0]) == pytest.approx([0.25, 0.75])
    assert probabilities([100, 900], [None, None], temperature=1.0) == pytest.approx([0.1, 0.9])
    # p_i ∝ n_i^(1/T): T = 2 gives sqrt sizes 10 : 30
    assert probabilities([100, 900], [None, None], temperature=2.0) == pytest.approx([0.25, 0.75])
    assert probabilities([100, 900], [None, None], temperature=1e9) == pytest.approx([0.5, 0.5])
    with pytest.raises(DataError, match="temperature"):
        probabilities([1, 2], [None, None], temperature=0)


@pytest.mark.parametrize("probs", [[0.5, 0.5], [0.2, 0.8]])
def test_epoch_sample_respects_weights_and_uses_every_row(probs):
    sizes = [300, 2000]
    rows = epoch_rows(sizes, probs, seed=3)
    small = sum(1 for r in rows if r < sizes[0])
    assert small / len(rows) == pytest.approx(probs[0], abs=0.03)
    assert set(rows) == set(range(sum(sizes)))  # every component is used whole at least once
    assert epoch_rows(sizes, probs, seed=3) == rows
    assert epoch_rows(sizes, probs, seed=4) != rows
    # The interleaving datasets draws, read the plain way (row by row): the same sample.
    parts = [datasets.Dataset.from_dict({"row": list(range(0, 300))}),
             datasets.Dataset.from_dict({"row": list(range(300, 2300))})]
    reference = datasets.interleave_datasets(parts, probabilities=probs, seed=3, stopping_strategy="all_exhausted")
    assert rows == list(reference["row"])


def test_specs_are_checked():
    with pytest.raises(DataError, match="unique"):
        check_specs([CorpusSpec("a", "tatoeba"), CorpusSpec("a", "multi30k")])
    with pytest.raises(DataError, match="every corpus or to none"):
        check_specs([CorpusSpec("a", "tatoeba", weight=1.0), CorpusSpec("b", "multi30k")])
    with pytest.raises(DataError, match="weight"):
        check_specs([{"name": "a", "dataset": "tatoeba", "weight": 0.0}])
    with pytest.raises(DataError, match="letters"):
        check_specs([CorpusSpec("a/b", "tatoeba")])
    with pytest.raises(DataError, match="mixture"):
        TranslationDataModule(dataset="multi30k", corpora=[CorpusSpec("a", "tatoeba")])
    with pytest.raises(DataError, match="val_select"):
        TranslationDataModule(dataset="mixture", corpora=[CorpusSpec("a", "tatoeba")], val_select="b")


@pytest.fixture(scope="module")
def mixture(tmp_path_factory):
    return make_mixture(tmp_path_factory.mktemp("corpora"), tmp_path_factory.mktemp("cache"))


def test_no_sentence_of_any_evaluation_split_reaches_training(mixture):
    train = mixture.splits["train"]
    train_en, train_fr = set(train["en"]), set(train["fr"])
    for key, split in mixture.splits.items():
        if key.endswith("train"):
            continue
        assert not train_en & set(split["en"]), key
        assert not train_fr & {fr for refs in split["refs"] for fr in refs}, key
    assert "sharing a sentence with an evaluation split" in mixture.report["cleaning"]


def test_training_batches_follow_the_weights(mixture):
    sizes = mixture.mixture_sizes()
    sampler = mixture.train_sampler()
    served = Counter(row < sizes[0] for batch in sampler for row in batch)
    assert served[True] / sum(served.values()) == pytest.approx(0.5, abs=0.05)
    assert len(mixture.splits["train"]) == sum(sizes)
    assert isinstance(sampler, TokenBatchSampler) and sampler.epoch_rows is not None


def test_one_validation_loader_per_corpus(mixture):
    loaders = mixture.val_dataloader()
    assert mixture.eval_names == ["everyday", "captions"] and len(loaders) == 2
    assert len(loaders[0].dataset) == 20 and len(loaders[1].dataset) == 20


@pytest.fixture(scope="module")
def mixture_run(mixture, tmp_path_factory):
    """Three training steps on the mixture, one validation pass; (metrics, checkpoint path)."""
    L.seed_everything(0, verbose=False)
    cfg = ModelConfig(vocab_size=320, d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=1, d_ff=64,
                      dropout=0.0, max_len=64)
    module = TranslationModule(cfg, warmup_steps=5)
    trainer = L.Trainer(max_steps=3, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, use_distributed_sampler=False,
                        limit_val_batches=2, num_sanity_val_steps=0, val_check_interval=3)
    trainer.fit(module, mixture)
    path = tmp_path_factory.mktemp("mix") / "mix.ckpt"
    trainer.save_checkpoint(path)
    return {k: float(v) for k, v in trainer.callback_metrics.items()}, path


def test_per_corpus_validation_is_logged_and_selects_on_the_mean(mixture_run):
    metrics, _ = mixture_run
    for name in ("everyday", "captions"):
        assert f"val_bleu/{name}" in metrics and f"val_loss/{name}" in metrics
    assert metrics["val_loss/everyday"] != metrics["val_loss/captions"]
    assert metrics["val_bleu"] == pytest.approx((metrics["val_bleu/everyday"] + metrics["val_bleu/captions"]) / 2)
    assert metrics["val_loss"] == pytest.approx((metrics["val_loss/everyday"] + metrics["val_loss/captions"]) / 2)


def test_evaluate_scores_every_component_of_a_mixture_checkpoint(mixture, mixture_run, capsys, tmp_path):
    from minitrans.checkpoint import load_checkpoint

    _, path = mixture_run
    data = load_checkpoint(path)["minitrans"]["data"]
    assert [c["name"] for c in data["corpora"]] == ["everyday", "captions"]
    assert [s["name"] for s in eval_sets(data, None)] == ["everyday", "captions"]
    assert eval_sets(data, "multi30k")[0]["name"] == "captions"  # by dataset too
    cli.main(["evaluate", "-m", str(path), "--beam", "1", "-o", str(tmp_path)])
    rows = capsys.readouterr().out.splitlines()
    assert rows[1].split()[1] == "everyday/test" and rows[2].split()[1] == "captions/test"
    # The test split rebuilt for evaluation is the one training held out (same seed and sizes).
    report = json.loads(next(tmp_path.glob("mix-*.everyday.test.beam1.json")).read_text())
    assert report["sentences"] == len(mixture.splits["everyday/test"])


def test_learning_curve_script_plots_each_corpus(tmp_path):
    import subprocess
    import sys

    csv = tmp_path / "metrics.csv"
    csv.write_text("epoch,step,train_loss,val_bleu,val_bleu/a,val_bleu/b,wall_minutes\n"
                   "0,10,3.0,,,,\n0,49,,10.0,12.0,8.0,1.5\n0,99,,20.0,24.0,16.0,3.1\n")
    script = Path(__file__).resolve().parents[2] / "scripts" / "plot_curves.py"
    out = subprocess.run([sys.executable, str(script), str(csv), "-o", str(tmp_path / "c.png")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    bad = tmp_path / "bad.csv"
    bad.write_text("step,train_loss\n1,2.0\n")
    out = subprocess.run([sys.executable, str(script), str(bad), "-o", str(tmp_path / "d.png")],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "no row with val_bleu" in out.stderr and not (tmp_path / "d.png").exists()
