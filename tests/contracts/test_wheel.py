"""The built wheel carries what the package reads at run time (issue #60): both pages' files,
found where the code looks for them, and every module of every folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_wheel_holds_every_module_and_both_pages(tmp_path):
    # built from a copy: setuptools keeps a build/ folder beside the sources, whose stale files
    # would hide a missing one
    source = tmp_path / "source"
    shutil.copytree(ROOT / "minitrans", source / "minitrans", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path), str(source)], capture_output=True, text=True, timeout=300,
                           cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("minitrans-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    package = ROOT / "minitrans"
    shipped = {p.relative_to(ROOT).as_posix() for p in package.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    missing = sorted(shipped - names)
    assert not missing, f"the wheel lacks {missing}: add them to [tool.setuptools.package-data] in pyproject.toml"
    # the places the code reads them from
    assert {"minitrans/serve/static/index.html", "minitrans/serve/static/style.css",
            "minitrans/export/page/index.html", "minitrans/export/page/page.js"} <= names
