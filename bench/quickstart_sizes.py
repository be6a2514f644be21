"""The quickstart recipe at several model sizes on the CPU classes users have: the sweep behind
the quickstart's choice of model (issue #43; docs/results.md, "The 10-minute model by machine").

Each run is ``minitrans train --config configs/quickstart.yaml`` with the model's dimensions
overridden, then ``minitrans evaluate`` of its best checkpoint on both test sets (beam 5). The
``avx2`` class caps this CPU's kernels to AVX2 and trains and decodes in fp32, as a CPU without
bf16 units does (``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2``);
``native`` is the CPU as it is (bf16 where it has AMX or AVX-512-BF16). Runs go one after the
other (never two PyTorch jobs at once) and append a row each to ``--out``.

    MINITRANS_DATA=../shared/data python bench/quickstart_sizes.py --runs avx2:m,avx2:s,avx2:xs,native:m
    MINITRANS_DATA=../shared/data python bench/quickstart_sizes.py --runs avx2:s --extra "--model.cooldown 0.2" --tag wsd
    python bench/quickstart_sizes.py --plot docs/quickstart-sizes.png   # the figure of docs/results.md
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


def sizes() -> dict[str, dict[str, int]]:
    from minitrans.training.sizing import CANDIDATES

    return {c.name: c.dims() for c in CANDIDATES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default="", help="comma-separated CLASS:SIZE (CLASS avx2 or native)")
    parser.add_argument("--plot", metavar="PNG", help="draw BLEU against steps from --out's rows (no runs)")
    parser.add_argument("--extra", default="", help="more overrides for every run")
    parser.add_argument("--tag", default="", help="a name for the variant (runs/sizes/CLASS-SIZE-TAG)")
    parser.add_argument("--out", default="runs/sizes/results.csv")
    args = parser.parse_args()
    out = Path(args.out)
    if args.plot:
        return plot(out, Path(args.plot))
    out.parent.mkdir(parents=True, exist_ok=True)
    table = sizes()
    for spec in filter(None, args.runs.split(",")):
        cls, size = spec.split(":")
        name = "-".join(p for p in (cls, size, args.tag) if p)
        root = Path("runs/sizes") / name
        env = {**os.environ, **(AVX2 if cls == "avx2" else {})}
        dims = [a for k, v in table[size].items() for a in (f"--model.config.{k}", str(v))]
        train = ["minitrans", "train", "--config", "configs/quickstart.yaml", "--model_size", "fixed", *dims,
                 "--trainer.default_root_dir", str(root), "--checkpoint.dirpath", str(root / "checkpoints"),
                 *(["--trainer.precision", "32-true"] if cls == "avx2" else []), *shlex.split(args.extra)]
        print("+", " ".join(train), flush=True)
        subprocess.run(train, env=env, check=True)
        metrics = sorted(glob.glob(str(root / "logs" / "version_*" / "metrics.csv")))[-1]
        rows = list(csv.DictReader(open(metrics)))
        steps = max(int(r["step"]) for r in rows if r.get("step"))
        points = sum(1 for r in rows if r.get("val_bleu"))
        minutes = max(float(r["wall_minutes"]) for r in rows if r.get("wall_minutes"))
        evaluate = ["minitrans", "evaluate", "-m", str(root / "checkpoints" / "best.ckpt"), "--split", "test",
                    "--output-dir", str(root / "eval"), *(["--precision", "fp32"] if cls == "avx2" else [])]
        print("+", " ".join(evaluate), flush=True)
        report = subprocess.run(evaluate, env=env, check=True, capture_output=True, text=True).stdout
        scores = {}
        for line in report.splitlines():
            parts = line.split()
            if len(parts) >= 5 and parts[1].endswith("/test"):
                scores[parts[1].split("/")[0]] = (float(parts[2]), float(parts[3]))
        if not scores:  # one report: JSON
            r = json.loads(report)
            scores[r["dataset"]] = (r["bleu"], r["chrf"])
        row = {"class": cls, "size": size, "tag": args.tag, **table[size], "steps": steps, "validations": points,
               "minutes": round(minutes, 2), **{f"{k}_bleu": v[0] for k, v in scores.items()},
               **{f"{k}_chrf": v[1] for k, v in scores.items()}}
        print(json.dumps(row), flush=True)
        new = not out.exists()
        with out.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(row))
            if new:
                writer.writeheader()
            writer.writerow(row)


def plot(results: Path, png: Path) -> None:
    """Test BLEU of each run against the steps it made in its 10 minutes, one line per CPU class
    and test set, each point named by its model size (the default-schedule runs only)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in csv.DictReader(results.open()) if not r["tag"]]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for cls, label in (("avx2", "AVX2, fp32"), ("native", "AMX, bf16")):
        for corpus, marker in (("multi30k", "o"), ("tatoeba", "s")):
            points = sorted((int(r["steps"]), float(r[f"{corpus}_bleu"]), r["size"]) for r in rows if r["class"] == cls)
            if not points:
                continue
            line, = ax.plot([p[0] for p in points], [p[1] for p in points], marker=marker,
                            linestyle="-" if cls == "native" else "--", label=f"{corpus} test, {label}")
            for steps, bleu, size in points:
                ax.annotate(size, (steps, bleu), textcoords="offset points", xytext=(4, 4), fontsize=8,
                            color=line.get_color())
    ax.set_xlabel("steps made in 10 minutes (2 cores)")
    ax.set_ylabel("test BLEU (beam 5)")
    ax.set_title("quickstart: model size against the steps a machine affords")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=120)
    print(f"wrote {png}")


if __name__ == "__main__":
    sys.exit(main())
