"""The training budget: how much of it is spent, and validation by the clock.

A recipe bounded by minutes (``trainer.max_time``) makes 600 steps on one laptop and 1,800 on
another. Two things should follow the budget rather than the step count:

* the learning rate (``model.lr_schedule: budget``, :func:`minitrans.training.schedule.budgeted`): it
  decays to its floor exactly when the budget ends, whatever the machine's speed;
* validation (:class:`ValidateByTheClock`): a fixed number of validations per budget, so every
  machine gets a learning curve and a fair choice of checkpoint.

:func:`spent` is the share of the budget used: the wall time of ``max_time`` (Lightning's
:class:`~lightning.pytorch.callbacks.Timer`, whose elapsed time a resumed run gets back from
its checkpoint), the steps of ``max_steps`` or the epochs of ``max_epochs``, whichever is
furthest. Every rank takes rank 0's value, so all ranks decay and validate alike.
"""

from __future__ import annotations

import logging
import re
from datetime import timedelta

import lightning as L
from lightning.pytorch.callbacks import Callback, Timer

from minitrans.errors import ConfigError

log = logging.getLogger(__name__)


#: ``trainer.max_time`` as a string: Lightning's own format, ``DD:HH:MM:SS`` (days of any length).
DURATION = re.compile(r"(\d+):(\d\d):(\d\d):(\d\d)")
EXAMPLE = "write DD:HH:MM:SS, e.g. 00:00:10:00 for ten minutes, or a mapping such as {minutes: 10}"


def max_time_seconds(max_time) -> float | None:
    """``trainer.max_time`` in seconds (None: no time budget), parsed once, here, as Lightning
    will read it (a ``DD:HH:MM:SS`` string, a ``timedelta``, or its keywords as a mapping); a
    value Lightning would refuse, or a budget of zero or less, is a one-line :class:`ConfigError`
    naming the key, never a traceback (or a run that ends at once and exits 0 with no model)."""
    if max_time is None:
        return None
    shown = f"trainer.max_time {max_time!r}"
    try:
        if isinstance(max_time, timedelta):
            duration = max_time
        elif isinstance(max_time, dict):
            unknown = set(max_time) - KEYWORDS
            if unknown or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in max_time.values()):
                raise ConfigError(f"{shown}: the mapping takes numbers for {', '.join(sorted(KEYWORDS))}; {EXAMPLE}.")
            duration = timedelta(**max_time)
        else:
            match = DURATION.fullmatch(str(max_time).strip())
            if not match or isinstance(max_time, (int, float)):
                raise ConfigError(f"{shown} is not a duration: {EXAMPLE}.")
            days, hours, minutes, seconds = (int(g) for g in match.groups())
            duration = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    except (OverflowError, ValueError) as err:
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(f"{shown} is too long a duration ({err}); {EXAMPLE}.") from None
    seconds = duration.total_seconds()
    if not seconds > 0:
        raise ConfigError(f"{shown} is a budget of {seconds:g} seconds: training would stop before its first step "
                          f"and write no model; give a positive duration ({EXAMPLE}).")
    return seconds


KEYWORDS = frozenset({"weeks", "days", "hours", "minutes", "seconds", "milliseconds", "microseconds"})


def timer_of(trainer: L.Trainer) -> Timer | None:
    """The trainer's ``max_time`` timer, if it has one."""
    return next((c for c in trainer.callbacks if isinstance(c, Timer) and c.time_remaining() is not None), None)


def local_spent(trainer: L.Trainer) -> float | None:
    """This process's view of the share of the budget spent (None: no budget is set)."""
    shares = []
    timer = timer_of(trainer)
    if timer is not None:
        elapsed = timer.time_elapsed()
        shares.append(elapsed / max(elapsed + timer.time_remaining(), 1e-9))
    if trainer.max_steps and trainer.max_steps > 0:
        shares.append(trainer.global_step / trainer.max_steps)
    batches = trainer.num_training_batches
    if trainer.max_epochs and trainer.max_epochs > 0 and batches not in (None, 0, float("inf")):
        done = trainer.current_epoch + trainer.fit_loop.epoch_loop.batch_progress.current.completed / batches
        shares.append(done / trainer.max_epochs)
    return min(max(shares), 1.0) if shares else None


def spent(trainer: L.Trainer) -> float:
    """The share of the budget spent, in [0, 1], the same on every rank (rank 0's clock)."""
    share = local_spent(trainer)
    if share is None:
        raise ConfigError("model.lr_schedule budget needs a budget: set trainer.max_time, trainer.max_steps or "
                          "trainer.max_epochs.")
    return float(trainer.strategy.broadcast(share))


class ValidateByTheClock(Callback):
    """Validate ``per_budget`` times in a bounded run: when the budget spent passes 1/N, 2/N,
    ... (the last one when the budget ends, as Lightning does). 0 turns it off; it is also off
    when the run has no budget, and then ``trainer.val_check_interval`` decides.

    When on, it replaces ``val_check_interval``: Lightning validates after a batch when its
    count is a multiple of ``trainer.val_check_batch``, which this callback sets after each
    batch to "now" or "not yet". Lightning's own time-based ``val_check_interval`` reads each
    rank's clock, which can disagree across ranks and hang a distributed run; here all ranks
    take rank 0's (:func:`spent`).

    Args:
        per_budget: Validations per budget (10: a curve of 10 points on every machine).
    """

    def __init__(self, per_budget: int = 0) -> None:
        if per_budget < 0:
            raise ConfigError(f"validation.per_budget must be 0 (off) or more, got {per_budget}.")
        self.per_budget = per_budget
        self._done = 0  # marks already passed (validations this callback asked for)
        self._seconds = 0.0  # spent validating in this run (resumes included)
        self._started: float | None = None

    # Validation's share of the budget, logged as ``val_share`` at each validation (every run,
    # on or off): what the budget pays for its learning curve.
    # (max_time's clock: the Timer's elapsed training time includes validations).
    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        timer = timer_of(trainer)
        self._started = None if trainer.sanity_checking or timer is None else timer.time_elapsed()

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        timer = timer_of(trainer)
        if self._started is None or timer is None:
            return
        self._seconds += timer.time_elapsed() - self._started
        self._started = None
        if timer.time_elapsed() > 0:
            pl_module.log("val_share", self._seconds / timer.time_elapsed(), sync_dist=True)

    def active(self, trainer: L.Trainer) -> bool:
        return self.per_budget > 0 and local_spent(trainer) is not None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.active(trainer):
            self._done = int(spent(trainer) * self.per_budget)  # a resumed run continues its marks
            log.info("Validating %d times per budget (trainer.val_check_interval is not used)", self.per_budget)
            self._hold(trainer, validate=False)
            self._after_each_validation(trainer)

    @staticmethod
    def _after_each_validation(trainer: L.Trainer) -> None:
        """Early stopping and checkpoints act when a validation ends, not at epoch ends: with
        ``val_check_interval`` at its per-epoch default Lightning would check them at the end of
        every epoch, where the validations of this callback need not have run yet (the metric
        is missing: a crash, or an epoch of patience used up by one validation)."""
        from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

        for callback in trainer.callbacks:
            if isinstance(callback, EarlyStopping):
                callback._check_on_train_epoch_end = False
            elif isinstance(callback, ModelCheckpoint):
                callback._save_on_train_epoch_end = False

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args) -> None:
        if not self.active(trainer):
            return
        mark = int(spent(trainer) * self.per_budget)
        due = self._done < mark < self.per_budget  # the last mark is the end: Lightning validates then
        if due:
            self._done = mark
        self._hold(trainer, validate=due)

    @staticmethod
    def _hold(trainer: L.Trainer, validate: bool) -> None:
        loop = trainer.fit_loop.epoch_loop
        iteration = loop.total_batch_idx if trainer.check_val_every_n_epoch is None else loop.batch_idx
        # Lightning validates when (iteration + 1) is a multiple of val_check_batch.
        trainer.val_check_batch = iteration + 1 if validate else iteration + 2 + 10 ** 9

    def state_dict(self) -> dict:
        return {"done": self._done, "seconds": self._seconds}

    def load_state_dict(self, state_dict: dict) -> None:
        self._done = int(state_dict.get("done", 0))
        self._seconds = float(state_dict.get("seconds", 0.0))
