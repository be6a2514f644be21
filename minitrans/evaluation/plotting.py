"""Figures: one translation's cross-attention as a heatmap (``translate --plot-attention``) and
a training run's learning curves (``scripts/plot_curves.py``).

Both are written atomically (a temporary file, then a rename), so a figure is never half
written. matplotlib is imported only when a figure is drawn, with its file-only backend: a
server or a translation that draws nothing never loads it.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from minitrans.text import languages
from minitrans.errors import UsageError
from minitrans.text.textio import atomic_output


def _pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path, dpi: int) -> Path:
    """Write ``fig`` to ``path`` atomically (format from its suffix) and close it."""
    try:
        with atomic_output(path, "wb") as f:
            fig.savefig(f, dpi=dpi, format=path.suffix.lstrip(".") or "png")
    finally:
        _pyplot().close(fig)
    return path


def plot_path(path: str | os.PathLike) -> Path:
    """The file a plot is written to: ``.png`` is added when the path has no suffix."""
    path = Path(path)
    return path if path.suffix else path.with_name(path.name + ".png")


def check_attention_view(config, layer: int | None, head: int | None) -> None:
    """Reject a decoder layer or head the model does not have (counted from 0)."""
    if layer is not None and not 0 <= layer < config.n_decoder_layers:
        raise UsageError(f"--layer must lie in 0..{config.n_decoder_layers - 1} (decoder layers, from 0), got {layer}.")
    if head is not None and not 0 <= head < config.n_heads:
        raise UsageError(f"--head must lie in 0..{config.n_heads - 1} (attention heads, from 0), got {head}.")


def plot_attention(translation, path: str | os.PathLike, layer: int | None = None, head: int | None = None,
                   direction: tuple[str, str] = ("en", "fr")) -> Path:
    """Save a heatmap of one translation's cross-attention (source × output pieces).

    Args:
        translation: A result of ``translate_detailed(..., attention=True)``.
        path: Output image path (``.png`` added when it has no suffix).
        layer: Decoder layer to show, counted from 0 (default: the last).
        head: Head to show (default: the average over heads).
        direction: ``(source, target)`` language codes of the model, for the axis labels
            (:attr:`Translator.languages`).
    """
    if translation.attention is None:
        raise ValueError("This translation carries no attention weights: use translate_detailed(attention=True).")
    weights = translation.attention  # (layers, H, T, S)
    if layer is not None and not 0 <= layer < weights.size(0):
        raise UsageError(f"--layer must lie in 0..{weights.size(0) - 1} (decoder layers, from 0), got {layer}.")
    if head is not None and not 0 <= head < weights.size(1):
        raise UsageError(f"--head must lie in 0..{weights.size(1) - 1} (attention heads, from 0), got {head}.")
    layer = weights.size(0) - 1 if layer is None else layer
    w = weights[layer].mean(0) if head is None else weights[layer, head]  # (T, S)
    src, tgt = translation.src_pieces, translation.tgt_pieces
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(4, 0.45 * len(src) + 2), max(3, 0.4 * len(tgt) + 1.5)))
    ax.imshow(w.float().numpy(), cmap="Blues", vmin=0, aspect="auto")
    ax.set_xticks(range(len(src)), src, rotation=60, ha="right", fontsize=9)
    ax.set_yticks(range(len(tgt)), tgt, fontsize=9)
    ax.set_xlabel(f"source ({languages.name(direction[0])})")
    ax.set_ylabel(f"output ({languages.name(direction[1])})")
    which = "mean over heads" if head is None else f"head {head}"
    ax.set_title(f"cross-attention, decoder layer {layer + 1} of {weights.size(0)}, {which}", fontsize=10)
    fig.tight_layout()
    return _save(fig, plot_path(path), dpi=120)


def read_validation_rows(path: str | os.PathLike) -> list[dict[str, float]]:
    """Rows of a Lightning CSVLogger ``metrics.csv`` that carry validation BLEU, as floats."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = [{k: float(v) for k, v in row.items() if v not in ("", None)}
                    for row in csv.DictReader(f) if row.get("val_bleu")]
    except OSError as err:
        raise UsageError(f"{path}: cannot read it ({err.strerror or err}).") from None
    if not rows:
        raise UsageError(f"{path}: no row with val_bleu; is it the metrics.csv of a training run?")
    return rows


def plot_curves(logs: list[str | os.PathLike], labels: list[str], output: str | os.PathLike,
                title: str | None = None) -> Path:
    """Validation BLEU (each corpus of a mixture, and the selection metric) against wall-clock
    minutes, one colour per log and one line style per metric; a log from before ``wall_minutes``
    was logged is drawn against steps."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    styles = ["-", "--", ":", "-."]
    for i, (path, label) in enumerate(zip(logs, labels)):
        rows = read_validation_rows(path)
        x_key = "wall_minutes" if all("wall_minutes" in r for r in rows) else "step"
        per_corpus = sorted({k for r in rows for k in r if k.startswith("val_bleu/")})
        for j, key in enumerate(per_corpus + ["val_bleu"]):
            points = [(r[x_key], r[key]) for r in rows if key in r]
            name = key.split("/", 1)[1] if "/" in key else ("mean" if per_corpus else "val_bleu")
            ax.plot([p[0] for p in points], [p[1] for p in points], styles[j % len(styles)], marker="o",
                    markersize=3, color=f"C{i}", label=f"{label}: {name}" if label else name)
        ax.set_xlabel("wall-clock minutes" if x_key == "wall_minutes" else "training steps")
    ax.set_ylabel("validation BLEU (greedy)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return _save(fig, Path(output), dpi=110)
