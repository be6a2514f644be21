"""checkpoint: metadata that leaves the machine (exports, ``/v1/models``) carries file names and
sha256s, never this machine's paths (issue #42, item 6)."""

from __future__ import annotations

import json

import pytest

from conftest import run_main
from minitrans.checkpoint import checkpoint_metadata, published
from minitrans.textio import file_sha256


def test_published_turns_paths_into_names():
    meta = {"averaged_from": ["/home/alice/runs/epoch=3.ckpt", {"checkpoint": "b.ckpt", "sha256": "ab" * 32}],
            "data": {"data_dir": "/home/alice/corpora", "cache_dir": "data/cache", "tokenizer": "~/spm.model",
                     "files": {"train": "../secret/train.tsv"}, "corpora": [{"data_dir": "/srv/x/raw"}]},
            "validation": {"val_bleu": 30.0}}
    out = published(meta, ("averaged_from", "data", "validation", "missing"))
    assert out["averaged_from"] == [{"checkpoint": "epoch=3.ckpt"}, {"checkpoint": "b.ckpt", "sha256": "ab" * 32}]
    # A folder of this machine is dropped (a reader's --data-dir or MINITRANS_DATA says where
    # the corpora are); a folder inside the project stays; a file keeps its name.
    assert out["data"] == {"cache_dir": "data/cache", "tokenizer": "spm.model",
                           "files": {"train": "train.tsv"}, "corpora": [{}]}
    assert out["validation"] == {"val_bleu": 30.0} and "missing" not in out
    assert meta["data"]["data_dir"] == "/home/alice/corpora"  # the checkpoint's own record is not changed


@pytest.fixture(scope="module")
def averaged(trained_checkpoint, tmp_path_factory):
    folder = tmp_path_factory.mktemp("deep") / "machine-specific-folder"
    folder.mkdir()
    copy = folder / "copy.ckpt"
    copy.write_bytes(trained_checkpoint.read_bytes())
    out = folder / "avg.ckpt"
    from minitrans.checkpoint import average_checkpoints

    average_checkpoints([trained_checkpoint, copy], out)
    return out, trained_checkpoint, copy


def test_an_average_records_names_and_hashes(averaged):
    out, first, copy = averaged
    entries = checkpoint_metadata(out)["averaged_from"]
    assert entries == [{"checkpoint": first.name, "sha256": file_sha256(first)},
                       {"checkpoint": "copy.ckpt", "sha256": file_sha256(copy)}]


def test_exports_and_the_server_publish_no_path(capsys, averaged, tmp_path):
    pytest.importorskip("ctranslate2")
    from fastapi.testclient import TestClient

    from minitrans.server import create_app
    from minitrans.translate import Translator

    out, _, _ = averaged
    code, _, err = run_main(capsys, "export", "-m", str(out), "-o", str(tmp_path / "ct2"))
    assert code == 0, err
    exported = (tmp_path / "ct2" / "minitrans.json").read_text()
    assert "machine-specific-folder" not in exported and str(tmp_path) not in exported
    assert [e["checkpoint"] for e in json.loads(exported)["averaged_from"]][1] == "copy.ckpt"
    with TestClient(create_app(Translator.load(out))) as client:
        answer = client.get("/v1/models").text
    assert "machine-specific-folder" not in answer and "copy.ckpt" in answer
