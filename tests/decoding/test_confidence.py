"""The confidence score and its calibrated "low" flag (issue #28, part 4).

* Ranks and Spearman against hand-computed values and a NumPy transcription.
* A translation's confidence is exp(mean token log-probability), checked against the model's
  own teacher-forced probabilities of the output it chose (an independent computation).
* ``minitrans calibrate`` writes a new checkpoint (the input's bytes unchanged) whose flag marks
  the stated share of its calibration sentences; every entry point carries it; an uncalibrated
  model says null, not False.
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
import torch

from conftest import run_main, synthetic_pairs
from minitrans.decoding.confidence import confidence, ranks, spearman, threshold


def test_ranks_and_spearman():
    assert ranks([10, 30, 20, 20]) == [1, 4, 2.5, 2.5]
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=200), rng.normal(size=200)
    y = x + y  # correlated
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))  # no ties in continuous draws
    assert spearman(list(x), list(y)) == pytest.approx(np.corrcoef(rx, ry)[0, 1], abs=1e-12)


def test_threshold_is_the_lower_quantile():
    scores = [i / 100 for i in range(100)]
    assert threshold(scores, 0.1) == 0.10 and sum(s < threshold(scores, 0.1) for s in scores) == 10
    with pytest.raises(ValueError):
        threshold(scores, 1.0)
    assert confidence(0.0, 3) == 1.0 and confidence(float("-inf"), 2) == 0.0
    assert confidence(-4.0, 3) == pytest.approx(math.exp(-1.0))


@pytest.fixture(scope="module")
def translator(trained_checkpoint):
    from minitrans import Translator

    return Translator.from_checkpoint(trained_checkpoint)


def test_confidence_is_the_models_own_probability(translator):
    sentences = [e for e, _ in synthetic_pairs(6, seed=41)]
    for r in translator.translate_detailed(sentences, beam_size=1, split=False):
        src = torch.tensor([translator.tokenizer.encode([r.source])[0] + [translator.tokenizer.eos_id]])
        tgt = translator.tokenizer.encode([r.text])[0]
        tgt_in = torch.tensor([[translator.tokenizer.bos_id] + tgt])
        tgt_out = torch.tensor(tgt + [translator.tokenizer.eos_id])
        with torch.inference_mode():
            logp = torch.log_softmax(translator.model(src, tgt_in)[0].float(), -1)
        mean = logp.gather(1, tgt_out[:, None]).mean().item()
        assert r.confidence == pytest.approx(math.exp(mean), rel=1e-3), r.text
        assert 0.0 < r.confidence <= 1.0 and r.low_confidence is None  # not calibrated


def test_calibrate_writes_a_new_checkpoint_whose_flag_marks_the_share(capsys, tmp_path, trained_checkpoint,
                                                                      prepared, monkeypatch):
    monkeypatch.setenv("MINITRANS_DATA", str(prepared.hparams.data_dir))
    before = hashlib.sha256(trained_checkpoint.read_bytes()).hexdigest()
    out = tmp_path / "calibrated.ckpt"
    code, stdout, err = run_main(capsys, "calibrate", "-m", trained_checkpoint, "-o", out, "--share", "0.25",
                                 "--beam", "2", "--dataset", "multi30k")
    assert code == 0, err
    record = json.loads(stdout)
    assert hashlib.sha256(trained_checkpoint.read_bytes()).hexdigest() == before
    assert record["share"] == 0.25 and record["sentences"] == 40 and -1 <= record["spearman_chrf"] <= 1

    from minitrans import Translator
    from minitrans.data.heldout import load_eval_data

    calibrated = Translator.load(out)  # decoded as it was calibrated: the default engine
    assert record["decoding"]["engine"] == calibrated.engine.name == "ctranslate2"
    assert record["decoding"]["precision"] == calibrated.precision["precision"]
    assert calibrated.confidence_threshold == pytest.approx(record["threshold"])
    sources, _ = load_eval_data("multi30k", "valid", None, None, str(prepared.hparams.data_dir))
    flags = [r.low_confidence for r in calibrated.translate_detailed(sources, beam_size=2, split=False)]
    assert all(isinstance(f, bool) for f in flags) and sum(flags) <= 10 and sum(flags) >= 1  # 25% of 40, ties aside
    text = f"{sources[0]} {sources[1]}"
    joined = calibrated.translate_detailed([text], beam_size=2)[0]
    assert joined.low_confidence == any(s.low_confidence for s in joined.sentences)
    assert joined.confidence == min(s.confidence for s in joined.sentences)
    code, stdout, _ = run_main(capsys, "translate", "-m", out, "--json", "--beam", "2", text)
    line = json.loads(stdout)
    assert isinstance(line["low_confidence"], bool) and all(isinstance(s["low_confidence"], bool)
                                                            for s in line["sentences"])
    code, _, err = run_main(capsys, "calibrate", "-m", trained_checkpoint, "-o", trained_checkpoint)
    assert code == 2 and "new file" in err and len(err.splitlines()) == 1


def test_the_api_carries_confidence(translator):
    from fastapi.testclient import TestClient

    from minitrans.serve.app import create_app

    with TestClient(create_app(translator)) as client:
        out = client.post("/v1/translate", json={"q": "The cat eats. The dog sees a book.", "beam": 2}).json()
    text = out["translations"][0]
    assert text["low_confidence"] is None and 0 < text["confidence"] <= 1
    assert all(0 < s["confidence"] <= 1 for s in text["sentences"])
