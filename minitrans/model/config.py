"""Model hyperparameters: one frozen dataclass with the paper's names, plus named presets.

Every default lives here once; YAML configs list only what they change. Change a config
with :func:`dataclasses.replace`, never by mutation (the dataclass is frozen).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from minitrans.errors import ConfigError
from minitrans.text.vocab import PAD_ID


@dataclass(frozen=True)
class ModelConfig:
    """Shape and regularisation of an encoder–decoder Transformer.

    Args:
        vocab_size: Size of the (joint, SentencePiece) vocabulary.
        d_model: Width of every sublayer output and embedding (paper: 512).
        n_heads: Number of attention heads; must divide ``d_model`` (paper: 8).
        n_encoder_layers: Encoder depth N (paper: 6).
        n_decoder_layers: Decoder depth N (paper: 6).
        d_ff: Inner width of the position-wise feed-forward network (paper: 2048).
        dropout: Dropout on embeddings+positions and on every sublayer output (paper: 0.1).
        attention_dropout: Dropout on attention weights. The paper uses none; it costs a
            (B, H, T, S) random mask per attention call, the most expensive dropout on CPU.
        pad_id: Token id of padding; padded positions are masked out of attention. Defaults to
            the tokenizer's fixed ``PAD_ID`` (:mod:`minitrans.text.tokenizer` is the one place the
            special ids are defined); search masks and skips this id.
        max_len: Longest sequence the positional encoding covers.
        norm_first: ``True`` is pre-norm ``x + Sublayer(LayerNorm(x))``; ``False`` is the
            paper's post-norm ``LayerNorm(x + Sublayer(x))`` (the ``base`` preset). Pre-norm is
            the default because it measured better: validation BLEU 53.2 vs 52.1 for the
            ``tiny`` recipe (10 minutes on Multi30k; see docs/results.md).
        positional: ``"sinusoidal"`` (paper, section 3.5) or ``"learned"`` embeddings.
        share_embeddings: Share source and target embeddings (joint vocabulary) and tie
            them to the output projection, as in section 3.4 of the paper.
        layer_norm_eps: Epsilon of every LayerNorm.
        fused_attention: ``None`` (auto: PyTorch's fused kernel on GPU, the explicit formula
            on CPU, where it is faster), ``True`` or ``False`` to force one path.
    """

    vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    pad_id: int = PAD_ID
    max_len: int = 512
    norm_first: bool = True
    positional: Literal["sinusoidal", "learned"] = "sinusoidal"
    share_embeddings: bool = True
    layer_norm_eps: float = 1e-5
    fused_attention: bool | None = None

    def __post_init__(self) -> None:
        positive = ("vocab_size", "d_model", "n_heads", "n_encoder_layers",
                    "n_decoder_layers", "d_ff", "max_len")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"ModelConfig.{name} must be a positive integer, got {value!r}.")
        if self.d_model % self.n_heads:
            raise ConfigError(
                f"ModelConfig.d_model ({self.d_model}) must be divisible by n_heads "
                f"({self.n_heads}); pick n_heads among the divisors of d_model."
            )
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"ModelConfig.{name} must lie in [0, 1), got {value!r}.")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ConfigError(
                f"ModelConfig.pad_id ({self.pad_id}) must be a token id below vocab_size "
                f"({self.vocab_size})."
            )
        if self.positional not in ("sinusoidal", "learned"):
            raise ConfigError(
                f"ModelConfig.positional must be 'sinusoidal' or 'learned', got {self.positional!r}."
            )

    @property
    def d_k(self) -> int:
        """Per-head width of queries, keys and values (d_model / n_heads)."""
        return self.d_model // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (what checkpoints store)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "ModelConfig":
        """Inverse of :meth:`to_dict`; unknown keys raise a ValueError naming them."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(
                f"Unknown ModelConfig key(s) {unknown}; valid keys are {sorted(known)}."
            )
        return cls(**values)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "ModelConfig":
        """A named size (see :data:`PRESETS`) with field overrides, e.g. ``vocab_size``."""
        if name not in PRESETS:
            raise ConfigError(f"Unknown model preset {name!r}; choose one of {sorted(PRESETS)}.")
        return cls.from_dict({**PRESETS[name], **overrides})


#: Named sizes. ``base`` is the paper's base model (Table 3); the others fit a laptop CPU.
PRESETS: dict[str, dict[str, Any]] = {
    "base": dict(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6,
                 d_ff=2048, dropout=0.1, norm_first=False),
    "small": dict(d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3,
                  d_ff=1024, dropout=0.1),
    "tiny": dict(d_model=128, n_heads=4, n_encoder_layers=2, n_decoder_layers=2,
                 d_ff=512, dropout=0.1),
}
