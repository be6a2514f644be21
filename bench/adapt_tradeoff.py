"""Gain against forgetting of `minitrans adapt` runs: one point per run, from the reports they wrote.

    python bench/adapt_tradeoff.py runs/adapt/*.report.json --plot docs/adapt-tradeoff.png

Each report (``OUT.report.json``) holds BLEU before and after on the user's held-out part and on
the parent's test sets. The table prints, per run, its settings (from the checkpoint's
provenance: minutes, replay, peak learning rate), the gain on the held-out part and the change
on each of the parent's sets; ``--plot`` draws the gain (BLEU, x) against the worst loss on the
parent's test sets (y), each point labelled with its settings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def rows(paths: list[Path]) -> list[dict]:
    from minitrans.checkpoint import checkpoint_metadata

    out = []
    for path in paths:
        report = json.loads(path.read_text(encoding="utf-8"))
        ckpt = path.with_name(path.name.replace(".report.json", ".ckpt"))
        adapted = checkpoint_metadata(ckpt).get("adapted", {}) if ckpt.is_file() else {}
        sets = {s["set"]: s for s in report["sets"]}
        parents = [s for name, s in sets.items() if name.endswith(".test")]
        out.append({"run": ckpt.stem, "minutes": adapted.get("minutes"), "replay": adapted.get("replay"),
                    "peak_lr": adapted.get("peak_lr"), "seconds": report.get("seconds"),
                    "gain_bleu": sets["yours"]["bleu_change"], "gain_chrf": sets["yours"]["chrf_change"],
                    "yours_after": sets["yours"]["bleu_after"],
                    "forgetting": {s["set"]: s["bleu_change"] for s in parents},
                    "general": {name: s["bleu_change"] for name, s in sets.items()
                                if s["what"] == "general domain"}})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--plot", type=Path, help="draw gain against the worst loss on the parent's test sets")
    args = parser.parse_args()
    table = rows(args.reports)
    print("| run | minutes | replay | peak lr | held-out BLEU after (change) | chrF change | parent's test sets "
          "(BLEU change) | general dev (BLEU change) | command (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in table:
        forget = ", ".join(f"{k} {v:+.2f}" for k, v in r["forgetting"].items())
        general = ", ".join(f"{k} {v:+.2f}" for k, v in r["general"].items())
        print(f"| {r['run']} | {r['minutes']} | {r['replay']} | {r['peak_lr']} | {r['yours_after']:.2f} "
              f"({r['gain_bleu']:+.2f}) | {r['gain_chrf']:+.2f} | {forget} | {general} | {r['seconds']} |")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for r in table:
            worst = min(r["forgetting"].values(), default=0.0)
            ax.scatter(r["gain_bleu"], worst)
            ax.annotate(f"{r['minutes']} min, replay {r['replay']}, lr {r['peak_lr']}", (r["gain_bleu"], worst),
                        fontsize=7, xytext=(4, 4), textcoords="offset points")
        ax.axhline(-1.0, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xlabel("BLEU gained on the held-out part")
        ax.set_ylabel("worst BLEU change on the parent's test sets")
        ax.set_title("minitrans adapt: gain against forgetting")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
