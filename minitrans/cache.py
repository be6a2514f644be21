"""Key/value caches for incremental decoding.

During generation the decoder sees one new target token per step. Recomputing the keys
and values of the whole prefix at every step costs O(T²) projections; caching them costs
O(T). Two kinds of attention are cached differently:

* self-attention keys/values **grow** by one position per step;
* cross-attention keys/values depend only on the encoder output (``memory``), so they
  are computed once per batch and are **static**.

A cache lives exactly as long as one search call: :meth:`Transformer.init_cache` makes
it, search code :meth:`DecoderCache.select`s rows when beams are reordered or finished
sentences leave the batch, and it is then dropped. Nothing is stored on the modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor


@dataclass
class AttentionCache:
    """Keys and values of one attention module, each (B, H, L, Dh), or None before use."""

    static: bool
    key: Tensor | None = None
    value: Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.key is None else self.key.size(2)

    def select(self, index: Tensor) -> None:
        """Keep rows ``index`` of the batch (beam reordering, finished sentences)."""
        if self.key is not None:
            self.key = self.key.index_select(0, index)
            self.value = self.value.index_select(0, index)


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
    def empty(cls, n_layers: int) -> "DecoderCache":
        return cls([LayerCache() for _ in range(n_layers)])

    @property
    def length(self) -> int:
        """How many target positions are already cached (the next position's index)."""
        return self.layers[0].self_attn.length if self.layers else 0

    def select(self, index: Tensor) -> None:
        """Keep (and reorder) batch rows: ``index`` is a LongTensor of row numbers.

        Beam search calls this with each new beam's origin, fairseq's
        ``reorder_incremental_state``; it also drops finished sentences.
        """
        for layer in self.layers:
            layer.self_attn.select(index)
            layer.cross_attn.select(index)
