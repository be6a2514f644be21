"""Property-based tests over random Unicode text (Hypothesis): every line-break code point,
byte-order marks, NULs and undecodable bytes. Line count in = line count out, everywhere."""

import io
import json
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minitrans.cli import parser as cli
from minitrans.data.batching import TokenBatchSampler
from minitrans.text.cleaning import clean
from minitrans.errors import DataError
from minitrans.text.textio import iter_lines

# Every code point that str.splitlines() or universal newlines treat as a line break,
# plus BOM, NUL and ordinary text.
BREAKERS = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\ufeff", "\x00", "\t"]
line_text = st.lists(st.one_of(st.sampled_from(BREAKERS), st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=12)),
    max_size=6).map("".join)
documents = st.lists(line_text, min_size=0, max_size=8)
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def wc_l(data: bytes) -> int:
    """What `wc -l` counts, plus a last line without its newline."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


@FAST
@given(documents, st.booleans())
def test_reader_agrees_with_wc(lines, final_newline):
    data = "\n".join(lines).encode("utf-8") + (b"\n" if final_newline and lines else b"")
    read = list(iter_lines(io.BytesIO(data), "doc"))
    assert len(read) == wc_l(data)


@FAST
@given(st.binary(max_size=60))
def test_reader_on_raw_bytes_is_right_or_names_the_line(data):
    try:
        read = list(iter_lines(io.BytesIO(data), "doc"))
    except DataError as err:
        assert "doc, line " in str(err) and "UTF-8" in str(err)
    else:
        assert len(read) == wc_l(data)


@pytest.fixture(scope="module")
def tokenizer(prepared):
    return prepared.tokenizer


@FAST
@given(line_text)
def test_tokenizer_round_trip_of_cleaned_text(tokenizer, text):
    text = clean(text)
    assert tokenizer.decode(tokenizer.encode([text]))[0] == text


@FAST
@given(st.lists(st.integers(1, 60), min_size=1, max_size=80), st.integers(60, 400), st.integers(0, 5))
def test_batches_cover_every_example_once_within_budget(lengths, budget, seed):
    sampler = TokenBatchSampler(lengths, budget, shuffle=True, seed=seed)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert all(len(b) * max(lengths[i] for i in b) <= budget or len(b) == 1 for b in batches)


def translate_cli(capsys, checkpoint, stdin: bytes, *flags):
    sys_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        cli.main(["translate", "-m", str(checkpoint), "--beam", "2", *flags])
    finally:
        sys.stdin = sys_stdin
    return capsys.readouterr().out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(documents)
def test_translate_keeps_one_output_line_per_input_line(capsys, tmp_path, trained_checkpoint, lines):
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    n = wc_l(data)
    plain = translate_cli(capsys, trained_checkpoint, data)
    assert plain.count("\n") == n
    records = [json.loads(r) for r in translate_cli(capsys, trained_checkpoint, data, "--json").split("\n")[:-1]]
    assert [r["line"] for r in records] == list(range(1, n + 1))
    nbest = translate_cli(capsys, trained_checkpoint, data, "--nbest", "2").split("\n")[:-1]
    assert sorted({int(r.split("\t")[0]) for r in nbest}) == list(range(1, n + 1))
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    cli.main(["translate", "-m", str(trained_checkpoint), "--beam", "2", "-i", str(path), "-o", str(tmp_path / "o")])
    assert (tmp_path / "o").read_bytes().count(b"\n") == n


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(line_text.filter(lambda s: clean(s.removeprefix("\ufeff")) != ""), min_size=1, max_size=6))
def test_evaluate_keeps_sources_and_references_aligned(capsys, tmp_path, trained_checkpoint, lines):
    src, ref = tmp_path / "s.en", tmp_path / "s.fr"
    src.write_bytes("".join(line + "\n" for line in lines).encode())
    ref.write_bytes("".join(line + "\n" for line in lines).encode())
    cli.main(["evaluate", "-m", str(trained_checkpoint), "--src", str(src), "--ref", str(ref), "--beam", "1",
              "-o", str(tmp_path / "eval")])
    report = json.loads(capsys.readouterr().out)
    assert report["sentences"] == len(lines)
    assert next((tmp_path / "eval").glob("model-*.s.beam1.hyp.txt")).read_bytes().count(b"\n") == len(lines)
