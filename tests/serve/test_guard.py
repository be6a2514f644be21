"""The server's guards (issue #42, items 14–16, 18–20): keys and body size before a byte of the
body is read or validated, on every route by construction; slow and half-open clients cannot
take the server down; one deadline per LibreTranslate request."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from fastapi.testclient import TestClient

from conftest import free_port
from minitrans.errors import UsageError
from minitrans.serve.app import create_app
from minitrans.serve.guard import RequestGuard
from minitrans.serve.settings import ServerSettings, read_api_keys
from minitrans.translate import Translator
from test_worker import _slow_search

KEYED = ServerSettings(api_keys=("k1",))


@pytest.fixture(scope="module")
def translator(trained_checkpoint):
    return Translator.load(trained_checkpoint)


# -- the guard alone, as ASGI ----------------------------------------------------------------
def _call(settings, path, headers, messages, key_in_body=frozenset()):
    """Run the guard around an app that records what reaches it: ``(status, body, reached,
    messages read)``."""
    reached, read, sent = [], [], []

    async def app(scope, receive, send):
        message = await receive()
        reached.append(message["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def receive():
        if not messages:
            await asyncio.sleep(3600)
        read.append(1)
        message = messages.pop(0)
        if callable(message):
            return await message()
        return message

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "query_string": b"", "headers":
             [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    asyncio.run(RequestGuard(app, settings, key_in_body)(scope, receive, send))
    status = sent[0]["status"]
    return status, json.loads(sent[1]["body"] or b"{}"), reached, len(read)


def _chunk(data: bytes, more: bool = True):
    return {"type": "http.request", "body": data, "more_body": more}


def test_a_large_content_length_is_refused_before_the_body_is_read():
    settings = ServerSettings()
    status, body, reached, read = _call(settings, "/v1/translate", {"content-length": str(100_000_000)},
                                        [_chunk(b"x" * 1000)] * 5)
    assert status == 413 and read == 0 and not reached
    assert f"{settings.max_body_bytes:,}" in body["detail"] and "Split the request" in body["detail"]


def test_a_chunked_body_is_counted_and_stopped_at_the_limit():
    """Refused at the limit; the rest is read and dropped (issue #59, item 14: the client can
    read the 413), never passed on."""
    settings = ServerSettings(max_sentences=2, max_chars=100)  # max_body_bytes is small
    chunks = [_chunk(b"x" * 20_000)] * 99 + [_chunk(b"x", more=False)]
    status, body, reached, read = _call(settings, "/v1/translate", {}, chunks)
    assert status == 413 and not reached and read == 100
    status, _, reached, _ = _call(settings, "/v1/translate", {}, [_chunk(b"{}", more=False)])
    assert status == 200 and reached == [b"{}"]


def test_a_body_that_does_not_arrive_is_408():
    async def late():
        await asyncio.sleep(5)
        return _chunk(b"}", more=False)

    started = time.perf_counter()
    status, body, reached, _ = _call(ServerSettings(read_timeout_s=0.3), "/v1/translate", {},
                                     [_chunk(b"{"), late])
    assert status == 408 and "read_timeout" in body["detail"] and not reached
    assert time.perf_counter() - started < 2


def test_no_key_is_401_before_the_body_is_read():
    status, body, reached, read = _call(KEYED, "/v1/translate", {"content-length": "5"}, [_chunk(b"[[[[[", False)])
    assert status == 401 and read == 0 and not reached and "X-API-Key" in body["detail"]
    status, _, reached, _ = _call(KEYED, "/v1/translate", {"x-api-key": "wrong"}, [_chunk(b"{}", False)])
    assert status == 403 and not reached
    status, _, reached, _ = _call(KEYED, "/health", {}, [_chunk(b"", False)])
    assert status == 200


@pytest.mark.parametrize("headers, body, status", [
    ({"content-type": "application/json"}, b'{"q": "x"}', 400),
    ({"content-type": "application/json"}, b'{"q": "x", "api_key": "no"}', 403),
    ({"content-type": "application/json"}, b'{"q": "x", "api_key": "k1"}', 200),
    ({"content-type": "application/x-www-form-urlencoded"}, b"q=x&api_key=k1", 200),
    ({"content-type": "application/x-www-form-urlencoded"}, b"q=x&api_key=k2", 403),
    ({"content-type": "application/json", "x-api-key": "k1"}, b"{}", 200),
])
def test_libretranslate_routes_take_the_key_in_the_body(headers, body, status):
    got, answer, reached, _ = _call(KEYED, "/translate", headers, [_chunk(body, False)], frozenset({"/translate"}))
    assert got == status and (reached == [body]) == (status == 200)
    if status != 200:
        assert "error" in answer  # LibreTranslate's shape


# -- the guard in the app ------------------------------------------------------------------
def test_every_route_is_guarded_by_construction(translator):
    app = create_app(translator, KEYED)

    @app.post("/v1/added-later")
    def added_later(body: dict) -> dict:  # its author checked no key
        return body

    with TestClient(app) as client:
        assert client.post("/v1/added-later", json={}).status_code == 401
        assert client.post("/v1/added-later", json={}, headers={"X-API-Key": "k1"}).status_code == 200
        # keyless and invalid: 401, not the schema's 422
        assert client.post("/v1/translate", content=b"not json").status_code == 401
        assert client.post("/v1/translate", json={"q": 5}).status_code == 401
        assert client.post("/translate", data={"q": 5}).status_code == 400
        assert client.get("/health").status_code == 200 and client.get("/").status_code == 200


@pytest.mark.parametrize("key", ["ключ", "clé", "tab\there", "x" * 10 + "\x7f"])
def test_a_key_no_header_can_carry_is_refused_at_start_up(tmp_path, key):
    with pytest.raises(UsageError, match="key 1"):
        ServerSettings(api_keys=(key,))
    keys = tmp_path / "keys"
    keys.write_text(f"good-key\n{key}\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"line 2"):
        read_api_keys(keys)


# -- LibreTranslate: one deadline, and what never fits ---------------------------------------
def test_one_deadline_bounds_a_request_of_many_texts(translator, monkeypatch):
    _slow_search(translator, monkeypatch, 0.3)
    with TestClient(create_app(translator, ServerSettings(timeout_s=1.0, batch_wait_ms=0))) as client:
        for body in ({"q": [f"The cat {i} eats." for i in range(16)], "source": "en", "target": "fr"},
                     {"q": [f"<p>The cat {i} eats.</p>" for i in range(16)], "source": "en", "target": "fr",
                      "format": "html"}):
            started = time.perf_counter()
            r = client.post("/translate", json=body)
            assert r.status_code == 504 and "error" in r.json(), r.text
            assert time.perf_counter() - started < 2.5  # not 16 deadlines one after another


def test_an_html_page_with_more_blocks_than_the_queue_is_413(translator):
    settings = ServerSettings(max_queue=8, max_sentences=64)
    page = "".join(f"<p>Block {i}.</p>" for i in range(12))
    with TestClient(create_app(translator, settings)) as client:
        r = client.post("/translate", json={"q": page, "source": "en", "target": "fr", "format": "html"})
        assert r.status_code == 413 and "more than the server ever queues" in r.json()["error"]


# -- slow clients, for real ------------------------------------------------------------------
def test_half_sent_requests_do_not_take_the_server_down(trained_checkpoint, tmp_path):
    """600 connections that send half a request, against a server allowed 256 files: they
    are dropped after --read-timeout or to make room, /health answers throughout, and the log
    stays small (no traceback per failed accept)."""
    port = free_port()
    log = tmp_path / "server.log"
    shell = (f"ulimit -n 256; exec {sys.executable} -m minitrans serve -m {trained_checkpoint} --port {port} "
             f"--read-timeout 2")
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "-c", shell], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/health"
    held: list[socket.socket] = []
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url, timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail(log.read_text()[-2000:])
        answered, slowest = 0, 0.0
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            for _ in range(100 if len(held) < 600 else 0):
                s = socket.socket()
                s.setblocking(False)
                try:
                    s.connect(("127.0.0.1", port))
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    continue
                held.append(s)
            for s in held:
                try:
                    s.send(b"GET / HTTP/1.1\r\nHost: x\r\n")  # never the blank line
                except OSError:
                    pass
            started = time.monotonic()
            try:
                assert json.load(urllib.request.urlopen(url, timeout=5))["status"] == "ok"
                answered += 1
            except OSError as err:
                pytest.fail(f"/health did not answer with {len(held)} half-open connections: {err}")
            slowest = max(slowest, time.monotonic() - started)
            time.sleep(0.5)
        assert answered >= 8 and slowest < 5
        assert proc.poll() is None
    finally:
        for s in held:
            s.close()
        proc.terminate()
        proc.wait(timeout=30)
    text = log.read_text()
    assert "Traceback" not in text and os.path.getsize(log) < 20_000, text[-3000:]


@pytest.mark.hostile
def test_a_client_sending_a_body_over_the_limit_reads_the_413(trained_checkpoint):
    """Issue #59, item 14: a 10 MB request to a real server ended in the client's
    ConnectionResetError (the server answered and closed while the client was still sending)."""
    import urllib.error
    import urllib.request

    from conftest import start_server

    proc, url = start_server(trained_checkpoint, "--engine", "native")
    try:
        for body, headers in ((b'{"q": "' + b"x" * 10_000_000 + b'"}', {"Content-Type": "application/json"}),
                              (iter([b'{"q": "'] + [b"x" * 1_000_000] * 10 + [b'"}']),
                               {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})):
            request = urllib.request.Request(f"{url}/v1/translate", data=body, headers=headers, method="POST")
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(request, timeout=60)
            assert err.value.code == 413 and "Split the request" in json.load(err.value)["detail"]
        ok = urllib.request.urlopen(urllib.request.Request(
            f"{url}/v1/translate", data=b'{"q": "The cat."}', headers={"Content-Type": "application/json"}), timeout=60)
        assert ok.status == 200  # the server still serves
    finally:
        proc.terminate()
        proc.wait(60)
