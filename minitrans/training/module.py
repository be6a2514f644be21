"""The LightningModule: a thin adapter between the Transformer and Lightning's Trainer.

It holds the loss (label-smoothed cross-entropy, padding ignored), the optimiser (Adam,
β = (0.9, 0.98), ε = 1e-9) with the paper's warm-up schedule (or a cosine one, or one that
knows the run's budget: :mod:`minitrans.training.budget`), validation loss, perplexity and BLEU on
greedy decodes, and it writes self-contained checkpoints.
"""

from __future__ import annotations

import logging
import math
import random
import time
from functools import partial
from typing import Any, Literal

import lightning as L
import torch
from lightning.pytorch.callbacks import Timer
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.trainer.states import TrainerFn

from minitrans.data.batching import Batch
from minitrans.checkpoint import (load_checkpoint, metadata, model_state, save_atomic, stored_config,
                                  stored_tokenizer, write_metadata)
from minitrans.model.config import ModelConfig
from minitrans.errors import ConfigError
from minitrans.decoding.kernels import for_decoding, refresh
from minitrans.training.loss import teacher_forced_loss
from minitrans.metrics import bleu_from_statistics, bleu_statistics
from minitrans.precision import fused_adamw
from minitrans.training.budget import spent
from minitrans.training.schedule import budgeted, cosine, inverse_sqrt
from minitrans.decoding.settings import DEFAULT_MAX_LEN_A, DEFAULT_MAX_LEN_B
from minitrans.decoding.search import greedy_search
from minitrans.text.tokenizer import Tokenizer
from minitrans.model.transformer import Transformer

log = logging.getLogger(__name__)


class TranslationModule(L.LightningModule):
    """Trains a :class:`~minitrans.model.transformer.Transformer`.

    Args:
        config: The model's :class:`~minitrans.model.config.ModelConfig` (``vocab_size`` is linked
            from the data module).
        label_smoothing: ε_ls of section 5.4 (paper: 0.1).
        lr_schedule: ``inverse_sqrt`` (the paper's), ``cosine``, or ``budget``: warm-up, then a
            linear decay that ends exactly when the run's budget (``trainer.max_time``,
            ``max_steps`` or ``max_epochs``) does, however many steps the machine makes.
        lr_factor: Multiplies the inverse-sqrt schedule (1.0 = the paper).
        warmup_steps: Warm-up steps (paper: 4000).
        peak_lr: Peak learning rate of the cosine and budget schedules.
        total_steps: Where the cosine schedule reaches ``min_lr`` (cosine only).
        min_lr: Final learning rate of the cosine and budget schedules.
        cooldown: The share of the budget the budget schedule decays over (1.0: from the end of
            warm-up; 0.2: hold the peak until 80%, then decay).
        weight_decay: AdamW-style decoupled weight decay on matrices (0 = plain Adam).
        betas: Adam's β1, β2 (paper: 0.9, 0.98).
        eps: Adam's ε (paper: 1e-9).
        val_bleu: Greedy-decode the validation sentences and log BLEU.
        max_len_a: Decoding length limit a · src_len + b (a).
        max_len_b: Decoding length limit a · src_len + b (b).
        sizing: How ``model_size: auto`` chose the model's dimensions for this machine (set by
            ``minitrans train``, :mod:`minitrans.training.sizing`; recorded in checkpoints).
        init_from: Start training from this checkpoint's weights (fine-tuning, a distillation
            student started from its teacher): same model shape and SentencePiece model
            (``data.tokenizer``); optimizer, schedule and step start afresh. Dropout may differ.
            Ignored when resuming with ``--resume``, whose checkpoint has the weights.
        anchor: With ``init_from``: add ``anchor · Σ (θ − θ₀)²`` over the weights to each step's
            loss per token, pulling the model toward the one it started from (L2 toward the
            parent: Barone et al. 2017, "Regularization techniques for fine-tuning in neural
            machine translation"), so that fine-tuning forgets less of what it knew. 0 = off.
    """

    def __init__(
        self,
        config: ModelConfig,
        label_smoothing: float = 0.1,
        lr_schedule: Literal["inverse_sqrt", "cosine", "budget"] = "inverse_sqrt",
        lr_factor: float = 1.0,
        warmup_steps: int = 4000,
        peak_lr: float = 1e-3,
        total_steps: int = 100_000,
        min_lr: float = 0.0,
        cooldown: float = 1.0,
        weight_decay: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.98),
        eps: float = 1e-9,
        val_bleu: bool = True,
        max_len_a: float = DEFAULT_MAX_LEN_A,
        max_len_b: int = DEFAULT_MAX_LEN_B,
        init_from: str | None = None,
        sizing: dict | None = None,
        anchor: float = 0.0,
    ) -> None:
        super().__init__()
        if isinstance(config, dict):  # rebuilt from a checkpoint's hyper_parameters
            config = ModelConfig.from_dict(config)
        if not 0.0 <= label_smoothing < 1.0:
            raise ConfigError(f"label_smoothing must lie in [0, 1), got {label_smoothing}.")
        if warmup_steps < 1:
            raise ConfigError(f"warmup_steps must be positive, got {warmup_steps}.")
        if not 0.0 < cooldown <= 1.0:
            raise ConfigError(f"cooldown is a share of the budget in (0, 1], got {cooldown}.")
        if anchor < 0 or (anchor > 0 and not init_from):
            raise ConfigError(f"anchor pulls the weights toward model.init_from's: it needs init_from and a value "
                              f"≥ 0, got {anchor} (init_from {init_from!r}).")
        self.save_hyperparameters(ignore=["config"])
        self.hparams["config"] = config.to_dict()  # plain dict: loadable with weights_only
        self.config = config
        self.model = for_decoding(Transformer(config))  # validation decodes with the decoder's kernels
        self.tokenizer: Tokenizer | None = None
        self._val: dict[int, dict] = {}  # per validation loader: hyps, refs, sums
        self._eval_names: list[str] | None = None  # a mixture's corpus names, one per loader
        self._val_select = "mean"
        self._last_step_time: float | None = None
        self._fit_started: float | None = None
        self._minutes_before = 0.0  # wall minutes of the fits a resumed run continues
        self._data_hparams: dict[str, Any] = {}
        self._spent = 0.0  # the share of the budget spent (lr_schedule budget), rank 0's clock
        self._anchor: dict[str, torch.Tensor] = {}  # init_from's weights, when anchor > 0 (never saved)

    # -- wiring ----------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None)
        if datamodule is not None and getattr(datamodule, "tokenizer", None) is not None:
            self.tokenizer = datamodule.tokenizer
            self._data_hparams = dict(datamodule.hparams)
            self._eval_names = getattr(datamodule, "eval_names", None)
            self._val_select = self._data_hparams.get("val_select") or "mean"
            if self.tokenizer.vocab_size != self.config.vocab_size:
                raise ConfigError(f"Tokenizer has {self.tokenizer.vocab_size} pieces but model.config.vocab_size "
                                 f"is {self.config.vocab_size}; they must be equal.")

    def _load_initial_weights(self, path: str) -> None:
        """Copy the weights of checkpoint ``path`` into the model (see ``init_from``)."""
        checkpoint = load_checkpoint(path)
        theirs = stored_config(checkpoint).to_dict()
        ours = self.config.to_dict()
        shape = [k for k in ours if k not in ("dropout", "attention_dropout") and ours[k] != theirs.get(k)]
        if shape:
            theirs_text = ", ".join(f"{k}={theirs.get(k)}" for k in shape)
            ours_text = ", ".join(f"{k}={ours[k]}" for k in shape)
            raise ConfigError(f"model.init_from {path} has another model shape ({theirs_text}; this run: "
                              f"{ours_text}): copy its model.config.")
        fingerprint = metadata(checkpoint)["tokenizer_fingerprint"]
        if self.tokenizer is not None and fingerprint["sha256"] != self.tokenizer.fingerprint()["sha256"]:
            raise ConfigError(f"model.init_from {path} was trained with another SentencePiece model than this "
                              f"run's data: set data.tokenizer: {path}")
        self.model.load_state_dict(model_state(checkpoint))
        log.info("Initialised the model from %s", path)
        self._set_anchor()

    def _set_anchor(self) -> None:
        """Keep a copy of the weights as they are now, for ``anchor``'s pull."""
        if self.hparams.anchor > 0:
            self._anchor = {name: p.detach().clone() for name, p in self.model.named_parameters()}

    def _anchor_penalty(self) -> torch.Tensor:
        """``Σ (θ − θ₀)²`` over the weights (0 without an anchor)."""
        if not self._anchor:
            return torch.zeros((), device=self.device)
        return sum(((p - self._anchor[name]) ** 2).sum() for name, p in self.model.named_parameters())

    # -- steps -----------------------------------------------------------------------
    def _losses(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Summed label-smoothed loss, summed NLL, and the number of target tokens."""
        return teacher_forced_loss(self.model, batch.src, batch.tgt_in, batch.tgt_out,
                                   self.hparams.label_smoothing, self.config.pad_id)

    def on_train_batch_start(self, batch: Batch, batch_idx: int) -> None:
        if self.hparams.get("lr_schedule") == "budget":  # read before this step's scheduler update
            self._spent = spent(self.trainer)

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        loss, nll, n_tokens = self._losses(batch)
        now = time.perf_counter()
        if self._last_step_time is not None and now > self._last_step_time:  # wall time per step, data loading included
            self.log("tok_s", n_tokens / (now - self._last_step_time), prog_bar=True, on_step=True)
        self._last_step_time = now
        self.log("train_loss", loss / n_tokens, prog_bar=True, on_step=True)
        self.log("train_nll", nll / n_tokens, on_step=True)
        if self._anchor:
            penalty = self._anchor_penalty()
            self.log("anchor_distance", penalty.detach(), on_step=True)
            return loss / n_tokens + self.hparams.anchor * penalty
        return loss / n_tokens

    def on_train_batch_end(self, outputs, batch, batch_idx: int) -> None:
        # Reaching max_steps mid-epoch ends training without a validation, so the last steps
        # would reach no checkpoint (last.ckpt stays at the previous validation). Asking to
        # stop makes Lightning validate first, as it does when max_time runs out.
        if 0 < self.trainer.max_steps <= self.trainer.global_step:
            self.trainer.should_stop = True

    def on_validation_epoch_start(self) -> None:
        self._val = {}
        refresh(self.model)  # the decoding kernels' stacked weights, from the weights of now

    def validation_step(self, batch: Batch | None, batch_idx: int, dataloader_idx: int = 0) -> None:
        if batch is None:  # a padding batch of sharded evaluation: this rank's share is done
            return
        state = self._val.setdefault(dataloader_idx, {"hyps": [], "refs": [], "sums": torch.zeros(3)})
        loss, nll, n_tokens = self._losses(batch)
        state["sums"] += torch.stack([loss.detach().cpu(), nll.cpu(), torch.tensor(float(n_tokens))])
        if self.hparams.val_bleu and self.tokenizer is not None and batch.refs is not None:
            hyps = greedy_search(self.model, batch.src, self.hparams.max_len_a, self.hparams.max_len_b)
            state["hyps"] += self.tokenizer.decode([h.tokens for h in hyps])
            state["refs"] += batch.refs

    def _eval_metrics(self) -> dict[str, float]:
        """Loss, perplexity and greedy BLEU of the finished validation/test pass.

        One loader: ``loss``, ``ppl``, ``bleu``. A mixture (one loader per corpus) adds
        ``loss/<name>``, ``ppl/<name>``, ``bleu/<name>``, and ``loss``/``bleu`` are the mean
        over corpora, or one corpus's values when ``data.val_select`` names it (``ppl`` is
        left out: a mean of perplexities means little).
        """
        n_loaders = len(self._eval_names) if self._eval_names else 1
        states = [self._val.get(i, {"hyps": [], "refs": [], "sums": torch.zeros(3)}) for i in range(n_loaders)]
        table = torch.tensor([[*s["sums"].tolist(), *bleu_statistics(s["hyps"], s["refs"])] for s in states],
                             dtype=torch.float64)  # (loaders, 3 loss sums + 11 BLEU statistics)
        if self.trainer.world_size > 1:  # each rank scored its share: add the shares up
            table = self.trainer.strategy.reduce(table.to(self.device), reduce_op="sum").cpu()
        per: dict[str, dict[str, float]] = {}
        for idx, sums in enumerate(table.tolist()):
            loss, nll, n = sums[:3]
            n = max(n, 1.0)
            row = {"loss": loss / n, "ppl": math.exp(min(nll / n, 50.0))}
            if sums[3] > 0:  # sentences were decoded
                row["bleu"] = bleu_from_statistics(sums[3:])
            name = self._eval_names[idx] if self._eval_names else None
            per[name] = row
        if None in per or not per:
            return per.get(None, {})
        out = {f"{k}/{name}": v for name, row in per.items() for k, v in row.items()}
        rows = [per[self._val_select]] if self._val_select in per else list(per.values())
        for k in ("loss", "bleu"):
            if all(k in r for r in rows):
                out[k] = sum(r[k] for r in rows) / len(rows)
        return out

    def on_fit_start(self) -> None:
        self._fit_started = time.perf_counter()
        # Here, not in setup: only now does trainer.ckpt_path say whether this fit resumes.
        if self.hparams.init_from and self.trainer.ckpt_path is None:
            self._load_initial_weights(self.hparams.init_from)
        elif self.hparams.anchor > 0:  # resumed: the anchor is still the weights the run started from
            start = model_state(load_checkpoint(self.hparams.init_from))
            self._anchor = {name: start[name].to(self.device) for name, _ in self.model.named_parameters()}

    def on_validation_epoch_end(self) -> None:
        if self._fit_started is not None and not self.trainer.sanity_checking:
            # Wall-clock minutes since fit began: learning curves against time, not steps.
            self.log("wall_minutes", self._wall_minutes(), sync_dist=True)
        # Each rank validated its share and _eval_metrics summed the shares' statistics, so the
        # values agree across ranks; sync_dist only keeps Lightning's DDP bookkeeping consistent.
        for key, value in self._eval_metrics().items():
            self.log(f"val_{key}", value, prog_bar=key in ("loss", "bleu"), sync_dist=True)
        self._last_step_time = None  # validation time is not training throughput

    def on_validation_end(self) -> None:
        # When max_time runs out during a validation, training stops here. Otherwise Lightning
        # trains one more step, its Timer stops it then, and it validates again: two checkpoints
        # one step apart among the best, which weakens top-k averaging (docs/results.md, seed variance).
        if self.trainer.state.fn != TrainerFn.FITTING or self.trainer.sanity_checking:
            return
        timer = next((c for c in self.trainer.callbacks if isinstance(c, Timer)), None)
        left = timer.time_remaining() if timer is not None else None
        if left is not None:
            out_of_time = self.trainer.strategy.broadcast(left <= 0)  # every rank stops, or none
            self.trainer.should_stop = self.trainer.should_stop or out_of_time

    def _wall_minutes(self) -> float:
        """Wall-clock minutes of training so far, those before a resume included (as
        ``max_time`` counts them)."""
        return self._minutes_before + (time.perf_counter() - self._fit_started) / 60

    def test_step(self, batch: Batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        self.validation_step(batch, batch_idx, dataloader_idx)

    def on_test_epoch_start(self) -> None:
        self.on_validation_epoch_start()

    def on_test_epoch_end(self) -> None:
        for key, value in self._eval_metrics().items():
            if not key.startswith("ppl"):
                self.log(f"test_{key.replace('bleu', 'bleu_greedy')}", value, sync_dist=True)

    # -- optimisation ----------------------------------------------------------------
    def lr_at(self, step: int) -> float:
        h = self.hparams
        if h.lr_schedule == "cosine":
            return cosine(step, h.peak_lr, h.warmup_steps, h.total_steps, h.min_lr)
        if h.lr_schedule == "budget":
            return budgeted(step, self._spent, h.peak_lr, h.warmup_steps, h.min_lr, h.get("cooldown", 1.0))
        return inverse_sqrt(step, self.config.d_model, h.warmup_steps, h.lr_factor)

    def configure_optimizers(self):
        h = self.hparams
        decay = [p for p in self.parameters() if p.dim() > 1]
        no_decay = [p for p in self.parameters() if p.dim() <= 1]
        groups = [{"params": decay, "weight_decay": h.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        optimizer = torch.optim.AdamW(groups, lr=1.0, betas=tuple(h.betas), eps=h.eps, fused=self._fused_optimizer())
        # LambdaLR multiplies lr=1.0 by the schedule; its step counter is 0-based.
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, partial(_shifted, self.lr_at))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def _fused_optimizer(self) -> bool:
        trainer = self._trainer  # None outside a Trainer
        if trainer is None:
            return fused_adamw(self.device.type, scaled=False, clips_gradients=False)
        return fused_adamw(self.device.type, scaled=str(trainer.precision) in ("16-mixed", "16"),
                           clips_gradients=bool(trainer.gradient_clip_val))

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None) -> None:
        """Clip as ``trainer.gradient_clip_val`` asks. Lightning's mixed-precision plugin refuses
        to clip for a fused optimizer, bf16 included (it cannot tell scaled gradients from
        unscaled ones); bf16 scales nothing, and a fused AdamW is never built where a scaler is
        (:func:`minitrans.precision.fused_adamw`), so the module clips a fused optimizer's
        gradients itself, as Lightning would (total 2-norm, or each value)."""
        if not gradient_clip_val or not optimizer.defaults.get("fused"):
            return self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)
        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if gradient_clip_algorithm == "value":  # Lightning's enum equals its string; None: by norm
            torch.nn.utils.clip_grad_value_(params, gradient_clip_val)
        else:
            torch.nn.utils.clip_grad_norm_(params, gradient_clip_val)

    # -- checkpoints -----------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["hyper_parameters"] = dict(checkpoint.get("hyper_parameters", {}))
        if "datamodule_hyper_parameters" in checkpoint:
            checkpoint["datamodule_hyper_parameters"] = dict(checkpoint["datamodule_hyper_parameters"])
        if self.tokenizer is None:
            raise RuntimeError("TranslationModule has no tokenizer: train it with TranslationDataModule.")
        write_metadata(
            checkpoint, self.config, self.tokenizer,
            data={**{k: v for k, v in self._data_hparams.items() if isinstance(v, (str, int, float, bool, type(None)))},
                  **({"corpora": [dict(c) for c in self._data_hparams["corpora"]]}
                     if self._data_hparams.get("corpora") else {})},
            decoding={"max_len_a": self.hparams.max_len_a, "max_len_b": self.hparams.max_len_b},
            wall_minutes=self._wall_minutes() if self._fit_started is not None else self._minutes_before,
            # The latest validation scores when this checkpoint was written (servers report them).
            validation={k: float(v) for k, v in (self._trainer.callback_metrics.items() if self._trainer else [])
                        if k.startswith("val_")},
            sizing=self.hparams.get("sizing"))
        # Random-number state, so that a resumed run draws the same dropout masks.
        checkpoint["rng"] = {"torch": torch.get_rng_state(), "python": list(random.getstate()[1])}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        rng = checkpoint.get("rng")
        if rng is not None:
            torch.set_rng_state(rng["torch"])
            random.setstate((3, tuple(rng["python"]), None))
        meta = metadata(checkpoint)
        self._minutes_before = meta.get("wall_minutes", 0.0)
        if not meta:
            return
        if self.tokenizer is None:
            self.tokenizer = stored_tokenizer(checkpoint)
            return
        # Resuming: the data module has tokenised the training data with its own SentencePiece
        # model. Training on with another one (the data or its settings changed since the run
        # began) would feed the weights ids that mean other pieces.
        theirs = meta["tokenizer_fingerprint"]
        ours = self.tokenizer.fingerprint()
        if ours["sha256"] != theirs["sha256"]:
            sizes = f"{theirs['vocab_size']} pieces in the checkpoint, {ours['vocab_size']} now" \
                if theirs.get("vocab_size") != ours.get("vocab_size") else "the same size"
            raise ConfigError(
                f"--resume: the training data now gives another SentencePiece model ({sizes}) than the one the "
                f"checkpoint was trained with (sha256 {ours['sha256'][:12]}, not {theirs['sha256'][:12]}): the "
                "data or the data settings changed since the run began. Resume with the run's own data, or keep "
                "the checkpoint's tokenizer with --data.tokenizer CKPT.")


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, made atomic with :func:`~minitrans.checkpoint.save_atomic`."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        save_atomic(checkpoint, path)


def _shifted(schedule, step0: int) -> float:
    return schedule(step0 + 1)
