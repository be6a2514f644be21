"""``minitrans export --format ctranslate2``: a checkpoint as a CTranslate2 model folder.

CTranslate2 is the C++ engine the field deploys Transformers with on CPUs (OpenNMT-py,
fairseq and Marian export to it). Its ``TransformerSpec`` describes the same network as
:class:`~minitrans.model.transformer.Transformer`; this module fills it from a checkpoint:

========================================  ==================================================
minitrans                                 CTranslate2 spec
========================================  ==================================================
``src_embed`` / ``tgt_embed`` × √D        ``embeddings`` with ``scale_embeddings = True``
sinusoidal (or learned) position table    ``position_encodings.encodings``: our own table,
                                          written out (CTranslate2's built-in sinusoids are
                                          laid out differently: sin/cos halves, not interleaved)
self-attention ``q/k/v_proj``             ``linear[0]``: one fused (3D, D) matrix and bias
cross-attention ``q_proj``, ``k/v_proj``  ``linear[0]``, and ``linear[1]`` fused (2D, D)
``out_proj``                              ``linear[-1]``
``Residual.norm`` of each sublayer        that sublayer's ``layer_norm`` (pre- or post-norm
                                          as ``ModelConfig.norm_first``)
final LayerNorm of a pre-norm stack       ``encoder/decoder.layer_norm``
tied output projection                    ``decoder.projection`` = target embedding, no bias
``layer_norm_eps``                        ``config.layer_norm_epsilon``
SentencePiece pieces in id order          source and target vocabulary (``<pad>``, ``<unk>``,
                                          ``<s>``, ``</s>`` at 0..3, as minitrans fixes them)
========================================  ==================================================

The folder also holds the SentencePiece model (``sentencepiece.model``) and minitrans's
metadata (``minitrans.json``: model config, tokenizer fingerprint, training data, decoding
limits), so :class:`~minitrans.engines.ctranslate2_engine.CTranslate2Engine` translates with the same
normalisation, segmentation, limits and detokenisation as the checkpoint. Search
conventions are the engine's business (see there). Needs ``ctranslate2`` (a core dependency).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from minitrans._version import __version__
from minitrans.checkpoint import load_for_inference, published
from minitrans.engines.ctranslate2_engine import EXPORT_FILES, META_FILE, SPM_FILE, file_sha256, import_ctranslate2, is_export
from minitrans.errors import UsageError
from minitrans.model.layers import sinusoidal_table
from minitrans.text.textio import atomic_folder, check_replaceable_folder

#: Rows of the written sinusoid table at least (see :func:`_stack_inputs`).
MIN_POSITIONS = 1024
#: Weight types ``--quantization`` accepts (CTranslate2's names; float32 = no quantisation).
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16", "bfloat16", "int8_bfloat16")


def _array(tensor: torch.Tensor):
    return tensor.detach().to("cpu", torch.float32).contiguous().numpy()


def _linear(spec, *modules: torch.nn.Linear) -> None:
    """Fill a LinearSpec from one Linear, or from several stacked into one (fused) matrix."""
    spec.weight = _array(torch.cat([m.weight for m in modules]))
    spec.bias = _array(torch.cat([m.bias for m in modules]))


def _norm(spec, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _stack_inputs(spec, embedding: torch.nn.Embedding, positions) -> None:
    (spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings).weight = _array(embedding.weight)
    spec.scale_embeddings = True  # × √d_model, section 3.4
    # A sinusoid table of at least MIN_POSITIONS rows: minitrans never decodes past max_len, but a
    # plain CTranslate2 caller (argos: up to 256 pieces by default) may, and CTranslate2 stops with
    # "No position encodings are defined for positions >= N" past the table. A learned table
    # cannot grow: it has the model's max_len rows.
    table = positions.learned.weight if positions.learned is not None else \
        sinusoidal_table(max(positions.max_len, MIN_POSITIONS), embedding.embedding_dim)
    spec.position_encodings.encodings = _array(table)


def build_spec(model, tokenizer):
    """A ``ctranslate2.specs.TransformerSpec`` holding ``model``'s weights and vocabulary."""
    import_ctranslate2()  # a clear error when the extra is not installed
    from ctranslate2.specs import transformer_spec

    config = model.config
    spec = transformer_spec.TransformerSpec.from_config(
        (config.n_encoder_layers, config.n_decoder_layers), config.n_heads, pre_norm=config.norm_first)
    enc, dec = spec.encoder, spec.decoder
    _stack_inputs(enc, model.src_embed, model.src_pos)
    _stack_inputs(dec, model.tgt_embed, model.tgt_pos)
    if config.norm_first:
        _norm(enc.layer_norm, model.encoder.final_norm)
        _norm(dec.layer_norm, model.decoder.final_norm)
    for layer_spec, layer in zip(enc.layer, model.encoder.layers):
        attn = layer.self_attn
        _linear(layer_spec.self_attention.linear[0], attn.q_proj, attn.k_proj, attn.v_proj)
        _linear(layer_spec.self_attention.linear[1], attn.out_proj)
        _norm(layer_spec.self_attention.layer_norm, layer.attn_block.norm)
        _feed_forward(layer_spec.ffn, layer)
    for layer_spec, layer in zip(dec.layer, model.decoder.layers):
        attn, cross = layer.self_attn, layer.cross_attn
        _linear(layer_spec.self_attention.linear[0], attn.q_proj, attn.k_proj, attn.v_proj)
        _linear(layer_spec.self_attention.linear[1], attn.out_proj)
        _norm(layer_spec.self_attention.layer_norm, layer.self_block.norm)
        _linear(layer_spec.attention.linear[0], cross.q_proj)
        _linear(layer_spec.attention.linear[1], cross.k_proj, cross.v_proj)
        _linear(layer_spec.attention.linear[2], cross.out_proj)
        _norm(layer_spec.attention.layer_norm, layer.cross_block.norm)
        _feed_forward(layer_spec.ffn, layer)
    projection = model.tgt_embed.weight if model.output_proj is None else model.output_proj.weight
    dec.projection.weight = _array(projection)  # (V, D), no bias
    spec.config.layer_norm_epsilon = config.layer_norm_eps
    # CTranslate2 appends </s> to the source itself, so a plain caller's
    # translate_batch(sp.encode(text, out_type=str)) gets what minitrans gets (issue #27).
    spec.config.add_source_eos = True
    pieces = tokenizer.pieces(range(tokenizer.vocab_size))
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    return spec


def _feed_forward(spec, layer) -> None:
    _norm(spec.layer_norm, layer.ff_block.norm)
    _linear(spec.linear_0, layer.feed_forward.linear1)
    _linear(spec.linear_1, layer.feed_forward.linear2)


def export(checkpoint: str | os.PathLike, output_dir: str | os.PathLike, quantization: str = "float32",
           force: bool = False) -> Path:
    """The registry's entry point (:data:`minitrans.engines.registry.REGISTRY`): :func:`export_ctranslate2`."""
    return export_ctranslate2(checkpoint, output_dir, quantization, force)


def export_ctranslate2(checkpoint: str | os.PathLike, output_dir: str | os.PathLike, quantization: str = "float32",
                       force: bool = False) -> Path:
    """Write ``checkpoint`` as a CTranslate2 model folder; returns the folder.

    The folder is built beside ``output_dir`` and renamed into place when complete; an
    existing folder is replaced only with ``force``.
    """
    if quantization not in QUANTIZATIONS:
        raise UsageError(f"--quantization must be one of {', '.join(QUANTIZATIONS)}, got {quantization!r}.")
    output_dir = Path(output_dir)
    check_replaceable(output_dir, checkpoint, force)
    model, tokenizer, meta = load_for_inference(checkpoint)
    spec = build_spec(model, tokenizer)
    spec.validate()
    spec.optimize(quantization=None if quantization == "float32" else quantization)
    info = {"format": "minitrans-ctranslate2", "minitrans_version": __version__,
            # The file's name and content hash, not this machine's path to it.
            "source_checkpoint": Path(checkpoint).name, "source_checkpoint_sha256": file_sha256(checkpoint),
            "quantization": quantization,
            "model_config": model.config.to_dict(), "tokenizer_fingerprint": meta["tokenizer_fingerprint"],
            **published(meta, ("data", "decoding", "validation", "averaged_from", "confidence", "adapted"))}
    with atomic_folder(output_dir, replace=True) as tmp:  # check_replaceable said it may go
        spec.save(str(tmp))
        tokenizer.save(tmp / SPM_FILE)
        # What binds the weights to this tokenizer (checkpoints carry tokenizer_binding): the
        # weights file's hash, checked when the folder is loaded.
        info["model_sha256"] = file_sha256(tmp / "model.bin")
        (tmp / META_FILE).write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return output_dir


def check_replaceable(output_dir: str | os.PathLike, checkpoint: str | os.PathLike, force: bool) -> None:
    """Refuse an output folder whose replacement could lose a user's files: only an empty folder,
    or one holding nothing but an export's files with ``force``
    (:func:`minitrans.text.textio.check_replaceable_folder`)."""
    check_replaceable_folder(output_dir, checkpoint, force, EXPORT_FILES, is_export, "minitrans export")
