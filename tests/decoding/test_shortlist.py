"""The vocabulary shortlist: built from co-occurrence counts, stored in a checkpoint by
`minitrans shortlist`, used when asked (``--shortlist``), and decoding over it equals full
decoding whenever the full decoding's pieces are in it (greedy: always; beam: when the pieces left out carry no probability,
constructed here with an output bias)."""

import pytest
import torch
from torch import nn

from conftest import run_main, synthetic_pairs
from minitrans import Translator
from minitrans.errors import CheckpointError
from minitrans.decoding.search import beam_search, greedy_search
from minitrans.decoding.shortlist import Shortlist, build
from minitrans.text.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID


def test_each_source_piece_keeps_the_targets_seen_most_often_with_it():
    pairs = [([10, 11, EOS_ID], [20, 21, EOS_ID])] * 3 + [([10, EOS_ID], [20, 22, EOS_ID])] + \
            [([12, EOS_ID], [23, EOS_ID])] * 2
    shortlist = build(pairs, vocab_size=30, top_k=2, frequent=0)
    # p(20 | 10) = 4/4, p(21 | 10) = 3/4 beats p(22 | 10) = 1/4; eos is in no list (always scored).
    assert shortlist.table[10].tolist() == [20, 21]
    assert shortlist.table[12].tolist() == [23, -1]
    assert shortlist.table[13].tolist() == [-1, -1]  # never seen
    assert shortlist.table[EOS_ID].tolist() == [-1, -1]
    assert build(pairs, vocab_size=30, top_k=3, frequent=0).table[10].tolist() == [20, 21, 22]
    assert shortlist.pairs == 6


def test_the_most_frequent_targets_eos_and_unk_are_always_scored():
    pairs = [([10, EOS_ID], [20, EOS_ID]), ([11, EOS_ID], [20, 21, EOS_ID]), ([12, EOS_ID], [20, 24, EOS_ID])]
    shortlist = build(pairs, vocab_size=30, top_k=1, frequent=1)
    assert shortlist.always.tolist() == [UNK_ID, EOS_ID, 20]
    vocab = shortlist.vocabulary(torch.tensor([[11, EOS_ID, PAD_ID]]))
    assert vocab.tolist() == sorted(vocab.tolist()) == [UNK_ID, EOS_ID, 20]  # 11's top-1 is 20 (p = 1)
    assert PAD_ID not in vocab and BOS_ID not in vocab
    assert build(pairs, vocab_size=30, top_k=2, frequent=1).vocabulary(torch.tensor([11])).tolist() == \
        [UNK_ID, EOS_ID, 20, 21]
    assert 24 not in shortlist.vocabulary(torch.tensor([[10, 11]]))


def test_the_checkpoint_entry_round_trips_and_a_misfit_is_refused():
    shortlist = build([([10, EOS_ID], [20, EOS_ID])], vocab_size=30, top_k=2, frequent=5)
    again = Shortlist.from_entry(shortlist.to_entry(), 30)
    assert torch.equal(again.table, shortlist.table) and torch.equal(again.always, shortlist.always)
    with pytest.raises(CheckpointError, match="does not fit the model's 40 pieces"):
        Shortlist.from_entry(shortlist.to_entry(), 40)
    with pytest.raises(CheckpointError, match="damaged"):
        Shortlist.from_entry({"table": shortlist.table}, 30)


@pytest.fixture(scope="module")
def model_and_sources(trained_checkpoint):
    translator = Translator.from_checkpoint(trained_checkpoint, precision="fp32")
    ids = [translator.tokenizer.encode(e) + [EOS_ID] for e, _ in synthetic_pairs(12, seed=41)]
    from minitrans.model.masks import pad

    return translator.model, pad(ids)


def _pieces_of(hypotheses) -> set[int]:
    return {t for h in hypotheses for t in h.tokens}


def test_greedy_over_a_shortlist_holding_its_choices_picks_the_same(model_and_sources):
    model, src = model_and_sources
    full = greedy_search(model, src)
    others = torch.randperm(model.config.vocab_size, generator=torch.Generator().manual_seed(0))[:30]
    vocab = torch.unique(torch.cat([torch.tensor(sorted(_pieces_of(full) | {EOS_ID})), others]))
    vocab = vocab[(vocab != PAD_ID) & (vocab != BOS_ID)]
    short = greedy_search(model, src, vocab=vocab)
    assert [h.tokens for h in short] == [h.tokens for h in full]
    # Normalised over fewer pieces, each log-probability is at least the full one.
    assert all(s.logprob >= f.logprob - 1e-4 for s, f in zip(short, full))
    # A shortlist without one chosen piece changes that output: the test can fail.
    missing = next(iter(_pieces_of(full) - {EOS_ID}))
    assert [h.tokens for h in greedy_search(model, src, vocab=vocab[vocab != missing])] != [h.tokens for h in full]


def test_beam_search_over_a_shortlist_equals_full_search_when_the_rest_has_no_probability(model_and_sources):
    """The constructed case: an output bias of -1e4 on every piece outside the shortlist, so the
    full search's normaliser is the shortlist's (to float precision) and the beams must agree."""
    model, src = model_and_sources
    vocab = torch.tensor(sorted(_pieces_of(greedy_search(model, src)) | {EOS_ID, UNK_ID} | set(range(4, 60))))
    weight = model.tgt_embed.weight if model.output_proj is None else model.output_proj.weight
    biased = nn.Linear(weight.size(1), weight.size(0), bias=True)
    with torch.no_grad():
        biased.weight.copy_(weight)
        biased.bias.fill_(-1e4)
        biased.bias[vocab] = 0.0
    saved = model.output_proj
    model.output_proj = biased
    try:
        full = beam_search(model, src, beam_size=4, nbest=3)
        short = beam_search(model, src, beam_size=4, nbest=3, vocab=vocab)
    finally:
        model.output_proj = saved
    assert [[h.tokens for h in n] for n in short] == [[h.tokens for h in n] for n in full]
    assert all(abs(s.score - f.score) < 1e-3 for ns, nf in zip(short, full) for s, f in zip(ns, nf))


def test_the_shortlist_command_stores_it_with_its_settings(trained_checkpoint, tmp_path, capsys):
    out = tmp_path / "listed.ckpt"
    code, stdout, err = run_main(capsys, "shortlist", "-m", trained_checkpoint, "-o", out, "--top-k", "20",
                                 "--frequent", "20")
    assert code == 0, err
    assert '"top_k": 20' in stdout
    listed = Translator.from_checkpoint(out, precision="fp32", shortlist=True)
    assert listed.engine.shortlist.top_k == 20 and len(listed.engine.shortlist.always) <= 22
    assert Translator.from_checkpoint(trained_checkpoint, shortlist=True).engine.shortlist is None  # it has none
    assert Translator.from_checkpoint(out).engine.shortlist is None  # off unless asked (it costs BLEU)
    assert len(listed.translate([e for e, _ in synthetic_pairs(10, seed=43)], beam_size=3)) == 10
    code, _, err = run_main(capsys, "shortlist", "-m", out, "-o", out)
    assert code == 2 and "is the checkpoint read" in err


def test_translate_over_the_stored_shortlist_equals_full_when_it_holds_the_choices(trained_checkpoint, tmp_path,
                                                                                    capsys):
    out = tmp_path / "listed.ckpt"
    assert run_main(capsys, "shortlist", "-m", trained_checkpoint, "-o", out)[0] == 0
    sentences = [e for e, _ in synthetic_pairs(10, seed=43)]  # one decoding batch
    listed = Translator.from_checkpoint(out, precision="fp32", shortlist=True)
    src = torch.tensor([t for e in sentences for t in listed.tokenizer.encode(e)])
    vocab = set(listed.engine.shortlist.vocabulary(src).tolist())
    plain = Translator.from_checkpoint(trained_checkpoint, precision="fp32")
    ids = [plain.tokenizer.encode(e) + [EOS_ID] for e in sentences]
    chosen = {t for hyps in plain.engine.search(ids, 1, 1.0, 1, 1.5, 10) for t in hyps[0].tokens}
    assert chosen <= vocab, "the default lists should hold this toy model's outputs"
    full = plain.translate(sentences, beam_size=1)
    assert listed.translate(sentences, beam_size=1) == full
    code, via_flag, _ = run_main(capsys, "translate", "-m", out, "--shortlist", "--precision", "fp32", "--beam", "1",
                                 *sentences[:3])
    assert code == 0 and via_flag.splitlines() == full[:3]
