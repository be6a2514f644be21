"""The LibreTranslate-compatible endpoints (issue #27, item 2), checked with the real client.

* ``libretranslatepy`` (installed from the registry, written by nobody on this project) against a
  running ``minitrans serve``: translate, detect, languages.
* Parameters from JSON, urlencoded forms, multipart forms and the query string; lists, ``auto``,
  ``alternatives``, ``format=html`` (markup kept, through the same code as ``translate -i
  page.html``); every error in LibreTranslate's ``{"error": ...}`` shape with 400, never 422.
* No output rewriting: the answer is the ``/v1`` translation of the same text.
* CORS headers only when ``cors_origins`` is set.
"""

from __future__ import annotations

import pytest

from conftest import needs_chromium, served_page, start_server

pytest.importorskip("fastapi")
libretranslatepy = pytest.importorskip("libretranslatepy")

from fastapi.testclient import TestClient  # noqa: E402

from minitrans.serve.app import create_app  # noqa: E402
from minitrans.serve.settings import ServerSettings  # noqa: E402


@pytest.fixture(scope="module")
def translator(trained_checkpoint):
    from minitrans import Translator

    return Translator.from_checkpoint(trained_checkpoint)


@pytest.fixture(scope="module")
def client(translator):
    with TestClient(create_app(translator, ServerSettings(beam=2))) as c:
        yield c


def v1(client, text, **extra):
    return client.post("/v1/translate", json={"q": text, **extra}).json()["translations"][0]


def test_the_real_client_translates_detects_and_lists(trained_checkpoint):
    proc, url = start_server(trained_checkpoint, "--beam", "2")
    try:
        api = libretranslatepy.LibreTranslateAPI(url)
        out = api.translate("The cat eats the bread. The dog sees a book.", "en", "fr")
        assert isinstance(out, str) and out.strip()
        assert api.translate("The cat eats the bread.", "auto", "fr").strip()
        assert api.languages()[0] == {"code": "en", "name": "English", "targets": ["fr"]}
        found = api.detect("Le chat mange le pain et le chien regarde un livre.")
        assert found[0]["language"] == "fr" and 50 < found[0]["confidence"] <= 100
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_parameters_come_from_json_forms_and_the_query(client):
    text = "The cat eats the bread. The dog sees a book."
    expected = v1(client, text)["translation"]
    answers = [
        client.post("/translate", json={"q": text, "source": "en", "target": "fr"}),
        client.post("/translate", data={"q": text, "source": "en", "target": "fr", "api_key": "ignored"}),
        client.post("/translate", files={"q": (None, text), "source": (None, "en"), "target": (None, "fr")}),
        client.post("/translate?source=en&target=fr", data={"q": text}),
    ]
    assert [a.status_code for a in answers] == [200] * 4
    assert all(a.json() == {"translatedText": expected} for a in answers)  # not rewritten


def test_lists_alternatives_auto_and_html(client):
    body = client.post("/translate", json={"q": ["The cat eats.", "The dog sees a book."], "source": "auto",
                                           "target": "fr", "alternatives": 2}).json()
    assert len(body["translatedText"]) == 2 and [len(a) for a in body["alternatives"]] == [2, 2]
    assert [d["language"] for d in body["detectedLanguage"]] == ["en", "en"]
    assert body["translatedText"][0] == v1(client, "The cat eats.", beam=3, nbest=3)["translation"]
    page = '<p class="x">The <b>cat</b> eats the bread.</p><pre>keep  me</pre>'
    out = client.post("/translate", json={"q": page, "source": "en", "target": "fr", "format": "html"}).json()
    assert out["translatedText"].startswith('<p class="x">') and "<b>" in out["translatedText"]
    assert out["translatedText"].endswith("</p><pre>keep  me</pre>")
    plain = client.post("/translate", json={"q": "a &amp; b", "source": "en", "target": "fr"}).json()
    assert plain["translatedText"] == v1(client, "a &amp; b")["translation"]  # text mode: no unescaping


@pytest.mark.parametrize("request_kwargs, says", [
    ({"json": {"source": "en", "target": "fr"}}, "missing q"),
    ({"data": {"q": "", "source": "en", "target": "fr"}}, "missing q"),
    ({"content": b"{not json", "headers": {"content-type": "application/json"}}, "Invalid JSON"),
    ({"json": ["a list"]}, "must be an object"),
    ({"json": {"q": 3, "source": "en", "target": "fr"}}, "q must be"),
    ({"json": {"q": "x", "source": "de", "target": "fr"}}, "de is not supported"),
    ({"json": {"q": "x", "source": "en", "target": "es"}}, "es is not supported"),
    ({"json": {"q": ["x. " * 700] * 64, "source": "en", "target": "fr"}}, "exceeds text limit (128000)"),
    ({"json": {"q": "x", "source": "en", "target": "fr", "format": "pdf"}}, "format"),
    ({"json": {"q": "x", "source": "en", "target": "fr", "alternatives": "many"}}, "alternatives"),
    ({"json": {"q": "Le chat mange le pain tous les matins.", "source": "auto", "target": "fr"}}, "was detected"),
])
def test_errors_are_libretranslates_shape(client, request_kwargs, says):
    answer = client.post("/translate", **request_kwargs)
    assert answer.status_code == 400 and set(answer.json()) == {"error"} and says in answer.json()["error"], \
        answer.text


def test_a_request_over_the_sentence_limit_is_413_in_libretranslates_shape(client):
    """Sentences are counted after splitting, which no schema can state: 413, as on /v1."""
    answer = client.post("/translate", json={"q": "The cat eats. " * 65, "source": "en", "target": "fr"})
    assert answer.status_code == 413 and set(answer.json()) == {"error"}
    assert "65 sentences after splitting" in answer.json()["error"]


@pytest.mark.parametrize("page", ['<p>Go <a href="/x" title="Home">home</a>.</p>', "<![x]>Hello there.", "<![ ",
                                  "</>Hello.", "<p>Open <!-- never closed <p>Hidden.</p>", "<abbr title=x>UN</abbr>"])
def test_real_world_html_is_translated_never_500(client, page):
    """Issue #42, items 11–13: the pages that crashed the translator."""
    r = client.post("/translate", json={"q": page, "source": "en", "target": "fr", "format": "html"})
    assert r.status_code == 200, r.text
    if "<!--" in page:
        assert r.json()["translatedText"].endswith("<!-- never closed <p>Hidden.</p>")


def test_a_page_the_formats_refuse_is_400(translator, monkeypatch):
    from minitrans import formats
    from minitrans.errors import DataError

    def refuse(*args, **kwargs):
        raise DataError("line 3: cannot read this page")

    monkeypatch.setattr(formats, "translate_document", refuse)  # read when the routes are made
    with TestClient(create_app(translator)) as fresh:
        r = fresh.post("/translate", json={"q": "<p>x</p>", "source": "en", "target": "fr", "format": "html"})
    assert r.status_code == 400 and r.json() == {"error": "Invalid request: line 3: cannot read this page"}


def test_frontend_settings_and_cors_only_when_asked(translator, client):
    settings = client.get("/frontend/settings").json()
    assert settings["charLimit"] == 64 * 2000 and settings["language"]["target"]["code"] == "fr"  # a request's
    headers = {"Origin": "http://example.org"}
    assert "access-control-allow-origin" not in client.get("/languages", headers=headers).headers
    with TestClient(create_app(translator, ServerSettings(cors_origins=("http://example.org",)))) as c:
        assert c.get("/languages", headers=headers).headers["access-control-allow-origin"] == "http://example.org"


def test_api_keys_gate_both_apis_as_libretranslate_does(translator, trained_checkpoint, tmp_path):
    settings = ServerSettings(api_keys=("k-one", "k-two"))
    with TestClient(create_app(translator, settings)) as c:
        body = {"q": "The cat eats the bread.", "source": "en", "target": "fr"}
        missing = c.post("/translate", json=body)
        assert missing.status_code == 400 and missing.json() == {
            "error": "Please contact the server operator to get an API key"}
        wrong = c.post("/translate", json={**body, "api_key": "k-three"})
        assert wrong.status_code == 403 and wrong.json() == {"error": "Invalid API key"}
        assert c.post("/translate", data={**body, "api_key": "k-two"}).status_code == 200  # a form field too
        assert c.post("/detect", json={"q": "Le chat."}).status_code == 400
        settings_page = c.get("/frontend/settings").json()
        assert settings_page["apiKeys"] is True and settings_page["keyRequired"] is True
        assert c.get("/languages").status_code == 200  # what the server offers stays public
        assert c.post("/v1/translate", json={"q": "The cat."}).status_code == 401
        assert c.post("/v1/translate", json={"q": "The cat."}, headers={"X-API-Key": "nope"}).status_code == 403
        assert c.post("/v1/translate", json={"q": "The cat."}, headers={"X-API-Key": "k-one"}).status_code == 200
    keys = tmp_path / "keys.txt"
    keys.write_text("# one key per line\nsecret-key\n\n")
    proc, url = start_server(trained_checkpoint, "--api-keys", keys)
    try:
        assert libretranslatepy.LibreTranslateAPI(url, api_key="secret-key").translate(
            "The cat eats the bread.", "en", "fr").strip()
        with pytest.raises(Exception, match="403"):  # the client raises urllib's HTTPError
            libretranslatepy.LibreTranslateAPI(url, api_key="guess").translate("The cat.", "en", "fr")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_an_api_keys_file_must_hold_a_key(tmp_path):
    from minitrans.errors import UsageError
    from minitrans.serve.settings import read_api_keys

    (tmp_path / "empty.txt").write_text("# nothing\n\n")
    with pytest.raises(UsageError, match="holds no key"):
        read_api_keys(str(tmp_path / "empty.txt"))
    with pytest.raises(UsageError, match="no such file"):
        read_api_keys(str(tmp_path / "missing.txt"))


@needs_chromium
def test_the_page_asks_for_a_key_when_the_server_has_keys(trained_checkpoint, tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("page-key\n")
    with served_page(trained_checkpoint, "--api-keys", keys, "--beam", "1") as page:
        page.wait_for_selector("#api-key", state="visible")
        page.fill("#source", "The cat eats the bread.")
        page.click("#translate")
        page.wait_for_selector("#error:not([hidden])")
        assert "401" in page.inner_text("#error")
        page.fill("#api-key", "page-key")
        page.click("#translate")
        page.wait_for_selector("#results > li .best")
        assert page.inner_text("#results > li .best").strip()
