"""The model as two ONNX graphs, for runtimes that decode step by step with an explicit cache
(onnxruntime-web in the page of ``minitrans export --format web``; Python ``onnxruntime`` in
the tests that check them).

* **encoder**: source ids ``src`` (B, S) -> the cross-attention keys and values of every
  decoder layer, ``cross_keys`` / ``cross_values`` (L, B, H, S, Dh). The encoder output itself
  is only ever used through them, so they are what a decoder step needs of the source.
* **decoder step**: the newest target piece ``tokens`` (N, 1), the source ids ``src`` (N, S)
  (for the padding mask), that source's ``cross_keys`` / ``cross_values`` (L, N, H, S, Dh) and
  the self-attention cache ``self_keys`` / ``self_values`` (L, N, H, t, Dh) of the t pieces
  before it (t = 0 at the first step: an empty tensor) -> ``log_probs`` (N, V) of the next
  piece (``<pad>`` and ``<s>`` at -inf, as :mod:`minitrans.decoding.search` scores them), the cache
  grown by one position, ``self_keys_out`` / ``self_values_out`` (L, N, H, t+1, Dh), and the
  cross-attention weights of this step, ``attention`` (N, L, H, S), which a caller fetches
  only when it draws them.

The position of the new piece is the cache's length, so a step cannot be fed a position that
disagrees with its cache. Both graphs are traced from minitrans's own modules (the
embeddings, :class:`~minitrans.model.layers.Residual` blocks, projections and
:func:`~minitrans.model.attention.scaled_dot_product_attention`), so they compute what
:meth:`Transformer.encode` and :meth:`Transformer.decode` compute, one step at a time; the
tests hold them to the native engine's greedy output. A row of the batch is one hypothesis:
a beam search gives each beam its own row of the cross keys and values.

``int8`` graphs are onnxruntime's dynamic quantization of the fp32 ones (weights of every
MatMul in int8, activations quantised on the fly), which onnxruntime-web runs.
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from minitrans.model.attention import scaled_dot_product_attention
from minitrans.errors import UsageError
from minitrans.text.vocab import BOS_ID

#: ONNX operator set of the graphs (onnxruntime-web 1.2x runs up to 21).
OPSET = 17
ENCODER_INPUTS, ENCODER_OUTPUTS = ["src"], ["cross_keys", "cross_values"]
DECODER_INPUTS = ["tokens", "src", "cross_keys", "cross_values", "self_keys", "self_values"]
DECODER_OUTPUTS = ["log_probs", "self_keys_out", "self_values_out", "attention"]
QUANTIZATIONS = ("float32", "int8")


def _heads(attn, x: Tensor) -> Tensor:
    """(N, L, D) -> (N, H, L, Dh) for attention module ``attn``."""
    return attn._split_heads(x)


def _merge(attn, out: Tensor) -> Tensor:
    """(N, H, T, Dh) -> (N, T, D) through the output projection."""
    n, h, t, dh = out.shape
    return attn.out_proj(out.transpose(1, 2).reshape(n, t, h * dh))


class EncoderGraph(nn.Module):
    """``src`` (B, S) -> ``cross_keys``, ``cross_values`` (L, B, H, S, Dh)."""

    def __init__(self, model) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor]:
        mask = (src != self.model.config.pad_id)[:, None, None, :]  # (B, 1, 1, S)
        memory = self.model.encode(src, mask)  # (B, S, D)
        keys, values = [], []
        for layer in self.model.decoder.layers:
            attn = layer.cross_attn
            keys.append(_heads(attn, attn.k_proj(memory)))  # (B, H, S, Dh)
            values.append(_heads(attn, attn.v_proj(memory)))
        return torch.stack(keys), torch.stack(values)


class DecoderStepGraph(nn.Module):
    """One incremental decoder step with its cache as tensors in and out (see the module doc)."""

    def __init__(self, model) -> None:
        super().__init__()
        self.model = model
        positions = model.tgt_pos.learned.weight if model.tgt_pos.learned is not None else model.tgt_pos.table
        self.register_buffer("positions", positions.detach().clone(), persistent=False)  # (max_len, D)
        banned = torch.zeros(model.config.vocab_size, dtype=torch.bool)
        banned[[model.config.pad_id, BOS_ID]] = True  # never a next piece (search.py masks them likewise)
        self.register_buffer("banned", banned, persistent=False)
        self.register_buffer("no_bias", torch.zeros(model.config.vocab_size), persistent=False)

    def forward(self, tokens: Tensor, src: Tensor, cross_keys: Tensor, cross_values: Tensor,
                self_keys: Tensor, self_values: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        model = self.model
        position = self_keys.size(3)  # pieces already decoded = the new piece's position
        x = model.tgt_embed(tokens) * math.sqrt(model.config.d_model)  # (N, 1, D)
        x = x + self.positions[position]  # (D,) broadcast
        src_mask = (src != model.config.pad_id)[:, None, None, :]  # (N, 1, 1, S)
        new_keys, new_values, weights = [], [], []
        for i, layer in enumerate(model.decoder.layers):
            def self_attend(h: Tensor, i=i, attn=layer.self_attn) -> Tensor:
                k = torch.cat([self_keys[i], _heads(attn, attn.k_proj(h))], 2)  # (N, H, t+1, Dh)
                v = torch.cat([self_values[i], _heads(attn, attn.v_proj(h))], 2)
                new_keys.append(k)
                new_values.append(v)
                out, _ = scaled_dot_product_attention(_heads(attn, attn.q_proj(h)), k, v)  # one query sees all
                return _merge(attn, out)

            def cross_attend(h: Tensor, i=i, attn=layer.cross_attn) -> Tensor:
                out, w = scaled_dot_product_attention(_heads(attn, attn.q_proj(h)), cross_keys[i], cross_values[i],
                                                      src_mask)  # (N, H, 1, Dh), (N, H, 1, S)
                weights.append(w[:, :, 0])  # (N, H, S)
                return _merge(attn, out)

            x = layer.self_block(x, self_attend)
            x = layer.cross_block(x, cross_attend)
            x = layer.ff_block(x, layer.feed_forward)
        if model.decoder.final_norm is not None:
            x = model.decoder.final_norm(x)
        # model.project as one Gemm(transB=1) over the (V, D) weight itself: a tied projection then
        # shares the embedding's initializer (a MatMul would store a transposed copy of it).
        weight = model.tgt_embed.weight if model.output_proj is None else model.output_proj.weight
        logits = F.linear(x[:, 0], weight, self.no_bias)  # (N, V)
        log_probs = F.log_softmax(logits.float(), dim=-1).masked_fill(self.banned, float("-inf"))
        return log_probs, torch.stack(new_keys), torch.stack(new_values), torch.stack(weights, 1)


def example_inputs(model, batch: int = 2, src_len: int = 5, cached: int = 3) -> tuple[Tensor, ...]:
    """Inputs of the right shapes for tracing (and for checking) a decoder step."""
    c = model.config
    layers, heads, dh = c.n_decoder_layers, c.n_heads, c.d_model // c.n_heads
    src = torch.randint(4, c.vocab_size, (batch, src_len))
    return (torch.full((batch, 1), BOS_ID, dtype=torch.long), src,
            torch.randn(layers, batch, heads, src_len, dh), torch.randn(layers, batch, heads, src_len, dh),
            torch.randn(layers, batch, heads, cached, dh), torch.randn(layers, batch, heads, cached, dh))


def export_graphs(model, folder: str | os.PathLike, quantization: str = "float32") -> dict[str, str]:
    """Write ``encoder.onnx`` and ``decoder.onnx`` of ``model`` (fp32 weights, in eval mode)
    into ``folder``, quantised to int8 when asked; returns ``{"encoder": name, "decoder": name}``."""
    if quantization not in QUANTIZATIONS:
        raise UsageError(f"--quantization must be one of {', '.join(QUANTIZATIONS)} for the web export, "
                         f"got {quantization!r}.")
    try:
        import onnx  # noqa: F401  (the exporter needs it)
    except ImportError:
        raise UsageError("export --format web needs the onnx package: pip install 'minitrans[web]'") from None
    folder = Path(folder)
    model = model.float().eval()
    src = torch.randint(4, model.config.vocab_size, (2, 5))
    files = {"encoder": folder / "encoder.onnx", "decoder": folder / "decoder.onnx"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on shape arithmetic: the graphs are checked by the tests
        torch.onnx.export(EncoderGraph(model), (src,), str(files["encoder"]), dynamo=False, opset_version=OPSET,
                          input_names=ENCODER_INPUTS, output_names=ENCODER_OUTPUTS,
                          dynamic_axes={"src": {0: "batch", 1: "source"},
                                        "cross_keys": {1: "batch", 3: "source"},
                                        "cross_values": {1: "batch", 3: "source"}})
        cache_axes = {1: "rows", 3: "cached"}
        torch.onnx.export(DecoderStepGraph(model), example_inputs(model), str(files["decoder"]), dynamo=False,
                          opset_version=OPSET, input_names=DECODER_INPUTS, output_names=DECODER_OUTPUTS,
                          dynamic_axes={"tokens": {0: "rows"}, "src": {0: "rows", 1: "source"},
                                        "cross_keys": {1: "rows", 3: "source"},
                                        "cross_values": {1: "rows", 3: "source"},
                                        "self_keys": cache_axes, "self_values": cache_axes,
                                        "self_keys_out": {1: "rows", 3: "grown"},
                                        "self_values_out": {1: "rows", 3: "grown"},
                                        "log_probs": {0: "rows"}, "attention": {0: "rows", 3: "source"}})
    if quantization == "int8":
        for name, path in files.items():
            quantize_int8(path)
    return {name: path.name for name, path in files.items()}


def quantize_int8(path: Path) -> None:
    """Replace the fp32 graph at ``path`` by onnxruntime's dynamic int8 quantization of it."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        raise UsageError("export --format web --quantization int8 needs onnxruntime: "
                         "pip install 'minitrans[web]'") from None
    import logging

    fp32 = path.with_name(path.stem + ".fp32.onnx")
    path.rename(fp32)
    quiet = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process: for convolution networks
    try:
        quantize_dynamic(str(fp32), str(path), weight_type=QuantType.QInt8)
    finally:
        logging.getLogger().setLevel(quiet)
        fp32.unlink()
