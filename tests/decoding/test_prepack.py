"""bf16 weights laid out once for oneDNN (``minitrans.decoding.prepack``): the same outputs as unpacked bf16."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from conftest import synthetic_pairs
from minitrans.decoding import prepack
from minitrans.engines.native_engine import NativeEngine
from minitrans.translate import Translator

bf16_cpu = pytest.mark.skipif(not (torch.backends.mkldnn.is_available()
                                   and torch.ops.mkldnn._is_mkldnn_bf16_supported()),
                              reason="this CPU's oneDNN has no bf16 kernels")
SENTENCES = [en for en, _ in synthetic_pairs(24, seed=11)]


@bf16_cpu
@pytest.mark.parametrize("shape", [(7, 32), (3, 5, 32), (1, 1, 32)])
def test_a_packed_product_equals_f_linear_in_bf16(shape):
    w, b = torch.randn(48, 32).bfloat16(), torch.randn(48).bfloat16()
    x = torch.randn(*shape).bfloat16()
    with torch.inference_mode():
        assert torch.equal(prepack.PackedLinear(w, b)(x), F.linear(x, w, b))
        assert torch.equal(prepack.PackedLinear(w, None)(x), F.linear(x, w))


@bf16_cpu
def test_bf16_decoding_is_the_same_packed_or_not(trained_checkpoint):
    packed = Translator.from_checkpoint(trained_checkpoint, precision="bf16")
    plain = Translator.from_checkpoint(trained_checkpoint, precision="fp32")
    plain.engine = NativeEngine(plain.engine.model, precision="bf16", prepack=False)
    model = packed.engine.model
    assert isinstance(model.output_proj, prepack.PackedLinear) and model.encoder.layers[0].self_attn.packed_qkv is not None
    assert not isinstance(plain.engine.model.output_proj, prepack.PackedLinear)
    for beam in (1, 4):
        assert packed.translate(SENTENCES, beam_size=beam) == plain.translate(SENTENCES, beam_size=beam)
    ours = packed.translate_detailed(SENTENCES[:2], beam_size=2, attention=True)
    theirs = plain.translate_detailed(SENTENCES[:2], beam_size=2, attention=True)
    assert all(torch.equal(a.attention, b.attention) for a, b in zip(ours, theirs))


def test_fp32_models_are_never_packed(trained_checkpoint):
    translator = Translator.from_checkpoint(trained_checkpoint, precision="fp32")
    assert not prepack.available(translator.engine.model)
    with pytest.raises(ValueError, match="bf16 model"):
        prepack.prepack(translator.engine.model)
