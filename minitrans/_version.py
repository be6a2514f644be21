"""minitrans's version: a leaf module, so that code inside the package can name it without
importing the package face (whose lazy ``Translator`` would import back down)."""

__version__ = "0.1.0"
