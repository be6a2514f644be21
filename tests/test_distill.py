"""The distillation pipeline at toy size: teacher translations, a resumable data stage, a student."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import synthetic_pairs
from minitrans.checkpoint import load_for_inference
from minitrans.textio import read_lines

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("distill", ROOT / "scripts" / "distill.py")
distill = importlib.util.module_from_spec(spec)
spec.loader.exec_module(distill)


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
    distill.main(["--teacher", str(trained_checkpoint), "--monolingual", str(path), "--out", str(out),
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
    distill.main(["--teacher", str(trained_checkpoint), "--monolingual", str(path), "--out", str(out),
                  "--data-dir", str(data_root), "--chunk", "5", "--beam", "1"])
    synthetic = read_lines(out / "synthetic.fr")
    assert synthetic[:9] == [f"kept {i}" for i in range(9)]
    assert len(synthetic) == len(unique) and "torn li" not in synthetic[9]


def test_a_student_trains_on_the_distilled_corpus(trained_checkpoint, data_root, monolingual, tmp_path, prepared):
    path, _ = monolingual
    out = tmp_path / "data"
    distill.main(["--teacher", str(trained_checkpoint), "--teacher", str(trained_checkpoint), "--monolingual",
                  str(path), "--out", str(out), "--data-dir", str(data_root), "--beam", "2"])  # an ensemble teacher
    files = ", ".join(f"{s}: {out / s}" for s in ("train", "valid", "test"))
    cfg = tmp_path / "student.yaml"
    cfg.write_text(f"""
seed_everything: 1
trainer: {{accelerator: cpu, max_steps: 6, val_check_interval: 3, enable_progress_bar: false,
           enable_model_summary: false, default_root_dir: {tmp_path}/run}}
model:
  config: {{d_model: 32, n_heads: 4, n_encoder_layers: 1, n_decoder_layers: 1, d_ff: 64}}
  warmup_steps: 5
data: {{dataset: aligned, files: {{{files}}}, cache_dir: {tmp_path}/cache, vocab_size: 320, max_tokens: 400,
       val_max_sentences: 8}}
checkpoint: {{dirpath: {tmp_path}/ckpt}}
""")
    env = {k: v for k, v in os.environ.items() if k != "MINITRANS_DATA"}
    result = subprocess.run([sys.executable, "-m", "minitrans", "train", "--config", str(cfg)], capture_output=True,
                            text=True, timeout=300, cwd=ROOT, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    model, _, meta = load_for_inference(tmp_path / "ckpt" / "best.ckpt")
    assert meta["data"]["dataset"] == "aligned" and model.config.d_model == 32


def test_other_inputs_are_refused_over_existing_translations(trained_checkpoint, data_root, monolingual, tmp_path):
    path, unique = monolingual
    out = tmp_path / "data"
    out.mkdir()
    (out / "synthetic.en").write_text("Something else.\n", encoding="utf-8")
    (out / "synthetic.fr").write_text("Autre chose.\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        distill.main(["--teacher", str(trained_checkpoint), "--monolingual", str(path), "--out", str(out),
                      "--data-dir", str(data_root)])
    assert exit_info.value.code == 2 and read_lines(out / "synthetic.fr") == ["Autre chose."]
