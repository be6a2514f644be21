"""Documentation that cannot drift from the code (issue #26).

* README.md stays a front door (≤ 10,000 bytes).
* Every ``minitrans …`` command in a fenced block of README.md and docs/*.md parses with the
  real argument parser (plain commands with the argparse parser; ``train``/``fit`` with
  LightningCLI's, which also checks every config key and value type) — without running it;
  every ``configs/*.yaml`` the docs name exists.
* Every docs path a code comment cites exists.
* ``mkdocs build --strict`` succeeds (links to missing pages or headings fail it), and the built
  site loads nothing from another host.
* Every option of every plain command has a help text that shows its default and no reST;
  ``minitrans --version`` prints the version.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]


def test_readme_is_a_front_door():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= 10_000, f"README.md is {size} bytes; measurements and details belong on docs/ pages"


def _fenced_commands(page: Path) -> list[tuple[str, list[str]]]:
    """``(where, argv)`` of each ``minitrans`` command in the page's fenced code blocks."""
    found, in_block = [], False
    lines = page.read_text(encoding="utf-8").splitlines()
    joined: list[tuple[int, str]] = []
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        if not in_block:
            continue
        if joined and joined[-1][1].endswith("\\"):
            joined[-1] = (joined[-1][0], joined[-1][1][:-1] + " " + line.strip())
        else:
            joined.append((number, line.strip()))
    for number, line in joined:
        line = line.removeprefix("$ ")
        for segment in re.split(r"\s*(?:\|\||&&|\||;|&(?!\S))\s*", line):
            try:
                words = shlex.split(segment, comments=True)
            except ValueError:
                continue
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # MINITRANS_DATA=... minitrans ...
                words = words[1:]
            if words and words[0] == "minitrans" and len(words) > 1:
                found.append((f"{page.relative_to(ROOT)}:{number}", words[1:]))
    return found


COMMANDS = [c for page in PAGES for c in _fenced_commands(page)]


def test_the_docs_show_commands_at_all():
    assert len(COMMANDS) > 20 and {argv[0] for _, argv in COMMANDS} >= {"train", "translate", "serve", "export"}


@pytest.mark.parametrize("where, argv", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_documented_command_parses(where, argv, capsys, monkeypatch):
    from minitrans.cli import parser as cli

    monkeypatch.chdir(ROOT)  # configs/… paths are relative to the checkout, as the docs say
    if argv[0] in cli.LIGHTNING_COMMANDS:
        args = list(argv)
        if "--resume" in args:  # it names a run's checkpoint; the flag itself is what is checked
            i = args.index("--resume")
            del args[i:i + 2]
        for i, arg in enumerate(args):
            if arg == "--config":
                assert (ROOT / args[i + 1]).is_file() or "mine" in args[i + 1], f"{where}: no {args[i + 1]}"
        args = [a for j, a in enumerate(args) if not (j and args[j - 1] == "--config" and "mine" in a)]
        args = [a for j, a in enumerate(args) if not (a == "--config" and j + 1 >= len(args))]
        with pytest.raises(SystemExit) as exit_info:
            from minitrans.cli.train import lightning_main

            lightning_main([*args, "--print_config"], run=True)
        assert exit_info.value.code in (0, None), f"{where}: {' '.join(argv)}\n{capsys.readouterr().err[-2000:]}"
        return
    parser = cli.build_parser()
    try:
        parsed, extra = parser.parse_known_args(argv)
    except SystemExit as err:  # --help, --version
        assert err.code == 0, where
        return
    assert not extra or parsed.command == "prepare", f"{where}: unknown arguments {extra}"
    cli.resolve_model_args(parsed)  # the model flag is there; old spellings print a note...
    assert "deprecated" not in capsys.readouterr().err, f"{where}: the docs use an old spelling"  # ...the docs use none


def test_every_config_the_docs_name_exists():
    named = {m for page in PAGES for m in re.findall(r"configs/[\w.-]+\.yaml", page.read_text(encoding="utf-8"))}
    placeholder = re.compile(r"configs/([A-Z_]+|mine)\.yaml")  # configs/CONFIG.yaml, the docs' own example
    missing = sorted(n for n in named if not (ROOT / n).is_file() and not placeholder.fullmatch(n))
    assert named and not missing, missing


def test_every_docs_path_cited_in_code_exists():
    cited = []
    for path in [*(ROOT / "minitrans").rglob("*.py"), *(ROOT / "configs").glob("*.yaml"), *(ROOT / "bench").glob("*.py")]:
        for ref in re.findall(r"docs/[\w-]+\.(?:md|png)", path.read_text(encoding="utf-8")):
            cited.append((path.name, ref))
    missing = [(f, ref) for f, ref in cited if not (ROOT / ref).is_file()]
    assert not missing, missing


def test_every_script_the_docs_run_exists_or_is_marked_retired():
    """A page that runs ``bench/X.py`` or ``scripts/X`` names a file that is there, or marks it
    ``†``: retired, kept at the commit the page's footnote names (issue #60)."""
    pages = [*PAGES, ROOT / "bench" / "README.md"]
    run = re.compile(r"(?<![\w/])((?:bench|scripts)/\w+\.(?:py|sh))(†?)")
    stale = sorted({(page.name, ref) for page in pages for ref, mark in run.findall(page.read_text(encoding="utf-8"))
                    if not mark and ref != "bench/NAME.py" and not (ROOT / ref).is_file()})
    assert not stale, stale
    footnoted = [page.name for page in pages if "†" in page.read_text(encoding="utf-8")]
    assert all("git show cd9a309:bench/NAME.py" in (ROOT / "docs" / name).read_text(encoding="utf-8")
               for name in footnoted if name.endswith(".md") and name != "README.md")


def test_every_test_file_and_module_the_docs_cite_exists():
    """A test or module moved into a folder (issue #60) leaves no page naming its old path
    (experiments.md is a record of code tried and not kept: its paths are history)."""
    cited = {(page.name, ref) for page in PAGES if page.name != "experiments.md"
             for ref in re.findall(r"(?:tests|minitrans)/[\w/]+\.py", page.read_text(encoding="utf-8"))}
    missing = sorted((page, ref) for page, ref in cited if not (ROOT / ref).is_file())
    assert cited and not missing, missing


def _plain_parsers():
    from minitrans.cli import parser as cli

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, {name: p for name, p in sub.choices.items() if name not in cli.LIGHTNING_COMMANDS}


def test_every_option_has_help_with_its_default_and_no_rest_markup():
    parser, plain = _plain_parsers()
    texts = [parser.format_help()]
    for name, p in plain.items():
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"minitrans {name} {action.option_strings or action.dest}: no help text"
        texts.append(p.format_help())
        formatter = p._get_formatter()
        for action in p._actions:
            if action.option_strings and action.default not in (None, False, argparse.SUPPRESS) \
                    and not isinstance(action, argparse._HelpAction):
                assert "%(default)" in formatter._get_help_string(action), \
                    f"minitrans {name} {action.option_strings[-1]}: the help does not show the default"
    for text in texts:
        assert not re.search(r"``|:class:|:func:|:mod:|:meth:", text), text[:2000]
    assert all(name in parser.format_help() for name in plain)


def test_version():
    from minitrans._version import __version__

    result = subprocess.run([sys.executable, "-m", "minitrans", "--version"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == f"minitrans {__version__}"


class _Assets(HTMLParser):
    """Every URL a page loads (scripts, stylesheets, images, icons, frames), not the links it shows."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("script", "img", "iframe", "source", "video", "audio") and attrs.get("src"):
            self.urls.append(attrs["src"])
        if tag == "link" and attrs.get("href") and attrs.get("rel") not in ("canonical", "alternate"):
            self.urls.append(attrs["href"])


def _external(url: str) -> bool:
    return bool(re.match(r"^(https?:)?//", url))


@pytest.fixture(scope="module")
def site(docs_site):
    return docs_site


def test_the_site_builds_strictly(site):
    assert (site / "index.html").is_file() and (site / "attention" / "index.html").is_file()
    assert (site / "search" / "search_index.json").is_file()  # search runs locally


def test_the_site_loads_nothing_from_another_host(site):
    for page in sorted(site.rglob("*.html")):
        parser = _Assets()
        parser.feed(page.read_text(encoding="utf-8"))
        external = [u for u in parser.urls if _external(u)]
        assert not external, f"{page.relative_to(site)} loads {external[0]}"
    for sheet in sorted(site.rglob("*.css")):
        external = [u for u in re.findall(r"url\(['\"]?([^'\")]+)", sheet.read_text(encoding="utf-8")) if _external(u)]
        external += re.findall(r"@import\s+['\"](https?://[^'\"]+)", sheet.read_text(encoding="utf-8"))
        assert not external, f"{sheet.relative_to(site)} loads {external[0]}"
    assert any(site.rglob("*.css")) and any(site.rglob("*.html"))  # the walk above saw files


def test_the_attention_pages_numpy_block_is_minitrans_attention():
    """The NumPy transcription the attention page shows is run here, against the package's own."""
    import numpy as np
    import torch

    from minitrans.model.attention import scaled_dot_product_attention

    text = (ROOT / "docs" / "attention.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(import numpy as np\n.*?)```", text, re.S).group(1)
    scope: dict = {}
    exec(block, scope)  # noqa: S102 — the page's own code
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    out, weights = scope["attention"](q, k, v)
    ours, our_weights = scaled_dot_product_attention(*(torch.tensor(x) for x in (q, k, v)))
    np.testing.assert_allclose(out, ours.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights, our_weights.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("command", ["train", "validate"])
def test_train_help_is_curated_and_every_option_it_names_exists(command):
    """``train --help`` and ``validate --help`` (issue #44: validate and test showed train's) are
    short, curated, and name only options Lightning's CLI has."""
    short = subprocess.run([sys.executable, "-m", "minitrans", command, "--help"], capture_output=True, text=True,
                           timeout=120)
    full = subprocess.run([sys.executable, "-m", "minitrans", command, "--help-all"], capture_output=True,
                          text=True, timeout=300)
    assert short.returncode == 0 and full.returncode == 0, full.stderr[-2000:]
    lines = short.stdout.splitlines()
    assert len(lines) < 60 and short.stdout.startswith(f"usage: minitrans {command} ")
    if command == "train":
        assert "--resume" in short.stdout and "--ckpt_path" not in short.stdout
    else:
        assert "--ckpt_path" in short.stdout and "minitrans evaluate" in short.stdout and "Train" not in short.stdout
    named = set(re.findall(r"--[\w.]+", short.stdout)) - {"--resume", "--help-all", "--config", "--KEY"}
    missing = sorted(flag for flag in named if flag not in full.stdout)
    assert named and not missing, f"{command} --help names options LightningCLI does not have: {missing}"
    assert full.stdout.startswith(f"usage: minitrans {command} "), full.stdout[:200]  # not `__main__.py fit`


def test_lists_follow_a_blank_line():
    """Python-Markdown (the site) reads a list only after a blank line: without one, the bullets
    render as one run-on paragraph (issue #44: 43 bullets of docs/architecture.md, 0 <li>)."""
    bullet = re.compile(r"(?:[-*]|\d+\.) ")
    bad = []
    for page in PAGES:
        lines, fenced = page.read_text(encoding="utf-8").split("\n"), False
        for i, line in enumerate(lines[1:], 1):
            fenced ^= lines[i - 1].startswith("```")
            prev = lines[i - 1]
            if (not fenced and bullet.match(line) and prev.strip() and not bullet.match(prev.lstrip())
                    and not prev.startswith((" ", "\t", "|", "```"))):
                bad.append(f"{page.name}:{i + 1}")
    assert not bad, f"a list right after a paragraph line (add a blank line): {bad}"


def test_every_file_the_where_to_add_recipes_name_exists():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").split("## Where to add", 1)[1]
    named = set(re.findall(r"`((?:minitrans|tests|docs|data)/[\w/.]+|pyproject\.toml)`", text))
    assert len(named) >= 15, named  # each recipe lists its files
    missing = sorted(n for n in named if not (ROOT / n).exists())
    assert not missing, missing
