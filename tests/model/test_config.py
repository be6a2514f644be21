import dataclasses

import pytest

from minitrans import PRESETS, ModelConfig


def test_base_preset_is_the_paper_base_model():
    c = ModelConfig.preset("base", vocab_size=37000)
    assert (c.d_model, c.n_heads, c.n_encoder_layers, c.n_decoder_layers, c.d_ff, c.dropout, c.norm_first) == (
        512, 8, 6, 6, 2048, 0.1, False)
    assert c.d_k == 64
    assert {"tiny", "small", "base"} <= set(PRESETS)


@pytest.mark.parametrize("field,value,match", [
    ("n_heads", 3, "divisible"), ("dropout", 1.5, "dropout"), ("d_model", 0, "d_model"),
    ("pad_id", 99, "pad_id"), ("positional", "rotary", "positional"),
])
def test_bad_values_name_the_field(field, value, match):
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(ModelConfig(vocab_size=50), **{field: value})


def test_round_trip_and_unknown_keys():
    c = ModelConfig(vocab_size=50, d_model=64, n_heads=2)
    assert ModelConfig.from_dict(c.to_dict()) == c
    with pytest.raises(ValueError, match="d_modle"):
        ModelConfig.from_dict({"vocab_size": 5, "d_modle": 3})
    with pytest.raises(ValueError, match="Unknown model preset"):
        ModelConfig.preset("huge", vocab_size=5)


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ModelConfig(vocab_size=50).d_model = 3
