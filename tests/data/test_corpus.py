import urllib.error

import pytest

from minitrans.data import corpus
from minitrans.text.cleaning import clean, clean_train_pairs
from minitrans.data.corpus import grouped_split, read_aligned, read_tsv
from minitrans.data.sources import load_corpus
from minitrans.errors import DataError


def test_clean_normalises_unicode_and_whitespace():
    assert clean("  Cours\u202f!\u00a0 e\u0301te\u0301\t") == "Cours ! été"


def test_read_tsv_errors_name_file_line_and_fix(tmp_path):
    with pytest.raises(DataError, match="not found.*MINITRANS_DATA"):
        read_tsv(tmp_path / "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(DataError, match="empty"):
        read_tsv(empty)
    bad = tmp_path / "bad.txt"
    bad.write_text("Hello.\tBonjour.\nNo tab here\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.txt, line 2: .*no tab"):
        read_tsv(bad)


def test_read_tsv_accepts_attribution_column(tmp_path):
    f = tmp_path / "fra.txt"
    f.write_text("Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org\n", encoding="utf-8")
    assert read_tsv(f) == [("Go.", "Va !")]


def test_read_aligned_mismatch(tmp_path):
    (tmp_path / "a.en").write_text("one\ntwo\n")
    (tmp_path / "a.fr").write_text("un\n")
    with pytest.raises(DataError, match="2 lines.*has 1"):
        read_aligned(tmp_path / "a.en", tmp_path / "a.fr")


def test_cleaning_report():
    pairs = [("Hi.", "Salut."), ("Hi.", "Salut."), ("", "Vide."), ("x" * 500, "long")]
    kept, report = clean_train_pairs(pairs)
    assert kept == [("Hi.", "Salut.")]
    assert report.dropped == {"exact duplicates": 1, "empty": 1, "longer than 400 characters": 1}


def many_pairs():
    pairs = []
    for i in range(300):
        pairs.append((f"Sentence {i}.", f"Phrase {i}."))
        if i % 3 == 0:
            pairs.append((f"Sentence {i}.", f"Une autre phrase {i}."))  # several references
        if i % 5 == 0:
            pairs.append((f"Variant {i}!", f"Phrase {i}."))  # one French for two English sentences
    return pairs


def test_grouped_split_has_no_leakage_in_either_language():
    train, valid, test = grouped_split(many_pairs(), valid_size=30, test_size=40, seed=3)
    train_en, train_fr = {e for e, _ in train}, {f for _, f in train}
    for held in (valid, test):
        assert held and not ({e for e, _ in held} & train_en) and not ({f for _, f in held} & train_fr)
    assert not ({e for e, _ in valid} & {e for e, _ in test})
    assert len(train) + len(valid) + len(test) == len(many_pairs())


def test_grouped_split_is_seeded():
    a = grouped_split(many_pairs(), 30, 40, seed=3)
    assert a == grouped_split(many_pairs(), 30, 40, seed=3)
    assert a[2] != grouped_split(many_pairs(), 30, 40, seed=4)[2]


def test_tatoeba_keeps_all_references_of_a_test_sentence(tmp_path):
    folder = tmp_path / "tatoeba-fra-eng"
    folder.mkdir()
    (folder / "fra.txt").write_text("".join(f"{e}\t{f}\n" for e, f in many_pairs()), encoding="utf-8")
    splits, report = load_corpus("tatoeba", tmp_path, valid_size=30, test_size=40, seed=3)
    test = splits["test"]
    multi = [row for row in test if len(row["refs"]) > 1]
    assert multi, "sentences with several translations keep them all"
    for row in multi:
        n = int(row["en"].split()[1].rstrip(".!"))
        assert set(row["refs"]) >= {f"Phrase {n}.", f"Une autre phrase {n}."}
    assert len(set(test["en"])) == len(test)  # one row per English sentence
    assert report.kept == len(splits["train"])


def test_what_the_user_gave_wins_over_the_environment(tmp_path, monkeypatch):
    """Issue #42, item 25: ``--data-dir``/``data.data_dir`` > ``$MINITRANS_DATA`` > ``data/raw``;
    for a checkpoint's corpora, the recorded folder comes last."""
    monkeypatch.setenv("MINITRANS_DATA", str(tmp_path / "env"))
    assert str(corpus.resolve_data_dir("given")) == "given"
    assert corpus.resolve_data_dir(None) == tmp_path / "env"
    assert corpus.data_dir_for("given", "recorded") == "given"
    assert corpus.data_dir_for(None, "recorded") == str(tmp_path / "env")
    monkeypatch.delenv("MINITRANS_DATA")
    assert str(corpus.resolve_data_dir(None)) == "data/raw"
    assert corpus.data_dir_for(None, "recorded") == "recorded"


def test_missing_corpus_error_says_how_to_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("MINITRANS_DATA", raising=False)
    with pytest.raises(DataError, match="MINITRANS_DATA"):
        load_corpus("multi30k", tmp_path)
    with pytest.raises(DataError, match="Unknown dataset"):
        load_corpus("wmt", tmp_path)


def test_download_offline_gives_clear_error(tmp_path, monkeypatch):
    from minitrans.data import download
    from minitrans.data import sources

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(download.urllib.request, "urlopen", offline)
    with pytest.raises(DataError, match="offline.*MINITRANS_DATA"):
        sources.download("multi30k", tmp_path)
    with pytest.raises(DataError, match="multi30k or tatoeba"):
        sources.download("tsv", tmp_path)
    with pytest.raises(DataError, match="Unknown dataset"):
        sources.download("wmt", tmp_path)
