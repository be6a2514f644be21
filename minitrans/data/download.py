"""Fetch the public corpora for users who are online (the project never downloads at run
time otherwise, and the tests never call this module's network code).

Multi30k: the raw text files of the public Multi30k repository (task 1), gzip-compressed
upstream. The checksums are SHA-256 of the *decompressed* files, as published in that
repository's ``data/task1/raw``. Tatoeba: the manythings.org export, which changes over time,
so it has no fixed checksum; its format is checked instead.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import logging
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from minitrans.data.corpus import MULTI30K_SPLITS, read_tsv
from minitrans.errors import DataError

log = logging.getLogger(__name__)

MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{name}.{lang}.gz"
MULTI30K_SHA256 = {
    "test_2016_flickr.en": "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182",
    "test_2016_flickr.fr": "cb3160d69b002bb638e66cc7612fcd56cb0af82eadc9c142dedc438afb885ef6",
    "test_2017_flickr.en": "ce1450ddc5ab0834502579d77a170849952e15a2938b34cc503bdc25ebb4fb98",
    "test_2017_flickr.fr": "6f3764e31dac41e9455e612958bcfd4e877c5e15cd66df2c2b2be6d9bd83e5b6",
    "test_2017_mscoco.en": "43051fdfa86fd5395182e718a94ca67b1b227b9f7c79596ff0f6b813216981d2",
    "test_2017_mscoco.fr": "39cde3f43f32b0a6bf29ce4917a46329ff32e53070c2fac87506695a740ae0a0",
    "train.en": "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6",
    "train.fr": "5925a3c18f1587b6b54b87743106e6e8ab93618edb6f65d19eac0621f853a10d",
    "val.en": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
    "val.fr": "5304e444d842e962b2dda4d816b70b22a1765b15401642b7ca37a67477e708dc",
}
TATOEBA_URL = "https://www.manythings.org/anki/fra-eng.zip"


def _fetch(url: str) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "minitrans"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.read()
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        raise DataError(
            f"Could not download {url} ({err}). You seem to be offline: copy the corpora by hand and "
            "point MINITRANS_DATA at them (see data/README.md)."
        ) from err


def download_multi30k(root: Path) -> Path:
    """Multi30k's raw files into ``root/multi30k``, each checked against its published sha256."""
    folder = root / "multi30k"
    folder.mkdir(parents=True, exist_ok=True)
    for name in MULTI30K_SPLITS.values():
        for lang in ("en", "fr"):
            target = folder / f"{name}.{lang}"
            if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == MULTI30K_SHA256[target.name]:
                continue
            data = gzip.decompress(_fetch(MULTI30K_URL.format(name=name, lang=lang)))
            digest = hashlib.sha256(data).hexdigest()
            if digest != MULTI30K_SHA256[target.name]:
                raise DataError(f"Checksum mismatch for {target.name}: got {digest}, expected "
                                f"{MULTI30K_SHA256[target.name]}. The upstream file changed or the download broke.")
            target.write_bytes(data)
            log.info("wrote %s", target)
    return folder


def download_tatoeba(root: Path) -> Path:
    """The Tatoeba export into ``root/tatoeba-fra-eng/fra.txt``, its format checked."""
    folder = root / "tatoeba-fra-eng"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(_fetch(TATOEBA_URL))) as archive:
        (folder / "fra.txt").write_bytes(archive.read("fra.txt"))
    read_tsv(folder / "fra.txt")  # raises a clear error if the format changed
    return folder
