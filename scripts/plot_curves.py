"""Learning curves from a training run's CSV log: validation BLEU (each corpus of a mixture,
and the selection metric) against wall-clock minutes (:func:`minitrans.evaluation.plotting.plot_curves`).

    python scripts/plot_curves.py runs/quickstart/logs/version_0/metrics.csv -o docs/quickstart-curve.png
    python scripts/plot_curves.py RUN_A/metrics.csv RUN_B/metrics.csv --label A --label B -o ab.png

Several logs share one figure (one colour per log, one line style per metric). Minutes come
from the ``wall_minutes`` column that training logs at each validation; older logs without it
are plotted against steps. The figure is written atomically (temporary file, then rename).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from minitrans.errors import UsageError
from minitrans.evaluation.plotting import plot_curves


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
    try:
        print(plot_curves(args.logs, labels, args.output, args.title))
    except UsageError as err:
        raise SystemExit(f"plot_curves: {err}") from None


if __name__ == "__main__":
    main()
