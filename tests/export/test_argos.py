"""``minitrans export --format argos`` against the real Argos Translate: the package installs,
splits sentences offline and translates as minitrans does."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("ctranslate2")
pytest.importorskip("onnx")
argostranslate = pytest.importorskip("argostranslate")

from conftest import run_main  # noqa: E402
from minitrans.text import segment  # noqa: E402
from minitrans.export.argos import export  # noqa: E402
from minitrans.errors import UsageError  # noqa: E402
from minitrans.translate import Translator  # noqa: E402

SENTENCES = ["The cat eats an apple.", "My friend sees the old tree near the river.", "A child draws a small boat.",
             "The woman likes the green house today.", "The dog finds the ball in the garden."]
#: Texts of several sentences, with the traps of a rule-based splitter.
TEXTS = {
    "en": [("The cat eats an apple. The dog sees the bread!", 2), ("Mr. Smith likes the old tree. He is here.", 2),
           ("J. K. Rowling wrote a book. Is it good?", 2), ("It costs 3.50 dollars. \"Really?\" She asked.", 3),
           ("No end punctuation here", 1), ("Wait... what? Yes.", 2), ("He said \"stop.\" Then he left.", 2)],
    "fr": [("M. Dupont est là. Il est en retard !", 2), ("Où est la gare ? Je ne sais pas.", 2),
           ("Il a dit : « Je viens. » Puis il est parti.", 2), ("Mme Martin arrive. Elle est contente.", 2)],
}
#: Where pysbd (minitrans's own splitter) keeps one sentence and the packaged rules make two.
DIFFERENT = {"Il a dit : « Je viens. » Puis il est parti."}

@pytest.fixture(scope="module")
def package(trained_checkpoint, tmp_path_factory):
    return export(trained_checkpoint, tmp_path_factory.mktemp("argos") / "translate-en_fr.argosmodel")


def run_argos(package, texts, tmp_path, **settings) -> list[str]:
    """argostranslate in a fresh process whose settings and packages live in ``tmp_path``, with the
    network off (any connection attempt raises): the runner of ``bench/exports.py``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from exports import run_argos as run

    return run(package, texts, "en", "fr", tmp_path, ARGOS_DEVICE_TYPE="cpu", **settings)


def test_the_package_is_one_folder_with_what_argos_reads(package, trained_checkpoint):
    with zipfile.ZipFile(package) as z:
        names = z.namelist()
        roots = {n.split("/")[0] for n in names}
        assert len(roots) == 1 and roots.pop().startswith("translate-en_fr-")
        files = {n.split("/", 1)[1] for n in names}
        assert {"metadata.json", "README.md", "sentencepiece.model", "model/model.bin", "model/config.json",
                "minisbd/en.onnx"} <= files
        root = names[0].split("/")[0]
        meta = json.loads(z.read(f"{root}/metadata.json"))
        config = json.loads(z.read(f"{root}/model/config.json"))
        readme = z.read(f"{root}/README.md").decode()
    assert {k: meta[k] for k in ("type", "from_code", "to_code", "from_name", "to_name")} == {
        "type": "translate", "from_code": "en", "to_code": "fr", "from_name": "English", "to_name": "French"}
    assert meta["package_version"] and meta["argos_version"]
    assert config["add_source_eos"] is True  # argos sends pieces without </s>
    assert "Training data" in readme and "Licence" in readme and "ARGOS_BEAM_SIZE=1" in readme


def test_argos_translates_offline_as_minitrans_greedy(package, trained_checkpoint, tmp_path):
    native = Translator.from_checkpoint(trained_checkpoint, precision="fp32")
    paragraphs = [" ".join(SENTENCES[:2]), " ".join(SENTENCES[2:])]
    texts = SENTENCES + paragraphs
    got = run_argos(package, texts, tmp_path, ARGOS_COMPUTE_TYPE="float32", ARGOS_BEAM_SIZE="1")
    assert got == native.translate(texts, beam_size=1)


def test_argos_defaults_int8_and_beam_4_stay_close(package, trained_checkpoint, tmp_path):
    """argos's own defaults (compute_type auto: int8 here; beam 4, length penalty 0.2) are a
    documented difference: close to minitrans's beam output, not equal."""
    native = Translator.from_checkpoint(trained_checkpoint, precision="fp32")
    got = run_argos(package, SENTENCES, tmp_path)
    ours = native.translate(SENTENCES, beam_size=4)
    assert all(got) and sum(a == b for a, b in zip(got, ours)) >= 3, list(zip(got, ours))


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_packaged_splitter_runs_in_minisbd_and_agrees_with_minitrans(tmp_path, lang):
    from minisbd import SBDetect

    from minitrans.export import sentence_onnx

    detector = SBDetect(str(sentence_onnx.write(tmp_path / f"{lang}.onnx", lang)), use_gpu=False)
    for text, n in TEXTS[lang]:
        sentences = detector.sentences(text)
        assert len(sentences) == n, (text, sentences)
        assert " ".join(sentences) == text
        assert (sentences == segment.split(text, lang).sentences) != (text in DIFFERENT), text


def test_export_refuses_what_would_lose_a_file(trained_checkpoint, package, tmp_path):
    with pytest.raises(UsageError, match="ending in .argosmodel"):
        export(trained_checkpoint, tmp_path / "model.zip")
    with pytest.raises(UsageError, match="--force"):
        export(trained_checkpoint, package)
    before = package.stat().st_mtime_ns
    assert export(trained_checkpoint, package, force=True) == package and package.stat().st_mtime_ns >= before


def test_cli_export_argos(trained_checkpoint, tmp_path, capsys):
    out = tmp_path / "en_fr.argosmodel"
    code, stdout, err = run_main(capsys, "export", "-m", trained_checkpoint, "--format", "argos", "-o", out)
    assert code == 0, err
    assert zipfile.is_zipfile(out) and "install_from_path" in stdout


def test_the_readme_states_each_corpus_licence_from_its_source():
    """Licences live on their corpus source (minitrans/data/sources.py), not in the exporter."""
    from minitrans.export.argos import readme
    from minitrans.data.sources import SOURCES

    meta = {"data": {"dataset": "mixture", "corpora": [{"dataset": "tatoeba"}, {"dataset": "multi30k"},
                                                       {"dataset": "tsv"}]}}
    text = readme(meta, "en", "fr", "best.ckpt", "float32")
    assert SOURCES["tatoeba"].licence in text and "CC-BY 2.0" in text
    assert SOURCES["multi30k"].licence in text and "research use" in text
    assert "- tsv" in text  # a user's own files: named, their terms the user's to state
