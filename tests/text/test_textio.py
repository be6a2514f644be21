"""textio: what is written keeps the file it replaces private, long legal names work, ``-`` is
standard input and output, and a document that is not UTF-8 names its line (issue #42, items
3, 21, 22, 23)."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from conftest import one_line_error, run_main, synthetic_pairs
from minitrans.checkpoint import copy_atomic, save_atomic
from minitrans.errors import DataError, UsageError
from minitrans.text.textio import (
    NAME_MAX,
    atomic_folder,
    atomic_output,
    check_writable,
    decode_text,
    file_sha256,
    read_lines,
    temporary_path,
    write_text_atomic,
)

ROOT = Path(__file__).resolve().parents[2]


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


# -- Hostile cases (issue #30's second round: 2 and 8; fault injection) ---------------------------
# Every file minitrans writes goes through three primitives: checkpoints and averaged checkpoints
# (``save_atomic``), ``best.ckpt`` (``copy_atomic``), ``translate -o``, evaluation reports and
# hypotheses (``atomic_output``/``write_text_atomic``). A process killed (SIGKILL) at a random moment
# while writing leaves the target either as the old complete file or as the new complete file, and
# the next write removes its temporary; outputs onto FIFOs, devices and symlinks stay what they
# are; a full disk is one line and keeps the old file.

# -- 2. outputs onto FIFOs, devices and symlinks --------------------------------------------
def _reader(path: Path, into: list) -> threading.Thread:
    thread = threading.Thread(target=lambda: into.append(path.read_bytes()), daemon=True)
    thread.start()
    return thread


@pytest.mark.hostile
def test_2_output_into_a_fifo_is_written_not_replaced(capsys, tmp_path, trained_checkpoint):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _reader(fifo, got)
    code, _, err = run_main(capsys, "translate", "-m", trained_checkpoint, "-o", fifo, "The cat eats.", "The dog sees.")
    reader.join(30)
    assert code == 0, err
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and got and got[0].count(b"\n") == 2


@pytest.mark.hostile
def test_2_output_onto_a_character_device_stays_a_device(capsys, tmp_path, trained_checkpoint):
    code, _, err = run_main(capsys, "translate", "-m", trained_checkpoint, "-o", "/dev/null", "The cat eats.")
    assert code == 0, err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    clone = tmp_path / "null"
    try:
        os.mknod(clone, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("mknod is not permitted here")
    for args in (["translate", "-m", trained_checkpoint, "-o", clone, "The cat eats."],
                 ["average", "-m", trained_checkpoint, "-o", clone]):
        code, _, err = run_main(capsys, *args)
        assert code == 0, err
        assert stat.S_ISCHR(clone.lstat().st_mode), args


@pytest.mark.hostile
def test_2_output_through_a_symlink_replaces_its_target(capsys, tmp_path, trained_checkpoint):
    target = tmp_path / "real" / "out.txt"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    code, _, err = run_main(capsys, "translate", "-m", trained_checkpoint, "-o", link, "The cat eats.")
    assert code == 0, err
    assert link.is_symlink() and target.read_text() != "old\n" and target.read_text().count("\n") == 1
    plot, plot_link = tmp_path / "real" / "att.png", tmp_path / "att.png"
    plot_link.symlink_to(plot)
    assert run_main(capsys, "translate", "-m", trained_checkpoint, "--plot-attention", plot_link, "The cat.")[0] == 0
    assert plot_link.is_symlink() and plot.read_bytes()[:4] == b"\x89PNG"
    avg, avg_link = tmp_path / "real" / "avg.ckpt", tmp_path / "avg.ckpt"
    avg_link.symlink_to(avg)
    assert run_main(capsys, "average", "-m", trained_checkpoint, "-o", avg_link)[0] == 0
    assert avg_link.is_symlink() and avg.stat().st_size > 0


@pytest.mark.hostile
def test_2_a_socket_is_refused_before_any_work(capsys, tmp_path, trained_checkpoint):
    import socket

    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        code, _, err = run_main(capsys, "translate", "-m", tmp_path / "never-loaded.ckpt", "-o", path, "x")
    assert code == 2 and "socket" in one_line_error(err)


# -- 8. disk full --------------------------------------------------------------------------
@pytest.mark.hostile
@pytest.mark.parametrize("command, blocks", [("average", 64), ("prepare", 8), ("prepare", 64), ("prepare", 128)])
@pytest.mark.hostile
def test_8_a_full_disk_is_one_line_and_keeps_the_old_file(tmp_path, trained_checkpoint, prepared, command, blocks):
    """``ulimit -f`` (KiB) stops ``prepare`` in each of its phases (the cleaned text, the
    SentencePiece training, ``datasets``' Arrow files -- the training split's is ~200 KB: issue #42,
    item 27); each ends in one line."""
    from conftest import write_config

    if command == "average":
        target = tmp_path / "avg.ckpt"
        target.write_bytes(b"old")
        args = ["average", "-m", str(trained_checkpoint), "-o", str(target)]
    else:
        target = tmp_path / "cache"
        args = ["prepare", "--config", str(write_config(tmp_path, prepared)), "--data.cache_dir", str(target)]
    env = {k: v for k, v in os.environ.items() if k != "MINITRANS_DATA"}
    shell = f"ulimit -f {blocks}; exec {sys.executable} -m minitrans " + " ".join(f"'{a}'" for a in args)
    result = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert result.returncode == 1, result.stderr[-2000:]
    line = one_line_error(result.stderr)
    assert "File too large" in line and "free disk space" in line and str(target) in line
    if command == "average":
        assert target.read_bytes() == b"old"
    assert not [p for p in tmp_path.rglob(".*tmp*")], list(tmp_path.rglob(".*tmp*"))


# -- fault injection ------------------------------------------------------------
WRITER = r"""
import sys, torch
from minitrans.checkpoint import copy_atomic, save_atomic
from minitrans.text.textio import write_text_atomic
mode, target, source = sys.argv[1], sys.argv[2], sys.argv[3]
print("ready", flush=True)
version = 1
while True:
    if mode == "save":
        save_atomic({"version": version, "payload": torch.full((1_500_000,), float(version))}, target)
    elif mode == "copy":
        copy_atomic(source, target)
    else:
        write_text_atomic(target, [f"{version} line {i}" for i in range(200_000)])
    version += 1
"""


def check_complete(mode, target, source):
    if mode == "save":
        obj = torch.load(target, weights_only=True)
        assert torch.equal(obj["payload"], torch.full((1_500_000,), float(obj["version"])))
    elif mode == "copy":
        assert target.read_bytes() == source.read_bytes()
    else:
        lines = target.read_text().split("\n")
        assert lines[-1] == "" and len(lines) == 200_001
        version = lines[0].split()[0]
        assert all(line.startswith(f"{version} line ") for line in lines[:-1])


@pytest.mark.hostile
@pytest.mark.parametrize("mode", ["save", "copy", "text"])
@pytest.mark.hostile
def test_kill_at_random_moments_leaves_old_or_new_file(tmp_path, mode):
    rng = random.Random(mode)
    target, source = tmp_path / "target", tmp_path / "source.bin"
    source.write_bytes(os.urandom(12 << 20))
    # The old complete version, written before any crash.
    {"save": lambda: save_atomic({"version": 0, "payload": torch.full((1_500_000,), 0.0)}, target),
     "copy": lambda: copy_atomic(source, target),
     "text": lambda: write_text_atomic(target, [f"0 line {i}" for i in range(200_000)])}[mode]()
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, mode, str(target), str(source)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.01, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        check_complete(mode, target, source)
    # A restart: the next write removes the temporaries the killed writers left.
    {"save": lambda: save_atomic({"version": 9, "payload": torch.full((1_500_000,), 9.0)}, target),
     "copy": lambda: copy_atomic(source, target),
     "text": lambda: write_text_atomic(target, [f"9 line {i}" for i in range(200_000)])}[mode]()
    check_complete(mode, target, source)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source.bin", "target"]


# -- hostile cases (issue #14's first round) --------------------------------------------------
@pytest.mark.hostile
def test_3_and_4_failed_writes_leave_the_old_file_whole(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old complete content\n")
    with pytest.raises(RuntimeError):
        with atomic_output(target) as f:
            f.write("new partial")
            raise RuntimeError("killed half-way")
    assert target.read_text() == "old complete content\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


ODD_BREAKS = ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]


@pytest.mark.hostile
def test_5_evaluate_reads_lines_as_wc_does(capsys, tmp_path, trained_checkpoint):
    pairs = synthetic_pairs(20, seed=3)
    src = [e for e, _ in pairs]
    ref = [f for _, f in pairs]
    src[4] = src[4].replace(" ", ODD_BREAKS[0], 1)
    ref[7] = ref[7].replace(" ", "\x0c", 1)
    ref[9] = ref[9].replace(" ", "\x1e", 1)
    (tmp_path / "s.en").write_text("".join(s + "\n" for s in src), encoding="utf-8", newline="")
    (tmp_path / "s.fr").write_text("".join(r + "\n" for r in ref), encoding="utf-8", newline="")
    code, out, err = run_main(capsys, "evaluate", "-m", trained_checkpoint, "--src", tmp_path / "s.en", "--ref",
                         tmp_path / "s.fr", "--beam", "1", "-o", tmp_path / "eval")
    assert code == 0, err
    assert json.loads(out)["sentences"] == 20
    hyps = next((tmp_path / "eval").glob("model-*.s.beam1.hyp.txt")).read_bytes().count(b"\n")
    assert hyps == 20


@pytest.mark.hostile
def test_6_a_stray_carriage_return_does_not_split_a_line(capsys, tmp_path, trained_checkpoint):
    (tmp_path / "in.txt").write_bytes(b"The cat eats.\nThe dog\rsees a book.\r\nA child draws.\n")
    code, out, _ = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", tmp_path / "in.txt", "--beam", "1")
    assert code == 0 and out.count("\n") == 3


@pytest.mark.hostile
def test_7_a_byte_order_mark_is_not_text(capsys, tmp_path, trained_checkpoint):
    (tmp_path / "bom.txt").write_bytes("\ufeffThe cat eats the bread.\n".encode())
    (tmp_path / "plain.txt").write_bytes(b"The cat eats the bread.\n")
    _, with_bom, _ = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", tmp_path / "bom.txt")
    _, plain, _ = run_main(capsys, "translate", "-m", trained_checkpoint, "-i", tmp_path / "plain.txt")
    assert with_bom == plain
    assert read_lines(tmp_path / "bom.txt") == ["The cat eats the bread."]


# -- issue #59, item 12: a folder output that cannot be written ------------------------------
@pytest.mark.hostile
def test_a_folder_that_cannot_be_written_is_one_line_naming_it_before_any_work(tmp_path, monkeypatch):
    """A read-only place (faked for root, whom permissions do not stop): the error names the
    folder asked for, never the temporary, and comes from the check made before the work."""
    from minitrans.errors import WriteError
    from minitrans.text.textio import atomic_folder, check_folder_writable

    real_mkdir = os.mkdir

    def read_only(path, *args, **kwargs):
        if ".tmp" in os.fspath(path) or "probe" in os.fspath(path):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", read_only)
    out = tmp_path / "web"
    with pytest.raises(WriteError, match=rf"^cannot write {re.escape(str(out))}: Permission denied") as err:
        check_folder_writable(out)
    assert ".tmp" not in str(err.value)
    with pytest.raises(WriteError, match=rf"^cannot write {re.escape(str(out))}: Permission denied"):
        with atomic_folder(out):
            pass
    assert not out.exists()


@pytest.mark.hostile
@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_export_into_a_read_only_folder_is_one_line_before_the_model_loads(tmp_path, trained_checkpoint, capsys):
    from conftest import run_main

    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    code, _, err = run_main(capsys, "export", "-m", trained_checkpoint, "--format", "hf", "-o", ro / "hf")
    assert code == 1 and f"cannot write {ro / 'hf'}: Permission denied" in err and ".tmp" not in err


def test_both_folder_checks_ask_the_file_system_not_os_access(tmp_path, monkeypatch):
    """``os.access`` says yes to root whatever the mode, and knows nothing of a read-only mount's
    or a full disk's refusal; making a folder does. Both checks (a command's ``-o`` folder, an
    atomic folder's output) ask by making one."""
    import errno

    from minitrans.errors import UsageError, WriteError
    from minitrans.text.textio import check_folder_writable, check_writable_folder

    (tmp_path / "a-file").write_text("x")
    with pytest.raises(UsageError, match="a-file is a file, not a folder"):
        check_writable_folder(tmp_path / "a-file" / "out", "-o/--output")
    assert check_writable_folder(tmp_path / "new" / "out", "-o/--output") == tmp_path / "new" / "out"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # the probe is gone

    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr("pathlib.Path.mkdir", read_only)
    monkeypatch.setattr("os.access", lambda *a, **k: True)  # as root would be told
    with pytest.raises(UsageError, match=r"^-o/--output .*out is not writable \(Read-only file system\)"):
        check_writable_folder(tmp_path / "out", "-o/--output")
    with pytest.raises(WriteError, match=r"cannot write .*export: Read-only file system"):
        check_folder_writable(tmp_path / "export")
