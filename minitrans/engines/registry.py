"""The decoding engines behind :class:`~minitrans.translate.Translator`, and the one registry
of the model formats they read: ids in, hypotheses out.

The Translator does what every engine shares (cleaning, segmentation, truncation, empty
lines, detokenisation, input order); an engine only searches (:class:`Engine`). Each model
format is one entry of :data:`REGISTRY`: the module that *reads* it (and holds its engine)
and, for a format ``minitrans export`` writes, the module that *writes* it. ``--engine``,
``export --format`` and :meth:`Translator.load` all read this table, so adding a format is one
module (or two: reader and writer) plus one line here:

* ``native`` — a ``.ckpt`` (:mod:`minitrans.engines.native_engine`: minitrans's own Transformer and search);
* ``ctranslate2`` — a folder written by ``minitrans export`` (:mod:`minitrans.engines.ctranslate2_engine`
  reads it with CTranslate2; :mod:`minitrans.engines.ctranslate2_export` writes it);
* ``argos`` — an Argos Translate package, written only (:mod:`minitrans.export.argos`): Argos
  Translate and LibreTranslate read it;
* ``hf`` — a Hugging Face ``transformers`` folder, written only (:mod:`minitrans.export.hf`):
  ``transformers`` reads it;
* ``web`` — a static page that translates in the browser, written only (:mod:`minitrans.export.web`):
  onnxruntime-web runs it.

A reader module provides ``recognises(path) -> bool``, ``load(path, device, **options) ->
(engine, tokenizer, metadata)`` and ``metadata(path) -> dict``; a writer module provides
``export(checkpoint, output_dir, quantization, force) -> Path`` and ``QUANTIZATIONS``.
Modules are imported only when their format is used (reading never imports a writer).
``--engine auto``, the default, is not a format and not in this table: :mod:`minitrans.engines.auto_engine`,
one floor up, picks a reader for the work (CTranslate2 for a checkpoint where it can, through a
cached conversion).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Protocol, runtime_checkable

import torch

from minitrans.model.config import ModelConfig
from minitrans.errors import UsageError
from minitrans.precision import Precision
from minitrans.decoding.search import Hypothesis

#: The token budget of a decoding batch when neither the caller nor the checkpoint gives one
#: (``--max-tokens``; each engine counts it its own way: see its ``max_tokens``).
DEFAULT_MAX_TOKENS = 6000


@runtime_checkable
class Engine(Protocol):
    """What :class:`~minitrans.translate.Translator` asks of an engine."""

    name: str
    reason: str  # why this engine decodes (--engine auto's choice, or "asked for with --engine NAME")
    workers: int  # batches decoded at once
    bf16: bool
    precision: Precision  # what it decodes in, and why (minitrans.precision)
    max_tokens: int  # token budget of a decoding batch

    @property
    def config(self) -> ModelConfig: ...

    @property
    def device(self) -> torch.device: ...

    def parameter_count(self) -> int: ...

    def search(self, sources: list[list[int]], beam_size: int, alpha: float, nbest: int, max_len_a: float,
               max_len_b: int, use_cache: bool = True,
               should_stop: Callable[[], bool] | None = None,
               progress: Callable[[int], None] | None = None) -> list[list[Hypothesis]]:
        """Hypotheses (best first) for each eos-terminated source, in input order; raises
        :class:`Cancelled` when ``should_stop()`` says so between decoding batches, and calls
        ``progress(n)`` as each batch of ``n`` sources is done (long work shows progress)."""
        ...


class Cancelled(Exception):
    """A search stopped because its ``should_stop`` said so (nobody waits for the result)."""


def check_stop(should_stop: Callable[[], bool] | None) -> None:
    """Raise :class:`Cancelled` if ``should_stop`` (when given) says so."""
    if should_stop is not None and should_stop():
        raise Cancelled


def check_workers(workers: int) -> int:
    """``workers`` if it is a valid setting (0 = the device's default), else a UsageError."""
    if not isinstance(workers, int) or workers < 0:
        raise UsageError(f"--workers must be a whole number of at least 1 (0 = automatic), got {workers!r}.")
    return workers


@dataclass(frozen=True)
class Format:
    """One model format: the module that reads it (and runs it), and the one that writes it."""

    reader: str | None  # None: minitrans writes the format for other programs and never reads it
    writer: str | None = None


#: Every model format, by ``--engine`` name: one line per format.
REGISTRY: dict[str, Format] = {
    "native": Format(reader="minitrans.engines.native_engine"),
    "ctranslate2": Format(reader="minitrans.engines.ctranslate2_engine", writer="minitrans.engines.ctranslate2_export"),
    "argos": Format(reader=None, writer="minitrans.export.argos"),
    "hf": Format(reader=None, writer="minitrans.export.hf"),
    "web": Format(reader=None, writer="minitrans.export.web"),
}
ENGINES = tuple(name for name, fmt in REGISTRY.items() if fmt.reader)
EXPORT_FORMATS = tuple(name for name, fmt in REGISTRY.items() if fmt.writer)


def reader(name: str) -> ModuleType:
    """The module that reads format ``name``."""
    if name not in ENGINES:
        raise UsageError(f"--engine must be one of auto, {', '.join(ENGINES)}, got {name!r}.")
    return importlib.import_module(REGISTRY[name].reader)


def writer(name: str) -> ModuleType:
    """The module that writes format ``name`` (``minitrans export --format NAME``)."""
    if name not in EXPORT_FORMATS:
        raise UsageError(f"--format must be one of {', '.join(EXPORT_FORMATS)}, got {name!r}.")
    return importlib.import_module(REGISTRY[name].writer)


def engine_for(path: str | os.PathLike) -> str:
    """The format of the model at ``path``: the one whose reader recognises it, else
    ``native`` (whose loader then says what is wrong with the path)."""
    return next((name for name in ENGINES if reader(name).recognises(Path(path))), "native")


def is_exported(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an exported folder (read by its format's engine), not a checkpoint."""
    return engine_for(path) != "native"


def open_model(path: str | os.PathLike, engine: str | None = None, device: str = "cpu", **options):
    """``(engine, tokenizer, metadata)`` of the model at ``path``, read by ``engine`` (default:
    by what the path is). Each reader's ``load`` refuses, in one line naming the right
    ``--engine``, a path of another format. ``--engine auto`` is the layer above:
    :func:`minitrans.engines.auto_engine.load` picks the reader for the work."""
    return reader(engine or engine_for(path)).load(path, device, **options)


def load_metadata(path: str | os.PathLike) -> dict:
    """The minitrans metadata of a model of any format (training data, decoding limits,
    validation scores)."""
    return reader(engine_for(path)).metadata(path)
