"""Old import paths of modules that moved into folders (issue #60), kept for one release.

``import minitrans.attention`` (or ``from minitrans.attention import X``, or
``monkeypatch.setattr("minitrans.attention.X", ...)``) still works: the old name is the **same
module object** as the new one (``sys.modules["minitrans.attention"] is
sys.modules["minitrans.model.attention"]``), so patching through either name patches the code
that runs. Each old name says once, as a :class:`DeprecationWarning`, where the module is now.
``minitrans.training``, ``minitrans.engines`` and ``minitrans.cli`` were modules and are now
folders: their public names resolve lazily through the folders' faces.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings

#: Old module name -> new one (both under ``minitrans.``).
MOVED: dict[str, str] = {
    **{name: f"model.{name}" for name in ("config", "masks", "attention", "cache", "dropout", "layers", "encoder",
                                         "decoder", "transformer")},
    **{name: f"decoding.{name}" for name in ("search", "kernels", "prepack", "shortlist", "ensemble", "workers",
                                            "confidence")},
    "server": "serve.app", "server_settings": "serve.settings", "server_limits": "serve.limits",
    "server_guard": "serve.guard", "server_worker": "serve.worker", "api_schema": "serve.schema",
    "libretranslate": "serve.libretranslate",
    **{name: f"text.{name}" for name in ("vocab", "languages", "cleaning", "segment", "textio", "tokenizer")},
    **{name: f"data.{name}" for name in ("sources", "download", "corpus", "stream", "mixture", "batching",
                                        "datamodule")},
    "datacache": "data.cache",
    **{name: f"training.{name}" for name in ("loss", "schedule", "budget", "sizing", "distill")},
    **{name: f"engines.{name}" for name in ("native_engine", "ctranslate2_engine", "ctranslate2_export",
                                           "ctranslate2_cache", "auto_engine", "usercache")},
    "evaluate": "evaluation.evaluate", "plotting": "evaluation.plotting",
    "argos_export": "export.argos", "hf_export": "export.hf", "web_export": "export.web",
    **{name: f"export.{name}" for name in ("sentence_onnx", "onnx_graphs", "web_runtime")},
    "boundary": "errors",
    "commands": "cli.commands", "train_cli": "cli.train", "progress": "cli.progress", "runtime": "cli.runtime",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``minitrans.OLD`` and hands back the module ``minitrans.NEW`` itself."""

    def find_spec(self, fullname, path=None, target=None):
        old = fullname.removeprefix("minitrans.")
        if not fullname.startswith("minitrans.") or old not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        new = f"minitrans.{MOVED[spec.name.removeprefix('minitrans.')]}"
        warnings.warn(f"{spec.name} moved to {new}; import it from there (the old name goes in the next release)",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        self._specs = {**getattr(self, "_specs", {}), new: module.__spec__}
        return module

    def get_code(self, fullname):
        """What ``python -m minitrans.OLD`` runs (runpy asks the loader for code): the new
        module's code, run as ``__main__``."""
        new = f"minitrans.{MOVED[fullname.removeprefix('minitrans.')]}"
        warnings.warn(f"python -m {fullname} moved to python -m {new}", DeprecationWarning, stacklevel=2)
        return importlib.util.find_spec(new).loader.get_code(new)

    def exec_module(self, module) -> None:
        """The module is the new one, already executed: nothing to run but to give it back its own
        spec (the import system set the alias's on it)."""
        module.__spec__ = self._specs[module.__name__]


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (``minitrans/__init__.py`` calls it)."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())
