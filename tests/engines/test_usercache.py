"""The user's cache (issue #59, hostile round 4): nothing another user planted is loaded, what
minitrans copies stays private, a link in the cache never costs the user the folder it points
to, and the conversions are bounded without evicting one in use."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import threading

import pytest

from minitrans import Translator
from minitrans.export import web_runtime
from minitrans.engines import ctranslate2_cache
from minitrans.engines import usercache
from minitrans.errors import UsageError

pytestmark = pytest.mark.hostile
ct2 = pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed")
OTHER_UID = 65534  # nobody


@pytest.fixture
def root(tmp_path, monkeypatch):
    """This test's own cache root (not created yet)."""
    monkeypatch.setenv("MINITRANS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def as_another_user(path, monkeypatch) -> None:
    """Make ``path`` (and what it holds) another user's: chown as root, else make minitrans
    believe it runs as another user."""
    if os.getuid() == 0:
        for p in (path, *path.rglob("*")):
            os.chown(p, OTHER_UID, OTHER_UID, follow_symlinks=False)
    else:
        monkeypatch.setattr(usercache.os, "getuid", lambda: os.stat(path).st_uid + 1)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def plant(root, checkpoint, other_checkpoint, tmp_path) -> tuple:
    """Another model's conversion under ``checkpoint``'s key, its metadata naming ``checkpoint``'s
    sha256 (as anyone can compute for a public checkpoint)."""
    from minitrans.engines.ctranslate2_export import export_ctranslate2
    from minitrans.text.textio import file_sha256

    sha = file_sha256(checkpoint)
    entry = root / "ctranslate2" / ctranslate2_cache.key(sha)
    export_ctranslate2(other_checkpoint, tmp_path / "planted", "float32")
    meta = json.loads((tmp_path / "planted" / "minitrans.json").read_text())
    meta["source_checkpoint_sha256"] = sha
    (tmp_path / "planted" / "minitrans.json").write_text(json.dumps(meta))
    entry.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(tmp_path / "planted", entry)
    return entry


def test_the_cache_is_created_private_and_a_private_checkpoint_stays_private(root, trained_checkpoint, tmp_path):
    private = tmp_path / "private.ckpt"
    shutil.copy(trained_checkpoint, private)
    os.chmod(private, 0o600)
    folder = ctranslate2_cache.converted(private)
    assert mode(root) == 0o700 and mode(root / "ctranslate2") == 0o700
    for item in (folder, *folder.rglob("*")):  # every copy private, whatever the umask
        assert mode(item) & 0o077 == 0, item


def test_an_older_readable_root_is_tightened(root, trained_checkpoint):
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    ctranslate2_cache.converted(trained_checkpoint)
    assert mode(root) == 0o700


@pytest.mark.parametrize("where", ["root", "entry"])
def test_a_conversion_planted_by_another_user_is_never_loaded(root, trained_checkpoint, trained_fr_en, tmp_path,
                                                              monkeypatch, caplog, where):
    """The case of the issue: another user's folder, mode 0777, holding another model's
    conversion under this checkpoint's key."""
    entry = plant(root, trained_checkpoint, trained_fr_en, tmp_path)
    if where == "root":  # the whole cache is theirs, open to all
        for p in (root, *root.rglob("*")):
            os.chmod(p, 0o777)
        as_another_user(root, monkeypatch)
    else:  # the entry alone was slipped into this user's cache
        as_another_user(entry, monkeypatch)
    sentence = "The cat eats the bread."
    expected = Translator.load(trained_checkpoint, "native").translate([sentence])
    with caplog.at_level(logging.WARNING):
        translator = Translator.load(trained_checkpoint)
    assert translator.engine.name == "ctranslate2"
    assert translator.translate([sentence]) == expected
    assert "another user" in caplog.text or "not to trust" in caplog.text
    if where == "root":  # nothing was written into the other user's folder
        assert sorted(p.name for p in (root / "ctranslate2").iterdir()) == [entry.name]


def test_a_root_others_may_write_is_refused_even_when_it_is_ours(root, trained_checkpoint, caplog):
    root.mkdir()
    os.chmod(root, 0o777)
    with caplog.at_level(logging.WARNING):
        folder = ctranslate2_cache.converted(trained_checkpoint)
    assert root not in folder.parents and "others may write" in caplog.text
    assert mode(folder.parent.parent) == 0o700  # the private temporary folder
    assert not (root / "ctranslate2").exists()


def test_a_link_in_an_entrys_place_is_replaced_not_followed(root, trained_checkpoint, tmp_path):
    from minitrans.text.textio import file_sha256

    users = tmp_path / "users-folder"
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    entry = root / "ctranslate2" / ctranslate2_cache.key(file_sha256(trained_checkpoint))
    entry.parent.mkdir(parents=True)
    entry.symlink_to(users, target_is_directory=True)
    folder = ctranslate2_cache.converted(trained_checkpoint)
    assert folder == entry and not entry.is_symlink() and (entry / "model.bin").is_file()
    assert sorted(p.name for p in users.iterdir()) == ["notes.txt"]


# -- the web runtime's cache (item 1: data loss) -----------------------------------------------
@pytest.fixture
def runtime_tarball(tmp_path):
    tarball = os.environ.get("MINITRANS_WEB_RUNTIME")
    if not tarball:
        pytest.skip(f"set MINITRANS_WEB_RUNTIME to the tarball of `{web_runtime.HOW}` (.ci/run makes it)")
    return tarball


def test_filling_the_runtime_cache_through_a_link_keeps_the_users_folder(root, runtime_tarball, tmp_path):
    """The case of the issue: the cache's runtime folder a link to the user's own
    node_modules/onnxruntime-web/dist, then the documented offline step."""
    dist = tmp_path / "node_modules" / "onnxruntime-web" / "dist"
    dist.mkdir(parents=True)
    with tarfile.open(runtime_tarball) as tar:
        names = [m for m in tar.getmembers() if m.name.startswith("package/dist/") and m.isfile()][:5]
        for member in names:
            (dist / os.path.basename(member.name)).write_bytes(tar.extractfile(member).read())
    before = sorted(p.name for p in dist.iterdir())
    link = web_runtime.cached_folder()
    link.parent.mkdir(parents=True)
    link.symlink_to(dist, target_is_directory=True)
    result = subprocess.run([sys.executable, "-m", "minitrans.export.web_runtime", runtime_tarball], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in dist.iterdir()) == before  # the user's folder as it was
    assert not link.is_symlink() and sorted(p.name for p in link.iterdir()) == sorted(web_runtime.FILES)
    assert set(web_runtime.runtime_files()) == set(web_runtime.FILES)


def test_the_runtime_cache_never_replaces_a_folder_with_other_files(root, runtime_tarball):
    folder = web_runtime.cached_folder()
    folder.mkdir(parents=True)
    (folder / "mine.txt").write_text("mine")
    with pytest.raises(UsageError, match="mine.txt"):
        web_runtime.fill_cache(runtime_tarball)
    assert (folder / "mine.txt").read_text() == "mine"


@pytest.mark.parametrize("argv", [["MISSING.tgz"], ["a", "b"]])
def test_the_runtime_command_errs_in_one_line(root, tmp_path, argv):
    result = subprocess.run([sys.executable, "-m", "minitrans.export.web_runtime", *argv], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 or result.stdout.startswith("usage:")


# -- the bound (item 17) ----------------------------------------------------------------------
def _copies(checkpoint, tmp_path, n):
    import torch

    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    paths = []
    for i in range(n):
        state["copy"] = i  # another file, another key
        path = tmp_path / f"copy{i}.ckpt"
        torch.save(state, path)
        paths.append(path)
    return paths


def test_the_cache_is_bounded_least_recently_used_first(root, trained_checkpoint, tmp_path, monkeypatch):
    a, b, c = _copies(trained_checkpoint, tmp_path, 3)
    first = ctranslate2_cache.converted(a)
    size = usercache.folder_size(first)
    monkeypatch.setenv("MINITRANS_CACHE_MB", str(2.5 * size / (1 << 20)))  # room for two
    second = ctranslate2_cache.converted(b)
    os.utime(second, (1, 1))  # b used long ago
    assert ctranslate2_cache.converted(a) == first  # a used now
    third = ctranslate2_cache.converted(c)
    assert first.is_dir() and third.is_dir() and not second.exists()
    assert [p for p, _ in ctranslate2_cache.entries()][0] == third


def test_an_entry_in_use_is_never_evicted(root, trained_checkpoint, tmp_path, monkeypatch):
    a, b = _copies(trained_checkpoint, tmp_path, 2)
    monkeypatch.setenv("MINITRANS_CACHE_MB", "0")
    held, release = threading.Event(), threading.Event()

    def loader():
        with ctranslate2_cache.in_use(a):
            held.set()
            release.wait(60)

    t = threading.Thread(target=loader)
    t.start()
    assert held.wait(60)
    folder_b = ctranslate2_cache.converted(b)  # over the bound: would evict a, but a is being loaded
    entries = [p.name for p, _ in ctranslate2_cache.entries()]
    release.set()
    t.join(60)
    assert len(entries) == 2 and folder_b.name in entries


def test_the_cache_command_lists_and_clears(root, trained_checkpoint, capsys):
    from conftest import run_main

    ctranslate2_cache.converted(trained_checkpoint)
    code, out, _ = run_main(capsys, "cache")
    assert code == 0 and str(root) in out and "1 conversion," in out
    code, out, _ = run_main(capsys, "cache", "--clear")
    assert code == 0 and ctranslate2_cache.entries() == [] and "removed 1 conversion " in out


@pytest.mark.parametrize("value", ["lots", "-1", "nan", "inf"])
def test_a_bad_cache_bound_is_said_and_the_default_kept(root, monkeypatch, caplog, value):
    monkeypatch.setenv("MINITRANS_CACHE_MB", value)
    with caplog.at_level(logging.WARNING):
        assert usercache.limit_bytes() == usercache.DEFAULT_LIMIT_MB << 20
    assert "MINITRANS_CACHE_MB" in caplog.text
