"""LibreTranslate-compatible endpoints, beside ``/v1``: the API that libretranslatepy, the
Discourse and Nextcloud integrations and LibreTranslate's own clients speak.

``POST /translate``, ``GET /languages``, ``POST /detect`` and ``GET /frontend/settings``, with
LibreTranslate's parameters (from a JSON body, or from the query string and form fields merged,
urlencoded or multipart) and its error shape, ``{"error": "..."}`` (400 for bad input, 503 with
``Retry-After`` when the queue is full, 504 past the server's timeout); never FastAPI's 422
shape. Decoding goes through the server's batching worker (its limits, batching, cancellation
and shutdown apply), texts are split into sentences and put back like ``/v1``'s, and
``format=html`` keeps the markup (:mod:`minitrans.formats.html`). Unlike LibreTranslate, the
output is not rewritten: no final punctuation copied from the source, no lower-casing, no HTML
unescaping in text mode. Limits count sentences after splitting, as on ``/v1``
(:mod:`minitrans.serve.limits`): a page's sentences and attribute texts count; over a limit
counted in sentences is 413, as on ``/v1`` (LibreTranslate's own character limit stays 400),
and one deadline (``--timeout``) covers the whole
request, however many texts it holds. ``api_key`` is accepted and ignored unless keys are
configured (``minitrans serve --api-keys FILE``): then the server's guard
(:mod:`minitrans.serve.guard`) answers a request without one 400 and a wrong one 403, as
LibreTranslate does, before the route reads it.
Language detection (``source=auto``, ``/detect``) is ``py3langid`` restricted to the languages
the server knows.
"""

from __future__ import annotations

import asyncio
import json
from functools import lru_cache
from typing import Any, Awaitable, Callable

from minitrans.errors import MinitransError
from minitrans.text.languages import name
from minitrans.serve.limits import LimitExceeded, check_pieces, count
from minitrans.serve.settings import ServerSettings

#: LibreTranslate's bound on ``alternatives`` (its own API's; a request gets ``alternatives + 1``
#: hypotheses, so the beam is raised to fit them).
MAX_ALTERNATIVES = 15
#: decode(texts, beam, nbest, request, (source, target), weight, deadline) -> one Translation per
#: text, through the worker of that direction; ``weight`` is the sentences counted, ``deadline``
#: the loop time by which the whole request must be answered.
Decode = Callable[[list[str], int, int, Any, tuple[str, str], int, float], Awaitable[list]]
#: The routes whose clients send ``api_key`` as a parameter (the guard reads it there).
KEY_IN_BODY = frozenset({"/translate", "/detect"})


class LibreTranslateError(Exception):
    """An answer of LibreTranslate's shape: ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


@lru_cache(maxsize=None)
def _identifier(languages: tuple[str, ...]):
    import os

    import py3langid
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_modelpath(os.path.join(os.path.dirname(py3langid.__file__), MODEL_FILE),
                                                   norm_probs=True)
    identifier.set_languages(list(languages))
    return identifier


def detect(text: str, languages: tuple[str, ...]) -> list[dict[str, Any]]:
    """LibreTranslate's detection answer: candidates, best first, confidence in percent."""
    if len(languages) == 1:
        return [{"confidence": 100.0, "language": languages[0]}]
    ranked = _identifier(languages).rank(text)
    return [{"confidence": round(100 * float(p), 1), "language": lang} for lang, p in ranked]


def request_body(sources: list[str], targets: list[str], char_limit: int, max_texts: int,
                 with_languages: bool = True) -> dict:
    """The OpenAPI ``requestBody`` of a route: what it accepts, stated so that clients and
    schemathesis (``tests/contracts/test_api_fuzz.py``) know it. Unknown fields are accepted and ignored,
    as LibreTranslate does."""
    text = {"type": "string", "minLength": 1, "maxLength": char_limit}
    q = {"anyOf": [text, {"type": "array", "maxItems": max_texts, "items": {"type": "string", "maxLength": char_limit}}],
         "description": "a text, or a list of texts (answers in the same shape)"}
    fields: dict[str, Any] = {"q": q, "api_key": {"type": "string",
                                                  "description": "ignored unless the server has keys (--api-keys)"}}
    if with_languages:
        fields.update({
            "source": {"type": "string", "enum": sources,
                       "description": "a source language, or auto: detect it (400 when the text is in a language "
                                      "no served direction translates into the target)"},
            "target": {"type": "string", "enum": targets},
            "format": {"type": "string", "enum": ["text", "html"], "default": "text"},
            "alternatives": {"type": "integer", "minimum": 0, "maximum": MAX_ALTERNATIVES, "default": 0,
                             "description": "n further translations of each text"}})
    required = ["q", "source", "target"] if with_languages else ["q"]
    form = {**fields, "q": text}
    if "alternatives" in form:
        form["alternatives"] = {"type": "integer", "minimum": 0, "maximum": MAX_ALTERNATIVES}
    return {"required": True, "content": {
        "application/json": {"schema": {"type": "object", "properties": fields, "required": required}},
        "application/x-www-form-urlencoded": {"schema": {"type": "object", "properties": form,
                                                         "required": required}}}}


async def parameters(request) -> dict[str, Any]:
    """The request's parameters: a JSON body, or the query string and form fields merged."""
    params: dict[str, Any] = dict(request.query_params)
    if request.method == "GET":
        return params
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        body = await request.body()
        try:
            data = json.loads(body) if body.strip() else {}
        except (ValueError, UnicodeDecodeError) as err:
            raise LibreTranslateError(400, f"Invalid JSON: {err}") from None
        if not isinstance(data, dict):
            raise LibreTranslateError(400, "Invalid request: the JSON body must be an object")
        for key in ("source", "target", "format", "api_key"):  # JSON says its types: hold it to them
            if key in data and not isinstance(data[key], str):
                raise LibreTranslateError(400, f"Invalid request: {key} must be a string")
        n = data.get("alternatives", 0)
        if isinstance(n, bool) or not (isinstance(n, int) or isinstance(n, float) and n.is_integer()):
            raise LibreTranslateError(400, "Invalid request: alternatives must be a whole number")  # 2.0 is one
        if "alternatives" in data:
            data["alternatives"] = int(n)
        params.update(data)
    elif kind in ("application/x-www-form-urlencoded", "multipart/form-data"):
        try:
            form = await request.form()
        except Exception as err:  # a malformed multipart body
            raise LibreTranslateError(400, f"Invalid request: cannot read the form ({err})") from None
        params.update({k: v for k, v in form.items() if isinstance(v, str)})
    return params


#: What the routes may answer besides 200, as ``/openapi.json`` declares it.
ERRORS = {400: {"description": "bad input, over the character limit, or no API key when keys are configured: "
                               "{\"error\": \"...\"}"},
          403: {"description": "a wrong API key (when keys are configured)"},
          408: {"description": "the request body did not arrive in time"},
          413: {"description": "over a limit counted in sentences (max_sentences, max_chars per sentence, "
                               "max_queue), or a body over its size limit"},
          503: {"description": "the queue is full; retry after Retry-After seconds"},
          504: {"description": "no answer within the server's timeout"}}


def add_routes(app, directions: list[tuple[str, str]], settings: ServerSettings, decode: Decode) -> None:
    """Register the LibreTranslate routes on ``app`` for the served ``directions``
    (``(source, target)`` pairs, one model each), with ``settings``' limits and beam."""
    api = Api(directions, settings, decode)
    body = request_body(api.sources, api.targets, settings.max_request_chars, settings.max_sentences)
    detect_body = request_body(api.sources, api.targets, settings.max_request_chars, settings.max_sentences, False)
    app.post("/translate", responses=ERRORS, tags=["LibreTranslate"],
             openapi_extra={"requestBody": body})(_answer(api.translate))
    app.get("/languages", tags=["LibreTranslate"])(_answer(api.languages))
    app.post("/detect", responses=ERRORS, tags=["LibreTranslate"],
             openapi_extra={"requestBody": detect_body})(_answer(api.detect_route))
    app.get("/frontend/settings", tags=["LibreTranslate"])(_answer(api.frontend_settings))


def _answer(handler):
    """A route of ``handler(request)``: its LibreTranslateError becomes LibreTranslate's
    ``{"error": ...}`` answer with the error's status and headers."""
    from fastapi import Request
    from fastapi.responses import JSONResponse

    async def run(request: Request):
        try:
            return await handler(request)
        except LibreTranslateError as err:
            return JSONResponse({"error": err.message}, status_code=err.status, headers=err.headers)
    run.__name__, run.__doc__ = handler.__name__, handler.__doc__
    run.__annotations__ = {"request": Request}  # the class itself: FastAPI reads it to pass the request
    return run


class Api:
    """LibreTranslate's routes over the served ``directions``: what they share (the languages,
    the settings' limits and beam, the batching worker's ``decode``) and one method per route."""

    def __init__(self, directions: list[tuple[str, str]], settings: ServerSettings, decode: Decode) -> None:
        self.directions, self.settings, self.decode = directions, settings, decode
        self.known = tuple(sorted({lang for pair in directions for lang in pair}))
        self.sources = sorted({s for s, _ in directions})
        self.targets = sorted({t for _, t in directions})
        self.served = ", ".join(f"{s} to {t}" for s, t in directions)

    # -- the request's parts, each checked with LibreTranslate's 400 ---------------------------
    def texts_of(self, params: dict[str, Any]) -> tuple[list[str], bool]:
        """``(texts, whether q was one string)`` of the request's ``q``."""
        q = params.get("q")
        if q is None or q == "":
            raise LibreTranslateError(400, "Invalid request: missing q parameter")
        single = isinstance(q, str)
        texts = [q] if single else q
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise LibreTranslateError(400, "Invalid request: q must be a string or a list of strings")
        max_texts, char_limit = self.settings.max_sentences, self.settings.max_request_chars
        if len(texts) > max_texts:
            raise LibreTranslateError(400, f"Invalid request: {len(texts)} texts; the limit is {max_texts} "
                                           "(max_sentences)")
        total = sum(len(text) for text in texts)
        if total > char_limit:
            raise LibreTranslateError(400, f"Invalid request: request ({total}) exceeds text limit ({char_limit})")
        for text in texts:
            if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
                raise LibreTranslateError(400, "Invalid request: q holds an unpaired surrogate (invalid Unicode)")
        return texts, single

    @staticmethod
    def format_of(params: dict[str, Any]) -> str:
        fmt = str(params.get("format", "text")).lower()
        if fmt not in ("text", "html"):
            raise LibreTranslateError(400, f"Invalid request: format {fmt!r}; use text or html")
        return fmt

    @staticmethod
    def alternatives_of(params: dict[str, Any]) -> int:
        try:
            alternatives = int(params.get("alternatives", 0) or 0)
        except (TypeError, ValueError):
            raise LibreTranslateError(400, "Invalid request: alternatives must be a whole number") from None
        if not 0 <= alternatives <= MAX_ALTERNATIVES:
            raise LibreTranslateError(400, f"Invalid request: alternatives must be between 0 and {MAX_ALTERNATIVES}")
        return alternatives

    def direction_of(self, params: dict[str, Any], texts: list[str]) -> tuple[tuple[str, str], list | None]:
        """``((source, target), the detected languages or None)``: ``source`` may be ``auto``."""
        src, tgt = str(params.get("source", "")).lower(), str(params.get("target", "")).lower()
        detected = None
        if src == "auto":
            detected = [detect(t, self.known)[0] for t in texts]
            found = sorted({d["language"] for d in detected})
            if len(found) > 1:
                raise LibreTranslateError(400, f"the texts are in different languages ({', '.join(found)}); send "
                                               "one request per source language")
            src = found[0] if found else self.sources[0]
            if (src, tgt) not in self.directions:
                raise LibreTranslateError(400, f"{name(src)} ({src}) was detected; this server translates "
                                               f"{self.served}")
        elif src not in self.sources:
            raise LibreTranslateError(400, f"{src or 'source'} is not supported: this server translates {self.served} "
                                           f"(source={' or '.join(self.sources)} or auto)")
        if (src, tgt) not in self.directions:
            raise LibreTranslateError(400, f"{tgt or 'target'} is not supported as a target for {src}: this server "
                                           f"translates {self.served}")
        return (src, tgt), detected

    @staticmethod
    def limit_error(err: LimitExceeded) -> LibreTranslateError:
        # Over a limit no JSON Schema can state (sentences after splitting): the request as it is
        # can never be answered, so 413 as on /v1 (LibreTranslate's own character limit stays 400).
        return LibreTranslateError(413, f"Invalid request: {err}")

    # -- the routes --------------------------------------------------------------------------
    async def translate(self, request):
        """LibreTranslate's translate: q, source (or auto), target, format, alternatives, api_key."""
        params = await parameters(request)
        texts, single = self.texts_of(params)
        fmt, alternatives = self.format_of(params), self.alternatives_of(params)
        pair, detected = self.direction_of(params, texts)
        nbest = alternatives + 1
        beam = max(self.settings.beam, nbest)
        deadline = asyncio.get_running_loop().time() + self.settings.timeout_s  # one for the whole request
        if fmt == "html":
            counted = [0]  # the request's pages count together
            out = await asyncio.gather(*(self.translate_page(text, beam, request, pair, deadline, counted)
                                         for text in texts))
            alts: list[list[str]] = [[] for _ in texts]
        else:
            try:
                weight = count(texts, self.settings, pair[0])
            except LimitExceeded as err:
                raise self.limit_error(err) from None
            results = await self.decode(texts, beam, nbest, request, pair, weight, deadline)
            out = [r.text for r in results]
            alts = [[text for text, _ in r.nbest[1:nbest]] for r in results]
        body: dict[str, Any] = {"translatedText": out[0] if single else out}
        if alternatives:
            body["alternatives"] = alts[0] if single else alts
        if detected is not None:
            body["detectedLanguage"] = detected[0] if single else detected
        return body

    async def translate_page(self, page: str, beam: int, request, pair: tuple[str, str], deadline: float,
                             counted: list[int]) -> str:
        """One ``format=html`` text: its sentences and attribute texts counted against the
        limits (``counted``: the request's so far), translated in one job, the markup kept; a
        page that cannot be read is 400."""
        from minitrans.formats import translate_document

        loop = asyncio.get_running_loop()

        def translate_texts(pieces: list[str]) -> list[str]:  # called from the thread below
            try:
                counted[0] = check_pieces(pieces, self.settings, counted[0])
            except LimitExceeded as err:
                raise self.limit_error(err) from None
            job = self.decode(pieces, beam, 1, request, pair, len(pieces), deadline)
            return [r.text for r in asyncio.run_coroutine_threadsafe(job, loop).result()]

        try:
            return await asyncio.to_thread(translate_document, "html", page, translate_texts, pair[0])
        except MinitransError as err:  # a page the HTML reader refuses, in one line
            raise LibreTranslateError(400, f"Invalid request: {' '.join(str(err).split())}") from None

    async def languages(self, request):
        """The languages this server knows, each with the targets it translates it into."""
        return [{"code": lang, "name": name(lang), "targets": [t for s, t in self.directions if s == lang]}
                for lang in sorted(self.known, key=lambda lang: (lang not in self.sources, lang))]

    async def detect_route(self, request):
        """The language of q among those this server knows, with a confidence in percent."""
        params = await parameters(request)
        texts, single = self.texts_of(params)
        found = [detect(text, self.known) for text in texts]
        return found[0] if single else found

    async def frontend_settings(self, request):
        """What LibreTranslate's front ends read before they show their page (the default direction)."""
        source, target = self.directions[0]
        keys = bool(self.settings.api_keys)
        limits = self.settings
        return {"charLimit": limits.max_request_chars, "frontendTimeout": 500, "apiKeys": keys,
                # minitrans's own: what one /v1 request may hold, so a page splits long input within it
                "limits": {"maxSentences": min(limits.max_sentences, limits.max_queue), "maxChars": limits.max_chars,
                           "maxRequestChars": limits.max_request_chars},
                "keyRequired": keys, "suggestions": False, "filesTranslation": False, "supportedFilesFormat": [],
                "language": {"source": {"code": source, "name": name(source)},
                             "target": {"code": target, "name": name(target)}}}

