"""``--engine auto``, the default (issue #45): which engine decodes and why, the cached
CTranslate2 conversion of a checkpoint, and the promise that at fp32 it translates exactly as
the native engine does."""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time

import pytest

from conftest import run_main, synthetic_pairs
from minitrans import Translator
from minitrans.engines import auto_engine
from minitrans.engines import ctranslate2_cache
from minitrans.errors import CheckpointError
from minitrans.engines.native_engine import NativeEngine

SENTENCES = [e for e, _ in synthetic_pairs(30, seed=45)] + ["", "The cat.", "A dog and a dog and a dog."]


# -- the choice, a pure function ----------------------------------------------------------
@pytest.mark.parametrize(("options", "engine", "why"), [
    ({}, "ctranslate2", "installed"),
    ({"precision": "fp32"}, "ctranslate2", "installed"),
    ({"precision": "int8"}, "ctranslate2", "installed"),
    ({"device": "cuda"}, "native", "cuda device"),
    ({"device": "mps"}, "native", "mps device"),
    ({"shortlist": True}, "native", "--shortlist"),
    ({"attention": True}, "native", "--plot-attention"),
    ({"precision": "bf16"}, "native", "bf16"),
    ({"available": lambda: False}, "native", "not installed"),
])
def test_the_choice_and_its_reason(options, engine, why):
    choice = auto_engine.choose(**{"available": lambda: True, **options})
    assert choice.engine == engine and why in choice.reason and choice.reason.startswith("auto:")


# -- what a checkpoint gets ----------------------------------------------------------------
ct2 = pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache folder of this test's own."""
    monkeypatch.setenv("MINITRANS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "ctranslate2"


def test_a_checkpoint_is_decoded_by_ctranslate2_and_says_so(trained_checkpoint):
    translator = Translator.load(trained_checkpoint)
    decoding = translator.decoding()
    assert decoding["engine"] == "ctranslate2" and decoding["engine_reason"].startswith("auto:")
    assert decoding["precision"].startswith("int8") and "docs/speed.md" in decoding["reason"]
    assert decoding["attention"]  # from a native copy, loaded when asked
    line = translator.describe()
    assert "\n" not in line and line.startswith("decoding with ctranslate2 in int8")


@pytest.mark.parametrize("beam", [1, 4])
def test_at_fp32_auto_translates_exactly_as_the_native_engine(trained_checkpoint, beam):
    native = Translator.load(trained_checkpoint, "native", precision="fp32")
    auto = Translator.load(trained_checkpoint, precision="fp32")
    assert auto.engine.name == "ctranslate2" and auto.precision["precision"] == "float32"
    ours = native.translate_detailed(SENTENCES, beam_size=beam, nbest=min(beam, 2))
    theirs = auto.translate_detailed(SENTENCES, beam_size=beam, nbest=min(beam, 2))
    assert [r.text for r in theirs] == [r.text for r in ours]
    assert [[t for t, _ in r.nbest] for r in theirs] == [[t for t, _ in r.nbest] for r in ours]


def test_int8_stays_close_to_fp32(trained_checkpoint):
    exact = Translator.load(trained_checkpoint, "native", precision="fp32").translate(SENTENCES, beam_size=2)
    int8 = Translator.load(trained_checkpoint).translate(SENTENCES, beam_size=2)
    assert sum(a == b for a, b in zip(exact, int8)) >= 0.8 * len(SENTENCES)


def test_native_is_used_when_ctranslate2_is_missing(trained_checkpoint, monkeypatch):
    """The native engine stays fully working without the package."""
    import sys

    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # `import ctranslate2` raises ImportError
    translator = Translator.load(trained_checkpoint)
    assert isinstance(translator.engine, NativeEngine) and "not installed" in translator.engine_reason
    assert translator.translate(["The cat eats the bread."]) == \
        Translator.from_checkpoint(trained_checkpoint).translate(["The cat eats the bread."])


def test_a_conversion_that_fails_falls_back_to_native_with_a_warning(trained_checkpoint, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("minitrans.engines.ctranslate2_export.export_ctranslate2", broken)
    monkeypatch.setenv("MINITRANS_CACHE", str(trained_checkpoint.parent / "no-such-cache"))
    with caplog.at_level(logging.WARNING):
        translator = Translator.load(trained_checkpoint)
    assert translator.engine.name == "native" and "conversion failed (disk full)" in translator.engine_reason
    assert "No space left" in caplog.text
    assert translator.translate("The cat eats the bread.")


@pytest.mark.hostile
def test_the_public_reason_of_a_failed_conversion_names_no_path(trained_checkpoint, monkeypatch, caplog, tmp_path):
    """Issue #59, item 4: /v1/model publishes the engine's reason; the detail goes to the log."""
    secret = "/home/someone/private/ctranslate2"

    def broken(*args, **kwargs):
        raise NotADirectoryError(20, "Not a directory", secret)

    monkeypatch.setattr("minitrans.engines.ctranslate2_export.export_ctranslate2", broken)
    monkeypatch.setenv("MINITRANS_CACHE", str(tmp_path / "cache"))
    with caplog.at_level(logging.WARNING):
        translator = Translator.load(trained_checkpoint)
    assert translator.engine_reason == "auto: the CTranslate2 conversion failed (NotADirectoryError)"
    assert secret not in json.dumps(translator.decoding()) and secret in caplog.text


def test_asking_for_native_features_forces_native(trained_checkpoint):
    assert Translator.load(trained_checkpoint, precision="bf16").engine.name == "native"
    forced = Translator.load(trained_checkpoint, "native")
    assert forced.engine.name == "native" and forced.engine_reason == "asked for with --engine native"
    both = Translator.from_checkpoints([trained_checkpoint, trained_checkpoint], engine="auto")
    assert both.engine.name == "native" and "ensemble" in both.engine_reason


def test_attention_comes_from_a_native_copy_loaded_on_first_use(trained_checkpoint):
    translator = Translator.load(trained_checkpoint)
    assert translator._native is None  # not loaded for plain translation
    plain = translator.translate_detailed(["The dog likes the ball."], beam_size=2)
    assert plain[0].attention is None and translator._native is None
    (with_weights,) = translator.translate_detailed(["The dog likes the ball."], beam_size=2, attention=True)
    native = Translator.from_checkpoint(trained_checkpoint)
    (reference,) = native.translate_detailed(["The dog likes the ball."], beam_size=2, attention=True)
    assert with_weights.text == reference.text  # the whole request went to the native engine
    assert with_weights.sentences[0].attention.shape == reference.sentences[0].attention.shape
    assert translator.attention_engine() is translator._native  # loaded once, kept


# -- the cache --------------------------------------------------------------------------------
def _count_exports(monkeypatch) -> list:
    from minitrans.engines import ctranslate2_export

    calls, real = [], ctranslate2_export.export_ctranslate2

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(ctranslate2_export, "export_ctranslate2", counted)
    return calls


def test_a_checkpoint_is_converted_once_and_reused(trained_checkpoint, cache, monkeypatch):
    calls = _count_exports(monkeypatch)
    first = ctranslate2_cache.converted(trained_checkpoint)
    assert first.parent == cache and len(calls) == 1
    stamp = (first / "model.bin").stat().st_mtime_ns
    assert ctranslate2_cache.converted(trained_checkpoint) == first and len(calls) == 1
    assert (first / "model.bin").stat().st_mtime_ns == stamp
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no temporaries left


def test_a_changed_checkpoint_gets_a_new_conversion(trained_checkpoint, cache, tmp_path):
    import torch

    copy = tmp_path / "copy.ckpt"
    shutil.copy(trained_checkpoint, copy)
    first = ctranslate2_cache.converted(copy)
    state = torch.load(copy, map_location="cpu", weights_only=False)
    state["edited"] = True  # another file now, as after `minitrans calibrate` or an edit
    torch.save(state, copy)
    second = ctranslate2_cache.converted(copy)
    assert second != first and json.loads((second / "minitrans.json").read_text())["source_checkpoint_sha256"] \
        != json.loads((first / "minitrans.json").read_text())["source_checkpoint_sha256"]


@pytest.mark.parametrize("damage", ["truncate", "delete-metadata", "foreign"])
def test_a_damaged_cache_entry_is_converted_again(trained_checkpoint, cache, monkeypatch, caplog, damage):
    folder = ctranslate2_cache.converted(trained_checkpoint)
    if damage == "truncate":
        with open(folder / "model.bin", "r+b") as f:
            f.truncate(1000)
    elif damage == "delete-metadata":
        (folder / "minitrans.json").unlink()
    else:  # the folder holds another checkpoint's conversion
        meta = json.loads((folder / "minitrans.json").read_text())
        meta["source_checkpoint_sha256"] = "0" * 64
        (folder / "minitrans.json").write_text(json.dumps(meta))
    calls = _count_exports(monkeypatch)
    with caplog.at_level(logging.WARNING):
        again = ctranslate2_cache.converted(trained_checkpoint)
    assert again == folder and len(calls) == 1 and "damaged" in caplog.text
    assert ctranslate2_cache.is_valid(folder, auto_engine_sha(trained_checkpoint))
    assert Translator.load(trained_checkpoint).translate("The cat eats the bread.")


def auto_engine_sha(path) -> str:
    from minitrans.text.textio import file_sha256

    return file_sha256(path)


def test_two_users_of_one_checkpoint_convert_it_once(trained_checkpoint, cache, monkeypatch):
    """The second waits for the first (a file lock) and reuses its folder."""
    from minitrans.engines import ctranslate2_export

    calls, real = [], ctranslate2_export.export_ctranslate2

    def slow(*args, **kwargs):
        calls.append(args[0])
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(ctranslate2_export, "export_ctranslate2", slow)
    folders = []
    threads = [threading.Thread(target=lambda: folders.append(ctranslate2_cache.converted(trained_checkpoint)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(folders) == 2 and folders[0] == folders[1] and len(calls) == 1


def test_the_cache_follows_xdg_and_minitrans_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("MINITRANS_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ctranslate2_cache.cache_root() == tmp_path / "xdg" / "minitrans"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert ctranslate2_cache.cache_root() == tmp_path / "home" / ".cache" / "minitrans"
    monkeypatch.setenv("MINITRANS_CACHE", str(tmp_path / "mine"))
    assert ctranslate2_cache.cache_root() == tmp_path / "mine"


# -- what the commands say -------------------------------------------------------------------
def test_translate_says_on_one_stderr_line_which_engine_decoded(trained_checkpoint, capsys, tmp_path):
    code, out, err = run_main(capsys, "translate", "-m", trained_checkpoint, "--beam", 1, "The cat eats.")
    assert code == 0 and out.strip()
    (line,) = [x for x in err.splitlines() if x.startswith("decoding with")]
    assert "ctranslate2" in line and "auto:" in line
    code, _, err = run_main(capsys, "translate", "-m", trained_checkpoint, "--engine", "native", "The cat eats.")
    assert code == 0 and "decoding with native" in err and "asked for with --engine native" in err
    code, _, err = run_main(capsys, "translate", "-m", trained_checkpoint, "--plot-attention",
                            tmp_path / "att.png", "The cat eats.")
    assert code == 0 and "decoding with native" in err and "auto: --plot-attention" in err


def test_evaluate_records_the_engine_and_why(trained_checkpoint, tmp_path, capsys):
    pairs = synthetic_pairs(6, seed=3)
    (tmp_path / "s.en").write_text("".join(e + "\n" for e, _ in pairs))
    (tmp_path / "r.fr").write_text("".join(f + "\n" for _, f in pairs))
    code, out, err = run_main(capsys, "evaluate", "-m", trained_checkpoint, "--src", tmp_path / "s.en", "--ref",
                              tmp_path / "r.fr", "--beam", 1, "-o", tmp_path / "eval")
    assert code == 0, err
    decoding = json.loads(out)["decoding"]
    assert decoding["engine"] == "ctranslate2" and decoding["engine_reason"].startswith("auto:")
    assert decoding["precision"]["precision"].startswith("int8") and decoding["workers"] >= 1


def test_the_server_reports_its_engine_and_still_gives_attention(trained_checkpoint):
    pytest.importorskip("fastapi", reason="the [serve] extra is not installed")
    from fastapi.testclient import TestClient

    from minitrans.serve.app import ServerSettings, create_app

    translator = Translator.load(trained_checkpoint)
    with TestClient(create_app(translator, ServerSettings(beam=2))) as client:
        info = client.get("/v1/model").json()
        assert info["engine"] == "ctranslate2" and info["decoding"]["engine"] == "ctranslate2"
        assert info["decoding"]["engine_reason"].startswith("auto:") and info["decoding"]["attention"] is True
        r = client.post("/v1/translate", json={"q": "The dog likes the ball.", "attention": True})
        assert r.status_code == 200, r.text
        assert len(r.json()["translations"][0]["attention"]["layers"]) == translator.config.n_decoder_layers
    assert os.environ.get("MINITRANS_CACHE")  # the session's cache, never ~/.cache


@pytest.mark.hostile
def test_a_served_checkpoint_rewritten_on_disk_gives_no_attention_from_another_model(trained_checkpoint,
                                                                                       trained_fr_en, tmp_path):
    """Issue #59, item 5: a training run rewrites best.ckpt under a running server; the first
    attention request must not load the new file's weights beside the old model's translations."""
    pytest.importorskip("fastapi", reason="the [serve] extra is not installed")
    from fastapi.testclient import TestClient

    from minitrans.serve.app import ServerSettings, create_app

    served = tmp_path / "best.ckpt"
    shutil.copy(trained_checkpoint, served)
    translator = Translator.load(served)
    shutil.copy(trained_fr_en, served)  # another model under the same name
    with TestClient(create_app(translator, ServerSettings(beam=2))) as client:
        r = client.post("/v1/translate", json={"q": "The dog likes the ball.", "attention": True})
        assert r.status_code == 409 and "rewritten" in r.json()["detail"] and str(tmp_path) not in r.text
        plain = client.post("/v1/translate", json={"q": "The dog likes the ball."})
        assert plain.status_code == 200  # the model loaded still translates
    assert translator._native is None
    with pytest.raises(CheckpointError, match="changed on disk"):
        translator.attention_engine()
