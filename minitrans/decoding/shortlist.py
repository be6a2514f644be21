"""A vocabulary shortlist: the target pieces worth scoring for a batch's sources.

The output projection scores every target piece at every step, though a sentence about a dog
will not need most of them. Marian and the Bergamot browser translator score only a shortlist:
for each source piece the target pieces most often seen with it, plus the most frequent target
pieces. Here the lists come from the training pairs (:func:`build`):

* ``p(t | s)`` = pairs holding source piece ``s`` and target piece ``t`` / pairs holding ``s``
  (co-occurrence within a sentence pair, no alignment model); each source piece keeps its
  ``top_k`` pieces by it;
* the ``frequent`` target pieces found in the most pairs, eos and unk, for every batch (the
  special pieces are in no list).

A decoding batch then scores the union of its source pieces' lists (:meth:`Shortlist.vocabulary`):
the output projection, the log-sum-exp and the top-k run over that union only, and the
log-probabilities are normalised over it (as Marian does). Greedy search picks exactly what the
full vocabulary picks whenever that piece is in the list (tested); beam scores shift by the
normaliser. ``minitrans shortlist`` stores a shortlist in a copy of a checkpoint
(:func:`to_entry`); docs/speed.md measures its speed and BLEU.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from minitrans.errors import CheckpointError
from minitrans.text.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

#: Target pieces kept per source piece, and target pieces every batch scores: chosen on the
#: quickstart model (docs/speed.md).
TOP_K, FREQUENT = 50, 500
#: Training pairs counted at most (the first ones; a big corpus's lists settle long before).
MAX_PAIRS = 2_000_000
#: Pairs counted at once (bounds the memory of the counting).
CHUNK = 20_000


@dataclass
class Shortlist:
    """``table`` (V, top_k): each source piece's target pieces, -1 where it has fewer;
    ``always``: the pieces every batch scores (sorted)."""

    table: Tensor
    always: Tensor
    top_k: int
    frequent: int
    pairs: int

    @property
    def vocab_size(self) -> int:
        return self.table.size(0)

    def vocabulary(self, src: Tensor) -> Tensor:
        """The sorted target ids to score for sources ``src`` (any shape of source ids), on
        ``src``'s device: eos is always among them, ``<pad>`` and ``<s>`` never."""
        ids = torch.unique(src.detach().cpu())
        ids = ids[(ids >= 0) & (ids < self.vocab_size)]
        rows = self.table.index_select(0, ids).flatten()
        union = torch.unique(torch.cat([rows[rows >= 0].long(), self.always]))
        return union[(union != PAD_ID) & (union != BOS_ID)].to(src.device)

    def to_entry(self) -> dict:
        """The checkpoint entry (tensors and numbers only: ``weights_only`` loading reads it)."""
        return {"table": self.table.to(torch.int32), "always": self.always, "top_k": self.top_k,
                "frequent": self.frequent, "pairs": self.pairs}

    @classmethod
    def from_entry(cls, entry: dict, vocab_size: int, where: str = "the checkpoint") -> "Shortlist":
        """Read :meth:`to_entry`'s dictionary back, checking it fits the model's vocabulary."""
        try:
            table, always = entry["table"].long(), entry["always"].long()
            shortlist = cls(table, always, int(entry["top_k"]), int(entry["frequent"]), int(entry["pairs"]))
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            raise CheckpointError(f"{where}: its vocabulary shortlist is damaged ({err}); write a new one with "
                                  "`minitrans shortlist`, or decode without --shortlist.") from None
        if table.dim() != 2 or table.size(0) != vocab_size or bool((table >= vocab_size).any()) \
                or bool(((always < 0) | (always >= vocab_size)).any()):
            raise CheckpointError(f"{where}: its vocabulary shortlist does not fit the model's {vocab_size} "
                                  "pieces; write a new one with `minitrans shortlist`, or decode without --shortlist.")
        return shortlist


def build(pairs: Iterable[tuple[list[int], list[int]]], vocab_size: int, top_k: int = TOP_K,
          frequent: int = FREQUENT, max_pairs: int = MAX_PAIRS) -> Shortlist:
    """Count the co-occurrences of source and target pieces in ``pairs`` (source ids, target
    ids) and keep each source piece's ``top_k`` target pieces by ``p(t | s)``, plus the
    ``frequent`` target pieces found in the most pairs (see the module's docstring)."""
    if top_k < 1 or frequent < 0:
        raise ValueError(f"top_k must be ≥ 1 and frequent ≥ 0, got {top_k} and {frequent}")
    v = vocab_size
    keys = np.zeros(0, np.int64)  # s * V + t of every co-occurring pair of pieces seen so far
    counts = np.zeros(0, np.int64)
    src_pairs, tgt_pairs = np.zeros(v, np.int64), np.zeros(v, np.int64)  # pairs holding each piece
    chunk: list[np.ndarray] = []
    n = 0

    def merge() -> None:
        nonlocal keys, counts
        if not chunk:
            return
        new_keys, new_counts = np.unique(np.concatenate(chunk), return_counts=True)
        merged, where = np.unique(np.concatenate([keys, new_keys]), return_inverse=True)
        counts = np.bincount(where, np.concatenate([counts, new_counts]), len(merged)).astype(np.int64)
        keys = merged
        chunk.clear()

    for src, tgt in pairs:
        if n >= max_pairs:
            break
        s, t = np.unique(np.asarray(src, np.int64)), np.unique(np.asarray(tgt, np.int64))
        s, t = s[(s > EOS_ID) & (s < v)], t[(t > EOS_ID) & (t < v)]  # the specials are no one's translation
        src_pairs[s] += 1
        tgt_pairs[t] += 1
        chunk.append((s[:, None] * v + t[None, :]).ravel())
        n += 1
        if n % CHUNK == 0:
            merge()
    merge()
    source, target = keys // v, keys % v
    p = counts / np.maximum(src_pairs[source], 1)  # p(t | s)
    # Each source piece's top_k targets: sort by (source, -p, target) and keep the first top_k of each.
    order = np.lexsort((target, -p, source))
    source, target = source[order], target[order]
    starts = np.searchsorted(source, np.arange(v))
    rank = np.arange(len(source)) - starts[source]
    keep = rank < top_k
    table = np.full((v, top_k), -1, np.int64)
    table[source[keep], rank[keep]] = target[keep]
    common = np.argsort(-tgt_pairs, kind="stable")[:frequent]
    common = common[tgt_pairs[common] > 0]
    always = torch.unique(torch.tensor(np.concatenate([common, [EOS_ID, UNK_ID]]), dtype=torch.long))
    return Shortlist(torch.from_numpy(table), always, top_k, frequent, n)
