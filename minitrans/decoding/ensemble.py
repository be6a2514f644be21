"""Ensemble decoding: several models, one search.

:class:`Ensemble` looks to :mod:`minitrans.decoding.search` like one Transformer: ``encode`` gives
each member's encoder output, ``init_cache`` one key/value cache per member, and ``decode``
the members' next-token distributions averaged in probability space at every step,
``log(1/M · Σ_m p_m(y | ·))`` (fairseq's ensemble rule; its result is already normalised,
so the search's log-softmax leaves it unchanged). Beams, length limits and the KV caches work
as for one model: each member keeps its own cache, reordered with the same rows.

Members must share the tokenizer (ids mean the same pieces); their sizes may differ.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from minitrans.model.cache import DecoderCache
from minitrans.errors import CheckpointError


class EnsembleCache:
    """One :class:`DecoderCache` per member, selected together."""

    def __init__(self, caches: list[DecoderCache]) -> None:
        self.caches = caches

    @property
    def length(self) -> int:
        return self.caches[0].length

    def widen(self, beams: int) -> None:
        for cache in self.caches:
            cache.widen(beams)

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        for cache in self.caches:
            cache.select(rows, sentences)


class Ensemble(nn.Module):
    """Several Transformers decoded as one (see the module notes).

    Args:
        models: The members, in eval mode, trained with the same tokenizer.
    """

    def __init__(self, models: list[nn.Module]) -> None:
        super().__init__()
        if not models:
            raise CheckpointError("An ensemble needs at least one model.")
        pads = {m.config.pad_id for m in models}
        vocabs = {m.config.vocab_size for m in models}
        if len(pads) > 1 or len(vocabs) > 1:
            raise CheckpointError(f"Ensemble members must share the vocabulary: vocab sizes {sorted(vocabs)}, "
                                  f"pad ids {sorted(pads)}.")
        self.members = nn.ModuleList(models)
        # The search reads max_len (the shortest member's) and pad_id from here.
        self.config = min((m.config for m in models), key=lambda c: c.max_len)

    def encode(self, src_ids: Tensor, src_mask: Tensor | None = None) -> "MemoryList":
        """Each member's encoder output, (B, S, D_m)."""
        return MemoryList(m.encode(src_ids, src_mask) for m in self.members)

    def init_cache(self, capacity: int = 0, beams: int = 1, dtype: torch.dtype | None = None) -> EnsembleCache:
        return EnsembleCache([m.init_cache(capacity, beams, dtype) for m in self.members])

    def decode(self, memory: "MemoryList", src_mask: Tensor | None, tgt_ids: Tensor,
               cache: EnsembleCache | None = None) -> Tensor:
        """The averaged next-token log-probabilities, (B, T, V), in float32."""
        log_probs = [
            torch.log_softmax(m.decode(mem, src_mask, tgt_ids, cache.caches[i] if cache is not None else None).float(), -1)
            for i, (m, mem) in enumerate(zip(self.members, memory))
        ]
        return torch.logsumexp(torch.stack(log_probs), dim=0) - math.log(len(log_probs))


class MemoryList(list):
    """The members' encoder outputs; ``index_select`` selects rows of each (as search does
    with one memory tensor)."""

    def index_select(self, dim: int, index: Tensor) -> "MemoryList":
        return MemoryList(m.index_select(dim, index) for m in self)
