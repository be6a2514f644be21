"""The server's guards, in front of every route by construction: keys, body size, slow clients.

* :class:`RequestGuard`, an ASGI middleware around the whole app: a request whose
  ``Content-Length`` passes :attr:`~ServerSettings.max_body_bytes` is refused (413) before any of
  its body reaches a route, and a body sent without one is counted as it arrives; the refused
  body is read and dropped (up to :data:`DRAIN_BYTES`, within ``read_timeout_s``) before the 413
  is sent, so that the client, still sending, can read it; a body that does not arrive within
  ``read_timeout_s`` is 408. With ``--api-keys``, every route but
  :data:`~minitrans.serve.settings.PUBLIC_PATHS` needs a key, checked from the headers first
  (``X-API-Key``): a request without one is refused (401) before its body is read or validated.
  LibreTranslate's routes also take ``api_key`` from the query string or the body, as its
  clients send it (then 400 without one, 403 for a wrong one: LibreTranslate's answers). A new
  route is guarded without its author doing anything.
* :func:`connection_protocol`, uvicorn's HTTP/1.1 protocol with a deadline for a request's
  headers (``read_timeout_s``: a half-sent request is disconnected, however slowly it trickles)
  and a cap on open connections below the process's file limit: past it the oldest connection
  still sending its headers is closed to make room, so a flood of half-open connections
  (slowloris) cannot take the descriptors ``/health`` needs.
* :func:`quiet_repeats`: the event loop's error log says each kind of error once per
  :data:`QUIET_S` with a count, not a traceback per failed ``accept()``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import time
from typing import Any
from urllib.parse import parse_qs

from minitrans.serve.settings import PUBLIC_PATHS, PUBLIC_PREFIXES, ServerSettings

log = logging.getLogger(__name__)

#: How long the loop's log keeps quiet about an error it has just reported (seconds).
QUIET_S = 10.0
#: Connections accepted at once (uvicorn's ``backlog``), and the descriptors kept free besides the
#: connection cap: for the listening socket, model files, logs, and connections accepted at once.
BACKLOG = 128
RESERVED_FILES = 64 + BACKLOG
#: A refused body is read (and dropped) up to this size before the 413, so the client reads it.
DRAIN_BYTES = 32 << 20


def is_public(path: str) -> bool:
    """Whether ``path`` is open without a key when keys are configured."""
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


class RequestGuard:
    """ASGI middleware: body limits and API keys before any route runs (see the module's
    docstring). ``key_in_body`` names the routes whose clients send ``api_key`` as a parameter
    (LibreTranslate's); they also answer in LibreTranslate's error shape."""

    def __init__(self, app, settings: ServerSettings, key_in_body: frozenset[str] = frozenset()) -> None:
        self.app, self.settings, self.key_in_body = app, settings, key_in_body

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from starlette.datastructures import Headers, QueryParams

        path, settings = scope["path"], self.settings
        libre = path in self.key_in_body
        headers = Headers(scope=scope)
        length = headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                await _reply(scope, receive, send, 400, "the Content-Length header is not a number", libre)
                return
            if int(length) > settings.max_body_bytes:
                if int(length) <= DRAIN_BYTES:  # read and drop it, so that the client can read the 413
                    await _drain(receive, 0, settings)
                await _reply(scope, receive, send, 413, _too_large(int(length), settings), libre)
                return
        guarded = bool(settings.api_keys) and not is_public(path)
        key = headers.get("x-api-key")
        if guarded and not key and libre:
            key = QueryParams(scope.get("query_string", b"")).get("api_key")
        if guarded and key:
            problem = settings.key_problem(key)
            if problem is not None:
                await _reply(scope, receive, send, 403, problem[1], libre)
                return
        elif guarded and not libre:
            await _reply(scope, receive, send, 401, "no API key: send one as the X-API-Key header (this server was "
                                                    "started with --api-keys)", libre)
            return
        body = await self._read_body(scope, receive, send, libre)
        if body is None:  # refused, or the client left
            return
        if guarded and not key:  # LibreTranslate's clients send the key as a parameter
            problem = settings.key_problem(await _key_in(scope, body))
            if problem is not None:
                await _reply(scope, receive, send, problem[0], problem[1], libre)
                return
        await self.app(scope, _replay(body, receive), send)

    async def _read_body(self, scope, receive, send, libre: bool) -> bytes | None:
        """The whole body within the size and time limits, or None once answered (413, 408) or
        when the client disconnected."""
        settings, chunks, size = self.settings, [], 0
        deadline = asyncio.get_running_loop().time() + settings.read_timeout_s
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            try:
                message = await asyncio.wait_for(receive(), timeout=max(remaining, 0.001))
            except asyncio.TimeoutError:
                await _reply(scope, receive, send, 408, f"the request body did not arrive within "
                                                        f"{settings.read_timeout_s:g} s (read_timeout)", libre)
                return None
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > settings.max_body_bytes:
                if message.get("more_body", False):
                    await _drain(receive, size, settings)
                await _reply(scope, receive, send, 413, _too_large(size, settings, more=True), libre)
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def _drain(receive, size: int, settings: ServerSettings) -> None:
    """Read and drop the rest of a body that is refused, up to :data:`DRAIN_BYTES` in all and
    ``read_timeout_s``: a server that answers and closes while the client is still sending
    resets the connection, and the client never reads the 413 (a 10 MB request got
    ``ConnectionResetError``). Beyond the bound it answers anyway, as a server must."""
    deadline = asyncio.get_running_loop().time() + settings.read_timeout_s
    while size <= DRAIN_BYTES:
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            return
        try:
            message = await asyncio.wait_for(receive(), timeout=remaining)
        except asyncio.TimeoutError:
            return
        if message["type"] != "http.request":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _too_large(size: int, settings: ServerSettings, more: bool = False) -> str:
    return (f"the request body is {'over ' if more else ''}{size:,} bytes; this server reads at most "
            f"{settings.max_body_bytes:,} (max_sentences × max_chars characters as JSON). Split the request.")


def _replay(body: bytes, receive):
    """A ``receive`` that hands the app the body already read, then the client's own events
    (a disconnect) as they come."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _key_in(scope, body: bytes) -> str | None:
    """``api_key`` from a JSON, urlencoded or multipart body (None when there is none)."""
    from starlette.datastructures import Headers

    kind = Headers(scope=scope).get("content-type", "").split(";")[0].strip().lower()
    try:
        if kind == "application/json":
            data = json.loads(body) if body.strip() else {}
            key = data.get("api_key") if isinstance(data, dict) else None
        elif kind == "application/x-www-form-urlencoded":
            key = parse_qs(body.decode("utf-8", "replace")).get("api_key", [None])[0]
        elif kind == "multipart/form-data":
            from starlette.requests import Request

            async def once() -> dict[str, Any]:
                return {"type": "http.request", "body": body, "more_body": False}

            form = await Request(scope, once).form()
            key = form.get("api_key")
            await form.close()
        else:
            key = None
    except Exception:  # a body that cannot be read holds no key; the route says what is wrong with it
        return None
    return key if isinstance(key, str) else None


async def _reply(scope, receive, send, status: int, message: str, libre: bool) -> None:
    """An error answer in the route's shape (``{"error"}`` on LibreTranslate's routes, else
    ``{"detail"}``); the connection is closed after it, since the body may be unread."""
    from starlette.responses import JSONResponse

    body = {"error": message} if libre else {"detail": message}
    await JSONResponse(body, status_code=status, headers={"Connection": "close"})(scope, receive, send)


# -- connections -------------------------------------------------------------------------------
def connection_cap(wanted: int) -> int:
    """Open connections at most: ``wanted``, and never more than the process's file limit
    (``ulimit -n``) less :data:`RESERVED_FILES`."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - RESERVED_FILES))


def connection_protocol(settings: ServerSettings):
    """uvicorn's h11 protocol class with a header deadline and a connection cap (see the
    module's docstring)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    cap = connection_cap(settings.max_connections)
    said = _Once(QUIET_S)

    class GuardedH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None
        _waiting_since = 0.0

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._wait_for_headers()
            if len(self.connections) > cap:
                self._make_room()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # the request's headers are in
                self._stop_waiting()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._wait_for_headers()  # the next request on this connection gets its own deadline

        def connection_lost(self, exc) -> None:
            self._stop_waiting()
            super().connection_lost(exc)

        def _wait_for_headers(self) -> None:
            self._stop_waiting()
            self._waiting_since = self.loop.time()
            self._header_timer = self.loop.call_later(settings.read_timeout_s, self._too_slow)

        def _stop_waiting(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _too_slow(self) -> None:
            self._header_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.abort()

        def _make_room(self) -> None:
            waiting = [c for c in self.connections if isinstance(c, GuardedH11Protocol) and c is not self
                       and c._header_timer is not None and not c.transport.is_closing()]
            oldest = min(waiting, key=lambda c: c._waiting_since, default=None)
            if said("cap"):
                log.warning("%d connections open, the most this server keeps (--max-connections, ulimit -n): closing "
                            "the oldest that has not sent its request yet (repeats not logged for %g s)",
                            len(self.connections) - 1, QUIET_S)
            (oldest or self).transport.abort()

    return GuardedH11Protocol


class _Once:
    """``said(kind)`` is true once per ``quiet_s`` seconds for each kind."""

    def __init__(self, quiet_s: float) -> None:
        self.quiet_s, self.last = quiet_s, {}

    def __call__(self, kind: str) -> bool:
        now = time.monotonic()
        if now - self.last.get(kind, -self.quiet_s) < self.quiet_s:
            return False
        self.last[kind] = now
        return True


def quiet_repeats(loop: asyncio.AbstractEventLoop) -> None:
    """Make ``loop`` report each kind of error once per :data:`QUIET_S`, in one line (a failed
    ``accept()`` repeats thousands of times a second when descriptors run out)."""
    said, default = _Once(QUIET_S), loop.get_exception_handler()
    suppressed: dict[str, int] = {}

    def handler(loop, context) -> None:
        kind = str(context.get("message", ""))
        if not said(kind):
            suppressed[kind] = suppressed.get(kind, 0) + 1
            return
        error = context.get("exception")
        if isinstance(error, OSError):  # the system's complaint is the news, not the stack
            log.error("%s: %s%s", kind, error, f" ({suppressed.pop(kind)} more since the last report)"
                      if suppressed.get(kind) else "")
            return
        if default is not None:
            default(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
