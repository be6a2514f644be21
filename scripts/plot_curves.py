"""Learning curves from a training run's CSV log: validation BLEU (each corpus of a mixture,
and the selection metric) against wall-clock minutes.

    python scripts/plot_curves.py runs/quickstart/logs/version_0/metrics.csv -o docs/quickstart-curve.png
    python scripts/plot_curves.py RUN_A/metrics.csv RUN_B/metrics.csv --label A --label B -o ab.png

Several logs share one figure (one colour per log, one line style per metric). Minutes come
from the ``wall_minutes`` column that training logs at each validation; older logs without it
are plotted against steps. The figure is written atomically (temporary file, then rename).
"""

from __future__ import annotations

import argparse
import csv
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from minitrans.textio import atomic_output  # noqa: E402


def read_validation_rows(path: str | os.PathLike) -> list[dict[str, float]]:
    """Rows of a Lightning CSVLogger ``metrics.csv`` that carry validation BLEU, as floats."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = []
        for row in csv.DictReader(f):
            if row.get("val_bleu"):
                rows.append({k: float(v) for k, v in row.items() if v not in ("", None)})
    if not rows:
        raise SystemExit(f"{path}: no row with val_bleu; is it the metrics.csv of a training run?")
    return rows


def plot(logs: list[str], labels: list[str], output: str, title: str | None = None) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    styles = ["-", "--", ":", "-."]
    for i, (path, label) in enumerate(zip(logs, labels)):
        rows = read_validation_rows(path)
        x_key = "wall_minutes" if all("wall_minutes" in r for r in rows) else "step"
        per_corpus = sorted({k for r in rows for k in r if k.startswith("val_bleu/")})
        metrics = per_corpus + (["val_bleu"] if per_corpus else ["val_bleu"])
        colour = f"C{i}"
        for j, key in enumerate(metrics):
            points = [(r[x_key], r[key]) for r in rows if key in r]
            name = key.split("/", 1)[1] if "/" in key else ("mean" if per_corpus else "val_bleu")
            ax.plot([p[0] for p in points], [p[1] for p in points], styles[j % len(styles)], marker="o",
                    markersize=3, color=colour, label=f"{label}: {name}" if label else name)
        ax.set_xlabel("wall-clock minutes" if x_key == "wall_minutes" else "training steps")
    ax.set_ylabel("validation BLEU (greedy)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    out = Path(output)
    try:
        with atomic_output(out, "wb") as f:
            fig.savefig(f, format="png")
    finally:
        plt.close(fig)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", nargs="+", help="metrics.csv of one or more runs")
    parser.add_argument("--label", action="append", help="legend label of each log (repeat)")
    parser.add_argument("--title")
    parser.add_argument("-o", "--output", required=True, help="PNG to write")
    args = parser.parse_args()
    labels = args.label or ([""] if len(args.logs) == 1 else [Path(p).parent.parent.parent.name for p in args.logs])
    if len(labels) != len(args.logs):
        parser.error(f"{len(args.logs)} logs but {len(labels)} labels")
    print(plot(args.logs, labels, args.output, args.title))


if __name__ == "__main__":
    main()
