import json
import shutil
from pathlib import Path

import pytest
import sacrebleu
import torch

from conftest import one_line_error, run_main, synthetic_pairs
from minitrans.checkpoint import CheckpointError, average_checkpoints, load_checkpoint, load_for_inference, save_atomic
from minitrans.evaluation.evaluate import evaluate_checkpoint
from minitrans.metrics import score


def test_bleu_equals_sacrebleu_corpus_bleu():
    hyps = ["le chat est sur le tapis .", "il pleut beaucoup", "bonjour"]
    refs = [["le chat est sur le tapis ."], ["il pleut fort"], ["salut"]]
    ours = score(hyps, refs)
    theirs = sacrebleu.corpus_bleu(hyps, [[r[0] for r in refs]])
    assert ours["bleu"] == round(theirs.score, 2)
    assert ours["chrf"] == round(sacrebleu.corpus_chrf(hyps, [[r[0] for r in refs]]).score, 2)
    assert ours["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")


def test_multi_reference_scoring():
    hyps = ["il pleut très fort sur la ville ce soir", "bonjour à tous mes amis"]
    first = ["il pleut beaucoup sur la ville ce soir", "salut à tous mes amis"]
    one = score(hyps, [[first[0]], [first[1]]])
    two = score(hyps, [[first[0], "il pleut très fort sur la ville"], [first[1]]])  # variable count
    assert two["bleu"] > one["bleu"] > 0
    assert "nrefs:var" in two["bleu_signature"]
    expected = sacrebleu.corpus_bleu(hyps, [first, ["il pleut très fort sur la ville", None]]).score
    assert two["bleu"] == round(expected, 2)


def test_evaluate_checkpoint_report(trained_checkpoint):
    pairs = synthetic_pairs(10, seed=42)
    report, hyps = evaluate_checkpoint(trained_checkpoint, [e for e, _ in pairs], [[f] for _, f in pairs], beam_size=2)
    assert report["bleu"] == round(sacrebleu.corpus_bleu(hyps, [[f for _, f in pairs]]).score, 2)
    assert report["sentences"] == 10 and report["decoding"]["beam_size"] == 2 and report["sentences_per_second"] > 0


def test_averaging_two_copies_gives_the_same_logits(trained_checkpoint, tmp_path):
    out = tmp_path / "avg.ckpt"
    average_checkpoints([trained_checkpoint, trained_checkpoint], out)
    a, _, _ = load_for_inference(trained_checkpoint)
    b, _, meta = load_for_inference(out)
    src, tgt = torch.tensor([[5, 9, 12, 3]]), torch.tensor([[2, 7, 8]])
    torch.testing.assert_close(a(src, tgt), b(src, tgt))
    assert len(meta["averaged_from"]) == 2


def test_averaging_really_averages(trained_checkpoint, tmp_path):
    ckpt = load_checkpoint(trained_checkpoint)
    shifted = {**ckpt, "state_dict": {k: v + 1.0 if v.is_floating_point() else v for k, v in ckpt["state_dict"].items()}}
    save_atomic(shifted, tmp_path / "shifted.ckpt")
    average_checkpoints([trained_checkpoint, tmp_path / "shifted.ckpt"], tmp_path / "avg.ckpt")
    avg = load_checkpoint(tmp_path / "avg.ckpt")["state_dict"]
    key = "model.encoder.layers.0.feed_forward.linear1.weight"
    torch.testing.assert_close(avg[key], ckpt["state_dict"][key] + 0.5)


def test_averaging_mismatched_checkpoints_fails_cleanly(trained_checkpoint, tmp_path):
    ckpt = load_checkpoint(trained_checkpoint)
    other = {**ckpt, "minitrans": {**ckpt["minitrans"], "model_config": {**ckpt["minitrans"]["model_config"],
                                                                          "d_model": 128}}}
    save_atomic(other, tmp_path / "other.ckpt")
    with pytest.raises(CheckpointError, match="model configs differ in.*d_model"):
        average_checkpoints([trained_checkpoint, tmp_path / "other.ckpt"], tmp_path / "avg.ckpt")
    assert not (tmp_path / "avg.ckpt").exists()
    fingerprint = {**ckpt["minitrans"]["tokenizer_fingerprint"], "sha256": "0" * 64}
    save_atomic({**ckpt, "minitrans": {**ckpt["minitrans"], "tokenizer_fingerprint": fingerprint}}, tmp_path / "tok.ckpt")
    with pytest.raises(CheckpointError, match="different SentencePiece"):
        average_checkpoints([trained_checkpoint, tmp_path / "tok.ckpt"], tmp_path / "avg.ckpt")


def test_bleu_from_summed_shard_statistics_equals_corpus_bleu():
    from minitrans.metrics import bleu_from_statistics, bleu_statistics, corpus_bleu

    hyps = ["le chat est sur le tapis", "il pleut", "un homme marche dans la rue", "deux chiens jouent", "oui"]
    refs = [["le chat est sur le tapis"], ["il pleut fort", "il pleut beaucoup"], ["un homme marche"],
            ["deux chiens jouent dans l'herbe"], ["non"]]
    shards = [(hyps[:2], refs[:2]), (hyps[2:3], refs[2:3]), (hyps[3:], refs[3:]), ([], [])]
    summed = [sum(col) for col in zip(*(bleu_statistics(h, r) for h, r in shards))]
    assert summed[0] == 5
    assert bleu_from_statistics(summed) == corpus_bleu(hyps, refs).score
    assert bleu_from_statistics(bleu_statistics(hyps, refs)) == corpus_bleu(hyps, refs).score


# -- 5a. evaluation reports --------------------------------------------------------------
@pytest.mark.hostile
def test_5a_two_runs_best_checkpoints_never_overwrite_each_others_reports(capsys, tmp_path, trained_checkpoint):
    pairs = synthetic_pairs(5, seed=2)
    (tmp_path / "s.en").write_text("".join(e + "\n" for e, _ in pairs))
    (tmp_path / "r.fr").write_text("".join(f + "\n" for _, f in pairs))
    reports = []
    for run_name in ("a", "b"):
        ckpt = tmp_path / "runs" / run_name / "checkpoints" / "best.ckpt"
        ckpt.parent.mkdir(parents=True)
        shutil.copy(trained_checkpoint, ckpt)
        code, out, err = run_main(capsys, "evaluate", "-m", ckpt, "--src", tmp_path / "s.en", "--ref", tmp_path / "r.fr",
                             "--beam", "1", "-o", tmp_path / "eval")
        assert code == 0, err
        path = json.loads(out)["report_path"]
        assert f"report: {path}" in err  # says where it went
        reports.append(path)
    assert reports[0] != reports[1] and all(Path(p).is_file() for p in reports)
    assert len(list((tmp_path / "eval").glob("*.json"))) == 2


# -- hostile cases (issue #14's first round) --------------------------------------------------
@pytest.mark.hostile
def test_10_empty_references_are_an_error_naming_the_line(capsys, tmp_path, trained_checkpoint):
    (tmp_path / "s.en").write_text("The cat eats.\nThe dog sees a book.\n")
    (tmp_path / "s.fr").write_text("Le chat mange.\n\n")
    code, _, err = run_main(capsys, "evaluate", "-m", trained_checkpoint, "--src", tmp_path / "s.en", "--ref",
                       tmp_path / "s.fr", "-o", tmp_path / "eval")
    assert code == 1 and "s.fr, line 2: empty reference" in one_line_error(err)


@pytest.mark.hostile
def test_14_evaluate_checks_its_output_folder_before_decoding(capsys, tmp_path, trained_checkpoint):
    (tmp_path / "a_file").write_text("x")
    code, _, err = run_main(capsys, "evaluate", "-m", trained_checkpoint, "--dataset", "multi30k",
                       "-o", tmp_path / "a_file" / "eval")
    assert code == 2 and "-o/--output" in one_line_error(err)
