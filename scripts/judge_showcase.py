"""Count the showcase sentences a model gets right, by the verdicts on record.

The showcase (``scripts/showcase.en``, 22 sentences) is judged by hand, by one rule: a line is
right when a French speaker would write it so, and "odd" is wrong. Every translation a run on
record has produced is in ``scripts/showcase.verdicts.tsv`` with its verdict, so the same
output always gets the same verdict; an output not seen before is reported for a person to
judge (and to add to the file).

    python scripts/judge_showcase.py runs/quickstart/showcase.fr
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from minitrans.text.textio import read_lines

HERE = Path(__file__).resolve().parent


def load_verdicts(path: Path) -> dict[tuple[int, str], tuple[str, str]]:
    """``{(line number, French): (verdict, why)}`` from the verdicts file."""
    verdicts = {}
    for n, row in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not row.strip() or row.startswith("#"):
            continue
        fields = row.split("\t")
        if len(fields) != 4 or fields[1] not in ("right", "wrong") or not fields[0].isdigit():
            raise ValueError(f"{path}:{n}: expected 'line<TAB>right|wrong<TAB>French<TAB>why', got {row!r}")
        key = (int(fields[0]), fields[2].strip())
        if key in verdicts:
            raise ValueError(f"{path}:{n}: line {key[0]}'s {key[1]!r} is judged twice")
        verdicts[key] = (fields[1], fields[3].strip())
    return verdicts


def judge(english: list[str], french: list[str], verdicts: dict) -> list[tuple[str, str]]:
    """One ``(verdict, why)`` per line: ``right``, ``wrong`` or ``new`` (not judged yet)."""
    if len(english) != len(french):
        raise ValueError(f"{len(french)} translations for {len(english)} showcase sentences: "
                         "translate scripts/showcase.en whole")
    return [verdicts.get((i, fr.strip()), ("new", "not judged yet: judge it by hand and add it"))
            for i, fr in enumerate(french, 1)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("translations", type=Path, help="the model's French, one line per showcase sentence")
    parser.add_argument("--source", type=Path, default=HERE / "showcase.en")
    parser.add_argument("--verdicts", type=Path, default=HERE / "showcase.verdicts.tsv")
    args = parser.parse_args(argv)
    try:
        # minitrans's reader: a byte-order mark is no text, lines end at \n only (never U+2028)
        english = read_lines(args.source, "Showcase file")
        french = read_lines(args.translations, "Translations file")
        results = judge(english, french, load_verdicts(args.verdicts))
    except (OSError, ValueError) as err:
        print(f"judge_showcase: {err}", file=sys.stderr)
        return 2
    for i, ((verdict, why), fr) in enumerate(zip(results, french), 1):
        print(f"{i:3d} {verdict:5s} {fr}" + (f"  ({why})" if verdict != "right" else ""))
    counts = {v: sum(r[0] == v for r in results) for v in ("right", "wrong", "new")}
    print(f"right {counts['right']} of {len(results)} (wrong {counts['wrong']}, not judged yet {counts['new']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
