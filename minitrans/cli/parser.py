"""The ``minitrans`` command: its parser, its flags and their help, and the one error boundary.

The command lives in three rooms:

* :mod:`minitrans.cli.train` — ``train`` (= ``fit``), ``validate``, ``test``: Lightning's CLI,
  configured from YAML plus dotted overrides (imported only when a training command runs);
* :mod:`minitrans.cli.commands` — the handlers of ``prepare``, ``translate``, ``evaluate``,
  ``calibrate``, ``shortlist``, ``average``, ``serve``, ``export``, ``distill``, ``download``;
* this module — the flags of every plain command (each defined once, its choices read from the
  table that owns them), and :func:`main`, where every :class:`MinitransError` becomes one line
  on stderr and an exit status.
"""

from __future__ import annotations

import argparse
import logging
import sys

from minitrans._version import __version__
from minitrans.cli.commands import (cmd_adapt, cmd_average, cmd_cache, cmd_calibrate, cmd_distill, cmd_download, cmd_evaluate,
                                cmd_export, cmd_prepare, cmd_serve, cmd_shortlist, cmd_translate)
from minitrans.errors import error_boundary
from minitrans.errors import UsageError
from minitrans.formats import FORMATS, extension_list

log = logging.getLogger("minitrans")
LIGHTNING_COMMANDS = ("train", "fit", "validate", "test")
#: The commands that decode: they run with minitrans.cli.runtime's allocator setting unless
#: MINITRANS_MALLOC=default (training, only with MINITRANS_MALLOC=tuned).
DECODING_COMMANDS = ("translate", "evaluate", "calibrate", "serve", "distill")
PRECISION_HELP = ("number format of decoding. auto: on CTranslate2 int8 (it kept BLEU close to fp32 "
                  "on every model measured: docs/speed.md); on the native engine bf16 on a CPU with AMX or "
                  "AVX-512-BF16 and on a GPU with bf16, fp32 elsewhere. fp32 (both engines give the same "
                  "translations); bf16 (native engine); int8. The stderr line, /v1/model and evaluate's report "
                  "say which was picked and why")
SHORTLIST_HELP = ("score only the checkpoint's vocabulary shortlist (written by `minitrans shortlist`; native "
                  "engine): faster beam search, but it cost BLEU on the models measured (docs/speed.md), so it is "
                  "off by default")


MODEL_HELP = "a .ckpt, or a folder written by `minitrans export`"
ENSEMBLE_HELP = "decode several checkpoints (same tokenizer) as one model, averaging their probabilities"
ENGINE_HELP = ("auto: CTranslate2 when it is installed and the work needs nothing only the native "
               "engine has (a .ckpt is converted once and cached), else native; native (PyTorch: the reference, "
               "attention, --shortlist, --ensemble, bf16); ctranslate2 (an exported folder)")
WORKERS_HELP = ("beam-search batches decoded at once, each by its own thread with a share of the CPU threads "
                "(default 0: two on a CPU with two or more threads, else one)")


def _workers(text: str) -> int:
    """``--workers``: a whole number, 0 for the default."""
    from minitrans.engines.registry import check_workers
    from minitrans.errors import UsageError

    try:
        return check_workers(int(text) if text.strip().isdigit() else text)  # type: ignore[arg-type]
    except UsageError as err:  # argparse words it as "argument --workers: ..."
        raise argparse.ArgumentTypeError(str(err).removeprefix("--workers ")) from None


def add_decoding_flags(p: argparse.ArgumentParser, whose: str = "") -> None:
    """The decoding flags ``translate``, ``evaluate``, ``calibrate`` and ``serve`` share, defined
    once: ``--engine --device --precision --shortlist --workers --beam --alpha`` (and the old
    ``--bf16``/``--int8``, hidden)."""
    from minitrans.precision import PRECISIONS
    from minitrans.engines.auto_engine import ENGINE_CHOICES
    from minitrans.decoding.settings import DEFAULT_ALPHA, DEFAULT_BEAM

    p.add_argument("--engine", choices=ENGINE_CHOICES, default="auto", help=ENGINE_HELP)
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps (default %(default)s)")
    p.add_argument("--precision", choices=PRECISIONS, default="auto", help=PRECISION_HELP)
    add_old_spelling(p, "--bf16", new="--precision bf16", action="store_true")
    add_old_spelling(p, "--int8", new="--precision int8", action="store_true")
    p.add_argument("--shortlist", action=argparse.BooleanOptionalAction, default=False, help=SHORTLIST_HELP)
    p.add_argument("--workers", type=_workers, default=0, help=WORKERS_HELP)
    p.add_argument("--beam", type=int, default=DEFAULT_BEAM, help=f"{whose}beam size (1 = greedy; default %(default)s)")
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                   help=f"{whose}length penalty exponent (default %(default)s)")


OLD_MODEL_FLAGS = ("-c", "--checkpoint")  # the old spellings: -c is the config in `train`


def _deprecated(base: type[argparse.Action], new: str, why: str = "") -> type[argparse.Action]:
    """``base`` that also prints a one-line deprecation note naming the new spelling."""

    class Deprecated(base):  # type: ignore[misc, valid-type]
        def __call__(self, parser, namespace, values, option_string=None):
            note_deprecated(option_string or "", new, why)
            super().__call__(parser, namespace, values, option_string)

    return Deprecated


def note_deprecated(old: str, new: str, why: str = "") -> None:
    """One line on stderr: the old spelling still works, this is the one to use."""
    print(f"minitrans: note: {old} is deprecated{f' ({why})' if why else ''}; use {new}", file=sys.stderr)


_ACTIONS = {"store": argparse._StoreAction, "append": argparse._AppendAction, "extend": argparse._ExtendAction,
            "store_true": argparse._StoreTrueAction}


def add_old_spelling(p: argparse.ArgumentParser, *flags: str, new: str, action: str = "store", why: str = "",
                     **kwargs) -> None:
    """An old spelling of a flag: still accepted for a release, hidden from ``--help``, and
    noted on stderr (one line naming ``new``) when used. Add it after the new flag, so that the
    new flag's default is the one the namespace gets."""
    p.add_argument(*flags, action=_deprecated(_ACTIONS[action], new, why), help=argparse.SUPPRESS, **kwargs)


def add_model_flag(p: argparse.ArgumentParser, action: str, help: str) -> None:
    """``-m/--model``: the model a command reads, the same flag on every command (translate,
    evaluate, serve, export, average). The old spellings ``-c``/``--checkpoint`` still work, with a
    note; they are hidden from ``--help`` because ``-c`` means the config in ``train``."""
    nargs = "+" if action == "extend" else None
    shown_required(p.add_argument("--model", "-m", dest="checkpoint", action=action, nargs=nargs, metavar="MODEL",
                                  help=help + " (required)"))
    add_old_spelling(p, *OLD_MODEL_FLAGS, new="-m/--model", action=action, why="in `train`, -c is the config",
                     dest="checkpoint", nargs=nargs)


def shown_required(action: argparse.Action) -> argparse.Action:
    """Mark a flag that is required but checked by hand (an old spelling or positional may stand
    in for it: :func:`resolve_model_args`), so that usage lines show it without brackets."""
    action.shown_required = True
    return action


def add_held_out_flags(p: argparse.ArgumentParser, dataset_help: str, split_default: str, split_help: str) -> None:
    """The held-out data a command scores on, defined once (``evaluate``, ``calibrate``): a
    corpus split, or ``--src`` with its ``--ref`` files."""
    p.add_argument("--dataset", help=dataset_help)
    p.add_argument("--split", default=split_default, help=split_help)
    p.add_argument("--src", help="source file (instead of --dataset)")
    p.add_argument("--ref", action="append", help="reference file aligned with --src; repeat for several")
    add_data_dir_flag(p)


def add_data_dir_flag(p: argparse.ArgumentParser, why: str = "") -> None:
    """``--data-dir``: where the raw corpora are, over ``$MINITRANS_DATA``."""
    p.add_argument("--data-dir", help=f"raw corpora{why} (default: $MINITRANS_DATA; this flag wins over it)")


class _Downloadable:
    """``download --dataset``'s choices, read from the corpus sources' table
    (:func:`minitrans.data.sources.downloadable`) only when the command is parsed or its choices are
    listed: the table's module loads ``datasets``, which no other command should pay for."""

    @staticmethod
    def _names() -> list[str]:
        from minitrans.data.sources import downloadable

        return downloadable()

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self):
        return iter(self._names())


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
    if getattr(args, "func", None) in (cmd_translate, cmd_evaluate, cmd_serve, cmd_export, cmd_average, cmd_calibrate,
                                       cmd_shortlist, cmd_adapt) and not args.checkpoint \
            or getattr(args, "func", None) is cmd_distill and not args.teacher:
        raise UsageError(f"the following arguments are required: -m/--model (see `minitrans {args.command} --help`)")
    if args.command == "export" and not args.output_dir:
        raise UsageError("the following arguments are required: -o/--output (see `minitrans export --help`)")


def call_handler(handler, args: argparse.Namespace):
    """Run a command's handler (:mod:`minitrans.cli.commands`) with the parsed values its parameters
    name: each handler is a function of typed arguments, not of the namespace."""
    import inspect

    return handler(**{name: getattr(args, name) for name in inspect.signature(handler).parameters})


def build_parser() -> argparse.ArgumentParser:
    from minitrans.engines.ctranslate2_export import QUANTIZATIONS
    from minitrans.engines.registry import EXPORT_FORMATS
    from minitrans.decoding.settings import DEFAULT_ALPHA, DEFAULT_BEAM
    from minitrans.serve.settings import ServerSettings
    from minitrans.decoding.shortlist import FREQUENT as SHORTLIST_FREQUENT, TOP_K as SHORTLIST_TOP_K
    from minitrans.training.adapt import (DEFAULT_ANCHOR, DEFAULT_PEAK_LR, DEFAULT_REPLAY, HELD_OUT_MAX,
                                          REPORT_BEAM)

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
                   help=f"auto: by the --input file's extension ({extension_list()}; anything else is text, "
                        "line by line)")
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
    add_held_out_flags(p, "multi30k, tatoeba, or a component of the checkpoint's mixture (default for a mixture: "
                          "every component)", "test", "e.g. test_2016_flickr (= test), test_2017_flickr, valid")
    p.add_argument("--output", "-o", dest="output_dir", default="outputs/eval", metavar="DIR",
                   help="the folder the report and hypotheses go to (default %(default)s)")
    add_old_spelling(p, "--output-dir", new="-o/--output", dest="output_dir")

    p = command("calibrate", cmd_calibrate)
    add_model_flag(p, "store", "a .ckpt to calibrate (it is not changed)")
    p.add_argument("--output", "-o", required=True, help="the calibrated checkpoint to write (never the input)")
    add_decoding_flags(p)
    p.add_argument("--share", type=float, default=0.1, help="share of validation sentences the flag marks as low")
    add_held_out_flags(p, "a corpus of the checkpoint's (default: every one it was trained on)", "valid",
                       "the held-out split to calibrate on")

    p = command("shortlist", cmd_shortlist)
    add_model_flag(p, "store", "a .ckpt (it is not changed)")
    p.add_argument("--output", "-o", required=True, help="the checkpoint to write, with its shortlist (never the input)")
    p.add_argument("--top-k", type=int, default=SHORTLIST_TOP_K,
                   help="target pieces kept per source piece (default %(default)s)")
    p.add_argument("--frequent", type=int, default=SHORTLIST_FREQUENT,
                   help="most frequent target pieces every batch scores (default %(default)s)")
    add_data_dir_flag(p)

    p = command("average", cmd_average)
    add_model_flag(p, "extend", "checkpoints of one run (same model config and tokenizer)")
    p.add_argument("old_positional", nargs="*", metavar="CKPT", help=argparse.SUPPRESS)
    p.add_argument("--output", "-o", required=True, help="the averaged checkpoint to write (never one of the inputs)")

    p = command("adapt", cmd_adapt)
    add_model_flag(p, "store", "the .ckpt to start from (it is not changed)")
    p.add_argument("--data", action="append", required=True, metavar="FILE",
                   help="your pairs: a TMX, a CSV/TSV (with a header naming the languages or source/target, or "
                        "English<TAB>French lines), or NAME.en with NAME.fr beside it; repeat it for several files")
    p.add_argument("--output", "-o", required=True, metavar="OUT.ckpt",
                   help="the adapted checkpoint to write (its run goes to OUT.run/, its report to OUT.report.json)")
    p.add_argument("--minutes", type=float, default=10.0, help="the training budget in minutes (default %(default)s)")
    p.add_argument("--valid", metavar="FILE", help="your held-out pairs for the report (default: a tenth of --data, "
                                                   f"at most {HELD_OUT_MAX} pairs, never trained on)")
    p.add_argument("--replay", type=float, default=DEFAULT_REPLAY,
                   help="share of the training draws from the parent's own corpora, when they are on this machine: "
                        "what keeps forgetting small (0: off; default %(default)s)")
    p.add_argument("--lr", type=float, default=DEFAULT_PEAK_LR, help="the peak learning rate (default %(default)s)")
    p.add_argument("--anchor", type=float, default=DEFAULT_ANCHOR,
                   help="pull toward the parent's weights, anchor · Σ(θ − θ_parent)² added to the loss: forgets less, "
                        "learns less (0: off; default %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="seed of the split and of the run (default %(default)s)")
    p.add_argument("--beam", type=int, default=REPORT_BEAM,
                   help="beam size of the report's translations (default %(default)s: greedy, as validation; 5 as "
                        "translate takes longer)")
    p.add_argument("--force", action="store_true", help="replace OUT.ckpt and OUT.run/ from an earlier adaptation")
    add_data_dir_flag(p, " (the parent's corpora: replay and the forgetting check)")

    p = command("serve", cmd_serve)
    add_model_flag(p, "append", MODEL_HELP + "; repeat it to serve one model per direction (e.g. en-fr and fr-en: "
                                             "requests choose by source and target)")
    add_decoding_flags(p, "a request's default ")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1: this machine only)")
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
    shown_required(p.add_argument("--output", "-o", dest="output_dir", metavar="OUTPUT",
                                  help="the model folder to write (argos: the .argosmodel file)"))
    p.add_argument("old_positional", nargs="*", metavar="CKPT DIR", help=argparse.SUPPRESS)
    p.add_argument("--format", default="ctranslate2",
                   help=f"the model format to write: {', '.join(EXPORT_FORMATS)} (default %(default)s)")
    p.add_argument("--quantization", default="float32", choices=QUANTIZATIONS,
                   help="weight type of the export (ctranslate2 and argos; web: float32 or int8; hf writes float32)")
    p.add_argument("--runtime", metavar="PATH",
                   help="web: the onnxruntime-web tarball (`npm pack onnxruntime-web@VERSION`) or its dist/ folder "
                        "(default: the cache, else a download from the npm registry)")
    p.add_argument("--force", action="store_true", help="replace an existing output folder")

    p = command("distill", cmd_distill)
    shown_required(p.add_argument("--model", "-m", dest="teacher", action="append", metavar="MODEL",
                                  help="the teacher checkpoint (repeat it: an ensemble) (required)"))
    add_old_spelling(p, "--teacher", new="-m/--model", action="append", dest="teacher")
    p.add_argument("--monolingual", nargs="+", required=True, help="in-domain English text, one sentence per line")
    p.add_argument("--output", "-o", dest="out", default="runs/distill/data", metavar="DIR",
                   help="the corpus folder to write (default %(default)s)")
    add_old_spelling(p, "--out", new="-o/--output", dest="out")
    add_data_dir_flag(p, ", for Multi30k's real pairs")
    p.add_argument("--beam", type=int, default=DEFAULT_BEAM, help="beam size (default %(default)s)")
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="length penalty exponent (default %(default)s)")
    p.add_argument("--chunk", type=int, default=2000, help="lines per resumable chunk (default %(default)s)")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto", help=PRECISION_HELP)
    add_old_spelling(p, "--bf16", new="--precision bf16", action="store_true")
    p.add_argument("--limit", type=int, help="translate only the first N lines (trials)")

    p = command("cache", cmd_cache)
    p.add_argument("--clear", action="store_true",
                   help="remove every conversion (but those another process is loading) and the page's runtime")

    p = command("download", cmd_download)
    p.add_argument("--dataset", required=True, choices=_Downloadable(), metavar="NAME",
                   help="the corpus to fetch: %(choices)s")
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

The cache (CTranslate2 conversions, the page's runtime):
  cache [--clear]

`minitrans COMMAND --help` lists a command's options with their defaults."""


TRAIN_HELP = """\
usage: minitrans {command} --config CONFIG.yaml [--config MORE.yaml] [--KEY VALUE ...] [--resume CKPT]

Train a model from YAML configs; later --config files and dotted --KEY VALUE
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


EVAL_HELP = """\
usage: minitrans {command} --config CONFIG.yaml --ckpt_path CKPT [--KEY VALUE ...]

{what} a checkpoint on its config's {split} data as training validates: the loss and greedy
BLEU per corpus (Lightning's {command} loop; the config's data section and --KEY VALUE overrides
are read as `train` reads them, the model's settings come from the checkpoint).

common options:
  --config FILE                  the run's config (configs/*.yaml)
  --ckpt_path CKPT               the checkpoint to score (--resume CKPT is the same)
  --data.val_max_sentences N     how many sentences per corpus (validate)
  --trainer.default_root_dir DIR where the CSV log goes

For beam search, several checkpoints, other test sets or your own files: minitrans evaluate.
Every option, with its default: minitrans {command} --help-all."""


class _DefaultsFormatter(argparse.HelpFormatter):
    """Help that shows each option's default (when it has one worth showing), and a flag
    required by hand (:func:`shown_required`) as required in the usage line."""

    def _format_usage(self, usage, actions, groups, prefix) -> str:
        import re

        text = super()._format_usage(usage, actions, groups, prefix)
        for action in actions:
            if getattr(action, "shown_required", False):
                flag = re.escape(action.option_strings[0])
                text = re.sub(rf"\[({flag} [A-Z_]+(?: \[[A-Z_]+ \.\.\.\])?)\]", r"\1", text)
        return text

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
    from minitrans.cli.runtime import tune_allocator

    tune_allocator(decoding=as_command and command in DECODING_COMMANDS)  # a Python caller keeps its allocator
    with error_boundary(f"minitrans {command or ''}".rstrip(), debug):
        if command in LIGHTNING_COMMANDS:
            if {"-h", "--help"} & set(argv) and "--help-all" not in argv:
                if command in ("validate", "test"):
                    print(EVAL_HELP.format(command=command, what=command.capitalize(),
                                           split="validation" if command == "validate" else "test"))
                else:
                    print(TRAIN_HELP.format(command=command))
                return
            from minitrans.cli.train import lightning_main

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
        call_handler(args.func, args)
