"""Distributed runs on CPU processes (gloo): multi-node training as launchers start it, two
single-process "nodes" on loopback told their place by the environment (torchrun / a hand launch,
and SLURM), resumed from last.ckpt; and sharded validation, whose BLEU must equal one process's."""

import re

import os
import socket
import subprocess
import sys

import pytest
import torch

from conftest import make_datamodule
from conftest import ROOT, run_cli, write_config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_env(node: int, port: int) -> dict:
    """What torchrun (or a hand launch on each node) sets; Lightning reads it."""
    return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2", "NODE_RANK": str(node),
            "LOCAL_RANK": "0"}


def slurm_env(node: int, port: int) -> dict:
    """What `srun` sets for task ``node`` of a 2-node, 1-task-per-node job."""
    return {"SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "1", "SLURM_NNODES": "2", "SLURM_PROCID": str(node),
            "SLURM_LOCALID": "0", "SLURM_NODEID": str(node), "SLURM_JOB_NAME": "minitrans", "SLURM_JOB_ID": "4242",
            "SLURM_NODELIST": "localhost", "MASTER_PORT": str(port)}


def launch(cfg, env_for, *extra, timeout=420) -> list[subprocess.CompletedProcess]:
    """Start both nodes' processes together and wait for both."""
    port = free_port()
    procs = []
    for node in (0, 1):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MASTER_", "LOCAL_RANK"))}
        env.pop("MINITRANS_DATA", None)
        env.update(env_for(node, port))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "minitrans", "train", "--config", str(cfg), "--trainer.num_nodes", "2",
             "--trainer.devices", "1", "--trainer.strategy", "ddp", *extra],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def global_step(path) -> int:
    return torch.load(path, map_location="cpu", weights_only=True)["global_step"]


@pytest.mark.parametrize("env_for", [torchrun_env, slurm_env], ids=["torchrun", "slurm"])
def test_two_nodes_train_and_resume_from_last(tmp_path, prepared, env_for):
    cfg = write_config(tmp_path, prepared, "")
    first = launch(cfg, env_for, "--trainer.max_steps", "4", "--trainer.val_check_interval", "2")
    for node, result in enumerate(first):
        assert result.returncode == 0, f"node {node}: {result.stderr[-3000:]}"
    for node, result in enumerate(first):  # one process group of two members across the two "nodes"
        assert f"GLOBAL_RANK: {node}, MEMBER: {node + 1}/2" in result.stderr + result.stdout
    last = tmp_path / "ckpt" / "last.ckpt"
    assert global_step(last) == 4
    resumed = launch(cfg, env_for, "--trainer.max_steps", "6", "--trainer.val_check_interval", "2",
                     "--resume", str(last))
    for node, result in enumerate(resumed):
        assert result.returncode == 0, f"node {node}, resumed: {result.stderr[-3000:]}"
    assert global_step(last) == 6  # continued from step 4, not restarted


def logged(result: subprocess.CompletedProcess, metric: str) -> float:
    """A metric from the table Lightning prints at the end of `validate`."""
    found = re.search(rf"{metric}\s+[│|]?\s*([0-9.]+)", result.stdout)
    assert found, result.stdout[-2000:] + result.stderr[-2000:]
    return float(found.group(1))


def test_sharded_validation_equals_one_process(tmp_path, prepared, trained_checkpoint):
    """Two ranks validate half the batches each (one rank gets a padding batch: the count is odd)
    and sum their BLEU statistics: the same BLEU and loss as one process validating everything."""
    sizes = {"--data.val_max_sentences": "40", "--data.eval_max_tokens": None}
    for budget in (120, 150, 180, 210, 240):
        dm = make_datamodule(prepared.hparams.data_dir, prepared.hparams.cache_dir, val_max_sentences=40,
                             eval_max_tokens=budget)
        dm.setup("fit")
        if len(dm.val_dataloader()) % 2:
            sizes["--data.eval_max_tokens"] = str(budget)
            break
    assert sizes["--data.eval_max_tokens"], "no budget gives an odd number of validation batches"
    cfg = write_config(tmp_path, prepared, "")
    # The fixture trained without validation BLEU, and LightningCLI takes a checkpoint's
    # hyperparameters over the command line's: switch it on in a copy.
    checkpoint = torch.load(trained_checkpoint, map_location="cpu", weights_only=True)
    checkpoint["hyper_parameters"]["val_bleu"] = True
    torch.save(checkpoint, tmp_path / "bleu.ckpt")
    args = ["validate", "--config", str(cfg), "--ckpt_path", str(tmp_path / "bleu.ckpt"),
            *[x for kv in sizes.items() for x in kv]]
    one = run_cli(*args, timeout=300)
    two = run_cli(*args, "--trainer.devices", "2", "--trainer.strategy", "ddp", timeout=300)
    assert one.returncode == 0 and two.returncode == 0, (one.stderr + two.stderr)[-3000:]
    assert logged(one, "val_bleu") > 0
    assert logged(two, "val_bleu") == logged(one, "val_bleu")
    assert logged(two, "val_loss") == pytest.approx(logged(one, "val_loss"), rel=1e-4)
