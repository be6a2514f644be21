"""A server's limits and batching settings, in one place: the defaults of ``minitrans serve``'s
flags, checked once, shared by the server, its request schema and the command line."""

import math
from dataclasses import dataclass

from minitrans.errors import UsageError
from minitrans.decoding.settings import DEFAULT_ALPHA, DEFAULT_BEAM

#: The API's upper bounds for a request's beam and n-best list, and for its length penalty.
MAX_BEAM, MAX_ALPHA = 16, 10.0

@dataclass
class ServerSettings:
    """Limits and batching of a server (each a ``minitrans serve`` flag).

    Args:
        max_sentences: Sentences per request, counted after splitting (a text counts as its
            sentences, at least one; :mod:`minitrans.serve.limits`).
        max_chars: Characters per sentence (a request holds at most ``max_sentences ×
            max_chars`` characters in all).
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
        api_keys: When not empty, every request but those of :data:`PUBLIC_PATHS` must carry
            one of these keys (the ``X-API-Key`` header anywhere; ``api_key`` on LibreTranslate's
            routes too): none is 401 (400 on LibreTranslate's routes), a wrong one 403. Empty
            (the default): no keys, ``api_key`` accepted and ignored. Keys are printable ASCII,
            which every HTTP header can carry.
        read_timeout_s: Seconds a client may take to send a request's headers, and again its
            body; slower clients are disconnected (408 for a body), so that half-sent requests
            cannot hold the server's connections.
        max_connections: Open connections at most (and never more than the process may open
            files, less a reserve); past it, the oldest connection still sending its headers is
            closed to make room.

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
    read_timeout_s: float = 10.0
    max_connections: int = 1000

    def __post_init__(self) -> None:
        if any(not isinstance(k, str) or not k.strip() or k != k.strip() for k in self.api_keys):
            raise UsageError("--api-keys: every key must be a non-empty string without surrounding spaces.")
        for n, key in enumerate(self.api_keys, 1):
            problem = key_problem_of(key)
            if problem:
                raise UsageError(f"--api-keys: key {n} {problem}")
        for name in ("max_sentences", "max_chars", "max_queue", "batch_sentences", "max_attention_values",
                     "max_connections"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be a whole number of at least 1, got {value!r}.")
        for name, flag in (("timeout_s", "--timeout"), ("batch_wait_ms", "--batch-wait-ms"),
                           ("read_timeout_s", "--read-timeout")):
            value = getattr(self, name)
            positive = name != "batch_wait_ms"
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0 or (positive and value == 0):
                raise UsageError(f"{flag} must be a finite number {'above' if positive else 'of at least'} "
                                 f"0, got {value!r}.")
        if not isinstance(self.beam, int) or not 1 <= self.beam <= MAX_BEAM:
            raise UsageError(f"--beam must lie in 1..{MAX_BEAM} for a server (the API's own limit), got {self.beam!r}.")
        if not isinstance(self.alpha, (int, float)) or not (0.0 <= self.alpha <= MAX_ALPHA):
            raise UsageError(f"--alpha must lie in 0..{MAX_ALPHA:g} for a server, got {self.alpha!r}.")

    @property
    def max_request_chars(self) -> int:
        """Characters one request may hold in all: its sentences at their longest."""
        return self.max_sentences * self.max_chars

    @property
    def max_body_bytes(self) -> int:
        """The largest request body read: :attr:`max_request_chars` as JSON at its most
        escaped (12 bytes for a character outside the BMP, ``\\ud83d\\ude00``), plus room for
        the settings. A larger body is refused (413) before it is read."""
        return 12 * self.max_request_chars + 65_536

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


#: The routes open without a key when keys are configured: the page and its files, the health
#: check, what a client reads before it has a key (LibreTranslate's front-end settings and
#: languages, the served models) and the API's description. Every other route, present or
#: future, needs one (:mod:`minitrans.serve.guard`).
PUBLIC_PATHS = ("/", "/health", "/openapi.json", "/languages", "/frontend/settings", "/v1/model", "/v1/models")
PUBLIC_PREFIXES = ("/static/",)


def key_problem_of(key: str) -> str | None:
    """Why ``key`` cannot serve as an API key (an HTTP header could not carry it), or None."""
    bad = next((c for c in key if not " " <= c <= "~"), None)
    if bad is not None:
        return (f"holds {bad!r} (U+{ord(bad):04X}); keys must be printable ASCII, which an X-API-Key header can "
                "carry. Choose another key.")
    return None


def read_api_keys(path: str) -> tuple[str, ...]:
    """``--api-keys FILE``: one key per line (blank lines and ``#`` comments skipped); a key
    that no HTTP header can carry is refused, naming its line."""
    from pathlib import Path

    from minitrans.text.textio import read_lines

    file = Path(path)
    if not file.is_file():
        raise UsageError(f"--api-keys {path}: no such file; write one key per line.")
    keys = []
    for number, line in enumerate(read_lines(file, "--api-keys file"), 1):
        key = line.strip()
        if not key or key.startswith("#"):
            continue
        problem = key_problem_of(key)
        if problem:
            raise UsageError(f"--api-keys {path}, line {number}: the key {problem}")
        keys.append(key)
    if not keys:
        raise UsageError(f"--api-keys {path} holds no key; write one key per line.")
    return tuple(keys)

