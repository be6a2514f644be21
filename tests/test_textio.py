"""textio: what is written keeps the file it replaces private, long legal names work, ``-`` is
standard input and output, and a document that is not UTF-8 names its line (issue #42, items
3, 21, 22, 23)."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from conftest import run_main
from test_hostile2 import one_line_error
from minitrans.errors import DataError, UsageError
from minitrans.textio import (NAME_MAX, atomic_folder, atomic_output, check_writable, decode_text, file_sha256,
                              temporary_path)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("private", [0o600, 0o640, 0o400 | 0o200])
def test_a_rewritten_file_keeps_its_mode(tmp_path, private):
    target = tmp_path / "out.txt"
    target.write_text("old secret\n")
    target.chmod(private)
    old_umask = os.umask(0o022)
    try:
        with atomic_output(target) as f:
            assert mode(temporary_path(target)) == private  # before a byte is written
            f.write("new secret\n")
    finally:
        os.umask(old_umask)
    assert target.read_text() == "new secret\n" and mode(target) == private


def test_a_new_file_gets_the_umask_mode(tmp_path):
    old_umask = os.umask(0o027)
    try:
        with atomic_output(tmp_path / "new.txt") as f:
            f.write("x")
    finally:
        os.umask(old_umask)
    assert mode(tmp_path / "new.txt") == 0o640


def test_a_replaced_folder_keeps_its_mode(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    folder.chmod(0o700)
    with atomic_folder(folder, replace=True) as tmp:
        (tmp / "model.bin").write_bytes(b"1")
    assert mode(folder) == 0o700 and (folder / "model.bin").read_bytes() == b"1"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another owner needs root")
def test_root_keeps_the_owner_and_group(tmp_path):
    target = tmp_path / "owned.txt"
    target.write_text("x")
    os.chown(target, 12345, 23456)
    with atomic_output(target) as f:
        f.write("y")
    st = os.stat(target)
    assert (st.st_uid, st.st_gid) == (12345, 23456)


def test_a_long_legal_name_is_written_through_a_short_temporary(tmp_path):
    name = "t" * 246 + ".fr.txt"  # 253 bytes: legal, but ".NAME.tmpPID" is not
    assert len(name) <= NAME_MAX < len(f".{name}.tmp{os.getpid()}")
    assert len(temporary_path(tmp_path / name).name) <= NAME_MAX
    check_writable(tmp_path / name, "--output")  # the probe passes and leaves nothing
    assert list(tmp_path.iterdir()) == []
    with atomic_output(tmp_path / name) as f:
        f.write("ok")
    assert (tmp_path / name).read_text() == "ok" and len(list(tmp_path.iterdir())) == 1


def test_a_name_the_file_system_refuses_is_said_before_any_work(tmp_path):
    with pytest.raises(UsageError, match="cannot be written: File name too long"):
        check_writable(tmp_path / ("x" * 300), "--output")
    with pytest.raises(UsageError, match="writes a file, not standard output"):
        check_writable("-", "--output")


def test_a_document_that_is_not_utf8_names_its_line():
    with pytest.raises(DataError, match=r"page.html, line 3: byte 4 is not UTF-8 .*iconv"):
        decode_text("<p>\n<b>\nOui\xe9!".encode("latin-1"), "page.html")
    assert decode_text("\ufeff# Titre\n".encode(), "a.md") == "\ufeff# Titre\n"  # the BOM is the formats' to keep


def test_file_sha256_is_the_hash_of_the_bytes(tmp_path):
    import hashlib

    (tmp_path / "f").write_bytes(b"abc" * 1_000_000)
    assert file_sha256(tmp_path / "f") == hashlib.sha256(b"abc" * 1_000_000).hexdigest()


# -- through the commands ------------------------------------------------------------------
def test_translate_and_average_keep_a_private_output_private(capsys, tmp_path, trained_checkpoint):
    out = tmp_path / "out.fr"
    out.write_text("old\n")
    out.chmod(0o600)
    code, _, err = run_main(capsys, "translate", "-m", str(trained_checkpoint), "-o", str(out), "The cat eats.")
    assert code == 0, err
    assert mode(out) == 0o600 and out.read_text().strip() and out.read_text() != "old\n"
    avg = tmp_path / "avg.ckpt"
    avg.write_bytes(b"old")
    avg.chmod(0o600)
    code, _, err = run_main(capsys, "average", "-m", str(trained_checkpoint), "-m", str(trained_checkpoint),
                            "-o", str(avg))
    assert code == 0, err
    assert mode(avg) == 0o600 and avg.stat().st_size > 1000


def test_translate_writes_a_250_byte_name(capsys, tmp_path, trained_checkpoint):
    out = tmp_path / ("o" * 247 + ".fr")
    code, _, err = run_main(capsys, "translate", "-m", str(trained_checkpoint), "-o", str(out), "The cat eats.")
    assert code == 0, err
    assert out.read_text().strip() and sorted(tmp_path.iterdir()) == [out]


def test_dash_is_standard_input_and_output(tmp_path, trained_checkpoint):
    import subprocess

    result = subprocess.run([sys.executable, "-m", "minitrans", "translate", "-m", str(trained_checkpoint),
                             "-i", "-", "-o", "-"], input="The cat eats.\nThe dog runs.\n", capture_output=True,
                            text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2 and not (tmp_path / "-").exists()


def test_a_latin1_document_names_its_line(capsys, tmp_path, trained_checkpoint):
    page = tmp_path / "page.html"
    page.write_bytes("<html><body>\n<p>Hello.</p>\n<p>Caf\xe9.</p></body></html>".encode("latin-1"))
    code, _, err = run_main(capsys, "translate", "-m", str(trained_checkpoint), "-i", str(page),
                            "-o", str(tmp_path / "out.html"))
    assert code == 1 and "page.html, line 3: byte 7 is not UTF-8" in one_line_error(err)
    assert not (tmp_path / "out.html").exists()
