"""The Transformer of "Attention Is All You Need", built from its parts, in the paper's order.

Read it top to bottom in one sitting:

1. :mod:`~minitrans.model.config` — the model's shape, with the paper's names (``d_model``,
   ``n_heads``, ``d_ff``, ...).
2. :mod:`~minitrans.model.masks` — padding and causal masks (bool, True = may attend).
3. :mod:`~minitrans.model.attention` — scaled dot-product attention, ``softmax(QKᵀ/√d_k)V``
   (§3.2.1), and multi-head attention (§3.2.2).
4. :mod:`~minitrans.model.cache` — the decoder's key/value cache for generation.
5. :mod:`~minitrans.model.dropout` — inverted dropout, written out.
6. :mod:`~minitrans.model.layers` — positional encoding (§3.5), the feed-forward network (§3.3),
   residual + layer norm (§5.4), the encoder and decoder layers (§3.1).
7. :mod:`~minitrans.model.encoder`, :mod:`~minitrans.model.decoder` — N layers each.
8. :mod:`~minitrans.model.transformer` — embeddings, ``encode``, ``decode``, ``forward``.

This folder imports only PyTorch and the package's conventions (:mod:`minitrans.errors`,
:mod:`minitrans.text.vocab`); nothing here knows about data, training or decoding. The face is
empty on purpose: import the module that holds a name.
"""
