"""Self-contained checkpoints: safe loading, compatibility checks, averaging, atomic saves.

A minitrans checkpoint is a Lightning checkpoint with one extra entry, ``"minitrans"``:
the model config, the SentencePiece model (as a uint8 tensor), its fingerprint, the data
settings and the minitrans version. Translating and evaluating need nothing else.

Loading never runs code from the file: ``torch.load(..., weights_only=True)`` only
rebuilds tensors and plain containers, and refuses anything else.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from minitrans.config import ModelConfig
from minitrans.tokenizer import Tokenizer
from minitrans.transformer import Transformer


class CheckpointError(ValueError):
    """A checkpoint that is missing, unsafe, not minitrans's, or does not match."""


def save_atomic(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save`` to a temporary file, then rename: a crash never leaves a truncated
    file under the final name."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, made atomic with :func:`save_atomic`."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        save_atomic(checkpoint, path)


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Load a minitrans checkpoint safely (``weights_only``), with clear errors."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"Checkpoint not found: {path}. Pass the path of a .ckpt written by `minitrans train`.")
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        raise CheckpointError(
            f"Refusing to load {path}: it contains pickled objects other than tensors and plain "
            f"containers (possibly code), which minitrans never executes. ({str(err).splitlines()[0]})"
        ) from err
    except (RuntimeError, EOFError) as err:
        raise CheckpointError(f"{path} is not a readable checkpoint (truncated or not a torch file): {err}") from err
    if not isinstance(checkpoint, dict) or "minitrans" not in checkpoint or "state_dict" not in checkpoint:
        raise CheckpointError(
            f"{path} is not a minitrans checkpoint (no 'minitrans' entry): train with `minitrans train`, "
            "or average minitrans checkpoints with `minitrans average`."
        )
    return checkpoint


def model_state(checkpoint: dict) -> dict[str, torch.Tensor]:
    """The Transformer's weights (Lightning prefixes them with ``model.``)."""
    return {k[len("model."):]: v for k, v in checkpoint["state_dict"].items() if k.startswith("model.")}


def load_for_inference(path: str | os.PathLike, device: str | torch.device = "cpu") -> tuple[Transformer, Tokenizer, dict]:
    """Rebuild the model and tokenizer from a checkpoint, checking they match.

    Returns:
        ``(model in eval mode on device, tokenizer, the checkpoint's "minitrans" metadata)``.
    """
    checkpoint = load_checkpoint(path)
    meta = checkpoint["minitrans"]
    try:
        config = ModelConfig.from_dict(meta["model_config"])
    except (ValueError, TypeError) as err:
        raise CheckpointError(f"{path}: its model config is not valid for this minitrans version: {err}") from err
    tokenizer = Tokenizer.from_tensor(meta["tokenizer"])
    fingerprint = tokenizer.fingerprint()
    if fingerprint != meta["tokenizer_fingerprint"]:
        raise CheckpointError(f"{path}: the stored SentencePiece model does not match its recorded fingerprint.")
    if tokenizer.vocab_size != config.vocab_size:
        raise CheckpointError(
            f"{path}: tokenizer has {tokenizer.vocab_size} pieces but the model expects {config.vocab_size}.")
    model = Transformer(config)
    try:
        model.load_state_dict(model_state(checkpoint))
    except RuntimeError as err:
        raise CheckpointError(f"{path}: the weights do not fit the recorded model config: {err}") from err
    return model.to(device).eval(), tokenizer, meta


def average_checkpoints(paths: list[str | os.PathLike], output: str | os.PathLike) -> dict:
    """Average the weights of compatible checkpoints into a new self-contained one.

    Compatible means: same model config, same tokenizer, same parameter names and shapes.
    The result keeps the first checkpoint's metadata and drops optimizer and loop state
    (it is for translating and evaluating, not for resuming).
    """
    if len(paths) < 1:
        raise CheckpointError("Give at least one checkpoint to average.")
    first = load_checkpoint(paths[0])
    meta = first["minitrans"]
    total = {k: v.double() if v.is_floating_point() else v.clone() for k, v in first["state_dict"].items()}
    for path in paths[1:]:
        other = load_checkpoint(path)
        other_meta = other["minitrans"]
        if other_meta["model_config"] != meta["model_config"]:
            diff = {k: (meta["model_config"].get(k), v) for k, v in other_meta["model_config"].items()
                    if meta["model_config"].get(k) != v}
            raise CheckpointError(f"Cannot average {path} with {paths[0]}: model configs differ in {diff}.")
        if other_meta["tokenizer_fingerprint"] != meta["tokenizer_fingerprint"]:
            raise CheckpointError(f"Cannot average {path} with {paths[0]}: they use different SentencePiece models.")
        state = other["state_dict"]
        if state.keys() != total.keys() or any(state[k].shape != total[k].shape for k in total):
            raise CheckpointError(f"Cannot average {path} with {paths[0]}: parameter names or shapes differ.")
        for k, v in state.items():
            if v.is_floating_point():
                total[k] += v.double()
    n = len(paths)
    averaged = {k: (v / n).to(first["state_dict"][k].dtype) if v.is_floating_point() else v
                for k, v in total.items()}
    result = {"state_dict": averaged, "minitrans": {**meta, "averaged_from": [str(p) for p in paths]},
              "hyper_parameters": first.get("hyper_parameters", {}),
              "global_step": first.get("global_step", 0)}
    save_atomic(result, output)
    return result
