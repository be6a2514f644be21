"""Both directions: ``data.direction: fr-en`` trains the reverse model of the same corpora and
splits; the checkpoint records its languages and every consumer reads them."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from conftest import make_datamodule, make_mixture, needs_chromium, run_main, served_page, start_server  # noqa: E402
from minitrans.text import languages  # noqa: E402
from minitrans.data.corpus import aligned_split, eval_split, reverse_split  # noqa: E402
from minitrans.errors import CheckpointError, ConfigError, UsageError  # noqa: E402
from minitrans.serve.app import create_app  # noqa: E402
from minitrans.translate import Translator  # noqa: E402


def test_a_grouped_split_turns_into_one_row_per_french_sentence_with_all_its_english():
    split = eval_split([("I'm sorry.", "Désolé."), ("I'm sorry.", "Je suis désolé."), ("Sorry.", "Désolé."),
                        ("Hello.", "Bonjour.")])
    turned = reverse_split(split, grouped=True)
    rows = {fr: refs for fr, refs in zip(turned["fr"], turned["refs"])}
    assert rows == {"Désolé.": ["I'm sorry.", "Sorry."], "Je suis désolé.": ["I'm sorry."], "Bonjour.": ["Hello."]}
    assert list(turned["fr"]) == ["Désolé.", "Je suis désolé.", "Bonjour."]  # first appearance
    assert list(turned["en"]) == ["I'm sorry.", "I'm sorry.", "Hello."]  # the first reference


def test_an_official_split_stays_line_for_line():
    pairs = [("A dog runs.", "Un chien court."), ("A dog runs.", "Un chien court."), ("Two men.", "Deux hommes.")]
    turned = reverse_split(aligned_split(pairs), grouped=False)
    assert list(turned["fr"]) == ["Un chien court.", "Un chien court.", "Deux hommes."]
    assert [list(r) for r in turned["refs"]] == [["A dog runs."], ["A dog runs."], ["Two men."]]


def test_an_unknown_direction_is_one_line_naming_the_choices(data_root, tmp_path):
    with pytest.raises(ConfigError, match="en-fr or fr-en"):
        make_datamodule(data_root, tmp_path, direction="de-en")
    assert languages.of({}) == ("en", "fr")  # a checkpoint from before directions


def test_fr_en_data_has_french_sources_and_english_references(prepared_fr_en, prepared):
    dm = prepared_fr_en
    assert dm.languages == ("fr", "en") and dm.cache_path != prepared.cache_path
    test = dm.splits["test"]
    assert dm.tokenizer.decode(test["src_ids"][:5]) == list(test["fr"][:5])
    assert dm.tokenizer.decode(test["tgt_ids"][:5]) == list(test["en"][:5])
    assert [list(r) for r in test["refs"][:5]] == [[en] for en in test["en"][:5]]
    train = dm.splits["train"]
    assert dm.tokenizer.decode(train["src_ids"][:3]) == list(train["fr"][:3])


def test_the_reverse_mixture_is_leak_free_in_both_languages(tmp_path):
    """The grouped split and decontamination are the English→French ones: no French source and
    no English reference of a held-out split is in training."""
    import os

    from minitrans.data.datamodule import TranslationDataModule

    os.environ.pop("MINITRANS_DATA", None)
    forward = make_mixture(tmp_path / "a", tmp_path / "cache-a")
    h = dict(forward.hparams)
    reverse = TranslationDataModule(**{**h, "corpora": forward.corpora, "direction": "fr-en",
                                       "cache_dir": str(tmp_path / "cache-b")})
    reverse.prepare_data()
    reverse.setup("fit")
    train = reverse.splits["train"]
    train_fr, train_en = set(train["fr"]), set(train["en"])
    for name in ("everyday", "captions"):
        for split in ("valid", "test"):
            held = reverse.splits[f"{name}/{split}"]
            assert not set(held["fr"]) & train_fr
            assert not {en for refs in held["refs"] for en in refs} & train_en
    # The same sentences are held out as in the forward direction, turned around.
    fwd = forward.splits["everyday/test"]
    assert set(reverse.splits["everyday/test"]["fr"]) == {fr for refs in fwd["refs"] for fr in refs}


@pytest.fixture(scope="module")
def both(trained_checkpoint, trained_fr_en):
    return Translator.from_checkpoint(trained_checkpoint), Translator.from_checkpoint(trained_fr_en)


def test_the_checkpoint_records_its_direction_and_translates_french(both, prepared_fr_en):
    en_fr, fr_en = both
    assert en_fr.languages == ("en", "fr") and fr_en.languages == ("fr", "en")
    assert fr_en.meta["data"]["direction"] == "fr-en"
    test = prepared_fr_en.splits["test"]
    sources, refs = list(test["fr"][:20]), list(test["en"][:20])
    hyps = fr_en.translate(sources, beam_size=1)
    assert sum(h == r for h, r in zip(hyps, refs)) >= 14, list(zip(hyps, refs))


def test_evaluate_reads_the_direction_from_the_checkpoint(trained_fr_en, trained_checkpoint, data_root, capsys,
                                                          tmp_path):
    import json

    code, out, err = run_main(capsys, "evaluate", "-m", trained_fr_en, "--dataset", "multi30k", "--data-dir",
                              data_root, "--beam", "1", "-o", tmp_path)
    assert code == 0, err
    report = json.loads(out)
    report = report[0] if isinstance(report, list) else report
    assert report["bleu"] > 60  # French sources, English references: scored the right way round
    code, _, err = run_main(capsys, "evaluate", "-m", trained_fr_en, trained_checkpoint, "--dataset", "multi30k",
                            "--data-dir", data_root, "-o", tmp_path)
    assert code == 2 and "evaluate models of one direction together" in err


def test_models_of_two_directions_are_never_averaged_or_ensembled(trained_checkpoint, trained_fr_en, tmp_path):
    from minitrans.checkpoint import average_checkpoints

    with pytest.raises(CheckpointError, match="different directions"):
        average_checkpoints([trained_checkpoint, trained_fr_en], tmp_path / "avg.ckpt")
    with pytest.raises(CheckpointError, match="different directions"):
        Translator.from_checkpoints([trained_checkpoint, trained_fr_en])


def test_one_server_routes_by_language_pair(both):
    en_fr, fr_en = both
    with TestClient(create_app([en_fr, fr_en])) as c:
        models = c.get("/v1/models").json()["models"]
        assert [(m["source_language"], m["target_language"]) for m in models] == [("en", "fr"), ("fr", "en")]
        assert c.get("/v1/model").json()["source_language"] == "en"  # the first is the default
        french = ["Le chat mange une pomme.", "Le chien voit le pain."]
        english = ["The cat eats an apple.", "The dog sees the bread."]
        got = c.post("/v1/translate", json={"q": french, "source": "fr", "beam": 1}).json()
        assert [t["translation"] for t in got["translations"]] == fr_en.translate(french, beam_size=1)
        got = c.post("/v1/translate", json={"q": english, "beam": 1}).json()  # default direction
        assert [t["translation"] for t in got["translations"]] == en_fr.translate(english, beam_size=1)
        bad = c.post("/v1/translate", json={"q": "Hello.", "source": "en", "target": "en"})
        assert bad.status_code == 422 and "en→fr, fr→en" in str(bad.json())
        # LibreTranslate's routes: one entry per source language, routed by source and target.
        assert c.get("/languages").json() == [{"code": "en", "name": "English", "targets": ["fr"]},
                                              {"code": "fr", "name": "French", "targets": ["en"]}]
        got = c.post("/translate", json={"q": french[0], "source": "fr", "target": "en"}).json()
        assert got == {"translatedText": fr_en.translate(french[0], beam_size=5)}
        got = c.post("/translate", json={"q": french[0], "source": "auto", "target": "en"}).json()
        assert got["detectedLanguage"]["language"] == "fr"
        assert c.post("/translate", json={"q": french[0], "source": "fr", "target": "fr"}).status_code == 400


def test_two_models_of_one_direction_are_refused(both):
    with pytest.raises(UsageError, match="one model per direction"):
        create_app([both[0], both[0]])


def test_serve_takes_one_model_per_direction_and_a_real_client_sees_both(trained_checkpoint, trained_fr_en, both):
    from libretranslatepy import LibreTranslateAPI

    proc, url = start_server(trained_checkpoint, "-m", trained_fr_en, "--beam", "1")
    try:
        api = LibreTranslateAPI(url + "/")
        assert {lang["code"]: lang["targets"] for lang in api.languages()} == {"en": ["fr"], "fr": ["en"]}
        assert api.translate("Le chat mange une pomme.", "fr", "en") == both[1].translate(
            "Le chat mange une pomme.", beam_size=1)
        assert api.translate("The cat eats an apple.", "en", "fr") == both[0].translate(
            "The cat eats an apple.", beam_size=1)
    finally:
        proc.terminate()
        proc.wait(30)


@needs_chromium
def test_the_page_offers_both_directions(trained_checkpoint, trained_fr_en, both):
    with served_page(trained_checkpoint, "-m", trained_fr_en, "--beam", "1") as page:
        page.wait_for_function("document.querySelectorAll('#direction option').length == 2")
        assert page.inner_text("#source-name") == "English" and page.inner_text("#target-name") == "French"
        page.select_option("#direction", "fr-en")
        assert page.inner_text("#source-name") == "French" and page.inner_text("#target-name") == "English"
        assert page.input_value("#source").startswith("Je ne parle pas anglais.")  # the example follows
        page.fill("#source", "Le chat mange une pomme.")
        page.click("#translate")
        page.wait_for_selector("#results > li .best")
        assert page.inner_text("#results > li .best").strip() == both[1].translate(
            "Le chat mange une pomme.", beam_size=5)  # the page's beam


def test_every_export_goes_out_in_the_checkpoints_direction(trained_fr_en, tmp_path):
    import json
    import zipfile

    pytest.importorskip("ctranslate2")
    from minitrans.engines.ctranslate2_export import export_ctranslate2

    folder = export_ctranslate2(trained_fr_en, tmp_path / "ct2")
    assert Translator.load(folder).languages == ("fr", "en")
    if __import__("importlib").util.find_spec("onnx"):
        from minitrans.export.argos import export

        with zipfile.ZipFile(export(trained_fr_en, tmp_path / "p.argosmodel")) as z:
            root = z.namelist()[0].split("/")[0]
            meta = json.loads(z.read(f"{root}/metadata.json"))
            assert root.startswith("translate-fr_en-") and f"{root}/minisbd/fr.onnx" in z.namelist()
        assert (meta["from_code"], meta["to_code"]) == ("fr", "en")
    if __import__("importlib").util.find_spec("transformers"):
        from minitrans.export.hf import export as export_hf

        config = json.loads((export_hf(trained_fr_en, tmp_path / "hf") / "tokenizer_config.json").read_text())
        assert (config["source_lang"], config["target_lang"]) == ("fr", "en")


@pytest.mark.parametrize("fmt, document", [("html", "<p>M. Dupont est là. Il part.</p>"),
                                           ("markdown", "# Titre\n\nM. Dupont est là. Il part.\n"),
                                           ("srt", "1\n00:00:01,000 --> 00:00:02,000\nM. Dupont est là. Il part.\n")])
def test_documents_are_split_with_the_rules_of_the_models_source_language(monkeypatch, fmt, document):
    from minitrans.text import segment
    from minitrans.formats import translate_document

    seen, split = [], segment.split

    def recording(text, lang="en"):
        seen.append(lang)
        return split(text, lang)

    monkeypatch.setattr(segment, "split", recording)
    out = translate_document(fmt, document, lambda texts: [t.upper() for t in texts], "fr")
    assert seen and set(seen) == {"fr"} and "DUPONT" in out
