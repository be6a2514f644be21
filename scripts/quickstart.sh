#!/usr/bin/env bash
# The whole main job in one command, on a fresh machine: install, prepare Tatoeba + Multi30k as
# one mixture, train the general `quickstart` model (10 minutes on 2 CPU cores), evaluate it on
# both test sets (Tatoeba test, Multi30k test_2016_flickr), translate the showcase sentences and
# draw the learning curve.
#
#   MINITRANS_DATA=../shared/data bash scripts/quickstart.sh
#
# Offline machines need the corpora under $MINITRANS_DATA (see data/README.md); online,
# `minitrans download --dataset multi30k --to data/raw` (and `--dataset tatoeba`) fetch them.
set -euo pipefail
# A relative MINITRANS_DATA is where the user stands, not the repository: made absolute before the cd.
if [ -n "${MINITRANS_DATA:-}" ] && [ "${MINITRANS_DATA#/}" = "$MINITRANS_DATA" ]; then
  MINITRANS_DATA="$PWD/$MINITRANS_DATA"
fi
cd "$(dirname "$0")/.."
export MINITRANS_DATA="${MINITRANS_DATA:-$(cd .. && pwd)/shared/data}"
RUN=runs/quickstart
if [ -n "${QUICKSTART_DRY_RUN:-}" ]; then echo "MINITRANS_DATA=$MINITRANS_DATA"; exit 0; fi   # tests

[ -d .venv ] || python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q torch==2.13.0            # the CPU wheel first
python -m pip install -q -e ".[dev]"

if [ ! -f "$MINITRANS_DATA/multi30k/train.en" ] || [ ! -f "$MINITRANS_DATA/tatoeba-fra-eng/fra.txt" ]; then
  echo "Corpora not found under MINITRANS_DATA=$MINITRANS_DATA: downloading them into data/raw"
  minitrans download --dataset multi30k --to data/raw
  minitrans download --dataset tatoeba --to data/raw
  export MINITRANS_DATA=data/raw
fi

minitrans prepare --config configs/quickstart.yaml
if compgen -G "$RUN/checkpoints/*.ckpt" >/dev/null; then   # a new run never mixes with the last one
  OLD="$RUN.$(date +%Y%m%d-%H%M%S)"
  echo "Moving the previous quickstart run to $OLD"
  mv "$RUN" "$OLD"
fi
minitrans train --config configs/quickstart.yaml
# No --dataset: a mixture checkpoint is scored on the test split of each of its corpora.
minitrans evaluate -m $RUN/checkpoints/best.ckpt --split test -o $RUN/eval
minitrans translate -m $RUN/checkpoints/best.ckpt --input scripts/showcase.en --output $RUN/showcase.fr
paste -d '\n' scripts/showcase.en $RUN/showcase.fr | sed 'n;s/^/  → /'
python scripts/judge_showcase.py $RUN/showcase.fr | tail -1 || true   # counted by the verdicts on record
python scripts/plot_curves.py "$(ls -d $RUN/logs/version_* | sort -V | tail -1)/metrics.csv" \
  --title "quickstart: validation BLEU per corpus" -o $RUN/learning-curve.png
