"""The encoder–decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

``forward = decode ∘ encode``: the encoder maps source ids to ``memory``; the decoder maps
``memory`` and the shifted target to next-token logits.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from minitrans.model.cache import DecoderCache
from minitrans.model.config import ModelConfig
from minitrans.model.decoder import Decoder
from minitrans.model.encoder import Encoder
from minitrans.model.layers import PositionalEncoding
from minitrans.model.masks import causal_mask, padding_mask


class Transformer(nn.Module):
    """Encoder–decoder Transformer.

    * Token embeddings are multiplied by √d_model, then positions are added (section 3.4).
    * With ``config.share_embeddings`` one matrix serves as source embedding, target
      embedding and output projection (joint SentencePiece vocabulary).
    * Padding masks come from ``config.pad_id``; the decoder is causally masked.
    * Linear weights get Xavier-uniform initialisation; embeddings N(0, d_model^-½) so that
      the scaled embeddings have unit variance.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        d = config.d_model
        self.src_embed = nn.Embedding(config.vocab_size, d, padding_idx=config.pad_id)
        if config.share_embeddings:
            self.tgt_embed = self.src_embed
            self.output_proj = None  # logits use tgt_embed.weight (tied)
        else:
            self.tgt_embed = nn.Embedding(config.vocab_size, d, padding_idx=config.pad_id)
            self.output_proj = nn.Linear(d, config.vocab_size, bias=False)
        learned = config.positional == "learned"
        self.src_pos = PositionalEncoding(d, config.max_len, config.dropout, learned)
        self.tgt_pos = PositionalEncoding(d, config.max_len, config.dropout, learned)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        for module in self.modules():
            if isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=self.config.d_model ** -0.5)
                if module.padding_idx is not None:
                    with torch.no_grad():
                        module.weight[module.padding_idx].zero_()

    # -- the two halves --------------------------------------------------------------
    def encode(self, src_ids: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Source ids (B, S) -> memory (B, S, D). ``src_mask`` defaults to the padding mask."""
        if src_mask is None:
            src_mask = padding_mask(src_ids, self.config.pad_id)  # (B, 1, 1, S)
        x = self.src_embed(src_ids) * math.sqrt(self.config.d_model)  # (B, S, D)
        return self.encoder(self.src_pos(x), src_mask)

    def decode(
        self,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt_ids: Tensor,
        cache: DecoderCache | None = None,
        need_weights: bool = False,
        project: Callable[[Tensor], Tensor] | None = None,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Next-token logits for every target position.

        Args:
            memory: Encoder output (B, S, D); (B/K, S, D) with a cache made for K beams.
            src_mask: (B, 1, 1, S) source padding mask (True = real token); (B/K, 1, 1, S) likewise.
            tgt_ids: Target ids (B, T): the whole shifted target when teacher forcing, or
                only the newest position(s) when decoding with ``cache``.
            cache: From :meth:`init_cache`; extended in place by this call.
            need_weights: Also return the cross-attention weights of every layer.
            project: The output projection to use instead of :meth:`project` (a vocabulary
                shortlist's: :func:`minitrans.decoding.kernels.projection`).

        Returns:
            Logits (B, T, V), or ``(logits, [weights (B, H, T, S) per layer])`` when
            ``need_weights``.
        """
        t = tgt_ids.size(1)
        offset = cache.length if cache is not None else 0
        if cache is not None and t == 1:
            tgt_mask = None  # one new query may see every cached position
        else:
            tgt_mask = causal_mask(t, offset + t, device=tgt_ids.device)  # (T, T_total)
            if cache is None:
                tgt_mask = tgt_mask & padding_mask(tgt_ids, self.config.pad_id)  # (B, 1, T, T)
        x = self.tgt_embed(tgt_ids) * math.sqrt(self.config.d_model)  # (B, T, D)
        x = self.tgt_pos(x, offset)
        x, weights = self.decoder(x, memory, src_mask, tgt_mask, cache, need_weights)
        logits = (project or self.project)(x)  # (B, T, V)
        return (logits, weights) if need_weights else logits

    def project(self, x: Tensor) -> Tensor:
        """Decoder states (B, T, D) -> logits (B, T, V)."""
        if self.output_proj is None:
            return F.linear(x, self.tgt_embed.weight)
        return self.output_proj(x)

    @property
    def output_weight(self) -> Tensor:
        """The (V, D) matrix of the output projection: the target embedding when tied."""
        return self.tgt_embed.weight if self.output_proj is None else self.output_proj.weight

    def forward(self, src_ids: Tensor, tgt_in_ids: Tensor) -> Tensor:
        """Teacher-forced logits (B, T, V) for source (B, S) and shifted target (B, T)."""
        return self.project(self.states(src_ids, tgt_in_ids))

    def states(self, src_ids: Tensor, tgt_in_ids: Tensor) -> Tensor:
        """Teacher-forced decoder states (B, T, D), before the output projection: training
        projects only the positions that count, inside its loss (:mod:`minitrans.training.loss`)."""
        src_mask = padding_mask(src_ids, self.config.pad_id)  # (B, 1, 1, S)
        memory = self.encode(src_ids, src_mask)
        return self.decode(memory, src_mask, tgt_in_ids, project=_unprojected)

    def init_cache(self, capacity: int = 0, beams: int = 1, dtype: torch.dtype | None = None) -> DecoderCache:
        """An empty key/value cache for one incremental-decoding call.

        ``capacity``: target positions to allocate up front; ``beams``: target rows per
        ``memory`` row (beam search passes the encoder output once per sentence); ``dtype``:
        the number format the keys and values are held in (None: the model's).
        """
        return DecoderCache.empty(len(self.decoder.layers), capacity, beams, dtype)


def _unprojected(states: Tensor) -> Tensor:
    """The decoder's states as they are (B, T, D): the projection comes after choosing rows."""
    return states
