"""Text: the conventions every stage shares about the text itself, before any model.

* :mod:`~minitrans.text.vocab` — the special ids (pad, bos, eos, unk) every stage agrees on.
* :mod:`~minitrans.text.languages` — language codes, names and directions (``en-fr``).
* :mod:`~minitrans.text.cleaning` — Unicode checks and cleaning, invisible characters, "has words".
* :mod:`~minitrans.text.segment` — sentences in a text, and the text put back around them.
* :mod:`~minitrans.text.textio` — reading lines and writing files the same way everywhere
  (atomic outputs, one-line write errors).
* :mod:`~minitrans.text.tokenizer` — the SentencePiece model and its fingerprint.

It imports only :mod:`minitrans.errors` (and SentencePiece, pysbd where named). The face is empty
on purpose: ``import minitrans.text.vocab`` loads no SentencePiece.
"""
