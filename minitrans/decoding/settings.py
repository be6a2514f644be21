"""What a decoding asks for, and its defaults, in one place: the beam, the length penalty, the
output length limit and the n-best bound, checked once for every face (the CLI, the Python API,
the HTTP API's validator). The search algorithms (:mod:`minitrans.decoding.search`) take these
as their defaults; the modules that only need the numbers import them from here, not the
search.
"""

from __future__ import annotations

import math

from minitrans.errors import UsageError

#: Length-penalty exponent used unless asked otherwise. Tuned on the Multi30k validation
#: split with the tiny recipe: BLEU 50.33 (α 0.6), 50.83 (α 1.0), 50.61 (α 1.4).
DEFAULT_ALPHA = 1.0
#: Beam size of `translate`, `evaluate` and the Python API unless asked otherwise.
DEFAULT_BEAM = 5
#: Output length limit ``a · source pieces + b`` (checkpoints record their own).
DEFAULT_MAX_LEN_A, DEFAULT_MAX_LEN_B = 1.5, 10


def nbest_fits(nbest: int, beam_size: int) -> bool:
    """The n-best rule, its one home: a search returns 1 to ``beam_size`` hypotheses (the
    finished beams), so ``1 ≤ nbest ≤ beam``. The CLI, the Python API and the HTTP API's
    validator ask here; its JSON Schema states the same bound for clients."""
    return 1 <= nbest <= beam_size


def check_decoding(beam_size: int, alpha: float, nbest: int = 1) -> None:
    """Reject decoding settings that cannot give a right answer, naming the flag."""
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
        raise UsageError(f"--beam must be a whole number ≥ 1 (1 = greedy), got {beam_size!r}.")
    if isinstance(nbest, bool) or not isinstance(nbest, int) or not nbest_fits(nbest, beam_size):
        raise UsageError(f"--nbest must lie in 1..{beam_size} (the beam size), got {nbest!r}; "
                         "raise --beam to get more alternatives.")
    if not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or not 0 <= alpha <= 10:
        raise UsageError(f"--alpha (length penalty) must be a number in [0, 10], got {alpha!r}; "
                         f"the default is {DEFAULT_ALPHA}.")
