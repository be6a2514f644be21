"""A joint English+French SentencePiece model, with fixed special ids.

SentencePiece ids *are* the vocabulary: there is no second vocabulary layer. The special
ids are fixed (pad 0, unk 1, bos 2, eos 3) so that model configs never need to look them
up. Byte fallback means no input character is ever lost: a character unseen in training
becomes its UTF-8 bytes and decodes back exactly. Normalisation is ``identity`` (the
corpus is NFC-normalised by :func:`minitrans.data.corpus.clean`), so decode(encode(x)) == x for
cleaned text.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterable

import sentencepiece as spm
import torch

from minitrans.errors import TokenizerError  # noqa: F401  (re-exported)
from minitrans.text.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID


class Tokenizer:
    """A loaded SentencePiece model (from its serialized bytes)."""

    pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    def __init__(self, model_proto: bytes) -> None:
        self.model_proto = bytes(model_proto)
        self.sp = spm.SentencePieceProcessor(model_proto=self.model_proto)
        ids = (self.sp.pad_id(), self.sp.unk_id(), self.sp.bos_id(), self.sp.eos_id())
        if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise TokenizerError(
                f"SentencePiece model has special ids pad/unk/bos/eos = {ids}; minitrans needs "
                f"{(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}. Train it with Tokenizer.train."
            )

    @classmethod
    def train(cls, sentences: Iterable[str], vocab_size: int = 8000, model_type: str = "unigram",
              character_coverage: float = 0.9995, seed_sentences: int = 2_000_000) -> "Tokenizer":
        """Train a joint model on ``sentences`` (both languages of the training split only).

        Args:
            sentences: Training text, one sentence per item.
            vocab_size: Exact size of the vocabulary, special ids included.
            model_type: ``unigram`` or ``bpe``.
            character_coverage: Share of characters that get their own piece; the rarest
                rest is spelled in bytes (byte fallback), never mapped to ``<unk>``.
            seed_sentences: Cap on the sentences SentencePiece samples for training.
        """
        if model_type not in ("unigram", "bpe"):
            raise TokenizerError(f"model_type must be 'unigram' or 'bpe', got {model_type!r}.")
        buffer = io.BytesIO()
        sentences = [s for s in sentences if s]
        if not sentences:
            raise TokenizerError("Cannot train SentencePiece on no text: the training split is empty.")
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(sentences), model_writer=buffer, vocab_size=vocab_size,
                model_type=model_type, character_coverage=character_coverage, byte_fallback=True,
                normalization_rule_name="identity", split_digits=True,
                pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
                input_sentence_size=seed_sentences, shuffle_input_sentence=True,
                num_threads=os.cpu_count() or 1, minloglevel=2,
            )
        except RuntimeError as err:
            raise TokenizerError(
                f"SentencePiece training with vocab_size={vocab_size} failed: {err}. The vocabulary "
                "must hold 4 special ids, 256 byte-fallback pieces and every kept character, and "
                "be small enough for the amount of text: adjust data.vocab_size."
            ) from err
        return cls(buffer.getvalue())

    # -- use -------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Texts -> piece ids (no bos/eos; batching adds them)."""
        return self.sp.encode(texts)

    def encode_sampled(self, texts: list[str], alpha: float) -> list[list[int]]:
        """Texts -> one *sampled* segmentation each (subword regularisation): SentencePiece
        draws from all segmentations with probabilities ∝ P(segmentation)^alpha."""
        return self.sp.encode(texts, enable_sampling=True, alpha=alpha, nbest_size=-1)

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Piece ids -> texts; pad/bos/eos ids are skipped. One sequence at a time: SentencePiece's
        batch call costs ~80 µs a call even on one thread (230 µs on its default threads), and
        the Translator decodes each sentence's n-best on its own, where decoding itself takes 2 µs."""
        specials = (PAD_ID, BOS_ID, EOS_ID)
        return [self.sp.decode_ids([i for i in seq if i not in specials]) for seq in ids]

    def pieces(self, ids: list[int]) -> list[str]:
        """Readable piece strings for plots (``▁`` marks a word start)."""
        return [self.sp.id_to_piece(int(i)) for i in ids]

    def byte_fallback_rate(self, texts: list[str]) -> float:
        """Share of pieces that are byte-fallback pieces: low = good coverage."""
        ids = [i for seq in self.encode(texts) for i in seq]
        return sum(self.sp.is_byte(i) for i in ids) / max(len(ids), 1)

    # -- identity and storage --------------------------------------------------------
    def fingerprint(self) -> dict:
        """What a checkpoint records to check that a tokenizer matches its model."""
        return {"sha256": hashlib.sha256(self.model_proto).hexdigest(), "vocab_size": self.vocab_size,
                "pad_id": PAD_ID, "unk_id": UNK_ID, "bos_id": BOS_ID, "eos_id": EOS_ID}

    def to_tensor(self) -> torch.Tensor:
        """The model bytes as a uint8 tensor: storable in a ``weights_only`` checkpoint."""
        return torch.frombuffer(bytearray(self.model_proto), dtype=torch.uint8).clone()

    @classmethod
    def from_tensor(cls, tensor: torch.Tensor) -> "Tokenizer":
        return cls(tensor.cpu().numpy().tobytes())

    def save(self, path: str | os.PathLike) -> None:
        with open(path, "wb") as f:
            f.write(self.model_proto)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Tokenizer":
        with open(path, "rb") as f:
            return cls(f.read())
