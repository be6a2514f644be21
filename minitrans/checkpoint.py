"""Self-contained checkpoints: safe loading, compatibility checks, averaging, atomic saves.

A minitrans checkpoint is a Lightning checkpoint with one extra entry, ``"minitrans"``
(:data:`META_KEY`), whose schema this module owns — nothing else writes or reads that entry:

================================  =========================================================
``version``                       the minitrans version that wrote it
``model_config``                  :meth:`ModelConfig.to_dict`
``tokenizer``                     the SentencePiece model's bytes (uint8 tensor)
``tokenizer_fingerprint``         sha256, vocabulary size and special ids of that model
``tokenizer_binding``             a hash of the tokenizer with the embedding matrix (a swap is caught)
``data``                          the data module's settings (dataset, files, splits, corpora ...)
``decoding``                      the length limit ``max_len_a``, ``max_len_b``
``wall_minutes``                  training minutes so far (resumes included)
``validation``                    the latest ``val_*`` scores
``sizing``                        (``model_size: auto``) the model chosen for the machine, why, the probe
``averaged_from``                 (averages only) the checkpoints averaged: file name and sha256
================================  =========================================================

:func:`write_metadata` builds it, :func:`metadata` / :func:`stored_tokenizer` /
:func:`stored_config` read it; translating and evaluating need nothing else.

Loading never runs code from the file: ``torch.load(..., weights_only=True)`` only
rebuilds tensors and plain containers, and refuses anything else.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import torch

from minitrans._version import __version__
from minitrans.text import languages
from minitrans.model.config import ModelConfig
from minitrans.errors import CheckpointError, UsageError, write_failed
from minitrans.text.textio import atomic_output, file_sha256, same_file
from minitrans.text.tokenizer import Tokenizer
from minitrans.model.transformer import Transformer


def save_atomic(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save`` through :func:`~minitrans.text.textio.atomic_output`: a crash never leaves a
    truncated file under the final name, and temporaries of killed earlier saves are removed."""
    try:
        with atomic_output(path, "wb") as f:
            torch.save(obj, f)
    except RuntimeError as err:  # torch's zip writer reports a failed write (disk full) this way
        cause = err.__context__ if isinstance(err.__context__, OSError) else err
        if cause is err and "writ" not in str(err):
            raise
        raise write_failed(path, cause) from None


def copy_atomic(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Copy a file so that ``target`` is always either the old or the new complete file."""
    with atomic_output(target, "wb") as out, open(source, "rb") as f:
        shutil.copyfileobj(f, out, 1 << 20)


def tokenizer_binding(tokenizer_sha256: str, state: dict[str, torch.Tensor]) -> str:
    """A hash of the tokenizer together with the embedding matrix it was trained with.

    The tokenizer's own fingerprint only proves that the stored tokenizer agrees with itself;
    a tokenizer swapped for another of the same size (with its own fingerprint) would load
    and translate garbage. This binding changes with either half, so a swap is caught.
    """
    key = "model.src_embed.weight" if "model.src_embed.weight" in state else "src_embed.weight"
    embedding = state[key].detach().to("cpu", torch.float32).contiguous()
    digest = hashlib.sha256(tokenizer_sha256.encode())
    digest.update(embedding.numpy().tobytes())
    return digest.hexdigest()


REQUIRED_META = {"model_config": dict, "tokenizer": torch.Tensor, "tokenizer_fingerprint": dict}
#: The checkpoint entry that holds minitrans's metadata.
META_KEY = "minitrans"


def write_metadata(checkpoint: dict, config: ModelConfig, tokenizer: Tokenizer, data: dict[str, Any],
                   decoding: dict[str, Any], wall_minutes: float, validation: dict[str, float],
                   sizing: dict[str, Any] | None = None) -> None:
    """Write the ``"minitrans"`` entry of a checkpoint being saved (its ``state_dict`` is bound
    to the tokenizer here)."""
    fingerprint = tokenizer.fingerprint()
    checkpoint[META_KEY] = {
        "version": __version__,
        "model_config": config.to_dict(),
        "tokenizer": tokenizer.to_tensor(),
        "tokenizer_fingerprint": fingerprint,
        "tokenizer_binding": tokenizer_binding(fingerprint["sha256"], checkpoint["state_dict"]),
        "data": data,
        "decoding": decoding,
        "wall_minutes": wall_minutes,
        "validation": validation,
        **({"sizing": sizing} if sizing else {}),
    }


def metadata(checkpoint: dict) -> dict:
    """A loaded checkpoint's minitrans metadata (empty for a checkpoint of another program)."""
    entry = checkpoint.get(META_KEY)
    return entry if isinstance(entry, dict) else {}


def stored_tokenizer(checkpoint: dict) -> Tokenizer:
    """The SentencePiece model a loaded checkpoint carries."""
    return Tokenizer.from_tensor(metadata(checkpoint)["tokenizer"])


def stored_config(checkpoint: dict) -> ModelConfig:
    """The model config a loaded checkpoint records."""
    return ModelConfig.from_dict(metadata(checkpoint)["model_config"])


def checkpoint_metadata(path: str | os.PathLike) -> dict:
    """The minitrans metadata of the checkpoint at ``path`` (loaded safely, checked)."""
    return metadata(load_checkpoint(path))


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Load a minitrans checkpoint safely (``weights_only``), with clear errors."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"Checkpoint not found: {path}. Pass the path of a .ckpt written by `minitrans train`.")
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        if "Unsupported global" in str(err):  # a class or function reference: code
            raise CheckpointError(
                f"Refusing to load {path}: it contains pickled objects other than tensors and plain "
                f"containers (possibly code), which minitrans never executes. ({first})") from None
        raise CheckpointError(f"{path} is not a readable checkpoint (not a torch file, or damaged): {first}. "
                              "Pass a .ckpt written by `minitrans train` or `minitrans average`.") from None
    except Exception as err:  # torch raises many types on damaged or foreign files
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CheckpointError(f"{path} is not a readable checkpoint (truncated, damaged or not a torch file): "
                              f"{first}. Pass a .ckpt written by `minitrans train` or `minitrans average`.") from None
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get(META_KEY), dict) \
            or not isinstance(checkpoint.get("state_dict"), dict):
        raise CheckpointError(
            f"{path} is not a minitrans checkpoint (no 'minitrans' entry): train with `minitrans train`, "
            "or average minitrans checkpoints with `minitrans average`."
        )
    for key, kind in REQUIRED_META.items():
        if not isinstance(checkpoint[META_KEY].get(key), kind):
            raise CheckpointError(f"{path} is damaged: its metadata lacks a valid {key!r}. Use another checkpoint "
                                  "of the run (last.ckpt or a step*.ckpt).")
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
    meta = metadata(checkpoint)
    try:
        config = ModelConfig.from_dict(meta["model_config"])
    except (ValueError, TypeError) as err:
        raise CheckpointError(f"{path}: its model config is not valid for this minitrans version: {err}") from None
    try:
        tokenizer = Tokenizer.from_tensor(meta["tokenizer"])
    except Exception as err:  # SentencePiece raises RuntimeError/TypeError on bad bytes
        raise CheckpointError(f"{path}: its stored SentencePiece model cannot be read ({type(err).__name__}); "
                              "the checkpoint is damaged.") from None
    fingerprint = tokenizer.fingerprint()
    if fingerprint != meta["tokenizer_fingerprint"]:
        raise CheckpointError(f"{path}: the stored SentencePiece model does not match its recorded fingerprint.")
    if tokenizer.vocab_size != config.vocab_size:
        raise CheckpointError(
            f"{path}: tokenizer has {tokenizer.vocab_size} pieces but the model expects {config.vocab_size}.")
    state = model_state(checkpoint)
    bad = [k for k, v in state.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        raise CheckpointError(f"{path}: weights hold NaN or infinite values ({bad[0]}"
                              f"{f' and {len(bad) - 1} more' if len(bad) > 1 else ''}): training diverged. "
                              "Use an earlier checkpoint, or retrain with a lower learning rate.")
    binding = meta.get("tokenizer_binding")
    if binding is not None and "src_embed.weight" in state and \
            tokenizer_binding(fingerprint["sha256"], state) != binding:
        raise CheckpointError(f"{path}: its SentencePiece model is not the one its weights were trained with "
                              "(the tokenizer was replaced). Use the original checkpoint.")
    model = Transformer(config)
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise CheckpointError(f"{path}: the weights do not fit the recorded model config: "
                              f"{str(err).splitlines()[0]}") from None
    return model.to(device).eval(), tokenizer, meta


def published(meta: dict, keys: tuple[str, ...]) -> dict:
    """The entries ``keys`` of ``meta`` as they may leave this machine (an export's metadata,
    the server's ``/v1/models``): no path of this machine in them. ``averaged_from`` gives file
    names and sha256s (older checkpoints recorded paths: their names), and in the ``data``
    settings a folder that is absolute or climbs out of the project (``..``, ``~``) is dropped
    (the reader's ``--data-dir`` or ``$MINITRANS_DATA`` says where their corpora are) and such a
    file becomes its file name."""
    out = {}
    for key in keys:
        if key not in meta:
            continue
        value = meta[key]
        if key == "averaged_from" and isinstance(value, list):
            value = [{"checkpoint": Path(e.get("checkpoint", "")).name, **({"sha256": e["sha256"]} if "sha256" in e else {})}
                     if isinstance(e, dict) else {"checkpoint": Path(str(e)).name} for e in value]
        elif key == "data" and isinstance(value, dict):
            value = _published_data(value)
        elif key == "adapted" and isinstance(value, dict):
            value = _published_adaptation(value)
        out[key] = value
    return out


def _published_adaptation(adapted: dict) -> dict:
    """An adaptation's provenance as it may leave the machine: names, sha256s, counts, settings
    and scores, without the report's example sentences (the user's own text)."""
    report = {k: v for k, v in (adapted.get("report") or {}).items() if k not in ("examples", "table")}
    return {**{k: v for k, v in adapted.items() if k != "report"}, **({"report": report} if report else {})}


def adaptation_lines(meta: dict) -> list[str]:
    """What a model card says of an adapted checkpoint (``minitrans adapt``): its parent, its data,
    its budget, and BLEU before and after on each set of its report; [] for any other."""
    adapted = meta.get("adapted")
    if not isinstance(adapted, dict):
        return []
    parent = adapted.get("parent") or {}
    files = ", ".join(d.get("file", "?") for d in adapted.get("data") or [] if not d.get("held_out")) or "?"
    pairs = adapted.get("pairs") or {}
    replay = (f", replaying {', '.join(adapted['replayed'])} at {adapted.get('replay', 0):.0%} of the draws"
              if adapted.get("replayed") else ", without replay")
    lines = [f"Adapted from {parent.get('checkpoint', '?')} (sha256 {str(parent.get('sha256', '?'))[:12]}…) on "
             f"{files} ({pairs.get('train', '?')} training pairs, {pairs.get('held_out', '?')} held out) for "
             f"{adapted.get('minutes', '?')} minutes{replay}."]
    for row in (adapted.get("report") or {}).get("sets") or []:
        lines.append(f"{row['set']} ({row['what']}, {row['sentences']} sentences): BLEU {row['bleu_before']:.2f} → "
                     f"{row['bleu_after']:.2f}, chrF {row['chrf_before']:.2f} → {row['chrf_after']:.2f}")
    return lines


def _published_data(data: dict) -> dict:
    data = dict(data)
    for key in ("data_dir", "cache_dir"):
        if isinstance(data.get(key), str) and _published_path(data[key]) != data[key]:
            del data[key]  # the defaults (or what the reader gives) replace this machine's folders
    if isinstance(data.get("tokenizer"), str):
        data["tokenizer"] = _published_path(data["tokenizer"])
    if isinstance(data.get("files"), dict):
        data["files"] = {k: _published_path(v) if isinstance(v, str) else v for k, v in data["files"].items()}
    if isinstance(data.get("corpora"), list):
        data["corpora"] = [_published_data(c) if isinstance(c, dict) else c for c in data["corpora"]]
    return data


def _published_path(path: str) -> str:
    """A relative path inside the project as it is; any other its file name."""
    pure = Path(path)
    if pure.is_absolute() or ".." in pure.parts or path.startswith("~"):
        return pure.name
    return path


def with_metadata(source: str | os.PathLike, output: str | os.PathLike, **entries: Any) -> None:
    """Write ``source`` again as ``output`` (atomically) with ``entries`` added to its
    metadata; ``source`` itself is never replaced (it may be a resumable training checkpoint)."""
    if same_file(source, output):
        raise UsageError(f"--output {output} is the checkpoint read; write the result to a new file.")
    checkpoint = load_checkpoint(source)
    checkpoint[META_KEY] = {**metadata(checkpoint), **entries}
    save_atomic(checkpoint, output)


def average_checkpoints(paths: list[str | os.PathLike], output: str | os.PathLike) -> dict:
    """Average the weights of compatible checkpoints into a new self-contained one.

    Compatible means: same model config, same tokenizer, same parameter names and shapes.
    The result keeps the first checkpoint's metadata and drops optimizer and loop state
    (it is for translating and evaluating, not for resuming).
    """
    if len(paths) < 1:
        raise CheckpointError("Give at least one checkpoint to average.")
    for p in paths:
        if same_file(p, output):
            raise UsageError(f"--output {output} is one of the checkpoints to average; it would be replaced "
                             "(and a resumable training checkpoint lost). Choose a new file name.")
    first = load_checkpoint(paths[0])
    meta = metadata(first)
    total = {k: v.double() if v.is_floating_point() else v.clone() for k, v in first["state_dict"].items()}
    for path in paths[1:]:
        other = load_checkpoint(path)
        other_meta = metadata(other)
        if other_meta["model_config"] != meta["model_config"]:
            diff = {k: (meta["model_config"].get(k), v) for k, v in other_meta["model_config"].items()
                    if meta["model_config"].get(k) != v}
            raise CheckpointError(f"Cannot average {path} with {paths[0]}: model configs differ in {diff}.")
        if other_meta["tokenizer_fingerprint"] != meta["tokenizer_fingerprint"]:
            raise CheckpointError(f"Cannot average {path} with {paths[0]}: they use different SentencePiece models.")
        languages.check_same("average", (paths[0], meta), (path, other_meta))
        state = other["state_dict"]
        if state.keys() != total.keys() or any(state[k].shape != total[k].shape for k in total):
            raise CheckpointError(f"Cannot average {path} with {paths[0]}: parameter names or shapes differ.")
        for k, v in state.items():
            if v.is_floating_point():
                total[k] += v.double()
    n = len(paths)
    averaged = {k: (v / n).to(first["state_dict"][k].dtype) if v.is_floating_point() else v
                for k, v in total.items()}
    # Names and content hashes, never this machine's paths: the metadata travels with the model.
    meta = {**meta, "averaged_from": [{"checkpoint": Path(p).name, "sha256": file_sha256(p)} for p in paths]}
    meta["tokenizer_binding"] = tokenizer_binding(meta["tokenizer_fingerprint"]["sha256"], averaged)
    result = {"state_dict": averaged, META_KEY: meta,
              "hyper_parameters": first.get("hyper_parameters", {}),
              "global_step": first.get("global_step", 0)}
    save_atomic(result, output)
    return result
