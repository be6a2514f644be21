"""checkpoint: metadata that leaves the machine (exports, ``/v1/models``) carries file names and
sha256s, never this machine's paths (issue #42, item 6)."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

from conftest import one_line_error, run_main
from minitrans.checkpoint import checkpoint_metadata, load_checkpoint, published, save_atomic
from minitrans.text.textio import file_sha256


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

    from minitrans.serve.app import create_app
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


# -- hostile cases (issue #14's first round) --------------------------------------------------
@pytest.mark.hostile
def test_2_average_never_overwrites_one_of_its_inputs(capsys, tmp_path, trained_checkpoint):
    a = tmp_path / "A.ckpt"
    a.write_bytes(trained_checkpoint.read_bytes())
    before = a.read_bytes()
    code, _, err = run_main(capsys, "average", "-m", a, trained_checkpoint, "-o", a)
    assert code == 2 and "one of the checkpoints to average" in one_line_error(err)
    assert a.read_bytes() == before


def _damaged(tmp_path, trained_checkpoint, how):
    path = tmp_path / f"{how}.ckpt"
    if how == "text":
        path.write_text("this is not a checkpoint\n")
    elif how == "random":
        path.write_bytes(os.urandom(4096))
    elif how == "truncated":
        path.write_bytes(trained_checkpoint.read_bytes()[:5000])
    else:
        checkpoint = load_checkpoint(trained_checkpoint)
        if how == "no-metadata":
            del checkpoint["minitrans"]["model_config"]
        elif how == "bad-tokenizer":
            checkpoint["minitrans"]["tokenizer"] = torch.arange(100, dtype=torch.uint8)
        elif how == "nan":
            key = next(k for k, v in checkpoint["state_dict"].items() if v.is_floating_point())
            checkpoint["state_dict"][key] = torch.full_like(checkpoint["state_dict"][key], math.nan)
        torch.save(checkpoint, path)
    return path


@pytest.mark.hostile
@pytest.mark.parametrize("how, message", [
    ("text", "not a readable checkpoint"), ("random", "not a readable checkpoint"),
    ("truncated", "not a readable checkpoint"), ("no-metadata", "lacks a valid 'model_config'"),
    ("bad-tokenizer", "SentencePiece model cannot be read"), ("nan", "NaN"),
])
def test_15_malformed_checkpoints_are_one_line(capsys, tmp_path, trained_checkpoint, how, message):
    code, out, err = run_main(capsys, "translate", "-m", _damaged(tmp_path, trained_checkpoint, how), "--beam", "3",
                         "The cat eats.")
    line = one_line_error(err)
    assert code == 1 and message in line and "possibly code" not in line and out == ""


@pytest.mark.hostile
def test_17_a_killed_save_leaves_no_temporary_behind(tmp_path):
    target = tmp_path / "model.ckpt"
    dead = tmp_path / ".model.ckpt.tmp999999999"  # the temporary of a process that is gone
    dead.write_bytes(b"half a checkpoint")
    save_atomic({"x": torch.ones(2)}, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.ckpt"]
