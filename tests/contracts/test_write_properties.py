"""Property tests (Hypothesis) for the write primitives over every kind of path a user can
point an output at — missing, regular, symlink (to a file, to a missing file, to a FIFO),
FIFO, character device, folder with foreign files, socket — and for the CLI and the Python API
over empty, blank and odd inputs at the default settings (two workers, beam 5)."""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_main
from minitrans.errors import UsageError
from minitrans.text.textio import atomic_output, output_target

KINDS = ["missing", "regular", "symlink", "dangling-symlink", "symlink-to-fifo", "fifo", "device", "folder", "socket"]
FAST = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
counter = iter(range(10**9))


def make(root: Path, kind: str) -> tuple[Path, Path | None]:
    """A path of ``kind`` under a fresh folder of ``root``: ``(path, what writing reaches)``."""
    folder = root / f"k{next(counter)}"
    folder.mkdir()
    path = folder / "out"
    real = folder / "real"
    if kind == "regular":
        path.write_text("old\n")
    elif kind == "symlink":
        real.write_text("old\n")
        path.symlink_to(real)
    elif kind == "dangling-symlink":
        path.symlink_to(real)
    elif kind in ("fifo", "symlink-to-fifo"):
        os.mkfifo(real if kind == "symlink-to-fifo" else path)
        if kind == "symlink-to-fifo":
            path.symlink_to(real)
    elif kind == "device":
        path = Path("/dev/null")
    elif kind == "folder":
        path.mkdir()
        (path / "notes.txt").write_text("mine\n")
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    return path, (real if "symlink" in kind else path)


def write(path: Path, data: bytes, reach: Path, kind: str) -> list[bytes]:
    """Write ``data`` to ``path`` with atomic_output; a FIFO gets a reader. Returns what it read."""
    got: list[bytes] = []
    reader = None
    if "fifo" in kind:
        reader = threading.Thread(target=lambda: got.append(reach.read_bytes()), daemon=True)
        reader.start()
    with atomic_output(path, "wb") as f:
        f.write(data)
    if reader is not None:
        reader.join(10)
    return got


@FAST
@given(kind=st.sampled_from(KINDS), data=st.binary(max_size=200), fail=st.booleans())
def test_atomic_output_over_every_kind_of_path(tmp_path_factory, kind, data, fail):
    root = tmp_path_factory.mktemp("kinds")
    path, reach = make(root, kind)
    before_mode = os.lstat(path).st_mode if os.path.lexists(path) else None
    if kind in ("folder", "socket"):
        with pytest.raises(UsageError):
            write(path, data, reach, kind)
        assert os.lstat(path).st_mode == before_mode  # untouched
        if kind == "folder":
            assert (path / "notes.txt").read_text() == "mine\n"
        return
    if fail and "fifo" not in kind and kind != "device":
        # A failure half-way: the old content (or nothing) stays, and no temporary is left.
        old = reach.read_bytes() if reach.exists() else None
        with pytest.raises(RuntimeError):
            with atomic_output(path, "wb") as f:
                f.write(data)
                raise RuntimeError("boom")
        assert (reach.read_bytes() if reach.exists() else None) == old
        assert not [p for p in reach.parent.iterdir() if ".tmp" in p.name]
        return
    got = write(path, data, reach, kind)
    if kind == "device":
        assert stat.S_ISCHR(os.stat(path).st_mode)
    elif "fifo" in kind:
        assert stat.S_ISFIFO(os.stat(reach).st_mode) and got == [data]
    else:
        assert reach.read_bytes() == data and stat.S_ISREG(os.stat(reach).st_mode)
    if "symlink" in kind:
        assert path.is_symlink()  # the link stays a link; its target was written
    assert output_target(path)[0] == (reach.resolve() if "symlink" in kind else path)


ODD = st.lists(st.one_of(st.just(""), st.just("   "), st.just("\t"), st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=30)),
    max_size=5)


@pytest.fixture(scope="module")
def default_translator(trained_checkpoint):
    from minitrans import Translator

    return Translator.from_checkpoint(trained_checkpoint, workers=2)  # what a 2-thread CPU gets by default


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(sentences=ODD)
def test_api_on_odd_inputs_at_the_defaults(default_translator, sentences):
    out = default_translator.translate(sentences)  # beam 5, two workers
    assert len(out) == len(sentences) and all("\n" not in t for t in out)
    assert all(t == "" for s, t in zip(sentences, out) if not s.strip())


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(sentences=ODD)
def test_cli_on_odd_inputs_at_the_defaults(capsys, tmp_path_factory, trained_checkpoint, sentences):
    source = tmp_path_factory.mktemp("odd") / "in.txt"
    source.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    code, out, err = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", source)
    assert code == 0, err
    assert out.count("\n") == len(sentences)
