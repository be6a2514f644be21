"""``minitrans export --format web``: a checkpoint as a static page that translates in the
browser, with no server and no network: the model runs in onnxruntime-web (WebAssembly).

The folder, servable by any static server (``python -m http.server`` in it):

==============================  ==============================================================
``index.html``, ``page.js``,    the page (``style.css``, ``heatmap.js`` and ``results.js`` are
``style.css``, ``heatmap.js``,  ``minitrans serve``'s page's): text in, translation out,
``results.js``                  paragraphs kept, the heatmap
``translator.js``,              the translator: onnxruntime-web runs the graphs; a SentencePiece
``tokenizer.js``, ``search.js``, tokenizer, greedy and beam search and the sentence splitter in
``segment.js``                  JavaScript (what minitrans does in Python, held to it by tests)
``translate.mjs``               the same translator under Node: ``node translate.mjs < in > out``
``encoder.onnx``,               the model (:mod:`minitrans.export.onnx_graphs`), fp32 or int8
``decoder.onnx``
``tokenizer.json``              the SentencePiece model's pieces, scores and settings
``ort.wasm.bundle.min.mjs``,    onnxruntime-web, pinned and checked (:mod:`minitrans.export.web_runtime`)
``ort-wasm-simd-threaded.wasm``
``manifest.json``               model sha256, direction, dimensions, precision, decoding limits,
                                every file's sha256, the runtime's version, the licences
``model.html``, ``NOTICE.md``   the model card; the licences of everything bundled (ASCII: a static
                                server sends ``.md`` with no charset)
==============================  ==============================================================

Why not ``file://``: browsers refuse ``fetch`` of local files and module scripts from a page
opened as a file (each file is its own opaque origin), so the page must be served over HTTP.
Threads: onnxruntime-web uses several only where the page is cross-origin isolated (served with
``Cross-Origin-Opener-Policy: same-origin`` and ``Cross-Origin-Embedder-Policy: require-corp``);
otherwise one. Needs the ``[web]`` extra (onnx, onnxruntime for int8).
"""

from __future__ import annotations

import json
import os
from html import escape
from importlib import resources
from pathlib import Path

from minitrans.export import web_runtime
from minitrans.text import languages
from minitrans._version import __version__
from minitrans.checkpoint import load_for_inference, published
from minitrans.errors import UsageError
from minitrans.export.onnx_graphs import QUANTIZATIONS, export_graphs
from minitrans.export.sentence_onnx import ABBREVIATIONS
from minitrans.decoding.settings import DEFAULT_ALPHA, DEFAULT_MAX_LEN_A, DEFAULT_MAX_LEN_B
from minitrans.text.textio import atomic_folder, check_replaceable_folder, file_sha256

__all__ = ["QUANTIZATIONS", "export"]

#: The page's own files, shipped in the package (minitrans/export/page/), copied as they are.
PAGE_FILES = ("index.html", "page.js", "translator.js", "tokenizer.js", "search.js", "segment.js", "translate.mjs")
#: The files the page shares with `minitrans serve`'s page (minitrans/serve/static/).
SHARED_FILES = ("style.css", "heatmap.js", "results.js")
FILES = (*PAGE_FILES, *SHARED_FILES, "encoder.onnx", "decoder.onnx", "tokenizer.json", *web_runtime.FILES,
         "manifest.json", "model.html", "NOTICE.md")


def tokenizer_spec(tokenizer) -> dict:
    """``tokenizer.json``: what tokenizer.js needs of the SentencePiece model."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(tokenizer.model_proto)
    trainer, norm = proto.trainer_spec, proto.normalizer_spec
    if trainer.model_type != trainer.UNIGRAM or norm.precompiled_charsmap or trainer.treat_whitespace_as_suffix:
        raise UsageError("export --format web reads SentencePiece unigram models with identity normalisation "
                         "(what minitrans trains); this checkpoint's tokenizer is another kind.")
    return {"model_type": "unigram", "byte_fallback": trainer.byte_fallback, "unk_surface": trainer.unk_surface,
            "normalizer": {"name": norm.name, "add_dummy_prefix": norm.add_dummy_prefix,
                           "remove_extra_whitespaces": norm.remove_extra_whitespaces,
                           "escape_whitespaces": norm.escape_whitespaces},
            "pieces": [[p.piece, p.score, p.type] for p in proto.pieces]}


def export(checkpoint: str | os.PathLike, output_dir: str | os.PathLike, quantization: str = "float32",
           force: bool = False, runtime: str | os.PathLike | None = None) -> Path:
    """Write the page folder for ``checkpoint``; returns it. ``runtime``: where onnxruntime-web
    comes from (:func:`minitrans.export.web_runtime.runtime_files`). Built beside ``output_dir`` and
    renamed into place when complete; an existing folder is replaced only with ``force`` and
    only when it is a web export of ours."""
    if quantization not in QUANTIZATIONS:
        raise UsageError(f"export --format web writes {' or '.join(QUANTIZATIONS)} graphs, not {quantization!r}.")
    output_dir = Path(output_dir)
    check_replaceable_folder(output_dir, checkpoint, force, FILES, _is_ours, "minitrans export --format web")
    ort_files = web_runtime.runtime_files(runtime)  # before the slow part: a missing runtime is one line now
    model, tokenizer, meta = load_for_inference(checkpoint)
    source, target = languages.of(meta)
    page = resources.files("minitrans.export") / "page"
    static = resources.files("minitrans.serve") / "static"
    with atomic_folder(output_dir, replace=True) as tmp:
        export_graphs(model, tmp, quantization)
        for name in PAGE_FILES:
            (tmp / name).write_bytes((page / name).read_bytes())
        for name in SHARED_FILES:
            (tmp / name).write_bytes((static / name).read_bytes())
        _write_json(tmp / "tokenizer.json", tokenizer_spec(tokenizer), indent=None)
        for name, data in ort_files.items():
            (tmp / name).write_bytes(data)
        (tmp / "model.html").write_text(model_card(meta, source, target, Path(checkpoint).name, quantization),
                                        encoding="utf-8")
        (tmp / "NOTICE.md").write_text((page / "NOTICE.md").read_text(encoding="utf-8"), encoding="utf-8")
        decoding = meta.get("decoding") or {}
        manifest = {
            "format": "minitrans-web", "minitrans_version": __version__,
            "model_sha256": file_sha256(checkpoint), "source_checkpoint": Path(checkpoint).name,
            "direction": {"source": source, "target": target, "source_name": languages.name(source),
                          "target_name": languages.name(target)},
            "model_config": model.config.to_dict(), "parameters": sum(p.numel() for p in model.parameters()),
            "precision": quantization,
            "decoding": {"max_len_a": decoding.get("max_len_a", DEFAULT_MAX_LEN_A),
                         "max_len_b": decoding.get("max_len_b", DEFAULT_MAX_LEN_B), "alpha": DEFAULT_ALPHA},
            "segmentation": {"splitter": "Intl.Segmenter", "abbreviations": list(ABBREVIATIONS.get(source, ()))},
            "runtime": {"name": "onnxruntime-web", "version": web_runtime.VERSION, "licence": web_runtime.LICENCE,
                        "source": web_runtime.TARBALL, "sha256": dict(web_runtime.FILES)},
            "licences": {"minitrans (the page, translator and tokenizer code)": "MIT",
                         "onnxruntime-web": web_runtime.LICENCE,
                         "the model": "trained by minitrans on the corpora in model.html, under their licences"},
            "files": {p.name: {"bytes": p.stat().st_size, "sha256": file_sha256(p)} for p in sorted(tmp.iterdir())},
            **published(meta, ("data", "validation", "adapted")),
        }
        _write_json(tmp / "manifest.json", manifest)
    return output_dir


def model_card(meta: dict, source: str, target: str, checkpoint_name: str, quantization: str) -> str:
    """``model.html``: what the model is, what it was trained on, how well it did (HTML with its
    charset: a static server sends ``.md`` files with none, and browsers then misread UTF-8)."""
    from minitrans.checkpoint import adaptation_lines
    from minitrans.export.argos import corpus_line

    data = meta.get("data") or {}
    corpora = [c.get("dataset") for c in data.get("corpora") or []] or [data.get("dataset")]
    config = meta.get("model_config") or {}
    validation = meta.get("validation") or {}
    title = f"minitrans {languages.name(source)} → {languages.name(target)}"
    items = lambda lines: "".join(f"<li>{escape(line)}</li>" for line in lines)  # noqa: E731
    adaptation = adaptation_lines(meta)
    adapted = f"\n<h2>Adapted</h2><ul>{items(adaptation)}</ul>" if adaptation else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}: model card</title>
<link rel="stylesheet" href="style.css"></head>
<body><main><section>
<h1>{escape(title)}</h1>
<p>A Transformer (Vaswani et al. 2017) built from its parts and trained with minitrans
({config.get('n_encoder_layers', '?')}+{config.get('n_decoder_layers', '?')} layers, d_model {config.get('d_model', '?')}),
exported from <code>{escape(checkpoint_name)}</code> by minitrans {escape(__version__)} with
<code>minitrans export --format web</code> (weights: {escape(quantization)}). It runs in this page, in WebAssembly:
nothing you type leaves your browser.</p>
<h2>Training data</h2><ul>{items(corpus_line(c) for c in corpora if c)}</ul>{adapted}
<h2>Scores</h2><p>Validation scores when the checkpoint was written (greedy, sacreBLEU):</p>
<ul>{items([f"{k}: {v:.2f}" for k, v in sorted(validation.items())] or ["none recorded"])}</ul>
<h2>Limits</h2><p>A small model trained on short sentences (photo captions, everyday phrases): expect errors on
long, technical or rare text. Attention weights are not an explanation of a translation.</p>
<p><a href="./">Back to the translator</a> · <a href="NOTICE.md">notices</a></p>
</section></main></body></html>
"""


def _is_ours(folder: Path) -> bool:
    try:
        return json.loads((folder / "manifest.json").read_text(encoding="utf-8")).get("format") == "minitrans-web"
    except (OSError, ValueError, AttributeError):
        return False


def _write_json(path: Path, value, indent: int | None = 2) -> None:
    path.write_text(json.dumps(value, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")
