"""The `minitrans` command end to end on a small trained model (in-process, no network)."""

import io
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import one_line_error, run_main, synthetic_pairs
from minitrans import Translator
from minitrans.cli import parser as cli
from minitrans.errors import DataError, MinitransError


def run(capsys, *args):
    cli.main(list(args))
    return capsys.readouterr()


def test_translate_arguments_and_json(capsys, trained_checkpoint):
    out = run(capsys, "translate", "--model", str(trained_checkpoint), "The cat eats the bread.",
              "I don't speak French.", "--beam", "3")
    lines = out.out.splitlines()
    assert len(lines) == 2 and all(lines)
    out = run(capsys, "translate", "-m", str(trained_checkpoint), "--json", "--nbest", "2", "The dog sees a book.")
    record = json.loads(out.out)
    assert record["source"] == "The dog sees a book." and len(record["nbest"]) == 2
    assert record["nbest"][0]["score"] >= record["nbest"][1]["score"]


def test_translate_stdin_keeps_line_count(capsys, monkeypatch, trained_checkpoint):
    text = "The cat eats.\n\n   \nA child draws a red car.\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    out = run(capsys, "translate", "-m", str(trained_checkpoint), "--beam", "1")
    assert out.out.count("\n") == 4
    assert out.out.splitlines()[1:3] == ["", ""]


def test_translate_files_and_plot(capsys, tmp_path, trained_checkpoint):
    src = tmp_path / "in.txt"
    src.write_text("".join(e + "\n" for e, _ in synthetic_pairs(5, seed=3)), encoding="utf-8")
    png = tmp_path / "att.png"
    run(capsys, "translate", "-m", str(trained_checkpoint), "--input", str(src), "--output", str(tmp_path / "out.txt"),
        "--plot-attention", str(png))
    assert len((tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()) == 5
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_evaluate_files_with_two_references(capsys, tmp_path, trained_checkpoint):
    pairs = synthetic_pairs(8, seed=11)
    (tmp_path / "s.en").write_text("".join(e + "\n" for e, _ in pairs), encoding="utf-8")
    (tmp_path / "r1.fr").write_text("".join(f + "\n" for _, f in pairs), encoding="utf-8")
    (tmp_path / "r2.fr").write_text("".join(f.upper() + "\n" for _, f in pairs), encoding="utf-8")
    out = run(capsys, "evaluate", "-m", str(trained_checkpoint), "--src", str(tmp_path / "s.en"),
              "--ref", str(tmp_path / "r1.fr"), "--ref", str(tmp_path / "r2.fr"), "--beam", "2",
              "-o", str(tmp_path / "eval"))
    report = json.loads(out.out)
    assert report["sentences"] == 8 and "nrefs:2" in report["bleu_signature"]
    saved = json.loads(open(report["report_path"]).read())
    assert saved["bleu"] == report["bleu"]
    hyp_file, = (tmp_path / "eval").glob("model-*.s.beam2.hyp.txt")
    assert len(hyp_file.read_text().splitlines()) == 8


def test_evaluate_several_checkpoints_prints_a_table(capsys, tmp_path, trained_checkpoint, data_root, monkeypatch):
    monkeypatch.setenv("MINITRANS_DATA", str(data_root))
    avg = tmp_path / "avg.ckpt"
    run(capsys, "average", "-m", str(trained_checkpoint), str(trained_checkpoint), "-o", str(avg))
    out = run(capsys, "evaluate", "-m", str(trained_checkpoint), str(avg), "--dataset", "multi30k",
              "--split", "test", "--beam", "1", "-o", str(tmp_path / "eval"))
    rows = out.out.splitlines()
    assert rows[0].split() == ["checkpoint", "data", "BLEU", "chrF", "sent/s"]
    assert rows[1].split()[1] == "multi30k/test"
    assert rows[1].split()[2] == rows[2].split()[2]  # the average of two copies scores the same
    assert rows[-2].startswith("BLEU: nrefs:1")
    copy = tmp_path / "other" / trained_checkpoint.name  # same file name, another run
    copy.parent.mkdir()
    copy.write_bytes(trained_checkpoint.read_bytes())
    run(capsys, "evaluate", "-m", str(trained_checkpoint), str(copy), "--dataset", "multi30k", "--split", "test",
        "--beam", "1", "-o", str(tmp_path / "eval2"))
    assert len(list((tmp_path / "eval2").glob("*.json"))) == 2  # one report each, none overwritten


def test_user_errors_are_one_clear_line(capsys, tmp_path, trained_checkpoint):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["translate", "-m", str(tmp_path / "nope.ckpt"), "hello"])
    assert exit_info.value.code == 1
    assert "Checkpoint not found" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "-m", str(trained_checkpoint), "--src", str(tmp_path / "none.en"), "--ref",
                  str(tmp_path / "none.fr")])
    assert "Source file not found" in capsys.readouterr().err


def test_prepare_prints_statistics(capsys, tmp_path, prepared):
    from conftest import write_config

    out = run(capsys, "prepare", "--config", str(write_config(tmp_path, prepared)))
    stats = json.loads(out.out)
    assert stats["vocab_size"] == 320 and stats["splits"]["train"]["pairs"] > 300


def test_prepare_merges_its_configs_as_train_does(capsys, tmp_path, prepared, monkeypatch):
    """Issue #42, item 24: ``--config A --config B`` is A overridden by B, as ``train`` reads
    it; and the ``data_dir`` a config gives wins over ``$MINITRANS_DATA`` (item 25)."""
    from conftest import write_config

    second = tmp_path / "second.yaml"
    second.write_text(f"data:\n  vocab_size: 300\n  cache_dir: {tmp_path}/cache2\n")
    monkeypatch.setenv("MINITRANS_DATA", str(tmp_path / "nothing-here"))
    stats = json.loads(run(capsys, "prepare", "--config", str(write_config(tmp_path, prepared)),
                           "--config", str(second)).out)
    assert stats["vocab_size"] == 300 and stats["cache"].startswith(f"{tmp_path}/cache2")
    assert stats["splits"]["train"]["pairs"] > 300  # A's dataset and data_dir, not the environment's


def test_quickstart_steps_on_a_tiny_model(capsys, tmp_path, prepared, monkeypatch):
    """prepare -> train -> evaluate -> translate, as scripts/quickstart.sh runs them (tiny sizes)."""
    from conftest import write_config

    cfg = str(write_config(tmp_path, prepared))
    run(capsys, "prepare", "--config", cfg)
    cli.main(["train", "--config", cfg])
    best = tmp_path / "ckpt" / "best.ckpt"
    assert best.exists() and (tmp_path / "ckpt" / "last.ckpt").exists()
    capsys.readouterr()
    monkeypatch.setenv("MINITRANS_DATA", str(prepared.hparams.data_dir))
    report = json.loads(run(capsys, "evaluate", "-m", str(best), "--dataset", "multi30k", "--split",
                            "test_2016_flickr", "--beam", "2", "-o", str(tmp_path / "eval")).out)
    assert report["sentences"] == 30 and report["split"] == "test_2016_flickr"
    out = run(capsys, "translate", "-m", str(best), "I don't speak French.")
    assert len(out.out.splitlines()) == 1


def test_one_model_flag_everywhere_and_the_old_spellings_still_work(capsys, tmp_path, trained_checkpoint):
    """``-m/--model`` names the model on every command (``-c`` is the config in ``train``); the old
    ``-c``/``--checkpoint`` and the positional ``export CKPT DIR``/``average CKPT...`` still work
    and say once, on stderr, what to write instead."""
    ckpt = str(trained_checkpoint)
    new = run(capsys, "translate", "-m", ckpt, "The cat eats the bread.")
    assert new.out.strip() and "deprecated" not in new.err
    for old_flag in ("-c", "--checkpoint"):
        old = run(capsys, "translate", old_flag, ckpt, "The cat eats the bread.")
        assert old.out == new.out and old.err.count(f"{old_flag} is deprecated") == 1 and "use -m/--model" in old.err
    parser = cli.build_parser()
    for argv in (["evaluate", "-m", ckpt, ckpt], ["serve", "-m", ckpt], ["export", "-m", ckpt, "-o", "d"],
                 ["average", "-m", ckpt, ckpt, "-o", "a.ckpt"]):
        args = parser.parse_args(argv)
        cli.resolve_model_args(args)
        assert args.checkpoint in (ckpt, [ckpt], [ckpt, ckpt]), argv  # serve: one -m per direction
    args = parser.parse_args(["export", ckpt, "out-dir"])
    cli.resolve_model_args(args)
    assert (args.checkpoint, args.output_dir) == (ckpt, "out-dir") and "export -m CKPT -o DIR" in capsys.readouterr().err
    args = parser.parse_args(["average", ckpt, ckpt, "-o", "a.ckpt"])
    cli.resolve_model_args(args)
    assert args.checkpoint == [ckpt, ckpt] and "average -m CKPT" in capsys.readouterr().err
    for argv, missing in ((["translate", "hello"], "-m/--model"), (["export", "-m", ckpt], "-o/--output"),
                          (["average", "-o", str(tmp_path / "a.ckpt")], "-m/--model")):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and len(err.splitlines()) == 1 and missing in err, (argv, err)
    for name, sub in next(a for a in parser._actions if a.dest == "command").choices.items():
        assert "--checkpoint" not in sub.format_help() and " -c " not in sub.format_help(), name


def test_one_spelling_per_concept_and_the_old_ones_still_work(capsys, tmp_path, trained_checkpoint):
    """Issue #44: ``-o/--output`` is what a command writes (a file or a folder), ``--precision``
    the number format; ``evaluate --output-dir``, ``distill --out/--teacher`` and ``--bf16``/
    ``--int8`` still work for a release, each with one note naming the new spelling, and are
    hidden from ``--help``; usage lines show the model flag as required."""
    pairs = synthetic_pairs(4, seed=5)
    (tmp_path / "s.en").write_text("".join(e + "\n" for e, _ in pairs))
    (tmp_path / "r.fr").write_text("".join(f + "\n" for _, f in pairs))
    data = ["--src", str(tmp_path / "s.en"), "--ref", str(tmp_path / "r.fr"), "--beam", "1"]
    new = run(capsys, "evaluate", "-m", str(trained_checkpoint), *data, "-o", str(tmp_path / "new"))
    old = run(capsys, "evaluate", "-m", str(trained_checkpoint), *data, "--output-dir", str(tmp_path / "old"))
    assert json.loads(new.out)["bleu"] == json.loads(old.out)["bleu"] and "deprecated" not in new.err
    assert old.err.count("--output-dir is deprecated; use -o/--output") == 1
    assert list((tmp_path / "new").glob("*.json")) and list((tmp_path / "old").glob("*.json"))
    for flag, precision in (("--bf16", "bf16"), ("--int8", "int8")):
        said = run(capsys, "translate", "-m", str(trained_checkpoint), flag, "--beam", "1", "The cat eats.")
        assert said.out.strip() and f"{flag} is deprecated; use --precision {precision}" in said.err
    parser = cli.build_parser()
    args = parser.parse_args(["distill", "--teacher", "a.ckpt", "--monolingual", "x.en", "--out", "d"])
    assert (args.teacher, args.out) == (["a.ckpt"], "d")
    err = capsys.readouterr().err
    assert "--teacher is deprecated; use -m/--model" in err and "--out is deprecated; use -o/--output" in err
    sub = next(a for a in parser._actions if a.dest == "command").choices
    for name in ("translate", "evaluate", "calibrate", "shortlist", "serve", "export", "average", "distill"):
        usage, text = sub[name].format_usage(), sub[name].format_help()
        assert " --model MODEL" in usage and "[--model" not in usage, (name, usage)
        for old_flag in ("--output-dir", "--out ", "--teacher", "--bf16", "--int8"):
            assert old_flag not in text, (name, old_flag)


# -- hostile cases (issue #14's first round) --------------------------------------------------
@pytest.mark.hostile
def test_1_output_that_is_the_input_is_refused(capsys, tmp_path, trained_checkpoint):
    same = tmp_path / "same.txt"
    same.write_text("The cat eats.\nThe dog sees a book.\n")
    code, _, err = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", same, "-o", same)
    assert code == 2 and "is the --input file" in one_line_error(err)
    assert same.read_text() == "The cat eats.\nThe dog sees a book.\n"


@pytest.mark.hostile
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


@pytest.mark.hostile
@pytest.mark.parametrize("flags, what", [
    (["--alpha", "nan"], "--alpha"), (["--alpha", "-50"], "--alpha"), (["--alpha=-inf"], "--alpha"), (["--alpha", "-inf"], "--alpha"),
    (["--beam", "1", "--nbest", "3"], "--nbest"), (["--beam", "0"], "--beam"), (["--nbest", "0"], "--nbest"),
    (["--layer", "9"], "--layer"), (["--head", "-1"], "--head"), (["--head", "4"], "--head"),
    (["--device", "potato"], "--device"),
])
def test_8_and_14_bad_decoding_flags_are_usage_errors(capsys, trained_checkpoint, flags, what):
    code, out, err = run_main(capsys, "translate", "-m", trained_checkpoint, "The cat eats.", *flags)
    assert code == 2 and what in one_line_error(err) and out == ""


@pytest.mark.hostile
def test_8_nbest_lines_carry_the_input_line_number(capsys, tmp_path, trained_checkpoint):
    (tmp_path / "in.txt").write_text("The cat eats.\n\nThe dog sees a book.\n")
    code, out, _ = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", tmp_path / "in.txt", "--beam", "3",
                       "--nbest", "3")
    rows = [line.split("\t") for line in out.splitlines()]
    assert code == 0 and all(len(r) == 3 for r in rows)
    numbers = [int(r[0]) for r in rows]
    assert numbers == sorted(numbers) and set(numbers) == {1, 2, 3}
    assert numbers.count(2) == 1 and rows[numbers.index(2)][1] == ""  # the empty line: one empty result


@pytest.mark.hostile
def test_13_non_utf8_input_names_file_and_line(capsys, tmp_path, trained_checkpoint, monkeypatch):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"The cat eats.\nLe caf\xe9 est bon.\n")
    out = tmp_path / "out.txt"
    code, _, err = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", bad, "-o", out)
    line = one_line_error(err)
    assert code == 1 and "latin1.txt, line 2" in line and "iconv" in line and not out.exists()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ok\n\xff\xfe\n")))
    code, _, err = run_main(capsys, "translate", "-m", trained_checkpoint)
    assert code == 1 and "<stdin>, line 2" in one_line_error(err)
    tsv = tmp_path / "bad.tsv"
    tsv.write_bytes(b"Hello.\tBonjour.\nCaf\xe9.\tCaf\xe9.\n")
    from minitrans.data.corpus import read_tsv

    with pytest.raises(DataError, match="bad.tsv, line 2"):
        read_tsv(tsv)


@pytest.mark.hostile
@pytest.mark.parametrize("flags, what", [
    (["-i", "/nonexistent/in.txt"], "--input"),
    (["-o", "/nonexistent/folder/out.txt", "hello"], "does not exist"),
    (["--plot-attention", "/nonexistent/folder/a.png", "hello"], "does not exist"),
])
def test_14_paths_are_checked_before_the_model_loads(capsys, tmp_path, flags, what):
    # The checkpoint does not exist either: the usage error must come first.
    code, _, err = run_main(capsys, "translate", "-m", tmp_path / "missing.ckpt", *flags)
    assert code == 2 and what in one_line_error(err)


@pytest.mark.hostile
def test_17_missing_src_is_not_about_the_data_directory(capsys, tmp_path, trained_checkpoint):
    code, _, err = run_main(capsys, "evaluate", "-m", trained_checkpoint, "--src", tmp_path / "none.en", "--ref",
                       tmp_path / "none.fr")
    line = one_line_error(err)
    assert code == 1 and "none.en" in line and "MINITRANS_DATA" not in line


@pytest.mark.hostile
def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(MinitransError):
        cli.main(["translate", "-m", str(tmp_path / "missing.ckpt"), "hi", "--debug"])


# -- hostile cases (issue #30's second round: the command line's contract) --------------------
@pytest.mark.hostile
@pytest.mark.parametrize("flags, words", [
    (["--timeout", "-1"], "--timeout"), (["--timeout", "nan"], "--timeout"), (["--beam", "17"], "--beam"),
    (["--max-queue", "0"], "--max-queue"), (["--max-attention-values", "0"], "--max-attention-values"),
])
def test_contract_serve_flags_outside_the_api_are_refused(capsys, tmp_path, flags, words):
    code, _, err = run_main(capsys, "serve", "-m", tmp_path / "never-loaded.ckpt", *flags)
    assert code == 2 and words in one_line_error(err)


@pytest.mark.hostile
def test_contract_a_port_in_use_is_one_line(capsys, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        code, _, err = run_main(capsys, "serve", "-m", tmp_path / "never-loaded.ckpt", "--port", port)
    assert code == 2 and "in use" in one_line_error(err)


@pytest.mark.hostile
def test_contract_broken_pipe_exits_quietly(tmp_path, trained_checkpoint):
    big = tmp_path / "big.txt"
    big.write_text("The cat eats.\n" * 3000)
    env = {k: v for k, v in os.environ.items() if k != "MINITRANS_DATA"}
    for how in (f"< '{big}'", f"-i '{big}'"):
        shell = (f"set -o pipefail; {sys.executable} -m minitrans translate -m '{trained_checkpoint}' --beam 1 {how} "
                 "| head -1")
        result = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=300, env=env)
        # stderr: only the line that says which engine decodes (issue #45), no traceback
        said = result.stderr.splitlines()
        assert result.stdout.count("\n") == 1 and len(said) == 1 and said[0].startswith("decoding with"), \
            (how, result.stderr[-1000:])
        assert result.returncode == 141, how  # SIGPIPE's status, as `yes | head -1` gives


@pytest.mark.hostile
def test_contract_a_file_is_translated_in_chunks():
    from minitrans.cli import commands

    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"chunks{os.getpid()}.txt"
    path.write_text("x\n" * (2 * commands.CHUNK_LINES + 5))
    try:
        chunks = list(commands._lines([], str(path)))
    finally:
        path.unlink()
    assert [first for first, _ in chunks] == [1, commands.CHUNK_LINES + 1, 2 * commands.CHUNK_LINES + 1]
    assert sum(len(c) for _, c in chunks) == 2 * commands.CHUNK_LINES + 5


@pytest.mark.hostile
def test_contract_input_from_a_named_pipe_or_process_substitution(capsys, tmp_path, trained_checkpoint):
    fifo = tmp_path / "in"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "w") as f:
            f.write("The cat eats.\nThe dog sees.\n")

    threading.Thread(target=feed, daemon=True).start()
    code, out, err = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", fifo)
    assert code == 0 and out.count("\n") == 2, err


@pytest.mark.hostile
def test_contract_translate_to_a_file_says_what_went_where(capsys, tmp_path, trained_checkpoint, monkeypatch):
    from minitrans.cli import commands

    monkeypatch.setattr(commands, "CHUNK_LINES", 4)  # a "long" input of three chunks
    source = tmp_path / "in.txt"
    source.write_text("The cat eats.\n" * 10)
    code, out, err = run_main(capsys, "translate", "-m", trained_checkpoint, "--beam", "1", "-i", source,
                         "-o", tmp_path / "out.txt")
    assert code == 0 and out == ""
    progress = [line for line in err.splitlines() if line.startswith("translated ")]
    assert [p.split()[1] for p in progress] == ["4", "8", "10"]
    assert f"wrote 10 translations of {source} to {tmp_path / 'out.txt'}" in err


@pytest.mark.hostile
def test_contract_evaluate_takes_checkpoints_either_way(capsys, tmp_path, trained_checkpoint):
    """`evaluate -c A -c B` evaluated only B (the second flag replaced the first); now it is `-c A B`,
    as `translate -c A -c B` has always been."""
    pairs = synthetic_pairs(4, seed=3)
    (tmp_path / "s.en").write_text("".join(e + "\n" for e, _ in pairs))
    (tmp_path / "r.fr").write_text("".join(f + "\n" for _, f in pairs))
    other = tmp_path / "other.ckpt"
    shutil.copy(trained_checkpoint, other)
    for flags in (["-m", trained_checkpoint, other], ["-m", trained_checkpoint, "-m", other]):
        code, out, err = run_main(capsys, "evaluate", *flags, "--src", tmp_path / "s.en", "--ref", tmp_path / "r.fr",
                             "--beam", "1", "-o", tmp_path / "eval")
        assert code == 0, err
        assert out.count(str(trained_checkpoint)) == 1 and out.count(str(other)) == 1, out


def test_every_handler_takes_its_commands_flags_by_name():
    """Each command's handler is a function of typed arguments named as its flags' destinations
    (minitrans.cli.parser.call_handler passes them): every flag is read, and nothing else is asked."""
    import argparse
    import inspect

    from minitrans.cli.parser import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    checked = 0
    for name, sub in commands.items():
        handler = sub.get_default("func")
        if handler is None or name in ("train", "fit", "validate", "test"):  # Lightning's own parser
            continue
        dests = {a.dest for a in sub._actions} - {"help", "old_positional"}  # old positionals: resolve_model_args
        params = set(inspect.signature(handler).parameters)
        extra = {"overrides"} if name == "prepare" else set()  # prepare's unknown flags: config overrides
        assert params == dests | extra, (name, sorted(params ^ (dests | extra)))
        assert all(p.annotation is not inspect.Parameter.empty for p in inspect.signature(handler).parameters.values())
        checked += 1
    assert checked == 12  # cache (issue #59) is the eleventh, adapt (#61) the twelfth


@pytest.mark.hostile
@pytest.mark.parametrize("given", ["corpora", "./corpora", "ABS", None])
def test_quickstart_reads_a_relative_data_folder_from_where_the_user_stands(tmp_path, given):
    """Issue #59, item 13: `MINITRANS_DATA=corpora bash ../minitrans/scripts/quickstart.sh` run
    from the user's folder means the user's corpora, not a folder of the repository."""
    import os
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "quickstart.sh"
    env = {k: v for k, v in os.environ.items() if k != "MINITRANS_DATA"}
    env["QUICKSTART_DRY_RUN"] = "1"
    if given is not None:
        env["MINITRANS_DATA"] = str(tmp_path / "corpora") if given == "ABS" else given
    out = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    found = Path(out.stdout.strip().split("=", 1)[1])
    expected = (tmp_path / "corpora") if given else script.parents[2] / "shared" / "data"
    assert found.is_absolute() and os.path.normpath(found) == os.path.normpath(expected)
