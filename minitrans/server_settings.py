"""A server's limits and batching settings, in one place: the defaults of ``minitrans serve``'s
flags, checked once, shared by the server, its request schema and the command line."""

import math
from dataclasses import dataclass

from minitrans.errors import UsageError
from minitrans.search import DEFAULT_ALPHA, DEFAULT_BEAM

#: The API's upper bounds for a request's beam and n-best list, and for its length penalty.
MAX_BEAM, MAX_ALPHA = 16, 10.0

@dataclass
class ServerSettings:
    """Limits and batching of a server (each a ``minitrans serve`` flag).

    Args:
        max_sentences: Sentences per request.
        max_chars: Characters per sentence.
        max_queue: Sentences waiting or decoding at once; beyond it requests get 503.
        batching: Gather concurrent requests into one decoding batch.
        batch_wait_ms: How long the worker waits for more requests before decoding.
        batch_sentences: Most sentences in one gathered batch.
        timeout_s: A request not answered by then gets 504 (and its decoding stops).
        beam: Default beam size of a request.
        alpha: Default length penalty of a request.
        max_attention_values: Attention weights one request may ask for, counted as
            ``layers × (heads + 1) × target × source`` numbers at the longest output the length
            limit allows (~8 bytes of JSON each: the default is ~30 MB); beyond it 413.
        cors_origins: Origins whose browser pages may call the API (CORS; none by default,
            ``*`` for any).
        api_keys: When not empty, every translation and detection request must carry one of
            these keys (``api_key`` on LibreTranslate's routes, the ``X-API-Key`` header on
            ``/v1``): none is 400, a wrong one 403. Empty (the default): no keys, ``api_key``
            accepted and ignored.

    Each field is checked here (a :class:`UsageError` naming its flag), so the command line
    and the Python API share one set of rules and one set of defaults.
    """

    max_sentences: int = 64
    max_chars: int = 2000
    max_queue: int = 1024
    batching: bool = True
    batch_wait_ms: float = 5.0
    batch_sentences: int = 128
    timeout_s: float = 60.0
    beam: int = DEFAULT_BEAM
    alpha: float = DEFAULT_ALPHA
    max_attention_values: int = 4_000_000
    cors_origins: tuple[str, ...] = ()
    api_keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if any(not isinstance(k, str) or not k.strip() or k != k.strip() for k in self.api_keys):
            raise UsageError("--api-keys: every key must be a non-empty string without surrounding spaces.")
        for name in ("max_sentences", "max_chars", "max_queue", "batch_sentences", "max_attention_values"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be a whole number of at least 1, got {value!r}.")
        for name, flag in (("timeout_s", "--timeout"), ("batch_wait_ms", "--batch-wait-ms")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0 or (name == "timeout_s" and value == 0):
                raise UsageError(f"{flag} must be a finite number {'above' if name == 'timeout_s' else 'of at least'} "
                                 f"0, got {value!r}.")
        if not isinstance(self.beam, int) or not 1 <= self.beam <= MAX_BEAM:
            raise UsageError(f"--beam must lie in 1..{MAX_BEAM} for a server (the API's own limit), got {self.beam!r}.")
        if not isinstance(self.alpha, (int, float)) or not (0.0 <= self.alpha <= MAX_ALPHA):
            raise UsageError(f"--alpha must lie in 0..{MAX_ALPHA:g} for a server, got {self.alpha!r}.")

    @property
    def grace_s(self) -> float:
        """How long shutdown waits for requests in flight: past ``timeout_s``, so that each is
        answered (translated, or 504 at its own timeout) before the process exits."""
        return self.timeout_s + 5.0

    def key_problem(self, key: object) -> tuple[int, str] | None:
        """``(status, message)`` when a request's key does not let it in (LibreTranslate's
        answers: 400 for none, 403 for a wrong one); None when it may go on (or no keys are
        configured). Compared in constant time."""
        if not self.api_keys:
            return None
        if not isinstance(key, str) or not key:
            return 400, "Please contact the server operator to get an API key"
        import hmac

        if not any(hmac.compare_digest(key.encode(), k.encode()) for k in self.api_keys):
            return 403, "Invalid API key"
        return None


def read_api_keys(path: str) -> tuple[str, ...]:
    """``--api-keys FILE``: one key per line (blank lines and ``#`` comments skipped)."""
    from pathlib import Path

    file = Path(path)
    if not file.is_file():
        raise UsageError(f"--api-keys {path}: no such file; write one key per line.")
    keys = tuple(line.strip() for line in file.read_text(encoding="utf-8").splitlines()
                 if line.strip() and not line.lstrip().startswith("#"))
    if not keys:
        raise UsageError(f"--api-keys {path} holds no key; write one key per line.")
    return keys

