"""The allocator setting: on for the commands that decode, opt-in for training, and a Python
caller's process keeps its allocator (minitrans.cli.runtime)."""

import sys
import types

import pytest

from minitrans.cli import parser as cli
from minitrans.cli import runtime

TUNED = [(runtime.M_MMAP_MAX, 0), (runtime.M_TRIM_THRESHOLD, 1 << 30), (runtime.M_TOP_PAD, 64 << 20)]


class _Mallopt:
    """glibc's mallopt as ctypes gives it, recording its calls instead of making them."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


@pytest.fixture
def mallopt(monkeypatch):
    fake = _Mallopt()
    monkeypatch.setattr(runtime.ctypes, "CDLL", lambda name: types.SimpleNamespace(mallopt=fake))
    monkeypatch.setattr(runtime, "_applied", False)
    monkeypatch.setattr(runtime.sys, "platform", "linux")
    return fake


@pytest.mark.parametrize("setting, decoding, applied", [
    (None, False, False),       # training, nothing asked: glibc as it is
    (None, True, True),         # decoding: tuned
    ("default", True, False),   # decoding, turned off
    ("off", True, False),
    ("tuned", False, True),     # training, asked for
    ("TUNED", True, True),
])
def test_the_setting_by_work_and_environment(mallopt, monkeypatch, setting, decoding, applied):
    if setting is None:
        monkeypatch.delenv("MINITRANS_MALLOC", raising=False)
    else:
        monkeypatch.setenv("MINITRANS_MALLOC", setting)
    assert runtime.tune_allocator(decoding=decoding) is applied
    assert mallopt.calls == (TUNED if applied else [])


def test_force_and_once(mallopt, monkeypatch):
    monkeypatch.setenv("MINITRANS_MALLOC", "default")
    assert runtime.tune_allocator(force=True) and mallopt.calls == TUNED
    assert runtime.tune_allocator() and mallopt.calls == TUNED  # applied once, then reported


def test_not_glibc_is_left_alone(monkeypatch):
    monkeypatch.setattr(runtime, "_applied", False)
    monkeypatch.setattr(runtime.ctypes, "CDLL", lambda name: types.SimpleNamespace())  # no mallopt (musl, ...)
    monkeypatch.setattr(runtime.sys, "platform", "linux")
    assert runtime.tune_allocator(decoding=True) is False


@pytest.mark.parametrize("argv, as_command, decoding", [
    (["translate", "-m", "missing.ckpt", "hello"], True, True),
    (["evaluate", "-m", "missing.ckpt"], True, True),
    (["train", "--help"], True, False),
    (["export", "-m", "missing.ckpt", "-o", "out"], True, False),
    (["translate", "-m", "missing.ckpt", "hello"], False, False),  # cli.main([...]) from Python
])
def test_the_command_tunes_only_for_decoding(monkeypatch, capsys, argv, as_command, decoding):
    asked = []
    monkeypatch.setattr(runtime, "tune_allocator", lambda **kwargs: asked.append(kwargs) or False)
    monkeypatch.setattr(sys, "argv", ["minitrans", *argv])
    try:
        cli.main() if as_command else cli.main(argv)
    except SystemExit:  # the missing model: one line and an exit status
        pass
    assert asked == [{"decoding": decoding}]
