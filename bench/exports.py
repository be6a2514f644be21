"""The Argos and Hugging Face exports of a checkpoint against minitrans itself (issue #27).

    MINITRANS_DATA=../shared/data python bench/exports.py --checkpoint runs/quickstart/checkpoints/best.ckpt

Exports the checkpoint with ``--format argos`` and ``--format hf`` to a temporary folder and
translates the held-out test set of its direction (Multi30k test_2016_flickr, 1,000 sentences;
French sources for a French→English checkpoint) four ways:

* minitrans greedy (``Translator.translate(..., beam_size=1, split=False)``) and beam 5;
* argostranslate in a fresh process (settings and packages in the temporary folder, network
  off), with ``ARGOS_BEAM_SIZE=1 ARGOS_COMPUTE_TYPE=float32``, then with argos's defaults;
* transformers: ``generate()`` with the export's generation config (greedy), batches of 32.

Prints, for each, sacreBLEU, the outputs identical to minitrans greedy, the outputs identical to
minitrans greedy without its relative length limit (``max_len_a`` 10, ``max_len_b`` 200: only
the model's positions bound the output, as in argos and transformers), and seconds; and the
largest teacher-forced logit difference between minitrans and transformers on 100 sentences.
Argos gets one sentence per call (its API translates one text), so its speed is not comparable.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARGOS = r"""
import json, socket, sys
def refuse(*args, **kwargs):
    raise OSError("the network is off")
socket.socket.connect = refuse
socket.create_connection = refuse
import argostranslate.package, argostranslate.translate
argostranslate.package.install_from_path(sys.argv[1])
source, target = sys.argv[2], sys.argv[3]
texts = json.load(open(sys.argv[4]))
print(json.dumps([argostranslate.translate.translate(t, source, target) for t in texts]))
"""


def run_argos(package: Path, texts: list[str], source: str, target: str, tmp: Path, **settings) -> list[str]:
    """argostranslate's translations of ``texts`` in a fresh process: it reads its settings at
    import, so they and its packages live in a new folder under ``tmp``; the network is off
    (a connection attempt raises). ``settings`` are ARGOS_* environment variables."""
    home = tmp / f"argos-{len(list(tmp.glob('argos-*')))}"
    home.mkdir()
    (home / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "XDG_CONFIG_HOME": str(home / "c"),
           "XDG_CACHE_HOME": str(home / "cache"), "ARGOS_PACKAGES_DIR": str(home / "packages"), **settings}
    done = subprocess.run([sys.executable, "-c", ARGOS, str(package), source, target, str(home / "texts.json")],
                          env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--limit", type=int, help="only the first N test sentences")
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from minitrans import Translator
    from minitrans.export.argos import export as export_argos
    from minitrans.checkpoint import load_for_inference
    from minitrans.data.heldout import load_eval_data
    from minitrans.export.hf import export as export_hf
    from minitrans.metrics import score
    from minitrans.text.vocab import BOS_ID, EOS_ID

    native = Translator.from_checkpoint(args.checkpoint)
    source, target = native.languages
    sources, refs = load_eval_data("multi30k", "test_2016_flickr", None, None, source_lang=source)
    sources, refs = sources[: args.limit], refs[: args.limit]
    rows = []
    unlimited = Translator.from_checkpoint(args.checkpoint)
    unlimited.max_len_a, unlimited.max_len_b = 10.0, 200
    open_ended = unlimited.translate(sources, beam_size=1, split=False)

    def report(name: str, hyps: list[str], seconds: float, greedy: list[str]) -> None:
        same = sum(a == b for a, b in zip(hyps, greedy))
        rows.append((name, score(hyps, refs)["bleu"], same, sum(a == b for a, b in zip(hyps, open_ended)), seconds))

    started = time.perf_counter()
    greedy = native.translate(sources, beam_size=1, split=False)
    report("minitrans greedy", greedy, time.perf_counter() - started, greedy)
    report("minitrans greedy, no relative length limit", open_ended, 0.0, greedy)
    started = time.perf_counter()
    report("minitrans beam 5", native.translate(sources, beam_size=5, split=False), time.perf_counter() - started,
           greedy)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        package = export_argos(args.checkpoint, tmp / f"translate-{source}_{target}.argosmodel")
        for name, settings in (("argos float32, beam 1", {"ARGOS_COMPUTE_TYPE": "float32", "ARGOS_BEAM_SIZE": "1"}),
                               ("argos defaults (auto = int8, beam 4)", {})):
            started = time.perf_counter()
            hyps = run_argos(package, sources, source, target, tmp, **settings)
            report(name, hyps, time.perf_counter() - started, greedy)
        folder = export_hf(args.checkpoint, tmp / "hf")
        hf, tok = AutoModelForSeq2SeqLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
        started = time.perf_counter()
        hyps = []
        with torch.no_grad():
            for i in range(0, len(sources), 32):
                batch = tok(sources[i:i + 32], return_tensors="pt", padding=True)
                hyps += tok.batch_decode(hf.generate(**batch), skip_special_tokens=True)
        report(f"transformers {type(hf).__name__} generate (greedy)", hyps, time.perf_counter() - started, greedy)
        model, tokenizer, _ = load_for_inference(args.checkpoint)
        worst = 0.0
        with torch.no_grad():
            for src, tgt in zip(tokenizer.encode(sources[:100]), tokenizer.encode(greedy[:100])):
                s, t = torch.tensor([src + [EOS_ID]]), torch.tensor([[BOS_ID] + tgt])
                worst = max(worst, (model(s, t) - hf(input_ids=s, decoder_input_ids=t).logits).abs().max().item())
    print(f"{args.checkpoint} ({source}→{target}), Multi30k test_2016_flickr, {len(sources)} sentences")
    print(f"{'system':<64} {'BLEU':>6} {'= greedy':>9} {'= no limit':>10} {'seconds':>8}")
    for name, bleu, same, same_open, seconds in rows:
        print(f"{name:<64} {bleu:6.2f} {same:>9} {same_open:>10} {seconds:8.1f}")
    print(f"largest teacher-forced logit difference, minitrans vs transformers (100 sentences): {worst:.2e}")


if __name__ == "__main__":
    main()
