"""Adapt a trained model to a user's own texts: ``minitrans adapt`` and :func:`adapt`.

A new, short run that starts from a checkpoint's weights and SentencePiece model and trains on
the user's pairs (a TMX, CSV/TSV or aligned files: :mod:`minitrans.data.memory`) for a time
budget, then says what it gained and what it forgot:

1. **The user's pairs, split without leaks**: a held-out part for the report (a tenth, at most
   :data:`HELD_OUT_MAX` pairs, or the ``valid`` file the user gives) and a small validation part
   that picks the best checkpoint (so the report is never scored on the set that chose the
   model), both grouped as :func:`~minitrans.data.corpus.grouped_split` groups them: no
   sentence of either is trained on. They are written, private, into the run folder.
2. **Replay**: the parent's own training corpora (read from its recorded data settings, with its
   split settings, so its test sentences stay out) are mixed in at ``replay`` of the draws, when
   they are on this machine; that is what keeps forgetting small (docs/results.md, "Adapting a
   model"). When they are not, one line says so and the run adapts without them.
3. **The run**: the budget schedule with a fine-tuning peak learning rate, no dropout,
   validation by the clock on the user's validation part only deciding which checkpoint is best.
4. **The checkpoint**: the best one, written to ``output`` with its provenance (the parent's and
   the data files' names and sha256s, pair counts, the budget, the report; never a path of this
   machine), so ``translate``, ``serve``, ``evaluate`` and every export take it as they take any.
5. **The report** (:func:`report`): BLEU and chrF before and after on the held-out part, on the
   parent's test sets (the forgetting check) and on the general-domain dev sets when they are
   on the machine; three example sentences; the vocabulary's fit to the user's text.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minitrans.errors import CheckpointError, DataError, UsageError

log = logging.getLogger("minitrans")

#: The fewest pairs an adaptation accepts: below it the held-out part says nothing.
MIN_PAIRS = 100
#: The held-out part for the report: a tenth of the user's English sentences, at most this many.
HELD_OUT_SHARE, HELD_OUT_MAX = 0.1, 500
#: The validation part that picks the best checkpoint: a twentieth, at most this many.
VALID_SHARE, VALID_MAX = 0.05, 200
#: Defaults chosen by measurement (docs/results.md, "Adapting a model"): the share of the
#: draws that replays the parent's corpora, the fine-tuning peak learning rate, its warm-up.
DEFAULT_REPLAY = 0.75
DEFAULT_PEAK_LR = 2e-3
DEFAULT_WARMUP = 50
DEFAULT_ANCHOR = 0.0
#: The general-domain dev sets reported when they are on the machine (under the data folder).
GENERAL_SETS = {"flores200.dev": "general-dev/flores200.dev", "newstest2013": "general-dev/newstest2013"}
YOURS = "yours"  # the user's corpus, by name, in the run's mixture and its metric names
#: The report decodes greedily, as validation does: the same settings before and after, and
#: ~7,000 sentences twice in under a minute on 2 cores (``--beam 5`` for translate's figures).
REPORT_BEAM = 1


@dataclass
class Plan:
    """What an adaptation will do, decided before any training: checked inputs, the split
    written to the run folder, the settings of the run."""

    parent: Path
    output: Path
    run_dir: Path
    minutes: float
    direction: str
    files: dict[str, Path]  # train / valid / test TSVs of the user's pairs
    counts: dict[str, int]
    provenance: dict[str, Any]
    data: dict[str, Any]  # TranslationDataModule settings
    model: dict[str, Any]  # TranslationModule settings
    replay_note: str = ""


def plan(parent: str | os.PathLike, data: list[str | os.PathLike], output: str | os.PathLike,
         minutes: float = 10.0, valid: str | os.PathLike | None = None, replay: float = DEFAULT_REPLAY,
         peak_lr: float = DEFAULT_PEAK_LR, seed: int = 1, data_dir: str | None = None, force: bool = False,
         cache_dir: str = "data/cache", anchor: float = DEFAULT_ANCHOR) -> Plan:
    """Check everything, read and split the user's pairs into ``OUTPUT_STEM.run/``, and decide
    the run's settings. Every mistake is one line here, before any training."""
    from minitrans.checkpoint import load_checkpoint, metadata, stored_config
    from minitrans.data.corpus import data_dir_for, grouped_split
    from minitrans.data.memory import read_pairs
    from minitrans.text import languages
    from minitrans.text.textio import file_sha256

    parent, output = Path(parent), Path(output)
    if not isinstance(minutes, (int, float)) or not math.isfinite(minutes) or minutes <= 0:
        raise UsageError(f"--minutes must be a positive number of minutes, got {minutes!r}.")
    if not isinstance(anchor, (int, float)) or not math.isfinite(anchor) or anchor < 0:
        raise UsageError(f"--anchor is the pull toward the parent's weights, a number ≥ 0 (0: off), got {anchor!r}.")
    if not 0.0 <= replay < 1.0:
        raise UsageError(f"--replay is the share of draws from the parent's corpora, in [0, 1), got {replay!r}.")
    if not data:
        raise UsageError("adapt needs at least one --data FILE (a TMX, CSV/TSV, or NAME.en with NAME.fr).")
    if parent.is_dir() or parent.suffix != ".ckpt":
        raise UsageError(f"-m {parent}: adapt starts from a minitrans .ckpt (an exported folder holds no "
                         "training weights); give the checkpoint it was exported from.")
    checkpoint = load_checkpoint(parent)  # a CheckpointError naming the file when it is not minitrans's
    meta = metadata(checkpoint)
    if output.suffix != ".ckpt":
        raise UsageError(f"-o {output}: name the adapted checkpoint NAME.ckpt.")
    if output.exists() and not force:
        raise UsageError(f"-o {output} already exists; pass --force to replace it, or choose a new name.")
    if output.resolve() == parent.resolve():
        raise UsageError(f"-o {output} is the parent checkpoint; write the adapted model to a new file.")
    source_lang, target_lang = languages.of(meta)
    run_dir = output.with_name(output.stem + ".run")

    pairs, files_seen = [], []
    for path in data:
        got = read_pairs(path, source_lang)
        pairs += got
        files_seen.append({"file": Path(path).name, "sha256": file_sha256(path), "pairs": len(got)})
    pairs = [(_one_line(en), _one_line(fr)) for en, fr in pairs]
    pairs = [(en, fr) for en, fr in pairs if en and fr]
    n_en = len({en for en, _ in pairs})
    if n_en < MIN_PAIRS:
        raise DataError(f"{', '.join(str(p) for p in data)}: {n_en} distinct English sentences with a French "
                        f"translation; adapt needs at least {MIN_PAIRS} (a held-out part is scored, and a "
                        "validation part picks the checkpoint). Add more pairs.")
    held_out_given = valid is not None
    if held_out_given:
        test = [(_one_line(en), _one_line(fr)) for en, fr in read_pairs(valid, source_lang)]
        test = [(en, fr) for en, fr in test if en and fr]
        held = {en for en, _ in test} | {fr for _, fr in test}
        pairs = [(en, fr) for en, fr in pairs if en not in held and fr not in held]  # never train on it
        train, val, _ = grouped_split(pairs, min(VALID_MAX, max(1, round(n_en * VALID_SHARE))), 0, seed)
        files_seen.append({"file": Path(valid).name, "sha256": file_sha256(valid), "pairs": len(test),
                           "held_out": True})
    else:
        train, val, test = grouped_split(pairs, min(VALID_MAX, max(1, round(n_en * VALID_SHARE))),
                                         min(HELD_OUT_MAX, max(1, round(n_en * HELD_OUT_SHARE))), seed)
    if not train or not val or not test:
        raise DataError(f"the pairs could not be split into training ({len(train)}), validation ({len(val)}) and "
                        f"held-out ({len(test)}) parts: too many repeat one sentence. Add more distinct pairs.")

    _prepare_run_dir(run_dir, force)
    files = {}
    for split, rows in (("train", train), ("valid", val), ("test", test)):
        files[split] = run_dir / "data" / f"{split}.tsv"
        _write_private(files[split], [f"{en}\t{fr}" for en, fr in rows])

    config = stored_config(checkpoint)
    recorded = meta.get("data", {})
    corpora = [{"name": YOURS, "dataset": "tsv", "files": {k: str(v) for k, v in files.items()},
                "weight": 1.0 - replay, "valid_size": len(val), "test_size": len(test)}]
    replay_note, replayed = _replay(recorded, data_dir_for(data_dir, recorded.get("data_dir")), replay)
    corpora += replayed
    if not replayed:
        corpora[0]["weight"] = 1.0
    data_settings = {
        "dataset": "mixture", "corpora": corpora, "val_select": YOURS, "tokenizer": str(parent),
        "vocab_size": config.vocab_size, "max_tokens": int(recorded.get("max_tokens", 2500)),
        "val_max_sentences": VALID_MAX, "seed": int(recorded.get("seed", seed)), "cache_dir": cache_dir,
        "data_dir": data_dir_for(data_dir, recorded.get("data_dir")), "direction": f"{source_lang}-{target_lang}",
        "max_len": int(recorded.get("max_len", 128)),
    }
    model_settings = {"config": {**config.to_dict(), "dropout": 0.0}, "lr_schedule": "budget", "peak_lr": peak_lr,
                      "warmup_steps": DEFAULT_WARMUP, "cooldown": 1.0, "label_smoothing": 0.1,
                      "init_from": str(parent), "anchor": anchor}
    provenance = {"parent": {"checkpoint": parent.name, "sha256": file_sha256(parent)}, "data": files_seen,
                  "pairs": {"train": len(train), "valid": len(val), "held_out": len(test),
                            "held_out_given": held_out_given},
                  "minutes": minutes, "replay": replay if replayed else 0.0,
                  "replayed": [c["name"] for c in replayed], "peak_lr": peak_lr, "anchor": anchor, "seed": seed}
    return Plan(parent, output, run_dir, float(minutes), f"{source_lang}-{target_lang}", files,
                {"train": len(train), "valid": len(val), "held_out": len(test)}, provenance, data_settings,
                model_settings, replay_note)


def _replay(recorded: dict, data_dir: str | None, replay: float) -> tuple[str, list[dict]]:
    """The parent's training corpora as mixture components at ``replay`` of the draws (their
    split settings kept, so their test sentences stay out), or why there are none."""
    from minitrans.data.sources import source_files

    if replay <= 0:  # asked for: nothing to say
        return "", []
    if recorded.get("dataset") == "mixture":
        parts = [dict(c) for c in recorded.get("corpora") or []]
    elif recorded.get("dataset"):
        parts = [{"name": recorded["dataset"], "dataset": recorded["dataset"], "files": recorded.get("files"),
                  "hub_id": recorded.get("hub_id"), "weight": 1.0,
                  "valid_size": recorded.get("valid_size", 1000), "test_size": recorded.get("test_size", 2000)}]
    else:
        parts = []
    found, missing = [], []
    for c in parts:
        try:
            paths = source_files(c["dataset"], data_dir, c.get("files"), c.get("hub_id"))
        except DataError:
            paths = [Path("?")]
        (found if paths and all(Path(p).is_file() for p in paths) else missing).append(c)
    if missing or not found:
        names = ", ".join(c["name"] for c in missing) or "none recorded"
        return (f"the parent's corpora ({names}) are not on this machine (set MINITRANS_DATA or --data-dir): "
                "adapting without replay, so it will forget more of what the parent knew."), []
    total = sum(float(c.get("weight") or 1.0) for c in found)
    for c in found:
        c["weight"] = replay * float(c.get("weight") or 1.0) / total
    return "", found


def _prepare_run_dir(run_dir: Path, force: bool) -> None:
    """The run's own folder beside the output, private (it holds the user's pairs); a previous
    adaptation's folder is replaced only with ``force``."""
    if run_dir.exists():
        if not force:
            raise UsageError(f"{run_dir} (the run folder of this output) already exists; pass --force to replace "
                             "it, or choose a new output name.")
        if not (run_dir / "data" / "train.tsv").is_file():
            raise UsageError(f"{run_dir} exists and is not an adaptation's run folder; move it away.")
        shutil.rmtree(run_dir)
    (run_dir / "data").mkdir(parents=True, mode=0o700)
    os.chmod(run_dir, 0o700)


def _write_private(path: Path, lines: list[str]) -> None:
    from minitrans.text.textio import write_text_atomic

    write_text_atomic(path, lines)
    os.chmod(path, 0o600)


def _one_line(text: str) -> str:
    """A segment on one TSV line: tabs and line breaks become spaces (cleaning does the rest)."""
    return " ".join(text.split())


# -- the run --------------------------------------------------------------------------------------


def train(p: Plan, progress: bool = True) -> Path:
    """Run the adaptation; returns the best checkpoint (by BLEU on the user's validation part)."""
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger

    from minitrans.data.datamodule import TranslationDataModule
    from minitrans.data.mixture import CorpusSpec
    from minitrans.model.config import ModelConfig
    from minitrans.precision import training_precision
    from minitrans.training.budget import ValidateByTheClock
    from minitrans.training.module import AtomicCheckpointIO, TranslationModule

    L.seed_everything(p.provenance["seed"], verbose=False)
    data = {**p.data, "corpora": [CorpusSpec(**c) for c in p.data["corpora"]]}
    datamodule = TranslationDataModule(**data)
    model = TranslationModule(**{**p.model, "config": ModelConfig.from_dict(p.model["config"])})
    best = ModelCheckpoint(dirpath=p.run_dir / "checkpoints", monitor="val_bleu", mode="max", save_top_k=1,
                           filename="step{step}-bleu{val_bleu:.2f}", auto_insert_metric_name=False)
    precision, why = training_precision("bf16-mixed", "cpu")
    if why:
        log.info(why)
    seconds = p.minutes * 60
    trainer = L.Trainer(
        accelerator="cpu", precision=precision, max_time={"seconds": seconds}, max_epochs=10_000,
        callbacks=[best, ValidateByTheClock(per_budget=5)], plugins=[AtomicCheckpointIO()],
        logger=CSVLogger(str(p.run_dir), name="logs"), default_root_dir=str(p.run_dir), gradient_clip_val=1.0,
        check_val_every_n_epoch=None, val_check_interval=10 ** 9, num_sanity_val_steps=0,
        use_distributed_sampler=False, enable_progress_bar=progress, enable_model_summary=False,
    )
    trainer.fit(model, datamodule)
    if not best.best_model_path:
        raise DataError(f"the adaptation wrote no checkpoint in {p.minutes:g} minutes (no validation ran): "
                        "give it more minutes.")
    return Path(best.best_model_path)


def adapt(parent: str | os.PathLike, data: list[str | os.PathLike] | str | os.PathLike,
          output: str | os.PathLike, minutes: float = 10.0, valid: str | os.PathLike | None = None,
          replay: float = DEFAULT_REPLAY, peak_lr: float = DEFAULT_PEAK_LR, seed: int = 1,
          data_dir: str | None = None, force: bool = False, with_report: bool = True,
          beam_size: int | None = None, anchor: float = DEFAULT_ANCHOR) -> dict[str, Any]:
    """Adapt checkpoint ``parent`` to the pairs of ``data`` (files) for ``minutes`` and write
    the adapted checkpoint to ``output`` (see the module docstring). Returns the report (also
    written as ``OUTPUT_STEM.report.json`` and recorded in the checkpoint)::

        from minitrans import adapt
        report = adapt("runs/quickstart/checkpoints/best.ckpt", "memory.tmx", "clinic.ckpt", minutes=10)
        print(report["table"])
    """
    from minitrans.checkpoint import with_metadata
    from minitrans.text.textio import write_text_atomic

    started = time.perf_counter()
    data = [data] if isinstance(data, (str, os.PathLike)) else list(data)
    p = plan(parent, data, output, minutes, valid, replay, peak_lr, seed, data_dir, force, anchor=anchor)
    fit = vocabulary(p)
    for note in (p.replay_note, *vocabulary_notes(fit)):
        if note:
            log.warning(note)
    log.info("adapting %s on %d pairs (%d validation, %d held out) for %g minutes%s", p.parent.name,
             p.counts["train"], p.counts["valid"], p.counts["held_out"], p.minutes,
             f", replaying {', '.join(p.provenance['replayed'])} at {p.provenance['replay']:.0%} of the draws"
             if p.provenance["replayed"] else "")
    best = train(p)
    adapted = {**p.provenance, "vocabulary": fit}
    tmp = p.run_dir / "adapted.ckpt"  # the report reads it; OUT appears only once the report is in it
    with_metadata(best, tmp, adapted=adapted)
    result = report(p.parent, tmp, p, beam_size) if with_report else {"table": ""}
    result["seconds"] = round(time.perf_counter() - started, 1)
    with_metadata(tmp, p.output, adapted={**adapted, "report": {k: v for k, v in result.items() if k != "table"}})
    tmp.unlink()
    write_text_atomic(p.output.with_name(p.output.stem + ".report.json"), [json.dumps(result, indent=2,
                                                                                      ensure_ascii=False)])
    return result


# -- the vocabulary -------------------------------------------------------------------------------


def vocabulary(p: Plan) -> dict[str, Any]:
    """How the parent's SentencePiece model cuts the user's text, beside its own: pieces per
    word and the share of pieces that are single bytes or unknown, on each side."""
    from minitrans.checkpoint import load_checkpoint, stored_tokenizer
    from minitrans.data.corpus import read_tsv
    from minitrans.text.vocab import UNK_ID

    tokenizer = stored_tokenizer(load_checkpoint(p.parent))
    pairs = read_tsv(p.files["train"])[:5000]
    out = {}
    for side, texts in (("en", [en for en, _ in pairs]), ("fr", [fr for _, fr in pairs])):
        words = sum(len(t.split()) for t in texts)
        ids = [i for seq in tokenizer.encode(texts) for i in seq]
        rare = sum(1 for i in ids if i == UNK_ID or tokenizer.sp.is_byte(i))
        out[side] = {"pieces_per_word": round(len(ids) / max(words, 1), 2),
                     "chars_per_word": round(sum(len(t) for t in texts) / max(words, 1), 2),
                     "byte_or_unknown_share": round(rare / max(len(ids), 1), 4)}
    return out


def vocabulary_notes(fit: dict[str, Any]) -> list[str]:
    """One line per side when the user's text is far outside the parent's vocabulary
    (:func:`vocabulary`'s figures)."""
    notes = []
    for side, stats in fit.items():
        if stats["pieces_per_word"] > 2.0 or stats["byte_or_unknown_share"] > 0.01:
            notes.append(f"your {side} text is far from the parent's vocabulary: {stats['pieces_per_word']} pieces "
                         f"per word ({stats['byte_or_unknown_share']:.1%} single bytes or unknown); the adapted "
                         "model keeps the parent's SentencePiece model, so these words cost more steps to learn "
                         "and more time to translate.")
    return notes


# -- the report -----------------------------------------------------------------------------------


def held_out_sets(p: Plan) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """``(name, what, sources, references)`` of every set the report scores: the user's
    held-out part, the parent's test sets (forgetting), the general-domain dev sets."""
    from minitrans.checkpoint import checkpoint_metadata
    from minitrans.data.corpus import resolve_data_dir
    from minitrans.data.heldout import eval_sets, load_eval_data
    from minitrans.text import languages

    meta = checkpoint_metadata(p.parent)
    source_lang = languages.of(meta)[0]
    # the user's held-out part as evaluate reads it: one row per source sentence, all its references
    files = {split: str(path) for split, path in p.files.items()}
    sources, references = load_eval_data("tsv", "test", None, None, files=files, source_lang=source_lang)
    sets = [(YOURS, "your held-out pairs", sources, references)]
    recorded = meta.get("data", {})
    data_dir = p.data["data_dir"]
    single = None if recorded.get("dataset") == "mixture" else recorded.get("dataset")
    for spec in eval_sets(recorded, single) if recorded.get("dataset") else []:
        try:
            sources, references = load_eval_data(spec["dataset"], "test", None, None, data_dir, spec["split_settings"],
                                                  spec["files"], spec["hub_id"], source_lang)
        except DataError as err:
            log.warning("the forgetting check skips %s: %s", spec["name"], err)
            continue
        sets.append((f"{spec['name']}.test", "the parent's test set", sources, references))
    root = resolve_data_dir(data_dir)
    target_lang = "fr" if source_lang == "en" else "en"
    for name, prefix in GENERAL_SETS.items():
        src, ref = root / f"{prefix}.{source_lang}", root / f"{prefix}.{target_lang}"
        if src.is_file() and ref.is_file():
            sets.append((name, "general domain", *load_eval_data(None, "test", str(src), [str(ref)])))
    return sets


def report(parent: Path, adapted: Path, p: Plan, beam_size: int | None = None) -> dict[str, Any]:
    """BLEU and chrF of the parent and the adapted model on every set of :func:`held_out_sets`,
    the change, three example sentences, and the table a user reads."""
    from minitrans.metrics import score
    from minitrans.translate import Translator

    beam = beam_size or REPORT_BEAM
    sets = held_out_sets(p)
    rows, outputs = [], {}
    for which, path in (("before", parent), ("after", adapted)):
        translator = Translator.load(path)
        for name, what, sources, refs in sets:
            hyps = [r.text for r in translator.translate_detailed(sources, beam_size=beam, split=False)]
            outputs[(which, name)] = hyps
            s = score(hyps, refs)
            rows.append({"set": name, "what": what, "sentences": len(sources), "model": which,
                         "bleu": s["bleu"], "chrf": s["chrf"]})
    table = []
    for name, what, sources, _ in sets:
        before = next(r for r in rows if r["set"] == name and r["model"] == "before")
        after = next(r for r in rows if r["set"] == name and r["model"] == "after")
        table.append({"set": name, "what": what, "sentences": len(sources),
                      "bleu_before": before["bleu"], "bleu_after": after["bleu"],
                      "bleu_change": round(after["bleu"] - before["bleu"], 2),
                      "chrf_before": before["chrf"], "chrf_after": after["chrf"],
                      "chrf_change": round(after["chrf"] - before["chrf"], 2)})
    name, _, sources, refs = sets[0]
    examples = [{"source": s, "reference": r[0], "before": b, "after": a} for s, r, b, a in
                zip(sources, refs, outputs[("before", name)], outputs[("after", name)]) if a != b][:3]
    return {"parent": parent.name, "adapted": p.output.name, "beam": beam, "sets": table, "examples": examples,
            "table": format_table(table, examples)}


def format_table(rows: list[dict], examples: list[dict]) -> str:
    """The report as a user reads it: one row per set, then the examples."""
    lines = [f"{'set':<16} {'sentences':>9}  {'BLEU before':>11} {'after':>6} {'change':>7}  "
             f"{'chrF before':>11} {'after':>6} {'change':>7}"]
    for r in rows:
        lines.append(f"{r['set']:<16} {r['sentences']:>9,}  {r['bleu_before']:>11.2f} {r['bleu_after']:>6.2f} "
                     f"{r['bleu_change']:>+7.2f}  {r['chrf_before']:>11.2f} {r['chrf_after']:>6.2f} "
                     f"{r['chrf_change']:>+7.2f}   ({r['what']})")
    for e in examples:
        lines += ["", f"  source:    {e['source']}", f"  reference: {e['reference']}",
                  f"  before:    {e['before']}", f"  after:     {e['after']}"]
    return "\n".join(lines)
