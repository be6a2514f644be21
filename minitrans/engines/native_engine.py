"""The native engine: minitrans's own Transformer and search (PyTorch), reading ``.ckpt`` files.

Sentences are decoded in token-budget batches of similar length (:func:`token_batches`), in the
precision the hardware suits (:mod:`minitrans.precision`: bf16 weights, fp32, or dynamic int8
matrices), scoring only the checkpoint's vocabulary shortlist when asked (``--shortlist``,
:mod:`minitrans.decoding.shortlist`), and beam-search batches on several worker threads at once
(:mod:`minitrans.decoding.workers`).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import torch

from minitrans.model.masks import pad
from minitrans.checkpoint import checkpoint_metadata, load_for_inference
from minitrans.model.config import ModelConfig
from minitrans.engines.registry import DEFAULT_MAX_TOKENS, check_stop, check_workers, engine_for
from minitrans.errors import UsageError
from minitrans.decoding.kernels import for_decoding
from minitrans.precision import Precision, choose, requested
from minitrans.decoding.shortlist import Shortlist
from minitrans.decoding.search import Hypothesis, beam_search, greedy_search
from minitrans.model.transformer import Transformer
from minitrans.decoding.workers import WorkerPool, default_workers


def recognises(path: Path) -> bool:
    """A file: a checkpoint (whether it is a valid one, :func:`load` says)."""
    return path.is_file()


def load(path: str | os.PathLike, device: str = "cpu", workers: int = 0, max_tokens: int | None = None,
         precision: str = "auto", shortlist: bool = False):
    """``(NativeEngine, tokenizer, metadata)`` of a checkpoint; the batch budget is
    ``max_tokens``, else the checkpoint's recorded one, else
    :data:`~minitrans.engines.registry.DEFAULT_MAX_TOKENS`. ``precision`` as :func:`minitrans.precision.choose`
    resolves it;
    ``shortlist``: score only the checkpoint's vocabulary shortlist (off by default: it cost
    0.14-0.52 BLEU in beam search, docs/speed.md)."""
    if Path(path).is_dir():
        other = engine_for(path)
        if other != "native":
            raise UsageError(f"{path} is a {other} model folder, not a checkpoint: pass --engine {other}, or a .ckpt.")
    precision = requested(precision)  # checked before the minutes of loading
    model, tokenizer, meta = load_for_inference(path, device)
    budget = max_tokens or meta.get("decoding", {}).get("max_tokens") or DEFAULT_MAX_TOKENS
    entry = meta.get("shortlist") if shortlist else None
    listed = Shortlist.from_entry(entry, model.config.vocab_size, str(path)) if isinstance(entry, dict) else None
    engine = NativeEngine(model, budget, precision, workers, shortlist=listed)
    engine.reason = "asked for with --engine native"
    return engine, tokenizer, meta


def metadata(path: str | os.PathLike) -> dict:
    """A checkpoint's minitrans metadata."""
    return checkpoint_metadata(path)


def quantize_int8(model) -> None:
    """Dynamic int8 quantisation, in place, for CPU decoding: every Linear layer and the output
    projection get int8 weights; activations are quantised at run time (PyTorch's
    ``quantize_dynamic``, FBGEMM kernels). A tied output projection (the largest matrix
    product of a decoding step) first becomes a Linear layer of its own. Measured 1.20x the
    fp32 beam-search rate with the same BLEU (docs/speed.md)."""
    if model.output_proj is None:
        weight = model.tgt_embed.weight
        model.output_proj = torch.nn.Linear(weight.size(1), weight.size(0), bias=False)
        model.output_proj.weight = torch.nn.Parameter(weight.detach().clone(), requires_grad=False)
    # PyTorch 2.13 warns that torch.ao.quantization and its quantized tensor types are deprecated
    # (the second on every user's terminal); --int8 uses them knowingly (torchao's int8 measured
    # slower: docs/speed.md) and the user can do nothing about it, so these two are silenced here.
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


class NativeEngine:
    """minitrans's Transformer with :func:`greedy_search` / :func:`beam_search`.

    Args:
        model: The Transformer (put in eval mode).
        max_tokens: Token budget of a decoding batch (sentences × longest source × beam).
        precision: ``auto`` (bf16 where the device has bf16 units, else fp32:
            :func:`minitrans.precision.choose`; :func:`load`'s default), ``fp32`` (the default
            for a model passed in: bf16 and int8 convert it in place), ``bf16`` or ``int8``.
            bf16: the weights cast to bfloat16 once (not bit-exact; log-probabilities and
            scores stay float32; casting once avoids autocast's cast of every weight at every
            call, docs/speed.md). int8: the model's matrices quantised first (CPU only; see
            :func:`quantize_int8`).
        workers: Beam-search batches decoded at once, each by a thread of its own with an equal
            share of the intra-op threads (:mod:`minitrans.decoding.workers`); 0 = :func:`default_workers`.
            The outputs do not depend on it.
        prepack: With bf16 on a CPU, lay every weight of a Transformer out once for oneDNN
            (:mod:`minitrans.decoding.prepack`): the same outputs as unpacked bf16, 1.03-1.09x its greedy
            and beam-5 rates for the quickstart models (docs/speed.md). On by default;
            ``False`` is for measurements.
        shortlist: Score only these target pieces for each batch (:mod:`minitrans.decoding.shortlist`);
            None (or an ensemble, or int8) scores the whole vocabulary.
    """

    name = "native"
    reason = "a model given to the Translator"

    def __init__(self, model, max_tokens: int = DEFAULT_MAX_TOKENS, precision: str = "fp32", workers: int = 0,
                 prepack: bool = True, shortlist: Shortlist | None = None) -> None:
        self.model, self.max_tokens = for_decoding(model.eval()), max_tokens
        self.precision: Precision = choose(precision, self.device)
        if self.precision.name == "int8":
            if self.device.type != "cpu" or not hasattr(model, "output_proj"):
                raise UsageError("--precision int8 quantises one model for CPU decoding: use --device cpu, "
                                 "no --ensemble.")
            quantize_int8(model)
        self.shortlist = shortlist if isinstance(model, Transformer) and self.precision.name != "int8" else None
        if self.bf16:
            model.to(torch.bfloat16)
            if prepack:
                from minitrans.decoding import prepack as packing

                if isinstance(model, Transformer) and packing.available(model):  # not an ensemble
                    packing.prepack(model)
        self.workers = check_workers(workers) or default_workers(self.device)
        self._pool: WorkerPool | None = None

    @property
    def bf16(self) -> bool:
        return self.precision.name == "bf16"

    @property
    def config(self) -> ModelConfig:
        return self.model.config

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def search(self, sources: list[list[int]], beam_size: int, alpha: float, nbest: int, max_len_a: float,
               max_len_b: int, use_cache: bool = True, should_stop=None, progress=None) -> list[list[Hypothesis]]:
        """Hypotheses (best first) for each eos-terminated source, in input order.
        ``should_stop()`` is asked before each decoding batch; when it says yes the search
        raises :class:`Cancelled`. ``progress(n)`` is called as each batch of n is done."""
        if not sources:  # every input line was empty or blank
            return []

        def decode(chunk: list[int]) -> list[list[Hypothesis]]:
            check_stop(should_stop)
            src = pad([sources[i] for i in chunk]).to(self.device)
            vocab = self.shortlist.vocabulary(src) if self.shortlist is not None else None
            with torch.inference_mode():  # per thread: it must be entered in the worker
                if beam_size == 1 and nbest == 1:
                    return [[h] for h in greedy_search(self.model, src, max_len_a, max_len_b, use_cache, vocab)]
                return beam_search(self.model, src, beam_size, alpha, max_len_a, max_len_b, nbest, use_cache, vocab)

        plan = token_batches(sources, self.max_tokens, beam_size)
        # Greedy search runs in the caller: its steps are a few large matrix products that use
        # both threads well, and two workers measured 0.91-1.00x (docs/speed.md).
        parallel = beam_size > 1 and self.workers > 1
        if parallel:
            plan = spread(plan, self.workers)[::-1]  # longest first: the last batch to start is a short one
        outputs = self._worker_pool().map(decode, plan) if parallel and len(plan) > 1 else map(decode, plan)
        results: list[list[Hypothesis]] = [[] for _ in sources]
        for chunk, hyps in zip(plan, outputs):
            for i, hyp_list in zip(chunk, hyps):
                results[i] = hyp_list
            if progress is not None:
                progress(len(chunk))
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
