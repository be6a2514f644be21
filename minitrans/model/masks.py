"""Padding and attention masks, built in one place with one convention.

Sentences of different lengths share a batch by padding (:func:`pad`); the padding must then
be hidden from attention. Every mask in minitrans is boolean and **True means the position may
be attended**, the convention of :func:`torch.nn.functional.scaled_dot_product_attention`.
Masks broadcast to the attention-score shape (B, H, T, S).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from minitrans.text.vocab import PAD_ID


def pad(seqs: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> Tensor:
    """Right-pad lists of ids into a LongTensor (B, max_len): what :func:`padding_mask` hides."""
    out = torch.full((len(seqs), max((len(s) for s in seqs), default=0)), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """Mask of the keys that are real tokens.

    Args:
        ids: Token ids, (B, S).
        pad_id: Id of padding.

    Returns:
        Bool mask (B, 1, 1, S): True where ``ids`` is not padding.
    """
    return (ids != pad_id)[:, None, None, :]


def causal_mask(n_queries: int, n_keys: int | None = None, device: torch.device | None = None) -> Tensor:
    """Mask that lets query i see keys 0..offset+i, where offset = n_keys - n_queries.

    With ``n_keys == n_queries`` this is the usual lower-triangular decoder mask. With
    more keys than queries (incremental decoding over a key/value cache) the queries are
    the *last* ``n_queries`` positions of the sequence.

    Returns:
        Bool mask (T, S) with T = n_queries and S = n_keys.
    """
    n_keys = n_queries if n_keys is None else n_keys
    offset = n_keys - n_queries
    return torch.ones(n_queries, n_keys, dtype=torch.bool, device=device).tril(diagonal=offset)
