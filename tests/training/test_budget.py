"""The training budget (issue #43): a learning rate that ends with the budget, validation by
the clock, both surviving a resume and taking rank 0's clock."""

from __future__ import annotations

import types
from pathlib import Path

import lightning as L
import pytest

from conftest import make_datamodule
from minitrans import ModelConfig
from minitrans.training.budget import ValidateByTheClock
from minitrans.errors import ConfigError
from minitrans.training.schedule import budgeted
from minitrans.training.module import TranslationModule

SMALL = dict(vocab_size=320, d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.0,
             max_len=64)
PEAK = 1e-3


# -- the schedule, a pure function --------------------------------------------------------
def test_warm_up_then_a_straight_line_to_zero_at_the_end():
    assert budgeted(5, 0.0, PEAK, warmup_steps=10) == pytest.approx(PEAK / 2)
    assert budgeted(10, 0.0, PEAK, 10) == pytest.approx(PEAK)
    for progress in (0.1, 0.25, 0.5, 0.9):
        assert budgeted(500, progress, PEAK, 10) == pytest.approx(PEAK * (1 - progress))
    assert budgeted(500, 1.0, PEAK, 10) == 0.0
    assert budgeted(500, 1.7, PEAK, 10) == 0.0  # past the budget (the last step's rounding): the floor
    assert budgeted(500, 1.0, PEAK, 10, min_lr=1e-5) == pytest.approx(1e-5)


def test_warm_up_stable_decay_holds_the_peak_until_its_cool_down():
    assert budgeted(500, 0.5, PEAK, 10, cooldown=0.2) == pytest.approx(PEAK)
    assert budgeted(500, 0.8, PEAK, 10, cooldown=0.2) == pytest.approx(PEAK)
    assert budgeted(500, 0.9, PEAK, 10, cooldown=0.2) == pytest.approx(PEAK / 2)
    assert budgeted(500, 1.0, PEAK, 10, cooldown=0.2) == 0.0


def test_a_short_budget_decays_inside_its_warm_up():
    """A machine that makes fewer steps than the warm-up still ends at the floor."""
    rates = [budgeted(step, step / 50, PEAK, warmup_steps=100) for step in range(1, 51)]
    assert rates[-1] == 0.0 and max(rates) < PEAK / 2


# -- in a run: the clock mocked, 5 seconds a step -------------------------------------------
@pytest.fixture
def clock(monkeypatch):
    from lightning.pytorch.callbacks import timer

    now = [0.0]
    monkeypatch.setattr(timer, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    return now


class Steps(L.Callback):
    """Advances the mocked clock 5 s a step, records the learning rate each step trained with,
    the steps validated at, and stops at ``stop_at``."""

    def __init__(self, clock, stop_at=None):
        self.clock, self.stop_at = clock, stop_at
        self.validation_seconds = 0.0
        self.rates: dict[int, float] = {}
        self.validated: list[int] = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.rates[trainer.global_step + 1] = trainer.optimizers[0].param_groups[0]["lr"]

    def on_train_batch_end(self, trainer, module, *args):
        self.clock[0] += 5.0
        if self.stop_at is not None and trainer.global_step >= self.stop_at:
            trainer.should_stop = True

    def on_validation_start(self, trainer, module):
        if not trainer.sanity_checking:
            self.validated.append(trainer.global_step)

    def on_validation_epoch_start(self, trainer, module):
        self.clock[0] += self.validation_seconds


def run(prepared, clock, *, stop_at=None, ckpt_path=None, save_to=None, per_budget=0, max_time="00:00:01:40",
        max_epochs=1000, validation_seconds=0.0, callbacks=(), **trainer_kwargs):
    L.seed_everything(1, verbose=False)
    dm = make_datamodule(Path(prepared.hparams.data_dir), prepared.hparams.cache_dir)
    module = TranslationModule(ModelConfig(**SMALL), lr_schedule="budget", peak_lr=PEAK, warmup_steps=4,
                               val_bleu=False)
    steps = Steps(clock, stop_at)
    steps.validation_seconds = validation_seconds
    settings = {"check_val_every_n_epoch": None, "val_check_interval": 10 ** 6, **trainer_kwargs}
    trainer = L.Trainer(max_time=max_time, max_epochs=max_epochs, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        limit_val_batches=1, num_sanity_val_steps=0, use_distributed_sampler=False,
                        callbacks=[steps, ValidateByTheClock(per_budget), *callbacks], **settings)
    trainer.fit(module, dm, ckpt_path=ckpt_path, weights_only=True)
    if save_to:
        trainer.save_checkpoint(save_to)
    return steps, trainer


def test_the_rate_reaches_its_floor_when_the_time_runs_out(prepared, clock):
    steps, trainer = run(prepared, clock)
    assert trainer.global_step == 20  # 100 s at 5 s a step
    # Step s trains with the rate set after step s - 1, from the budget spent when that step began.
    for step, rate in steps.rates.items():
        assert rate == pytest.approx(budgeted(step, max(step - 2, 0) * 5 / 100, PEAK, 4)), step
    assert steps.rates[20] == pytest.approx(PEAK * 0.1) and min(steps.rates.values()) > 0


def test_max_steps_is_a_budget_too(prepared, clock):
    steps, trainer = run(prepared, clock, max_time=None, max_steps=12)
    assert trainer.global_step == 12
    assert steps.rates[12] == pytest.approx(PEAK * 2 / 12)


def test_a_resumed_run_continues_the_budget_it_had_spent(prepared, clock, tmp_path):
    full, _ = run(prepared, clock)
    clock[0] = 0.0
    run(prepared, clock, stop_at=8, save_to=tmp_path / "mid.ckpt")
    clock[0] = 10_000.0  # time between the runs is not the run's
    resumed, trainer = run(prepared, clock, ckpt_path=tmp_path / "mid.ckpt")
    assert trainer.global_step == 20 and sorted(resumed.rates) == list(range(9, 21))
    for step, rate in resumed.rates.items():
        assert rate == pytest.approx(full.rates[step]), step


def test_every_rank_takes_rank_zeros_clock(prepared, clock, monkeypatch):
    """The share spent goes through the strategy's broadcast (rank 0's value on every rank):
    a rank whose own clock says otherwise still decays with rank 0."""
    from lightning.pytorch.strategies import SingleDeviceStrategy

    monkeypatch.setattr(SingleDeviceStrategy, "broadcast", lambda self, obj, src=0: 0.5 if isinstance(obj, float)
                        else obj)
    steps, _ = run(prepared, clock)
    assert steps.rates[10] == pytest.approx(PEAK / 2) and steps.rates[20] == pytest.approx(PEAK / 2)


def test_without_a_budget_the_schedule_says_so(prepared, clock):
    with pytest.raises(ConfigError, match="needs a budget"):
        run(prepared, clock, max_time=None, max_epochs=-1, max_steps=-1, limit_train_batches=3)


# -- validation by the clock ------------------------------------------------------------------
def test_ten_validations_per_budget_whatever_the_speed(prepared, clock):
    """A 100 s budget at 5 s a step: a validation each 10 s, the last when the time runs out."""
    steps, _ = run(prepared, clock, per_budget=10)
    assert steps.validated == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20]


def test_validation_by_the_clock_survives_a_resume(prepared, clock, tmp_path):
    clock[0] = 0.0
    first, _ = run(prepared, clock, per_budget=5, stop_at=9, save_to=tmp_path / "mid.ckpt")
    assert first.validated[:2] == [4, 8]
    clock[0] = 10_000.0
    resumed, _ = run(prepared, clock, per_budget=5, ckpt_path=tmp_path / "mid.ckpt")
    assert resumed.validated == [12, 16, 20]


def test_off_leaves_val_check_interval_in_charge(prepared, clock):
    steps, _ = run(prepared, clock, per_budget=0)
    assert steps.validated == [20]  # only the final one (val_check_interval is 10**6 here)


def test_early_stopping_waits_for_the_validations_of_the_budget(prepared, clock):
    """With Lightning's per-epoch validation settings (multi30k-small's), epochs end before the
    first validation by the clock: early stopping must check after validations, not crash at
    the first epoch end for want of its metric (it did)."""
    from lightning.pytorch.callbacks import EarlyStopping

    stopper = EarlyStopping(monitor="val_loss", patience=100)
    steps, _ = run(prepared, clock, per_budget=2, check_val_every_n_epoch=1, val_check_interval=1.0,
                   limit_train_batches=3, callbacks=[stopper])  # epochs of 3 steps, validations at 10 and 20
    assert steps.validated == [10, 20]
    assert stopper.wait_count < 2 and stopper.best_score.isfinite()


def test_a_negative_count_is_refused():
    with pytest.raises(ConfigError, match="per_budget"):
        ValidateByTheClock(-1)


def test_validation_share_of_the_budget_is_logged(prepared, clock):
    """Each validation costs 2 s of the 100 s budget here: ``val_share`` says what they took."""
    steps, trainer = run(prepared, clock, per_budget=10, validation_seconds=2.0)
    share = float(trainer.callback_metrics["val_share"])
    elapsed = next(c for c in trainer.callbacks if type(c).__name__ == "Timer").time_elapsed()
    assert share == pytest.approx(2.0 * len(steps.validated) / elapsed)
    assert len(steps.validated) >= 8 and 0.15 < share < 0.25
