"""The handlers of the plain commands: ``prepare``, ``translate``, ``evaluate``, ``calibrate``,
``shortlist``, ``average``, ``serve``, ``export``, ``distill``, ``download``, ``cache``.

Each is a function of its command's flags, as typed keyword arguments named as the parser's
destinations (:func:`minitrans.cli.parser.build_parser` defines them and their help;
:func:`minitrans.cli.parser.call_handler` passes them), and does the work through the library; a failure
is a :class:`~minitrans.errors.MinitransError` that :func:`minitrans.cli.parser.main` prints as one line.
The flags every decoding command shares travel together as a :class:`Decoding`, and those of a
held-out set as a :class:`HeldOut`.
Heavy modules (the engines, the server, the data pipeline) are imported inside the handler that
needs them, so that ``minitrans --help`` and each command load only what they use.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from minitrans.text import languages
from minitrans.errors import UsageError
from minitrans.formats import format_for
from minitrans.cli.progress import Progress
from minitrans.text.textio import (atomic_output, check_writable, check_writable_folder, decode_text, is_readable_file,
                              iter_lines, read_lines, same_file)

log = logging.getLogger("minitrans")
#: Lines translated at once from a file or stdin: large enough for full decoding batches.
CHUNK_LINES = 1000


@dataclass(frozen=True)
class Decoding:
    """The engine flags of every decoding command (:func:`minitrans.cli.parser.add_decoding_flags`):
    which engine, on which device, in which precision, with how many workers."""

    engine: str | None
    device: str
    precision: str
    shortlist: bool
    workers: int

    @classmethod
    def of(cls, engine: str | None, device: str, precision: str | None, bf16: bool, int8: bool, shortlist: bool,
           workers: int) -> "Decoding":
        """From the flags as parsed: ``--bf16``/``--int8`` folded into the precision."""
        from minitrans.precision import requested

        return cls(engine, device, requested(precision, bf16, int8), shortlist, workers)

    @property
    def options(self) -> dict:
        """The engine options of :meth:`Translator.load`."""
        return {"precision": self.precision, "shortlist": self.shortlist, "workers": self.workers}


@dataclass(frozen=True)
class HeldOut:
    """The flags that name a held-out set: ``--src/--ref`` files, or ``--split`` of ``--dataset``
    (default: every corpus the checkpoint was trained on) under ``--data-dir``."""

    src: str | None
    ref: list[str] | None
    split: str
    dataset: str | None
    data_dir: str | None

def cmd_prepare(config: list[str], overrides: list[str]) -> None:
    """Build (or reuse) the data cache of a training config and print corpus statistics."""
    configs = [arg for path in config for arg in ("--config", path)]  # merged as `train` merges them
    from minitrans.cli.train import lightning_main

    cli = lightning_main([*configs, *overrides], run=False)  # validates the whole config
    dm = cli.datamodule
    dm.prepare_data()
    dm.setup("fit")
    stats = dm.statistics()
    print(json.dumps(stats, indent=2, ensure_ascii=False))


def _lines(sentences: list[str], input: str | None):
    """Yield ``(first line number, chunk of input lines)``: arguments, a file, or stdin (line by
    line when interactive). Lines are split on ``\\n`` only, as ``wc -l`` counts them. A file is
    read and decoded whole before anything is translated, so a bad byte stops the command at
    once, naming its line, and is then translated in chunks of :data:`CHUNK_LINES`, so that the
    first lines come out (``| head``) before the last are decoded. Stdin is decoded chunk by
    chunk, so what was translated before a bad line has already been written."""
    if sentences:
        yield 1, list(sentences)
        return
    if input:
        lines = read_lines(input, "Input file")
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


def cmd_translate(checkpoint: list[str], sentences: list[str], input: str | None, output: str | None,
                  format: str | None, beam: int, alpha: float, nbest: int, json: bool, no_split: bool,
                  plot_attention: str | None, layer: int | None, head: int | None, ensemble: bool, engine: str | None,
                  device: str, precision: str | None, bf16: bool, int8: bool, shortlist: bool, workers: int) -> None:
    """Translate sentences (arguments, --input FILE or stdin) to stdout or --output FILE."""
    from minitrans.decoding.settings import check_decoding
    from minitrans.evaluation.plotting import check_attention_view, plot_attention as draw_attention, plot_path

    # Everything that can be checked is checked before the model is loaded.
    input = None if input == "-" else input  # "-": standard input and output, as Unix tools read it
    output = None if output == "-" else output
    check_decoding(beam, alpha, nbest)
    _check_device(device)
    if input and not is_readable_file(input):
        what = "is a folder" if Path(input).is_dir() else "no such file"
        raise UsageError(f"--input {input}: {what}.")
    if output:
        check_writable(output, "--output")
        if input and same_file(input, output):
            raise UsageError(f"--output {output} is the --input file; it would be overwritten while being read. "
                             "Write to another file, then rename it.")
    if plot_attention:
        check_writable(plot_path(plot_attention), "--plot-attention")
    decoding = Decoding.of(engine, device, precision, bf16, int8, shortlist, workers)
    fmt = format_for(format, input)
    if fmt != "text":
        if sentences or json or nbest > 1 or plot_attention or no_split:
            raise UsageError(f"--format {fmt} translates a whole document from --input (or stdin): it takes no "
                             "sentence arguments, --json, --nbest, --plot-attention or --no-split.")
        return _translate_document(checkpoint, input, output, fmt, beam, alpha, ensemble, decoding)
    translator = _load_translator(checkpoint, ensemble, decoding, attention=bool(plot_attention))
    if plot_attention and (translator.engine.name != "native" or ensemble):
        raise UsageError("--plot-attention needs one native model (a .ckpt, no --ensemble): CTranslate2 and "
                         "ensembles return no attention weights here.")
    check_attention_view(translator.config, layer, head)
    with contextlib.ExitStack() as stack:
        # A file output appears whole when the command succeeds, and never half-written.
        out = stack.enter_context(atomic_output(output)) if output else sys.stdout
        plotted = False
        started, done, words = time.perf_counter(), 0, 0
        progress = Progress(None, f"translating {input or 'the input'}") if output else None  # long lines
        for first, chunk in _lines(sentences, input):
            want_plot = plot_attention is not None and not plotted
            results = translator.translate_detailed(chunk, beam_size=beam, alpha=alpha, nbest=nbest,
                                                    attention=want_plot, first_line=first, split=not no_split,
                                                    progress=progress)
            for number, r in enumerate(results, first):
                if json:
                    out.write(_json_line({"line": number, "source": r.source, "translation": r.text,
                                          "score": r.score,
                                          "nbest": [{"translation": t, "score": s} for t, s in r.nbest],
                                          "truncated": r.truncated, "confidence": r.confidence,
                                          "low_confidence": r.low_confidence,
                                          "sentences": [{"source": s.source, "translation": s.text, "score": s.score,
                                                         "truncated": s.truncated, "confidence": s.confidence,
                                                         "low_confidence": s.low_confidence}
                                                        for s in r.sentences]}))
                elif nbest > 1:  # line number, translation, score: realignable with the input
                    out.write("".join(f"{number}\t{_one_line(t)}\t{s:.4f}\n" for t, s in r.nbest))
                else:
                    out.write(_one_line(r.text) + "\n")
            out.flush()
            done += len(chunk)
            words += sum(len(line.split()) for line in chunk)
            if output and (done > len(chunk) or len(chunk) >= CHUNK_LINES):  # long work shows progress
                print(f"translated {done} lines ({done / max(time.perf_counter() - started, 1e-9):.1f} lines/s)",
                      file=sys.stderr)
            if want_plot:  # the first sentence that was decoded
                shown = next((s for r in results for s in (r.sentences or [r]) if s.attention is not None), None)
                if shown is not None:
                    written = draw_attention(shown, plot_attention, layer, head, translator.languages)
                    print(f"attention plot: {written}", file=sys.stderr)
                    plotted = True
    if output:  # the file appeared only now (atomically): say what went where
        seconds = time.perf_counter() - started
        print(f"wrote {done} translations of {input or 'the input'} to {output} in {seconds:.1f} s "
              f"({words / max(seconds, 1e-9):.0f} source words/s)", file=sys.stderr)


def _translate_document(checkpoint: list[str], input: str | None, output: str | None, fmt: str, beam: int,
                        alpha: float, ensemble: bool, decoding: Decoding) -> None:
    """``translate --format html|srt``: the whole document in one batch, markup kept, written
    atomically (or to stdout)."""
    from minitrans.formats import translate_document

    if input:
        data = Path(input).read_bytes()
        where = input
    else:
        data, where = (getattr(sys.stdin, "buffer", None) or sys.stdin).read(), "<stdin>"
        data = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    document = decode_text(data, where)
    translator = _load_translator(checkpoint, ensemble, decoding)
    progress = Progress(None, f"translating {where}")
    started = time.perf_counter()
    out = translate_document(fmt, document, lambda texts: translator.translate(
        texts, beam_size=beam, alpha=alpha, progress=progress), translator.source_language)
    seconds = time.perf_counter() - started
    if output:
        with atomic_output(output) as f:
            f.write(out)
        words = len(document.split())
        print(f"wrote {fmt} {output}: {progress.done:,} sentences translated in {seconds:.1f} s "
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


def _load_translator(paths: list[str], ensemble: bool, decoding: Decoding, attention: bool = False):
    """One model (either engine), or with --ensemble several native checkpoints as one."""
    from minitrans.translate import Translator

    if len(paths) > 1 and not ensemble:
        raise UsageError(f"{len(paths)} models given: pass --ensemble to decode them as one, or give one.")
    if ensemble:
        if decoding.engine == "ctranslate2":
            raise UsageError("--ensemble runs on the native engine: give .ckpt files without --engine ctranslate2.")
        translator = Translator.from_checkpoints(paths, device=decoding.device, **decoding.options)
    else:
        translator = Translator.load(paths[0], decoding.engine, device=decoding.device, **decoding.options,
                                     attention=attention)
    print(translator.describe(), file=sys.stderr)
    return translator


def _held_out_sets(held_out: HeldOut, checkpoint: str) -> list[tuple[str, str, tuple[list, list]]]:
    """``(label, dataset, (sources, references))`` of ``--src/--ref``, or of ``--split`` of
    ``--dataset`` (default: every corpus the checkpoint was trained on, with its split settings)."""
    from minitrans.data.corpus import data_dir_for
    from minitrans.engines.registry import load_metadata
    from minitrans.data.heldout import eval_sets, load_eval_data

    split = held_out.split
    if held_out.src is not None:
        return [(Path(held_out.src).stem, "files", load_eval_data(None, split, held_out.src, held_out.ref))]
    meta = load_metadata(checkpoint)
    trained_on = meta.get("data", {})
    source_lang = languages.of(meta)[0]
    sets = []
    for spec in eval_sets(trained_on, held_out.dataset):
        if spec["split_settings"] is None:
            log.warning("The checkpoint was not trained on %r: check that its %s split cannot overlap the "
                        "training data.", spec["dataset"], split)
        data = load_eval_data(spec["dataset"], split, None, None, data_dir_for(held_out.data_dir, trained_on.get("data_dir")),
                              spec["split_settings"], spec["files"], spec["hub_id"], source_lang)
        label = f"{spec['name']}.{split}" if trained_on.get("dataset") == "mixture" else split
        sets.append((label, spec["name"], data))
    return sets


def _check_one_direction(paths: list[str]) -> None:
    """A UsageError when the models do not all translate in one direction (one test set's
    sources and references serve them all)."""
    from minitrans.engines.registry import load_metadata

    first = (paths[0], load_metadata(paths[0]))
    for path in paths[1:]:
        languages.check_same("evaluate", first, (path, load_metadata(path)), UsageError)


def cmd_evaluate(checkpoint: list[str], output_dir: str, beam: int, alpha: float, ensemble: bool, src: str | None,
                 ref: list[str] | None, split: str, dataset: str | None, data_dir: str | None, engine: str | None,
                 device: str, precision: str | None, bf16: bool, int8: bool, shortlist: bool, workers: int) -> None:
    """Translate a test set with one or more checkpoints and score BLEU and chrF."""
    from minitrans.evaluation.evaluate import evaluate_checkpoint, output_stem, write_outputs
    from minitrans.decoding.settings import check_decoding

    check_decoding(beam, alpha)
    _check_device(device)
    check_writable_folder(output_dir, "-o/--output")
    decoding = Decoding.of(engine, device, precision, bf16, int8, shortlist, workers)
    sets = _held_out_sets(HeldOut(src, ref, split, dataset, data_dir), checkpoint[0])
    _check_one_direction(checkpoint)
    reports = []
    models = [(" + ".join(checkpoint), checkpoint)] if ensemble else [(ckpt, [ckpt]) for ckpt in checkpoint]
    data_files = [src, *(ref or [])] if src is not None else []
    for ckpt, paths in models:
        translator = _load_translator(paths, ensemble, decoding)
        for label, name, (sources, refs) in sets:
            progress = Progress(len(sources), f"evaluating {Path(ckpt).name} on {label}")  # long test sets
            report, hyps = evaluate_checkpoint(ckpt, sources, refs, beam, alpha, device, translator=translator,
                                               progress=progress)
            report.update({"dataset": name, "split": split if src is None else label})
            path = write_outputs(report, hyps, output_dir, output_stem(paths, label, beam, data_files))
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


def cmd_calibrate(checkpoint: str, output: str, share: float, beam: int, alpha: float, src: str | None,
                  ref: list[str] | None, split: str, dataset: str | None, data_dir: str | None, engine: str | None,
                  device: str, precision: str | None, bf16: bool, int8: bool, shortlist: bool, workers: int) -> None:
    """Calibrate the low-confidence flag on a validation split; write it into a new checkpoint."""
    from minitrans.checkpoint import with_metadata
    from minitrans.decoding.confidence import calibrate
    from minitrans.decoding.settings import check_decoding
    from minitrans.translate import Translator

    check_decoding(beam, alpha)
    _check_device(device)
    if not 0.0 < share < 1.0:
        raise UsageError(f"--share {share}: give a share between 0 and 1, e.g. 0.1 for the worst tenth.")
    check_writable(output, "--output")
    if same_file(checkpoint, output):  # before minutes of decoding, not after
        raise UsageError(f"--output {output} is the checkpoint read (it may be a resumable training "
                         "checkpoint); write the calibrated model to a new file.")
    decoding = Decoding.of(engine, device, precision, bf16, int8, shortlist, workers)
    sources, refs = [], []
    for _, _, (s, r) in _held_out_sets(HeldOut(src, ref, split, dataset, data_dir), checkpoint):  # a mixture: one set
        sources, refs = sources + s, refs + r
    if engine == "ctranslate2" or not str(checkpoint).endswith(".ckpt") and Path(checkpoint).is_dir():
        raise UsageError("calibrate writes a checkpoint: give the .ckpt, then export the calibrated one.")
    # Scored as `translate` decodes it by default (--engine auto), so that the threshold fits the
    # scores users get; the record says which engine and precision that was.
    translator = Translator.load(checkpoint, engine, device=device, **decoding.options)
    print(translator.describe(), file=sys.stderr)
    results = translator.translate_detailed(sources, beam_size=beam, alpha=alpha, split=False,
                                            progress=Progress(len(sources), f"calibrating on {split}"))
    decoded = translator.decoding()
    try:
        record = calibrate([r.confidence or 0.0 for r in results], [r.text for r in results], refs, share,
                           beam=beam, alpha=alpha, split=split if src is None else src,
                           engine=decoded["engine"], precision=decoded["precision"])
    except ValueError as err:
        raise UsageError(str(err)) from None
    with_metadata(checkpoint, output, confidence=record)
    print(json.dumps(record, indent=2))
    print(f"wrote {output}: its translations carry low_confidence (the worst {share:.0%} of {split})",
          file=sys.stderr)


def cmd_shortlist(checkpoint: str, output: str, top_k: int, frequent: int, data_dir: str | None) -> None:
    """Build a vocabulary shortlist from a checkpoint's training pairs; write it into a new checkpoint."""
    from minitrans.checkpoint import checkpoint_metadata, with_metadata
    from minitrans.data.datamodule import TranslationDataModule
    from minitrans.decoding.shortlist import build

    check_writable(output, "--output")
    if same_file(checkpoint, output):
        raise UsageError(f"--output {output} is the checkpoint read (it may be a resumable training "
                         "checkpoint); write the checkpoint with its shortlist to a new file.")
    if top_k < 1 or frequent < 0:
        raise UsageError(f"--top-k must be ≥ 1 and --frequent ≥ 0, got {top_k} and {frequent}.")
    meta = checkpoint_metadata(checkpoint)
    dm = TranslationDataModule.from_settings(meta.get("data", {}), data_dir)
    dm.prepare_data()
    dm.setup("fit")
    if dm.tokenizer.fingerprint() != meta["tokenizer_fingerprint"]:
        raise UsageError(f"{checkpoint}: the data prepared from its recorded settings has another SentencePiece "
                         "model than the checkpoint's; point --data-dir (or MINITRANS_DATA) at the corpora it was "
                         "trained on.")
    shortlist = build(dm.train_pairs(), dm.tokenizer.vocab_size, top_k, frequent)
    with_metadata(checkpoint, output, shortlist=shortlist.to_entry())
    sizes = (shortlist.table >= 0).sum(1).float()
    print(json.dumps({"pairs": shortlist.pairs, "top_k": top_k, "frequent": frequent,
                      "always_scored": len(shortlist.always),  # the frequent pieces found, eos and unk
                      "mean_list": round(float(sizes[sizes > 0].mean()), 1) if bool((sizes > 0).any()) else 0}))
    print(f"wrote {output}: `minitrans translate -m {output} --shortlist` scores only the shortlist",
          file=sys.stderr)


def cmd_average(checkpoint: list[str], output: str) -> None:
    """Average the weights of compatible checkpoints into a new self-contained checkpoint."""
    from minitrans.checkpoint import average_checkpoints

    average_checkpoints(checkpoint, output)
    print(f"averaged {len(checkpoint)} checkpoints into {output}")


def cmd_adapt(checkpoint: str, data: list[str], output: str, minutes: float, valid: str | None, replay: float,
              lr: float, anchor: float, seed: int, data_dir: str | None, force: bool, beam: int | None) -> None:
    """Adapt a trained model to your own pairs (TMX, CSV/TSV, aligned files): a short run from its weights, then BLEU and chrF before and after."""
    from minitrans.training.adapt import adapt

    result = adapt(checkpoint, data, output, minutes=minutes, valid=valid, replay=replay, peak_lr=lr, seed=seed,
                   data_dir=data_dir, force=force, beam_size=beam, anchor=anchor)
    print(result["table"])
    print(f"\nwrote {output} (its report: {Path(output).with_name(Path(output).stem + '.report.json')}) in "
          f"{result['seconds'] / 60:.1f} minutes")


def cmd_serve(checkpoint: list[str], host: str, port: int, beam: int, alpha: float, max_sentences: int, max_chars: int,
              max_queue: int, no_batching: bool, batch_wait_ms: float, timeout: float, max_attention_values: int,
              read_timeout: float, max_connections: int, cors_origin: list[str] | None, api_keys: str | None,
              engine: str | None, device: str, precision: str | None, bf16: bool, int8: bool, shortlist: bool,
              workers: int) -> None:
    """Serve checkpoints over HTTP, one per direction: the JSON API, LibreTranslate's API and the web page (needs the [serve] extra)."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise UsageError('`minitrans serve` needs FastAPI and uvicorn: pip install -e ".[serve]"') from None
    from minitrans.decoding.settings import check_decoding
    from minitrans.serve.app import ServerSettings, check_port, serve
    from minitrans.serve.settings import read_api_keys

    check_decoding(beam, alpha)
    _check_device(device)
    if not 0 < port < 65536:
        raise UsageError(f"--port must lie in 1..65535, got {port}.")
    settings = ServerSettings(max_sentences=max_sentences, max_chars=max_chars, max_queue=max_queue,
                              batching=not no_batching, batch_wait_ms=batch_wait_ms, timeout_s=timeout,
                              beam=beam, alpha=alpha, max_attention_values=max_attention_values,
                              read_timeout_s=read_timeout, max_connections=max_connections,
                              cors_origins=tuple(cors_origin or ()),
                              api_keys=read_api_keys(api_keys) if api_keys else ())
    if host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("Serving on %s: reachable from other machines. minitrans has no authentication.", host)
    check_port(host, port)  # before the model loads: a port in use is one line, not uvicorn's traceback
    decoding = Decoding.of(engine, device, precision, bf16, int8, shortlist, workers)
    serve(checkpoint, host, port, device, settings=settings, engine=engine, **decoding.options)


def cmd_export(checkpoint: str, output_dir: str, format: str, quantization: str, force: bool, runtime: str | None) -> None:
    """Export a checkpoint for another program: CTranslate2, Argos Translate / LibreTranslate, Hugging Face
    transformers, or a page that translates in the browser."""
    from minitrans.engines.registry import writer

    if runtime and format != "web":
        raise UsageError("--runtime is the onnxruntime-web of --format web; the other formats have no runtime to give.")
    options = {"runtime": runtime} if format == "web" else {}
    out = writer(format).export(checkpoint, output_dir, quantization, force, **options)
    how = {"argos": f"install it with argostranslate.package.install_from_path({str(out)!r}) (LibreTranslate "
                    "serves the packages argos has installed)",
           "hf": f"load it with transformers' AutoModelForSeq2SeqLM.from_pretrained({str(out)!r})",
           "web": f"serve it with `python -m http.server -d {out}` and open http://localhost:8000/ (a page opened "
                  "as a file cannot load its model)"}
    print(f"exported {checkpoint} to {out} ({quantization}); "
          + how.get(format, f"translate with `minitrans translate --engine {format} --model {out}`"))


def cmd_distill(teacher: list[str], monolingual: list[str], out: str, data_dir: str | None, beam: int, alpha: float,
                chunk: int, limit: int | None, precision: str | None, bf16: bool) -> None:
    """Make distillation / self-training data: a teacher translates in-domain English (resumable)."""
    from minitrans.training.distill import distill
    from minitrans.precision import requested

    out = distill(teacher, monolingual, out, data_dir, beam, alpha, chunk, limit=limit,
                  precision=requested(precision, bf16))
    print(f"wrote {out}: train it with `minitrans train --config configs/distill.yaml`")


def cmd_download(dataset: str, to: str) -> None:
    """Download a public corpus (needs the network)."""
    from minitrans.data.sources import download

    print(download(dataset, to))


def cmd_cache(clear: bool) -> None:
    """List what minitrans keeps in its cache (CTranslate2 conversions, the page's runtime), or
    empty it with --clear."""
    from minitrans.export import web_runtime
    from minitrans.engines import ctranslate2_cache
    from minitrans.engines.usercache import cache_root, discard, limit_bytes

    if clear:
        removed = ctranslate2_cache.clear()
        runtime = web_runtime.cached_folder()
        if runtime.exists() or runtime.is_symlink():
            discard(runtime, web_runtime.FILES)
        print(f"removed {len(removed)} conversion{'s' * (len(removed) != 1)} and the page's runtime from {cache_root()}")
        return
    entries = ctranslate2_cache.entries()
    total = sum(size for _, size in entries)
    print(f"{cache_root()}: {len(entries)} conversion{'s' * (len(entries) != 1)}, {total / 1e6:.1f} MB "
          f"(bound {limit_bytes() / 1e6:.0f} MB: MINITRANS_CACHE_MB)")
    for path, size in entries:
        print(f"  {path.name}  {size / 1e6:.1f} MB")
    runtime = web_runtime.cached_folder()
    print(f"the page's runtime (onnxruntime-web {web_runtime.VERSION}): "
          f"{runtime if runtime.is_dir() else 'not cached'}")
