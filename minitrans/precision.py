"""The number format a model decodes (and trains) in, chosen by the hardware.

bf16 halves the memory a matrix product reads and runs on the bf16 units of recent CPUs (Intel
AMX, AVX-512-BF16) and GPUs. A CPU without them emulates bf16 in software, far slower than fp32
(a training step many times slower: docs/speed.md, "Training"). So:

* the native engine decodes with ``--precision auto`` by default (:func:`choose`): bf16 where
  the device has bf16 units, fp32 elsewhere; ``fp32``, ``bf16`` and ``int8`` (dynamic int8
  matrices, CPU) choose one. bf16 was faster than fp32 with BLEU within a few tenths on every
  model measured (docs/speed.md, "Precision by hardware"); CTranslate2's precision is its
  engine's (:func:`minitrans.engines.ctranslate2_engine.compute_type_for`);
* training keeps a recipe's ``trainer.precision: bf16-mixed`` only where it is fast
  (:func:`training_precision`), and says when it falls back to ``32-true``; its AdamW is fused
  where the precision allows it (:func:`fused_adamw`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from minitrans.errors import UsageError

#: What ``--precision`` accepts; ``auto`` resolves to one of the others.
PRECISIONS = ("auto", "fp32", "bf16", "int8")
#: The recipes' bf16 training settings (Lightning's names).
BF16_TRAINING = ("bf16-mixed", "bf16-true", "bf16")


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bf16 natively: AMX tiles or AVX-512-BF16 (PyTorch's probe)."""
    probes = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)


def has_fast_bf16(device: str | torch.device) -> bool:
    """Whether ``device`` runs bf16 matrix products natively (faster than fp32)."""
    device = torch.device(device)
    if device.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    return device.type == "cpu" and cpu_has_bf16()


@dataclass(frozen=True)
class Precision:
    """A resolved decoding precision: ``name`` (fp32, bf16 or int8), what was asked, and why."""

    name: str
    requested: str
    reason: str

    def to_dict(self) -> dict:
        return {"precision": self.name, "requested": self.requested, "reason": self.reason}


def requested(precision: str | None = "auto", bf16: bool = False, int8: bool = False) -> str:
    """One ``--precision`` value from it and the older ``--bf16`` / ``--int8`` switches (aliases
    of ``--precision bf16`` / ``int8``); a UsageError when they disagree."""
    precision = precision or "auto"
    if precision not in PRECISIONS:
        raise UsageError(f"--precision {precision!r}: choose one of {', '.join(PRECISIONS)} (auto = by the hardware).")
    if bf16 and int8:
        raise UsageError("--int8 and --bf16 are two different CPU speed-ups for decoding; choose one "
                         "(--precision bf16 or --precision int8; docs/speed.md compares them).")
    switch = "bf16" if bf16 else "int8" if int8 else None
    if switch and precision not in ("auto", switch):
        raise UsageError(f"--{switch} and --precision {precision} disagree: give one of them.")
    return switch or precision


def folded(options: dict) -> dict:
    """``options`` with the older ``bf16`` / ``int8`` switches of the Python API folded into
    ``precision`` (:func:`requested`): the engines below the public entry points take
    ``precision`` only."""
    if "bf16" not in options and "int8" not in options:
        return options
    options = dict(options)
    options["precision"] = requested(options.get("precision", "auto"), options.pop("bf16", False),
                                     options.pop("int8", False))
    return options


def choose(precision: str, device: str | torch.device) -> Precision:
    """Resolve ``precision`` (one of :data:`PRECISIONS`) for a model on ``device``."""
    precision = requested(precision)
    device = torch.device(device)
    if precision != "auto":
        return Precision(precision, precision, f"asked for with --precision {precision}")
    if has_fast_bf16(device):
        units = "its bf16 units" if device.type == "cuda" else "AMX or AVX-512-BF16"
        return Precision("bf16", "auto", f"auto: this {device.type.upper()} has {units}")
    what = "bf16 would be emulated, slower than fp32" if device.type in ("cpu", "cuda") else "not a CPU or GPU"
    return Precision("fp32", "auto", f"auto: this {device.type.upper()} has no bf16 units ({what})")


def training_device(accelerator: str | None) -> str:
    """Where Lightning will train for ``trainer.accelerator``: ``cuda``, ``mps`` or ``cpu``
    (``auto``: a CUDA GPU, else an Apple GPU, else the CPU, as Lightning picks)."""
    accelerator = str(accelerator or "auto").lower()
    if accelerator in ("gpu", "cuda"):
        return "cuda" if torch.cuda.is_available() or accelerator == "cuda" else "mps"
    if accelerator in ("mps", "cpu"):
        return accelerator
    if accelerator == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return "mps"
    return "cpu"


def training_precision(precision, accelerator: str | None) -> tuple[object, str | None]:
    """``(precision to train with, why it changed or None)``: a recipe's bf16 setting is kept
    where the device computes bf16 natively; elsewhere it becomes what is fast there: ``32-true``
    on a CPU without bf16 units (bf16 would be emulated: 20x slower, docs/speed.md) and on an
    Apple GPU (mixed precision there is not measured), ``16-mixed`` on a CUDA GPU without bf16
    (before Ampere)."""
    if str(precision) not in BF16_TRAINING:
        return precision, None
    device = training_device(accelerator)
    if device == "cpu" and not cpu_has_bf16():
        return "32-true", (f"trainer.precision {precision}: this CPU has no bf16 units (AMX or AVX-512-BF16), "
                           "where bf16 is emulated and trains ~20x slower than fp32 (docs/speed.md); "
                           "training in 32-true instead")
    if device == "cuda" and torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
        return "16-mixed", (f"trainer.precision {precision}: this GPU has no bf16 units (before Ampere); "
                            "training in 16-mixed (fp16 with loss scaling) instead")
    if device == "mps":
        return "32-true", (f"trainer.precision {precision}: on an Apple GPU minitrans trains in 32-true "
                           "(mixed precision there is not measured yet)")
    return precision, None


def fused_adamw(device_type: str, scaled: bool, clips_gradients: bool) -> bool:
    """Whether training's AdamW is fused (one kernel for every parameter's update: 1.9 against
    5.0 ms a step for ``xs``, EPYC with AVX-512-BF16 capped to AVX2, docs/speed.md): on CPUs and
    CUDA, except in a run that scales its loss (16-mixed, fp16 with a gradient scaler) and clips
    gradients, where the gradients must be unscaled before clipping and a fused AdamW unscales
    them only inside its own step. bf16 scales nothing: there the module clips itself
    (``TranslationModule.configure_gradient_clipping``), as Lightning's plugin refuses to."""
    return device_type in ("cpu", "cuda") and not (scaled and clips_gradients)
