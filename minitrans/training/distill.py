"""``minitrans distill``: sequence-level distillation / self-training data. A teacher translates
in-domain English, and the student trains on the real pairs plus these synthetic ones.

    MINITRANS_DATA=../shared/data minitrans distill \\
        -m runs/multi30k/checkpoints/best.ckpt [-m runs/multi30k-seed2/checkpoints/best.ckpt] \\
        --monolingual ../shared/data/multi30k-captions-en/train.{1,2,3,4,5}.en -o runs/distill/data
    MINITRANS_DATA=../shared/data minitrans train --config configs/distill.yaml

Stages, each resumable from its outputs (a rerun skips what is complete):

1. ``synthetic.en`` / ``synthetic.fr``: the English lines (cleaned, de-duplicated, empty lines
   dropped) and the teacher's translations (beam search; several ``-m/--model`` teachers
   are decoded as an ensemble). Translation goes in chunks appended to
   ``synthetic.fr.partial``; a killed run continues after the last complete chunk, and the
   file takes its final name only when every line is translated.
2. ``train.en`` / ``train.fr``: Multi30k's real training pairs, then the synthetic ones;
   ``valid``, ``test`` (test_2016_flickr), ``test_2017_flickr`` and ``test_2017_mscoco``:
   Multi30k's official evaluation splits, copied unchanged. The folder is an ``aligned``
   corpus (``configs/distill.yaml`` trains on it).

The monolingual captions describe the *training* images only (no validation or test image),
so no evaluation sentence can enter training through them; ``minitrans prepare`` reports any
pair it drops all the same.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

from minitrans.text.cleaning import clean
from minitrans.data.corpus import resolve_data_dir
from minitrans.data.sources import Multi30k
from minitrans.errors import UsageError
from minitrans.text.textio import atomic_output, read_lines, write_text_atomic

log = logging.getLogger("minitrans.training.distill")


def monolingual_lines(paths: list[str]) -> list[str]:
    """Cleaned, non-empty, de-duplicated English lines of ``paths``, in first-seen order."""
    seen: dict[str, None] = {}
    for path in paths:
        for line in read_lines(path, "Monolingual file"):
            text = clean(line)
            if text:
                seen.setdefault(text, None)
    if not seen:
        raise UsageError(f"--monolingual {' '.join(paths)}: no non-empty line to translate.")
    return list(seen)


def translate_resumable(sources: list[str], out: Path, teachers: list[str], beam: int, alpha: float,
                        chunk: int, precision: str = "auto") -> None:
    """Translate ``sources`` into ``out`` line by line, resuming after the last complete chunk
    (``precision``: :mod:`minitrans.precision`)."""
    if out.is_file() and len(read_lines(out)) == len(sources):
        log.info("%s is complete (%d lines): skipping translation", out, len(sources))
        return
    from minitrans.translate import Translator

    partial = out.with_name(out.name + ".partial")
    raw = partial.read_bytes() if partial.is_file() else b""
    complete = raw[: raw.rfind(b"\n") + 1]  # a kill can leave a torn last line: it is redone
    done = complete.decode("utf-8").split("\n")[:-1]
    if len(done) > len(sources):
        raise UsageError(f"{partial} has {len(done)} lines but there are {len(sources)} sources: it belongs to "
                         "other inputs. Delete it and run again.")
    if done:
        log.info("resuming after %d translated lines (%s)", len(done), partial)
    translator = Translator.from_checkpoints(teachers, engine="auto", precision=precision)
    log.info("%s", translator.describe())
    if translator.languages != ("en", "fr"):
        raise UsageError(f"-m {teachers[0]} translates {'-'.join(translator.languages)}; distill makes "
                         "English→French data from English text, so the teacher must be an English→French model.")
    started = time.perf_counter()
    with open(partial, "ab") as f:
        f.truncate(len(complete))
        for start in range(len(done), len(sources), chunk):
            batch = sources[start:start + chunk]
            f.write("".join(t + "\n" for t in translator.translate(batch, beam_size=beam, alpha=alpha, split=False)).encode())
            f.flush()
            os.fsync(f.fileno())
            finished = start + len(batch)
            rate = (finished - len(done)) / max(time.perf_counter() - started, 1e-9)
            log.info("translated %d / %d lines (%.1f lines/s, %.0f min left)", finished, len(sources), rate,
                     (len(sources) - finished) / max(rate, 1e-9) / 60)
    os.replace(partial, out)


def build_corpus(out_dir: Path, data_dir: str | None, synthetic_en: list[str], synthetic_fr: list[str]) -> None:
    """Write the aligned corpus: real + synthetic training pairs, Multi30k's evaluation splits."""
    paths = Multi30k.pair_paths(resolve_data_dir(data_dir))
    train_en, train_fr = paths.pop("train")
    real_en = read_lines(train_en, "Multi30k training file")
    real_fr = read_lines(train_fr, "Multi30k training file")
    write_text_atomic(out_dir / "train.en", real_en + synthetic_en)
    write_text_atomic(out_dir / "train.fr", real_fr + synthetic_fr)
    for split, pair in paths.items():
        for lang, source in zip(("en", "fr"), pair):
            with atomic_output(out_dir / f"{split}.{lang}", "wb") as target, open(source, "rb") as f:
                shutil.copyfileobj(f, target)
    log.info("wrote %s: %d real + %d synthetic training pairs", out_dir, len(real_en), len(synthetic_en))


def distill(teachers: list[str], monolingual: list[str], out: str | os.PathLike = "runs/distill/data",
            data_dir: str | None = None, beam: int = 5, alpha: float = 1.0, chunk: int = 2000,
            limit: int | None = None, precision: str = "auto") -> Path:
    """Run both stages (see the module docstring) into ``out``; returns it. A rerun resumes."""
    if chunk < 1:
        raise UsageError(f"--chunk must be at least 1, got {chunk}.")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sources = monolingual_lines(monolingual)[:limit]
    if not (out / "synthetic.en").is_file() or read_lines(out / "synthetic.en") != sources:
        if (out / "synthetic.fr.partial").is_file() or (out / "synthetic.fr").is_file():
            raise UsageError(f"{out} holds translations of other English lines; choose another -o/--output or "
                             "delete its synthetic.* files.")
        write_text_atomic(out / "synthetic.en", sources)
    translate_resumable(sources, out / "synthetic.fr", teachers, beam, alpha, chunk, precision)
    build_corpus(out, data_dir, sources, read_lines(out / "synthetic.fr"))
    return out
