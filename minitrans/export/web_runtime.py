"""onnxruntime-web for the page of ``minitrans export --format web``: one pinned version, its two
files, checked by sha256, never committed to the repository.

A page needs two files of the npm package ``onnxruntime-web``: ``ort.wasm.bundle.min.mjs`` (the
JavaScript API with its WebAssembly loader bundled in) and ``ort-wasm-simd-threaded.wasm`` (the
runtime: SIMD, and threads where the page is cross-origin isolated). They come from, in order:

1. ``--runtime PATH``: the package's tarball (``npm pack onnxruntime-web@VERSION``), or a folder
   holding the two files (``node_modules/onnxruntime-web/dist``, or a copy);
2. the cache, ``<cache>/web/onnxruntime-web-VERSION/`` (``<cache>`` as for the CTranslate2
   conversions: ``$MINITRANS_CACHE``, ``$XDG_CACHE_HOME/minitrans``, ``~/.cache/minitrans``);
3. the npm registry: the tarball is downloaded once, checked and unpacked into the cache.

Every file is checked against the sha256 pinned here before it is used; a tarball that differs
from the pinned one (another version, a damaged download) is refused with one line. The cache
is written by :mod:`minitrans.engines.usercache`'s rules: only into a folder of the user's own, a link in
the entry's place replaced as a link (the folder it points to is never touched).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import tarfile
import urllib.request
from pathlib import Path

from minitrans.errors import error_boundary
from minitrans.errors import UsageError
from minitrans.text.textio import atomic_folder
from minitrans.engines.usercache import UntrustedCache, cache_root, discard, make_private, trusted_folder

log = logging.getLogger(__name__)

VERSION = "1.31.1"
TARBALL = f"https://registry.npmjs.org/onnxruntime-web/-/onnxruntime-web-{VERSION}.tgz"
TARBALL_SHA256 = "bdccdb9fbb9ab537247c0c734e9b1d2b1b338b4f2a09faa58f0dc1cfa27c312c"
#: The files a page needs, with their sha256.
FILES = {
    "ort.wasm.bundle.min.mjs": "51bd7168175767324ab0acfcfc4ca94a096a3826e3ebac9ccc4f195eb865f8dd",
    "ort-wasm-simd-threaded.wasm": "4b884c203b0fa48d057be3332c65513ff85aa3c5bddd6946acc0fab7ecda001d",
}
LICENCE = "MIT"
HOW = f"npm pack onnxruntime-web@{VERSION}"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check(name: str, data: bytes, where: str) -> bytes:
    if sha256(data) != FILES[name]:
        raise UsageError(f"{where}: {name} is not the file of onnxruntime-web {VERSION} (sha256 differs); "
                         f"give --runtime the tarball of `{HOW}` or its dist/ folder.")
    return data


def _from_tarball(data: bytes, where: str) -> dict[str, bytes]:
    if sha256(data) != TARBALL_SHA256:
        raise UsageError(f"{where} is not the tarball of onnxruntime-web {VERSION} (sha256 differs); "
                         f"make it with `{HOW}`.")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {name: _check(name, tar.extractfile(f"package/dist/{name}").read(), where) for name in FILES}


def _from_folder(folder: Path) -> dict[str, bytes]:
    for candidate in (folder, folder / "dist", folder / "node_modules" / "onnxruntime-web" / "dist"):
        if all((candidate / name).is_file() for name in FILES):
            return {name: _check(name, (candidate / name).read_bytes(), str(candidate)) for name in FILES}
    raise UsageError(f"--runtime {folder}: no {' and '.join(FILES)} there (give the tarball of `{HOW}`, "
                     "or the folder holding its dist/ files).")


def cached_folder() -> Path:
    return cache_root() / "web" / f"onnxruntime-web-{VERSION}"


def _cached() -> dict[str, bytes] | None:
    folder = cached_folder()
    try:
        files = {name: (folder / name).read_bytes() for name in FILES}
    except OSError:
        return None
    return files if all(sha256(data) == FILES[name] for name, data in files.items()) else None


def _download() -> bytes:
    try:
        with urllib.request.urlopen(TARBALL, timeout=120) as response:
            return response.read()
    except OSError as err:
        raise UsageError(f"could not download onnxruntime-web {VERSION} from the npm registry ({err}); offline, "
                         f"run `{HOW}` where there is a network and give the tarball with --runtime.") from None


def runtime_files(runtime: str | os.PathLike | None = None) -> dict[str, bytes]:
    """The two files' bytes, checked: from ``runtime`` (a tarball or folder), else the cache,
    else the npm registry (then cached)."""
    if runtime is not None:
        path = Path(runtime)
        if path.is_dir():
            return _from_folder(path)
        if not path.is_file():
            raise UsageError(f"--runtime {path}: no such file or folder (give the tarball of `{HOW}`).")
        return _from_tarball(path.read_bytes(), str(path))
    files = _cached()
    if files is None:  # nothing cached, or a cached file damaged: fetch and cache again
        files = _from_tarball(_download(), TARBALL)
        _store_quietly(files)
    return files


def _store(files: dict[str, bytes]) -> Path:
    """Write the files into the cache (:mod:`minitrans.engines.usercache`'s rules): only into a folder
    of the user's own, replacing a link in the entry's place as a link (never the folder it
    points to) and never a folder holding other files. :class:`UntrustedCache` otherwise."""
    folder = trusted_folder("web") / cached_folder().name
    if folder.is_dir() and not folder.is_symlink():
        discard(folder, FILES)  # refuses a folder with files of someone else's
    with atomic_folder(folder, replace=True, follow_links=False) as tmp:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
    make_private(folder)
    return folder


def _store_quietly(files: dict[str, bytes]) -> None:
    """Cache the downloaded files if the cache can be trusted; say why not, and go on, if not."""
    try:
        _store(files)
    except (UntrustedCache, OSError) as err:
        log.warning("onnxruntime-web is not cached (%s); the next export downloads it again.", err)


def fill_cache(runtime: str | os.PathLike) -> Path:
    """Put the files of ``runtime`` (a tarball or folder, checked) in the cache, for exports
    made later without ``--runtime`` on a machine with no network; returns the cache folder."""
    files = runtime_files(runtime)
    try:
        return _store(files)
    except UntrustedCache as err:
        raise UsageError(f"cannot fill the cache: {err}. Make the cache yours, or set MINITRANS_CACHE to a "
                         "folder of yours.") from None


def main(argv: list[str] | None = None) -> None:
    """``python -m minitrans.export.web_runtime [TARBALL_OR_FOLDER]``: fill the cache from the
    package's tarball (or its dist/ folder) and print the cache folder; without an argument,
    print where the cache folder is."""
    import sys

    argv = sys.argv[1:] if argv is None else argv
    with error_boundary("python -m minitrans.export.web_runtime", "--debug" in argv):
        args = [a for a in argv if a != "--debug"]
        if len(args) > 1 or (args and args[0] in ("-h", "--help")):
            print(f"usage: python -m minitrans.export.web_runtime [TARBALL]  (TARBALL: `{HOW}`, or its dist/ folder)")
            raise SystemExit(0 if args and args[0] in ("-h", "--help") else 2)
        print(fill_cache(args[0]) if args else cached_folder())


if __name__ == "__main__":
    main()
