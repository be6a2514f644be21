"""A rule-based sentence splitter in the file format of MiniSBD, the one Argos Translate runs.

Argos Translate 1.10+ splits text into sentences with MiniSBD, a character tagger in ONNX that
it downloads on first use (``en.onnx``), unless the package carries one in ``minisbd/``.
Offline, that download is an immediate error; so an Argos package written by minitrans
(:mod:`minitrans.export.argos`) carries this file instead. It is not a trained model: it is an
ONNX graph of fixed rules, which argos's MiniSBD code loads and runs as it would the real one.

The graph reads each character's id (``units``, (B, T)) and tags it 0 (inside a token), 1
(end of a token) or 2 (end of a sentence), as three scores (B, T, 3) whose argmax is the tag.
Character ``t`` ends a sentence when

* it is ``.``, ``!``, ``?`` or ``…`` followed by a space, or a closing quote or bracket right
  after one (or after a space after one: French ``fin. »``) followed by a space; and
* the character after that space can start a sentence: a capital, a digit, an opening quote
  or bracket, ``¿`` or ``¡``; and
* for ``.``, the word before is not an abbreviation of the language (``Mr``, ``Dr``, ``Mme``,
  ...) nor a single capital (initials: ``J. K. Rowling``).

Every shifted view of the characters is a Pad + Slice; character classes are table lookups
(Gather); AND, OR and NOT are products, maxima and ``1 - x`` of 0/1 floats. MiniSBD's own
code does the rest: paragraphs, offsets, the text of each sentence. Writing the file needs
the ``onnx`` package (the ``[ct2]`` extra); the tests run it with onnxruntime and with
argostranslate itself.
"""

from __future__ import annotations

import json
import os
import string
from pathlib import Path

from minitrans.errors import UsageError

PAD, UNK = "<PAD>", "<UNK>"
#: The characters the graph tells apart; any other is <UNK> (a letter of no class).
ALPHABET = (string.ascii_letters + string.digits + " .!?…\"'«»“”‘’()[]¿¡,;:-"
            + "ÀÂÄÇÉÈÊËÎÏÔÖŒÙÛÜŸàâäçéèêëîïôöœùûüÿ")
ENDERS = ".!?…"
CLOSERS = "\"'»”’)]"
OPENERS = "\"'«“‘([¿¡"
UPPER = string.ascii_uppercase + "ÀÂÄÇÉÈÊËÎÏÔÖŒÙÛÜŸ"
STARTERS = UPPER + string.digits + OPENERS
#: Words that end in a full stop without ending a sentence (single capitals are handled apart).
ABBREVIATIONS = {
    "en": ("Mr", "Mrs", "Ms", "Dr", "St", "Mt", "Jr", "Sr", "Prof", "vs"),
    "fr": ("Mme", "Mlle", "Mgr", "Dr", "Pr", "St", "Ste"),
}
#: MiniSBD's reading settings for this file (no features, no dictionary).
CONFIG = {"skip_newline": False, "max_seqlen": 1000, "no_ssplit": False, "batch_size": 32, "feat_funcs": [],
          "use_dictionary": False, "num_dict_feat": 0}
OPSET = 13


def vocabulary() -> list[str]:
    """Units in id order: ``<PAD>`` 0, ``<UNK>`` 1, then :data:`ALPHABET`."""
    return [PAD, UNK, *dict.fromkeys(ALPHABET)]


def write(path: str | os.PathLike, lang: str) -> Path:
    """Write the splitter for ``lang`` (``en``, ``fr``; others get English abbreviations) to ``path``."""
    try:
        import onnx
        from onnx import TensorProto, helper
    except ImportError:
        raise UsageError('writing an Argos package needs the onnx package: pip install -e ".[ct2]"') from None
    units = vocabulary()
    ids = {u: i for i, u in enumerate(units)}
    nodes, inits = [], []
    counter = iter(range(10**6))

    def name(prefix: str) -> str:
        return f"{prefix}_{next(counter)}"

    def const(values, dtype=TensorProto.INT64, dims=None) -> str:
        n = name("c")
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        inits.append(helper.make_tensor(n, dtype, dims if dims is not None else [len(values)], values))
        return n

    def op(kind: str, *inputs: str, **attrs) -> str:
        out = name(kind.lower())
        nodes.append(helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    margin = 8  # the farthest any rule looks, either way
    padded = op("Pad", "units", const([0, margin, 0, margin]), const(ids[PAD]))
    length = op("Gather", op("Shape", "units"), const(1, dims=[]), axis=0)  # T

    shifted: dict[int, str] = {}

    def at(k: int) -> str:
        """The character ids at t + k, (B, T); <PAD> past either end."""
        if k not in shifted:
            start = const(margin + k, dims=[1])
            end = op("Add", start, op("Unsqueeze", length, const([0])))
            shifted[k] = op("Slice", padded, start, end, const([1]))
        return shifted[k]

    def of_class(chars: str, k: int, extra: tuple[str, ...] = ()) -> str:
        """1.0 where the character at t + k is one of ``chars`` (or of the units ``extra``), else 0.0."""
        table = [1.0 if (u in chars and len(u) == 1) or u in extra else 0.0 for u in units]
        return op("Gather", const(table, TensorProto.FLOAT), at(k), axis=0)

    def is_char(char: str, k: int) -> str:
        return op("Cast", op("Equal", at(k), const(ids[char], dims=[])), to=TensorProto.FLOAT)

    def both(*xs: str) -> str:
        out = xs[0]
        for x in xs[1:]:
            out = op("Mul", out, x)
        return out

    def either(*xs: str) -> str:
        out = xs[0]
        for x in xs[1:]:
            out = op("Max", out, x)
        return out

    def negate(x: str) -> str:
        return op("Sub", const(1.0, TensorProto.FLOAT, dims=[]), x)

    space_next = of_class(" ", 1)
    ender_here = both(of_class(ENDERS, 0), space_next)
    closer_here = both(of_class(CLOSERS, 0), space_next,
                       either(of_class(ENDERS, -1), both(of_class(" ", -1), of_class(ENDERS, -2))))
    starts_next = of_class(STARTERS, 2)
    boundary = lambda k: of_class(" " + OPENERS, k, (PAD,))  # noqa: E731 - a word starts after it
    vetoes = [both(of_class(UPPER, -1), boundary(-2))]  # an initial
    for word in ABBREVIATIONS.get(lang, ABBREVIATIONS["en"]):
        letters = [is_char(c, -len(word) + i) for i, c in enumerate(word)]
        vetoes.append(both(*letters, boundary(-len(word) - 1)))
    abbreviation = both(is_char(".", 0), either(*vetoes))
    sentence_end = both(either(ender_here, closer_here), starts_next, negate(abbreviation))
    token_end = both(negate(of_class(" ", 0)), either(space_next, of_class("", 1, (PAD,))))
    zeros = op("Mul", token_end, const(0.0, TensorProto.FLOAT, dims=[]))
    scores = [op("Unsqueeze", s, const([2])) for s in (zeros, token_end, op("Add", sentence_end, sentence_end))]
    nodes.append(helper.make_node("Concat", scores, ["scores"], axis=2))

    graph = helper.make_graph(
        nodes, f"minitrans-rules-{lang}",
        [helper.make_tensor_value_info("units", TensorProto.INT64, ["B", "T"]),
         helper.make_tensor_value_info("features", TensorProto.FLOAT, ["B", "T", "F"])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["B", "T", 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="minitrans", doc_string=__doc__.split("\n\n")[0])
    model.ir_version = 8  # what onnxruntime releases of the last years all read
    vocab = {"lang": lang, "idx": 0, "cutoff": 0, "lower": False, "_unit2id": ids, "_id2unit": units}
    for key, value in {"lang_code": lang, "config": json.dumps(CONFIG), "vocab": json.dumps(vocab),
                       "lexicon": "null"}.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(model)
    path = Path(path)
    onnx.save(model, str(path))
    return path
