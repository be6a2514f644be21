#!/usr/bin/env bash
# The whole main job in one command, on a fresh machine: install, prepare Multi30k, train the
# `tiny` config (10 minutes on 2 CPU cores), evaluate it on test_2016_flickr, translate examples.
#
#   MINITRANS_DATA=../shared/data bash scripts/quickstart.sh
#
# Offline machines need the corpora under $MINITRANS_DATA (see data/README.md); online,
# `minitrans download --dataset multi30k --to data/raw` fetches them.
set -euo pipefail
cd "$(dirname "$0")/.."
export MINITRANS_DATA="${MINITRANS_DATA:-../shared/data}"

[ -d .venv ] || python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q torch==2.13.0            # the CPU wheel first
python -m pip install -q -e ".[dev]"

if [ ! -f "$MINITRANS_DATA/multi30k/train.en" ]; then
  echo "Multi30k not found under MINITRANS_DATA=$MINITRANS_DATA: downloading it into data/raw"
  minitrans download --dataset multi30k --to data/raw
  export MINITRANS_DATA=data/raw
fi

minitrans prepare --config configs/tiny.yaml
minitrans train --config configs/tiny.yaml
minitrans evaluate --checkpoint runs/tiny/checkpoints/best.ckpt --dataset multi30k --split test_2016_flickr \
  --output-dir runs/tiny/eval
minitrans translate --checkpoint runs/tiny/checkpoints/best.ckpt \
  "I don't speak French." \
  "A man is riding a bicycle down the street." \
  "Two dogs are playing in the snow." \
  "A little girl in a pink dress is eating ice cream."
