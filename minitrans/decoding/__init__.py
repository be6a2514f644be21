"""Decoding: how a trained model writes a translation, written by hand as the mission asks.

* :mod:`~minitrans.decoding.settings` — what a decoding asks for (beam, length penalty, length
  limits, n-best) and its defaults, checked once for every face.
* :mod:`~minitrans.decoding.search` — greedy and batched beam search over the key/value cache.
* :mod:`~minitrans.decoding.kernels` — the decoder's speed-ups, attached from this side so the
  model still reads as the paper; :mod:`~minitrans.decoding.prepack` — oneDNN-packed weights.
* :mod:`~minitrans.decoding.shortlist` — scoring only the likely target pieces.
* :mod:`~minitrans.decoding.ensemble` — several models as one in the search.
* :mod:`~minitrans.decoding.workers` — batches decoded at once, each by its own thread.
* :mod:`~minitrans.decoding.confidence` — the model's own probability per word.

It imports the model (:mod:`minitrans.model`) and the conventions, never data, training or
serving. The face is empty on purpose: import the module that holds a name.
"""
