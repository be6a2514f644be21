"""The server and its batching worker (``server_worker.py``) against careless clients, on both
engines: issue #30's second hostile round, one regression test per numbered case, named after it,
each run at the default settings users get (its cases about files, exports, resuming and the
command line live beside the modules they test, marked ``hostile`` like these)."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from conftest import synthetic_pairs
from conftest import run_main as run
from minitrans import Translator

pytestmark = pytest.mark.hostile  # the whole round runs with the other hostile cases: -m hostile


# -- 5. one bad sentence, one failed request ------------------------------------------------
fastapi = pytest.importorskip("fastapi", reason="the [serve] extra is not installed")
from fastapi.testclient import TestClient  # noqa: E402

from minitrans.serve.app import ServerSettings, create_app  # noqa: E402
from minitrans.serve.worker import BatchingWorker, DecodeKey  # noqa: E402


@pytest.fixture(scope="module", params=["native", "auto"])
def translator(request, trained_checkpoint):
    """Each guarantee holds on both engines: the native one and what ``--engine auto`` picks
    (CTranslate2 where it is installed, issue #45)."""
    return Translator.load(trained_checkpoint, request.param, workers=2)  # the default on a 2-thread CPU


def test_5_a_lone_surrogate_is_422_naming_the_item(translator):
    with TestClient(create_app(translator)) as c:
        r = c.post("/v1/translate", content='{"q": ["A dog runs.", "A dog \\ud800 runs."]}',
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and "q[1]" in r.text and "surrogate" in r.text


def test_5_a_failed_batch_fails_only_the_request_at_fault(translator):
    """Jobs gathered into one batch: the batch fails, each is decoded alone, one fails."""
    loop = asyncio.new_event_loop()
    worker = BatchingWorker(translator, ServerSettings(batch_wait_ms=200))
    original = translator.translate_detailed

    def fragile(sentences, **kwargs):
        if "poison" in sentences:
            raise RuntimeError("a bug in decoding")
        return original(sentences, **kwargs)

    translator.translate_detailed = fragile
    try:
        jobs = [worker.submit(q, DecodeKey(1, 1.0), loop) for q in (["The cat eats."], ["poison"], ["The dog."])]
        worker.stop()
    finally:
        del translator.translate_detailed
    loop.run_until_complete(asyncio.sleep(0))
    good, bad, also_good = (job.future for job in jobs)
    assert good.result()[0][0].text and also_good.result()[0][0].text
    assert isinstance(bad.exception(), RuntimeError)
    loop.close()


# -- 6. empty input at the default settings (two workers, beam 5) --------------------------
def test_6_empty_and_blank_input_at_the_defaults(capsys, tmp_path, trained_checkpoint, translator):
    assert translator.engine.workers == 2
    assert translator.translate([]) == [] and translator.translate(["", "  "]) == ["", ""]
    assert translator.translate("") == ""
    code, out, err = run(capsys, "translate", "-m", trained_checkpoint, "--workers", "2", "")
    assert code == 0 and out == "\n", err
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\t\n")
    code, _, err = run(capsys, "translate", "-m", trained_checkpoint, "--workers", "2", "-i", blank, "-o",
                       tmp_path / "out")
    assert code == 0 and (tmp_path / "out").read_text() == "\n\n\n", err
    (tmp_path / "ref").write_text("a\nb\nc\n")
    code, out, err = run(capsys, "evaluate", "-m", trained_checkpoint, "--workers", "2", "--src", blank, "--ref",
                         tmp_path / "ref", "-o", tmp_path / "eval")
    assert code == 0 and json.loads(out)["sentences"] == 3, err
    with TestClient(create_app(translator)) as c:
        for q in ([], [""], "", ["", " "]):
            r = c.post("/v1/translate", json={"q": q})
            assert r.status_code == 200, (q, r.text)
            assert len(r.json()["translations"]) == (1 if isinstance(q, str) else len(q))


# -- 9. attention within bounds --------------------------------------------------------------
def test_9_attention_answers_are_bounded(translator):
    settings = ServerSettings(max_attention_values=20_000)
    with TestClient(create_app(translator, settings)) as c:
        long = " ".join(["The cat eats the bread in the garden."] * 6)
        r = c.post("/v1/translate", json={"q": [long] * 4, "attention": True})
        assert r.status_code == 413 and "max_attention_values" in r.text
        r = c.post("/v1/translate", json={"q": ["The cat eats."], "attention": True})
        assert r.status_code == 200 and r.json()["translations"][0]["attention"]["layers"]
        assert c.post("/v1/translate", json={"q": [long] * 4}).status_code == 200  # without attention: fine


# -- 10. cancellation ----------------------------------------------------------------------
def test_10_timed_out_work_stops_and_does_not_delay_the_next_request(translator, monkeypatch):
    """A heavy request times out (504): its decoding stops at the next decoding batch, and a
    small request after it is answered, not 504 too."""
    batches: list = []
    _slow_search(translator, monkeypatch, 0.05, batches)
    heavy = [e for e, _ in synthetic_pairs(60, seed=9)]  # ~3 s of work
    with TestClient(create_app(translator, ServerSettings(timeout_s=0.5, batch_wait_ms=0))) as c:
        started = time.perf_counter()
        assert c.post("/v1/translate", json={"q": heavy}).status_code == 504
        r = c.post("/v1/translate", json={"q": ["The cat eats."]})
        assert r.status_code == 200, r.text
        assert time.perf_counter() - started < 2.0
    assert len(batches) < 30  # the heavy request stopped well before its 60 batches


def test_10_search_stops_between_batches(translator):
    from minitrans.engines.registry import Cancelled

    sources = [translator.tokenizer.encode([e])[0] + [3] for e, _ in synthetic_pairs(20, seed=1)]
    asked = []

    def stop_after_first() -> bool:
        asked.append(1)
        return len(asked) > 1

    engine = translator.engine
    budget = engine.max_tokens
    engine.max_tokens = 40  # many small batches
    try:
        with pytest.raises(Cancelled):
            engine.search(sources, 2, 1.0, 1, 1.2, 10, should_stop=stop_after_first)
    finally:
        engine.max_tokens = budget


def _slow_search(translator, monkeypatch, seconds: float, counter: list | None = None) -> None:
    """Make each sentence its own slow decoding batch, honouring ``should_stop`` as the engines do."""
    from minitrans.engines.registry import Cancelled

    search = translator.engine.search

    def slow(sources, *args, should_stop=None, **kwargs):
        out = []
        for src in sources:
            if should_stop is not None and should_stop():
                raise Cancelled
            if counter is not None:
                counter.append(1)
            time.sleep(seconds)
            out += search([src], *args, **kwargs)
        return out

    monkeypatch.setattr(translator.engine, "search", slow)


def _live(app, grace: float):
    """uvicorn serving ``app`` on a free loopback port, in a thread: ``(server, thread, url)``."""
    import socket

    import httpx
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           timeout_graceful_shutdown=grace))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            httpx.get(f"{url}/health", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.05)
    return server, thread, url


def test_10_a_client_that_disconnects_stops_its_decoding(translator, monkeypatch):
    import socket

    import httpx

    batches: list = []
    _slow_search(translator, monkeypatch, 0.05, batches)
    server, thread, url = _live(create_app(translator, ServerSettings(batching=False, timeout_s=30)), 5)
    try:
        body = json.dumps({"q": [e for e, _ in synthetic_pairs(60, seed=9)]}).encode()  # ~3 s of work
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as raw:
            raw.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            time.sleep(0.5)
        # The client is gone: the decoding stops and the queue empties, well before 60 batches.
        for _ in range(40):
            if httpx.get(f"{url}/health").json()["pending_sentences"] == 0:
                break
            time.sleep(0.1)
        assert httpx.get(f"{url}/health").json()["pending_sentences"] == 0
        assert len(batches) < 45, len(batches)
    finally:
        server.should_exit = True
        thread.join(30)


# -- 11. shutdown -------------------------------------------------------------------------
@pytest.mark.parametrize("grace", ["default", "too-short"])
def test_11_sigterm_answers_every_request_in_flight(translator, monkeypatch, grace):
    """More work in flight than a fixed grace period covers: with the server's grace period each
    request gets 200 or its own 504, never a 500, and the server exits within timeout + grace.
    The control (a grace period shorter than the work, as uvicorn's fixed 30 s was) shows the
    test can fail: requests are cut off."""
    import httpx

    _slow_search(translator, monkeypatch, 0.2)
    settings = ServerSettings(timeout_s=6.0, batching=False)
    server, thread, url = _live(create_app(translator, settings), settings.grace_s if grace == "default" else 0.5)
    statuses = []

    def post(n):
        try:
            statuses.append(httpx.post(f"{url}/v1/translate", json={"q": ["The cat eats."] * n}, timeout=30).status_code)
        except httpx.HTTPError as err:
            statuses.append(type(err).__name__)

    clients = []
    # In turn: ~0.4 s, ~2 s, ~0.6 s (all well inside timeout_s), then ~12 s, which outlasts it
    # (504 at 6 s, and its decoding stops).
    for n in (2, 10, 3, 60):
        clients.append(threading.Thread(target=post, args=(n,)))
        clients[-1].start()
        time.sleep(0.05)
    time.sleep(0.2)
    started = time.perf_counter()
    server.should_exit = True  # what uvicorn's SIGTERM handler does
    for t in clients:
        t.join(30)
    thread.join(30)
    assert not thread.is_alive()
    if grace == "default":
        assert sorted(statuses) == [200, 200, 200, 504], statuses
        assert time.perf_counter() - started < settings.grace_s + 2
    else:
        assert sorted(map(str, statuses)) != ["200", "200", "200", "504"], statuses


# -- the contract --------------------------------------------------------------------------
@pytest.mark.parametrize("body, words", [
    ({"q": "a", "alpha": True}, "alpha"), ({"q": "a", "beam": True}, "beam"), ({"q": "a", "colour": 1}, "colour"),
    ({"q": "a", "attention": "yes"}, "attention"), ({"q": "a", "beam": 2.5}, "beam"), ({"q": "a", "beam": "2"}, "beam"),
])
def test_contract_types_are_strict_and_unknown_keys_refused(translator, body, words):
    with TestClient(create_app(translator)) as c:
        r = c.post("/v1/translate", json=body)
    assert r.status_code == 422 and words in r.text


def test_contract_the_schema_declares_every_answer(translator):
    with TestClient(create_app(translator, ServerSettings(max_sentences=8, max_chars=100))) as c:
        schema = c.get("/openapi.json").json()
    operation = schema["paths"]["/v1/translate"]["post"]
    assert {"200", "400", "413", "422", "503", "504"} <= set(operation["responses"])
    assert operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("TranslateResponse")
    body = schema["components"]["schemas"]["TranslateRequest"]
    beams, pairs = body["allOf"]
    assert body["additionalProperties"] is False and len(beams["anyOf"]) == 17  # nbest <= beam
    assert pairs["anyOf"] == [{"properties": {"source": {"enum": ["en", None]}, "target": {"enum": ["fr", None]}}}]
    q = {o["type"]: o for o in body["properties"]["q"]["anyOf"]}
    # A text may hold many sentences: its length is bounded by the request's characters (8 x 100);
    # the sentence limits are counted after splitting (tests/serve/test_limits.py).
    assert q["array"]["maxItems"] == 8 and q["string"]["maxLength"] == 800
    assert q["array"]["items"]["maxLength"] == 800


