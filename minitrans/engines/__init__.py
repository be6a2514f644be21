"""Engines: what runs a model. One registry of formats, minitrans's own engine, CTranslate2.

* :mod:`~minitrans.engines.registry` — the ``Engine`` protocol, ``Cancelled`` and ``REGISTRY``:
  every model format with its reader and writer. **A new format is one module plus one line
  there.**
* :mod:`~minitrans.engines.native_engine` — reads a ``.ckpt``: minitrans's Transformer and search.
* :mod:`~minitrans.engines.ctranslate2_engine` — reads an exported folder; CTranslate2 decodes.
* :mod:`~minitrans.engines.ctranslate2_export` — writes that folder.
* :mod:`~minitrans.engines.usercache` → :mod:`~minitrans.engines.ctranslate2_cache` — a
  checkpoint's conversion, made once and kept in the user's private, bounded cache.
* :mod:`~minitrans.engines.auto_engine` — ``--engine auto``: which engine decodes, and why.

Importing this folder loads nothing. ``minitrans.engines`` was the registry module before
issue #60: its names (``ENGINES``, ``REGISTRY``, ``reader`` ...) still resolve, lazily, to the
registry's, with a deprecation warning.
"""


def __getattr__(name: str):
    if not name.startswith("__"):
        import warnings

        from minitrans.engines import registry

        if hasattr(registry, name):
            warnings.warn(f"minitrans.engines.{name} moved to minitrans.engines.registry.{name}", DeprecationWarning,
                          stacklevel=2)
            return getattr(registry, name)
    raise AttributeError(f"module 'minitrans.engines' has no attribute {name!r}")
