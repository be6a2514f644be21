"""Key/value caches for incremental decoding.

During generation the decoder sees one new target token per step. Recomputing the keys
and values of the whole prefix at every step costs O(T²) projections; caching them costs
O(T). Two kinds of attention are cached differently:

* self-attention keys/values **grow** by one position per step. They live in a buffer
  allocated once for the longest output of the batch and written in place, so a step
  costs one copy of the prefix (the beam reorder), not two (reorder, then ``torch.cat``);
* cross-attention keys/values depend only on the encoder output (``memory``), so they
  are computed once per batch and are **static**. In beam search the K beams of a
  sentence share them: the cache holds one row per *sentence*, the K beam queries attend
  to it together, and a beam reorder does not touch it (only a sentence that finishes
  and leaves the batch does).

A cache lives exactly as long as one search call: :meth:`Transformer.init_cache` makes
it, search code :meth:`DecoderCache.select`s rows when beams are reordered or finished
sentences leave the batch, and it is then dropped. Nothing is stored on the modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


class AttentionCache:
    """Keys and values of one attention module, each (rows, H, L, Dh).

    Args:
        static: Cross-attention (filled once) rather than self-attention (grows).
        capacity: Positions to allocate for a growing cache up front (it doubles if
            outgrown; 0 = the size of the first append).
        beams: Query rows per key row of a static cache (the beam size when the beams of a
            sentence share its source); 1 otherwise.
        dtype: Number format the keys and values are held in (converted on the way in);
            None keeps the projections' own (:func:`minitrans.decoding.search.cache_dtype` says why
            a bf16 model decodes with a float32 cache).
    """

    def __init__(self, static: bool, capacity: int = 0, beams: int = 1, dtype: torch.dtype | None = None) -> None:
        self.static, self.capacity, self.beams, self.dtype = static, capacity, beams, dtype
        self.length = 0  # positions held
        self._key: Tensor | None = None  # (rows, H, capacity, Dh); the first `length` positions hold data
        self._value: Tensor | None = None

    @property
    def key(self) -> Tensor | None:
        """(rows, H, length, Dh), or None before first use (a view into the buffer)."""
        if self._key is None or self.static:  # a static cache holds exactly its keys
            return self._key
        return self._key[:, :, :self.length]

    @property
    def value(self) -> Tensor | None:
        if self._value is None or self.static:
            return self._value
        return self._value[:, :, :self.length]

    def store(self, key: Tensor, value: Tensor) -> None:
        """Fill a static cache: ``key``/``value`` (rows, H, S, Dh), laid out contiguously once
        (the heads split from a projection are a strided view, which every later step's batched
        product would otherwise copy)."""
        dtype = self.dtype or key.dtype  # copy=True: .to() returns a same-dtype view unchanged
        key = key.to(dtype, memory_format=torch.contiguous_format, copy=True)
        value = value.to(dtype, memory_format=torch.contiguous_format, copy=True)
        self._key, self._value, self.length = key, value, key.size(2)

    def append(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Add T positions, (rows, H, T, Dh) each; returns all keys and values held."""
        rows, heads, t, dh = key.shape
        if self._key is None or self.length + t > self._key.size(2):
            size = max(self.capacity, t, 2 * self.length + t)  # first use, or outgrown: double
            shape, dtype = (rows, heads, size, dh), self.dtype or key.dtype
            new_key, new_value = key.new_empty(shape, dtype=dtype), value.new_empty(shape, dtype=dtype)
            if self.length:
                new_key[:, :, :self.length] = self.key
                new_value[:, :, :self.length] = self.value
            self._key, self._value = new_key, new_value
        self._key[:, :, self.length:self.length + t] = key  # (converted to the buffer's dtype)
        self._value[:, :, self.length:self.length + t] = value
        self.length += t
        return self.key, self.value  # type: ignore[return-value]

    def select(self, index: Tensor) -> None:
        """Keep rows ``index`` (a LongTensor) of the batch, in that order.

        A growing cache copies its filled positions into a fresh buffer with room for one more
        position, so that after the next append its keys are one contiguous block, and a beam
        search, which reorders at every step, allocates only what it holds instead of the whole
        capacity at every step (faster beam search, less peak memory: docs/experiments.md). A
        later append that outgrows the room doubles the buffer as :meth:`append` says.
        """
        if self._key is None:
            return
        if self.static:
            self._key, self._value = self._key.index_select(0, index), self._value.index_select(0, index)
            return
        _, heads, _, dh = self._key.shape
        shape = (index.numel(), heads, self.length + 1, dh)  # room for the next append
        new_key, new_value = self._key.new_empty(shape), self._value.new_empty(shape)
        torch.index_select(self.key, 0, index, out=new_key[:, :, :self.length])
        torch.index_select(self.value, 0, index, out=new_value[:, :, :self.length])
        self._key, self._value = new_key, new_value


@dataclass
class LayerCache:
    """The two caches of one decoder layer."""

    self_attn: AttentionCache = field(default_factory=lambda: AttentionCache(static=False))
    cross_attn: AttentionCache = field(default_factory=lambda: AttentionCache(static=True))


@dataclass
class DecoderCache:
    """Per-layer caches of a whole decoder."""

    layers: list[LayerCache]

    @classmethod
    def empty(cls, n_layers: int, capacity: int = 0, beams: int = 1, dtype: torch.dtype | None = None) -> "DecoderCache":
        """Caches for ``n_layers`` layers; see :class:`AttentionCache` for ``capacity``, ``beams``
        and ``dtype``."""
        return cls([LayerCache(AttentionCache(False, capacity, dtype=dtype),
                               AttentionCache(True, beams=beams, dtype=dtype)) for _ in range(n_layers)])

    @property
    def length(self) -> int:
        """How many target positions are already cached (the next position's index)."""
        return self.layers[0].self_attn.length if self.layers else 0

    def widen(self, beams: int) -> None:
        """From now on ``beams`` query rows share each cross-attention key row. Beam search
        runs its first step with one row per sentence (all its beams would be equal) and
        widens the cache just before the reorder that repeats each row ``beams`` times."""
        for layer in self.layers:
            layer.cross_attn.beams = beams

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep (and reorder) batch rows.

        Args:
            rows: Rows of the self-attention caches to keep, in their new order: each new
                beam's origin (fairseq's ``reorder_incremental_state``), without the rows
                of finished sentences.
            sentences: Rows of the cross-attention caches to keep. With one beam per
                sentence (greedy) they are ``rows``; with shared beams, pass the kept
                sentences when some leave the batch, and None when only beams reorder.
        """
        beams = self.layers[0].cross_attn.beams if self.layers else 1
        if sentences is None and beams == 1:
            sentences = rows
        for layer in self.layers:
            layer.self_attn.select(rows)
            if sentences is not None:
                layer.cross_attn.select(sentences)
