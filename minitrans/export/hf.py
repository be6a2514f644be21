"""``minitrans export --format hf``: a checkpoint as a Hugging Face ``transformers`` model folder.

The folder loads with ``AutoModelForSeq2SeqLM.from_pretrained`` and
``AutoTokenizer.from_pretrained``, and ``generate()`` translates. transformers has two
classes of exactly our network, differing only where the LayerNorms sit:

* a **post-norm** model (the paper's, ``norm_first: false``) is a ``MarianMTModel``;
* a **pre-norm** model (minitrans's default) is a ``PegasusForConditionalGeneration``: Marian is
  post-norm only and silently ignores an unknown ``normalize_before``, so a pre-norm model
  written as Marian would load and translate wrongly, without an error.

Both scale embeddings by √d_model, use ReLU, tie the output projection to the shared
embedding and add sinusoids, but lay the sinusoids out in halves ([sin … | cos …]) where
minitrans interleaves them (sin, cos, sin, ...). One permutation of the residual stream's
dimensions (even dimensions first, then odd) maps one layout onto the other exactly; it is
applied to every tensor that reads or writes the residual stream (embedding columns, the
inputs of q/k/v and fc1, the outputs of out_proj and fc2, LayerNorm γ and β) and to the
position table, which is written into the folder (:func:`permutation`). Attention,
feed-forward inner units and the vocabulary are untouched, and LayerNorm does not care about
the order of its dimensions, so the exported network computes the same function.

The tokenizer is ``MarianTokenizer`` over the one joint SentencePiece model (``source.spm``
= ``target.spm``) with ``vocab.json`` in minitrans's id order; decoding starts from
minitrans's ``<s>``, ``</s>`` is forced at the length limit, and ``generation_config.json``
carries minitrans's defaults: greedy unless asked (``num_beams``), ``<pad>`` and ``<s>``
suppressed, and ``max_length`` the model's position limit (transformers' default is 20;
minitrans's limit relative to the source length has no counterpart there).

Learned positions go out as their two tables (encoder and decoder), which transformers reads
from the file like any weight. Refused with a one-line error: separate source/target
embeddings (``share_embeddings: false``) and a ``layer_norm_eps`` other than PyTorch's default,
which neither class can hold.
Needs the ``transformers`` package.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from minitrans.text import languages
from minitrans._version import __version__
from minitrans.checkpoint import load_for_inference, published
from minitrans.engines.ctranslate2_export import MIN_POSITIONS  # generate() may be asked for long outputs too
from minitrans.errors import UsageError
from minitrans.model.layers import sinusoidal_table
from minitrans.decoding.settings import DEFAULT_MAX_LEN_A, DEFAULT_MAX_LEN_B
from minitrans.text.textio import atomic_folder, check_replaceable_folder, file_sha256
from minitrans.text.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

QUANTIZATIONS = ("float32",)
FILES = ("config.json", "generation_config.json", "model.safetensors", "source.spm", "target.spm", "vocab.json",
         "tokenizer_config.json", "special_tokens_map.json", "minitrans.json")


def permutation(d_model: int) -> torch.Tensor:
    """The order of the residual-stream dimensions in the export: minitrans's even (sine)
    dimensions, then its odd (cosine) ones — transformers' [sin | cos] layout."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def check_exportable(config) -> None:
    """A UsageError, naming the setting, for a model transformers' classes cannot hold."""
    if not config.share_embeddings:
        raise UsageError("export --format hf: this model has separate source and target embeddings "
                         "(share_embeddings: false), which Marian and Pegasus do not hold; export it with "
                         "--format ctranslate2.")
    if config.layer_norm_eps != 1e-5:
        raise UsageError(f"export --format hf: layer_norm_eps {config.layer_norm_eps} cannot be written: "
                         "Marian and Pegasus use PyTorch's default 1e-5.")


def hf_config(config, positions: int) -> dict:
    """The ``config.json`` entries of the model (Marian for post-norm, Pegasus for pre-norm)."""
    return {
        "model_type": "pegasus" if config.norm_first else "marian",
        "architectures": ["PegasusForConditionalGeneration" if config.norm_first else "MarianMTModel"],
        "vocab_size": config.vocab_size, "d_model": config.d_model,
        "encoder_layers": config.n_encoder_layers, "decoder_layers": config.n_decoder_layers,
        "encoder_attention_heads": config.n_heads, "decoder_attention_heads": config.n_heads,
        "encoder_ffn_dim": config.d_ff, "decoder_ffn_dim": config.d_ff,
        "activation_function": "relu", "max_position_embeddings": positions, "scale_embedding": True,
        "dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0,
        "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0,
        "pad_token_id": PAD_ID, "eos_token_id": EOS_ID, "bos_token_id": BOS_ID,
        "decoder_start_token_id": BOS_ID, "forced_eos_token_id": EOS_ID,
        "tie_word_embeddings": True, "is_encoder_decoder": True,
        **({} if config.norm_first else {"share_encoder_decoder_embeddings": True,
                                         "decoder_vocab_size": config.vocab_size}),
    }


def state_dict(model, positions: int) -> dict[str, torch.Tensor]:
    """``model``'s weights under transformers' names, the residual stream permuted."""
    config = model.config
    perm = permutation(config.d_model)

    def reads(w: torch.Tensor) -> torch.Tensor:  # (out, D): takes the residual stream in
        return w.detach()[:, perm].contiguous()

    def writes(t: torch.Tensor) -> torch.Tensor:  # (D, ...) or (D,): puts it out
        return t.detach()[perm].contiguous()

    out: dict[str, torch.Tensor] = {"model.shared.weight": reads(model.src_embed.weight)}
    for side, pos in (("encoder", model.src_pos), ("decoder", model.tgt_pos)):
        table = pos.learned.weight if pos.learned is not None else sinusoidal_table(positions, config.d_model)
        out[f"model.{side}.embed_tokens.weight"] = out["model.shared.weight"]
        out[f"model.{side}.embed_positions.weight"] = reads(table)  # read from the file on load (tested)
    out["lm_head.weight"] = out["model.shared.weight"]
    out["final_logits_bias"] = torch.zeros(1, config.vocab_size)

    def attention(prefix: str, attn) -> None:
        for name in ("q_proj", "k_proj", "v_proj"):
            linear = getattr(attn, name)
            out[f"{prefix}.{name}.weight"], out[f"{prefix}.{name}.bias"] = reads(linear.weight), linear.bias.detach()
        out[f"{prefix}.out_proj.weight"], out[f"{prefix}.out_proj.bias"] = \
            writes(attn.out_proj.weight), writes(attn.out_proj.bias)

    def norm(prefix: str, layer_norm) -> None:
        out[f"{prefix}.weight"], out[f"{prefix}.bias"] = writes(layer_norm.weight), writes(layer_norm.bias)

    def feed_forward(prefix: str, layer) -> None:
        ff = layer.feed_forward
        out[f"{prefix}.fc1.weight"], out[f"{prefix}.fc1.bias"] = reads(ff.linear1.weight), ff.linear1.bias.detach()
        out[f"{prefix}.fc2.weight"], out[f"{prefix}.fc2.bias"] = writes(ff.linear2.weight), writes(ff.linear2.bias)
        norm(f"{prefix}.final_layer_norm", layer.ff_block.norm)

    for i, layer in enumerate(model.encoder.layers):
        p = f"model.encoder.layers.{i}"
        attention(f"{p}.self_attn", layer.self_attn)
        norm(f"{p}.self_attn_layer_norm", layer.attn_block.norm)
        feed_forward(p, layer)
    for i, layer in enumerate(model.decoder.layers):
        p = f"model.decoder.layers.{i}"
        attention(f"{p}.self_attn", layer.self_attn)
        norm(f"{p}.self_attn_layer_norm", layer.self_block.norm)
        attention(f"{p}.encoder_attn", layer.cross_attn)
        norm(f"{p}.encoder_attn_layer_norm", layer.cross_block.norm)
        feed_forward(p, layer)
    if config.norm_first:
        norm("model.encoder.layer_norm", model.encoder.final_norm)
        norm("model.decoder.layer_norm", model.decoder.final_norm)
    return out


def export(checkpoint: str | os.PathLike, output_dir: str | os.PathLike, quantization: str = "float32",
           force: bool = False) -> Path:
    """Write ``checkpoint`` as a transformers model folder; returns the folder.

    The folder is built beside ``output_dir`` and renamed into place when complete; an
    existing folder is replaced only with ``force`` and only when it is an export of ours.
    """
    if quantization not in QUANTIZATIONS:
        raise UsageError(f"export --format hf writes float32 weights only, not {quantization!r}; quantise with "
                         "transformers or export --format ctranslate2.")
    try:
        from safetensors.torch import save_file
    except ImportError:
        raise UsageError("export --format hf needs the transformers package: pip install transformers") from None
    output_dir = Path(output_dir)
    check_replaceable(output_dir, checkpoint, force)
    model, tokenizer, meta = load_for_inference(checkpoint)
    config = model.config
    check_exportable(config)
    learned = model.src_pos.learned is not None
    positions = config.max_len if learned else max(config.max_len, MIN_POSITIONS)
    source, target = languages.of(meta)
    weights = state_dict(model, positions)
    # One tensor per name: the tied entries are one tensor in transformers (it ties them on load).
    tied = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"}
    pieces = tokenizer.pieces(range(tokenizer.vocab_size))
    generation = {"decoder_start_token_id": BOS_ID, "bos_token_id": BOS_ID, "eos_token_id": EOS_ID,
                  "pad_token_id": PAD_ID, "forced_eos_token_id": EOS_ID, "max_length": config.max_len,
                  "num_beams": 1, "suppress_tokens": [PAD_ID, BOS_ID]}
    special = {"bos_token": pieces[BOS_ID], "eos_token": pieces[EOS_ID], "unk_token": pieces[UNK_ID],
               "pad_token": pieces[PAD_ID]}
    with atomic_folder(output_dir, replace=True) as tmp:
        save_file({k: v.contiguous() for k, v in weights.items() if k not in tied}, str(tmp / "model.safetensors"),
                  metadata={"format": "pt"})
        write_json(tmp / "config.json", {**hf_config(config, positions), "transformers_version": "5.0.0"})
        write_json(tmp / "generation_config.json", generation)
        tokenizer.save(tmp / "source.spm")
        tokenizer.save(tmp / "target.spm")
        write_json(tmp / "vocab.json", {piece: i for i, piece in enumerate(pieces)})
        write_json(tmp / "tokenizer_config.json", {
            "tokenizer_class": "MarianTokenizer", "source_lang": source, "target_lang": target,
            "model_max_length": config.max_len - 1, "separate_vocabs": False,
            # transformers' clean-up would delete the space of French "gare ?" and "oui !"
            "clean_up_tokenization_spaces": False, **special})
        write_json(tmp / "special_tokens_map.json", special)
        write_json(tmp / "minitrans.json", {
            "format": "minitrans-hf", "minitrans_version": __version__,
            "source_checkpoint": Path(checkpoint).name, "source_checkpoint_sha256": file_sha256(checkpoint),
            "model_config": config.to_dict(), "residual_permutation": "even dimensions, then odd",
            "length_limit": {"max_len_a": meta.get("decoding", {}).get("max_len_a", DEFAULT_MAX_LEN_A),
                             "max_len_b": meta.get("decoding", {}).get("max_len_b", DEFAULT_MAX_LEN_B),
                             "note": "minitrans caps outputs at a*source+b pieces; generate() has max_length only"},
            **published(meta, ("data", "validation", "averaged_from", "adapted"))})
    return output_dir


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def check_replaceable(output_dir: Path, checkpoint: str | os.PathLike, force: bool) -> None:
    """Only an empty folder, or one of our hf exports with ``force``, is replaced; never other files."""
    check_replaceable_folder(output_dir, checkpoint, force, FILES, lambda folder: (folder / "minitrans.json").is_file(),
                             "minitrans export --format hf")
