"""Shared tiny fixtures. Every test makes its own data; nothing is downloaded."""

from __future__ import annotations

import random

import pytest
import torch

from minitrans import ModelConfig, Transformer


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    random.seed(0)


@pytest.fixture
def tiny_config() -> ModelConfig:
    return ModelConfig(vocab_size=40, d_model=32, n_heads=4, n_encoder_layers=2,
                       n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64)


@pytest.fixture
def tiny_model(tiny_config) -> Transformer:
    return Transformer(tiny_config).eval()
