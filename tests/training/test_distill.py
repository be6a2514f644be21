"""The distillation pipeline at toy size (``minitrans distill``, :mod:`minitrans.training.distill`): teacher
translations, a resumable data stage, a student."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import make_datamodule, synthetic_pairs
from minitrans.checkpoint import load_for_inference
from minitrans.errors import DataError
from minitrans.errors import ConfigError
from minitrans.text.textio import read_lines

ROOT = Path(__file__).resolve().parents[2]


class distill:  # noqa: N801  (reads as the command it runs)
    """``minitrans distill ARGS``, in-process."""

    @staticmethod
    def main(args: list[str]) -> None:
        from minitrans.cli.parser import main

        main(["distill", *args])


@pytest.fixture(autouse=True)
def _toy_data_only(monkeypatch):
    monkeypatch.delenv("MINITRANS_DATA", raising=False)  # it would override --data-dir


@pytest.fixture
def monolingual(tmp_path):
    lines = [e for e, _ in synthetic_pairs(30, seed=123)]
    path = tmp_path / "captions.en"
    path.write_text("\n".join(lines[:20] + ["", "  ", lines[0]] + lines[20:]) + "\n", encoding="utf-8")
    return path, list(dict.fromkeys(lines))


def test_the_data_stage_builds_an_aligned_corpus(trained_checkpoint, data_root, monolingual, tmp_path):
    path, unique = monolingual
    out = tmp_path / "data"
    distill.main(["-m", str(trained_checkpoint), "--monolingual", str(path), "-o", str(out),
                  "--data-dir", str(data_root), "--chunk", "7", "--beam", "2"])
    assert read_lines(out / "synthetic.en") == unique  # blank lines and the duplicate dropped
    synthetic = read_lines(out / "synthetic.fr")
    assert len(synthetic) == len(unique) and not (out / "synthetic.fr.partial").exists()
    real_en = read_lines(data_root / "multi30k" / "train.en")
    assert read_lines(out / "train.en") == real_en + unique
    assert read_lines(out / "train.fr")[len(real_en):] == synthetic
    assert read_lines(out / "test.fr") == read_lines(data_root / "multi30k" / "test_2016_flickr.fr")
    exact = {e: f for e, f in synthetic_pairs(30, seed=123)}
    assert sum(exact[e] == f for e, f in zip(unique, synthetic)) >= 0.8 * len(unique)  # the teacher is good


def test_translation_resumes_after_the_last_complete_line(trained_checkpoint, data_root, monolingual, tmp_path):
    path, unique = monolingual
    out = tmp_path / "data"
    out.mkdir()
    (out / "synthetic.en").write_text("".join(u + "\n" for u in unique), encoding="utf-8")
    (out / "synthetic.fr.partial").write_bytes("".join(f"kept {i}\n" for i in range(9)).encode() + b"torn li")
    distill.main(["-m", str(trained_checkpoint), "--monolingual", str(path), "-o", str(out),
                  "--data-dir", str(data_root), "--chunk", "5", "--beam", "1"])
    synthetic = read_lines(out / "synthetic.fr")
    assert synthetic[:9] == [f"kept {i}" for i in range(9)]
    assert len(synthetic) == len(unique) and "torn li" not in synthetic[9]


def test_a_student_starts_from_its_teacher(trained_checkpoint, data_root, monolingual, tmp_path, prepared):
    """The recipe's student (configs/distill.yaml): the teacher's weights and SentencePiece model
    (model.init_from, data.tokenizer), trained on the distilled corpus. With a near-zero learning
    rate the student must still be the teacher: a fresh initialisation would be far from it."""
    path, _ = monolingual
    out = tmp_path / "data"
    distill.main(["-m", str(trained_checkpoint), "-m", str(trained_checkpoint), "--monolingual",
                  str(path), "-o", str(out), "--data-dir", str(data_root), "--beam", "2"])  # an ensemble teacher
    files = ", ".join(f"{s}: {out / s}" for s in ("train", "valid", "test"))
    cfg = tmp_path / "student.yaml"
    cfg.write_text(f"""
seed_everything: 1
trainer: {{accelerator: cpu, max_steps: 4, val_check_interval: 2, enable_progress_bar: false,
           enable_model_summary: false, default_root_dir: {tmp_path}/run}}
model:
  init_from: {trained_checkpoint}
  config: {{d_model: 64, n_heads: 4, n_encoder_layers: 2, n_decoder_layers: 2, d_ff: 128, max_len: 64,
            dropout: 0.1}}
  lr_schedule: cosine
  peak_lr: 1.0e-9
  warmup_steps: 1
  total_steps: 4
data: {{dataset: aligned, tokenizer: {trained_checkpoint}, files: {{{files}}}, cache_dir: {tmp_path}/cache,
       vocab_size: 320, max_tokens: 400, val_max_sentences: 8}}
checkpoint: {{dirpath: {tmp_path}/ckpt}}
""")
    env = {k: v for k, v in os.environ.items() if k != "MINITRANS_DATA"}
    result = subprocess.run([sys.executable, "-m", "minitrans", "train", "--config", str(cfg)], capture_output=True,
                            text=True, timeout=300, cwd=ROOT, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    student, _, meta = load_for_inference(tmp_path / "ckpt" / "best.ckpt")
    teacher, _, teacher_meta = load_for_inference(trained_checkpoint)
    assert meta["data"]["dataset"] == "aligned" and meta["model_config"]["dropout"] == 0.1
    assert meta["tokenizer_fingerprint"] == teacher_meta["tokenizer_fingerprint"]
    for (name, theirs), ours in zip(teacher.state_dict().items(), student.state_dict().values()):
        assert torch.allclose(theirs, ours, atol=1e-5), name
    assert "Initialised the model from" in result.stderr
    # Resuming takes the weights from the checkpoint: init_from is not even read.
    resumed = subprocess.run([sys.executable, "-m", "minitrans", "train", "--config", str(cfg), "--trainer.max_steps",
                              "6", "--model.init_from", str(tmp_path / "gone.ckpt"), "--resume",
                              str(tmp_path / "ckpt" / "last.ckpt")], capture_output=True, text=True, timeout=300,
                             cwd=ROOT, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Initialised the model from" not in resumed.stderr
    assert torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True)["global_step"] == 6


def test_init_from_refuses_another_shape_or_tokenizer(trained_checkpoint, prepared, tmp_path):
    from minitrans.text.tokenizer import Tokenizer
    from minitrans.training.module import TranslationModule

    teacher_config = load_for_inference(trained_checkpoint)[0].config
    wider = TranslationModule(dataclasses.replace(teacher_config, d_ff=256), init_from=str(trained_checkpoint))
    with pytest.raises(ConfigError, match=r"another model shape \(d_ff=128; this run: d_ff=256\)"):
        wider._load_initial_weights(str(trained_checkpoint))
    same = TranslationModule(teacher_config, init_from=str(trained_checkpoint))
    same.tokenizer = Tokenizer.train([e for e, _ in synthetic_pairs(300, seed=5)], vocab_size=320)
    with pytest.raises(ConfigError, match="another SentencePiece model.*set data.tokenizer"):
        same._load_initial_weights(str(trained_checkpoint))


def test_data_tokenizer_replaces_training_one(trained_checkpoint, prepared, data_root, tmp_path):
    teacher_tokenizer = load_for_inference(trained_checkpoint)[1]
    from_ckpt = make_datamodule(data_root, tmp_path / "a", vocab_size=320, tokenizer=str(trained_checkpoint))
    from_ckpt.setup("fit")
    assert from_ckpt.tokenizer.model_proto == teacher_tokenizer.model_proto
    spm_file = tmp_path / "spm.model"
    teacher_tokenizer.save(spm_file)
    from_file = make_datamodule(data_root, tmp_path / "a", vocab_size=320, tokenizer=str(spm_file))
    assert from_file.cache_path == from_ckpt.cache_path  # keyed by the pieces, not the path
    assert from_file.cache_path.name != make_datamodule(data_root, tmp_path / "a").cache_path.name
    with pytest.raises(DataError, match="has 320 pieces but data.vocab_size is 500: set data.vocab_size to 320"):
        make_datamodule(data_root, tmp_path / "b", vocab_size=500, tokenizer=str(spm_file)).prepare_data()
    with pytest.raises(DataError, match="no such file"):
        make_datamodule(data_root, tmp_path / "b", tokenizer=str(tmp_path / "missing.model")).prepare_data()
    (tmp_path / "junk.model").write_bytes(b"not a model")
    with pytest.raises(DataError, match="is not a SentencePiece model"):
        make_datamodule(data_root, tmp_path / "b", tokenizer=str(tmp_path / "junk.model")).prepare_data()


def test_other_inputs_are_refused_over_existing_translations(trained_checkpoint, data_root, monolingual, tmp_path):
    path, unique = monolingual
    out = tmp_path / "data"
    out.mkdir()
    (out / "synthetic.en").write_text("Something else.\n", encoding="utf-8")
    (out / "synthetic.fr").write_text("Autre chose.\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        distill.main(["-m", str(trained_checkpoint), "--monolingual", str(path), "-o", str(out),
                      "--data-dir", str(data_root)])
    assert exit_info.value.code == 2 and read_lines(out / "synthetic.fr") == ["Autre chose."]


def test_a_french_to_english_teacher_is_refused(trained_fr_en, data_root, monolingual, tmp_path, capsys):
    path, _ = monolingual
    with pytest.raises(SystemExit) as exit_info:
        distill.main(["-m", str(trained_fr_en), "--monolingual", str(path), "-o", str(tmp_path / "data"),
                      "--data-dir", str(data_root)])
    assert exit_info.value.code != 0 and "must be an English→French model" in capsys.readouterr().err
