"""``--engine auto``, the default: the fastest engine that keeps the model's quality (issue #45).

minitrans trains in PyTorch and decodes, by default, the way OpenNMT and LibreTranslate do: with
CTranslate2, a C++ engine whose decoding step does not pay PyTorch's per-operator cost. A
checkpoint is converted once (:mod:`minitrans.engines.ctranslate2_cache`) and decoded by CTranslate2
when it is installed and the work needs nothing only the native engine gives; otherwise by the
native engine. The choice and its reason are the engine's ``reason`` (printed by the commands,
returned by ``/v1/model``, recorded in evaluation reports).

The native engine decodes when:

* ``ctranslate2`` is not installed, or the conversion fails (a warning says why);
* the device is not a CPU (CTranslate2 on GPUs is not measured here; the native engine decodes
  in bf16 there);
* the work asks for something only it has: ``--precision bf16`` on a CPU (CTranslate2 has no
  bf16 on CPUs), ``--shortlist``, an ensemble (``--ensemble``). Attention weights come from a
  native copy of the model, loaded when first asked for (:class:`~minitrans.translate.Translator`).

Precision on CTranslate2: :func:`minitrans.engines.ctranslate2_engine.compute_type_for` (``auto`` is
int8 on a CPU, ``fp32`` float32, whose translations equal the native engine's fp32 ones; an
exported folder keeps the weight type chosen at export).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from minitrans.engines.registry import ENGINES
from minitrans.errors import MinitransError

log = logging.getLogger(__name__)
#: What ``--engine`` accepts: ``auto`` (the default: :func:`load`) or a registered reader.
ENGINE_CHOICES = ("auto", *ENGINES)


@dataclass(frozen=True)
class Choice:
    """Which engine decodes, and the one-line reason."""

    engine: str
    reason: str


def ctranslate2_available() -> bool:
    """Whether the ``ctranslate2`` package can be imported."""
    from minitrans.engines.ctranslate2_engine import import_ctranslate2

    try:
        import_ctranslate2()
    except MinitransError:
        return False
    return True


def choose(device: str = "cpu", precision: str = "auto", shortlist: bool = False, attention: bool = False,
           available=ctranslate2_available) -> Choice:
    """The engine ``--engine auto`` takes for a checkpoint decoded on ``device`` with these
    options (see the module notes). ``attention``: every sentence of the work needs attention
    weights (``--plot-attention``), so the whole run goes to the engine that has them."""
    kind = torch.device(device).type
    if kind != "cpu":
        return Choice("native", f"auto: {kind} device (CTranslate2 is used on CPUs only)")
    if attention:
        return Choice("native", "auto: --plot-attention (attention weights come from the native engine)")
    if shortlist:
        return Choice("native", "auto: --shortlist is the native engine's")
    if precision == "bf16":
        return Choice("native", "auto: --precision bf16 (CTranslate2 has no bf16 on CPUs)")
    if not available():
        return Choice("native", 'auto: ctranslate2 is not installed (pip install ctranslate2 for faster decoding)')
    return Choice("ctranslate2", "auto: CTranslate2 is installed and nothing asked needs the native engine")


def open_model(path: str | os.PathLike, engine: str | None = "auto", device: str = "cpu", **options):
    """``(engine, tokenizer, metadata)`` of the model at ``path``: ``auto`` (or None) as
    :func:`load` decodes it, any other name by that registered reader
    (:func:`minitrans.engines.registry.open_model`)."""
    from minitrans.engines import registry as engines

    if engine in (None, "auto"):
        return load(path, device, **options)
    options.pop("attention", None)  # a named engine is what it is
    return engines.open_model(path, engine, device, **options)


def load(path: str | os.PathLike, device: str = "cpu", precision: str = "auto", shortlist: bool = False,
         workers: int = 0, max_tokens: int | None = None, attention: bool = False):
    """``(engine, tokenizer, metadata)`` of the model at ``path`` as ``--engine auto`` decodes it:
    an exported folder by its own engine, a checkpoint by :func:`choose`'s engine."""
    from minitrans.engines import registry as engines
    from minitrans.precision import requested

    precision = requested(precision)
    options = {"precision": precision, "workers": workers, "max_tokens": max_tokens}
    fmt = engines.engine_for(path)
    if fmt != "native":  # an exported folder: its own engine
        engine, tokenizer, meta = engines.reader(fmt).load(path, device, **options)
        engine.reason = f"auto: {Path(path).name} is a {fmt} folder"
        return engine, tokenizer, meta
    choice = choose(device, precision, shortlist, attention)
    if choice.engine == "ctranslate2":
        from minitrans.checkpoint import checkpoint_metadata

        meta = checkpoint_metadata(path)  # a missing or damaged checkpoint says so now, as for native
        try:
            engine, tokenizer = _ctranslate2(path, device, **options)
            engine.reason = choice.reason
            return engine, tokenizer, meta
        except (MinitransError, OSError, RuntimeError, ValueError) as err:
            # the reason is public (/v1/model): the kind of failure; the detail (paths) is logged
            choice = Choice("native", f"auto: the CTranslate2 conversion failed ({failure_kind(err)})")
            log.warning("%s: %s; decoding with the native engine.", choice.reason, str(err).splitlines()[0])
    engine, tokenizer, meta = engines.reader("native").load(path, device, shortlist=shortlist, **options)
    engine.reason = choice.reason
    return engine, tokenizer, meta


def failure_kind(err: BaseException) -> str:
    """What kind of failure ``err`` is, without its message (which may name paths of this
    machine): ``disk full``, ``permission denied``, ``NotADirectoryError``, ``CheckpointError``."""
    import errno

    if isinstance(err, OSError) and err.errno is not None:
        return {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded", errno.EACCES: "permission denied",
                errno.EROFS: "read-only file system"}.get(err.errno, type(err).__name__)
    return type(err).__name__


def _ctranslate2(path, device: str, precision: str, workers: int, max_tokens: int | None):
    """``(engine, tokenizer)``: the checkpoint's cached conversion opened by CTranslate2 (held
    while it loads, so that no other process evicts it meanwhile). The engine records the
    checkpoint's sha256 it was converted from (``source_sha256``)."""
    from minitrans.engines.ctranslate2_cache import in_use
    from minitrans.engines.ctranslate2_engine import compute_type_for, load as load_export

    compute_type, reason = compute_type_for(precision, device)
    with in_use(path) as folder:
        engine, tokenizer, meta = load_export(folder, device, compute_type=compute_type, reason=reason,
                                              precision=precision, workers=workers, max_tokens=max_tokens)
    engine.source_sha256 = meta.get("source_checkpoint_sha256")
    return engine, tokenizer
