"""The decoding engines behind :class:`~minitrans.translate.Translator`: ids in, hypotheses out.

The Translator does what every engine shares (cleaning, segmentation, truncation, empty
lines, detokenisation, input order); an engine only searches:

* :class:`NativeEngine`: minitrans's own Transformer and search (PyTorch), in token-budget
  batches of similar length, optionally with bf16 weights;
* :class:`CTranslate2Engine`: a folder written by ``minitrans export`` run by CTranslate2,
  with its conventions mapped onto minitrans's (below), so that both engines answer the
  same question.

CTranslate2 conventions and how they are mapped:

* minitrans passes its own eos-terminated pieces (the export sets ``add_source_eos`` off)
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

import os
import warnings
from collections import defaultdict
from pathlib import Path

import torch

from minitrans.batching import pad
from minitrans.config import ModelConfig
from minitrans.errors import CheckpointError, UsageError
from minitrans.search import Hypothesis, beam_search, greedy_search, length_limits, length_penalty
from minitrans.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from minitrans.workers import WorkerPool, default_workers

ENGINES = ("native", "ctranslate2")


class Cancelled(Exception):
    """A search stopped because its ``should_stop`` said so (nobody waits for the result)."""


def _check_stop(should_stop) -> None:
    if should_stop is not None and should_stop():
        raise Cancelled
#: The length penalty asked of CTranslate2: not 0, because 0 switches its beam search to an
#: early exit that stops on other conditions than minitrans's (and fairseq's) "``beam``
#: hypotheses finished"; small enough that the ranking it implies is the raw one, and undone
#: exactly on the returned scores (hypotheses are returned with their ``</s>``, so no length is 0).
NEUTRAL_PENALTY = 1e-6


def quantize_int8(model) -> None:
    """Dynamic int8 quantisation, in place, for CPU decoding: every Linear layer and the output
    projection get int8 weights; activations are quantised at run time (PyTorch's
    ``quantize_dynamic``, FBGEMM kernels). A tied output projection (the largest matrix
    product of a decoding step) first becomes a Linear layer of its own. Measured 1.20x the
    fp32 beam-search rate with the same BLEU (README, Speed)."""
    if model.output_proj is None:
        weight = model.tgt_embed.weight
        model.output_proj = torch.nn.Linear(weight.size(1), weight.size(0), bias=False)
        model.output_proj.weight = torch.nn.Parameter(weight.detach().clone(), requires_grad=False)
    # PyTorch 2.13 warns that torch.ao.quantization and its quantized tensor types are deprecated
    # (the second on every user's terminal); --int8 uses them knowingly (torchao's int8 measured
    # slower: README, Speed) and the user can do nothing about it, so these two are silenced here.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"torch\.ao\.quantization is deprecated")
        warnings.filterwarnings("ignore", message=r".*quantized tensor creation functions .* are deprecated")
        torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)


def token_batches(sources: list[list[int]], max_tokens: int, beam_size: int) -> list[list[int]]:
    """Indices of ``sources`` in decoding batches: sorted by length (little padding), each batch
    within ``max_tokens`` counted as sentences × longest source × beam (at least one sentence)."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    batches, start = [], 0
    while start < len(order):
        end = start + 1
        while end < len(order) and (end - start + 1) * len(sources[order[end]]) * beam_size <= max_tokens:
            end += 1
        batches.append(order[start:end])
        start = end
    return batches


def spread(plan: list[list[int]], parts: int) -> list[list[int]]:
    """``plan`` with its largest batches halved until it has ``parts`` batches (or only
    single sentences), so that a few sentences still keep every worker busy."""
    plan = list(plan)
    while plan and len(plan) < parts:  # nothing to spread for no sentences (empty or blank input)
        largest = max(range(len(plan)), key=lambda b: len(plan[b]))
        batch = plan[largest]
        if len(batch) < 2:
            break
        plan[largest:largest + 1] = [batch[:len(batch) // 2], batch[len(batch) // 2:]]
    return plan


def check_workers(workers: int) -> int:
    """``workers`` if it is a valid setting (0 = the device's default), else a UsageError."""
    if not isinstance(workers, int) or workers < 0:
        raise UsageError(f"--workers must be a whole number of at least 1 (0 = automatic), got {workers!r}.")
    return workers


class NativeEngine:
    """minitrans's Transformer with :func:`greedy_search` / :func:`beam_search`.

    Args:
        model: The Transformer (put in eval mode).
        max_tokens: Token budget of a decoding batch (sentences × longest source × beam).
        bf16: Decode with the weights cast to bfloat16 once (faster on AMX CPUs, not
            bit-exact; log-probabilities and scores stay float32). Casting once avoids
            autocast's cast of every weight at every call (README, Speed).
        int8: Quantise the model's matrices to int8 first (CPU only; see :func:`quantize_int8`).
        workers: Beam-search batches decoded at once, each by a thread of its own with an equal
            share of the intra-op threads (:mod:`minitrans.workers`); 0 = :func:`default_workers`.
            The outputs do not depend on it.
    """

    name = "native"

    def __init__(self, model, max_tokens: int = 6000, bf16: bool = False, int8: bool = False,
                 workers: int = 0) -> None:
        self.model, self.max_tokens, self.bf16 = model.eval(), max_tokens, bf16
        if int8:
            if bf16:
                raise UsageError("--int8 and --bf16 are two different CPU speed-ups for decoding; choose one "
                                 "(--int8 measured faster: README, Speed).")
            if next(model.parameters()).device.type != "cpu" or not hasattr(model, "output_proj"):
                raise UsageError("--int8 quantises one model for CPU decoding: use --device cpu, no --ensemble.")
            quantize_int8(model)
        if bf16:
            model.to(torch.bfloat16)
        self.workers = check_workers(workers) or default_workers(self.device)
        self._pool: WorkerPool | None = None

    @property
    def config(self) -> ModelConfig:
        return self.model.config

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def search(self, sources: list[list[int]], beam_size: int, alpha: float, nbest: int, max_len_a: float,
               max_len_b: int, use_cache: bool = True, should_stop=None) -> list[list[Hypothesis]]:
        """Hypotheses (best first) for each eos-terminated source, in input order.
        ``should_stop()`` is asked before each decoding batch; when it says yes the search
        raises :class:`Cancelled`."""
        if not sources:  # every input line was empty or blank
            return []

        def decode(chunk: list[int]) -> list[list[Hypothesis]]:
            _check_stop(should_stop)
            src = pad([sources[i] for i in chunk]).to(self.device)
            with torch.inference_mode():  # per thread: it must be entered in the worker
                if beam_size == 1 and nbest == 1:
                    return [[h] for h in greedy_search(self.model, src, max_len_a, max_len_b, use_cache)]
                return beam_search(self.model, src, beam_size, alpha, max_len_a, max_len_b, nbest, use_cache)

        plan = token_batches(sources, self.max_tokens, beam_size)
        # Greedy search runs in the caller: its steps are a few large matrix products that use
        # both threads well, and two workers measured 0.91-1.00x (README, Speed).
        parallel = beam_size > 1 and self.workers > 1
        if parallel:
            plan = spread(plan, self.workers)[::-1]  # longest first: the last batch to start is a short one
        outputs = self._worker_pool().map(decode, plan) if parallel and len(plan) > 1 else map(decode, plan)
        results: list[list[Hypothesis]] = [[] for _ in sources]
        for chunk, hyps in zip(plan, outputs):
            for i, hyp_list in zip(chunk, hyps):
                results[i] = hyp_list
        return results

    def _worker_pool(self) -> WorkerPool:
        """The workers, started at the first search that has batches for them."""
        if self._pool is None:
            self._pool = WorkerPool(self.workers, max(1, torch.get_num_threads() // self.workers))
        return self._pool

    def close(self) -> None:
        """Stop the worker threads (a later search starts them again)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


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
    bf16 = False

    def __init__(self, path: str | os.PathLike, tokenizer: Tokenizer, config: ModelConfig, device: str = "cpu",
                 compute_type: str = "default", threads: int = 0, max_tokens: int = 6000, workers: int = 0) -> None:
        from minitrans.export import import_ctranslate2

        ctranslate2 = import_ctranslate2()
        self.path, self.config, self.max_tokens = Path(path), config, max_tokens
        threads = threads or torch.get_num_threads()
        self.workers = check_workers(workers) or default_workers(device, threads)
        try:
            self.translator = ctranslate2.Translator(str(path), device=device, compute_type=compute_type,
                                                     inter_threads=self.workers,
                                                     intra_threads=max(1, threads // self.workers))
        except (RuntimeError, ValueError) as err:
            raise CheckpointError(f"{path}: CTranslate2 cannot load this model: {str(err).splitlines()[0]}") from None
        self.pieces = tokenizer.pieces(range(tokenizer.vocab_size))
        self.ids = {piece: i for i, piece in enumerate(self.pieces)}
        self.device = torch.device(device)

    def parameter_count(self) -> int:
        """The native model's count for this config (built on the meta device: no memory, no
        weights), since CTranslate2 does not expose its tensors."""
        from minitrans.transformer import Transformer

        with torch.device("meta"):
            return sum(p.numel() for p in Transformer(self.config).parameters())

    def search(self, sources: list[list[int]], beam_size: int, alpha: float, nbest: int, max_len_a: float,
               max_len_b: int, use_cache: bool = True, should_stop=None) -> list[list[Hypothesis]]:
        """Hypotheses (best first) for each eos-terminated source, in input order.
        ``use_cache`` is ignored (CTranslate2 always caches). ``should_stop()`` is asked
        between length groups (:class:`Cancelled`); groups already submitted run to their end."""
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
                [[self.pieces[t] for t in sources[i]] for i in members], asynchronous=True,
                beam_size=beam_size, num_hypotheses=beam_size, length_penalty=NEUTRAL_PENALTY,
                max_decoding_length=limit - 1, min_decoding_length=0, return_end_token=True, return_scores=True,
                suppress_sequences=[[self.pieces[PAD_ID]], [self.pieces[BOS_ID]]], max_input_length=0,
                max_batch_size=self.max_tokens, batch_type="tokens")))
        for members, pending in calls:
            _check_stop(should_stop)
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
        return results


def load_export(path: str | os.PathLike, device: str = "cpu", compute_type: str = "default",
                threads: int = 0, workers: int = 0) -> tuple[CTranslate2Engine, Tokenizer, dict]:
    """Open a folder written by ``minitrans export``: ``(engine, tokenizer, metadata)``."""
    from minitrans.export import META_FILE, SPM_FILE, is_export, read_metadata

    path = Path(path)
    if not is_export(path):
        raise CheckpointError(f"{path} is not a model folder written by `minitrans export` (it needs model.bin, "
                              f"{META_FILE} and {SPM_FILE}); export one with `minitrans export CKPT {path}`.")
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
    import json

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
        from minitrans.export import file_sha256

        if file_sha256(path / "model.bin") != expected:
            raise CheckpointError(f"{path / 'model.bin'} is not the weights file this folder was exported with (its "
                                  "sha256 differs from minitrans.json's model_sha256); export the checkpoint again.")
