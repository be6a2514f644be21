"""Corpus-scale preparation benchmark: wall time and peak memory of `minitrans prepare` on
synthetic parallel corpora of growing size, the current code and (optionally) an older tree
side by side.

    MINITRANS_DATA=../shared/data python bench/benchmark_prepare.py --sizes 1000000,4000000,8000000 \
        --work /tmp/prepare-bench [--old-tree /tmp/oldtree --old-sizes 1000000,2000000]

The corpora recombine Tatoeba and Multi30k training pairs with numbered variations, so every pair
is distinct and lengths follow real ones: each pair is one real pair (70%) or two joined (30%),
prefixed with its number ("123. ..."). Each corpus is a TSV training file plus the real Tatoeba
sentences as valid/test files (dataset `tsv`, as large corpora ship with their own dev/test sets).

Peak memory is read from /proc every 0.1 s: `peak RSS` counts everything resident, memory-mapped
Arrow pages included; `peak anon` only the process's own heap (what cannot be paged back to the
file). Each run starts from an empty cache. This is a script, not a test: it takes minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def real_pairs(data_dir: Path) -> list[tuple[str, str]]:
    pairs = []
    with open(data_dir / "tatoeba-fra-eng" / "fra.txt", encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) >= 2:
                pairs.append((fields[0], fields[1]))
    en = (data_dir / "multi30k" / "train.en").read_text(encoding="utf-8").splitlines()
    fr = (data_dir / "multi30k" / "train.fr").read_text(encoding="utf-8").splitlines()
    return pairs + list(zip(en, fr))


def write_corpus(folder: Path, n: int, pairs: list[tuple[str, str]], seed: int = 0) -> Path:
    """``folder/train.tsv`` with ``n`` distinct pairs, and small valid/test TSVs."""
    folder.mkdir(parents=True, exist_ok=True)
    train = folder / "train.tsv"
    if train.exists() and sum(1 for _ in open(train, "rb")) == n:
        return folder
    rng = random.Random(seed)
    with open(train, "w", encoding="utf-8") as f:
        for i in range(n):
            en, fr = rng.choice(pairs)
            if rng.random() < 0.3:
                en2, fr2 = rng.choice(pairs)
                en, fr = f"{en} {en2}", f"{fr} {fr2}"
            f.write(f"{i}. {en}\t{i}. {fr}\n")
    held = rng.sample(pairs, 2000)
    for name, part in (("valid", held[:1000]), ("test", held[1000:])):
        (folder / f"{name}.tsv").write_text("".join(f"{e}\t{f}\n" for e, f in part), encoding="utf-8")
    return folder


def run_prepare(tree: Path, corpus: Path, cache: Path, vocab_size: int) -> dict:
    """One `minitrans prepare` in a child process: wall seconds, peak RSS and peak anonymous memory."""
    shutil.rmtree(cache, ignore_errors=True)
    config = cache.with_suffix(".yaml")
    cache.parent.mkdir(parents=True, exist_ok=True)
    files = {name: str(corpus / f"{name}.tsv") for name in ("train", "valid", "test")}
    config.write_text(json.dumps({"data": {"dataset": "tsv", "files": files, "vocab_size": vocab_size,
                                           "cache_dir": str(cache)}}))
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "minitrans", "prepare", "--config", str(config)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak_rss = peak_anon = 0
    while proc.poll() is None:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            break
        fields = {k: v for k, v in (line.split(":", 1) for line in status.splitlines() if ":" in line)}
        peak_rss = max(peak_rss, int(fields.get("VmRSS", "0 kB").split()[0]))
        peak_anon = max(peak_anon, int(fields.get("RssAnon", "0 kB").split()[0]))
        time.sleep(0.1)
    out = proc.stdout.read()
    seconds = time.perf_counter() - started
    if proc.returncode:
        return {"error": out[-2000:], "seconds": round(seconds, 1)}
    stats = json.loads(out[out.index("{"):])
    shutil.rmtree(cache, ignore_errors=True)
    return {"seconds": round(seconds, 1), "peak_rss_gib": round(peak_rss / 2**20, 2),
            "peak_anon_gib": round(peak_anon / 2**20, 2), "train_pairs": stats["splits"]["train"]["pairs"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000000,4000000,8000000", help="pairs, comma-separated")
    parser.add_argument("--old-tree", type=Path, help="a checkout of an older commit to compare with")
    parser.add_argument("--old-sizes", default="1000000,2000000", help="sizes for the old tree")
    parser.add_argument("--work", type=Path, default=Path("/tmp/prepare-bench"), help="corpora and caches")
    parser.add_argument("--vocab-size", type=int, default=8000)
    args = parser.parse_args()
    data_dir = Path(os.environ.get("MINITRANS_DATA", "data/raw"))
    pairs = real_pairs(data_dir)
    runs = [("new", ROOT, int(n)) for n in args.sizes.split(",")]
    if args.old_tree:
        runs += [("old", args.old_tree, int(n)) for n in args.old_sizes.split(",")]
    print("| code | pairs | minutes | peak RSS (GiB) | peak anon (GiB) | training pairs kept |")
    print("|---|---:|---:|---:|---:|---:|", flush=True)
    for name, tree, n in sorted(runs, key=lambda r: (r[2], r[0])):
        corpus = write_corpus(args.work / f"corpus-{n}", n, pairs)
        r = run_prepare(tree, corpus, args.work / f"cache-{name}-{n}", args.vocab_size)
        if "error" in r:
            print(f"| {name} | {n:,} | failed after {r['seconds']} s: {r['error'].splitlines()[-1]} |||", flush=True)
            continue
        print(f"| {name} | {n:,} | {r['seconds'] / 60:.1f} | {r['peak_rss_gib']} | {r['peak_anon_gib']} | "
              f"{r['train_pairs']:,} |", flush=True)


if __name__ == "__main__":
    main()
