"""``minitrans adapt``: a toy model adapted on a generated TMX for a few seconds — the output is a
checkpoint every command takes, with its provenance and report; mistakes are one line and
lose nothing."""

from __future__ import annotations

import json
import os
import stat

import pytest

from conftest import one_line_error, run_main, synthetic_pairs
from minitrans.checkpoint import checkpoint_metadata
from minitrans.translate import Translator

pytestmark = pytest.mark.slow


def write_tmx(path, pairs, en="en-US", fr="fr-FR", utf16=False):
    units = "\n".join(f'<tu><tuv xml:lang="{en}"><seg>{e}</seg></tuv><tuv xml:lang="{fr}"><seg>{f}</seg></tuv></tu>'
                      for e, f in pairs)
    text = f'<?xml version="1.0" encoding="{"UTF-16" if utf16 else "UTF-8"}"?>\n<tmx version="1.4"><header ' \
           f'srclang="{en}" segtype="sentence"/><body>\n{units}\n</body></tmx>\n'
    path.write_bytes(text.encode("utf-16" if utf16 else "utf-8"))
    return path


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    """300 pairs the toy model has not seen (another seed of the synthetic corpus), as a CAT tool's TMX."""
    return write_tmx(tmp_path_factory.mktemp("tm") / "memory.tmx", synthetic_pairs(300, seed=42), utf16=True)


@pytest.fixture(scope="module")
def adapted(trained_checkpoint, memory, tmp_path_factory, data_root):
    os.environ.pop("MINITRANS_DATA", None)
    out = tmp_path_factory.mktemp("adapted") / "clinic.ckpt"
    from minitrans.training.adapt import adapt

    report = adapt(trained_checkpoint, [memory], out, minutes=0.15, beam_size=2, data_dir=str(data_root))
    return out, report


def test_the_adapted_checkpoint_translates_and_records_where_it_came_from(adapted, trained_checkpoint, memory):
    out, report = adapted
    assert Translator.load(out).translate(["The cat eats an apple."])[0].strip()
    meta = checkpoint_metadata(out)["adapted"]
    assert meta["parent"]["checkpoint"] == trained_checkpoint.name and len(meta["parent"]["sha256"]) == 64
    assert meta["data"] == [{"file": "memory.tmx", "sha256": meta["data"][0]["sha256"], "pairs": 300}]
    assert 30 <= meta["pairs"]["held_out"] <= 40 and meta["replayed"] == ["multi30k"] and meta["minutes"] == 0.15
    assert str(out.parent) not in json.dumps(meta) and "/tmp" not in json.dumps(meta)  # no path of this machine
    assert meta["report"]["sets"] == report["sets"]


def test_the_report_scores_before_and_after_on_the_held_out_part_and_the_parents_test_set(adapted):
    out, report = adapted
    names = [row["set"] for row in report["sets"]]
    assert names == ["yours", "multi30k.test"]
    yours = report["sets"][0]
    held_out = (out.with_name("clinic.run") / "data" / "test.tsv").read_text().splitlines()
    assert yours["sentences"] == len({line.split("\t")[0] for line in held_out}) and 0 <= yours["bleu_before"] <= 100 and 0 <= yours["bleu_after"] <= 100
    assert yours["bleu_change"] == pytest.approx(yours["bleu_after"] - yours["bleu_before"], abs=0.011)
    assert "BLEU before" in report["table"] and "yours" in report["table"]
    written = json.loads(out.with_name("clinic.report.json").read_text())
    assert written["sets"] == report["sets"]


def test_the_users_pairs_stay_private_and_out_of_training(adapted):
    out, _ = adapted
    run = out.with_name("clinic.run")
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    files = {s: (run / "data" / f"{s}.tsv") for s in ("train", "valid", "test")}
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files.values())
    sides = {s: {line.split("\t")[0] for line in f.read_text().splitlines()} for s, f in files.items()}
    assert not sides["train"] & sides["test"] and not sides["train"] & sides["valid"]


def test_mistakes_are_one_line_and_write_nothing(capsys, trained_checkpoint, memory, adapted, tmp_path):
    out, _ = adapted
    cases = [
        (["-m", str(trained_checkpoint), "--data", str(memory), "-o", str(out)], "already exists; pass --force"),
        (["-m", str(trained_checkpoint), "--data", str(memory), "-o", str(tmp_path / "x.ckpt"), "--minutes", "0"],
         "--minutes must be a positive number"),
        (["-m", str(tmp_path), "--data", str(memory), "-o", str(tmp_path / "x.ckpt")], "adapt starts from a minitrans "
                                                                                        ".ckpt"),
    ]
    few = write_tmx(tmp_path / "few.tmx", synthetic_pairs(20, seed=3))
    cases.append((["-m", str(trained_checkpoint), "--data", str(few), "-o", str(tmp_path / "x.ckpt")],
                  "adapt needs at least 100"))
    german = tmp_path / "de.tmx"
    german.write_text('<tmx><body><tu><tuv xml:lang="de"><seg>Hallo</seg></tuv><tuv xml:lang="en"><seg>Hello</seg>'
                      '</tuv></tu></body></tmx>')
    cases.append((["-m", str(trained_checkpoint), "--data", str(german), "-o", str(tmp_path / "x.ckpt")],
                  "the languages found are de (1), en (1)"))
    not_ours = tmp_path / "other.ckpt"
    not_ours.write_bytes(b"not a checkpoint")
    cases.append((["-m", str(not_ours), "--data", str(memory), "-o", str(tmp_path / "x.ckpt")], "other.ckpt"))
    for args, words in cases:
        code, _, err = run_main(capsys, "adapt", *args)
        assert code != 0 and words in one_line_error(err), (args, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["de.tmx", "few.tmx", "other.ckpt"]  # nothing written


def test_an_fr_en_model_adapts_on_the_same_memory_read_the_other_way(trained_fr_en, memory, tmp_path, data_root):
    from minitrans.training.adapt import plan

    p = plan(trained_fr_en, [memory], tmp_path / "fr-en.ckpt", minutes=0.1, data_dir=str(data_root))
    assert p.direction == "fr-en" and p.data["direction"] == "fr-en"
    train = (p.files["train"]).read_text().splitlines()[0].split("\t")
    assert train[0] in {e for e, _ in synthetic_pairs(300, seed=42)}  # the TSV keeps English first, as corpora do


def test_the_cards_and_the_api_show_the_provenance_but_never_the_users_sentences(adapted):
    from minitrans.checkpoint import adaptation_lines, published
    from minitrans.export.argos import readme
    from minitrans.export.web import model_card

    out, report = adapted
    meta = checkpoint_metadata(out)
    public = published(meta, ("adapted",))["adapted"]
    assert public["parent"] == meta["adapted"]["parent"] and "examples" not in public["report"]
    assert report["examples"] and not any(e["source"] in json.dumps(public) for e in report["examples"])
    lines = adaptation_lines(meta)
    assert lines[0].startswith("Adapted from model.ckpt (sha256 ") and "memory.tmx (" in lines[0]
    assert any(line.startswith("yours (your held-out pairs") and "BLEU" in line for line in lines)
    assert lines[0] in readme(meta, "en", "fr", out.name, "int8")
    assert "<h2>Adapted</h2>" in model_card(meta, "en", "fr", out.name, "float32")


def test_text_far_from_the_parents_vocabulary_is_said_in_one_line(adapted):
    from minitrans.training.adapt import vocabulary_notes

    out, _ = adapted
    fit = checkpoint_metadata(out)["adapted"]["vocabulary"]
    assert set(fit) == {"en", "fr"} and all(v["pieces_per_word"] >= 1 for v in fit.values())
    far = {"en": {"pieces_per_word": 2.5, "chars_per_word": 6.45, "byte_or_unknown_share": 0.0364},
           "fr": {"pieces_per_word": 1.3, "chars_per_word": 5.1, "byte_or_unknown_share": 0.0}}
    (line,) = vocabulary_notes(far)
    assert line.startswith("your en text is far from the parent's vocabulary: 2.5 pieces per word (3.6% single")
