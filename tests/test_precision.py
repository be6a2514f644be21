"""`--precision`: auto picks bf16 where the hardware has bf16 units and fp32 elsewhere (the
capability probe mocked both ways), explicit choices win, the old switches are aliases, and
training falls back from bf16-mixed on a CPU that would emulate bf16."""

import pytest
import torch

from minitrans import Translator, precision
from minitrans.errors import UsageError
from minitrans.engines.native_engine import NativeEngine


@pytest.fixture
def no_bf16(monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)


@pytest.fixture
def has_bf16(monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)


def test_auto_picks_fp32_on_a_cpu_without_bf16_units(no_bf16):
    chosen = precision.choose("auto", "cpu")
    assert chosen.name == "fp32" and chosen.requested == "auto" and "no bf16 units" in chosen.reason


def test_auto_picks_bf16_on_a_cpu_with_bf16_units(has_bf16):
    chosen = precision.choose("auto", "cpu")
    assert chosen.name == "bf16" and "AMX or AVX-512-BF16" in chosen.reason


@pytest.mark.parametrize("name", ["fp32", "bf16", "int8"])
def test_an_explicit_precision_wins_over_the_hardware(name, has_bf16):
    assert precision.choose(name, "cpu").name == name


def test_the_probe_reads_pytorchs_cpu_capability(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    assert precision.cpu_has_bf16()
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    assert not precision.cpu_has_bf16()


def test_the_old_switches_are_aliases_and_conflicts_are_one_line_errors():
    assert precision.requested("auto", bf16=True) == "bf16"
    assert precision.requested("auto", int8=True) == "int8"
    assert precision.requested("int8", int8=True) == "int8"
    with pytest.raises(UsageError, match="choose one"):
        precision.requested("auto", bf16=True, int8=True)
    with pytest.raises(UsageError, match="disagree"):
        precision.requested("fp32", bf16=True)
    with pytest.raises(UsageError, match="choose one of auto, fp32, bf16, int8"):
        precision.requested("fp16")


def test_the_engine_decodes_in_what_auto_picked(trained_checkpoint, has_bf16, monkeypatch):
    bf16 = Translator.from_checkpoint(trained_checkpoint)  # precision="auto" is the default
    assert bf16.precision["precision"] == "bf16" and bf16.bf16
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    fp32 = Translator.from_checkpoint(trained_checkpoint)
    assert fp32.precision == {"precision": "fp32", "requested": "auto",
                              "reason": "auto: this CPU has no bf16 units (bf16 would be emulated, slower than fp32)"}
    assert next(fp32.model.parameters()).dtype == torch.float32
    assert Translator.from_checkpoint(trained_checkpoint, precision="fp32").translate("The cat eats.") \
        == fp32.translate("The cat eats.")


def test_a_model_passed_in_is_decoded_as_it_is_unless_asked(trained_checkpoint, has_bf16):
    """bf16 converts a model in place: a user's own model object is not changed behind its back."""
    model = Translator.from_checkpoint(trained_checkpoint, precision="fp32").model
    assert NativeEngine(model).precision.name == "fp32"
    assert Translator(model, Translator.from_checkpoint(trained_checkpoint).tokenizer).precision["precision"] == "fp32"
    assert next(model.parameters()).dtype == torch.float32
    assert NativeEngine(model, precision="auto").precision.name == "bf16"


def test_v1_model_and_evaluate_say_which_precision_and_why(trained_checkpoint, no_bf16):
    from fastapi.testclient import TestClient

    from minitrans.evaluation.evaluate import evaluate_checkpoint
    from minitrans.serve.app import create_app

    translator = Translator.from_checkpoint(trained_checkpoint)
    with TestClient(create_app(translator)) as client:
        decoding = client.get("/v1/model").json()["decoding"]
    assert decoding["precision"]["precision"] == "fp32" and "no bf16 units" in decoding["precision"]["reason"]
    assert decoding["shortlist"] is False
    report, _ = evaluate_checkpoint(trained_checkpoint, ["The cat eats."], [["Le chat mange."]],
                                    beam_size=1, translator=translator)
    assert report["decoding"]["precision"]["precision"] == "fp32"


def test_training_falls_back_from_bf16_on_a_cpu_that_would_emulate_it(no_bf16):
    chosen, why = precision.training_precision("bf16-mixed", "cpu")
    assert chosen == "32-true" and "no bf16 units" in why
    assert precision.training_precision("32-true", "cpu") == ("32-true", None)


def test_training_keeps_bf16_where_the_cpu_has_it(has_bf16):
    assert precision.training_precision("bf16-mixed", "cpu") == ("bf16-mixed", None)


# -- accelerator: auto, precision by device (issue #43, item 5) ---------------------------------
@pytest.fixture
def devices(monkeypatch):
    """Mock what this machine has: ``set(cuda=..., bf16=..., mps=...)``."""
    import types

    def set_(cuda=False, bf16=False, mps=False):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
        monkeypatch.setattr(torch.backends, "mps", types.SimpleNamespace(is_available=lambda: mps))

    return set_


@pytest.mark.parametrize("machine, device", [({"cuda": True}, "cuda"), ({"mps": True}, "mps"), ({}, "cpu"),
                                             ({"cuda": True, "mps": True}, "cuda")])
def test_auto_trains_on_the_gpu_there_is(devices, machine, device):
    devices(**machine)
    assert precision.training_device("auto") == precision.training_device(None) == device
    assert precision.training_device("cpu") == "cpu"


def test_a_bf16_recipe_on_each_device(devices, has_bf16):
    devices(cuda=True, bf16=True)
    assert precision.training_precision("bf16-mixed", "auto") == ("bf16-mixed", None)
    devices(cuda=True, bf16=False)  # a T4 or V100: fp16 with loss scaling
    chosen, why = precision.training_precision("bf16-mixed", "auto")
    assert chosen == "16-mixed" and "before Ampere" in why
    devices(mps=True)
    chosen, why = precision.training_precision("bf16-mixed", "auto")
    assert chosen == "32-true" and "Apple GPU" in why
    devices()  # a CPU with bf16 units: as the recipe says
    assert precision.training_precision("bf16-mixed", "auto") == ("bf16-mixed", None)


def test_a_bf16_recipe_on_a_cpu_without_bf16_units_under_auto(devices, no_bf16):
    devices()
    chosen, why = precision.training_precision("bf16-mixed", "auto")
    assert chosen == "32-true" and "no bf16 units" in why
    assert precision.training_precision("16-mixed", "auto") == ("16-mixed", None)  # not ours to change


def test_every_recipe_trains_where_the_user_is():
    """Every shipped recipe but the GPU one says accelerator: auto (a GPU when there is one)."""
    import yaml
    from pathlib import Path

    for path in sorted(Path(__file__).resolve().parents[1].joinpath("configs").glob("*.yaml")):
        trainer = (yaml.safe_load(path.read_text()) or {}).get("trainer", {})
        if "accelerator" in trainer:
            assert trainer["accelerator"] == ("gpu" if path.stem == "paper-base" else "auto"), path.name


def test_the_old_switches_live_only_at_the_public_entry_points():
    """``bf16=`` / ``int8=`` are folded into ``precision`` where the Python API takes them
    (:class:`Translator`); nothing below takes them (issue #44: one home per rule)."""
    import inspect

    from minitrans.evaluation import evaluate
    from minitrans.engines import auto_engine
    from minitrans.engines import ctranslate2_engine
    from minitrans.engines import native_engine
    from minitrans.training import distill
    from minitrans.serve import app as server

    below = [native_engine.load, ctranslate2_engine.load, auto_engine.load, evaluate.evaluate_checkpoint,
             distill.distill, distill.translate_resumable, server.serve]
    for function in below:
        names = set(inspect.signature(function).parameters)
        assert not names & {"bf16", "int8"}, f"{function.__module__}.{function.__name__}"
    assert precision.folded({"bf16": True, "workers": 2}) == {"precision": "bf16", "workers": 2}
    assert precision.folded({"precision": "fp32"}) == {"precision": "fp32"}
    with pytest.raises(UsageError):
        precision.folded({"precision": "fp32", "int8": True})
