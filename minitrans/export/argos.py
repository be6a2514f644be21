"""``minitrans export --format argos``: a checkpoint as an Argos Translate package.

Argos Translate (and LibreTranslate, which serves its packages) installs a ``.argosmodel``: a
zip archive holding ONE top-level folder, ``translate-<from>_<to>-<version>/``, with

=======================  ==============================================================
``metadata.json``        ``type: translate``, ``from_code``/``to_code`` and their names,
                         ``package_version``, ``argos_version``
``model/``               the CTranslate2 export (:mod:`minitrans.engines.ctranslate2_export`): it
                         appends ``</s>`` to the source itself (argos sends SentencePiece
                         pieces without it) and its sinusoid table has at least 1,024 rows
                         (argos decodes up to 256 pieces, past the model's own limit)
``sentencepiece.model``  the joint SentencePiece model (argos encodes and decodes with it)
``minisbd/<from>.onnx``  the sentence splitter argos runs by default (MiniSBD), written by
                         :mod:`minitrans.export.sentence_onnx`, so that splitting works offline
``README.md``            training data, licences, scores and the decoding differences
=======================  ==============================================================

Argos decodes differently from minitrans, by its own defaults: beam 4 (``ARGOS_BEAM_SIZE``),
CTranslate2's length penalty 0.2, no relative length limit, unknown pieces replaced by the
source piece they attend to most, ``_`` decoded as a space, and ``compute_type`` ``auto``
(int8 on CPUs that have it; ``ARGOS_COMPUTE_TYPE=float32`` keeps our weights). With
``ARGOS_BEAM_SIZE=1`` and ``float32`` its output equals minitrans's greedy output (tested).
Needs the ``[ct2]`` extra (onnx, for the sentence splitter); CTranslate2 itself is a core dependency.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from pathlib import Path

from minitrans.export import sentence_onnx
from minitrans.text import languages
from minitrans._version import __version__
from minitrans.engines.ctranslate2_export import QUANTIZATIONS, export_ctranslate2
from minitrans.engines.registry import load_metadata
from minitrans.checkpoint import adaptation_lines
from minitrans.errors import UsageError
from minitrans.text.textio import atomic_output

__all__ = ["QUANTIZATIONS", "export"]

#: The argos package layout this writes (argostranslate 1.9 – 1.11 read it).
ARGOS_VERSION = "1.9.0"
SUFFIX = ".argosmodel"

def corpus_line(dataset: str) -> str:
    """What the README says of a training corpus: its source's ``licence`` line
    (:mod:`minitrans.data.sources`, imported only here: it loads ``datasets``), else its name."""
    from minitrans.data.sources import SOURCES

    source = SOURCES.get(dataset)
    return source.licence if source is not None and source.licence else dataset


def export(checkpoint: str | os.PathLike, output: str | os.PathLike, quantization: str = "float32",
           force: bool = False) -> Path:
    """Write ``checkpoint`` as the Argos package ``output`` (a ``.argosmodel`` file); returns it.

    The archive is written beside ``output`` and renamed into place when complete; an existing
    file is replaced only with ``force``.
    """
    output = Path(output)
    if output.suffix != SUFFIX:
        raise UsageError(f"-o {output}: an Argos package is a file ending in {SUFFIX}, e.g. "
                         f"-o translate-en_fr{SUFFIX}.")
    if output.is_dir():
        raise UsageError(f"-o {output} is a folder; name the {SUFFIX} file to write.")
    if output.exists() and not force:
        raise UsageError(f"{output} already exists; pass --force to replace it, or choose a new file name.")
    meta = load_metadata(checkpoint)
    source, target = languages.of(meta)
    root = f"translate-{source}_{target}-{__version__.replace('+', '_')}"
    with tempfile.TemporaryDirectory(prefix="minitrans-argos-") as tmp:
        model_dir = export_ctranslate2(checkpoint, Path(tmp) / "model", quantization)
        files = {
            "metadata.json": json.dumps(package_metadata(source, target), indent=2, ensure_ascii=False) + "\n",
            "README.md": readme(meta, source, target, Path(checkpoint).name, quantization),
        }
        splitter = Path(tmp) / f"{source}.onnx"
        sentence_onnx.write(splitter, source)
        with atomic_output(output, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, text in files.items():
                archive.writestr(f"{root}/{name}", text)
            for path in sorted(model_dir.iterdir()):
                archive.write(path, f"{root}/model/{path.name}")
            archive.write(model_dir / "sentencepiece.model", f"{root}/sentencepiece.model")
            archive.write(splitter, f"{root}/minisbd/{splitter.name}")
    return output


def package_metadata(source: str, target: str) -> dict:
    """The package's ``metadata.json``."""
    return {"package_version": __version__, "argos_version": ARGOS_VERSION, "type": "translate",
            "from_code": source, "from_name": languages.name(source),
            "to_code": target, "to_name": languages.name(target),
            "links": [], "languages": [],
            "code": f"translate-{source}_{target}"}


def readme(meta: dict, source: str, target: str, checkpoint_name: str, quantization: str) -> str:
    """The package's README: what the model is, what it was trained on, how well it does."""
    data = meta.get("data") or {}
    corpora = [c.get("dataset") for c in data.get("corpora") or []] or [data.get("dataset")]
    config = meta.get("model_config") or {}
    validation = meta.get("validation") or {}
    adapted = adaptation_lines(meta)
    lines = [
        f"# minitrans {languages.name(source)} → {languages.name(target)}",
        "",
        f"A Transformer (Vaswani et al. 2017) built from its parts and trained with minitrans {meta.get('version', '?')}"
        f" ({config.get('n_encoder_layers', '?')}+{config.get('n_decoder_layers', '?')} layers, d_model "
        f"{config.get('d_model', '?')}), exported from `{checkpoint_name}` by minitrans {__version__} with "
        f"`minitrans export --format argos` (weights: {quantization}).",
        "",
        "## Training data",
        "",
        *[f"- {corpus_line(c)}" for c in corpora if c],
        "",
        *(["## Adapted", "", *[f"- {line}" for line in adapted], ""] if adapted else []),
        "## Scores",
        "",
        "Validation scores when the checkpoint was written (greedy, sacreBLEU):",
        "",
        *([f"- {k}: {v:.2f}" for k, v in sorted(validation.items())] or ["- none recorded"]),
        "",
        "## Decoding",
        "",
        "Argos decodes with its own settings: beam 4, CTranslate2's length penalty 0.2 and `compute_type` auto "
        "(int8 on most CPUs). `ARGOS_BEAM_SIZE=1 ARGOS_COMPUTE_TYPE=float32` gives minitrans's greedy output.",
        "Sentences are split offline by `minisbd/`: a rule-based splitter (end punctuation, then a space and a "
        "capital, digit or quote; common abbreviations kept), not MiniSBD's trained model.",
        "",
        "## Licence",
        "",
        "The weights inherit the terms of the training data above.",
        "",
    ]
    return "\n".join(lines)
