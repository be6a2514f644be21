"""Shared tiny fixtures. Every test makes its own data; nothing is downloaded."""

from __future__ import annotations

import random

import pytest
import torch

from minitrans import ModelConfig, Transformer


def run_main(capsys, *args) -> tuple[int, str, str]:
    """Run ``minitrans ARGS`` in-process: (exit code, stdout, stderr)."""
    from minitrans.cli.parser import main

    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exit_info:
        code = exit_info.code
    out = capsys.readouterr()
    return code, out.out, out.err


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(checkpoint, *flags):
    """``minitrans serve CHECKPOINT FLAGS`` on a free loopback port, once ``/health`` says ok:
    ``(process, url)``; a server that does not start fails the test with its output."""
    import json
    import subprocess
    import sys
    import time
    import urllib.request

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "minitrans", "serve", "-m", str(checkpoint), "--port", str(port),
                             *map(str, flags)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if json.load(urllib.request.urlopen(f"{url}/health", timeout=1))["status"] == "ok":
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    pytest.fail("the server did not start: " + proc.stdout.read()[-2000:])


def one_line_error(err: str) -> str:
    """The one error line of a command's stderr (progress and log lines may precede it; no
    traceback), which is the last thing printed."""
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    assert lines[0] == err.rstrip("\n").splitlines()[-1], err[-3000:]
    return lines[0]


CHROMIUM = "/usr/bin/chromium"  # Debian's (apt-get install chromium); never a downloaded build


def launch_chromium(playwright):
    """Headless Debian Chromium through Playwright, with nothing that reaches the network."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=[
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"])


needs_chromium = pytest.mark.skipif(not __import__("os").path.exists(CHROMIUM),
                                    reason=f"{CHROMIUM} is not installed (apt-get install chromium)")


@__import__("contextlib").contextmanager
def served_page(checkpoint, *flags):
    """A Chromium page open on ``minitrans serve CHECKPOINT FLAGS``; the server stops afterwards."""
    from playwright.sync_api import sync_playwright

    proc, url = start_server(checkpoint, *flags)
    try:
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            page = browser.new_page()
            page.goto(url)
            yield page
            browser.close()
    finally:
        proc.terminate()
        proc.wait(60)


@pytest.fixture(scope="session", autouse=True)
def _cache(tmp_path_factory):
    """Conversions that ``--engine auto`` caches go to a folder of this session, never the user's
    ``~/.cache`` (servers started as subprocesses inherit it)."""
    import os

    os.environ["MINITRANS_CACHE"] = str(tmp_path_factory.mktemp("minitrans-cache"))
    yield
    os.environ.pop("MINITRANS_CACHE", None)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    random.seed(0)


@pytest.fixture
def tiny_config() -> ModelConfig:
    return ModelConfig(vocab_size=40, d_model=32, n_heads=4, n_encoder_layers=2,
                       n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64)


@pytest.fixture
def tiny_model(tiny_config) -> Transformer:
    return Transformer(tiny_config).eval()


# -- a small synthetic English–French corpus -------------------------------------------------
SUBJECTS = [("the cat", "le chat"), ("the dog", "le chien"), ("the man", "l'homme"), ("the woman", "la femme"),
            ("a child", "un enfant"), ("the bird", "l'oiseau"), ("my friend", "mon ami"), ("the teacher", "le professeur")]
VERBS = [("sees", "voit"), ("eats", "mange"), ("likes", "aime"), ("finds", "trouve"), ("draws", "dessine"),
         ("wants", "veut")]
OBJECTS = [("an apple", "une pomme"), ("the bread", "le pain"), ("a book", "un livre"), ("the ball", "la balle"),
           ("a red car", "une voiture rouge"), ("the green house", "la maison verte"), ("some water", "de l'eau"),
           ("a small boat", "un petit bateau"), ("the old tree", "le vieil arbre")]
PLACES = [("", ""), (" in the garden", " dans le jardin"), (" at night", " la nuit"), (" today", " aujourd'hui"),
          (" near the river", " près de la rivière")]


def synthetic_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Template sentences with exact translations; capitalised, with a full stop."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        (se, sf), (ve, vf), (oe, of), (pe, pf) = (rng.choice(x) for x in (SUBJECTS, VERBS, OBJECTS, PLACES))
        en, fr = f"{se} {ve} {oe}{pe}.", f"{sf} {vf} {of}{pf}."
        pairs.append((en[0].upper() + en[1:], fr[0].upper() + fr[1:]))
    return pairs


def write_multi30k(root, n_train: int = 400, seed: int = 0):
    """Write the Multi30k layout (train/val/test_2016_flickr/...) under root/multi30k."""
    folder = root / "multi30k"
    folder.mkdir(parents=True, exist_ok=True)
    sizes = {"train": n_train, "val": 40, "test_2016_flickr": 30, "test_2017_flickr": 20, "test_2017_mscoco": 10}
    for i, (name, n) in enumerate(sizes.items()):
        pairs = synthetic_pairs(n, seed + i)
        (folder / f"{name}.en").write_text("".join(e + "\n" for e, _ in pairs), encoding="utf-8")
        (folder / f"{name}.fr").write_text("".join(f + "\n" for _, f in pairs), encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def data_root(tmp_path_factory):
    return write_multi30k(tmp_path_factory.mktemp("corpora"))


def make_mixture(root, cache_dir):
    """A prepared mixture: Multi30k-shaped captions plus a Tatoeba-style TSV whose grouped split
    is made by minitrans. Some TSV pairs repeat Multi30k validation/test sentences, so
    decontamination has work to do."""
    from minitrans.data.datamodule import TranslationDataModule
    from minitrans.data.mixture import CorpusSpec

    root = write_multi30k(root, n_train=300, seed=10)
    m30k_eval = [line for name in ("val", "test_2016_flickr") for line in
                 zip((root / "multi30k" / f"{name}.en").read_text().splitlines(),
                     (root / "multi30k" / f"{name}.fr").read_text().splitlines())]
    everyday = [(f"{en[:-1]} number {i}.", f"{fr[:-1]} numéro {i}.") for i, (en, fr) in enumerate(synthetic_pairs(600, 7))]
    tsv = root / "everyday.tsv"
    tsv.write_text("".join(f"{en}\t{fr}\n" for en, fr in everyday + m30k_eval[:15]), encoding="utf-8")
    corpora = [CorpusSpec("everyday", "tsv", weight=0.5, files={"train": str(tsv)}, valid_size=30, test_size=30),
               CorpusSpec("captions", "multi30k", weight=0.5)]
    dm = TranslationDataModule(dataset="mixture", corpora=corpora, data_dir=str(root), cache_dir=str(cache_dir),
                               vocab_size=320, max_tokens=400, eval_max_tokens=400, val_max_sentences=20)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def make_datamodule(data_root, cache_dir, **overrides):
    from minitrans.data.datamodule import TranslationDataModule

    settings = dict(dataset="multi30k", data_dir=str(data_root), cache_dir=str(cache_dir), vocab_size=320,
                    max_tokens=400, eval_max_tokens=400, val_max_sentences=40)
    settings.update(overrides)
    return TranslationDataModule(**settings)


@pytest.fixture(scope="session")
def prepared(data_root, tmp_path_factory):
    """A prepared data module on the synthetic corpus (SentencePiece trained once per session)."""
    import os

    os.environ.pop("MINITRANS_DATA", None)
    dm = make_datamodule(data_root, tmp_path_factory.mktemp("cache"))
    dm.prepare_data()
    dm.setup("fit")
    return dm


def train_tiny(datamodule, folder, **config):
    """A small model trained on ``datamodule`` for 300 steps (~10 s), saved as ``folder/model.ckpt``."""
    import lightning as L

    from minitrans.training.module import TranslationModule

    L.seed_everything(0, verbose=False)
    cfg = ModelConfig(vocab_size=320, d_model=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=128,
                      dropout=0.0, max_len=64, **config)
    module = TranslationModule(cfg, lr_schedule="cosine", peak_lr=3e-3, warmup_steps=30, total_steps=300,
                               label_smoothing=0.0, val_bleu=False)
    trainer = L.Trainer(max_steps=300, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        use_distributed_sampler=False)
    trainer.fit(module, datamodule)
    path = folder / "model.ckpt"
    trainer.save_checkpoint(path)
    return path


@pytest.fixture(scope="session")
def trained_checkpoint(prepared, tmp_path_factory):
    """A small model trained on the synthetic corpus until it translates it (~10 s)."""
    return train_tiny(prepared, tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="session")
def prepared_fr_en(data_root, tmp_path_factory):
    """The synthetic corpus turned around: French sources, English targets (``data.direction``)."""
    import os

    os.environ.pop("MINITRANS_DATA", None)
    dm = make_datamodule(data_root, tmp_path_factory.mktemp("cache-fr-en"), direction="fr-en")
    dm.prepare_data()
    dm.setup("fit")
    return dm


@pytest.fixture(scope="session")
def trained_fr_en(prepared_fr_en, tmp_path_factory):
    """A small French→English model (~10 s)."""
    return train_tiny(prepared_fr_en, tmp_path_factory.mktemp("ckpt-fr-en"))


@pytest.fixture(scope="session")
def docs_site(tmp_path_factory):
    """This project's docs site, built once (``mkdocs build --strict``): a folder of real pages."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("mkdocs", reason="the dev extra is not installed")
    pytest.importorskip("material", reason="the dev extra is not installed")
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                            cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def numpy_attention(q, k, v, mask=None):
    """The formula transcribed in NumPy, float64: softmax(QKᵀ/√d_k) V (the independent reference
    of the attention tests and the kernels' tests)."""
    import numpy as np

    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


#: The repository's root (tests in folders are one or two levels below it).
ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def run_cli(*args, timeout=300, env_data=None):
    """``python -m minitrans ARGS`` from the repository, without ``$MINITRANS_DATA``."""
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    env.pop("MINITRANS_DATA", None)
    return subprocess.run([sys.executable, "-m", "minitrans", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def write_config(tmp_path, prepared, extra=""):
    """A small training config over the synthetic corpus, its checkpoints in ``tmp_path/ckpt``."""
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"""
seed_everything: 1
trainer:
  accelerator: cpu
  max_steps: 6
  val_check_interval: 3
  enable_progress_bar: false
  enable_model_summary: false
  default_root_dir: {tmp_path}/run
model:
  config: {{d_model: 32, n_heads: 4, n_encoder_layers: 1, n_decoder_layers: 1, d_ff: 64}}
  warmup_steps: 5
data:
  dataset: multi30k
  data_dir: {prepared.hparams.data_dir}
  cache_dir: {prepared.hparams.cache_dir}
  vocab_size: 320
  max_tokens: 400
  val_max_sentences: 8
checkpoint:
  dirpath: {tmp_path}/ckpt
{extra}""")
    return cfg
