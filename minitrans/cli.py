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
import json
import logging
import shutil
import sys
import warnings
from pathlib import Path

log = logging.getLogger("minitrans")
LIGHTNING_COMMANDS = ("train", "fit", "validate", "test")


# -- Lightning ---------------------------------------------------------------------------
def _lightning_cli_class():
    from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
    from lightning.pytorch.cli import LightningCLI
    from lightning.pytorch.loggers import CSVLogger

    from minitrans.checkpoint import AtomicCheckpointIO

    class MinitransCLI(LightningCLI):
        """LightningCLI with minitrans's links, checkpointing and loggers."""

        def add_arguments_to_parser(self, parser) -> None:
            parser.link_arguments("data.vocab_size", "model.config.vocab_size", apply_on="parse")
            parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
            parser.set_defaults({
                "checkpoint.monitor": "val_bleu", "checkpoint.mode": "max", "checkpoint.save_top_k": 3,
                "checkpoint.save_last": True, "checkpoint.filename": "step{step}-bleu{val_bleu:.2f}",
                "checkpoint.auto_insert_metric_name": False,
            })
            parser.add_lightning_class_args(EarlyStopping, "early_stopping")
            parser.set_defaults({"early_stopping.monitor": "val_bleu", "early_stopping.mode": "max",
                                 "early_stopping.patience": 10})
            if "weights_only" in {a.dest for a in parser._actions}:  # fit/validate/test
                parser.set_defaults({"weights_only": True})  # resuming never unpickles code

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
            return super()._instantiate_trainer(config, callbacks)

        def after_fit(self) -> None:
            callback = self.trainer.checkpoint_callback
            if callback is not None and callback.best_model_path and self.trainer.is_global_zero:
                best = Path(callback.best_model_path)
                target = best.with_name("best.ckpt")
                shutil.copyfile(best, target)
                log.info("Best checkpoint (%s = %s): %s, copied to %s", callback.monitor,
                         callback.best_model_score, best, target)

    return MinitransCLI, LearningRateMonitor


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
    trainer_defaults = {
        "use_distributed_sampler": False,  # TokenBatchSampler shards by rank itself
        "callbacks": [lr_monitor(logging_interval="step")],
        "default_root_dir": "runs",
    }
    # sys.argv must stay as it is: DDP's launcher re-runs it for the other ranks.
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
    return cli_class(TranslationModule, TranslationDataModule, args=args, run=run,
                     trainer_defaults=trainer_defaults, auto_configure_optimizers=False,
                     load_from_checkpoint_support=False, save_config_kwargs={"overwrite": True})


# -- plain commands ----------------------------------------------------------------------
def cmd_prepare(a: argparse.Namespace) -> None:
    """Build (or reuse) the data cache of a training config and print corpus statistics."""
    cli = lightning_main(["--config", a.config, *a.overrides], run=False)  # validates the whole config
    dm = cli.datamodule
    dm.prepare_data()
    dm.setup("fit")
    stats = dm.statistics()
    print(json.dumps(stats, indent=2, ensure_ascii=False))


def _lines(a: argparse.Namespace):
    """Yield chunks of input lines: arguments, a file, or stdin (line by line when interactive)."""
    if a.sentences:
        yield list(a.sentences)
        return
    if a.input:
        stream = open(a.input, encoding="utf-8")
    else:
        stream = sys.stdin
    interactive = stream.isatty()
    chunk: list[str] = []
    for line in stream:
        chunk.append(line.rstrip("\n").rstrip("\r"))
        if interactive or len(chunk) >= 1000:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def cmd_translate(a: argparse.Namespace) -> None:
    """Translate sentences (arguments, --input FILE or stdin) to stdout or --output FILE."""
    from minitrans.translate import Translator, plot_attention

    translator = Translator.from_checkpoint(a.checkpoint, device=a.device, bf16=a.bf16)
    out = open(a.output, "w", encoding="utf-8") if a.output else sys.stdout
    plotted = False
    try:
        for chunk in _lines(a):
            want_plot = a.plot_attention is not None and not plotted
            results = translator.translate_detailed(chunk, beam_size=a.beam, alpha=a.alpha, nbest=a.nbest,
                                                    attention=want_plot)
            for r in results:
                if a.json:
                    out.write(json.dumps({"source": r.source, "translation": r.text, "score": r.score,
                                          "nbest": [{"translation": t, "score": s} for t, s in r.nbest],
                                          "truncated": r.truncated}, ensure_ascii=False) + "\n")
                elif a.nbest > 1:
                    out.write("".join(f"{t}\t{s:.4f}\n" for t, s in r.nbest))
                else:
                    out.write(r.text + "\n")
            out.flush()
            if want_plot:
                first = next((r for r in results if r.attention is not None), None)
                if first is not None:
                    plot_attention(first, a.plot_attention, a.layer, a.head)
                    print(f"attention plot: {a.plot_attention}", file=sys.stderr)
                    plotted = True
    finally:
        if out is not sys.stdout:
            out.close()


def cmd_evaluate(a: argparse.Namespace) -> None:
    """Translate a test set with one or more checkpoints and score BLEU and chrF."""
    from minitrans.checkpoint import load_checkpoint
    from minitrans.evaluate import evaluate_checkpoint, load_eval_data, write_outputs

    trained_on = load_checkpoint(a.checkpoint[0])["minitrans"].get("data", {})
    same_data = trained_on.get("dataset") == a.dataset
    if a.dataset and not same_data:
        log.warning("The checkpoint was trained on %r, not %r: check that the test split cannot overlap its "
                    "training data.", trained_on.get("dataset"), a.dataset)
    sources, refs = load_eval_data(a.dataset, a.split, a.src, a.ref, a.data_dir or trained_on.get("data_dir"),
                                   trained_on if same_data else None)
    name = a.split if a.src is None else Path(a.src).stem
    reports = []
    stems = [Path(c).stem for c in a.checkpoint]
    if len(set(stems)) < len(stems):  # e.g. two runs' best.ckpt: name outputs by their paths
        stems = [str(Path(c).with_suffix("")).strip("./").replace("/", "_") for c in a.checkpoint]
    for ckpt, ckpt_stem in zip(a.checkpoint, stems):
        report, hyps = evaluate_checkpoint(ckpt, sources, refs, a.beam, a.alpha, a.device, bf16=a.bf16)
        report.update({"dataset": a.dataset if a.src is None else "files", "split": name})
        stem = f"{ckpt_stem}.{name}.beam{a.beam}"
        path = write_outputs(report, hyps, a.output_dir, stem)
        report["report_path"] = str(path)
        reports.append(report)
    if len(reports) == 1:
        print(json.dumps(reports[0], indent=2, ensure_ascii=False))
    else:
        width = max(len(r["checkpoint"]) for r in reports)
        print(f"{'checkpoint':<{width}}  {'BLEU':>6}  {'chrF':>6}  {'sent/s':>7}")
        for r in reports:
            print(f"{r['checkpoint']:<{width}}  {r['bleu']:>6.2f}  {r['chrf']:>6.2f}  {r['sentences_per_second']:>7.1f}")
        print(f"BLEU: {reports[0]['bleu_signature']}\nchrF: {reports[0]['chrf_signature']}")


def cmd_average(a: argparse.Namespace) -> None:
    """Average the weights of compatible checkpoints into a new self-contained checkpoint."""
    from minitrans.checkpoint import average_checkpoints

    average_checkpoints(a.checkpoints, a.output)
    print(f"averaged {len(a.checkpoints)} checkpoints into {a.output}")


def cmd_download(a: argparse.Namespace) -> None:
    """Download a public corpus (needs the network)."""
    from minitrans.download import download

    print(download(a.dataset, a.to))


def build_parser() -> argparse.ArgumentParser:
    from minitrans.search import DEFAULT_ALPHA

    parser = argparse.ArgumentParser(prog="minitrans", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in LIGHTNING_COMMANDS:
        sub.add_parser(name, help=f"Lightning {name} from a YAML config (see `minitrans {name} --help`)",
                       add_help=False)

    p = sub.add_parser("prepare", help=cmd_prepare.__doc__)
    p.add_argument("--config", required=True, help="training config YAML (its data section is used)")
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser("translate", help=cmd_translate.__doc__)
    p.add_argument("sentences", nargs="*", help="sentences to translate (default: lines of --input or stdin)")
    p.add_argument("--checkpoint", "-c", required=True)
    p.add_argument("--input", "-i", help="file with one sentence per line")
    p.add_argument("--output", "-o", help="write translations here instead of stdout")
    p.add_argument("--beam", type=int, default=5, help="beam size (1 = greedy)")
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="length penalty exponent")
    p.add_argument("--nbest", type=int, default=1, help="print the n best translations with scores")
    p.add_argument("--json", action="store_true", help="one JSON object per line with scores")
    p.add_argument("--plot-attention", metavar="FILE.png", help="save the first sentence's cross-attention")
    p.add_argument("--layer", type=int, default=None, help="decoder layer to plot (default: last)")
    p.add_argument("--head", type=int, default=None, help="head to plot (default: mean over heads)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--bf16", action="store_true", help="decode under bf16 autocast (faster, not bit-exact)")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("evaluate", help=cmd_evaluate.__doc__)
    p.add_argument("--checkpoint", "-c", nargs="+", required=True)
    p.add_argument("--dataset", help="multi30k or tatoeba")
    p.add_argument("--split", default="test", help="e.g. test_2016_flickr (= test), test_2017_flickr, valid")
    p.add_argument("--src", help="source file (instead of --dataset)")
    p.add_argument("--ref", action="append", help="reference file aligned with --src; repeat for several")
    p.add_argument("--data-dir", help="raw corpora directory (MINITRANS_DATA overrides)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="length penalty exponent")
    p.add_argument("--output-dir", default="outputs/eval")
    p.add_argument("--device", default="cpu")
    p.add_argument("--bf16", action="store_true", help="decode under bf16 autocast (faster, not bit-exact)")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("average", help=cmd_average.__doc__)
    p.add_argument("checkpoints", nargs="+")
    p.add_argument("--output", "-o", required=True)
    p.set_defaults(func=cmd_average)

    p = sub.add_parser("download", help=cmd_download.__doc__)
    p.add_argument("--dataset", required=True, choices=["multi30k", "tatoeba"])
    p.add_argument("--to", required=True, help="directory to write into (then set MINITRANS_DATA to it)")
    p.set_defaults(func=cmd_download)
    return parser


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not log.handlers:  # our own messages; Lightning configures its own logger
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    if argv and argv[0] in LIGHTNING_COMMANDS:
        lightning_main(argv)
        return
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "prepare":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.overrides = extra  # prepare: config overrides such as --data.vocab_size=4000
    if args.command is None:
        build_parser().print_help()
        raise SystemExit(2)
    from minitrans.checkpoint import CheckpointError
    from minitrans.corpus import DataError

    try:
        args.func(args)
    except (DataError, CheckpointError) as err:
        print(f"minitrans {args.command}: error: {err}", file=sys.stderr)
        raise SystemExit(1) from None
