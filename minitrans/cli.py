"""The ``minitrans`` command.

* ``train`` (= ``fit``), ``validate``, ``test``: Lightning's CLI over
  :class:`TranslationModule` and :class:`TranslationDataModule`, configured from YAML
  (``--config configs/multi30k.yaml``) plus dotted overrides (``--trainer.max_epochs 3``).
  Unknown keys and bad values fail at once, naming the key. ``--resume CKPT`` continues an
  interrupted run exactly.
* ``prepare``, ``translate``, ``evaluate``, ``average``, ``download``: plain commands.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import sys
import time
import warnings
from pathlib import Path

from minitrans._version import __version__
from minitrans import languages
from minitrans.errors import CheckpointError, MinitransError, UsageError
from minitrans.formats import FORMATS, format_for
from minitrans.progress import Progress
from minitrans.textio import (atomic_output, check_writable, check_writable_folder, decode_text, disk_full,
                              is_readable_file, iter_lines, read_lines, same_file, write_failed)

log = logging.getLogger("minitrans")
LIGHTNING_COMMANDS = ("train", "fit", "validate", "test")
#: The commands that decode: they run with minitrans.runtime's allocator setting unless
#: MINITRANS_MALLOC=default (training, only with MINITRANS_MALLOC=tuned).
DECODING_COMMANDS = ("translate", "evaluate", "calibrate", "serve", "distill")
#: Lines translated at once from a file or stdin: large enough for full decoding batches.
CHUNK_LINES = 1000
PRECISION_HELP = ("number format of decoding. auto (default): on CTranslate2 int8 (BLEU within 0.3 of fp32 on "
                  "the models measured, docs/speed.md); on the native engine bf16 on a CPU with AMX or "
                  "AVX-512-BF16 and on a GPU with bf16, fp32 elsewhere. fp32 (both engines give the same "
                  "translations); bf16 (native engine); int8. The stderr line, /v1/model and evaluate's report "
                  "say which was picked and why")
BF16_HELP = "the same as --precision bf16"
SHORTLIST_HELP = ("score only the checkpoint's vocabulary shortlist (written by `minitrans shortlist`): faster "
                  "beam search, but it cost the quickstart model 0.14-0.52 BLEU (docs/speed.md), so it is off "
                  "by default")


# -- Lightning ---------------------------------------------------------------------------
def _lightning_cli_class():
    from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
    from lightning.pytorch.cli import LightningCLI
    from lightning.pytorch.loggers import CSVLogger

    from minitrans.budget import ValidateByTheClock
    from minitrans.checkpoint import copy_atomic
    from minitrans.precision import training_precision
    from minitrans.training import AtomicCheckpointIO

    class MinitransCLI(LightningCLI):
        """LightningCLI with minitrans's links, checkpointing and loggers."""

        def parse_arguments(self, parser, args) -> None:
            self._raw_args = list(args or [])  # for model_size: which settings the user gave
            super().parse_arguments(parser, args)

        def init_parser(self, **kwargs):
            kwargs.setdefault("prog", "minitrans")  # not __main__.py: its usage line reads as the command typed
            parser = super().init_parser(**kwargs)
            parser.__class__ = _one_line_errors(type(parser))
            return parser

        def _add_subcommands(self, parser, **kwargs) -> None:
            super()._add_subcommands(parser, **kwargs)
            for name, sub in self._subcommand_parsers.items():  # usage and errors name the command typed
                sub.prog = f"minitrans {'train' if name == 'fit' else name}"

        def add_arguments_to_parser(self, parser) -> None:
            parser.link_arguments("data.vocab_size", "model.config.vocab_size", apply_on="parse")
            parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
            parser.set_defaults({
                "checkpoint.monitor": "val_bleu", "checkpoint.mode": "max", "checkpoint.save_top_k": 3,
                "checkpoint.save_last": True, "checkpoint.filename": "step{step}-bleu{val_bleu:.2f}",
                "checkpoint.auto_insert_metric_name": False,
            })
            # The last N validations' weights, for `minitrans average` (off unless save_top_k > 0).
            parser.add_lightning_class_args(ModelCheckpoint, "recent")
            parser.set_defaults({
                "recent.monitor": "step", "recent.mode": "max", "recent.save_top_k": 0,
                "recent.filename": "recent-step{step}", "recent.auto_insert_metric_name": False,
            })
            # Validations per budget in a bounded run (0: off, trainer.val_check_interval decides).
            parser.add_lightning_class_args(ValidateByTheClock, "validation")
            parser.add_lightning_class_args(EarlyStopping, "early_stopping")
            parser.add_argument("--model_size", default="fixed",
                                help="auto: the largest model of minitrans.sizing's table that makes enough steps "
                                     "in the budget on this machine (a few seconds' probe); fixed: model.config as "
                                     "given; or a candidate's name (xs, s, m, l, xl)")
            parser.set_defaults({"early_stopping.monitor": "val_bleu", "early_stopping.mode": "max",
                                 "early_stopping.patience": 10})
            if "weights_only" in {a.dest for a in parser._actions}:  # fit/validate/test
                parser.set_defaults({"weights_only": True})  # resuming never unpickles code

        def _parse_ckpt_path(self) -> None:
            """Lightning restores the model's hyperparameters from ``--resume CKPT`` over the
            user's: a changed setting would be ignored without a word. Refuse instead, naming
            each setting that differs (``init_from`` is ignored on resume, as documented)."""
            sub = self.config.get("subcommand")
            if sub == "fit":
                _size_model(self.config[sub], self._raw_args)
            # validate/test take the checkpoint's settings by design; only training resumes.
            before = _flat(self.config[sub]["model"]) if sub == "fit" and self.config[sub].get("model") else None
            super()._parse_ckpt_path()
            if before is None:
                return
            after = _flat(self.config[sub]["model"])
            differ = [k for k in sorted(set(before) | set(after))
                      if k != "init_from" and before.get(k) != after.get(k)]
            if differ:
                shown = ", ".join(f"model.{k} ({before.get(k)!r} given, {after.get(k)!r} in the checkpoint)"
                                  for k in differ[:4])
                more = f" and {len(differ) - 4} more" if len(differ) > 4 else ""
                raise UsageError(f"--resume {self.config[sub].get('ckpt_path')}: the run's model settings cannot change "
                                 f"when resuming, and these differ: {shown}{more}. Drop those overrides (or the "
                                 "changed config), or start a new run with model.init_from CKPT to fine-tune.")

        def _instantiate_trainer(self, config, callbacks):
            if config.get("logger") in (None, True):  # CSV always, TensorBoard when installed
                root = config.get("default_root_dir") or "runs"
                loggers = [CSVLogger(root, name="logs")]
                try:
                    from lightning.pytorch.loggers import TensorBoardLogger
                    import tensorboard  # noqa: F401

                    loggers.append(TensorBoardLogger(root, name="logs", version=loggers[0].version))
                except ImportError:
                    pass
                config["logger"] = loggers
            config["plugins"] = [*(config.get("plugins") or []), AtomicCheckpointIO()]
            chosen, why = training_precision(config.get("precision"), config.get("accelerator"))
            if why:  # a recipe's bf16-mixed on a CPU that would emulate bf16
                log.warning(why)
                config["precision"] = chosen
            return super()._instantiate_trainer(config, callbacks)

        def after_fit(self) -> None:
            callback = next((c for c in self.trainer.checkpoint_callbacks if c.monitor != "step"), None)
            if callback is not None and callback.best_model_path and self.trainer.is_global_zero:
                best = Path(callback.best_model_path)
                target = best.with_name("best.ckpt")
                copy_atomic(best, target)  # a kill mid-copy leaves the previous best.ckpt whole
                score = callback.best_model_score
                log.info("Best checkpoint (%s = %.2f): %s, copied to %s", callback.monitor,
                         float(score) if score is not None else float("nan"), best, target)

    return MinitransCLI, LearningRateMonitor


def _size_model(config, args: list[str]) -> None:
    """``model_size``: set ``model.config``'s dimensions to a candidate of :mod:`minitrans.sizing`
    (``auto``: the one this machine affords in the budget, by a probe of a few seconds), and
    record the choice as ``model.sizing``. Dimensions the user gave (on the command line, or in a
    config file that does not ask for ``model_size`` itself) win; a resumed run keeps its
    checkpoint's."""
    from minitrans import sizing
    from minitrans.checkpoint import load_checkpoint

    choice = config.get("model_size") or "fixed"
    if choice == "fixed":
        return
    given = _dimensions_given(args)
    if given:
        log.info("model_size %s: not applied, model.config.%s given", choice, given)
        return
    if config.get("ckpt_path"):  # resuming: the run keeps the shape it started with
        stored = load_checkpoint(config["ckpt_path"]).get("hyper_parameters", {})
        for key in sizing.DIMENSIONS:
            if key in stored.get("config", {}):
                config[f"model.config.{key}"] = stored["config"][key]
        config["model.sizing"] = stored.get("sizing")
        return
    budget = _seconds(config["trainer"].get("max_time"))
    if choice == "auto" and budget is None:
        log.info("model_size auto: the run has no trainer.max_time, so no budget to size the model for; "
                 "model.config as given")
        return
    if choice == "auto":
        dtype, device = _probe_settings(config)
        data = config["data"]
        seconds = sizing.probe(budget, data["vocab_size"], data["max_tokens"], dtype, device)
        chosen, why = sizing.choose(seconds, budget)
        record = {"chosen": chosen.name, "why": why, "seconds_per_step": {k: round(v, 4) for k, v in seconds.items()},
                  "budget_seconds": budget, "device": device, "dtype": str(dtype or torch_float32())}
    else:
        chosen = sizing.by_name(choice)
        record = {"chosen": chosen.name, "why": f"model_size {choice}"}
    for key, value in chosen.dims().items():
        config[f"model.config.{key}"] = value
    config["model.sizing"] = record
    dims = ", ".join(f"{k} {v}" for k, v in chosen.dims().items())
    log.warning("Model size %s (%s): %s", chosen.name, dims, record["why"])


def torch_float32():
    import torch

    return torch.float32


def _dimensions_given(args: list[str]) -> str | None:
    """The first model dimension the user set: on the command line, or in a config file that
    does not itself set ``model_size`` (a recipe that asks for sizing keeps its dimensions as
    the fallback)."""
    import yaml

    from minitrans.sizing import DIMENSIONS

    for i, arg in enumerate(args):
        key = arg.split("=", 1)[0]
        if key.startswith("--model.config.") and key.rsplit(".", 1)[-1] in DIMENSIONS:
            return key.rsplit(".", 1)[-1]
        if key in ("--config", "-c"):
            path = arg.split("=", 1)[1] if "=" in arg else (args[i + 1] if i + 1 < len(args) else None)
            try:
                doc = yaml.safe_load(Path(path).read_text()) if path else None
            except (OSError, yaml.YAMLError):
                continue  # the parser has said what is wrong with it
            if isinstance(doc, dict) and "model_size" not in doc:
                dims = ((doc.get("model") or {}).get("config") or {}) if isinstance(doc.get("model"), dict) else {}
                found = next((k for k in DIMENSIONS if isinstance(dims, dict) and k in dims), None)
                if found:
                    return found
    return None


def _seconds(max_time) -> float | None:
    """``trainer.max_time`` (``DD:HH:MM:SS``, a timedelta or its keywords) in seconds."""
    from datetime import timedelta

    if max_time is None:
        return None
    if isinstance(max_time, timedelta):
        return max_time.total_seconds()
    if isinstance(max_time, dict):
        return timedelta(**max_time).total_seconds()
    days, hours, minutes, seconds = (int(x) for x in str(max_time).split(":"))
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds).total_seconds()


def _probe_settings(config) -> tuple:
    """``(autocast dtype or None, device)`` the run will train with, for the sizing probe."""
    import torch

    from minitrans.precision import training_precision

    trainer = config["trainer"]
    accelerator = trainer.get("accelerator")
    on_gpu = accelerator in ("gpu", "cuda") or (accelerator in (None, "auto") and torch.cuda.is_available())
    precision, _ = training_precision(trainer.get("precision"), accelerator)
    precision = str(precision)
    dtype = torch.bfloat16 if precision.startswith("bf16") else torch.float16 if precision.startswith("16") else None
    return dtype, "cuda" if on_gpu else "cpu"


def _one_line_errors(parser_class):
    """``parser_class`` whose errors are one-line :class:`UsageError`s (exit 2), not a page of
    usage text before the message."""

    class OneLineErrors(parser_class):
        def error(self, message: str, ex: Exception | None = None):
            raise UsageError(f"{' '.join(str(message).split())} (see `minitrans train --help`)") from None

    OneLineErrors.__name__ = parser_class.__name__
    return OneLineErrors


def _flat(namespace) -> dict:
    """A jsonargparse namespace (or dict) as ``{"a.b": value}``, tuples as lists."""
    items = namespace.as_dict() if hasattr(namespace, "as_dict") else dict(namespace)
    out = {}
    for key, value in items.items():
        if isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in _flat(value).items()})
        else:
            out[key] = list(value) if isinstance(value, tuple) else value
    return out


def _check_resumable(args: list[str]) -> None:
    """``--resume CKPT`` needs a training checkpoint (weights, optimizer and loop state), not an
    averaged or damaged one: say so before Lightning fails on a missing key."""
    path = None
    for i, arg in enumerate(args):
        if arg == "--ckpt_path" and i + 1 < len(args):
            path = args[i + 1]
        elif arg.startswith("--ckpt_path="):
            path = arg.split("=", 1)[1]
    if path in (None, "", "last", "best", "hpc", "registry"):
        return
    from minitrans.checkpoint import load_checkpoint, metadata

    checkpoint = load_checkpoint(path)
    meta = metadata(checkpoint)
    missing = [k for k in ("optimizer_states", "loops", "lr_schedulers") if k not in checkpoint]
    if missing:
        how = "it was written by `minitrans average`" if "averaged_from" in meta else \
            f"it lacks {', '.join(missing)}"
        raise CheckpointError(f"--resume {path}: cannot resume training from it ({how}). Resume from last.ckpt "
                              "or a step*.ckpt of the run; averaged checkpoints translate and evaluate only.")


class _DropAdverts(logging.Filter):
    """Lightning's log lines a minitrans user can do nothing with."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "litlogger" not in record.getMessage()


def _quiet_lightning(preparing: bool) -> None:
    """Quiet by default: no advert, no warning about Lightning's own internals; and for
    ``prepare`` (which trains nothing) none of the accelerator lines either."""
    for message in (r".*isinstance\(treespec, LeafSpec\)",  # Lightning's own use of a deprecated torch name
                    r"Precision .* is not supported by the model summary",  # its size estimate, not training
                    r"The number of training batches .* is smaller than the logging interval",
                    r"No seed found, seed set to"):
        warnings.filterwarnings("ignore", message=message)
    names = ["lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"]
    for name in names + (["lightning.fabric.utilities.seed"] if preparing else []):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropAdverts) for f in logger.filters):
            logger.addFilter(_DropAdverts())
        if preparing:
            logger.setLevel(logging.WARNING)


def lightning_main(args: list[str], run: bool = True):
    """Run (or, with ``run=False``, only build) the Lightning CLI on ``args``."""
    from minitrans.datamodule import TranslationDataModule
    from minitrans.training import TranslationModule

    cli_class, lr_monitor = _lightning_cli_class()
    if run:
        if args and args[0] == "train":
            args = ["fit", *args[1:]]
        args = ["--ckpt_path" if a == "--resume" else a for a in args]
        args = [f"--ckpt_path={a.split('=', 1)[1]}" if a.startswith("--resume=") else a for a in args]
        _check_resumable(args)
    trainer_defaults = {
        "use_distributed_sampler": False,  # TokenBatchSampler shards by rank itself
        "callbacks": [lr_monitor(logging_interval="step")],
        "default_root_dir": "runs",
    }
    # sys.argv must stay as it is: DDP's launcher re-runs it for the other ranks.
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
    _quiet_lightning(preparing=not run)
    try:
        return cli_class(TranslationModule, TranslationDataModule, args=args, run=run,
                         trainer_defaults=trainer_defaults, auto_configure_optimizers=False,
                         load_from_checkpoint_support=False, save_config_kwargs={"overwrite": True})
    except ValueError as err:
        # Lightning checks val_check_interval against the epoch only once data is loaded; a
        # small corpus meets it first (its epochs are a few batches), so say how to fix it.
        if "`val_check_interval`" in str(err) and "must be less than or equal" in str(err):
            raise UsageError(f"trainer.val_check_interval is more than the training batches of one epoch "
                             f"({str(err).split('training batches (', 1)[-1].split(')', 1)[0]}): set "
                             "trainer.check_val_every_n_epoch: null to count it across epochs, or validate "
                             "less often.") from None
        raise


# -- plain commands ----------------------------------------------------------------------
def cmd_prepare(a: argparse.Namespace) -> None:
    """Build (or reuse) the data cache of a training config and print corpus statistics."""
    configs = [arg for path in a.config for arg in ("--config", path)]  # merged as `train` merges them
    cli = lightning_main([*configs, *a.overrides], run=False)  # validates the whole config
    dm = cli.datamodule
    dm.prepare_data()
    dm.setup("fit")
    stats = dm.statistics()
    print(json.dumps(stats, indent=2, ensure_ascii=False))


def _lines(a: argparse.Namespace):
    """Yield ``(first line number, chunk of input lines)``: arguments, a file, or stdin (line by
    line when interactive). Lines are split on ``\\n`` only, as ``wc -l`` counts them. A file is
    read and decoded whole before anything is translated, so a bad byte stops the command at
    once, naming its line, and is then translated in chunks of :data:`CHUNK_LINES`, so that the
    first lines come out (``| head``) before the last are decoded. Stdin is decoded chunk by
    chunk, so what was translated before a bad line has already been written."""
    if a.sentences:
        yield 1, list(a.sentences)
        return
    if a.input:
        lines = read_lines(a.input, "Input file")
        for start in range(0, len(lines), CHUNK_LINES):
            yield start + 1, lines[start:start + CHUNK_LINES]
        return
    interactive = sys.stdin.isatty()
    # Bytes, so that decoding (and its errors) is ours; a text-only stream (tests, embedding)
    # is re-encoded.
    stream = getattr(sys.stdin, "buffer", None) or io.BytesIO(sys.stdin.read().encode("utf-8", "surrogateescape"))
    chunk: list[str] = []
    first = 1
    for number, line in enumerate(iter_lines(stream, "<stdin>"), 1):
        chunk.append(line)
        if interactive or len(chunk) >= CHUNK_LINES:
            yield first, chunk
            chunk, first = [], number + 1
    if chunk:
        yield first, chunk


def _check_device(device: str) -> None:
    import torch

    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise UsageError(f"--device {device!r} is not a device name; use cpu, cuda or cuda:N.") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: no CUDA GPU is available here; use --device cpu.")
    if kind not in ("cpu", "cuda", "mps"):
        raise UsageError(f"--device {device}: minitrans decodes on cpu, cuda or mps.")


def cmd_translate(a: argparse.Namespace) -> None:
    """Translate sentences (arguments, --input FILE or stdin) to stdout or --output FILE."""
    from minitrans.search import check_decoding
    from minitrans.translate import check_attention_view, plot_attention, plot_path

    # Everything that can be checked is checked before the model is loaded.
    a.input = None if a.input == "-" else a.input  # "-": standard input and output, as Unix tools read it
    a.output = None if a.output == "-" else a.output
    check_decoding(a.beam, a.alpha, a.nbest)
    _check_device(a.device)
    if a.input and not is_readable_file(a.input):
        what = "is a folder" if Path(a.input).is_dir() else "no such file"
        raise UsageError(f"--input {a.input}: {what}.")
    if a.output:
        check_writable(a.output, "--output")
        if a.input and same_file(a.input, a.output):
            raise UsageError(f"--output {a.output} is the --input file; it would be overwritten while being read. "
                             "Write to another file, then rename it.")
    if a.plot_attention:
        check_writable(plot_path(a.plot_attention), "--plot-attention")
    fmt = format_for(a.format, a.input)
    if fmt != "text":
        if a.sentences or a.json or a.nbest > 1 or a.plot_attention or a.no_split:
            raise UsageError(f"--format {fmt} translates a whole document from --input (or stdin): it takes no "
                             "sentence arguments, --json, --nbest, --plot-attention or --no-split.")
        return _translate_document(a, fmt)
    translator = _load_translator(a.checkpoint, a)
    if a.plot_attention and (translator.engine.name != "native" or a.ensemble):
        raise UsageError("--plot-attention needs one native model (a .ckpt, no --ensemble): CTranslate2 and "
                         "ensembles return no attention weights here.")
    check_attention_view(translator.config, a.layer, a.head)
    with contextlib.ExitStack() as stack:
        # A file output appears whole when the command succeeds, and never half-written.
        out = stack.enter_context(atomic_output(a.output)) if a.output else sys.stdout
        plotted = False
        started, done, words = time.perf_counter(), 0, 0
        progress = Progress(None, f"translating {a.input or 'the input'}") if a.output else None  # long lines
        for first, chunk in _lines(a):
            want_plot = a.plot_attention is not None and not plotted
            results = translator.translate_detailed(chunk, beam_size=a.beam, alpha=a.alpha, nbest=a.nbest,
                                                    attention=want_plot, first_line=first, split=not a.no_split,
                                                    progress=progress)
            for number, r in enumerate(results, first):
                if a.json:
                    out.write(_json_line({"line": number, "source": r.source, "translation": r.text,
                                          "score": r.score,
                                          "nbest": [{"translation": t, "score": s} for t, s in r.nbest],
                                          "truncated": r.truncated, "confidence": r.confidence,
                                          "low_confidence": r.low_confidence,
                                          "sentences": [{"source": s.source, "translation": s.text, "score": s.score,
                                                         "truncated": s.truncated, "confidence": s.confidence,
                                                         "low_confidence": s.low_confidence}
                                                        for s in r.sentences]}))
                elif a.nbest > 1:  # line number, translation, score: realignable with the input
                    out.write("".join(f"{number}\t{_one_line(t)}\t{s:.4f}\n" for t, s in r.nbest))
                else:
                    out.write(_one_line(r.text) + "\n")
            out.flush()
            done += len(chunk)
            words += sum(len(line.split()) for line in chunk)
            if a.output and (done > len(chunk) or len(chunk) >= CHUNK_LINES):  # long work shows progress
                print(f"translated {done} lines ({done / max(time.perf_counter() - started, 1e-9):.1f} lines/s)",
                      file=sys.stderr)
            if want_plot:  # the first sentence that was decoded
                shown = next((s for r in results for s in (r.sentences or [r]) if s.attention is not None), None)
                if shown is not None:
                    written = plot_attention(shown, a.plot_attention, a.layer, a.head)
                    print(f"attention plot: {written}", file=sys.stderr)
                    plotted = True
    if a.output:  # the file appeared only now (atomically): say what went where
        seconds = time.perf_counter() - started
        print(f"wrote {done} translations of {a.input or 'the input'} to {a.output} in {seconds:.1f} s "
              f"({words / max(seconds, 1e-9):.0f} source words/s)", file=sys.stderr)


def _translate_document(a: argparse.Namespace, fmt: str) -> None:
    """``translate --format html|srt``: the whole document in one batch, markup kept, written
    atomically (or to stdout)."""
    from minitrans.formats import translate_document

    if a.input:
        data = Path(a.input).read_bytes()
        where = a.input
    else:
        data, where = (getattr(sys.stdin, "buffer", None) or sys.stdin).read(), "<stdin>"
        data = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    document = decode_text(data, where)
    translator = _load_translator(a.checkpoint, a)
    progress = Progress(None, f"translating {where}")
    started = time.perf_counter()
    out = translate_document(fmt, document, lambda texts: translator.translate(
        texts, beam_size=a.beam, alpha=a.alpha, progress=progress), translator.source_language)
    seconds = time.perf_counter() - started
    if a.output:
        with atomic_output(a.output) as f:
            f.write(out)
        words = len(document.split())
        print(f"wrote {fmt} {a.output}: {progress.done:,} sentences translated in {seconds:.1f} s "
              f"({words / max(seconds, 1e-9):.0f} source words/s)", file=sys.stderr)
    else:
        sys.stdout.write(out)


def _json_line(record: dict) -> str:
    """One JSON line: UTF-8 as it is, but the characters other tools count as line ends
    (U+0085, U+2028, U+2029; JSON escapes the rest) escaped, so each record stays one line."""
    text = json.dumps(record, ensure_ascii=False)
    return text.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029") + "\n"


def _one_line(text: str) -> str:
    """A translation as one output line: an input line split on ``\\n`` holds no line break,
    but one given as an argument, or with U+2028 in it, may; N lines in, N lines out."""
    return " ".join(text.splitlines())


def _load_translator(paths: list[str], a: argparse.Namespace):
    """One model (either engine), or with --ensemble several native checkpoints as one."""
    from minitrans.translate import Translator

    if len(paths) > 1 and not a.ensemble:
        raise UsageError(f"{len(paths)} models given: pass --ensemble to decode them as one, or give one.")
    if a.ensemble:
        if a.engine == "ctranslate2":
            raise UsageError("--ensemble runs on the native engine: give .ckpt files without --engine ctranslate2.")
        translator = Translator.from_checkpoints(paths, device=a.device, **engine_options(a))
    else:
        plotting = getattr(a, "plot_attention", None) and a.engine == "auto"  # the whole run on one engine
        translator = Translator.load(paths[0], "native" if plotting else a.engine, device=a.device,
                                     **engine_options(a))
        if plotting:
            translator.engine.reason = "auto: --plot-attention (attention weights come from the native engine)"
    print(translator.describe(), file=sys.stderr)
    return translator


def engine_options(a: argparse.Namespace) -> dict:
    """The engine options of the decoding flags (:func:`add_decoding_flags`)."""
    from minitrans.precision import requested

    return {"precision": requested(a.precision, a.bf16, a.int8), "shortlist": a.shortlist, "workers": a.workers}


def _held_out_sets(a: argparse.Namespace, checkpoint: str) -> list[tuple[str, str, tuple[list, list]]]:
    """``(label, dataset, (sources, references))`` of ``--src/--ref``, or of ``--split`` of
    ``--dataset`` (default: every corpus the checkpoint was trained on, with its split settings)."""
    from minitrans.corpus import data_dir_for
    from minitrans.engines import load_metadata
    from minitrans.evaluate import eval_sets, load_eval_data

    if a.src is not None:
        return [(Path(a.src).stem, "files", load_eval_data(None, a.split, a.src, a.ref))]
    meta = load_metadata(checkpoint)
    trained_on = meta.get("data", {})
    source_lang = languages.of(meta)[0]
    sets = []
    for spec in eval_sets(trained_on, a.dataset):
        if spec["split_settings"] is None:
            log.warning("The checkpoint was not trained on %r: check that its %s split cannot overlap the "
                        "training data.", spec["dataset"], a.split)
        data = load_eval_data(spec["dataset"], a.split, None, None, data_dir_for(a.data_dir, trained_on.get("data_dir")),
                              spec["split_settings"], spec["files"], spec["hub_id"], source_lang)
        label = f"{spec['name']}.{a.split}" if trained_on.get("dataset") == "mixture" else a.split
        sets.append((label, spec["name"], data))
    return sets


def _check_one_direction(paths: list[str]) -> None:
    """A UsageError when the models do not all translate in one direction (one test set's
    sources and references serve them all)."""
    from minitrans.engines import load_metadata

    first = (paths[0], load_metadata(paths[0]))
    for path in paths[1:]:
        languages.check_same("evaluate", first, (path, load_metadata(path)), UsageError)


def cmd_evaluate(a: argparse.Namespace) -> None:
    """Translate a test set with one or more checkpoints and score BLEU and chrF."""
    from minitrans.evaluate import evaluate_checkpoint, output_stem, write_outputs
    from minitrans.search import check_decoding

    check_decoding(a.beam, a.alpha)
    _check_device(a.device)
    check_writable_folder(a.output_dir, "--output-dir")
    sets = _held_out_sets(a, a.checkpoint[0])
    _check_one_direction(a.checkpoint)
    reports = []
    models = [(" + ".join(a.checkpoint), a.checkpoint)] if a.ensemble else [(ckpt, [ckpt]) for ckpt in a.checkpoint]
    data_files = [a.src, *(a.ref or [])] if a.src is not None else []
    for ckpt, paths in models:
        translator = _load_translator(paths, a)
        for label, dataset, (sources, refs) in sets:
            progress = Progress(len(sources), f"evaluating {Path(ckpt).name} on {label}")  # long test sets
            report, hyps = evaluate_checkpoint(ckpt, sources, refs, a.beam, a.alpha, a.device, translator=translator,
                                               progress=progress)
            report.update({"dataset": dataset, "split": a.split if a.src is None else label})
            path = write_outputs(report, hyps, a.output_dir, output_stem(paths, label, a.beam, data_files))
            report["report_path"] = str(path)
            print(f"report: {path} (translations: {path.with_suffix('.hyp.txt')})", file=sys.stderr)
            if "model_size" in report:
                print(f"model size {report['model_size']['chosen']}: {report['model_size'].get('why', '')}",
                      file=sys.stderr)
            reports.append(report)
    if len(reports) == 1:
        print(json.dumps(reports[0], indent=2, ensure_ascii=False))
        return
    width = max(len(r["checkpoint"]) for r in reports)
    sets_width = max(len(f"{r['dataset']}/{r['split']}") for r in reports)
    print(f"{'checkpoint':<{width}}  {'data':<{sets_width}}  {'BLEU':>6}  {'chrF':>6}  {'sent/s':>7}")
    for r in reports:
        data = f"{r['dataset']}/{r['split']}"
        print(f"{r['checkpoint']:<{width}}  {data:<{sets_width}}  {r['bleu']:>6.2f}  {r['chrf']:>6.2f}  "
              f"{r['sentences_per_second']:>7.1f}")
    for signature in dict.fromkeys((r["bleu_signature"], r["chrf_signature"]) for r in reports):
        print(f"BLEU: {signature[0]}\nchrF: {signature[1]}")


def cmd_calibrate(a: argparse.Namespace) -> None:
    """Calibrate the low-confidence flag on a validation split; write it into a new checkpoint."""
    from minitrans.checkpoint import with_metadata
    from minitrans.confidence import calibrate
    from minitrans.search import check_decoding
    from minitrans.translate import Translator

    check_decoding(a.beam, a.alpha)
    _check_device(a.device)
    if not 0.0 < a.share < 1.0:
        raise UsageError(f"--share {a.share}: give a share between 0 and 1, e.g. 0.1 for the worst tenth.")
    check_writable(a.output, "--output")
    if same_file(a.checkpoint, a.output):  # before minutes of decoding, not after
        raise UsageError(f"--output {a.output} is the checkpoint read (it may be a resumable training "
                         "checkpoint); write the calibrated model to a new file.")
    sources, refs = [], []
    for _, _, (s, r) in _held_out_sets(a, a.checkpoint):  # every component of a mixture, as one set
        sources, refs = sources + s, refs + r
    if a.engine == "ctranslate2" or not str(a.checkpoint).endswith(".ckpt") and Path(a.checkpoint).is_dir():
        raise UsageError("calibrate writes a checkpoint: give the .ckpt, then export the calibrated one.")
    translator = Translator.load(a.checkpoint, "native", device=a.device, **engine_options(a))
    results = translator.translate_detailed(sources, beam_size=a.beam, alpha=a.alpha, split=False,
                                            progress=Progress(len(sources), f"calibrating on {a.split}"))
    try:
        record = calibrate([r.confidence or 0.0 for r in results], [r.text for r in results], refs, a.share,
                           beam=a.beam, alpha=a.alpha, split=a.split if a.src is None else a.src)
    except ValueError as err:
        raise UsageError(str(err)) from None
    with_metadata(a.checkpoint, a.output, confidence=record)
    print(json.dumps(record, indent=2))
    print(f"wrote {a.output}: its translations carry low_confidence (the worst {a.share:.0%} of {a.split})",
          file=sys.stderr)


def cmd_shortlist(a: argparse.Namespace) -> None:
    """Build a vocabulary shortlist from a checkpoint's training pairs; write it into a new checkpoint."""
    from minitrans.checkpoint import checkpoint_metadata, with_metadata
    from minitrans.datamodule import TranslationDataModule
    from minitrans.shortlist import build

    check_writable(a.output, "--output")
    if same_file(a.checkpoint, a.output):
        raise UsageError(f"--output {a.output} is the checkpoint read (it may be a resumable training "
                         "checkpoint); write the checkpoint with its shortlist to a new file.")
    if a.top_k < 1 or a.frequent < 0:
        raise UsageError(f"--top-k must be ≥ 1 and --frequent ≥ 0, got {a.top_k} and {a.frequent}.")
    meta = checkpoint_metadata(a.checkpoint)
    dm = TranslationDataModule.from_settings(meta.get("data", {}), a.data_dir)
    dm.prepare_data()
    dm.setup("fit")
    if dm.tokenizer.fingerprint() != meta["tokenizer_fingerprint"]:
        raise UsageError(f"{a.checkpoint}: the data prepared from its recorded settings has another SentencePiece "
                         "model than the checkpoint's; point --data-dir (or MINITRANS_DATA) at the corpora it was "
                         "trained on.")
    shortlist = build(dm.train_pairs(), dm.tokenizer.vocab_size, a.top_k, a.frequent)
    with_metadata(a.checkpoint, a.output, shortlist=shortlist.to_entry())
    sizes = (shortlist.table >= 0).sum(1).float()
    print(json.dumps({"pairs": shortlist.pairs, "top_k": a.top_k, "frequent": a.frequent,
                      "always_scored": len(shortlist.always),  # the frequent pieces found, eos and unk
                      "mean_list": round(float(sizes[sizes > 0].mean()), 1) if bool((sizes > 0).any()) else 0}))
    print(f"wrote {a.output}: `minitrans translate -m {a.output} --shortlist` scores only the shortlist",
          file=sys.stderr)


def cmd_average(a: argparse.Namespace) -> None:
    """Average the weights of compatible checkpoints into a new self-contained checkpoint."""
    from minitrans.checkpoint import average_checkpoints

    average_checkpoints(a.checkpoint, a.output)
    print(f"averaged {len(a.checkpoint)} checkpoints into {a.output}")


def cmd_serve(a: argparse.Namespace) -> None:
    """Serve checkpoints over HTTP, one per direction: the JSON API, LibreTranslate's API and the web page (needs the [serve] extra)."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise UsageError('`minitrans serve` needs FastAPI and uvicorn: pip install -e ".[serve]"') from None
    from minitrans.search import check_decoding
    from minitrans.server import ServerSettings, check_port, serve
    from minitrans.server_settings import read_api_keys

    check_decoding(a.beam, a.alpha)
    _check_device(a.device)
    if not 0 < a.port < 65536:
        raise UsageError(f"--port must lie in 1..65535, got {a.port}.")
    settings = ServerSettings(max_sentences=a.max_sentences, max_chars=a.max_chars, max_queue=a.max_queue,
                              batching=not a.no_batching, batch_wait_ms=a.batch_wait_ms, timeout_s=a.timeout,
                              beam=a.beam, alpha=a.alpha, max_attention_values=a.max_attention_values,
                              read_timeout_s=a.read_timeout, max_connections=a.max_connections,
                              cors_origins=tuple(a.cors_origin or ()),
                              api_keys=read_api_keys(a.api_keys) if a.api_keys else ())
    if a.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("Serving on %s: reachable from other machines. minitrans has no authentication.", a.host)
    check_port(a.host, a.port)  # before the model loads: a port in use is one line, not uvicorn's traceback
    serve(a.checkpoint, a.host, a.port, a.device, settings=settings, engine=a.engine, **engine_options(a))


def cmd_export(a: argparse.Namespace) -> None:
    """Export a checkpoint for another program: CTranslate2, Argos Translate / LibreTranslate, or Hugging Face transformers."""
    from minitrans.engines import writer

    out = writer(a.format).export(a.checkpoint, a.output_dir, a.quantization, a.force)
    how = {"argos": f"install it with argostranslate.package.install_from_path({str(out)!r}) (LibreTranslate "
                    "serves the packages argos has installed)",
           "hf": f"load it with transformers' AutoModelForSeq2SeqLM.from_pretrained({str(out)!r})"}
    print(f"exported {a.checkpoint} to {out} ({a.quantization}); "
          + how.get(a.format, f"translate with `minitrans translate --engine {a.format} --model {out}`"))


def cmd_distill(a: argparse.Namespace) -> None:
    """Make distillation / self-training data: a teacher translates in-domain English (resumable)."""
    from minitrans.distill import distill

    from minitrans.precision import requested

    out = distill(a.teacher, a.monolingual, a.out, a.data_dir, a.beam, a.alpha, a.chunk, limit=a.limit,
                  precision=requested(a.precision, a.bf16))
    print(f"wrote {out}: train it with `minitrans train --config configs/distill.yaml`")


def cmd_download(a: argparse.Namespace) -> None:
    """Download a public corpus (needs the network)."""
    from minitrans.sources import download

    print(download(a.dataset, a.to))


MODEL_HELP = "a .ckpt, or a folder written by `minitrans export`"
INT8_HELP = "the same as --precision int8"
ENSEMBLE_HELP = "decode several checkpoints (same tokenizer) as one model, averaging their probabilities"
ENGINE_HELP = ("auto (default): CTranslate2 when it is installed and the work needs nothing only the native "
               "engine has (a .ckpt is converted once and cached), else native; native (PyTorch: the reference, "
               "attention, --shortlist, --ensemble, bf16); ctranslate2 (an exported folder)")
WORKERS_HELP = ("beam-search batches decoded at once, each by its own thread with a share of the CPU threads "
                "(default 0: two on a CPU with two or more threads, else one)")


def _workers(text: str) -> int:
    """``--workers``: a whole number, 0 for the default."""
    from minitrans.engines import check_workers
    from minitrans.errors import UsageError

    try:
        return check_workers(int(text) if text.strip().isdigit() else text)  # type: ignore[arg-type]
    except UsageError as err:  # argparse words it as "argument --workers: ..."
        raise argparse.ArgumentTypeError(str(err).removeprefix("--workers ")) from None


def add_decoding_flags(p: argparse.ArgumentParser, whose: str = "") -> None:
    """The decoding flags ``translate``, ``evaluate`` and ``serve`` share, defined once:
    ``--engine --device --precision (--bf16 --int8) --shortlist --workers --beam --alpha``."""
    from minitrans.precision import PRECISIONS
    from minitrans.engines import ENGINE_CHOICES
    from minitrans.search import DEFAULT_ALPHA, DEFAULT_BEAM

    p.add_argument("--engine", choices=ENGINE_CHOICES, default="auto", help=ENGINE_HELP)
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps (default %(default)s)")
    p.add_argument("--precision", choices=PRECISIONS, default="auto", help=PRECISION_HELP)
    p.add_argument("--bf16", action="store_true", help=BF16_HELP)
    p.add_argument("--int8", action="store_true", help=INT8_HELP)
    p.add_argument("--shortlist", action=argparse.BooleanOptionalAction, default=False, help=SHORTLIST_HELP)
    p.add_argument("--workers", type=_workers, default=0, help=WORKERS_HELP)
    p.add_argument("--beam", type=int, default=DEFAULT_BEAM, help=f"{whose}beam size (1 = greedy; default %(default)s)")
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                   help=f"{whose}length penalty exponent (default %(default)s)")


OLD_MODEL_FLAGS = ("-c", "--checkpoint")  # the old spellings: -c is the config in `train`


def _deprecated(base: type[argparse.Action]) -> type[argparse.Action]:
    """``base`` that also prints a one-line deprecation note naming the new spelling."""

    class Deprecated(base):  # type: ignore[misc, valid-type]
        def __call__(self, parser, namespace, values, option_string=None):
            note_deprecated(option_string or "", "-m/--model")
            super().__call__(parser, namespace, values, option_string)

    return Deprecated


def note_deprecated(old: str, new: str) -> None:
    """One line on stderr: the old spelling still works, this is the one to use."""
    print(f"minitrans: note: {old} is deprecated (in `train`, -c is the config); use {new}", file=sys.stderr)


_ACTIONS = {"store": argparse._StoreAction, "append": argparse._AppendAction, "extend": argparse._ExtendAction}


def add_model_flag(p: argparse.ArgumentParser, action: str, help: str) -> None:
    """``-m/--model``: the model a command reads, the same flag on every command (translate,
    evaluate, serve, export, average). The old spellings ``-c``/``--checkpoint`` still work, with a
    note; they are hidden from ``--help`` because ``-c`` means the config in ``train``."""
    nargs = "+" if action == "extend" else None
    p.add_argument("--model", "-m", dest="checkpoint", action=action, nargs=nargs, metavar="MODEL",
                   help=help + " (required)")
    p.add_argument(*OLD_MODEL_FLAGS, dest="checkpoint", action=_deprecated(_ACTIONS[action]), nargs=nargs,
                   help=argparse.SUPPRESS)


def resolve_model_args(args: argparse.Namespace) -> None:
    """After parsing: take the old positional spellings of ``export``/``average`` (with a note)
    and require the model flag, in one line as every usage error."""
    old = getattr(args, "old_positional", None)
    if old:
        if args.command == "export":
            if len(old) != 2 or args.checkpoint or args.output_dir:
                raise UsageError("export takes -m CKPT -o DIR (see `minitrans export --help`)")
            args.checkpoint, args.output_dir = old
            note_deprecated("`export CKPT DIR`", "`export -m CKPT -o DIR`")
        else:  # average
            args.checkpoint = (args.checkpoint or []) + old
            note_deprecated("`average CKPT ...`", "`average -m CKPT ... -o OUT`")
    if getattr(args, "func", None) in (cmd_translate, cmd_evaluate, cmd_serve, cmd_export, cmd_average, cmd_calibrate) \
            and not args.checkpoint:
        raise UsageError(f"the following arguments are required: -m/--model (see `minitrans {args.command} --help`)")
    if args.command == "export" and not args.output_dir:
        raise UsageError("the following arguments are required: -o/--output (see `minitrans export --help`)")


def build_parser() -> argparse.ArgumentParser:
    from minitrans.ctranslate2_export import QUANTIZATIONS
    from minitrans.engines import EXPORT_FORMATS
    from minitrans.search import DEFAULT_ALPHA, DEFAULT_BEAM
    from minitrans.server_settings import ServerSettings
    from minitrans.shortlist import FREQUENT as SHORTLIST_FREQUENT, TOP_K as SHORTLIST_TOP_K

    parser = _Parser(prog="minitrans", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"minitrans {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (anywhere on the line)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, func) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=func.__doc__, description=func.__doc__, formatter_class=_DefaultsFormatter)
        p.set_defaults(func=func)
        return p

    for name in LIGHTNING_COMMANDS:
        sub.add_parser(name, help=f"Lightning {name} from a YAML config (see `minitrans {name} --help`)",
                       add_help=False)

    p = command("prepare", cmd_prepare)
    p.add_argument("--config", required=True, action="append",
                   help="training config YAML (its data section is used); repeat it to merge several, later ones "
                        "overriding earlier ones, as `train` does")

    p = command("translate", cmd_translate)
    p.add_argument("sentences", nargs="*", help="sentences to translate (default: lines of --input or stdin)")
    add_model_flag(p, "append", MODEL_HELP + "; repeat it with --ensemble")
    add_decoding_flags(p)
    p.add_argument("--ensemble", action="store_true", help=ENSEMBLE_HELP)
    p.add_argument("--input", "-i", help="text file: each line is translated sentence by sentence, one line out per "
                                         "line in (- is stdin)")
    p.add_argument("--format", default="auto", choices=["auto", *FORMATS],
                   help="auto: by the --input file's extension (.html/.htm, .md, .srt; anything else is text, line by line)")
    p.add_argument("--no-split", action="store_true",
                   help="translate each line as one sentence (no sentence splitting), as evaluate does")
    p.add_argument("--output", "-o", help="write translations here instead of stdout (- is stdout)")
    p.add_argument("--nbest", type=int, default=1, help="print the n best translations with scores")
    p.add_argument("--json", action="store_true", help="one JSON object per line with scores")
    p.add_argument("--plot-attention", metavar="FILE.png", help="save the first sentence's cross-attention")
    p.add_argument("--layer", type=int, default=None, help="decoder layer to plot (default: last)")
    p.add_argument("--head", type=int, default=None, help="head to plot (default: mean over heads)")

    p = command("evaluate", cmd_evaluate)
    add_model_flag(p, "extend", MODEL_HELP + "; several after one flag or the flag repeated (-m A B = -m A -m B)")
    add_decoding_flags(p)
    p.add_argument("--ensemble", action="store_true", help=ENSEMBLE_HELP + " (default: score each)")
    p.add_argument("--dataset", help="multi30k, tatoeba, or a component of the checkpoint's mixture "
                                     "(default for a mixture: every component)")
    p.add_argument("--split", default="test", help="e.g. test_2016_flickr (= test), test_2017_flickr, valid")
    p.add_argument("--src", help="source file (instead of --dataset)")
    p.add_argument("--ref", action="append", help="reference file aligned with --src; repeat for several")
    p.add_argument("--data-dir", help="raw corpora directory (default: $MINITRANS_DATA; this flag wins over it)")
    p.add_argument("--output-dir", default="outputs/eval",
                   help="where the report and hypotheses go (default %(default)s)")

    p = command("calibrate", cmd_calibrate)
    add_model_flag(p, "store", "a .ckpt to calibrate (it is not changed)")
    p.add_argument("--output", "-o", required=True, help="the calibrated checkpoint to write (never the input)")
    add_decoding_flags(p)
    p.add_argument("--share", type=float, default=0.1, help="share of validation sentences the flag marks as low")
    p.add_argument("--dataset", help="a corpus of the checkpoint's (default: every one it was trained on)")
    p.add_argument("--split", default="valid", help="the held-out split to calibrate on")
    p.add_argument("--src", help="source file (instead of --dataset)")
    p.add_argument("--ref", action="append", help="reference file aligned with --src")
    p.add_argument("--data-dir", help="raw corpora directory (default: $MINITRANS_DATA; this flag wins over it)")

    p = command("shortlist", cmd_shortlist)
    add_model_flag(p, "store", "a .ckpt (it is not changed)")
    p.add_argument("--output", "-o", required=True, help="the checkpoint to write, with its shortlist (never the input)")
    p.add_argument("--top-k", type=int, default=SHORTLIST_TOP_K,
                   help="target pieces kept per source piece (default %(default)s)")
    p.add_argument("--frequent", type=int, default=SHORTLIST_FREQUENT,
                   help="most frequent target pieces every batch scores (default %(default)s)")
    p.add_argument("--data-dir", help="raw corpora directory (default: $MINITRANS_DATA; this flag wins over it)")

    p = command("average", cmd_average)
    add_model_flag(p, "extend", "checkpoints of one run (same model config and tokenizer)")
    p.add_argument("old_positional", nargs="*", metavar="CKPT", help=argparse.SUPPRESS)
    p.add_argument("--output", "-o", required=True, help="the averaged checkpoint to write (never one of the inputs)")

    p = command("serve", cmd_serve)
    add_model_flag(p, "append", MODEL_HELP + "; repeat it to serve one model per direction (e.g. en-fr and fr-en: "
                                             "requests choose by source and target)")
    add_decoding_flags(p, "a request's default ")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default %(default)s)")
    limits = ServerSettings()  # the defaults live there, once
    p.add_argument("--max-sentences", type=int, default=limits.max_sentences,
                   help="sentences per request (413 beyond; default %(default)s)")
    p.add_argument("--max-chars", type=int, default=limits.max_chars,
                   help="characters per sentence (413 beyond; default %(default)s)")
    p.add_argument("--max-queue", type=int, default=limits.max_queue,
                   help="sentences queued at once (503 beyond, 413 for a request larger than it; default %(default)s)")
    p.add_argument("--max-attention-values", type=int, default=limits.max_attention_values,
                   help="attention weights one request may ask for, in numbers (413 beyond; default %(default)s)")
    p.add_argument("--batch-wait-ms", type=float, default=limits.batch_wait_ms,
                   help="how long to gather concurrent requests (default %(default)s)")
    p.add_argument("--no-batching", action="store_true", help="decode each request on its own")
    p.add_argument("--cors-origin", action="append", metavar="ORIGIN",
                   help="let browser pages from ORIGIN call the API (CORS; repeat it; * for any; default: none)")
    p.add_argument("--api-keys", metavar="FILE",
                   help="require one of these keys (one per line) on every translation: api_key on LibreTranslate's "
                        "routes, the X-API-Key header on /v1 (400/401 without one, 403 for a wrong one; default: no keys)")
    p.add_argument("--timeout", type=float, default=limits.timeout_s,
                   help="seconds before a request gets 504 and its decoding stops; shutdown waits this long plus "
                        "5 s for requests in flight (default %(default)s)")
    p.add_argument("--read-timeout", type=float, default=limits.read_timeout_s,
                   help="seconds a client may take to send a request's headers, and again its body (408 or the "
                        "connection closed beyond; default %(default)s)")
    p.add_argument("--max-connections", type=int, default=limits.max_connections,
                   help="open connections at most (fewer if the process may open fewer files; the oldest one "
                        "still sending its headers is closed beyond; default %(default)s)")

    p = command("export", cmd_export)
    add_model_flag(p, "store", "a .ckpt written by `minitrans train` or `minitrans average`")
    p.add_argument("--output", "-o", dest="output_dir",
                   help="the model folder to write (argos: the .argosmodel file)")
    p.add_argument("old_positional", nargs="*", metavar="CKPT DIR", help=argparse.SUPPRESS)
    p.add_argument("--format", default="ctranslate2",
                   help=f"the model format to write: {', '.join(EXPORT_FORMATS)} (default %(default)s)")
    p.add_argument("--quantization", default="float32", choices=QUANTIZATIONS,
                   help="weight type of the export (ctranslate2 and argos; hf writes float32)")
    p.add_argument("--force", action="store_true", help="replace an existing output folder")

    p = command("distill", cmd_distill)
    p.add_argument("--teacher", action="append", required=True, help="teacher checkpoint (repeat: an ensemble)")
    p.add_argument("--monolingual", nargs="+", required=True, help="in-domain English text, one sentence per line")
    p.add_argument("--out", default="runs/distill/data", help="the corpus folder to write (default %(default)s)")
    p.add_argument("--data-dir", help="raw corpora (default: $MINITRANS_DATA; this flag wins over it), for Multi30k's real pairs")
    p.add_argument("--beam", type=int, default=DEFAULT_BEAM, help="beam size (default %(default)s)")
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="length penalty exponent (default %(default)s)")
    p.add_argument("--chunk", type=int, default=2000, help="lines per resumable chunk (default %(default)s)")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto", help=PRECISION_HELP)
    p.add_argument("--bf16", action="store_true", help=BF16_HELP)
    p.add_argument("--limit", type=int, help="translate only the first N lines (trials)")

    p = command("download", cmd_download)
    p.add_argument("--dataset", required=True, choices=["multi30k", "tatoeba"], help="the corpus to fetch")
    p.add_argument("--to", required=True, help="directory to write into (then set MINITRANS_DATA to it)")
    return parser


DESCRIPTION = """\
minitrans: an English->French Transformer built from its parts.

Training (Lightning's CLI, YAML configs plus dotted overrides; see `minitrans train --help`):
  train (= fit), validate, test   e.g. minitrans train --config configs/quickstart.yaml

Using a model:
  translate, evaluate, serve, export, average, calibrate

Data:
  prepare, distill, download

`minitrans COMMAND --help` lists a command's options with their defaults."""


TRAIN_HELP = """\
usage: minitrans {command} --config CONFIG.yaml [--config MORE.yaml] [--KEY VALUE ...] [--resume CKPT]

Train (or validate/test) a model from YAML configs; later --config files and dotted --KEY VALUE
overrides replace earlier values. Unknown keys and bad values fail at once, naming the key.

common options:
  --config FILE                  a config (configs/*.yaml lists only what differs from the defaults)
  --resume CKPT                  continue an interrupted run exactly (last.ckpt or a step*.ckpt)
  --seed_everything N            the run's seed (data order, initialisation, dropout)
  --print_config                 print the whole resolved config and exit

  --trainer.max_time DD:HH:MM:SS stop after this wall time (the recipes' budget)
  --trainer.max_steps N          ... or after N optimiser steps
  --trainer.val_check_interval N validate every N steps (with --trainer.check_val_every_n_epoch null)
  --trainer.precision P          bf16-mixed (fast on AMX CPUs and GPUs) or 32-true
  --trainer.devices N --trainer.strategy ddp     several GPUs or processes
  --trainer.default_root_dir DIR where logs (CSV, TensorBoard) go

  --model.config.d_model N       the model's shape: d_model, n_heads, n_encoder_layers,
                                 n_decoder_layers, d_ff, dropout, norm_first, max_len
  --model.init_from CKPT         start a new run from a checkpoint's weights (fine-tuning)
  --model.warmup_steps N --model.lr_factor F --model.label_smoothing E

  --data.dataset NAME            tatoeba, multi30k, tsv, aligned, hub or mixture
  --data.files '{{train: F}}'      the files of a tsv or aligned corpus
  --data.vocab_size N --data.max_tokens N --data.tokenizer FILE_OR_CKPT

  --checkpoint.dirpath DIR       where step*.ckpt, last.ckpt and best.ckpt go
  --recent.save_top_k N          also keep the last N validations' weights (for averaging)
  --early_stopping.patience N    validations without improvement before stopping

Every option, with its default: minitrans {command} --help-all. Recipes, resuming, averaging and
distillation: docs/training.md."""


class _DefaultsFormatter(argparse.HelpFormatter):
    """Help that shows each option's default (when it has one worth showing)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "%(default)" not in text and action.option_strings and action.default not in (None, False, argparse.SUPPRESS) \
                and not isinstance(action.default, list):
            text += " (default: %(default)s)"
        return text


class _StderrHandler(logging.StreamHandler):
    """Logs to whatever ``sys.stderr`` is at the time of the message (not at setup)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit 2), like every other minitrans error."""

    def error(self, message: str):
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not fail on the closed pipe."""
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def main(argv: list[str] | None = None) -> None:
    """The error boundary: a :class:`MinitransError` is printed as one line (exit 1, or 2 for
    usage errors); ``--debug`` anywhere on the line shows the traceback instead."""
    as_command = argv is None  # the `minitrans` command itself, not a Python caller of main()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    if not log.handlers:  # our own messages; Lightning configures its own logger
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    command = argv[0] if argv else None
    from minitrans.runtime import tune_allocator

    tune_allocator(decoding=as_command and command in DECODING_COMMANDS)  # a Python caller keeps its allocator
    try:
        if command in LIGHTNING_COMMANDS:
            if {"-h", "--help"} & set(argv) and "--help-all" not in argv:
                print(TRAIN_HELP.format(command=command))
                return
            lightning_main(["--help" if a == "--help-all" else a for a in argv])
            return
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        if extra and args.command != "prepare":
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides = extra  # prepare: config overrides such as --data.vocab_size=4000
        if args.command is None:
            parser.print_help()
            raise SystemExit(2)
        resolve_model_args(args)
        args.func(args)
    except MinitransError as err:
        if debug:
            raise
        message = " ".join(str(err).split())  # one line, whatever the message held
        print(f"minitrans {command or ''}: error: {message}", file=sys.stderr)
        raise SystemExit(err.exit_code) from None
    except KeyboardInterrupt:
        print(f"minitrans {command or ''}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except BrokenPipeError:  # the reader left (`| head -1`): stop quietly, as Unix tools do on SIGPIPE
        _silence_stdout()
        raise SystemExit(128 + 13) from None
    except OSError as err:  # disk full, permission denied, ... while reading or writing
        if debug:
            raise
        where = f": {err.filename}" if getattr(err, "filename", None) else ""
        print(f"minitrans {command or ''}: error: {err.strerror or err}{where}", file=sys.stderr)
        raise SystemExit(1) from None
    except Exception as err:  # a library's own error wrapped around a full disk: still one line
        full = disk_full(err)
        if debug or full is None:
            raise
        print(f"minitrans {command or ''}: error: {' '.join(str(write_failed(full.filename or '?', full)).split())}",
              file=sys.stderr)
        raise SystemExit(1) from None
