"""Lightning wiring: learning, exact resume, checkpoints, config errors, DDP on CPU."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml
from lightning.pytorch.utilities import GradClipAlgorithmType

from conftest import ROOT, make_datamodule, one_line_error, run_cli, run_main, synthetic_pairs, write_config
from minitrans import ModelConfig
from minitrans.checkpoint import CheckpointError, average_checkpoints, load_checkpoint, load_for_inference
from minitrans.training.schedule import cosine, inverse_sqrt
from minitrans.cli.train import lightning_main
from minitrans.training.module import TranslationModule

SMALL = dict(d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.1, max_len=64)


class LossRecorder(L.Callback):
    def __init__(self):
        self.losses = {}

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.losses[trainer.global_step] = float(outputs["loss"])


def fit(prepared, max_steps, ckpt_path=None, save_to=None, **module_kwargs):
    L.seed_everything(1, verbose=False)
    dm = make_datamodule(Path(prepared.hparams.data_dir), prepared.hparams.cache_dir)
    model = TranslationModule(ModelConfig(vocab_size=320, **SMALL), warmup_steps=10, val_bleu=False, **module_kwargs)
    recorder = LossRecorder()
    trainer = L.Trainer(max_steps=max_steps, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        use_distributed_sampler=False, callbacks=[recorder])
    trainer.fit(model, dm, ckpt_path=ckpt_path, weights_only=True)
    if save_to:
        trainer.save_checkpoint(save_to)
    return recorder.losses, model


def test_a_few_steps_reduce_the_loss(prepared):
    losses, _ = fit(prepared, 40)
    steps = sorted(losses)
    assert sum(losses[s] for s in steps[-5:]) / 5 < sum(losses[s] for s in steps[:5]) / 5 - 0.5


def test_same_seed_same_loss_curve(prepared):
    assert fit(prepared, 6)[0] == fit(prepared, 6)[0]


def test_resume_matches_uninterrupted_run(prepared, tmp_path):
    full, _ = fit(prepared, 12)
    part, _ = fit(prepared, 5, save_to=tmp_path / "mid.ckpt")
    assert all(part[s] == full[s] for s in part)
    resumed, _ = fit(prepared, 12, ckpt_path=tmp_path / "mid.ckpt")
    assert sorted(resumed) == list(range(6, 13))
    for step in resumed:
        assert resumed[step] == pytest.approx(full[step], abs=1e-6), step


def test_wall_minutes_continue_across_a_resume(prepared, tmp_path, monkeypatch):
    """The learning curve's clock (``wall_minutes``) counts the minutes before a resume, as
    ``max_time`` does: a resumed run does not start again at 0."""
    import types

    from minitrans.training import module as training

    clock = [0.0]
    monkeypatch.setattr(training, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))

    def run(max_steps, ckpt_path=None):
        dm = make_datamodule(Path(prepared.hparams.data_dir), prepared.hparams.cache_dir)
        model = TranslationModule(ModelConfig(vocab_size=320, **SMALL), warmup_steps=10, val_bleu=False)
        trainer = L.Trainer(max_steps=max_steps, accelerator="cpu", logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0)
        clock[0] += 1000.0  # a while between the runs: not training time
        trainer.fit(model, dm, ckpt_path=ckpt_path, weights_only=True)
        clock[0] += 600.0  # this run's 10 minutes
        trainer.save_checkpoint(tmp_path / f"{max_steps}.ckpt")
        return torch.load(tmp_path / f"{max_steps}.ckpt", weights_only=True)["minitrans"]["wall_minutes"]

    assert run(3) == pytest.approx(10.0)
    assert run(6, ckpt_path=tmp_path / "3.ckpt") == pytest.approx(20.0)


def test_a_validation_that_outlasts_max_time_is_the_last(prepared, monkeypatch):
    """When ``max_time`` runs out during a validation, training stops there: before, it ran one
    more step and validated again, which left two checkpoints one step apart among the best
    (README, seed variance)."""
    import types

    from lightning.pytorch.callbacks import timer

    clock = [0.0]
    monkeypatch.setattr(timer, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))

    class SlowValidation(L.Callback):
        def __init__(self):
            self.steps = []

        def on_validation_start(self, trainer, module):
            clock[0] += 1000.0  # this validation outlasts max_time (60 s)
            self.steps.append(trainer.global_step)

    dm = make_datamodule(Path(prepared.hparams.data_dir), prepared.hparams.cache_dir)
    model = TranslationModule(ModelConfig(vocab_size=320, **SMALL), warmup_steps=10, val_bleu=False)
    validations = SlowValidation()
    trainer = L.Trainer(max_time="00:00:01:00", max_epochs=3, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        limit_val_batches=1, num_sanity_val_steps=0, callbacks=[validations])
    trainer.fit(model, dm, weights_only=True)
    epoch = trainer.num_training_batches
    assert validations.steps == [epoch]  # the epoch's validation, and no other
    assert trainer.global_step == epoch


def test_checkpoint_round_trip_gives_identical_logits(prepared, tmp_path):
    _, module = fit(prepared, 3, save_to=tmp_path / "m.ckpt")
    model, tokenizer, meta = load_for_inference(tmp_path / "m.ckpt")
    module.model.eval()
    src = torch.tensor([[5, 6, 7, 3]])
    tgt = torch.tensor([[2, 8, 9]])
    assert torch.equal(model(src, tgt), module.model(src, tgt))
    assert tokenizer.fingerprint() == prepared.tokenizer.fingerprint() == meta["tokenizer_fingerprint"]


def test_checkpoint_with_pickled_code_is_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("this would run",))

    torch.save({"minitrans": {}, "state_dict": {}, "payload": Evil()}, tmp_path / "evil.ckpt")
    with pytest.raises(CheckpointError, match="Refusing to load"):
        load_checkpoint(tmp_path / "evil.ckpt")
    (tmp_path / "trunc.ckpt").write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(tmp_path / "trunc.ckpt")
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "none.ckpt")
    torch.save({"state_dict": {}}, tmp_path / "other.ckpt")
    with pytest.raises(CheckpointError, match="not a minitrans checkpoint"):
        load_checkpoint(tmp_path / "other.ckpt")


def test_schedules_follow_their_formulas():
    d, w = 512, 4000
    for step in (1, 100, 4000, 10000):
        assert inverse_sqrt(step, d, w) == pytest.approx(d ** -0.5 * min(step ** -0.5, step * w ** -1.5))
    assert inverse_sqrt(4000, d, w) == pytest.approx(max(inverse_sqrt(s, d, w) for s in range(1, 9000, 50)), rel=1e-3)
    assert cosine(50, 1e-3, 100, 1000) == pytest.approx(5e-4)
    assert cosine(1000, 1e-3, 100, 1000, min_lr=1e-5) == pytest.approx(1e-5)


@pytest.mark.parametrize("override,message", [
    (["--model.config.d_modle", "64"], "d_modle"),
    (["--data.max_tokenz", "5"], "max_tokenz"),
    (["--model.config.dropout", "lots"], "dropout"),
    (["--model.warmup_steps", "0"], "warmup_steps must be positive"),
])
def test_bad_config_fails_at_once_naming_the_key(tmp_path, prepared, override, message):
    result = run_cli("train", "--config", str(write_config(tmp_path, prepared)), *override, timeout=120)
    assert result.returncode != 0
    assert message in result.stderr


def test_ddp_on_two_cpu_processes_leaves_a_loadable_checkpoint(tmp_path, prepared):
    cfg = write_config(tmp_path, prepared, "")
    result = run_cli("train", "--config", str(cfg), "--trainer.devices", "2", "--trainer.strategy", "ddp",
                     "--trainer.max_steps", "4", "--trainer.val_check_interval", "2", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "distributed_backend=gloo" in result.stderr or "gloo" in result.stdout + result.stderr
    model, tokenizer, meta = load_for_inference(tmp_path / "ckpt" / "best.ckpt")
    assert model.config.d_model == 32 and meta["tokenizer_fingerprint"] == prepared.tokenizer.fingerprint()


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "configs").glob("*.yaml")))
def test_shipped_configs_parse_and_build(name, tmp_path, monkeypatch):
    """Every shipped recipe parses (no stale key) and builds its model, data module and trainer.
    The GPU recipe is built for the CPU here; nothing is loaded or trained."""
    monkeypatch.chdir(tmp_path)  # loggers and checkpoint dirs, if created, land here
    path = ROOT / "configs" / name
    raw = yaml.safe_load(path.read_text())
    cli = lightning_main(["--config", str(path), "--trainer.accelerator", "cpu", "--trainer.devices", "1"], run=False)
    assert isinstance(cli.model, TranslationModule)
    assert cli.model.config.vocab_size == raw["data"]["vocab_size"] == cli.datamodule.hparams.vocab_size
    for key, value in raw["model"].get("config", {}).items():
        assert getattr(cli.model.config, key) == value, key
    for key, value in raw["model"].items():
        if key != "config":
            assert cli.model.hparams[key] == value, key
    assert cli.datamodule.hparams.dataset == raw["data"]["dataset"]


def test_recent_checkpoints_keep_the_last_validations(tmp_path, prepared):
    """`recent.save_top_k N` keeps the weights of the last N validations, for last-N averaging;
    the best-by-BLEU checkpoints and best.ckpt are unaffected."""
    cfg = write_config(tmp_path, prepared, "")
    result = run_cli("train", "--config", str(cfg), "--trainer.max_steps", "8", "--trainer.val_check_interval", "2",
                     "--recent.save_top_k", "2", "--recent.dirpath", str(tmp_path / "recent"), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "recent").glob("*.ckpt")) == ["recent-step6.ckpt", "recent-step8.ckpt"]
    assert (tmp_path / "ckpt" / "best.ckpt").is_file()
    averaged = average_checkpoints(sorted((tmp_path / "recent").glob("*.ckpt")), tmp_path / "avg.ckpt")
    assert len(averaged["minitrans"]["averaged_from"]) == 2



def test_training_that_stops_at_max_steps_mid_interval_validates_and_saves_its_last_step(tmp_path, prepared):
    """max_steps 7 with validation every 3 steps: the last validation and checkpoint must be at
    step 7, not 6 (Lightning would end without validating, and the last step would be lost)."""
    cfg = write_config(tmp_path, prepared, "")
    result = run_cli("train", "--config", str(cfg), "--trainer.max_steps", "7", "--trainer.val_check_interval", "3",
                     "--recent.save_top_k", "1", "--recent.dirpath", str(tmp_path / "recent"), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    last = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True, map_location="cpu")
    assert last["global_step"] == 7
    assert [p.name for p in (tmp_path / "recent").glob("*.ckpt")] == ["recent-step7.ckpt"]


# -- hostile cases (issue #30's second round: resuming, 3 and 4; small TSV corpora, 7a) --------
def _train(capsys, tmp_path, prepared, *extra):
    return run_main(capsys, "train", "--config", write_config(tmp_path, prepared), *extra)


@pytest.mark.hostile
def test_3_resume_after_the_data_changed_is_refused(capsys, tmp_path, prepared, data_root):
    code, _, err = _train(capsys, tmp_path, prepared, "--trainer.max_steps", "3")
    assert code == 0, err
    last = tmp_path / "ckpt" / "last.ckpt"
    # The same training data, another corpus beside it: the tokenizer trained on it differs.
    other = tmp_path / "other"
    shutil.copytree(data_root, other)
    train_en = other / "multi30k" / "train.en"
    train_en.write_text(train_en.read_text().replace("cat", "kitten"))
    code, _, err = _train(capsys, tmp_path, prepared, "--data.data_dir", other, "--data.cache_dir", tmp_path / "c",
                          "--resume", last)
    assert code == 1 and "another SentencePiece model" in one_line_error(err) and "--data.tokenizer" in err


@pytest.mark.hostile
def test_4_overrides_on_resume_are_refused_by_name(capsys, tmp_path, prepared):
    code, _, err = _train(capsys, tmp_path, prepared, "--trainer.max_steps", "3")
    assert code == 0, err
    last = tmp_path / "ckpt" / "last.ckpt"
    code, _, err = _train(capsys, tmp_path, prepared, "--model.config.d_model", "64", "--resume", last)
    assert code == 2 and "model.config.d_model (64 given, 32 in the checkpoint)" in one_line_error(err)
    # The same settings resume.
    code, _, err = _train(capsys, tmp_path, prepared, "--trainer.max_steps", "6", "--resume", last)
    assert code == 0, err


# -- 7a. small TSV corpora and malformed files ------------------------------------------------
@pytest.mark.hostile
def test_7a_a_small_tsv_corpus_names_the_split_sizes(capsys, tmp_path, prepared):
    tsv = tmp_path / "small.tsv"
    tsv.write_text("".join(f"{e}\t{f}\n" for e, f in synthetic_pairs(300, seed=4)))
    code, _, err = _train(capsys, tmp_path, prepared, "--data.dataset", "tsv", "--data.files",
                          json.dumps({"train": str(tsv)}), "--data.cache_dir", tmp_path / "c")
    assert code == 1 and "valid_size" in one_line_error(err) and "test_size" in err
    code, _, err = _train(capsys, tmp_path, prepared, "--data.dataset", "tsv", "--data.files", str(tsv),
                          "--data.cache_dir", tmp_path / "c")
    assert code == 2 and "data.files" in one_line_error(err)


@pytest.mark.hostile
def test_contract_a_validation_interval_longer_than_an_epoch_is_one_line(capsys, tmp_path, prepared):
    """A small corpus's epoch is a few batches: Lightning's check is a traceback; ours says the fix."""
    code, _, err = _train(capsys, tmp_path, prepared, "--trainer.val_check_interval", "1000")
    assert code == 2 and "check_val_every_n_epoch: null" in one_line_error(err)


# -- hostile cases (issue #14's first round) --------------------------------------------------
@pytest.mark.hostile
def test_14_train_errors_are_one_line(capsys, tmp_path, prepared):
    from conftest import write_config

    cfg = write_config(tmp_path, prepared)
    code, _, err = run_main(capsys, "prepare", "--config", cfg, "--data.vocab_size", "10", "--data.cache_dir",
                       tmp_path / "c")
    assert code == 1 and "vocab_size" in one_line_error(err)
    code, _, err = run_main(capsys, "train", "--config", cfg, "--data.dataset", "tsv", "--data.files",
                       '{"train": "/nonexistent.tsv"}', "--data.cache_dir", tmp_path / "c2")
    assert code == 1 and "/nonexistent.tsv" in one_line_error(err)
    code, _, err = run_main(capsys, "train", "--config", cfg, "--model.config.n_heads", "3")
    assert code != 0 and "n_heads" in err and "Traceback" not in err


@pytest.mark.hostile
def test_15_resuming_an_averaged_checkpoint_is_refused(capsys, tmp_path, prepared, trained_checkpoint):
    from conftest import write_config

    avg = tmp_path / "avg.ckpt"
    run_main(capsys, "average", "-m", trained_checkpoint, trained_checkpoint, "-o", avg)
    code, _, err = run_main(capsys, "train", "--config", write_config(tmp_path, prepared), "--resume", avg)
    assert code == 1 and "minitrans average" in one_line_error(err)


def test_validation_decodes_with_the_weights_of_now():
    """The optimiser is fused AdamW, whose step does not move the weights' version counters, by
    which the decoding kernels keep their stacked Q/K/V: a validation must not decode with the
    weights of the first one (it did, once: validation BLEU stalled near 19 while the chosen
    checkpoint, decoded by evaluate, scored 32 and 42 on the two validation sets)."""
    from minitrans import Transformer
    from minitrans.decoding.kernels import for_decoding

    torch.manual_seed(0)
    module = TranslationModule(ModelConfig(vocab_size=40, **{**SMALL, "dropout": 0.0}), warmup_steps=10,
                               val_bleu=False)
    model = module.model.eval()
    src, tgt = torch.randint(4, 40, (3, 7)), torch.randint(4, 40, (3, 5))
    with torch.no_grad():
        model(src, tgt)  # a first validation: the decoding kernels stack Q/K/V
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    optimizer = module.configure_optimizers()["optimizer"]
    assert optimizer.defaults["fused"]
    optimizer.step()
    module.on_validation_epoch_start()  # what Lightning calls before each validation
    fresh = for_decoding(Transformer(model.config)).eval()
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt), fresh(src, tgt))


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_every_precision_trains_with_gradient_clipping(prepared, precision):
    """The recipes clip gradients (gradient_clip_val 1.0) and train in bf16-mixed where the CPU
    has bf16 units: Lightning's plugin refuses to clip for a fused optimizer under mixed
    precision (the README's command once stopped there), so the module clips it itself."""
    L.seed_everything(1, verbose=False)
    dm = make_datamodule(Path(prepared.hparams.data_dir), prepared.hparams.cache_dir)
    model = TranslationModule(ModelConfig(vocab_size=320, **SMALL), warmup_steps=10, val_bleu=False)
    trainer = L.Trainer(max_steps=3, accelerator="cpu", precision=precision, gradient_clip_val=1.0, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        limit_val_batches=0, use_distributed_sampler=False)
    trainer.fit(model, dm)
    assert trainer.global_step == 3
    assert trainer.optimizers[0].defaults["fused"]


@pytest.mark.parametrize("algorithm", ["norm", "value", None, GradClipAlgorithmType.VALUE])  # the enum: as the trainer passes it
def test_a_fused_optimizer_is_clipped_as_lightning_clips(algorithm):
    """The module's own clipping (for a fused AdamW) gives the gradients Lightning's would."""
    model = TranslationModule(ModelConfig(vocab_size=64, **SMALL), warmup_steps=10, val_bleu=False)
    params = list(model.parameters())
    torch.manual_seed(0)
    grads = [torch.randn_like(p) * 10 for p in params]
    limit = 0.5
    if algorithm == "value":
        expected = [g.clamp(-limit, limit) for g in grads]
    else:  # norm (Lightning's default)
        total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        expected = [g * (limit / (total + 1e-6)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    optimizer = torch.optim.AdamW(params, lr=1e-3, fused=True)
    model.configure_gradient_clipping(optimizer, limit, algorithm)
    for p, e in zip(params, expected):
        torch.testing.assert_close(p.grad, e)
    assert not torch.equal(params[0].grad, grads[0])  # it did clip


# -- issue #59 (hostile round 4): the budget and the run folder ------------------------------
@pytest.mark.hostile
@pytest.mark.parametrize("value", ["0", "abc", "00:00:00:1.5", "00:00:00:-5", "9999999999:00:00:00",
                                   "00:00:00:00", "{seconds: -5}", "{fortnights: 1}", "{seconds: soon}"])
def test_a_budget_that_is_not_a_positive_duration_is_one_line(capsys, tmp_path, prepared, value):
    from conftest import run_main

    cfg = write_config(tmp_path, prepared)
    cfg.write_text(cfg.read_text().replace("  max_steps: 6\n", f"  max_steps: 6\n  max_time: {value}\n"))
    code, _, err = run_main(capsys, "train", "--config", cfg)
    assert code in (1, 2) and "trainer.max_time" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "ckpt").exists()


def test_one_parser_reads_every_budget_lightning_reads():
    from datetime import timedelta

    from lightning.pytorch.callbacks import Timer

    from minitrans.training.budget import max_time_seconds

    for value in ("00:00:10:00", "1:02:03:04", "400:00:00:00", timedelta(minutes=3), {"minutes": 2, "seconds": 1.5}):
        assert max_time_seconds(value) == Timer(duration=value)._duration
    assert max_time_seconds(None) is None


@pytest.mark.hostile
def test_a_fit_that_writes_no_checkpoint_fails(capsys, tmp_path, prepared):
    """Issue #59, item 9: a run that ended before any checkpoint exits 1 with one line, not 0."""
    from conftest import run_main

    cfg = write_config(tmp_path, prepared)
    code, _, err = run_main(capsys, "train", "--config", cfg, "--trainer.max_steps", "0")
    assert code == 1 and "without writing a checkpoint" in err and "Traceback" not in err


@pytest.mark.hostile
def test_a_second_fresh_run_into_a_run_folder_is_refused(capsys, tmp_path, prepared):
    """Issue #59, item 7: Lightning would write last-v1.ckpt beside the first run's last.ckpt."""
    from conftest import run_main

    cfg = write_config(tmp_path, prepared)
    assert run_main(capsys, "train", "--config", cfg)[0] == 0
    before = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    stamp = (tmp_path / "ckpt" / "best.ckpt").stat().st_mtime_ns
    code, _, err = run_main(capsys, "train", "--config", cfg)
    assert code == 2 and "already holds another run's checkpoints" in err and "--resume" in err
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == before
    assert (tmp_path / "ckpt" / "best.ckpt").stat().st_mtime_ns == stamp
    code, _, err = run_main(capsys, "train", "--config", cfg, "--trainer.max_steps", "9",
                            "--resume", tmp_path / "ckpt" / "last.ckpt")  # continuing it is still allowed
    assert code == 0, err and not list((tmp_path / "ckpt").glob("*-v1.ckpt"))


@pytest.mark.hostile
def test_the_size_probes_choice_is_information_not_a_warning(tmp_path, prepared, caplog):
    import logging

    from minitrans.cli.train import _size_model

    config = {"model_size": "xs", "trainer": {}, "data": {}}
    with caplog.at_level(logging.INFO, logger="minitrans"):
        _size_model(config, [])
    assert [r.levelname for r in caplog.records if "Model size" in r.getMessage()] == ["INFO"]


def _drift_after_fine_tuning(prepared, checkpoint, anchor: float) -> float:
    """Σ (θ − θ_parent)² after 40 steps at a high learning rate from ``checkpoint``."""
    from minitrans.checkpoint import model_state, stored_config

    L.seed_everything(0, verbose=False)
    parent = model_state(load_checkpoint(checkpoint))
    module = TranslationModule(stored_config(load_checkpoint(checkpoint)), lr_schedule="cosine", peak_lr=1e-2,
                               warmup_steps=5, total_steps=40, val_bleu=False, init_from=str(checkpoint),
                               anchor=anchor)
    trainer = L.Trainer(max_steps=40, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        use_distributed_sampler=False)
    trainer.fit(module, prepared)
    assert not module._anchor or module._anchor_penalty().item() > 0
    return sum(((p.detach() - parent[name]) ** 2).sum().item() for name, p in module.model.named_parameters())


def test_the_anchor_keeps_a_fine_tuned_model_near_the_one_it_started_from(prepared, trained_checkpoint):
    """``anchor`` adds anchor · Σ(θ − θ₀)² to the loss: the same 40 steps move the weights less
    (issue #61: forgetting), and the anchor never enters the checkpoint's weights."""
    free, held = (_drift_after_fine_tuning(prepared, trained_checkpoint, a) for a in (0.0, 1.0))
    assert 0 < held < 0.5 * free, (free, held)


def test_an_anchor_needs_a_model_to_start_from():
    with pytest.raises(Exception, match="anchor pulls the weights toward model.init_from"):
        TranslationModule(ModelConfig(vocab_size=320, d_model=64, n_heads=4, n_encoder_layers=1, n_decoder_layers=1,
                                      d_ff=128), anchor=0.1)
