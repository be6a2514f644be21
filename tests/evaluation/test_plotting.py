"""Figures (minitrans/evaluation/plotting.py): the attention heatmap labels its axes in the model's
direction, and learning curves are drawn from a run's CSV log, or refused in one line."""

from __future__ import annotations

import pytest

from conftest import run_main
from minitrans import Translator
from minitrans.evaluation import plotting
from minitrans.errors import UsageError

PNG = b"\x89PNG\r\n\x1a\n"


def _drawn_labels(monkeypatch) -> list:
    """Record each saved figure's axis labels, then save it as usual."""
    seen, save = [], plotting._save

    def recording(fig, path, dpi):
        ax = fig.axes[0]
        seen.append((ax.get_xlabel(), ax.get_ylabel()))
        return save(fig, path, dpi)

    monkeypatch.setattr(plotting, "_save", recording)
    return seen


@pytest.mark.parametrize("fixture", ["trained_checkpoint", "trained_fr_en"])
def test_the_heatmap_names_the_models_languages(request, fixture, tmp_path, monkeypatch):
    translator = Translator.from_checkpoint(request.getfixturevalue(fixture))
    text = "The dog likes the ball." if translator.languages[0] == "en" else "Le chien aime la balle."
    (result,) = translator.translate_detailed([text], attention=True, beam_size=2)
    seen = _drawn_labels(monkeypatch)
    written = plotting.plot_attention(result.sentences[0], tmp_path / "att", direction=translator.languages)
    assert written.suffix == ".png" and written.read_bytes()[:8] == PNG
    source, target = ("English", "French") if translator.languages == ("en", "fr") else ("French", "English")
    assert seen == [(f"source ({source})", f"output ({target})")]


def test_learning_curves_from_a_csv_log(tmp_path):
    log = tmp_path / "metrics.csv"
    log.write_text("epoch,step,val_bleu,val_bleu/tatoeba,val_bleu/multi30k,wall_minutes\n"
                   "0,100,10.0,8.0,12.0,1.0\n0,150,,,,\n0,200,20.0,18.0,22.0,2.0\n")
    out = plotting.plot_curves([log], [""], tmp_path / "curve.png", title="t")
    assert out.read_bytes()[:8] == PNG
    log.write_text("epoch,step,train_loss\n0,1,3.0\n")
    with pytest.raises(UsageError, match="no row with val_bleu"):
        plotting.plot_curves([log], [""], tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()
    with pytest.raises(UsageError, match="cannot read"):
        plotting.read_validation_rows(tmp_path / "missing.csv")


# -- hostile cases (issue #14's first round) --------------------------------------------------
@pytest.mark.hostile
def test_17_plot_message_names_the_file_written(capsys, tmp_path, trained_checkpoint):
    code, _, err = run_main(capsys, "translate", "-m", trained_checkpoint, "The cat eats.", "--plot-attention",
                       tmp_path / "att")
    assert code == 0 and f"attention plot: {tmp_path / 'att.png'}" in err
    assert (tmp_path / "att.png").read_bytes()[:4] == b"\x89PNG"
