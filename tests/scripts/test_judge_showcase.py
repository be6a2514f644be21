"""scripts/judge_showcase.py and its verdicts: one verdict per output, and the quickstart page's
table judged as the file judges it (two verdicts on record once disagreed with each other)."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "judge_showcase.py"
spec = importlib.util.spec_from_file_location("judge_showcase", SCRIPT)
judge_showcase = importlib.util.module_from_spec(spec)
spec.loader.exec_module(judge_showcase)

ENGLISH = (ROOT / "scripts" / "showcase.en").read_text(encoding="utf-8").splitlines()
VERDICTS = judge_showcase.load_verdicts(ROOT / "scripts" / "showcase.verdicts.tsv")


def right_answers() -> list[str]:
    return [next(fr for (i, fr), (v, _) in VERDICTS.items() if i == n and v == "right")
            for n in range(1, len(ENGLISH) + 1)]


def test_every_sentence_has_a_right_answer_and_every_wrong_one_a_reason():
    assert {i for i, _ in VERDICTS} == set(range(1, len(ENGLISH) + 1))
    assert all(why for (v, why) in VERDICTS.values() if v == "wrong")
    assert len(right_answers()) == 22


def test_counts_right_wrong_and_new(tmp_path):
    french = right_answers()
    french[3] = "Quel âge êtes-vous ?"  # judged wrong: age takes avoir
    french[10] = "Il est quelle heure ?"  # not on record
    out = tmp_path / "showcase.fr"
    out.write_text("\n".join(french) + "\n", encoding="utf-8")
    run = subprocess.run([sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True, check=True)
    assert run.stdout.splitlines()[-1] == "right 20 of 22 (wrong 1, not judged yet 1)"
    assert '  4 wrong Quel âge êtes-vous ?  (age takes avoir ("avez-vous"))' in run.stdout
    assert " 11 new   Il est quelle heure ?" in run.stdout


@pytest.mark.hostile
@pytest.mark.parametrize("prefix", ["\ufeff", ""])
def test_a_file_that_starts_with_a_bom_or_holds_a_line_separator_counts_alike(tmp_path, prefix):
    """Issue #59, item 8: a BOM (as Windows editors write) made line 1 unknown, 16 instead of 17;
    U+2028 inside a line must not split it."""
    french = right_answers()
    french[10] = "Il est quelle\u2028heure ?"  # one line holding a line separator: new, not two lines
    out = tmp_path / "showcase.fr"
    out.write_text(prefix + "\n".join(french) + "\r\n", encoding="utf-8")
    run = subprocess.run([sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True, check=True)
    assert run.stdout.splitlines()[-1] == "right 21 of 22 (wrong 0, not judged yet 1)"


def test_a_short_file_is_a_one_line_error(tmp_path):
    out = tmp_path / "showcase.fr"
    out.write_text("Je ne parle pas français.\n", encoding="utf-8")
    run = subprocess.run([sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip() == ("judge_showcase: 1 translations for 22 showcase sentences: "
                                  "translate scripts/showcase.en whole")


def test_a_sentence_judged_twice_is_refused(tmp_path):
    tsv = tmp_path / "v.tsv"
    tsv.write_text("4\twrong\tQuel âge es-tu ?\tavoir\n4\tright\tQuel âge es-tu ?\t\n", encoding="utf-8")
    with pytest.raises(ValueError, match="judged twice"):
        judge_showcase.load_verdicts(tsv)


def test_the_quickstart_page_judges_as_the_file_does():
    """Each French line of docs/quickstart.md's showcase table carries the file's verdict."""
    rows = [r for r in (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8").splitlines()
            if r.startswith("| ") and r.count(" | ") == 4 and r[2:].split(" | ")[0] in ENGLISH]
    assert len(rows) == 22
    for row in rows:
        cells = [c.strip() for c in row.strip("| ").split(" | ")]
        n = ENGLISH.index(cells[0]) + 1
        for french, verdict in ((cells[1], cells[2]), (cells[3], cells[4])):
            assert (n, french) in VERDICTS, f"line {n}: {french!r} has no verdict on record"
            assert verdict.split()[0] == VERDICTS[(n, french)][0], f"line {n}: {french!r}"
