"""Training: from batches to a checkpoint, with Lightning.

* :mod:`~minitrans.training.loss` — the output projection and the label-smoothed loss as one
  operation over blocks of target positions.
* :mod:`~minitrans.training.schedule` — the learning-rate schedules (the paper's warm-up, the budget's).
* :mod:`~minitrans.training.budget` — the training budget: ``trainer.max_time`` parsed once, the
  share spent, validation by the clock.
* :mod:`~minitrans.training.sizing` — the model the machine can train in the budget.
* :mod:`~minitrans.training.module` — the LightningModule (``TranslationModule``).
* :mod:`~minitrans.training.distill` — a teacher's translations of monolingual text.

Importing this folder loads nothing; ``minitrans.training.TranslationModule`` and
``AtomicCheckpointIO`` (their path before issue #60, when this folder was one module) still
resolve, lazily, to :mod:`~minitrans.training.module`'s, with a deprecation warning.
"""

_MOVED_NAMES = ("TranslationModule", "AtomicCheckpointIO")


def __getattr__(name: str):
    if name in _MOVED_NAMES:
        import warnings

        from minitrans.training import module

        warnings.warn(f"minitrans.training.{name} moved to minitrans.training.module.{name}", DeprecationWarning,
                      stacklevel=2)
        return getattr(module, name)
    raise AttributeError(f"module 'minitrans.training' has no attribute {name!r}")
