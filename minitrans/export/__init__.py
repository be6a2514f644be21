"""Export: a trained checkpoint written in the formats other tools read.

* :mod:`~minitrans.export.argos` — an Argos Translate package (``.argosmodel``: the
  CTranslate2 model, the SentencePiece model, the metadata), with
* :mod:`~minitrans.export.sentence_onnx` — a rule-based sentence splitter in MiniSBD's ONNX
  format, so that argos splits sentences offline.
* :mod:`~minitrans.export.hf` — a Hugging Face Marian folder (``transformers``' own classes).
* :mod:`~minitrans.export.web` — a static page that translates in the browser, with no server:
  :mod:`~minitrans.export.onnx_graphs` (the encoder and one decoder step as ONNX graphs),
  :mod:`~minitrans.export.web_runtime` (onnxruntime-web, pinned and checked, and its cache),
  and ``page/`` (the page's own JavaScript; the look it shares with ``minitrans serve``'s page,
  ``style.css`` and ``heatmap.js``, is copied from ``minitrans/serve/static/``).

The CTranslate2 writer lives with its reader in :mod:`minitrans.engines`. A new format is one
module here plus one line in :data:`minitrans.engines.registry.FORMATS`. Export reads
checkpoints and uses the engines and the decoding settings, never training or serving. The
face is empty on purpose.
"""
