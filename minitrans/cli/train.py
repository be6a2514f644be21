"""``minitrans train`` (= ``fit``), ``validate``, ``test``: Lightning's CLI over
:class:`~minitrans.training.module.TranslationModule` and
:class:`~minitrans.data.datamodule.TranslationDataModule`, configured from YAML (``--config
configs/multi30k.yaml``) plus dotted overrides (``--trainer.max_epochs 3``).

Unknown keys and bad values fail at once, naming the key; ``--resume CKPT`` continues an
interrupted run exactly and refuses changed settings by name; ``model_size`` sizes the model to
the machine (:mod:`minitrans.training.sizing`) before the model is built. Lightning is imported only
when a training command runs: :mod:`minitrans.cli.parser` imports this module lazily.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from minitrans.errors import CheckpointError, MinitransError, UsageError

log = logging.getLogger("minitrans")

def _lightning_cli_class():
    from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
    from lightning.pytorch.cli import LightningCLI
    from lightning.pytorch.loggers import CSVLogger

    from minitrans.training.budget import ValidateByTheClock
    from minitrans.checkpoint import copy_atomic
    from minitrans.precision import training_precision
    from minitrans.training.module import AtomicCheckpointIO

    class MinitransCLI(LightningCLI):
        """LightningCLI with minitrans's links, checkpointing and loggers."""

        def parse_arguments(self, parser, args) -> None:
            self._raw_args = list(args or [])  # for model_size: which settings the user gave
            super().parse_arguments(parser, args)

        def init_parser(self, **kwargs):
            kwargs.setdefault("prog", "minitrans")  # not __main__.py: its usage line reads as the command typed
            parser = super().init_parser(**kwargs)
            parser.__class__ = _one_line_errors(type(parser))
            return parser

        def _add_subcommands(self, parser, **kwargs) -> None:
            super()._add_subcommands(parser, **kwargs)
            for name, sub in self._subcommand_parsers.items():  # usage and errors name the command typed
                sub.prog = f"minitrans {'train' if name == 'fit' else name}"

        def add_arguments_to_parser(self, parser) -> None:
            parser.link_arguments("data.vocab_size", "model.config.vocab_size", apply_on="parse")
            parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
            parser.set_defaults({
                "checkpoint.monitor": "val_bleu", "checkpoint.mode": "max", "checkpoint.save_top_k": 3,
                "checkpoint.save_last": True, "checkpoint.filename": "step{step}-bleu{val_bleu:.2f}",
                "checkpoint.auto_insert_metric_name": False,
            })
            # The last N validations' weights, for `minitrans average` (off unless save_top_k > 0).
            parser.add_lightning_class_args(ModelCheckpoint, "recent")
            parser.set_defaults({
                "recent.monitor": "step", "recent.mode": "max", "recent.save_top_k": 0,
                "recent.filename": "recent-step{step}", "recent.auto_insert_metric_name": False,
            })
            # Validations per budget in a bounded run (0: off, trainer.val_check_interval decides).
            parser.add_lightning_class_args(ValidateByTheClock, "validation")
            parser.add_lightning_class_args(EarlyStopping, "early_stopping")
            parser.add_argument("--model_size", default="fixed",
                                help="auto: the largest model of minitrans.training.sizing's table that makes enough steps "
                                     "in the budget on this machine (a few seconds' probe); fixed: model.config as "
                                     "given; or a candidate's name (xs, s, m, l, xl)")
            parser.set_defaults({"early_stopping.monitor": "val_bleu", "early_stopping.mode": "max",
                                 "early_stopping.patience": 10})
            if "weights_only" in {a.dest for a in parser._actions}:  # fit/validate/test
                parser.set_defaults({"weights_only": True})  # resuming never unpickles code

        def _parse_ckpt_path(self) -> None:
            """Lightning restores the model's hyperparameters from ``--resume CKPT`` over the
            user's: a changed setting would be ignored without a word. Refuse instead, naming
            each setting that differs (``init_from`` is ignored on resume, as documented)."""
            sub = self.config.get("subcommand")
            if sub == "fit":
                from minitrans.training.budget import max_time_seconds

                max_time_seconds(self.config[sub]["trainer"].get("max_time"))  # one-line errors, before any work
                if not self.config[sub].get("ckpt_path"):
                    _check_fresh_run_folder(self.config[sub])
                _size_model(self.config[sub], self._raw_args)
            # validate/test take the checkpoint's settings by design; only training resumes.
            before = _flat(self.config[sub]["model"]) if sub == "fit" and self.config[sub].get("model") else None
            super()._parse_ckpt_path()
            if before is None:
                return
            after = _flat(self.config[sub]["model"])
            differ = [k for k in sorted(set(before) | set(after))
                      if k != "init_from" and before.get(k) != after.get(k)]
            if differ:
                shown = ", ".join(f"model.{k} ({before.get(k)!r} given, {after.get(k)!r} in the checkpoint)"
                                  for k in differ[:4])
                more = f" and {len(differ) - 4} more" if len(differ) > 4 else ""
                raise UsageError(f"--resume {self.config[sub].get('ckpt_path')}: the run's model settings cannot change "
                                 f"when resuming, and these differ: {shown}{more}. Drop those overrides (or the "
                                 "changed config), or start a new run with model.init_from CKPT to fine-tune.")

        def _instantiate_trainer(self, config, callbacks):
            if config.get("logger") in (None, True):  # CSV always, TensorBoard when installed
                root = config.get("default_root_dir") or "runs"
                loggers = [CSVLogger(root, name="logs")]
                try:
                    from lightning.pytorch.loggers import TensorBoardLogger
                    import tensorboard  # noqa: F401

                    loggers.append(TensorBoardLogger(root, name="logs", version=loggers[0].version))
                except ImportError:
                    pass
                config["logger"] = loggers
            config["plugins"] = [*(config.get("plugins") or []), AtomicCheckpointIO()]
            chosen, why = training_precision(config.get("precision"), config.get("accelerator"))
            if why:  # a recipe's bf16-mixed on a CPU that would emulate bf16
                log.warning(why)
                config["precision"] = chosen
            return super()._instantiate_trainer(config, callbacks)

        def after_fit(self) -> None:
            _check_a_checkpoint_was_written(self.trainer)
            callback = next((c for c in self.trainer.checkpoint_callbacks if c.monitor != "step"), None)
            if callback is not None and callback.best_model_path and self.trainer.is_global_zero:
                best = Path(callback.best_model_path)
                target = best.with_name("best.ckpt")
                copy_atomic(best, target)  # a kill mid-copy leaves the previous best.ckpt whole
                score = callback.best_model_score
                log.info("Best checkpoint (%s = %.2f): %s, copied to %s", callback.monitor,
                         float(score) if score is not None else float("nan"), best, target)

    return MinitransCLI, LearningRateMonitor


def _size_model(config, args: list[str]) -> None:
    """``model_size``: set ``model.config``'s dimensions to a candidate of :mod:`minitrans.training.sizing`
    (``auto``: the one this machine affords in the budget, by a probe of a few seconds), and
    record the choice as ``model.sizing``. Dimensions the user gave (on the command line, or in a
    config file that does not ask for ``model_size`` itself) win; a resumed run keeps its
    checkpoint's."""
    from minitrans.training import sizing
    from minitrans.checkpoint import load_checkpoint

    choice = config.get("model_size") or "fixed"
    if choice == "fixed":
        return
    given = _dimensions_given(args)
    if given:
        log.info("model_size %s: not applied, model.config.%s given", choice, given)
        return
    if config.get("ckpt_path"):  # resuming: the run keeps the shape it started with
        stored = load_checkpoint(config["ckpt_path"]).get("hyper_parameters", {})
        for key in sizing.DIMENSIONS:
            if key in stored.get("config", {}):
                config[f"model.config.{key}"] = stored["config"][key]
        config["model.sizing"] = stored.get("sizing")
        return
    from minitrans.training.budget import max_time_seconds

    budget = max_time_seconds(config["trainer"].get("max_time"))
    if choice == "auto" and budget is None:
        log.info("model_size auto: the run has no trainer.max_time, so no budget to size the model for; "
                 "model.config as given")
        return
    if choice == "auto":
        dtype, device = _probe_settings(config)
        data = config["data"]
        seconds = sizing.probe(budget, data["vocab_size"], data["max_tokens"], dtype, device)
        chosen, why = sizing.choose(seconds, budget)
        record = {"chosen": chosen.name, "why": why, "seconds_per_step": {k: round(v, 4) for k, v in seconds.items()},
                  "budget_seconds": budget, "device": device, "dtype": str(dtype or torch_float32())}
    else:
        chosen = sizing.by_name(choice)
        record = {"chosen": chosen.name, "why": f"model_size {choice}"}
    for key, value in chosen.dims().items():
        config[f"model.config.{key}"] = value
    config["model.sizing"] = record
    dims = ", ".join(f"{k} {v}" for k, v in chosen.dims().items())
    log.info("Model size %s (%s): %s", chosen.name, dims, record["why"])  # information, not a warning


def _check_fresh_run_folder(config) -> None:
    """A new run (no ``--resume``) into a checkpoint folder that holds checkpoints would mix two
    runs: Lightning writes ``last-v1.ckpt`` beside the first run's ``last.ckpt`` and replaces
    ``best.ckpt``, and ``--resume .../last.ckpt`` then resumes the wrong run. Refuse it,
    naming the folder and the ways out."""
    folder = (config.get("checkpoint") or {}).get("dirpath")
    if not folder or not Path(folder).is_dir():
        return
    found = sorted(p.name for p in Path(folder).glob("*.ckpt"))
    if found:
        shown = ", ".join(found[:3]) + (" ..." if len(found) > 3 else "")
        raise UsageError(f"checkpoint.dirpath {folder} already holds another run's checkpoints ({shown}): a new run "
                         f"there would mix the two. Continue that run with --resume {Path(folder) / 'last.ckpt'}, "
                         "give this one its own folder (--checkpoint.dirpath NEW_FOLDER), or move the old one away.")


def _check_a_checkpoint_was_written(trainer) -> None:
    """A fit that ended without writing any checkpoint (a budget spent before the first
    validation, ``max_steps: 0``) is a failure, not a run: say so and exit 1."""
    if not trainer.is_global_zero or not trainer.checkpoint_callbacks or trainer.fast_dev_run:
        return  # checkpointing turned off, or a smoke run: nothing was asked to be written
    written = [c for c in trainer.checkpoint_callbacks
               if getattr(c, "last_model_path", "") or getattr(c, "best_model_path", "")]
    if not written:
        raise MinitransError(f"training stopped after {trainer.global_step} steps without writing a checkpoint: no "
                             "model was made. Give it a longer budget (trainer.max_time, trainer.max_steps) or "
                             "validate sooner (trainer.val_check_interval).")


def torch_float32():
    import torch

    return torch.float32


def _dimensions_given(args: list[str]) -> str | None:
    """The first model dimension the user set: on the command line, or in a config file that
    does not itself set ``model_size`` (a recipe that asks for sizing keeps its dimensions as
    the fallback)."""
    import yaml

    from minitrans.training.sizing import DIMENSIONS

    for i, arg in enumerate(args):
        key = arg.split("=", 1)[0]
        if key.startswith("--model.config.") and key.rsplit(".", 1)[-1] in DIMENSIONS:
            return key.rsplit(".", 1)[-1]
        if key in ("--config", "-c"):
            path = arg.split("=", 1)[1] if "=" in arg else (args[i + 1] if i + 1 < len(args) else None)
            try:
                doc = yaml.safe_load(Path(path).read_text()) if path else None
            except (OSError, yaml.YAMLError):
                continue  # the parser has said what is wrong with it
            if isinstance(doc, dict) and "model_size" not in doc:
                dims = ((doc.get("model") or {}).get("config") or {}) if isinstance(doc.get("model"), dict) else {}
                found = next((k for k in DIMENSIONS if isinstance(dims, dict) and k in dims), None)
                if found:
                    return found
    return None


def _probe_settings(config) -> tuple:
    """``(autocast dtype or None, device)`` the run will train with, for the sizing probe."""
    import torch

    from minitrans.precision import training_precision

    trainer = config["trainer"]
    accelerator = trainer.get("accelerator")
    on_gpu = accelerator in ("gpu", "cuda") or (accelerator in (None, "auto") and torch.cuda.is_available())
    precision, _ = training_precision(trainer.get("precision"), accelerator)
    precision = str(precision)
    dtype = torch.bfloat16 if precision.startswith("bf16") else torch.float16 if precision.startswith("16") else None
    return dtype, "cuda" if on_gpu else "cpu"


def _one_line_errors(parser_class):
    """``parser_class`` whose errors are one-line :class:`UsageError`s (exit 2), not a page of
    usage text before the message."""

    class OneLineErrors(parser_class):
        def error(self, message: str, ex: Exception | None = None):
            raise UsageError(f"{' '.join(str(message).split())} (see `minitrans train --help`)") from None

    OneLineErrors.__name__ = parser_class.__name__
    return OneLineErrors


def _flat(namespace) -> dict:
    """A jsonargparse namespace (or dict) as ``{"a.b": value}``, tuples as lists."""
    items = namespace.as_dict() if hasattr(namespace, "as_dict") else dict(namespace)
    out = {}
    for key, value in items.items():
        if isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in _flat(value).items()})
        else:
            out[key] = list(value) if isinstance(value, tuple) else value
    return out


def _check_resumable(args: list[str]) -> None:
    """``--resume CKPT`` needs a training checkpoint (weights, optimizer and loop state), not an
    averaged or damaged one: say so before Lightning fails on a missing key."""
    path = None
    for i, arg in enumerate(args):
        if arg == "--ckpt_path" and i + 1 < len(args):
            path = args[i + 1]
        elif arg.startswith("--ckpt_path="):
            path = arg.split("=", 1)[1]
    if path in (None, "", "last", "best", "hpc", "registry"):
        return
    from minitrans.checkpoint import load_checkpoint, metadata

    checkpoint = load_checkpoint(path)
    meta = metadata(checkpoint)
    missing = [k for k in ("optimizer_states", "loops", "lr_schedulers") if k not in checkpoint]
    if missing:
        how = "it was written by `minitrans average`" if "averaged_from" in meta else \
            f"it lacks {', '.join(missing)}"
        raise CheckpointError(f"--resume {path}: cannot resume training from it ({how}). Resume from last.ckpt "
                              "or a step*.ckpt of the run; averaged checkpoints translate and evaluate only.")


class _DropAdverts(logging.Filter):
    """Lightning's log lines a minitrans user can do nothing with."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "litlogger" not in record.getMessage()


def _quiet_lightning(preparing: bool) -> None:
    """Quiet by default: no advert, no warning about Lightning's own internals; and for
    ``prepare`` (which trains nothing) none of the accelerator lines either."""
    for message in (r".*isinstance\(treespec, LeafSpec\)",  # Lightning's own use of a deprecated torch name
                    r"Precision .* is not supported by the model summary",  # its size estimate, not training
                    r"The number of training batches .* is smaller than the logging interval",
                    r"No seed found, seed set to"):
        warnings.filterwarnings("ignore", message=message)
    names = ["lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"]
    for name in names + (["lightning.fabric.utilities.seed"] if preparing else []):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropAdverts) for f in logger.filters):
            logger.addFilter(_DropAdverts())
        if preparing:
            logger.setLevel(logging.WARNING)


def lightning_main(args: list[str], run: bool = True):
    """Run (or, with ``run=False``, only build) the Lightning CLI on ``args``."""
    from minitrans.data.datamodule import TranslationDataModule
    from minitrans.training.module import TranslationModule

    cli_class, lr_monitor = _lightning_cli_class()
    if run:
        if args and args[0] == "train":
            args = ["fit", *args[1:]]
        args = ["--ckpt_path" if a == "--resume" else a for a in args]
        args = [f"--ckpt_path={a.split('=', 1)[1]}" if a.startswith("--resume=") else a for a in args]
        _check_resumable(args)
    trainer_defaults = {
        "use_distributed_sampler": False,  # TokenBatchSampler shards by rank itself
        "callbacks": [lr_monitor(logging_interval="step")],
        "default_root_dir": "runs",
    }
    # sys.argv must stay as it is: DDP's launcher re-runs it for the other ranks.
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
    _quiet_lightning(preparing=not run)
    try:
        return cli_class(TranslationModule, TranslationDataModule, args=args, run=run,
                         trainer_defaults=trainer_defaults, auto_configure_optimizers=False,
                         load_from_checkpoint_support=False, save_config_kwargs={"overwrite": True})
    except ValueError as err:
        # Lightning checks val_check_interval against the epoch only once data is loaded; a
        # small corpus meets it first (its epochs are a few batches), so say how to fix it.
        if "`val_check_interval`" in str(err) and "must be less than or equal" in str(err):
            raise UsageError(f"trainer.val_check_interval is more than the training batches of one epoch "
                             f"({str(err).split('training batches (', 1)[-1].split(')', 1)[0]}): set "
                             "trainer.check_val_every_n_epoch: null to count it across epochs, or validate "
                             "less often.") from None
        raise
