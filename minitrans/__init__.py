"""minitrans: a mini English→French Transformer, built from its parts.

Public names: :class:`ModelConfig`, :class:`Transformer`, :class:`Translator`, :func:`adapt`.
"""

from minitrans import _moved
from minitrans._version import __version__
from minitrans.model.config import PRESETS, ModelConfig
from minitrans.model.transformer import Transformer

__all__ = ["ModelConfig", "PRESETS", "Transformer", "Translator", "__version__", "adapt"]
_moved.install()  # old import paths (minitrans.attention, ...) keep working for one release


def __getattr__(name: str):
    # Translator pulls in SentencePiece and search code; import it only when asked for,
    # so that `import minitrans` stays a torch-only import.
    if name == "Translator":
        from minitrans.translate import Translator

        return Translator
    if name == "adapt":  # a fine-tuning run on the user's pairs (Lightning is imported when it runs)
        from minitrans.training.adapt import adapt

        return adapt
    raise AttributeError(f"module 'minitrans' has no attribute {name!r}")
