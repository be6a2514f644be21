"""model_size: auto (issue #43): the model a bounded run can afford on this machine, chosen by
a probe of a few steps, printed, stored in the checkpoint and reported by evaluate. The probe is
mocked here: the decision is what is tested, not this machine's speed."""

from __future__ import annotations

import pytest

from minitrans.training import sizing
from minitrans.cli.train import _dimensions_given, _size_model, lightning_main
from minitrans.training.sizing import CANDIDATES, LARGE_MIN_STEPS, MIN_STEPS, choose, expected_steps, probe

BUDGET = 600.0  # 10 minutes
NAMES = [c.name for c in CANDIDATES]


def seconds_for(steps_in_budget: dict[str, int]) -> dict[str, float]:
    """Seconds a step that make each candidate fit ``steps`` steps in the budget."""
    return {name: BUDGET * (1 - sizing.VALIDATION_SHARE) / steps for name, steps in steps_in_budget.items()}


def test_the_largest_candidate_that_makes_enough_steps_is_chosen():
    seconds = seconds_for({"xs": 3000, "s": 2200, "m": 2600, "l": 750})
    chosen, why = choose(seconds, BUDGET)
    assert chosen.name == "m" and "m 2,600 / 2,500" in why and "l 750 / 2,500" in why
    # a larger model needs more steps: m at 2,400 is not taken where s at 1,500 is
    assert choose(seconds_for({"xs": 3000, "s": MIN_STEPS, "m": LARGE_MIN_STEPS - 100}), BUDGET)[0].name == "s"
    assert choose(seconds_for({"xs": 1500, "s": 810}), BUDGET)[0].name == "xs"  # a laptop without bf16 units
    # every probe of docs/results.md chooses the model that scored best on its machine
    for estimates, best in [({"xs": 1467, "s": 810, "m": 524}, "xs"), ({"xs": 2948, "s": 2199, "m": 1386}, "s"),
                            ({"xs": 2337, "s": 1611, "m": 1352}, "s"), ({"xs": 3448, "s": 2358, "m": 1154}, "s"),
                            ({"xs": 2610, "s": 1954, "m": 1406, "l": 791}, "s"),
                            ({"xs": 3687, "s": 2656, "m": 1883, "l": 873}, "s")]:  # tiny: m 52.72, s 56.29
        assert choose(seconds_for(estimates), BUDGET)[0].name == best, estimates


def test_a_machine_too_slow_for_any_gets_the_smallest():
    chosen, why = choose(seconds_for({"xs": 300}), BUDGET)
    assert chosen.name == "xs" and "no candidate" in why


def test_the_probe_stops_at_the_first_candidate_that_misses():
    timed = []

    def timer(candidate, vocab_size, max_tokens, dtype, device):
        timed.append(candidate.name)
        return seconds_for({"xs": 3000, "s": 2200, "m": 2400, "l": 500, "xl": 200})[candidate.name]

    seconds = probe(BUDGET, 5000, 2500, None, timer=timer)
    assert timed == ["xs", "s", "m"] and set(seconds) == {"xs", "s", "m"}
    assert expected_steps(BUDGET, seconds["s"]) >= MIN_STEPS
    assert MIN_STEPS < expected_steps(BUDGET, seconds["m"]) < LARGE_MIN_STEPS  # m needs more than s


def test_the_probe_times_real_training_steps():
    tiny = sizing.Candidate("t", 32, 4, 1, 1, 64)
    assert 0 < sizing.step_seconds(tiny, 320, 200, None) < 5


# -- through the command ------------------------------------------------------------------------
def config_with(tmp_path, prepared, extra: str):
    from conftest import write_config

    path = write_config(tmp_path, prepared)
    text = path.read_text().replace("  max_steps: 6\n", "  max_steps: 6\n  max_time: '00:00:10:00'\n")
    path.write_text(f"model_size: auto\n{text}{extra}")
    return path


@pytest.fixture
def laptop(monkeypatch):
    """A machine on which xs makes 1,500 steps in 10 minutes and s 810 (an AVX2 laptop)."""
    fake = seconds_for({"xs": 1500, "s": 810, "m": 520, "l": 230, "xl": 90})
    monkeypatch.setattr(sizing, "step_seconds", lambda c, *a, **k: fake[c.name])


def test_auto_sets_the_dimensions_and_records_why(tmp_path, prepared, laptop):
    args = ["--config", str(config_with(tmp_path, prepared, ""))]
    cli = lightning_main(args, run=False)
    _size_model(cli.config, args)
    dims = cli.config["model"]["config"]
    assert (dims["d_model"], dims["n_encoder_layers"], dims["d_ff"]) == (128, 3, 512)
    record = cli.config["model"]["sizing"]
    assert record["chosen"] == "xs" and "xs 1,500" in record["why"] and record["budget_seconds"] == 600


def test_dimensions_the_user_gives_win(tmp_path, prepared, laptop):
    path = config_with(tmp_path, prepared, "")
    args = ["--config", str(path), "--model.config.d_model", "64"]
    cli = lightning_main(args, run=False)
    _size_model(cli.config, args)
    assert cli.config["model"]["config"]["d_model"] == 64 and cli.config["model"]["sizing"] is None
    mine = tmp_path / "mine.yaml"
    mine.write_text("model:\n  config:\n    d_ff: 96\n")  # a user's file: no model_size of its own
    assert _dimensions_given(["--config", str(path), "--config", str(mine)]) == "d_ff"
    assert _dimensions_given(["--config", str(path)]) is None  # the recipe's dimensions are its fallback


@pytest.mark.parametrize("value, d_model", [("fixed", 32), ("s", 192)])
def test_fixed_or_a_named_candidate_needs_no_probe(tmp_path, prepared, monkeypatch, value, d_model):
    monkeypatch.setattr(sizing, "step_seconds", lambda *a, **k: pytest.fail("probed"))
    args = ["--config", str(config_with(tmp_path, prepared, "")), "--model_size", value]
    cli = lightning_main(args, run=False)
    _size_model(cli.config, args)
    assert cli.config["model"]["config"]["d_model"] == d_model


def test_training_stores_the_choice_and_evaluate_reports_it(tmp_path, prepared, laptop, capsys):
    import json

    from conftest import run_main
    from minitrans.checkpoint import checkpoint_metadata

    path = config_with(tmp_path, prepared, "")
    lightning_main(["train", "--config", str(path), "--trainer.max_steps", "2"])
    meta = checkpoint_metadata(tmp_path / "ckpt" / "last.ckpt")
    assert meta["sizing"]["chosen"] == "xs" and meta["model_config"]["d_model"] == 128
    code, out, err = run_main(capsys, "evaluate", "-m", str(tmp_path / "ckpt" / "last.ckpt"), "--beam", "1",
                              "--dataset", "multi30k", "--data-dir", str(prepared.hparams.data_dir),
                              "-o", str(tmp_path / "eval"))
    assert code == 0, err
    assert "model size xs:" in err and json.loads(out)["model_size"]["chosen"] == "xs"


def test_a_resumed_run_keeps_the_size_it_started_with(tmp_path, prepared, laptop, monkeypatch):
    from minitrans.checkpoint import checkpoint_metadata

    path = config_with(tmp_path, prepared, "")
    lightning_main(["train", "--config", str(path), "--trainer.max_steps", "2"])
    faster = seconds_for({"xs": 3000, "s": 2000, "m": 1500, "l": 500, "xl": 90})  # would now choose m
    monkeypatch.setattr(sizing, "step_seconds", lambda c, *a, **k: faster[c.name])
    lightning_main(["train", "--config", str(path), "--trainer.max_steps", "4",
                    "--resume", str(tmp_path / "ckpt" / "last.ckpt")])
    meta = checkpoint_metadata(tmp_path / "ckpt" / "last.ckpt")
    assert meta["model_config"]["d_model"] == 128 and meta["sizing"]["chosen"] == "xs"
