"""Fault injection: a process killed (SIGKILL) at a random moment while writing leaves the
target either as the old complete file or as the new complete file, and the next write
removes its temporary. Every file minitrans writes goes through these three primitives:
checkpoints and averaged checkpoints (``save_atomic``), ``best.ckpt`` (``copy_atomic``),
``translate -o``, evaluation reports and hypotheses (``atomic_output``/``write_text_atomic``)."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from minitrans.checkpoint import copy_atomic, save_atomic
from minitrans.textio import write_text_atomic

WRITER = r"""
import sys, torch
from minitrans.checkpoint import copy_atomic, save_atomic
from minitrans.textio import write_text_atomic
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


@pytest.mark.parametrize("mode", ["save", "copy", "text"])
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
