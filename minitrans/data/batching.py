"""From token ids to padded batches: collation and a length-bucketed token-budget sampler.

Sentences of similar length are batched together so little compute goes to padding, and a
batch holds as many sentences as fit a budget of ``max_tokens`` padded positions
(``n_sentences × longest side``) — the way fairseq and JoeyNMT batch by tokens.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset, Sampler

from minitrans.errors import ConfigError
from minitrans.model.masks import pad
from minitrans.text.vocab import BOS_ID, EOS_ID


class Batch(NamedTuple):
    """One training/evaluation batch.

    Attributes:
        src: Source ids + eos, right-padded (B, S).
        tgt_in: bos + target ids, right-padded (B, T): the decoder input.
        tgt_out: target ids + eos, right-padded (B, T): what the decoder must predict.
        refs: All French references of each sentence (evaluation splits), else None.
        index: Row number of each sentence in its split.
    """

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    refs: list[list[str]] | None = None
    index: list[int] | None = None


def collate(examples: list[dict]) -> Batch | None:
    """Examples ``{"src_ids", "tgt_ids", ["refs"], ["index"]}`` -> :class:`Batch`; no examples (a
    rank's padding batch in sharded evaluation) -> ``None``."""
    if not examples:
        return None
    src = pad([e["src_ids"] + [EOS_ID] for e in examples])
    tgt_in = pad([[BOS_ID] + e["tgt_ids"] for e in examples])
    tgt_out = pad([e["tgt_ids"] + [EOS_ID] for e in examples])
    refs = [e["refs"] for e in examples] if "refs" in examples[0] else None
    index = [e["index"] for e in examples] if "index" in examples[0] else None
    return Batch(src, tgt_in, tgt_out, refs, index)


class PairDataset(Dataset):
    """Tokenised pairs held as Python lists: indexing costs nothing on the training path."""

    def __init__(self, src_ids: list[list[int]], tgt_ids: list[list[int]],
                 refs: list[list[str]] | None = None) -> None:
        if len(src_ids) != len(tgt_ids):
            raise ConfigError(f"{len(src_ids)} sources but {len(tgt_ids)} targets.")
        self.src_ids, self.tgt_ids, self.refs = src_ids, tgt_ids, refs

    def __len__(self) -> int:
        return len(self.src_ids)

    def __getitem__(self, i: int) -> dict:
        item = {"src_ids": self.src_ids[i], "tgt_ids": self.tgt_ids[i], "index": i}
        if self.refs is not None:
            item["refs"] = self.refs[i]
        return item

    def lengths(self) -> list[int]:
        """Padded cost of each example: the longer side + 1 (bos or eos)."""
        return [max(len(s), len(t)) + 1 for s, t in zip(self.src_ids, self.tgt_ids)]


class ArrowPairDataset(Dataset):
    """Tokenised training pairs read from the Arrow cache a batch at a time (``__getitems__``: one
    Arrow ``take`` per batch), so a run's memory does not grow with the corpus: the ids of a corpus
    of millions of pairs stay in the memory-mapped cache instead of Python lists.

    Args:
        table: A ``datasets.Dataset`` with ``src_ids`` and ``tgt_ids`` columns.
    """

    def __init__(self, table) -> None:
        self.table = table.select_columns(["src_ids", "tgt_ids"])

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, i: int) -> dict:
        return {**self.table[i], "index": i}

    def __getitems__(self, indices: list[int]) -> list[dict]:
        rows = self.table[indices]  # {"src_ids": [...], "tgt_ids": [...]}
        return [{"src_ids": s, "tgt_ids": t, "index": i} for s, t, i in zip(rows["src_ids"], rows["tgt_ids"], indices)]


class TokenBatchSampler(Sampler[list[int]]):
    """Length-bucketed batches of at most ``max_tokens`` padded positions.

    Each epoch: shuffle (seed + epoch), stable-sort by length so equal lengths stay in
    random order, cut into batches that fit the budget, shuffle the batch order. With
    ``num_replicas > 1`` each rank takes every ``num_replicas``-th batch, and all ranks
    get the same number of batches (DDP needs equal step counts).

    Args:
        lengths: Padded cost of each example (see :meth:`PairDataset.lengths`).
        max_tokens: Budget of ``n_sentences × longest`` per batch. A single example over
            budget gets a batch of its own.
        shuffle: Shuffle within length buckets and the batch order (training); without,
            batches come sorted by length (evaluation).
        seed: Base seed; epoch ``e`` uses ``seed + e``.
        num_replicas, rank: Data-parallel world size and this process's rank.
        max_sentences: Optional cap on sentences per batch.
        epoch_rows: Optional ``epoch -> row numbers`` of the examples an epoch draws (rows
            may repeat: a corpus mixture oversamples its small components); default: every
            example once.
        keep_all: With ``num_replicas > 1``, serve every batch (evaluation: each rank scores its
            share, nothing is dropped) and give the ranks with fewer batches empty ones (``[]``,
            collated to ``None``) so that all ranks still take the same number of steps.
    """

    def __init__(self, lengths: Sequence[int], max_tokens: int, shuffle: bool = True, seed: int = 0,
                 num_replicas: int = 1, rank: int = 0, max_sentences: int | None = None,
                 epoch_rows: Callable[[int], Sequence[int]] | None = None, keep_all: bool = False) -> None:
        if max_tokens < 1:
            raise ConfigError(f"max_tokens must be positive, got {max_tokens}.")
        self.lengths = np.asarray(lengths, dtype=np.int64)  # (n,): no Python int per example
        self.max_tokens = max_tokens
        self.max_sentences = max_sentences
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch_rows = epoch_rows
        self.keep_all = keep_all
        self.epoch = 0
        self.skip = 0  # batches to skip once, when resuming mid-epoch
        self._cached: tuple[int, list[np.ndarray]] | None = None  # (epoch, batches as views of one array)

    def set_epoch(self, epoch: int) -> None:
        """Called by Lightning at the start of every epoch."""
        self.epoch = epoch

    def all_batches(self) -> list[list[int]]:
        """Batches of every rank for the current epoch, in the order they are served."""
        return [batch.tolist() for batch in self._epoch_batches()]

    def _epoch_batches(self) -> list[np.ndarray]:
        if self._cached is None or self._cached[0] != self.epoch:
            self._cached = (self.epoch, self._make_batches())
        return self._cached[1]

    def _make_batches(self) -> list[np.ndarray]:
        """The epoch's batches as slices of one (n,) array of row numbers: 8 bytes per example
        rather than Python lists of Python ints, and the same batches for a seed."""
        order = (np.asarray(self.epoch_rows(self.epoch), dtype=np.int64) if self.epoch_rows
                 else np.arange(len(self.lengths), dtype=np.int64))
        rng = random.Random(self.seed + self.epoch)
        if self.shuffle:
            rng.shuffle(order)  # the swaps it makes on a list: the same permutation for a seed
        order = order[np.argsort(self.lengths[order], kind="stable")]  # ties keep their random order
        # Sorted, so a batch's longest example is its last: it may grow while (size + 1) ×
        # length fits the budget. Walk the runs of equal length (at most max_len of them),
        # filling the open batch up to each run's capacity, rather than example by example.
        lengths, run_starts = np.unique(self.lengths[order], return_index=True)
        starts, count = [0], 0  # first row of each batch; examples in the open batch
        for length, a, b in zip(lengths.tolist(), run_starts.tolist(), [*run_starts[1:].tolist(), len(order)]):
            capacity = min(self.max_tokens // max(length, 1), self.max_sentences or len(order))
            capacity = max(capacity, 1)  # an example over budget gets a batch of its own
            k = a
            while k < b:
                if count >= capacity:
                    starts.append(k)
                    count = 0
                take = min(capacity - count, b - k)
                count, k = count + take, k + take
        bounds = [*starts, len(order)]
        batches = [order[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
        if self.shuffle:
            rng.shuffle(batches)
        return batches

    def _my_batches(self) -> list[np.ndarray]:
        batches = self._epoch_batches()
        if self.num_replicas > 1:
            mine = batches[self.rank::self.num_replicas]
            if self.keep_all:  # ceil(len / replicas) steps on every rank
                return mine + [np.empty(0, dtype=np.int64)] * (-(-len(batches) // self.num_replicas) - len(mine))
            return mine[:len(batches) // self.num_replicas]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._my_batches()
        skip, self.skip = self.skip, 0
        return (batch.tolist() for batch in batches[skip:])

    def __len__(self) -> int:
        # The whole epoch, skipped batches included: Lightning counts a resumed epoch's
        # batches from where it stopped, so the epoch must keep its full length.
        return len(self._my_batches())

    def padding_ratio(self) -> float:
        """Share of padded positions (on the longer side) across this epoch's batches."""
        real = padded = 0
        for batch in self._epoch_batches():
            lens = self.lengths[batch]
            real += int(lens.sum())
            padded += int(lens.max()) * len(lens)
        return 1.0 - real / max(padded, 1)


class SampledPairDataset(PairDataset):
    """Training pairs segmented afresh each time they are drawn (subword regularisation,
    Kudo 2018): SentencePiece samples one of the segmentations of each sentence
    (``enable_sampling``, smoothing ``alpha``) instead of always the best one.

    Batching still uses the deterministic segmentation's lengths (a sampled one is usually a
    few pieces longer), and samples are cut to ``max_len`` pieces. Evaluation keeps the
    deterministic segmentation.
    """

    def __init__(self, src_ids: list[list[int]], tgt_ids: list[list[int]], en: list[str], fr: list[str],
                 tokenizer, alpha: float, max_len: int) -> None:
        super().__init__(src_ids, tgt_ids)
        self.en, self.fr, self.tokenizer, self.alpha, self.max_len = en, fr, tokenizer, alpha, max_len

    def __getitem__(self, i: int) -> dict:
        src, tgt = self.tokenizer.encode_sampled([self.en[i], self.fr[i]], self.alpha)
        return {"src_ids": src[: self.max_len], "tgt_ids": tgt[: self.max_len], "index": i}

