import logging
import subprocess
import sys

import pytest
import torch

from conftest import synthetic_pairs
from minitrans import Translator
from minitrans.errors import UsageError
from minitrans.evaluation.plotting import plot_attention


@pytest.fixture(scope="module")
def translator(trained_checkpoint):
    """fp32, whatever the CPU: these tests compare decodings to the last bit (batch against
    single sentence, scores against their recomputation), which bf16's rounding does not keep."""
    return Translator.from_checkpoint(trained_checkpoint, precision="fp32")


def test_the_trained_model_translates_its_corpus(translator):
    pairs = synthetic_pairs(20, seed=99)
    out = translator.translate([e for e, _ in pairs], beam_size=4)
    exact = sum(o == f for o, (_, f) in zip(out, pairs))
    assert exact >= 15, list(zip(out, pairs))[:5]  # 20/20 when measured


def test_results_come_back_in_input_order(translator):
    sentences = [e for e, _ in synthetic_pairs(12, seed=5)]
    sentences[3] = "The cat sees a book near the river in the green house at night today."  # longest
    batched = translator.translate(sentences, beam_size=3)
    assert batched == [translator.translate([s], beam_size=3)[0] for s in sentences]


def test_odd_input_keeps_every_line(translator, caplog):
    odd = ["", "   ", "The cat eats.", "\x07\x1b[31mcontrol\x00", "🙂🙂🙂", "ЗДРАВСТВУЙТЕ МИР", "THE DOG SEES A BOOK.",
           "word " * 200]
    with caplog.at_level(logging.WARNING):
        out = translator.translate_detailed(odd, beam_size=2)
    assert len(out) == len(odd)
    assert out[0].text == "" and out[1].text == ""
    assert out[-1].truncated and "translating the first" in caplog.text
    assert all(isinstance(t.text, str) for t in out)


def test_nbest_scores_and_attention(translator, tmp_path):
    result = translator.translate_detailed(["The dog likes the ball."], beam_size=4, nbest=3, attention=True)[0]
    scores = [s for _, s in result.nbest]
    assert len(result.nbest) == 3 and scores == sorted(scores, reverse=True)
    layers, heads, t, s = result.attention.shape
    assert (layers, heads) == (2, 4) and t == len(result.tgt_pieces) and s == len(result.src_pieces)
    assert result.attention.sum(-1).allclose(result.attention.new_ones(layers, heads, t))
    png = tmp_path / "att.png"
    plot_attention(result, png, layer=0, head=1)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="layer"):
        plot_attention(result, png, layer=7)


def test_greedy_equals_beam_one(translator):
    """The Translator's greedy path (beam 1) gives what beam search with one beam gives."""
    import torch

    from minitrans.model.masks import pad
    from minitrans.decoding.search import beam_search
    from minitrans.text.tokenizer import EOS_ID

    sentences = [e for e, _ in synthetic_pairs(6, seed=8)]
    src = pad([ids + [EOS_ID] for ids in translator.tokenizer.encode(sentences)])
    with torch.inference_mode():
        beams = beam_search(translator.model, src, beam_size=1, alpha=0.0)
    by_beam = translator.tokenizer.decode([hs[0].tokens for hs in beams])
    assert translator.translate(sentences, beam_size=1) == by_beam


def test_bf16_decoding_runs_and_mostly_agrees(trained_checkpoint):
    sentences = [e for e, _ in synthetic_pairs(10, seed=21)]
    exact = Translator.from_checkpoint(trained_checkpoint).translate(sentences, beam_size=2)
    translator = Translator.from_checkpoint(trained_checkpoint, bf16=True)
    assert {p.dtype for p in translator.engine.model.parameters()} == {torch.bfloat16}  # cast once, no autocast
    fast = translator.translate(sentences, beam_size=2)
    assert sum(a == b for a, b in zip(exact, fast)) >= 7
    detailed = translator.translate_detailed(sentences[:1], beam_size=2, attention=True)[0]
    assert detailed.attention.dtype == torch.float32


def test_int8_and_bf16_together_are_refused_with_the_reason(trained_checkpoint):
    with pytest.raises(UsageError, match="--int8 and --bf16 .* choose one"):
        Translator.from_checkpoint(trained_checkpoint, int8=True, bf16=True)


def test_int8_decoding_stays_close_to_fp32(trained_checkpoint):
    """`--int8`: every matrix of the model, the output projection included, becomes dynamic
    int8; the translations stay those of fp32 on this corpus."""
    int8 = Translator.from_checkpoint(trained_checkpoint, int8=True)
    quantized = torch.ao.nn.quantized.dynamic.Linear
    assert isinstance(int8.model.output_proj, quantized)
    assert isinstance(int8.model.decoder.layers[0].self_attn.q_proj, quantized)
    sentences = [e for e, _ in synthetic_pairs(20, seed=41)]
    ref = Translator.from_checkpoint(trained_checkpoint).translate(sentences, beam_size=3)
    out = int8.translate(sentences, beam_size=3)
    assert sum(a == b for a, b in zip(out, ref)) >= 18


def test_int8_does_not_print_pytorchs_deprecation_warnings():
    """`--int8` uses torch.ao's dynamic quantisation knowingly; PyTorch's deprecation warnings
    about it (one of them C++'s warn-once, hence a fresh process) must not reach the user."""
    code = ("import warnings, torch; warnings.simplefilter('always')\n"
            "from minitrans.engines.native_engine import quantize_int8\n"
            "m = torch.nn.Module(); m.output_proj = torch.nn.Linear(8, 8)\n"
            "with warnings.catch_warnings(record=True) as seen:\n"
            "    warnings.simplefilter('always'); quantize_int8(m)\n"
            "print(type(m.output_proj).__module__, [str(w.message)[:80] for w in seen])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("torch.ao.nn.quantized.dynamic")  # it did quantise
    assert "deprecated" not in out.stdout + out.stderr


def test_token_batches_cover_every_sentence_once_within_the_budget():
    from minitrans.engines.native_engine import token_batches

    sources = [[5] * n for n in (9, 2, 30, 4, 4, 7, 1, 12)]
    batches = token_batches(sources, max_tokens=40, beam_size=2)
    assert sorted(i for b in batches for i in b) == list(range(len(sources)))
    flat = [len(sources[i]) for b in batches for i in b]
    assert flat == sorted(flat)  # by length: little padding
    for b in batches:  # within budget, except a lone sentence longer than it (30 * 2 > 40)
        assert len(b) * max(len(sources[i]) for i in b) * 2 <= 40 or len(b) == 1
    assert [2] in batches  # the 30-token sentence alone


# -- hostile cases (issue #14's first round) --------------------------------------------------
@pytest.mark.hostile
def test_9_a_string_is_one_sentence(trained_checkpoint):
    translator = Translator.from_checkpoint(trained_checkpoint)
    one = translator.translate("The cat eats the bread.", beam_size=2)
    assert isinstance(one, str) and one == translator.translate(["The cat eats the bread."], beam_size=2)[0]
    with pytest.raises(UsageError, match="expects strings"):
        translator.translate_detailed(["ok", 3])


@pytest.mark.hostile
def test_17_long_input_warning_names_the_real_line(trained_checkpoint, caplog):
    import logging

    translator = Translator.from_checkpoint(trained_checkpoint)
    with caplog.at_level(logging.WARNING):
        translator.translate_detailed(["ok", "word " * 200], beam_size=1, first_line=1001)
    assert "Input line 1002" in caplog.text


@pytest.mark.hostile
def test_an_output_never_spans_two_lines(trained_checkpoint, monkeypatch):
    """Even if the model spells a line break with byte-fallback pieces, the output is one line."""
    translator = Translator.from_checkpoint(trained_checkpoint)
    newline_piece = translator.tokenizer.sp.piece_to_id("<0x0A>")
    assert translator.tokenizer.sp.is_byte(newline_piece)
    from minitrans.engines import native_engine
    from minitrans.decoding.search import Hypothesis

    def fake_beam(model, src, *args, **kwargs):
        return [[Hypothesis([newline_piece, newline_piece], -1.0, -1.0)] for _ in range(src.size(0))]

    monkeypatch.setattr(native_engine, "beam_search", fake_beam)
    out = translator.translate(["The cat eats.", "The dog sees a book."], beam_size=2)
    assert all("\n" not in o for o in out) and len(out) == 2


# -- hostile cases (issue #30's second round: the command line's contract) --------------------
@pytest.mark.hostile
@pytest.mark.parametrize("value, words", [(b"The cat.", "decode"), ({"q": "The cat."}, "dict"),
                                          (["ok", b"x"], "bytes"), (["ok", None], "NoneType"), (5, "int")])
def test_contract_python_api_says_what_to_pass(translator, value, words):
    with pytest.raises(UsageError, match=words):
        translator.translate(value)
