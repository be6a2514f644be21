"""The LightningDataModule: corpus → SentencePiece → tokenised Arrow cache → batches.

``prepare_data`` does the one-time disk work (read and clean the corpus, train the joint
SentencePiece model on the training split, tokenise every split with ``datasets.map``,
save the splits as Arrow). It is keyed by the settings and the raw files' sizes and times,
so a second run with the same settings reuses the cache in seconds. ``setup`` only loads.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from minitrans.data import cache as datacache
from minitrans.data.corpus import data_dir_for
from minitrans.data.batching import ArrowPairDataset, PairDataset, SampledPairDataset, TokenBatchSampler, collate
from minitrans.errors import DataError
from minitrans.data.stream import numeric_column
from minitrans.text import languages
from minitrans.data.sources import source_files
from minitrans.data.mixture import CorpusSpec, check_specs, epoch_rows, probabilities
from minitrans.text.tokenizer import Tokenizer

log = logging.getLogger(__name__)


def _lengths(ds: datasets.Dataset) -> np.ndarray:
    """Padded cost of each example (the longer side + 1, as :meth:`PairDataset.lengths`), read
    from the length columns: the token ids stay on disk."""
    return np.maximum(numeric_column(ds, "src_len"), numeric_column(ds, "tgt_len")) + 1


def read_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """A SentencePiece model from a ``.model`` file or from a minitrans checkpoint."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"data.tokenizer {path}: no such file. Pass a SentencePiece .model file or a minitrans "
                        "checkpoint (.ckpt).")
    if path.suffix == ".ckpt":
        from minitrans.checkpoint import load_checkpoint, stored_tokenizer

        return stored_tokenizer(load_checkpoint(path))
    try:
        return Tokenizer.load(path)
    except Exception as err:  # SentencePiece raises RuntimeError/TypeError on foreign bytes
        raise DataError(f"data.tokenizer {path} is not a SentencePiece model ({type(err).__name__}): pass the "
                        "spm.model of a prepared cache or a minitrans checkpoint (.ckpt).") from None


class ResumableDataLoader(DataLoader):
    """A DataLoader whose position in the epoch is saved in checkpoints.

    Lightning stores ``state_dict()`` of loaders that have one and hands it back on resume;
    the token-batch sampler then skips the batches the interrupted run already trained on,
    so a resumed run sees exactly the batches the uninterrupted run would have seen.
    """

    def __init__(self, *args, progress=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._progress = progress  # callable -> batches completed in the current epoch

    def state_dict(self) -> dict[str, int]:
        done = self._progress() if self._progress is not None else 0
        return {"epoch": self.batch_sampler.epoch, "batches_done": done}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.batch_sampler.set_epoch(state["epoch"])
        self.batch_sampler.skip = state["batches_done"]


class TranslationDataModule(L.LightningDataModule):
    """English–French data for training and evaluation, in either direction.

    Args:
        dataset: ``multi30k``, ``tatoeba``, ``tsv``, ``aligned`` or ``hub`` (see
            :mod:`minitrans.data.corpus`), or ``mixture`` of the ``corpora`` (see :mod:`minitrans.data.mixture`).
        data_dir: Directory of the raw corpora (default: ``$MINITRANS_DATA``, else ``data/raw``);
            given, it wins over the environment.
        files: For ``tsv``/``aligned``: split name -> path (tsv) or path prefix (aligned).
        hub_id: For ``hub``: the Hugging Face dataset id.
        cache_dir: Where cleaned, tokenised splits and the SentencePiece model are cached.
        vocab_size: Size of the joint SentencePiece vocabulary.
        spm_model_type: ``unigram`` or ``bpe``.
        max_len: Training pairs with a side longer than this many pieces are dropped.
        max_tokens: Token budget of a training batch (sentences × longest side).
        eval_max_tokens: Token budget of a validation/test batch.
        val_max_sentences: Validation (loss and greedy BLEU) uses the first this many
            sentences of the validation split, to keep validation fast on CPU.
        test_split: Split used by ``trainer.test``.
        valid_size: Tatoeba/tsv: English sentences in the made validation split.
        test_size: Tatoeba/tsv: English sentences in the made test split.
        seed: Seed of the Tatoeba split and of the batch order.
        num_workers: DataLoader worker processes (0 = load in the training process).
        corpora: For ``mixture``: the components, each a :class:`~minitrans.data.mixture.CorpusSpec`
            (name, dataset, weight, files, hub_id, valid_size, test_size).
        temperature: For ``mixture`` without weights: sample corpus i with probability
            ∝ n_i^(1/T) (1 = by size; larger flattens towards uniform).
        val_select: For ``mixture``: ``val_bleu`` (what checkpointing and early stopping
            watch) is the ``mean`` of the per-corpus ``val_bleu/<name>``, or one corpus's.
        subword_alpha: Subword regularisation: when > 0, each training pair is segmented
            afresh every time it is drawn, sampling SentencePiece segmentations with this
            smoothing (0.1-0.2 is usual; :class:`~minitrans.data.batching.SampledPairDataset`).
            Validation and test keep the deterministic segmentation.
        tokenizer: Use this SentencePiece model instead of training one: a ``.model`` file or a
            minitrans checkpoint (its stored model). Needed to fine-tune a checkpoint on new
            data (``model.init_from``): the same id must mean the same piece.
        hub_streaming: For ``hub`` corpora: read them with ``datasets``' streaming mode, so
            that only minitrans's cache holds a copy of a large corpus (False: let
            ``datasets`` download and convert it into its own cache first, which a rerun
            reuses without the network). The prepared splits are the same either way.
        direction: ``en-fr`` (English source) or ``fr-en`` (French source, the reverse model of
            the same corpora, splits and joint vocabulary). Evaluation splits are then one row
            per French sentence with all its English references
            (:func:`~minitrans.data.corpus.reverse_split`); the checkpoint records the direction,
            and translate, evaluate, serve and the exports read it.
    """

    def __init__(
        self,
        dataset: str = "multi30k",
        data_dir: str | None = None,
        files: dict[str, str] | None = None,
        hub_id: str | None = None,
        cache_dir: str = "data/cache",
        vocab_size: int = 8000,
        spm_model_type: str = "unigram",
        max_len: int = 128,
        max_tokens: int = 4096,
        eval_max_tokens: int = 8000,
        val_max_sentences: int = 500,
        test_split: str = "test",
        valid_size: int = 1000,
        test_size: int = 2000,
        seed: int = 1,
        num_workers: int = 0,
        corpora: list[CorpusSpec] | None = None,
        temperature: float = 1.0,
        val_select: str = "mean",
        subword_alpha: float = 0.0,
        tokenizer: str | None = None,
        hub_streaming: bool = True,
        direction: str = languages.DEFAULT,
    ) -> None:
        super().__init__()
        languages.parse(direction)  # a ConfigError naming the choices
        if not 0.0 <= subword_alpha <= 1.0:
            raise DataError(f"data.subword_alpha must lie in [0, 1] (0 = off; 0.1-0.2 is usual), got {subword_alpha}.")
        if dataset == "mixture":
            corpora = check_specs(corpora or [])
            if val_select != "mean" and val_select not in [c.name for c in corpora]:
                raise DataError(f"data.val_select {val_select!r} is neither 'mean' nor one of the corpus names "
                                f"{[c.name for c in corpora]}.")
            probabilities([1] * len(corpora), [c.weight for c in corpora], temperature)  # checks temperature
        elif corpora:
            raise DataError(f"data.corpora is set but data.dataset is {dataset!r}: set data.dataset to 'mixture'.")
        self.save_hyperparameters()
        self.hparams["corpora"] = [c.to_dict() for c in corpora] if corpora else None
        self.tokenizer: Tokenizer | None = None
        self._given_tokenizer: Tokenizer | None = None  # data.tokenizer, once read
        self.splits: dict[str, datasets.Dataset] = {}
        self._train_loader: ResumableDataLoader | None = None
        self._pairs: dict[tuple[str, int | None], PairDataset] = {}

    @classmethod
    def from_settings(cls, data: dict[str, Any], data_dir: str | None = None) -> "TranslationDataModule":
        """The data module a checkpoint was trained with, from its recorded ``data`` settings
        (``data_dir``, the folder the user gave, wins; else ``MINITRANS_DATA``; else the recorded one)."""
        names = set(inspect.signature(cls.__init__).parameters) - {"self"}
        settings = {k: v for k, v in data.items() if k in names}
        if settings.get("corpora"):
            settings["corpora"] = [CorpusSpec(**c) for c in settings["corpora"]]
        settings["data_dir"] = data_dir_for(data_dir, settings.get("data_dir"))
        return cls(**settings)

    def train_pairs(self) -> Iterator[tuple[list[int], list[int]]]:
        """The training split's ``(source ids, target ids)``, read from the cache in blocks."""
        for block in self.splits["train"].select_columns(["src_ids", "tgt_ids"]).iter(batch_size=10_000):
            yield from zip(block["src_ids"], block["tgt_ids"])

    # -- the cache -------------------------------------------------------------------
    @property
    def corpora(self) -> list[CorpusSpec]:
        """The mixture's components (empty for a single corpus)."""
        return [CorpusSpec(**c) for c in self.hparams.corpora or []]

    @property
    def is_mixture(self) -> bool:
        """A weighted mixture (``data.dataset: mixture``), rather than one corpus."""
        return self.hparams.dataset == "mixture"

    @property
    def components(self) -> list[CorpusSpec]:
        """What this module reads: a mixture's corpora, or a single corpus as a mixture of one
        whose name is empty — its splits, metrics and cache keep their single-corpus names
        (``train``, ``val_bleu``), so users' caches and logs stay valid. What a mixture does on
        top (decontamination across components, weighted epoch sampling, the weighted tokenizer
        sample, ``corpora`` in the cache key) asks :attr:`is_mixture`: for one corpus each would
        change its data, batches or cache key."""
        if self.is_mixture:
            return self.corpora
        h = self.hparams
        return [CorpusSpec("", h.dataset, files=h.files, hub_id=h.hub_id, valid_size=h.valid_size,
                           test_size=h.test_size)]

    split_key = staticmethod(datacache.split_key)

    def _source_files(self) -> list[Path]:
        h = self.hparams
        return [p for c in self.components for p in source_files(c.dataset, h.data_dir, c.files, c.hub_id)]

    def eval_sets(self, split: str) -> list[tuple[str | None, str]]:
        """``(corpus name, key in self.splits)`` of each evaluation set of ``split``: one per
        mixture component, or ``(None, split)`` for a single corpus."""
        return [(c.name or None, self.split_key(c, split)) for c in self.components]

    @property
    def cache_path(self) -> Path:
        """``cache_dir/<dataset>-<hash of settings and raw files>``."""
        h = self.hparams
        given = self.given_tokenizer().fingerprint()["sha256"] if h.tokenizer else None
        stamp = datacache.settings_stamp(h, self.is_mixture, languages.DEFAULT, given)
        return datacache.cache_path(h.cache_dir, h.dataset, stamp, self._source_files())

    def given_tokenizer(self) -> Tokenizer | None:
        """The SentencePiece model named by ``data.tokenizer`` (None when one is to be trained)."""
        path = self.hparams.tokenizer
        if path and self._given_tokenizer is None:
            self._given_tokenizer = read_tokenizer(path)
            if self._given_tokenizer.vocab_size != self.hparams.vocab_size:
                raise DataError(f"data.tokenizer {path} has {self._given_tokenizer.vocab_size} pieces but "
                                f"data.vocab_size is {self.hparams.vocab_size}: set data.vocab_size to "
                                f"{self._given_tokenizer.vocab_size}.")
        return self._given_tokenizer

    def prepare_data(self) -> None:
        """Build the cache unless it exists (one process only under DDP; :mod:`minitrans.data.cache`)."""
        path = self.cache_path
        if datacache.is_ready(path):
            log.info("Reusing cached data in %s", path)
            return
        log.info("Preparing %s (cache %s)...", self.hparams.dataset, path)
        plan = self._plan()
        if not datacache.build(path, lambda folder, scratch: datacache.fill(plan, folder, scratch),
                               self._source_files()):
            log.info("Another process prepared %s at the same time; using its cache.", path)
            return
        done = datacache.read_report(path)
        log.info("Prepared %s in %.1fs: %s", self.hparams.dataset, done["seconds"], done["cleaning"])

    def _plan(self) -> datacache.Plan:
        """What this module's cache is built from (:func:`minitrans.data.cache.fill`)."""
        h = self.hparams
        return datacache.Plan(tuple(self.components), self.is_mixture, h.data_dir, h.seed, h.temperature, h.vocab_size,
                              h.spm_model_type, h.max_len, h.hub_streaming, self.languages, self.given_tokenizer())

    @property
    def languages(self) -> tuple[str, str]:
        """``(source, target)`` language codes of ``data.direction``."""
        return languages.parse(self.hparams.direction)

    def setup(self, stage: str | None = None) -> None:
        if self.tokenizer is not None:
            return
        path = self.cache_path
        if not datacache.is_ready(path):
            self.prepare_data()
        self.tokenizer = Tokenizer.load(path / "spm.model")
        for info in sorted(path.glob("**/dataset_info.json")):
            split_dir = info.parent
            if datacache.is_empty_split(split_dir):  # kept by an older minitrans: an absent split
                continue
            self.splits[split_dir.relative_to(path).as_posix()] = datasets.load_from_disk(str(split_dir))
        if "train" not in self.splits:  # a mixture: training draws from every component's train split
            self.splits["train"] = datasets.concatenate_datasets([self.splits[self.split_key(c, "train")]
                                                                  for c in self.components])
        for _, key in self.eval_sets(self.hparams.test_split) if stage not in ("fit", "validate") else ():
            if key not in self.splits:  # a test split is needed to test, not to train
                raise DataError(f"data.test_split {self.hparams.test_split!r} is not one of "
                                f"{sorted(k.rsplit('/', 1)[-1] for k in self.splits)}.")

    @property
    def report(self) -> dict:
        return datacache.read_report(self.cache_path)

    # -- loaders ---------------------------------------------------------------------
    def pair_dataset(self, split: str, limit: int | None = None) -> PairDataset | ArrowPairDataset:
        """A split as a map-style dataset (built once per split and limit, then reused): the
        training split read from the Arrow cache batch by batch (its size is unbounded), the
        evaluation splits as Python lists, and sampled segmentations from the text."""
        key = (split, limit)
        if key not in self._pairs:
            ds = self.splits[split]
            if limit is not None and limit < len(ds):
                ds = ds.select(range(limit))
            refs = datacache.column(ds, "refs") if not split.endswith("train") else None
            if split == "train" and self.hparams.subword_alpha > 0:
                self._pairs[key] = SampledPairDataset(
                    datacache.column(ds, "src_ids"), datacache.column(ds, "tgt_ids"),
                    *(datacache.column(ds, lang) for lang in self.languages),
                    self.tokenizer, self.hparams.subword_alpha, self.hparams.max_len - 1)
            elif split == "train":
                self._pairs[key] = ArrowPairDataset(ds)
            else:
                self._pairs[key] = PairDataset(datacache.column(ds, "src_ids"), datacache.column(ds, "tgt_ids"), refs)
        return self._pairs[key]

    def train_sampler(self) -> TokenBatchSampler:
        world, rank = self._rank()
        rows = None
        if self.is_mixture:  # weighted epochs (one corpus: every pair once per epoch, as before)
            sizes, probs = self.mixture_sizes(), self.mixture_probabilities()
            rows = lambda epoch: epoch_rows(sizes, probs, self.hparams.seed + epoch)  # noqa: E731
        return TokenBatchSampler(_lengths(self.splits["train"]), self.hparams.max_tokens, shuffle=True, seed=self.hparams.seed,
                                 num_replicas=world, rank=rank, epoch_rows=rows)

    def mixture_sizes(self) -> list[int]:
        """Training pairs of each mixture component (after cleaning), in ``corpora`` order."""
        return [len(self.splits[f"{c.name}/train"]) for c in self.corpora]

    def mixture_probabilities(self) -> list[float]:
        """Sampling probability of each mixture component, in ``corpora`` order."""
        return probabilities(self.mixture_sizes(), [c.weight for c in self.corpora], self.hparams.temperature)

    def train_dataloader(self) -> DataLoader:
        data = self.pair_dataset("train")
        if isinstance(data, SampledPairDataset):  # the sampled segmentations follow the seed
            import sentencepiece

            sentencepiece.set_random_generator_seed(self.hparams.seed)
        progress = None
        if self.trainer is not None:
            trainer = self.trainer
            progress = lambda: trainer.fit_loop.epoch_loop.batch_progress.current.completed  # noqa: E731
        self._train_loader = ResumableDataLoader(
            data, batch_sampler=self.train_sampler(), collate_fn=collate, num_workers=self.hparams.num_workers,
            progress=progress, generator=self._generator())
        return self._train_loader

    def _rank(self) -> tuple[int, int]:
        """``(world size, this process's rank)``: ``(1, 0)`` outside a distributed run."""
        if self.trainer is None:
            return 1, 0
        return self.trainer.world_size, self.trainer.global_rank

    def _eval_loader(self, split: str, limit: int | None = None) -> DataLoader:
        """Evaluation batches, sorted by length; under DDP each rank takes its share of them
        (the model sums the BLEU statistics of all ranks)."""
        data = self.pair_dataset(split, limit)
        world, rank = self._rank()
        sampler = TokenBatchSampler(data.lengths(), self.hparams.eval_max_tokens, shuffle=False,
                                    num_replicas=world, rank=rank, keep_all=True)
        return DataLoader(data, batch_sampler=sampler, collate_fn=collate, num_workers=self.hparams.num_workers,
                          generator=self._generator())

    def _generator(self) -> torch.Generator:
        # Each DataLoader iterator draws a base seed; from its own generator it leaves the
        # global RNG (dropout masks) untouched, so a resumed run draws the same masks.
        return torch.Generator().manual_seed(self.hparams.seed)

    def val_dataloader(self) -> DataLoader | list[DataLoader]:
        """The validation loader; a mixture has one per component, in ``eval_names`` order."""
        loaders = [self._eval_loader(key, self.hparams.val_max_sentences) for _, key in self.eval_sets("valid")]
        return loaders if self.eval_names else loaders[0]

    def test_dataloader(self) -> DataLoader | list[DataLoader]:
        loaders = [self._eval_loader(key) for _, key in self.eval_sets(self.hparams.test_split)]
        return loaders if self.eval_names else loaders[0]

    @property
    def eval_names(self) -> list[str] | None:
        """Names of the evaluation loaders of a mixture (None for a single corpus)."""
        names = [c.name for c in self.components]
        return names if all(names) else None

    # -- statistics ------------------------------------------------------------------
    def statistics(self) -> dict[str, Any]:
        """Pairs per split, mean and 95th-percentile pieces per side, vocabulary size and
        coverage, and the padding ratio of the training batches."""
        out: dict[str, Any] = {"dataset": self.hparams.dataset, "cache": str(self.cache_path),
                               "vocab_size": self.tokenizer.vocab_size, "splits": {}}
        for name, split in self.splits.items():
            row: dict[str, Any] = {"pairs": len(split)}
            for side in ("src", "tgt"):
                lens = np.sort(numeric_column(split, f"{side}_len"))
                row[f"{side}_mean"] = round(float(lens.mean()), 1) if len(lens) else 0
                row[f"{side}_p95"] = int(lens[int(0.95 * (len(lens) - 1))]) if len(lens) else 0
            out["splits"][name] = row
        text = [t for _, key in self.eval_sets("valid") for col in ("en", "fr")
                for t in datacache.column(self.splits[key], col)]
        out["byte_fallback_rate_valid"] = round(self.tokenizer.byte_fallback_rate(text), 5)
        if self.is_mixture:
            out["mixture"] = {c.name: {"train_pairs": n, "sampling_probability": round(p, 4)}
                              for c, n, p in zip(self.corpora, self.mixture_sizes(), self.mixture_probabilities())}
        sampler = self.train_sampler()
        out["train_padding_ratio"] = round(sampler.padding_ratio(), 4)
        out["train_batches_per_epoch"] = len(sampler)
        out["cleaning"] = self.report["cleaning"]
        return out
