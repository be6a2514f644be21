"""Translator: strings in, strings out, from a self-contained checkpoint or an exported model.

Each input string is a text: it is split into sentences (:mod:`minitrans.text.segment`), every
sentence of every input is normalised, tokenised and decoded in one batched search by an
engine (:mod:`minitrans.engines.registry`), and each text is put back together with its own spacing and
line breaks. Results come in input order, one per input. Empty and whitespace-only inputs give
empty translations (line count is preserved); format characters (zero-width spaces, U+2060, a
BOM) never reach the model, and a sentence with no letter or digit comes back as it is;
sentences longer than the model's positional range are truncated with a warning.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field

import torch

from minitrans.checkpoint import load_for_inference
from minitrans.text import languages
from minitrans.text import segment
from minitrans.decoding.confidence import confidence
from minitrans.text.cleaning import check_unicode, clean, has_words, without_format_characters
from minitrans.engines.auto_engine import open_model
from minitrans.engines.registry import DEFAULT_MAX_TOKENS, is_exported
from minitrans.engines.native_engine import NativeEngine
from minitrans.precision import folded, requested
from minitrans.errors import CheckpointError, UsageError
from minitrans.decoding.settings import DEFAULT_ALPHA, DEFAULT_BEAM, DEFAULT_MAX_LEN_A, DEFAULT_MAX_LEN_B, check_decoding
from minitrans.decoding.search import Hypothesis
from minitrans.text.tokenizer import Tokenizer
from minitrans.text.vocab import EOS_ID
from minitrans.model.transformer import Transformer

log = logging.getLogger(__name__)


@dataclass
class Translation:
    """One input's result: the best text, its score, the n-best list and (optionally)
    the cross-attention weights of the best hypothesis, (target pieces + eos, source pieces + eos)."""

    source: str
    text: str
    score: float
    nbest: list[tuple[str, float]] = field(default_factory=list)
    src_pieces: list[str] = field(default_factory=list)
    tgt_pieces: list[str] = field(default_factory=list)
    attention: torch.Tensor | None = None
    truncated: bool = False
    #: The sentences the input was split into, each with its own result (empty when the
    #: input was translated as one sentence, ``split=False``).
    sentences: list["Translation"] = field(default_factory=list)
    #: The model's geometric-mean probability per output token (:mod:`minitrans.decoding.confidence`);
    #: a text's is its weakest sentence's. None for an empty input.
    confidence: float | None = None
    #: Below the threshold ``minitrans calibrate`` stored with the model (None: not calibrated).
    low_confidence: bool | None = None


class Translator:
    """Translate English sentences to French with a trained model.

    One interface over two engines (:mod:`minitrans.engines.registry`): minitrans's own PyTorch
    search, or CTranslate2 running a folder written by ``minitrans export``. Cleaning,
    segmentation, truncation, empty lines and detokenisation happen here, the same for both.

    Args:
        model: The Transformer, or an engine (any :class:`~minitrans.engines.registry.Engine`:
            :class:`~minitrans.engines.native_engine.NativeEngine`,
            :class:`~minitrans.engines.ctranslate2_engine.CTranslate2Engine`).
        tokenizer: Its SentencePiece tokenizer.
        max_tokens: Token budget of a decoding batch (sentences × longest source × beam).
        max_len_a, max_len_b: Output length limit ``a · src_len + b``.
        precision: ``auto`` (bf16 where the device has bf16 units, fp32 elsewhere;
            :mod:`minitrans.precision`), ``fp32``, ``bf16`` or ``int8`` (native engine).
            :meth:`load`, :meth:`from_checkpoint` and :meth:`from_checkpoints` take ``auto`` by
            default; a model passed in here is decoded as it is (``fp32``) unless asked, since
            bf16 and int8 convert it in place. bf16: weights cast once; int8: dynamic int8
            matrices for CPU decoding, never chosen by ``auto`` on this engine (their speed and
            BLEU: docs/speed.md, "Precision by hardware").
        bf16, int8: The older switches for ``precision="bf16"`` / ``"int8"``.
        workers: Batches decoded at once, each by its own thread with a share of the intra-op
            threads (:mod:`minitrans.decoding.workers`; beam search only on the native engine, whose
            greedy search stays in the caller; CTranslate2's ``inter_threads`` for an export);
            0 = two on a CPU with two or more threads, else one. Outputs do not depend on it.
    """

    def __init__(self, model, tokenizer: Tokenizer, max_tokens: int = DEFAULT_MAX_TOKENS,
                 max_len_a: float = DEFAULT_MAX_LEN_A, max_len_b: int = DEFAULT_MAX_LEN_B, bf16: bool = False,
                 int8: bool = False, workers: int = 0, precision: str = "fp32") -> None:
        self.engine = (NativeEngine(model, max_tokens, requested(precision, bf16, int8), workers)
                       if isinstance(model, torch.nn.Module) else model)
        self.tokenizer = tokenizer
        self.max_len_a, self.max_len_b = max_len_a, max_len_b
        self.meta: dict = {}
        self._native_source = None  # (path, device, options): a checkpoint another engine decodes
        self._native = None  # its native engine, for attention weights (attention_engine)
        self._source_sha256 = None  # the sha256 of the checkpoint it was loaded from (_check_unchanged)
        self._native_lock = threading.Lock()

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, device: str = "cpu", **kwargs) -> "Translator":
        """Load a checkpoint written by ``minitrans train`` (or ``minitrans average``)."""
        return cls.load(path, "native", device, **kwargs)

    @classmethod
    def from_checkpoints(cls, paths: list[str | os.PathLike], device: str = "cpu", engine: str = "native",
                         **kwargs) -> "Translator":
        """An ensemble of checkpoints trained with the same tokenizer (:mod:`minitrans.decoding.ensemble`,
        native engine); one path gives the plain model, read by ``engine`` (:meth:`load`)."""
        if len(paths) == 1:
            return cls.load(paths[0], engine, device, **kwargs)
        from minitrans.decoding.ensemble import Ensemble

        kwargs = folded(kwargs)
        kwargs.pop("shortlist", None)  # an ensemble scores the whole vocabulary
        kwargs.setdefault("precision", "auto")
        loaded = [load_for_inference(p, device) for p in paths]
        first = loaded[0][2]["tokenizer_fingerprint"]
        for path, (_, _, meta) in zip(paths[1:], loaded[1:]):
            if meta["tokenizer_fingerprint"] != first:
                raise CheckpointError(f"Cannot ensemble {path} with {paths[0]}: they use different SentencePiece "
                                      "models, so the same id means different pieces. Ensemble runs of one recipe.")
            languages.check_same("ensemble", (paths[0], loaded[0][2]), (path, meta))
        meta = {**loaded[0][2], "ensemble": [str(p) for p in paths]}
        translator = cls(Ensemble([m for m, _, _ in loaded]).eval(), loaded[0][1],
                         **{**meta.get("decoding", {}), **kwargs})
        translator.engine.reason = "an ensemble runs on the native engine"
        translator.meta = meta
        return translator

    @classmethod
    def from_export(cls, path: str | os.PathLike, device: str = "cpu", compute_type: str | None = None,
                    threads: int = 0, workers: int = 0, **kwargs) -> "Translator":
        """Load a folder written by ``minitrans export`` (CTranslate2 engine), in the weight type
        chosen at export unless ``compute_type`` or ``precision`` (fp32, int8) says otherwise."""
        return cls.load(path, "ctranslate2", device, compute_type=compute_type, threads=threads, workers=workers,
                        **kwargs)

    @classmethod
    def load(cls, path: str | os.PathLike, engine: str | None = "auto", device: str = "cpu",
             **kwargs) -> "Translator":
        """A model of any registered format (:data:`minitrans.engines.registry.REGISTRY`): a checkpoint,
        an exported folder (``ctranslate2``) ...; ``engine`` ``auto`` (or None, the default)
        decodes with the fastest engine that can do the work (:mod:`minitrans.engines.auto_engine`),
        ``native`` or ``ctranslate2`` force one. ``kwargs`` are the engine's options
        (``precision``, ``workers``, ``max_tokens``, ``shortlist``) and the decoding limits
        ``max_len_a``, ``max_len_b``. A checkpoint decoded by CTranslate2 still gives attention
        weights: a native copy is loaded the first time they are asked for."""
        kwargs = folded(kwargs)  # bf16=True / int8=True: the older spellings of precision=
        limits = {k: kwargs.pop(k) for k in ("max_len_a", "max_len_b") if k in kwargs}
        model_engine, tokenizer, meta = open_model(path, engine, device, **kwargs)
        kwargs.pop("attention", None)  # auto's choice only (auto_engine.choose), not an engine option
        decoding = {k: v for k, v in meta.get("decoding", {}).items() if k in ("max_len_a", "max_len_b")}
        translator = cls(model_engine, tokenizer, **{**decoding, **limits})
        translator.meta = meta
        if not isinstance(model_engine, NativeEngine) and not is_exported(path):
            translator._native_source = (path, device, kwargs)
            translator._source_sha256 = getattr(model_engine, "source_sha256", None)
        return translator

    @property
    def engine_reason(self) -> str:
        """Why this engine decodes (``--engine auto``'s choice, or that it was asked for)."""
        return self.engine.reason

    def decoding(self) -> dict:
        """What decodes and why: the engine, its reason, the precision (:attr:`precision`), the
        workers, and whether attention weights are available (``/v1/model``, evaluation reports)."""
        return {"engine": self.engine.name, "engine_reason": self.engine_reason, **self.precision,
                "workers": self.engine.workers, "attention": self.attention_available}

    @property
    def attention_available(self) -> bool:
        """Whether attention weights can be asked for: a native model, or a checkpoint whose
        native copy :meth:`attention_engine` loads."""
        return isinstance(getattr(self.engine, "model", None), Transformer) or self._native_source is not None

    def describe(self) -> str:
        """:meth:`decoding` as the one line the commands print on stderr."""
        d = self.decoding()
        return (f"decoding with {d['engine']} in {d['precision']}, {d['workers']} worker{'s' * (d['workers'] != 1)} "
                f"({d['engine_reason']}; {d['reason']})")

    def attention_engine(self):
        """The engine attention weights come from: this one when it is native, else a native
        copy of the checkpoint, loaded on first use (one at a time: a server's threads share
        it); None when there is none (an exported folder, an ensemble)."""
        if isinstance(getattr(self.engine, "model", None), Transformer):
            return self.engine
        if self._native_source is None:
            return None
        with self._native_lock:
            if self._native is None:
                path, device, options = self._native_source
                log.info("Loading the native engine of %s for attention weights.", path)
                self._check_unchanged(path)
                native, _, _ = open_model(path, "native", device, **options)
                self._check_unchanged(path)  # and not rewritten while it was read
                self._native = native
        return self._native

    def native_source_changed(self) -> bool:
        """Whether attention weights can no longer come from this model: its checkpoint was
        rewritten before the native copy was loaded (:meth:`attention_engine` would refuse)."""
        if self._native is not None or self._native_source is None:
            return False
        try:
            self._check_unchanged(self._native_source[0])
        except CheckpointError:
            return True
        return False

    def _check_unchanged(self, path) -> None:
        """Refuse a checkpoint rewritten since this translator was loaded (a training run writes
        ``best.ckpt`` again): its native copy would be another model than the one decoding."""
        from minitrans.text.textio import file_sha256

        expected = self._source_sha256
        try:
            now = file_sha256(path)
        except OSError as err:
            raise CheckpointError(f"{path} cannot be read again for attention weights ({err.strerror or err}); "
                                  "restart to load the model anew.") from None
        if expected is not None and now != expected:
            raise CheckpointError(f"{path} changed on disk since this model was loaded (another run rewrote it): "
                                  "attention weights would come from another model. Restart to load the new one, "
                                  "or serve a copy of the checkpoint that nothing rewrites.")

    @property
    def model(self) -> Transformer:
        """The PyTorch model (native engine only)."""
        if not isinstance(self.engine, NativeEngine):
            raise UsageError(f"This translator runs the {self.engine.name} engine: there is no PyTorch model.")
        return self.engine.model

    @property
    def config(self):
        """The model's :class:`~minitrans.model.config.ModelConfig`."""
        return self.engine.config

    @property
    def bf16(self) -> bool:
        return self.engine.bf16

    @property
    def precision(self) -> dict:
        """The precision decoding runs in, what was asked and why (:mod:`minitrans.precision`)."""
        return self.engine.precision.to_dict()

    @property
    def shortlist(self) -> bool:
        """Whether decoding scores a vocabulary shortlist only (:mod:`minitrans.decoding.shortlist`)."""
        return getattr(self.engine, "shortlist", None) is not None

    @property
    def device(self) -> torch.device:
        return self.engine.device

    def translate(self, sentences: list[str] | str, beam_size: int = DEFAULT_BEAM,
                  alpha: float = DEFAULT_ALPHA, progress=None, split: bool = True) -> list[str] | str:
        """Translate texts; returns one string per input, in input order. A single string gives
        a single string back (not a list of characters). Each input may hold several sentences
        and lines: they are translated one by one and put back in place (``split=False``
        translates each input as one sentence, as a test set's lines are).
        ``progress(n)``, when given, is called as each decoding batch of n sentences is done."""
        if isinstance(sentences, str):
            return self.translate([sentences], beam_size, alpha, progress, split)[0]
        # translate_detailed checks the input
        return [t.text for t in self.translate_detailed(sentences, beam_size, alpha, progress=progress, split=split)]

    @staticmethod
    def _sentences(sentences) -> list[str]:
        """``sentences`` as a list of strings, or a UsageError that says what to pass."""
        if isinstance(sentences, str):
            return [sentences]
        if isinstance(sentences, (bytes, bytearray)):
            raise UsageError("Translator expects text, got bytes: decode them first, e.g. data.decode('utf-8').")
        if isinstance(sentences, dict) or not hasattr(sentences, "__iter__"):
            raise UsageError(f"Translator expects a string or a list of strings, got {type(sentences).__name__}.")
        sentences = list(sentences)
        wrong = [s for s in sentences if not isinstance(s, str)]
        if wrong:
            bad = wrong[0]
            how = " (decode bytes first, e.g. data.decode('utf-8'))" if isinstance(bad, (bytes, bytearray)) else ""
            raise UsageError(f"Translator expects strings, got {type(bad).__name__}: {bad!r:.60}{how}.")
        for i, text in enumerate(sentences):
            check_unicode(text, f"sentence {i}")
        return sentences

    def translate_detailed(self, sentences: list[str], beam_size: int = DEFAULT_BEAM, alpha: float = DEFAULT_ALPHA,
                           nbest: int = 1, attention: bool = False, use_cache: bool = True,
                           first_line: int = 1, should_stop=None, progress=None,
                           split: bool = True) -> list[Translation]:
        """Like :meth:`translate`, with scores, n-best lists and optionally attention weights
        (native engine).

        ``first_line`` is the input line number of ``sentences[0]``, for warnings about long
        inputs when a caller feeds a long input in chunks. ``should_stop``, a function of no
        arguments, is asked between decoding batches; if it returns true the call raises
        :class:`~minitrans.engines.registry.Cancelled` (a server drops work whose client is gone).
        ``progress(n)`` is called as each decoding batch of n sentences is done.

        With ``split`` (the default) each input is a text: its sentences are translated in
        the same batch as every other input's and joined back with the text's own spacing and
        line breaks (leading and trailing whitespace dropped); :attr:`Translation.sentences`
        holds each sentence's result (n-best, score, attention). A text's score is the mean of
        its sentences'; its k-th alternative joins its sentences' k-th (or last) alternatives.
        """
        texts = self._sentences(sentences)
        check_decoding(beam_size, alpha, nbest)
        engine = self.attention_engine() if attention else self.engine
        if engine is None:
            raise UsageError("Attention weights come from one native model only (a .ckpt, not an exported folder "
                             "or an ensemble).")
        if not split:
            return self._translate_sentences(texts, list(range(first_line, first_line + len(texts))), beam_size,
                                             alpha, nbest, attention, use_cache, should_stop, progress, engine)
        lang = self.source_language
        segmented = [segment.split(text.strip(), lang) for text in texts]
        flat = [s for seg in segmented for s in seg.sentences]
        lines = [first_line + i for i, seg in enumerate(segmented) for _ in seg.sentences]
        done = self._translate_sentences(flat, lines, beam_size, alpha, nbest, attention, use_cache, should_stop,
                                         progress, engine)
        if progress is not None:
            progress(sum(not seg.sentences for seg in segmented))  # empty inputs are done already
        results, at = [], 0
        for text, seg in zip(texts, segmented):
            parts = done[at:at + len(seg.sentences)]
            at += len(seg.sentences)
            results.append(self._text_result(text, seg, parts))
        return results

    @property
    def languages(self) -> tuple[str, str]:
        """``(source, target)`` language codes: the direction the model was trained in
        (``data.direction``; English→French for a checkpoint that records none)."""
        return languages.of(getattr(self, "meta", {}))

    @property
    def source_language(self) -> str:
        """The language of the inputs (it chooses the sentence segmenter's rules)."""
        return self.languages[0]

    @property
    def confidence_threshold(self) -> float | None:
        """The "low confidence" threshold stored by ``minitrans calibrate`` (None: none)."""
        return getattr(self, "meta", {}).get("confidence", {}).get("threshold")

    @staticmethod
    def _text_result(text: str, seg: segment.Segmented, parts: list[Translation]) -> Translation:
        """One text's result from its sentences' results (see :meth:`translate_detailed`)."""
        if not parts:
            return Translation(text, "", 0.0, [("", 0.0)])
        decoded = [p for p in parts if p.confidence is not None]  # not the sentences given back as they were
        flags = [p.low_confidence for p in decoded]
        inner = segment.Segmented(seg.sentences, ["", *(_one_line_gap(g) for g in seg.gaps[1:-1]), ""])
        depth = max(len(p.nbest) for p in parts)
        nbest = []
        for k in range(depth):
            picks = [p.nbest[min(k, len(p.nbest) - 1)] for p in parts]
            nbest.append((inner.join([t for t, _ in picks]), sum(s for _, s in picks) / len(picks)))
        result = Translation(text, inner.join([p.text for p in parts]), sum(p.score for p in parts) / len(parts),
                             nbest, truncated=any(p.truncated for p in parts), sentences=parts,
                             confidence=min((p.confidence for p in decoded), default=None),
                             low_confidence=None if not decoded or None in flags else any(flags))
        if len(parts) == 1:  # one sentence: its pieces and attention are the text's
            result.src_pieces, result.tgt_pieces, result.attention = \
                parts[0].src_pieces, parts[0].tgt_pieces, parts[0].attention
        return result

    def _translate_sentences(self, sentences: list[str], lines: list[int], beam_size: int, alpha: float,
                             nbest: int, attention: bool, use_cache: bool, should_stop,
                             progress, engine=None) -> list[Translation]:
        """Each string as one sentence, all in one batched search by ``engine`` (default: this
        translator's); ``lines`` number them for the warnings about long inputs."""
        engine = engine or self.engine
        cleaned = [clean(without_format_characters(s)) for s in sentences]
        limit = self.config.max_len - 1  # room for eos
        ids = self.tokenizer.encode(cleaned)
        results: list[Translation | None] = [None] * len(sentences)
        todo = []
        for i, (text, seq) in enumerate(zip(cleaned, ids)):
            if not has_words(text):  # empty, invisible, or punctuation and symbols only: as it is
                results[i] = Translation(sentences[i], text, 0.0, [(text, 0.0)])
                continue
            truncated = len(seq) > limit
            if truncated:
                log.warning("Input line %d has a sentence of %d pieces, more than the model's %d: translating "
                            "the first %d only.", lines[i], len(seq), limit, limit)
                ids[i] = seq[:limit]
            todo.append((i, truncated))
        sources = [ids[i] + [EOS_ID] for i, _ in todo]
        if progress is not None and len(todo) < len(sentences):
            progress(len(sentences) - len(todo))  # empty lines are done already
        hyps = engine.search(sources, beam_size, alpha, nbest, self.max_len_a, self.max_len_b, use_cache,
                             should_stop=should_stop, progress=progress)
        for (i, truncated), src_ids, hyp_list in zip(todo, sources, hyps):
            results[i] = self._result(sentences[i], src_ids, hyp_list, truncated, attention and engine.model)
        return results  # type: ignore[return-value]

    def _result(self, source: str, src_ids: list[int], hyps: list[Hypothesis], truncated: bool,
                attention) -> Translation:
        """``attention``: the native model to take the weights from, or false for none."""
        # Byte-fallback pieces could spell a line break: outputs stay one line each, always.
        texts = [clean(t) for t in self.tokenizer.decode([h.tokens for h in hyps])]
        best = hyps[0]
        sure = confidence(best.logprob, len(best.tokens))
        cut = self.confidence_threshold
        result = Translation(source, texts[0], best.score, list(zip(texts, (h.score for h in hyps))),
                             truncated=truncated, confidence=sure, low_confidence=None if cut is None else sure < cut)
        if attention:
            result.src_pieces = self.tokenizer.pieces(src_ids[:-1]) + ["</s>"]
            result.tgt_pieces = self.tokenizer.pieces(best.tokens) + ["</s>"]
            result.attention = self.cross_attention(src_ids, best.tokens, attention)
        return result

    @torch.inference_mode()
    def cross_attention(self, src_ids: list[int], tgt_ids: list[int], model: Transformer | None = None) -> torch.Tensor:
        """Teacher-forced cross-attention weights for one pair: (layers, heads, T+1, S), from
        ``model`` (default: the native engine's, :meth:`attention_engine`)."""
        if model is None:
            engine = self.attention_engine()
            if engine is None:
                raise UsageError("Attention weights come from a native model: load a .ckpt.")
            model = engine.model
        device = next(model.parameters()).device
        src = torch.tensor([src_ids], device=device)
        tgt_in = torch.tensor([[self.tokenizer.bos_id] + tgt_ids], device=device)
        memory = model.encode(src)
        _, weights = model.decode(memory, None, tgt_in, need_weights=True)
        return torch.stack([w[0] for w in weights]).float().cpu()  # (layers, H, T+1, S); float32 under --bf16


def _one_line_gap(gap: str) -> str:
    """The text between two sentences as output: its line breaks as ``\\n`` (blank lines kept),
    else its spaces and tabs as they were."""
    breaks = len((gap + "x").splitlines()) - 1  # str.splitlines's breaks, \r\n as one
    return "\n" * breaks if breaks else gap
