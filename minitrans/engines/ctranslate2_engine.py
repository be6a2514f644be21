"""The CTranslate2 engine: a folder written by ``minitrans export --format ctranslate2``,
decoded by CTranslate2 — and the reading side of that folder (its files, its metadata, its
checks). :mod:`minitrans.engines.ctranslate2_export` writes it.

CTranslate2 conventions and how they are mapped:

* the export sets ``add_source_eos`` (CTranslate2 appends ``</s>``, so a plain CTranslate2
  caller gets minitrans's output); minitrans passes its pieces without it (with it, to an
  export of before 2026-12 whose ``config.json`` says ``add_source_eos: false``)
  and decoding starts from ``<s>``, as in minitrans;
* ``min_decoding_length=0``: minitrans allows an immediate ``</s>`` (CTranslate2's default
  of 1 forbids it);
* lengths: minitrans's limit ``L = a · source pieces + b`` counts the ``</s>`` that it forces
  at step L; CTranslate2 ends a hypothesis at ``max_decoding_length`` with whatever token
  came last. So ``max_decoding_length = L - 1``: both then hold at most ``L - 1`` real tokens
  with the same score. It takes one limit per call: sentences are grouped by their own limit
  and each group is one call;
* ``<pad>`` and ``<s>`` are suppressed (CTranslate2 masks them before the softmax, minitrans
  after it: the scores differ by the probability mass of those two tokens, ~0 for a trained
  model);
* length penalty: CTranslate2 divides by ``length^α`` where minitrans (GNMT) divides by
  ``((5 + length) / 6)^α``. Neither penalty changes *which* hypotheses a beam search
  finishes (both finish the eos candidates among the top ``beam`` of ``2 × beam``, on raw
  log-probabilities, and stop at ``beam`` finished); only the final ranking. So the engine
  asks for all ``beam`` finished hypotheses under a negligible penalty (``NEUTRAL_PENALTY``),
  recovers their raw log-probabilities and ranks them with GNMT's: the same best
  hypothesis as minitrans. (At the length limit CTranslate2 finishes every live beam and
  keeps the ``beam`` best by raw score, where minitrans keeps those that finished first; a
  hypothesis that differs is dominated under GNMT for α ≥ 0 by one both keep, so only the
  tail of an n-best list can differ, and only for sentences that reach the limit.)
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import torch

from minitrans.model.config import ModelConfig
from minitrans.engines.registry import DEFAULT_MAX_TOKENS, check_stop, check_workers
from minitrans.precision import Precision
from minitrans.errors import CheckpointError, UsageError
from minitrans.decoding.search import Hypothesis, length_limits, length_penalty
from minitrans.text.textio import file_sha256
from minitrans.text.tokenizer import Tokenizer
from minitrans.text.vocab import BOS_ID, EOS_ID, PAD_ID
from minitrans.decoding.workers import default_workers

META_FILE, SPM_FILE = "minitrans.json", "sentencepiece.model"
#: Everything an export folder may hold: CTranslate2's files and ours. ``--force`` replaces a
#: folder only when it holds nothing else.
EXPORT_FILES = frozenset({"model.bin", "config.json", "shared_vocabulary.json", "source_vocabulary.json",
                          "target_vocabulary.json", "shared_vocabulary.txt", "source_vocabulary.txt",
                          "target_vocabulary.txt", META_FILE, SPM_FILE})
#: The length penalty asked of CTranslate2: not 0, because 0 switches its beam search to an
#: early exit that stops on other conditions than minitrans's (and fairseq's) "``beam``
#: hypotheses finished"; small enough that the ranking it implies is the raw one, and undone
#: exactly on the returned scores (hypotheses are returned with their ``</s>``, so no length is 0).
NEUTRAL_PENALTY = 1e-6


def import_ctranslate2():
    """The ``ctranslate2`` module, or a usage error that says how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise UsageError('The CTranslate2 engine needs the ctranslate2 package: pip install ctranslate2') from None
    return ctranslate2


def is_export(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder written by ``minitrans export``."""
    path = Path(path)
    return (path / META_FILE).is_file() and (path / "model.bin").is_file()


def recognises(path: Path) -> bool:
    """A folder written by ``minitrans export``."""
    return is_export(path)


def read_metadata(path: str | os.PathLike) -> dict:
    """The ``minitrans.json`` of an exported folder."""
    file = Path(path) / META_FILE
    try:
        meta = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{file}: unreadable ({type(err).__name__}: {err}); export the model again.") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("model_config"), dict):
        raise CheckpointError(f"{file} is not minitrans export metadata (no model_config); export the model again.")
    return meta


metadata = read_metadata  # the registry's name for it


#: ``--precision`` → CTranslate2 compute type (bf16 has none on a CPU; int8 is int8 weights
#: with float32 activations there).
COMPUTE_TYPES = {"fp32": "float32", "int8": "int8"}
#: Why ``--engine auto`` decodes a checkpoint's conversion in int8 (docs/speed.md, "Fast by default").
INT8_REASON = "auto: int8 kept BLEU within 0.3 of float32 on every model measured (docs/speed.md)"


def compute_type_for(precision: str, device: str = "cpu") -> tuple[str, str]:
    """``(CTranslate2 compute type, reason)`` for ``--precision`` on a checkpoint's float32
    conversion (:mod:`minitrans.engines.auto_engine`): ``auto`` is int8 on a CPU (:data:`INT8_REASON`)
    and the float32 weights elsewhere (CTranslate2 on GPUs is not measured here)."""
    if precision == "auto":
        if torch.device(device).type == "cpu":
            return "int8", INT8_REASON
        return "default", "auto: the float32 weights (not measured on this device)"
    if precision not in COMPUTE_TYPES:
        raise UsageError(f"--precision {precision} is for the native engine (CTranslate2 has fp32 and int8): use "
                         "--engine native for it, or --precision fp32 or int8.")
    return COMPUTE_TYPES[precision], f"asked for with --precision {precision}"


def load(path: str | os.PathLike, device: str = "cpu", workers: int = 0, max_tokens: int | None = None,
         compute_type: str | None = None, threads: int = 0, precision: str = "auto", shortlist: bool = False,
         reason: str | None = None):
    """``(CTranslate2Engine, tokenizer, metadata)`` of an exported folder. It decodes in
    ``compute_type`` (one of CTranslate2's, ``reason`` saying why) if given; else ``precision``
    ``auto`` keeps the weight type chosen at export (``minitrans export --quantization``), and
    ``fp32`` / ``int8`` convert to it (:data:`COMPUTE_TYPES`). ``shortlist`` is the native engine's."""
    from minitrans.precision import requested

    precision = requested(precision)
    if not is_export(path):
        raise UsageError(f"--engine ctranslate2 needs a folder written by `minitrans export`, and {path} is not "
                         "one: export it with `minitrans export -m CKPT -o OUTDIR`.")
    if compute_type is None and precision != "auto":
        compute_type, reason = compute_type_for(precision, device)
    engine, tokenizer, meta = load_export(path, device, compute_type or "default", threads, workers)
    engine.max_tokens = max_tokens or meta.get("decoding", {}).get("max_tokens") or engine.max_tokens
    if reason:
        engine.precision = Precision(engine.translator.compute_type, precision, reason)
    return engine, tokenizer, meta


class CTranslate2Engine:
    """A model exported by ``minitrans export``, decoded by CTranslate2 (see the module notes).

    Args:
        path: The exported folder.
        tokenizer: Its SentencePiece model (the folder's ``sentencepiece.model``).
        config: The model's :class:`ModelConfig` (from the folder's ``minitrans.json``).
        device: ``cpu`` or ``cuda``.
        compute_type: CTranslate2's compute type; ``default`` keeps the exported weight type.
        threads: Intra-op threads in all (default: PyTorch's setting, so both engines compare fairly).
        max_tokens: Token budget of a CTranslate2 batch.
        workers: Batches decoded at once (CTranslate2's ``inter_threads``), each with an equal
            share of ``threads``; 0 = :func:`default_workers`, as for the native engine.
    """

    name = "ctranslate2"
    reason = "asked for with --engine ctranslate2"
    bf16 = False

    def __init__(self, path: str | os.PathLike, tokenizer: Tokenizer, config: ModelConfig, device: str = "cpu",
                 compute_type: str = "default", threads: int = 0, max_tokens: int = DEFAULT_MAX_TOKENS, workers: int = 0) -> None:
        ctranslate2 = import_ctranslate2()
        self.path, self.config, self.max_tokens = Path(path), config, max_tokens
        threads = threads or torch.get_num_threads()
        self.workers = check_workers(workers) or default_workers(device, threads)
        ours = torch.get_num_threads()
        try:
            self.translator = ctranslate2.Translator(str(path), device=device, compute_type=compute_type,
                                                     inter_threads=self.workers,
                                                     intra_threads=max(1, threads // self.workers))
        except (RuntimeError, ValueError) as err:
            raise CheckpointError(f"{path}: CTranslate2 cannot load this model: {str(err).splitlines()[0]}") from None
        finally:
            # CTranslate2 sets the loading thread's OpenMP count to its intra_threads (1 with two
            # workers on 2 cores), which PyTorch shares: anything PyTorch did next in this thread
            # (training, the native engine) ran on one core. Its own workers keep their counts.
            torch.set_num_threads(ours)
        self.pieces = tokenizer.pieces(range(tokenizer.vocab_size))
        self.ids = {piece: i for i, piece in enumerate(self.pieces)}
        self.device = torch.device(device)
        self.adds_eos = _adds_source_eos(self.path)
        kind = self.translator.compute_type
        self.precision = Precision(kind, "auto", f"CTranslate2 compute type {kind} (chosen at export: "
                                   "minitrans export --quantization)")

    def parameter_count(self) -> int:
        """The native model's count for this config (built on the meta device: no memory, no
        weights), since CTranslate2 does not expose its tensors."""
        from minitrans.model.transformer import Transformer

        with torch.device("meta"):
            return sum(p.numel() for p in Transformer(self.config).parameters())

    def search(self, sources: list[list[int]], beam_size: int, alpha: float, nbest: int, max_len_a: float,
               max_len_b: int, use_cache: bool = True, should_stop=None, progress=None) -> list[list[Hypothesis]]:
        """Hypotheses (best first) for each eos-terminated source, in input order.
        ``use_cache`` is ignored (CTranslate2 always caches). ``should_stop()`` is asked
        between length groups (:class:`Cancelled`); groups already submitted run to their end.
        ``progress(n)`` is called as each group of n sources is done."""
        if not sources:
            return []
        limits = length_limits(torch.tensor([len(s) for s in sources]), max_len_a, max_len_b, self.config.max_len - 1)
        groups: dict[int, list[int]] = defaultdict(list)
        for i, limit in enumerate(limits.tolist()):
            groups[limit].append(i)
        results: list[list[Hypothesis]] = [[Hypothesis([], 0.0, 0.0)] for _ in sources]  # limit 1: eos at once
        eos = self.pieces[EOS_ID]
        calls = []  # every group is submitted first, so that the workers decode groups at once
        for limit, members in groups.items():
            if limit == 1:
                continue
            calls.append((members, self.translator.translate_batch(
                [[self.pieces[t] for t in (sources[i][:-1] if self.adds_eos else sources[i])] for i in members],
                asynchronous=True,
                beam_size=beam_size, num_hypotheses=beam_size, length_penalty=NEUTRAL_PENALTY,
                max_decoding_length=limit - 1, min_decoding_length=0, return_end_token=True, return_scores=True,
                suppress_sequences=[[self.pieces[PAD_ID]], [self.pieces[BOS_ID]]], max_input_length=0,
                max_batch_size=self.max_tokens, batch_type="tokens")))
        for members, pending in calls:
            check_stop(should_stop)
            for i, output in zip(members, (answer.result() for answer in pending)):
                hyps = []
                for pieces, score in zip(output.hypotheses, output.scores):
                    raw = score * len(pieces) ** NEUTRAL_PENALTY  # undo CTranslate2's normalisation
                    ids = [self.ids[p] for p in (pieces[:-1] if pieces and pieces[-1] == eos else pieces)]
                    # Greedy search scores by raw log-probability, as the native greedy search does.
                    score = raw if beam_size == 1 else raw / length_penalty(len(ids) + 1, alpha)
                    hyps.append(Hypothesis(ids, score, raw))
                hyps.sort(key=lambda h: h.score, reverse=True)
                results[i] = hyps[:nbest]
            if progress is not None:
                progress(len(members))
        return results


def _adds_source_eos(path: Path) -> bool:
    """Whether CTranslate2 appends ``</s>`` to sources for this export (its ``config.json``)."""
    try:
        return bool(json.loads((path / "config.json").read_text(encoding="utf-8")).get("add_source_eos", False))
    except (OSError, ValueError):
        return False


def load_export(path: str | os.PathLike, device: str = "cpu", compute_type: str = "default",
                threads: int = 0, workers: int = 0) -> tuple[CTranslate2Engine, Tokenizer, dict]:
    """Open a folder written by ``minitrans export``: ``(engine, tokenizer, metadata)``."""
    path = Path(path)
    if not is_export(path):
        raise CheckpointError(f"{path} is not a model folder written by `minitrans export` (it needs model.bin, "
                              f"{META_FILE} and {SPM_FILE}); export one with `minitrans export -m CKPT -o {path}`.")
    meta = read_metadata(path)
    try:
        config = ModelConfig.from_dict(meta["model_config"])
        tokenizer = Tokenizer.load(path / SPM_FILE)
    except (OSError, ValueError, TypeError, RuntimeError) as err:
        raise CheckpointError(f"{path}: damaged export ({type(err).__name__}: {err}); export it again.") from None
    if tokenizer.fingerprint() != meta.get("tokenizer_fingerprint"):
        raise CheckpointError(f"{path}: {SPM_FILE} is not the SentencePiece model the weights were exported with; "
                              "export the checkpoint again.")
    check_export_vocabulary(path, tokenizer, meta)
    return CTranslate2Engine(path, tokenizer, config, device, compute_type, threads, workers=workers), tokenizer, meta


def check_export_vocabulary(path: Path, tokenizer: Tokenizer, meta: dict) -> None:
    """The export's CTranslate2 vocabularies must be the tokenizer's pieces in id order, and its
    weights the ones exported with it (``model_sha256``, recorded since minitrans 0.1 exports
    carry it): a folder assembled from two exports would otherwise fail at the first
    translation, or translate garbage."""
    files = [path / name for name in ("shared_vocabulary.json", "source_vocabulary.json", "target_vocabulary.json")
             if (path / name).is_file()]
    if not files:
        raise CheckpointError(f"{path}: no CTranslate2 vocabulary file (shared_vocabulary.json); export it again.")
    pieces = tokenizer.pieces(range(tokenizer.vocab_size))
    for file in files:
        try:
            vocabulary = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise CheckpointError(f"{file}: unreadable ({type(err).__name__}); export the model again.") from None
        if vocabulary != pieces:
            raise CheckpointError(f"{file} is not the vocabulary of {path / 'sentencepiece.model'} (another model's "
                                  "files were mixed into this folder); export the checkpoint again.")
    expected = meta.get("model_sha256")
    if expected is not None:
        if file_sha256(path / "model.bin") != expected:
            raise CheckpointError(f"{path / 'model.bin'} is not the weights file this folder was exported with (its "
                                  "sha256 differs from minitrans.json's model_sha256); export the checkpoint again.")
