"""``minitrans serve``: a translation HTTP API and a web page over one :class:`Translator`
per direction (``-m en-fr.ckpt -m fr-en.ckpt``: requests are routed by language pair).

Decoding is CPU-bound and a model is not thread-safe, so one worker thread owns each model and
gathers concurrent requests into batches (:mod:`minitrans.serve.worker`). Input normalisation,
tokenisation and detokenisation are the Translator's, exactly as on the command line.

The guards come first, on every route by construction (:mod:`minitrans.serve.guard`): API
keys from the headers before a body is read, a request body's size and read time, a deadline
for each request's headers and a cap on open connections. Limits answer with clear errors:
too many sentences (counted after splitting) or characters, more sentences than the queue can
ever hold, or attention weights over the response budget (413, naming what was counted;
:mod:`minitrans.serve.limits`);
invalid parameters, unknown keys and text that is not valid Unicode (422, naming the field,
FastAPI's own validation); a full queue (503 with ``Retry-After``); a request that waited too
long (504). Every accepted request gets exactly one result per input sentence, in order.
Every answer is declared in ``/openapi.json`` (tested with schemathesis against a live server).

Isolation and cancellation: when a gathered batch fails, its requests are decoded again one
by one, so only the request at fault fails; a request that timed out or whose client went
away is dropped from the queue, and its decoding stops at the next decoding batch. At
shutdown (SIGINT/SIGTERM) every request in flight is answered — translated, or 504 once its
own ``timeout_s`` runs out — because the grace period is longer than ``timeout_s``.

This module is inference code: importing it imports neither Lightning nor anything of
training (tested).
"""

# No `from __future__ import annotations`: FastAPI reads the request model's annotation at run time.
import asyncio
import contextlib
import logging
import math
import time
from importlib import resources
from typing import Any

from minitrans._version import __version__
from minitrans.text import languages
from minitrans.text import segment
from minitrans.serve import limits as server_limits
from minitrans.checkpoint import published
from minitrans.errors import UsageError
from minitrans.serve.settings import ServerSettings
from minitrans.serve.worker import BatchingWorker, DecodeKey, QueueFull
from minitrans.translate import Translation, Translator

log = logging.getLogger(__name__)


def _attention_json(t: Translation) -> dict[str, Any]:
    weights = t.attention.float()  # (layers, heads, T, S)
    rounded = (weights * 10000).round() / 10000
    return {"src_pieces": t.src_pieces, "tgt_pieces": t.tgt_pieces,
            "layers": rounded.tolist(), "mean": ((weights.mean(1) * 10000).round() / 10000).tolist()}


def _translation_json(t: Translation, attention: bool, text: bool = True) -> dict[str, Any]:
    out = {"source": t.source, "translation": t.text, "score": _finite(t.score),
           "nbest": [{"translation": text, "score": _finite(score)} for text, score in t.nbest],
           "truncated": t.truncated, "confidence": t.confidence, "low_confidence": t.low_confidence}
    if attention and t.attention is not None:
        out["attention"] = _attention_json(t)
    elif attention and (not text or not t.sentences):  # an empty input: nothing was decoded
        out["attention"] = {"src_pieces": [], "tgt_pieces": [], "layers": [], "mean": []}
    if text and t.sentences:
        out["sentences"] = [_translation_json(s, attention, text=False) for s in t.sentences]
    return out


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def model_info(translator: Translator, meta: dict) -> dict[str, Any]:
    """What ``GET /v1/model`` reports (and ``GET /v1/models`` for each model)."""
    public = published(meta, ("data", "averaged_from", "adapted"))  # no path of this machine, no user's text
    data = public.get("data", {})
    source, target = translator.languages
    return {"minitrans_version": __version__, "checkpoint_version": meta.get("version"),
            "source_language": source, "target_language": target,
            "engine": translator.engine.name, "model_config": translator.config.to_dict(),
            "parameters": translator.engine.parameter_count(),
            "vocab_size": translator.tokenizer.vocab_size,
            "training_data": {k: data.get(k) for k in ("dataset", "corpora", "vocab_size") if k in data},
            "validation": meta.get("validation"), "averaged_from": public.get("averaged_from"),
            "adapted": public.get("adapted"),
            "decoding": {"engine": translator.engine.name, "engine_reason": translator.engine_reason,
                         "attention": translator.attention_available,
                         "max_len_a": translator.max_len_a, "max_len_b": translator.max_len_b,
                         "bf16": translator.bf16, "precision": translator.precision,
                         "shortlist": translator.shortlist,
                         "workers": translator.engine.workers}}


class Service:
    """What every route shares: the translators by direction (the first is the default), their
    model cards (``/v1/models``), the settings and, while the app runs, one batching worker per
    direction, started and stopped by the app's lifespan."""

    def __init__(self, translators, settings: ServerSettings) -> None:
        self.settings = settings
        self.models = by_direction(translators)
        self.directions = list(self.models)
        self.infos = {pair: model_info(t, t.meta) for pair, t in self.models.items()}
        self.workers: dict[tuple[str, str], BatchingWorker] | None = None  # None: not started yet

    @contextlib.asynccontextmanager
    async def lifespan(self, app):
        from minitrans.serve.guard import quiet_repeats

        quiet_repeats(asyncio.get_running_loop())
        self.workers = {pair: BatchingWorker(t, self.settings) for pair, t in self.models.items()}
        try:
            yield
        finally:  # graceful shutdown: queued and decoding requests finish first
            loop = asyncio.get_running_loop()
            await asyncio.gather(*(loop.run_in_executor(None, w.stop) for w in self.workers.values()))

    async def run_job(self, texts: list[str], key: DecodeKey, request, pair: tuple[str, str], weight: int,
                      deadline: float | None = None) -> tuple[list[Translation], int]:
        """Texts through the batching worker of direction ``pair``: ``(translations,
        batched_with)``, or the HTTPException of a full queue (503), a timeout (504, at
        ``deadline`` on the loop's clock: one per request, however many jobs it makes) or a
        client gone (499)."""
        from fastapi import HTTPException

        worker = self.workers[pair]
        try:
            job = worker.submit(texts, key, asyncio.get_running_loop(), weight)
        except QueueFull:
            raise HTTPException(503, f"the server is busy ({worker.pending} sentences queued; max_queue "
                                     f"{self.settings.max_queue}); retry shortly.",
                                headers={"Retry-After": "1"}) from None
        loop = asyncio.get_running_loop()
        timeout_s = self.settings.timeout_s
        outcome = await _answer(job, request, timeout_s,
                                (deadline if deadline is not None else loop.time() + timeout_s) - loop.time())
        if outcome is None:  # the client went away: nobody reads this
            raise HTTPException(499, "client closed the request")
        return outcome

    async def decode(self, texts: list[str], beam: int, nbest: int, request, pair: tuple[str, str], weight: int,
                     deadline: float | None = None) -> list[Translation]:
        """:meth:`run_job` for LibreTranslate's routes, in their error shape."""
        from fastapi import HTTPException

        from minitrans.serve import libretranslate

        key = DecodeKey(beam, self.settings.alpha, nbest)
        try:
            return (await self.run_job(texts, key, request, pair, weight, deadline))[0]
        except HTTPException as err:
            raise libretranslate.LibreTranslateError(err.status_code, str(err.detail), err.headers) from None


def create_app(translators, settings: ServerSettings | None = None):
    """The FastAPI application: the API, the page and its static files, over a Translator or
    a list of Translators of different directions (the first is the default direction),
    behind :class:`~minitrans.serve.guard.RequestGuard` (keys and body limits on every route)."""
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError
    from fastapi.staticfiles import StaticFiles

    from minitrans.serve import libretranslate
    from minitrans.serve.guard import RequestGuard

    settings = settings or ServerSettings()
    service = Service(translators, settings)
    served = ", ".join(f"{languages.name(s)}→{languages.name(t)}" for s, t in service.directions)
    app = FastAPI(title="minitrans", version=__version__, lifespan=service.lifespan,
                  docs_url=None, redoc_url=None,  # their pages load assets from a CDN
                  description=f"{served} translation with a Transformer built from its parts.")
    app.add_exception_handler(RequestValidationError, _invalid_request)
    static = resources.files("minitrans.serve") / "static"
    app.mount("/static", StaticFiles(directory=str(static)), name="static")
    _add_page_and_model_routes(app, service, static)
    libretranslate.add_routes(app, service.directions, settings, service.decode)
    # The guard wraps every route: none runs before its checks. CORS, added after it, wraps it in
    # turn, so that a browser can read the guard's answers and preflights need no key.
    app.add_middleware(RequestGuard, settings=settings, key_in_body=libretranslate.KEY_IN_BODY)
    if settings.cors_origins:  # opt-in: the server binds loopback by default
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["*"])
    _add_translate_route(app, service)
    return app


async def _invalid_request(request, exc):
    """422 naming each field and reason. FastAPI's default echoes the offending input, which fails
    to encode when it is NaN or huge; the field and the reason are what a client needs."""
    from fastapi.responses import JSONResponse

    detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
              for e in exc.errors()]
    return JSONResponse({"detail": detail}, status_code=422)


def _add_page_and_model_routes(app, service: Service, static) -> None:
    """``/`` (the page), ``/health``, ``/v1/model`` and ``/v1/models``."""
    from fastapi.responses import HTMLResponse, JSONResponse

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> str:
        return (static / "index.html").read_text(encoding="utf-8")

    @app.get("/health")
    def health():
        if service.workers is None:
            return JSONResponse({"status": "starting"}, status_code=503)
        return {"status": "ok", "pending_sentences": sum(w.pending for w in service.workers.values())}

    @app.get("/v1/model")
    def model() -> dict[str, Any]:
        """The default direction's model."""
        return service.infos[service.directions[0]]

    @app.get("/v1/models")
    def all_models() -> dict[str, Any]:
        """Every served model, one per direction, the default first."""
        return {"models": list(service.infos.values())}


def _add_translate_route(app, service: Service) -> None:
    """``POST /v1/translate``, its request model made for this server's limits and directions."""
    from fastapi import HTTPException, Request

    from minitrans.serve.schema import ERROR_RESPONSES, request_model, response_models

    settings = service.settings
    TranslateRequest = request_model(settings, service.directions)
    TranslateResponse = response_models()

    @app.post("/v1/translate", response_model=TranslateResponse, response_model_exclude_unset=True,
              responses=ERROR_RESPONSES)
    async def translate(body: TranslateRequest, request: Request):
        started = time.perf_counter()
        texts = [body.q] if isinstance(body.q, str) else list(body.q)
        pair = body.direction
        try:
            weight = server_limits.count(texts, settings, pair[0], body.split)
        except server_limits.LimitExceeded as err:
            raise HTTPException(413, str(err)) from None
        if body.attention:
            check_attention(service.models[pair], service.infos[pair], texts, body.split, pair[0], settings)
        key = DecodeKey(body.beam, body.alpha, body.nbest, body.attention, body.split)
        results, batched_with = await service.run_job(texts, key, request, pair, weight)
        return {"translations": [_translation_json(t, body.attention) for t in results], "batched_with": batched_with,
                "latency_ms": round(1000 * (time.perf_counter() - started), 1)}


def check_attention(translator: Translator, info: dict, texts: list[str], split: bool, lang: str,
                    settings: ServerSettings) -> None:
    """Refuse a request for attention weights no engine here can give (422: an exported folder,
    an ensemble; 409: a checkpoint rewritten since it was served) or that would pass
    ``max_attention_values`` (413). A checkpoint served by
    CTranslate2 gives them from its native copy (:meth:`Translator.attention_engine`)."""
    from fastapi import HTTPException

    if not info["decoding"]["attention"]:
        raise HTTPException(422, f"attention weights come from the native engine, and this server runs "
                                 f"{info['engine']} on a model with no native copy (an exported folder or an "
                                 "ensemble). Ask without attention, or serve the .ckpt.")
    if translator.native_source_changed():
        raise HTTPException(409, "the served checkpoint was rewritten on disk after the server started: attention "
                                 "weights would come from another model than the translations. Ask without "
                                 "attention, or restart the server to serve the new model.")
    sentences = [s for text in texts for s in segment.split(text.strip(), lang).sentences] if split else texts
    values = attention_values(translator, sentences)
    if values > settings.max_attention_values:
        raise HTTPException(413, f"attention weights for these sentences could reach {values:,} numbers; the "
                                 f"limit is {settings.max_attention_values:,} (max_attention_values). Ask "
                                 "for attention on fewer or shorter sentences, or without attention.")


def by_direction(translators) -> dict[tuple[str, str], Translator]:
    """``{(source, target): translator}`` of a Translator or a list of them, in order; a
    UsageError when two translate the same direction (the server could not choose)."""
    models: dict[tuple[str, str], Translator] = {}
    for translator in [translators] if isinstance(translators, Translator) else list(translators):
        pair = translator.languages
        if pair in models:
            raise UsageError(f"two models translate {pair[0]}→{pair[1]}: serve one model per direction (-m once "
                             "for each).")
        models[pair] = translator
    if not models:
        raise UsageError("no model to serve: give -m/--model at least once.")
    return models


async def _answer(job, request, timeout_s: float, remaining: float | None = None):
    """The job's ``(translations, batched_with)``; None if the client disconnected first.
    Either way, and on a timeout (504, after ``remaining`` seconds, default ``timeout_s``), a
    job nobody waits for is cancelled."""
    from fastapi import HTTPException

    loop = asyncio.get_running_loop()
    deadline = loop.time() + (timeout_s if remaining is None else remaining)
    try:
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise HTTPException(504, f"no answer within {timeout_s:g} s (timeout_s); send fewer or shorter "
                                         "sentences.")
            done, _ = await asyncio.wait({job.future}, timeout=min(DISCONNECT_POLL_S, remaining))
            if done:
                return job.future.result()
            if await request.is_disconnected():
                return None
    finally:
        if not job.future.done():
            job.cancelled.set()


#: How often a waiting request checks whether its client is still there.
DISCONNECT_POLL_S = 0.25


def attention_values(translator: Translator, sentences: list[str]) -> int:
    """An upper bound on the numbers that attention weights for ``sentences`` take in an answer:
    ``layers × (heads + 1 for the mean) × target × source`` per sentence, with the source in
    pieces (+ eos) and the target at the longest output the length limit allows."""
    from minitrans.decoding.search import length_limits

    config = translator.config
    lengths = [min(len(ids), config.max_len - 1) + 1 for ids in translator.tokenizer.encode(sentences)]
    if not lengths:
        return 0
    import torch

    targets = length_limits(torch.tensor(lengths), translator.max_len_a, translator.max_len_b, config.max_len - 1)
    per_cell = config.n_decoder_layers * (config.n_heads + 1)
    return int(sum(per_cell * t * s for t, s in zip(targets.tolist(), lengths)))


def check_port(host: str, port: int) -> None:
    """A one-line error, before the model loads, when ``host:port`` cannot be listened on."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise UsageError(f"--port {port}: {host}:{port} is already in use (another server?); choose another "
                                 "port with --port.") from None
            raise UsageError(f"--host {host} --port {port}: cannot listen there ({err.strerror or err}).") from None


def serve(checkpoints: str | list[str], host: str = "127.0.0.1", port: int = 8000, device: str = "cpu",
          settings: ServerSettings | None = None, engine: str | None = "auto", workers: int = 0,
          precision: str = "auto", shortlist: bool = False) -> None:
    """Load the checkpoints (or exported folders; one per direction) and serve them with
    uvicorn until SIGINT/SIGTERM. ``precision`` and ``shortlist`` as for :meth:`Translator.load`."""
    import uvicorn

    paths = [checkpoints] if isinstance(checkpoints, str) else list(checkpoints)
    options = {"precision": precision, "shortlist": shortlist, "workers": workers}
    translators = [Translator.load(path, engine, device=device, **options) for path in paths]
    settings = settings or ServerSettings()
    app = create_app(translators, settings)
    for path, t in zip(paths, translators):
        log.info("serving %s (%s→%s) on http://%s:%d, %s", path, *t.languages, host, port, t.describe())
    # The grace period outlasts timeout_s: every request in flight at SIGTERM gets its answer.
    # The protocol gives each request's headers a deadline and caps the open connections.
    from minitrans.serve.guard import BACKLOG, connection_protocol

    uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=settings.grace_s,
                http=connection_protocol(settings), backlog=BACKLOG)
