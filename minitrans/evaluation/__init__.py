"""Evaluation: how good a model is, in numbers and in pictures.

* :mod:`~minitrans.evaluation.evaluate` — a model scored on a dataset split or on files
  (sacreBLEU BLEU and chrF through :mod:`minitrans.metrics`), with its report and hypotheses.
* :mod:`~minitrans.evaluation.plotting` — a translation's attention heatmap, a run's learning
  curves (matplotlib, loaded only to draw).

It imports the Translator, the held-out data and the metrics, never training or serving. The
face is empty on purpose.
"""
