"""The handlers of the plain commands: ``prepare``, ``translate``, ``evaluate``, ``calibrate``,
``shortlist``, ``average``, ``serve``, ``export``, ``distill``, ``download``.

Each takes the parsed arguments of its command (:func:`minitrans.cli.build_parser` defines them
and their help) and does the work through the library; a failure is a
:class:`~minitrans.errors.MinitransError` that :func:`minitrans.cli.main` prints as one line.
Heavy modules (the engines, the server, the data pipeline) are imported inside the handler that
needs them, so that ``minitrans --help`` and each command load only what they use.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import sys
import time
from pathlib import Path

from minitrans import languages
from minitrans.errors import UsageError
from minitrans.formats import format_for
from minitrans.progress import Progress
from minitrans.textio import (atomic_output, check_writable, check_writable_folder, decode_text, is_readable_file,
                              iter_lines, read_lines, same_file)

log = logging.getLogger("minitrans")
#: Lines translated at once from a file or stdin: large enough for full decoding batches.
CHUNK_LINES = 1000

def cmd_prepare(a: argparse.Namespace) -> None:
    """Build (or reuse) the data cache of a training config and print corpus statistics."""
    configs = [arg for path in a.config for arg in ("--config", path)]  # merged as `train` merges them
    from minitrans.train_cli import lightning_main

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
    from minitrans.plotting import check_attention_view, plot_attention, plot_path

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
                    written = plot_attention(shown, a.plot_attention, a.layer, a.head, translator.languages)
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
        translator = Translator.load(paths[0], a.engine, device=a.device, **engine_options(a),
                                     attention=bool(getattr(a, "plot_attention", None)))
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
    check_writable_folder(a.output_dir, "-o/--output")
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
    # Scored as `translate` decodes it by default (--engine auto), so that the threshold fits the
    # scores users get; the record says which engine and precision that was.
    translator = Translator.load(a.checkpoint, a.engine, device=a.device, **engine_options(a))
    print(translator.describe(), file=sys.stderr)
    results = translator.translate_detailed(sources, beam_size=a.beam, alpha=a.alpha, split=False,
                                            progress=Progress(len(sources), f"calibrating on {a.split}"))
    decoded = translator.decoding()
    try:
        record = calibrate([r.confidence or 0.0 for r in results], [r.text for r in results], refs, a.share,
                           beam=a.beam, alpha=a.alpha, split=a.split if a.src is None else a.src,
                           engine=decoded["engine"], precision=decoded["precision"])
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
    """Export a checkpoint for another program: CTranslate2, Argos Translate / LibreTranslate, Hugging Face
    transformers, or a page that translates in the browser."""
    from minitrans.engines import writer

    if a.runtime and a.format != "web":
        raise UsageError("--runtime is the onnxruntime-web of --format web; the other formats have no runtime to give.")
    options = {"runtime": a.runtime} if a.format == "web" else {}
    out = writer(a.format).export(a.checkpoint, a.output_dir, a.quantization, a.force, **options)
    how = {"argos": f"install it with argostranslate.package.install_from_path({str(out)!r}) (LibreTranslate "
                    "serves the packages argos has installed)",
           "hf": f"load it with transformers' AutoModelForSeq2SeqLM.from_pretrained({str(out)!r})",
           "web": f"serve it with `python -m http.server -d {out}` and open http://localhost:8000/ (a page opened "
                  "as a file cannot load its model)"}
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
