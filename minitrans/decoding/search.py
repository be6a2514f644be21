"""Greedy and beam search, batched over sentences (and beams), driven through the KV cache.

Pure functions of a :class:`~minitrans.model.transformer.Transformer` (or an
:class:`~minitrans.decoding.ensemble.Ensemble`) and source ids. Each batch is encoded once; the
cross-attention keys/values are computed at the first step, once per sentence (its beams
share them), and kept in the cache; every later step feeds only the newest token. Beam
search's first step, where every beam holds the same ``<s>``, runs one row per sentence
(as CTranslate2 does). A finished sentence (all its beams done) leaves the batch and stops
costing compute: in beam search at once (the step's beam reorder copies the caches anyway),
in greedy search once finished rows are an eighth of the batch (dropping rows copies every
cache). The bookkeeping (which sentence is where, which reached its length limit, which has
its ``beam`` hypotheses) lives in Python lists, so a step asks the tensors for one small
result (the finished hypotheses) instead of one per sentence.

Beam search follows fairseq's scheme: keep ``beam`` live hypotheses per sentence, look at
the best ``2 × beam`` extensions, finalise those ending in eos that rank among the first
``beam``, continue with the best ``beam`` that do not, and stop a sentence once ``beam``
hypotheses are finalised. Scores are length-normalised with the GNMT penalty
``lp(Y) = ((5 + |Y|) / 6)^α`` (Wu et al., 2016), |Y| counting eos.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from minitrans.decoding.kernels import projection
from minitrans.decoding.settings import DEFAULT_ALPHA, DEFAULT_BEAM, DEFAULT_MAX_LEN_A, DEFAULT_MAX_LEN_B, nbest_fits
from minitrans.errors import UsageError
from minitrans.model.masks import padding_mask
from minitrans.text.vocab import BOS_ID, EOS_ID, PAD_ID


@dataclass
class Hypothesis:
    """One output: ``tokens`` exclude bos and eos; ``score`` is the length-normalised
    log-probability, ``logprob`` the raw sum (eos included)."""

    tokens: list[int]
    score: float
    logprob: float


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT length penalty ((5 + length) / 6) ** alpha; 1 when alpha == 0."""
    return ((5 + length) / 6) ** alpha


def max_output_lengths(src: Tensor, a: float, b: int, limit: int, pad_id: int = PAD_ID) -> Tensor:
    """Per-sentence maximum output length ``a · src_len + b`` (eos included), capped at ``limit``."""
    return length_limits((src != pad_id).sum(1), a, b, limit)  # (B,)


def length_limits(src_lengths: Tensor, a: float, b: int, limit: int) -> Tensor:
    """``a · src_len + b`` for source lengths (eos included), between 1 and ``limit``."""
    return (a * src_lengths.float() + b).long().clamp(1, limit)


#: Width of the blocks :func:`top_k` takes maxima over: 64 fp32 values are four AVX-512 vectors.
TOP_K_BLOCK = 64


def top_k(x: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The ``k`` largest values of each row of ``x`` (R, V) and their columns, best first:
    what ``x.topk(k, dim=-1)`` returns, found by reading most of the row only once.

    ``torch.topk`` on a CPU selects element by element, and over an 8k vocabulary that was a
    sixth of a beam-search step (docs/speed.md). Here the row is cut into blocks of
    :data:`TOP_K_BLOCK` columns and only the block maxima are compared element by element (a
    vectorised ``amax`` finds them); the top ``k`` then lie in the ``k`` blocks with the
    largest maxima, and one ``topk`` over those ``k`` blocks finds them. Why that is exact: if
    one of the row's ``i`` largest values ``v`` sat in a block that was not chosen, each of the
    ``k ≥ i`` chosen blocks would have a maximum ≥ ``v``, so the chosen blocks would still hold
    ``i`` values ≥ ``v``. The values equal ``torch.topk``'s; the columns may differ only
    between exactly tied values, which ``torch.topk`` does not order either.
    """
    rows, width = x.shape
    blocks = width // TOP_K_BLOCK
    if blocks <= k or x.device.type != "cpu":  # nothing to save (or another device's topk)
        return x.topk(min(k, width), dim=-1)
    whole = blocks * TOP_K_BLOCK
    maxima = x[:, :whole].view(rows, blocks, TOP_K_BLOCK).amax(-1)  # (R, blocks)
    if whole < width:  # the short last block
        maxima = torch.cat([maxima, x[:, whole:].amax(-1, keepdim=True)], 1)
    chosen = maxima.topk(k, dim=-1).indices  # (R, k)
    cols = (chosen[:, :, None] * TOP_K_BLOCK + torch.arange(TOP_K_BLOCK)).view(rows, -1)  # (R, k·block)
    if whole < width:  # columns past the row's end (from the short block) never win
        past = cols >= width
        values = x.gather(1, cols.clamp_(max=width - 1)).masked_fill_(past, float("-inf"))
    else:
        values = x.gather(1, cols)
    top, where = values.topk(k, dim=-1)  # (R, k)
    return top, cols.gather(1, where)


def cache_dtype(model) -> torch.dtype | None:
    """The number format a search keeps its key/value cache in: None (the model's), except
    float32 for a bf16 model on a CPU, whose decoding steps then attend in float32.

    Why: a decoding step multiplies one query (or a sentence's K beam queries) by a few dozen
    cached keys, for every row and head: thousands of tiny products, which PyTorch's CPU
    kernels ran 1.7x (contiguous keys) to 5x (a view of the cache buffer) faster in float32 than
    in bf16; against a bf16 cache whole decoding was slower and took more memory
    (docs/speed.md, "The decoding step's small operations"; docs/experiments.md).
    """
    weight = next(model.parameters())
    return torch.float32 if weight.dtype == torch.bfloat16 and weight.device.type == "cpu" else None


class _Stepper:
    """One step of the decoder for the rows still in the batch, with or without a cache.

    ``memory`` and ``src_mask`` have one row per sentence. With the cache, the ``beams``
    rows of a sentence share its cross-attention keys/values; without it (the reference
    the cache is tested against) they are repeated per beam and the prefix is recomputed.
    ``vocab`` (sorted target ids, eos among them; :mod:`minitrans.decoding.shortlist`) restricts the
    output projection to those pieces; None scores the whole vocabulary.
    """

    def __init__(self, model, memory: Tensor, src_mask: Tensor, use_cache: bool, beams: int = 1,
                 capacity: int = 0, vocab: Tensor | None = None) -> None:
        self.model, self.vocab = model, vocab
        # Extra decode arguments: the shortlist's projection, made once per batch.
        self.extra = {"project": projection(model, vocab)} if vocab is not None else {}
        self.eos_col = EOS_ID if vocab is None else int(torch.searchsorted(vocab, EOS_ID))
        if use_cache:
            self.cache = model.init_cache(capacity, beams, cache_dtype(model))
        else:
            self.cache = None
            rows = torch.arange(src_mask.size(0), device=src_mask.device).repeat_interleave(beams)
            memory, src_mask = memory.index_select(0, rows), src_mask.index_select(0, rows)
        self.memory, self.src_mask, self.beams = memory, src_mask, beams

    def log_probs(self, prefix: Tensor, limited: list[int]) -> Tensor:
        """Next-token log-probabilities of each row, float32 (R, V), or (R, shortlist) with a
        shortlist (column j: piece ``vocab[j]``; :meth:`ids` maps columns to ids).

        Args:
            prefix: Prefix ids (R, t): R = sentences × beams.
            limited: Sentences (indices of ``R / beams`` groups) at their length limit: eos
                is their only continuation, at log-probability 0.

        ``<pad>`` and ``<s>`` get -inf; their probability stays in the normaliser (they are
        masked after the log-softmax). One fused log-softmax over float32 logits, not
        ``logsumexp`` and a subtraction: faster at a step's (rows, vocabulary) shape (docs/speed.md,
        "The decoding step's small operations"). With a shortlist the log-softmax normalises over its
        pieces (which hold neither ``<pad>`` nor ``<s>``).
        """
        if self.cache is not None:
            logits = self.model.decode(self.memory, self.src_mask, prefix[:, -1:], self.cache, **self.extra)
        else:  # recompute the whole prefix
            logits = self.model.decode(self.memory, self.src_mask, prefix, **self.extra)
        logprobs = torch.log_softmax(logits[:, -1].float(), dim=-1)  # (R, V), or (R, shortlist)
        if self.vocab is None:
            logprobs[:, [self.model.config.pad_id, BOS_ID]] = float("-inf")
        if limited:
            rows = torch.tensor(limited, device=logprobs.device)
            only_eos = torch.full((logprobs.size(1),), float("-inf"), device=logprobs.device)
            only_eos[self.eos_col] = 0.0
            logprobs.view(-1, self.beams, logprobs.size(1))[rows] = only_eos
        return logprobs

    def ids(self, columns: Tensor) -> Tensor:
        """Token ids of :meth:`log_probs` columns."""
        return columns if self.vocab is None else self.vocab[columns]

    def widen(self, beams: int) -> None:
        """Rows per sentence become ``beams`` (beam search after a first step run once per
        sentence); call it just before the :meth:`select` whose ``rows`` repeat each sentence's row."""
        self.beams = beams
        if self.cache is not None:
            self.cache.widen(beams)

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep (and reorder) beam rows ``rows``; ``sentences``: the sentence rows kept when
        some left the batch (None: all stay)."""
        if self.cache is None:  # memory is repeated per beam row
            self.memory, self.src_mask = self.memory.index_select(0, rows), self.src_mask.index_select(0, rows)
            return
        if sentences is None and self.beams == 1:  # one row per sentence: rows are sentences
            sentences = rows
        self.cache.select(rows, sentences)
        if sentences is not None:
            self.memory, self.src_mask = self.memory.index_select(0, sentences), self.src_mask.index_select(0, sentences)


#: Greedy search drops finished sentences from its batch once they are this share of its rows.
#: Until then they are decoded along (their outputs ignored): dropping rows copies every
#: key/value cache of the batch, which cost more than decoding a few idle rows.
COMPACT_SHARE = 0.125


@torch.no_grad()
def greedy_search(model, src: Tensor, max_len_a: float = DEFAULT_MAX_LEN_A, max_len_b: int = DEFAULT_MAX_LEN_B,
                  use_cache: bool = True, vocab: Tensor | None = None) -> list[Hypothesis]:
    """Pick the most likely token at every step.

    Args:
        model: A :class:`~minitrans.model.transformer.Transformer` (in eval mode).
        src: Source ids (B, S), eos-terminated, right-padded.
        max_len_a, max_len_b: Output length limit ``a · src_len + b`` per sentence.
        use_cache: Decode incrementally (True) or recompute the prefix each step.
        vocab: Sorted target ids to score (a shortlist, :mod:`minitrans.decoding.shortlist`); None = all.

    Returns:
        One :class:`Hypothesis` per sentence, in input order.
    """
    b = src.size(0)
    limits = max_output_lengths(src, max_len_a, max_len_b, model.config.max_len - 1, model.config.pad_id).tolist()
    src_mask = padding_mask(src, model.config.pad_id)  # (B, 1, 1, S)
    step = _Stepper(model, model.encode(src, src_mask), src_mask, use_cache, capacity=max(limits) + 1, vocab=vocab)
    alive = list(range(b))  # original row of each batch row (bookkeeping on the host: no per-row syncs)
    searching = torch.ones(b, dtype=torch.bool, device=src.device)  # rows whose sentence is unfinished
    idle = 0  # finished rows still in the batch
    prefix = torch.full((b, 1), BOS_ID, dtype=torch.long, device=src.device)
    logprob = torch.zeros(b, device=src.device)
    results: list[Hypothesis | None] = [None] * b
    for t in range(max(limits)):
        values, columns = top_k(step.log_probs(prefix, [i for i, s in enumerate(alive) if limits[s] == t + 1]), 1)
        best = step.ids(columns[:, 0])  # (N,)
        logprob += values[:, 0]
        prefix = torch.cat([prefix, best[:, None]], 1)  # (N, t + 2)
        done = ((best == EOS_ID) & searching).nonzero().flatten()
        if done.numel():
            for row, tokens, score in zip(done.tolist(), prefix[done, 1:-1].tolist(), logprob[done].tolist()):
                results[alive[row]] = Hypothesis(tokens, score, score)
            searching[done] = False
            idle += done.numel()
            if idle == len(alive):
                break
            if idle >= COMPACT_SHARE * len(alive):  # drop the finished rows (a copy of every cache)
                keep = searching.nonzero().flatten()
                alive = [alive[i] for i in keep.tolist()]
                prefix, logprob, searching = prefix[keep], logprob[keep], searching[keep]
                step.select(keep)
                idle = 0
    return results  # type: ignore[return-value]


@torch.no_grad()
def beam_search(model, src: Tensor, beam_size: int = DEFAULT_BEAM, alpha: float = DEFAULT_ALPHA,
                max_len_a: float = DEFAULT_MAX_LEN_A, max_len_b: int = DEFAULT_MAX_LEN_B, nbest: int = 1,
                use_cache: bool = True, vocab: Tensor | None = None) -> list[list[Hypothesis]]:
    """Beam search, batched over sentences and beams.

    Args:
        model: A :class:`~minitrans.model.transformer.Transformer` (in eval mode).
        src: Source ids (B, S), eos-terminated, right-padded.
        beam_size: Live hypotheses kept per sentence (K).
        alpha: Length-penalty exponent α (0 = raw log-probability).
        max_len_a, max_len_b: Output length limit ``a · src_len + b`` per sentence.
        nbest: Hypotheses returned per sentence (at most ``beam_size``).
        use_cache: Decode incrementally (True) or recompute the prefix each step.
        vocab: Sorted target ids to score (a shortlist, :mod:`minitrans.decoding.shortlist`); None = all.

    Returns:
        For each sentence in input order, ``nbest`` hypotheses sorted best first.
    """
    if not nbest_fits(nbest, beam_size):
        raise UsageError(f"nbest must lie in 1..beam_size ({beam_size}), got {nbest}.")
    b, k, device = src.size(0), beam_size, src.device
    limits = max_output_lengths(src, max_len_a, max_len_b, model.config.max_len - 1, model.config.pad_id).tolist()
    src_mask = padding_mask(src, model.config.pad_id)  # (B, 1, 1, S)
    # At step 0 all K beams of a sentence hold the same prefix (<s>). Where one row can offer
    # the 2K candidates (CTranslate2's "expand after the first step"), step 0 runs one row
    # per sentence and the rows are repeated K times by its reorder; else the K rows run,
    # all but the first at score -inf.
    scored = model.config.vocab_size if vocab is None else vocab.numel()
    rows = 1 if k > 1 and 2 * k <= scored else k  # rows per sentence now
    step = _Stepper(model, model.encode(src, src_mask), src_mask, use_cache, beams=rows, capacity=max(limits) + 1,
                    vocab=vocab)
    alive = list(range(b))  # original index of each sentence still searched (host-side bookkeeping)
    prefix = torch.full((b * rows, 1), BOS_ID, dtype=torch.long, device=device)
    scores = torch.full((b, rows), float("-inf"), device=device)
    scores[:, 0] = 0.0  # at step 0 all beams are equal: keep one to avoid duplicates
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    for t in range(max(limits)):
        n = len(alive)
        logprobs = step.log_probs(prefix, [i for i, s in enumerate(alive) if limits[s] == t + 1])  # (N*rows, V)
        width = logprobs.size(1)
        # Every extension of a sentence's beams in one row (fairseq's top-k over beam × vocabulary):
        # one top-k of N rows instead of N*rows top-ks and a second pass over their candidates.
        cand = logprobs.add_(scores.view(-1, 1)).view(n, rows * width)  # (N, rows*V)
        top_scores, top_pos = top_k(cand, 2 * k)  # (N, 2K)
        origin = top_pos // width  # the beam each candidate extends
        token = step.ids(top_pos % width)  # and its token
        is_eos = (token == EOS_ID) & torch.isfinite(top_scores)
        # Finalise eos candidates that rank among the first K (fairseq's rule), in score order.
        hits = is_eos[:, :k].nonzero()  # (hits, 2): sentence row, candidate rank
        if hits.numel():
            i, j = hits[:, 0], hits[:, 1]
            raws = top_scores[i, j]
            tokens = prefix.index_select(0, i * rows + origin[i, j])[:, 1:]
            penalty = length_penalty(t + 1, alpha)
            for row, hyp_tokens, raw in zip(i.tolist(), tokens.tolist(), raws.tolist()):
                if len(finished[alive[row]]) < k:
                    finished[alive[row]].append(Hypothesis(hyp_tokens, raw / penalty, raw))
        done = [len(finished[s]) >= k or limits[s] <= t + 1 for s in alive]  # past its limit: nothing is left
        if all(done):
            break
        # Continue with the best K candidates that are not eos (a stable sort keeps score order).
        order = is_eos.to(torch.uint8).argsort(dim=1, stable=True)[:, :k]  # (N, K)
        scores, new_origin, new_token = top_scores.gather(1, order), origin.gather(1, order), token.gather(1, order)
        beam_rows = torch.arange(n, device=device)[:, None] * rows + new_origin  # (N, K)
        sentences = None
        if any(done):  # finished sentences leave the batch in the same reorder as the beams
            sentences = torch.tensor([i for i, d in enumerate(done) if not d], device=device)
            alive = [s for s, d in zip(alive, done) if not d]
            scores, new_token, beam_rows = scores[sentences], new_token[sentences], beam_rows[sentences]
        beam_rows = beam_rows.view(-1)  # (N'*K,)
        prefix = torch.cat([prefix.index_select(0, beam_rows), new_token.view(-1, 1)], 1)
        if rows < k:  # after step 0: this reorder repeats each sentence's row K times
            rows = k
            step.widen(k)
        step.select(beam_rows, sentences)
    out = []
    for hyps in finished:
        hyps = sorted(hyps, key=lambda h: h.score, reverse=True)[:nbest]
        out.append(hyps)
    return out
