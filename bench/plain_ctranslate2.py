"""A plain CTranslate2 caller against minitrans, on the same export (issue #27, item 0).

    MINITRANS_DATA=../shared/data python bench/plain_ctranslate2.py --checkpoint runs/quickstart/checkpoints/best.ckpt

Exports the checkpoint (float32) to a temporary folder, then translates Multi30k
test_2016_flickr greedily twice: as someone who knows only CTranslate2 and SentencePiece would
(``translate_batch(sp.encode(text, out_type=str), beam_size=1)``, nothing appended by hand), and
with ``minitrans`` (``Translator.translate(..., beam_size=1, split=False)``). Prints how many
outputs are identical and both BLEU scores.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    from minitrans.text import languages
    from minitrans.engines.registry import load_metadata

    if languages.of(load_metadata(args.checkpoint)) != ("en", "fr"):
        raise SystemExit(f"{args.checkpoint} is not an English→French model; this benchmark reads English sources.")
    import ctranslate2
    import sentencepiece as spm

    from minitrans import Translator
    from minitrans.engines.ctranslate2_export import export_ctranslate2
    from minitrans.data.heldout import load_eval_data
    from minitrans.metrics import score

    sources, refs = load_eval_data("multi30k", "test_2016_flickr", None, None)
    with tempfile.TemporaryDirectory() as tmp:
        folder = export_ctranslate2(args.checkpoint, Path(tmp) / "ct2")
        sp = spm.SentencePieceProcessor(model_file=str(folder / "sentencepiece.model"))
        plain = ctranslate2.Translator(str(folder), intra_threads=args.threads)
        theirs = [sp.decode(r.hypotheses[0])
                  for r in plain.translate_batch(sp.encode(sources, out_type=str), beam_size=1)]
    ours = Translator.from_checkpoint(args.checkpoint).translate(sources, beam_size=1, split=False)
    same = sum(a == b for a, b in zip(theirs, ours))
    print(f"{len(sources)} sentences of test_2016_flickr, greedy: {same} identical; "
          f"BLEU plain CTranslate2 {score(theirs, refs)['bleu']:.2f}, minitrans {score(ours, refs)['bleu']:.2f}")


if __name__ == "__main__":
    main()
