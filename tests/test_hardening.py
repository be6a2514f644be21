"""Hostile input and lost files: each numbered case of issue #14 ends in a right answer or a
one-line error, and no command destroys or half-writes a user's file."""

import io
import json
import math
import os
import sys
from pathlib import Path

import pytest
import torch

from conftest import one_line_error, synthetic_pairs
from conftest import run_main as run
from minitrans import Translator, cli
from minitrans.checkpoint import CheckpointError, load_checkpoint, load_for_inference, save_atomic
from minitrans.errors import DataError, MinitransError, UsageError
from minitrans.textio import atomic_output, read_lines

pytestmark = pytest.mark.hostile  # the first round runs with the other hostile cases: -m hostile


# -- data loss -------------------------------------------------------------------------
def test_1_output_that_is_the_input_is_refused(capsys, tmp_path, trained_checkpoint):
    same = tmp_path / "same.txt"
    same.write_text("The cat eats.\nThe dog sees a book.\n")
    code, _, err = run(capsys, "translate", "-m", trained_checkpoint, "-i", same, "-o", same)
    assert code == 2 and "is the --input file" in one_line_error(err)
    assert same.read_text() == "The cat eats.\nThe dog sees a book.\n"


def test_2_average_never_overwrites_one_of_its_inputs(capsys, tmp_path, trained_checkpoint):
    a = tmp_path / "A.ckpt"
    a.write_bytes(trained_checkpoint.read_bytes())
    before = a.read_bytes()
    code, _, err = run(capsys, "average", "-m", a, trained_checkpoint, "-o", a)
    assert code == 2 and "one of the checkpoints to average" in one_line_error(err)
    assert a.read_bytes() == before


def test_3_and_4_failed_writes_leave_the_old_file_whole(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old complete content\n")
    with pytest.raises(RuntimeError):
        with atomic_output(target) as f:
            f.write("new partial")
            raise RuntimeError("killed half-way")
    assert target.read_text() == "old complete content\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_4_translation_failing_half_way_keeps_the_old_output(capsys, tmp_path, trained_checkpoint, monkeypatch):
    out = tmp_path / "out.fr"
    out.write_text("old\n")
    calls = {"n": 0}
    original = Translator.translate_detailed

    def fail_on_second_chunk(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("the machine went away")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate_detailed", fail_on_second_chunk)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"The cat eats.\n" * 1500)))
    with pytest.raises(RuntimeError):
        cli.main(["translate", "-m", str(trained_checkpoint), "-o", str(out)])
    assert out.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.fr"]


# -- silently wrong --------------------------------------------------------------------
ODD_BREAKS = ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]


def test_5_evaluate_reads_lines_as_wc_does(capsys, tmp_path, trained_checkpoint):
    pairs = synthetic_pairs(20, seed=3)
    src = [e for e, _ in pairs]
    ref = [f for _, f in pairs]
    src[4] = src[4].replace(" ", ODD_BREAKS[0], 1)
    ref[7] = ref[7].replace(" ", "\x0c", 1)
    ref[9] = ref[9].replace(" ", "\x1e", 1)
    (tmp_path / "s.en").write_text("".join(s + "\n" for s in src), encoding="utf-8", newline="")
    (tmp_path / "s.fr").write_text("".join(r + "\n" for r in ref), encoding="utf-8", newline="")
    code, out, err = run(capsys, "evaluate", "-m", trained_checkpoint, "--src", tmp_path / "s.en", "--ref",
                         tmp_path / "s.fr", "--beam", "1", "-o", tmp_path / "eval")
    assert code == 0, err
    assert json.loads(out)["sentences"] == 20
    hyps = next((tmp_path / "eval").glob("model-*.s.beam1.hyp.txt")).read_bytes().count(b"\n")
    assert hyps == 20


def test_6_a_stray_carriage_return_does_not_split_a_line(capsys, tmp_path, trained_checkpoint):
    (tmp_path / "in.txt").write_bytes(b"The cat eats.\nThe dog\rsees a book.\r\nA child draws.\n")
    code, out, _ = run(capsys, "translate", "-m", trained_checkpoint, "-i", tmp_path / "in.txt", "--beam", "1")
    assert code == 0 and out.count("\n") == 3


def test_7_a_byte_order_mark_is_not_text(capsys, tmp_path, trained_checkpoint):
    (tmp_path / "bom.txt").write_bytes("\ufeffThe cat eats the bread.\n".encode())
    (tmp_path / "plain.txt").write_bytes(b"The cat eats the bread.\n")
    _, with_bom, _ = run(capsys, "translate", "-m", trained_checkpoint, "-i", tmp_path / "bom.txt")
    _, plain, _ = run(capsys, "translate", "-m", trained_checkpoint, "-i", tmp_path / "plain.txt")
    assert with_bom == plain
    assert read_lines(tmp_path / "bom.txt") == ["The cat eats the bread."]


@pytest.mark.parametrize("flags, what", [
    (["--alpha", "nan"], "--alpha"), (["--alpha", "-50"], "--alpha"), (["--alpha=-inf"], "--alpha"), (["--alpha", "-inf"], "--alpha"),
    (["--beam", "1", "--nbest", "3"], "--nbest"), (["--beam", "0"], "--beam"), (["--nbest", "0"], "--nbest"),
    (["--layer", "9"], "--layer"), (["--head", "-1"], "--head"), (["--head", "4"], "--head"),
    (["--device", "potato"], "--device"),
])
def test_8_and_14_bad_decoding_flags_are_usage_errors(capsys, trained_checkpoint, flags, what):
    code, out, err = run(capsys, "translate", "-m", trained_checkpoint, "The cat eats.", *flags)
    assert code == 2 and what in one_line_error(err) and out == ""


def test_8_nbest_lines_carry_the_input_line_number(capsys, tmp_path, trained_checkpoint):
    (tmp_path / "in.txt").write_text("The cat eats.\n\nThe dog sees a book.\n")
    code, out, _ = run(capsys, "translate", "-m", trained_checkpoint, "-i", tmp_path / "in.txt", "--beam", "3",
                       "--nbest", "3")
    rows = [line.split("\t") for line in out.splitlines()]
    assert code == 0 and all(len(r) == 3 for r in rows)
    numbers = [int(r[0]) for r in rows]
    assert numbers == sorted(numbers) and set(numbers) == {1, 2, 3}
    assert numbers.count(2) == 1 and rows[numbers.index(2)][1] == ""  # the empty line: one empty result


def test_9_a_string_is_one_sentence(trained_checkpoint):
    translator = Translator.from_checkpoint(trained_checkpoint)
    one = translator.translate("The cat eats the bread.", beam_size=2)
    assert isinstance(one, str) and one == translator.translate(["The cat eats the bread."], beam_size=2)[0]
    with pytest.raises(UsageError, match="expects strings"):
        translator.translate_detailed(["ok", 3])


def test_10_empty_references_are_an_error_naming_the_line(capsys, tmp_path, trained_checkpoint):
    (tmp_path / "s.en").write_text("The cat eats.\nThe dog sees a book.\n")
    (tmp_path / "s.fr").write_text("Le chat mange.\n\n")
    code, _, err = run(capsys, "evaluate", "-m", trained_checkpoint, "--src", tmp_path / "s.en", "--ref",
                       tmp_path / "s.fr", "-o", tmp_path / "eval")
    assert code == 1 and "s.fr, line 2: empty reference" in one_line_error(err)


def test_11_a_swapped_tokenizer_is_caught(tmp_path, trained_checkpoint, prepared):
    from minitrans.tokenizer import Tokenizer

    checkpoint = load_checkpoint(trained_checkpoint)
    other = Tokenizer.train([f for _, f in synthetic_pairs(300, seed=77)] + ["zzz qqq"] * 5, 320)
    assert other.fingerprint() != prepared.tokenizer.fingerprint() and other.vocab_size == 320
    checkpoint["minitrans"]["tokenizer"] = other.to_tensor()
    checkpoint["minitrans"]["tokenizer_fingerprint"] = other.fingerprint()  # consistent with itself
    torch.save(checkpoint, tmp_path / "swapped.ckpt")
    with pytest.raises(CheckpointError, match="not the one its weights were trained with"):
        load_for_inference(tmp_path / "swapped.ckpt")


def test_12_a_filter_that_leaves_no_training_pair_is_an_error(capsys, tmp_path, prepared):
    from test_training import write_config

    cfg = write_config(tmp_path, prepared)
    code, _, err = run(capsys, "prepare", "--config", cfg, "--data.max_len", "2", "--data.cache_dir", tmp_path / "c")
    assert code == 1 and "No training pair" in one_line_error(err) and "max_len" in err


# -- tracebacks where a one-line error belongs -----------------------------------------
def test_13_non_utf8_input_names_file_and_line(capsys, tmp_path, trained_checkpoint, monkeypatch):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"The cat eats.\nLe caf\xe9 est bon.\n")
    out = tmp_path / "out.txt"
    code, _, err = run(capsys, "translate", "-m", trained_checkpoint, "-i", bad, "-o", out)
    line = one_line_error(err)
    assert code == 1 and "latin1.txt, line 2" in line and "iconv" in line and not out.exists()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ok\n\xff\xfe\n")))
    code, _, err = run(capsys, "translate", "-m", trained_checkpoint)
    assert code == 1 and "<stdin>, line 2" in one_line_error(err)
    tsv = tmp_path / "bad.tsv"
    tsv.write_bytes(b"Hello.\tBonjour.\nCaf\xe9.\tCaf\xe9.\n")
    from minitrans.corpus import read_tsv

    with pytest.raises(DataError, match="bad.tsv, line 2"):
        read_tsv(tsv)


@pytest.mark.parametrize("flags, what", [
    (["-i", "/nonexistent/in.txt"], "--input"),
    (["-o", "/nonexistent/folder/out.txt", "hello"], "does not exist"),
    (["--plot-attention", "/nonexistent/folder/a.png", "hello"], "does not exist"),
])
def test_14_paths_are_checked_before_the_model_loads(capsys, tmp_path, flags, what):
    # The checkpoint does not exist either: the usage error must come first.
    code, _, err = run(capsys, "translate", "-m", tmp_path / "missing.ckpt", *flags)
    assert code == 2 and what in one_line_error(err)


def test_14_evaluate_checks_its_output_folder_before_decoding(capsys, tmp_path, trained_checkpoint):
    (tmp_path / "a_file").write_text("x")
    code, _, err = run(capsys, "evaluate", "-m", trained_checkpoint, "--dataset", "multi30k",
                       "-o", tmp_path / "a_file" / "eval")
    assert code == 2 and "-o/--output" in one_line_error(err)


def test_14_train_errors_are_one_line(capsys, tmp_path, prepared):
    from test_training import write_config

    cfg = write_config(tmp_path, prepared)
    code, _, err = run(capsys, "prepare", "--config", cfg, "--data.vocab_size", "10", "--data.cache_dir",
                       tmp_path / "c")
    assert code == 1 and "vocab_size" in one_line_error(err)
    code, _, err = run(capsys, "train", "--config", cfg, "--data.dataset", "tsv", "--data.files",
                       '{"train": "/nonexistent.tsv"}', "--data.cache_dir", tmp_path / "c2")
    assert code == 1 and "/nonexistent.tsv" in one_line_error(err)
    code, _, err = run(capsys, "train", "--config", cfg, "--model.config.n_heads", "3")
    assert code != 0 and "n_heads" in err and "Traceback" not in err


def _damaged(tmp_path, trained_checkpoint, how):
    path = tmp_path / f"{how}.ckpt"
    if how == "text":
        path.write_text("this is not a checkpoint\n")
    elif how == "random":
        path.write_bytes(os.urandom(4096))
    elif how == "truncated":
        path.write_bytes(trained_checkpoint.read_bytes()[:5000])
    else:
        checkpoint = load_checkpoint(trained_checkpoint)
        if how == "no-metadata":
            del checkpoint["minitrans"]["model_config"]
        elif how == "bad-tokenizer":
            checkpoint["minitrans"]["tokenizer"] = torch.arange(100, dtype=torch.uint8)
        elif how == "nan":
            key = next(k for k, v in checkpoint["state_dict"].items() if v.is_floating_point())
            checkpoint["state_dict"][key] = torch.full_like(checkpoint["state_dict"][key], math.nan)
        torch.save(checkpoint, path)
    return path


@pytest.mark.parametrize("how, message", [
    ("text", "not a readable checkpoint"), ("random", "not a readable checkpoint"),
    ("truncated", "not a readable checkpoint"), ("no-metadata", "lacks a valid 'model_config'"),
    ("bad-tokenizer", "SentencePiece model cannot be read"), ("nan", "NaN"),
])
def test_15_malformed_checkpoints_are_one_line(capsys, tmp_path, trained_checkpoint, how, message):
    code, out, err = run(capsys, "translate", "-m", _damaged(tmp_path, trained_checkpoint, how), "--beam", "3",
                         "The cat eats.")
    line = one_line_error(err)
    assert code == 1 and message in line and "possibly code" not in line and out == ""


def test_15_resuming_an_averaged_checkpoint_is_refused(capsys, tmp_path, prepared, trained_checkpoint):
    from test_training import write_config

    avg = tmp_path / "avg.ckpt"
    run(capsys, "average", "-m", trained_checkpoint, trained_checkpoint, "-o", avg)
    code, _, err = run(capsys, "train", "--config", write_config(tmp_path, prepared), "--resume", avg)
    assert code == 1 and "minitrans average" in one_line_error(err)


def test_16_two_prepares_at_once_both_succeed(tmp_path, data_root):
    """Two processes prepare the same fresh cache together: both end with the same complete cache."""
    import subprocess

    code = ("import sys; from conftest import make_datamodule; "
            f"dm = make_datamodule({str(data_root)!r}, {str(tmp_path / 'cache')!r}); dm.prepare_data(); dm.setup(); "
            "print(dm.cache_path, len(dm.splits['train']))")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    env.pop("MINITRANS_DATA", None)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                              text=True) for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [r[1][-2000:] for r in results]
    assert results[0][0] == results[1][0]
    assert not [p for p in (tmp_path / "cache").iterdir() if ".tmp" in p.name]


def test_16b_a_second_build_waits_and_never_deletes_the_first_cache(tmp_path):
    """The race behind a flaky CI run: the second build checked, found no cache, then deleted
    the first's just-published one. Now the second waits, builds nothing, and the first's
    cache is untouched; a killed build's leftover folder is cleared by the next build."""
    import threading
    import time

    from minitrans import datacache

    path = tmp_path / "cache" / "toy-0123456789ab"
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "toy-0123456789ab.tmp999999999").mkdir()  # a killed build's folder
    first_started, fills, returned = threading.Event(), [], {}

    def fill(name):
        def write(folder, scratch):
            fills.append(name)
            first_started.set()
            time.sleep(0.5)  # long enough for the second build to arrive
            (folder / "data.txt").write_text(name)
            return {"by": name}
        return write

    def run(name):
        returned[name] = datacache.build(path, fill(name))

    first = threading.Thread(target=run, args=("first",))
    first.start()
    first_started.wait(10)
    second = threading.Thread(target=run, args=("second",))
    second.start()
    first.join(20), second.join(20)
    assert fills == ["first"] and returned == {"first": True, "second": False}
    assert (path / "data.txt").read_text() == "first" and datacache.read_report(path)["by"] == "first"
    assert not [p for p in path.parent.iterdir() if ".tmp" in p.name]


# -- smaller ---------------------------------------------------------------------------
def test_17_a_killed_save_leaves_no_temporary_behind(tmp_path):
    target = tmp_path / "model.ckpt"
    dead = tmp_path / ".model.ckpt.tmp999999999"  # the temporary of a process that is gone
    dead.write_bytes(b"half a checkpoint")
    save_atomic({"x": torch.ones(2)}, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.ckpt"]


def test_17_long_input_warning_names_the_real_line(trained_checkpoint, caplog):
    import logging

    translator = Translator.from_checkpoint(trained_checkpoint)
    with caplog.at_level(logging.WARNING):
        translator.translate_detailed(["ok", "word " * 200], beam_size=1, first_line=1001)
    assert "Input line 1002" in caplog.text


def test_17_plot_message_names_the_file_written(capsys, tmp_path, trained_checkpoint):
    code, _, err = run(capsys, "translate", "-m", trained_checkpoint, "The cat eats.", "--plot-attention",
                       tmp_path / "att")
    assert code == 0 and f"attention plot: {tmp_path / 'att.png'}" in err
    assert (tmp_path / "att.png").read_bytes()[:4] == b"\x89PNG"


def test_17_missing_src_is_not_about_the_data_directory(capsys, tmp_path, trained_checkpoint):
    code, _, err = run(capsys, "evaluate", "-m", trained_checkpoint, "--src", tmp_path / "none.en", "--ref",
                       tmp_path / "none.fr")
    line = one_line_error(err)
    assert code == 1 and "none.en" in line and "MINITRANS_DATA" not in line


def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(MinitransError):
        cli.main(["translate", "-m", str(tmp_path / "missing.ckpt"), "hi", "--debug"])


def test_an_output_never_spans_two_lines(trained_checkpoint, monkeypatch):
    """Even if the model spells a line break with byte-fallback pieces, the output is one line."""
    translator = Translator.from_checkpoint(trained_checkpoint)
    newline_piece = translator.tokenizer.sp.piece_to_id("<0x0A>")
    assert translator.tokenizer.sp.is_byte(newline_piece)
    from minitrans import native_engine
    from minitrans.search import Hypothesis

    def fake_beam(model, src, *args, **kwargs):
        return [[Hypothesis([newline_piece, newline_piece], -1.0, -1.0)] for _ in range(src.size(0))]

    monkeypatch.setattr(native_engine, "beam_search", fake_beam)
    out = translator.translate(["The cat eats.", "The dog sees a book."], beam_size=2)
    assert all("\n" not in o for o in out) and len(out) == 2
