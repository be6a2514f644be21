"""Data: corpora in, batches out (``minitrans prepare`` and the training loaders).

* :mod:`~minitrans.data.corpus` — readers of parallel text (TSV, line-aligned), grouped
  leak-free splits; :mod:`~minitrans.data.stream` — training splits streamed into Arrow.
* :mod:`~minitrans.data.download` — fetching a public corpus (the one command that needs a network).
* :mod:`~minitrans.data.sources` — one class per corpus source and their registry ``SOURCES``:
  **a new corpus is one class here plus one registry line**.
* :mod:`~minitrans.data.mixture` — weighted mixtures of corpora.
* :mod:`~minitrans.data.cache` — the prepared-data cache: its key, what it holds, its atomic build.
* :mod:`~minitrans.data.batching` — ``Batch`` and the token-budget sampler.
* :mod:`~minitrans.data.datamodule` — the LightningDataModule over all of it.

It imports the text conventions, the model's padding and the checkpoint's tokenizer, never
decoding, engines or serving. The face is empty on purpose.
"""
