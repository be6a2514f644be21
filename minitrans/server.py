"""``minitrans serve``: a translation HTTP API and a web page over one :class:`Translator`
per direction (``-m en-fr.ckpt -m fr-en.ckpt``: requests are routed by language pair).

Decoding is CPU-bound and a model is not thread-safe, so one worker thread owns each model.
Requests wait on the event loop (which never runs the model) while the worker gathers the
jobs that arrive within a few milliseconds and share decoding settings into one batch —
**dynamic batching** — bounded by a sentence budget. Input normalisation, tokenisation and
detokenisation are the Translator's, exactly as on the command line.

Limits answer with clear errors: too many sentences or characters, more sentences than the
queue can ever hold, or attention weights over the response budget (413, naming the limit);
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
import collections
import logging
import math
import queue
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from minitrans._version import __version__
from minitrans import languages, segment
from minitrans.engines import Cancelled
from minitrans.errors import UsageError
from minitrans.server_settings import ServerSettings
from minitrans.translate import Translation, Translator

log = logging.getLogger(__name__)


class QueueFull(Exception):
    """The server holds ``max_queue`` sentences already."""


@dataclass
class _Job:
    sentences: list[str]
    key: tuple  # decoding settings: jobs batch together only when these agree
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    batched_with: int = 0
    started: float = field(default_factory=time.perf_counter)
    # Set when the request timed out or its client went away: the job is dropped, or its
    # decoding stops at the next decoding batch.
    cancelled: threading.Event = field(default_factory=threading.Event)


class BatchingWorker:
    """One thread that owns the model and decodes gathered batches of jobs."""

    def __init__(self, translator: Translator, settings: ServerSettings) -> None:
        self.translator, self.settings = translator, settings
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._pending = 0  # sentences queued or decoding
        self._lock = threading.Lock()
        self._held: collections.deque[_Job] = collections.deque()  # gathered past, not yet decoded
        self._thread = threading.Thread(target=self._run, name="minitrans-decoder", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        return self._pending

    def submit(self, sentences: list[str], key: tuple, loop: asyncio.AbstractEventLoop) -> _Job:
        """Queue a job; its future resolves (on ``loop``) to ``(translations, batched_with)``.
        Set the job's ``cancelled`` event when its answer is no longer wanted."""
        with self._lock:
            if self._pending + len(sentences) > self.settings.max_queue:
                raise QueueFull
            self._pending += len(sentences)
        job = _Job(sentences, key, loop, loop.create_future())
        self._jobs.put(job)
        return job

    def stop(self, timeout: float | None = None) -> None:
        """Finish the queued jobs (cancelled ones are dropped), then end the thread."""
        self._jobs.put(None)
        self._thread.join(self.settings.grace_s if timeout is None else timeout)

    def _next(self, timeout: float | None = None) -> _Job | None:
        """The oldest job: held-back jobs first, then the queue (``queue.Empty`` on timeout)."""
        if self._held:
            return self._held.popleft()
        if timeout is None:
            return self._jobs.get()
        return self._jobs.get(timeout=timeout) if timeout > 0 else self._jobs.get_nowait()

    def _gather(self, first: _Job) -> tuple[list[_Job], bool]:
        """``first`` plus the jobs with the same settings that arrive within the wait, up to
        the sentence budget. Jobs with other settings (or over the budget) are held back, in
        arrival order, ahead of anything newer. Returns (jobs, stop requested)."""
        jobs, n = [first], len(first.sentences)
        if not self.settings.batching:
            return jobs, False
        deadline = time.perf_counter() + self.settings.batch_wait_ms / 1000
        skipped: list[_Job] = []
        stop = False
        while n < self.settings.batch_sentences:
            try:
                job = self._next(deadline - time.perf_counter())
            except queue.Empty:
                break
            if job is None:
                stop = True
                break
            if job.key == first.key and n + len(job.sentences) <= self.settings.batch_sentences:
                jobs.append(job)
                n += len(job.sentences)
            else:
                skipped.append(job)
        self._held.extendleft(reversed(skipped))
        return jobs, stop

    def _run(self) -> None:
        stop = False
        while True:
            if stop and not self._held and self._jobs.empty():
                return
            first = self._next()
            if first is None:
                stop = True
                continue
            jobs, stop_now = self._gather(first)
            stop = stop or stop_now
            live = [job for job in jobs if not job.cancelled.is_set()]
            self._finish([job for job in jobs if job.cancelled.is_set()], None)  # nobody waits for these
            if live:
                self._decode(live)

    def _decode(self, jobs: list[_Job]) -> None:
        """Decode ``jobs`` as one batch and answer each. If the batch fails and held several
        jobs, each is decoded again alone, so that one request's failure is its own."""
        beam, alpha, nbest, attention, split = jobs[0].key
        sentences = [s for job in jobs for s in job.sentences]
        try:
            results = self.translator.translate_detailed(
                sentences, beam_size=beam, alpha=alpha, nbest=nbest, attention=attention, split=split,
                should_stop=lambda: all(job.cancelled.is_set() for job in jobs))
        except Cancelled:  # every client of the batch is gone: nothing to answer
            self._finish(jobs, None)
            return
        except Exception as err:
            if len(jobs) > 1:
                log.warning("a batch of %d requests failed (%s: %s); decoding them one by one", len(jobs),
                            type(err).__name__, err)
                for job in jobs:
                    self._decode([job])
                return
            log.exception("decoding failed")  # the worker lives on; this request gets the error
            self._finish(jobs, err)
            return
        start = 0
        for job in jobs:
            part = results[start:start + len(job.sentences)]
            start += len(job.sentences)
            self._finish([job], (part, len(sentences)))

    def _finish(self, jobs: list[_Job], outcome: Any) -> None:
        """Release the jobs' queue places and hand ``outcome`` to their requests (None: no one
        is waiting any more)."""
        for job in jobs:
            with self._lock:
                self._pending -= len(job.sentences)
            if outcome is not None:
                job.loop.call_soon_threadsafe(_resolve, job.future, outcome)


def _resolve(future: asyncio.Future, outcome: Any) -> None:
    if future.done():  # the request timed out meanwhile
        return
    if isinstance(outcome, Exception):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


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
    data = meta.get("data", {})
    source, target = translator.languages
    return {"minitrans_version": __version__, "checkpoint_version": meta.get("version"),
            "source_language": source, "target_language": target,
            "engine": translator.engine.name, "model_config": translator.config.to_dict(),
            "parameters": translator.engine.parameter_count(),
            "vocab_size": translator.tokenizer.vocab_size,
            "training_data": {k: data.get(k) for k in ("dataset", "corpora", "vocab_size") if k in data},
            "validation": meta.get("validation"), "averaged_from": meta.get("averaged_from"),
            "decoding": {"max_len_a": translator.max_len_a, "max_len_b": translator.max_len_b,
                         "bf16": translator.bf16, "precision": translator.precision,
                         "shortlist": translator.shortlist,
                         "workers": translator.engine.workers}}


def create_app(translators, settings: ServerSettings | None = None):
    """The FastAPI application: the API, the page and its static files, over a Translator or
    a list of Translators of different directions (the first is the default direction)."""
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import HTMLResponse, JSONResponse
    from fastapi.staticfiles import StaticFiles

    from minitrans.api_schema import ERROR_RESPONSES, request_model, response_models

    settings = settings or ServerSettings()
    models = by_direction(translators)
    directions = list(models)
    infos = {pair: model_info(t, t.meta) for pair, t in models.items()}
    state: dict[str, Any] = {}
    TranslateRequest = request_model(settings, directions)
    TranslateResponse = response_models()
    served = ", ".join(f"{languages.name(s)}→{languages.name(t)}" for s, t in directions)

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app):
        state["workers"] = {pair: BatchingWorker(t, settings) for pair, t in models.items()}
        try:
            yield
        finally:  # graceful shutdown: queued and decoding requests finish first
            loop = asyncio.get_running_loop()
            await asyncio.gather(*(loop.run_in_executor(None, w.stop) for w in state["workers"].values()))

    app = FastAPI(title="minitrans", version=__version__, lifespan=lifespan,
                  docs_url=None, redoc_url=None,  # their pages load assets from a CDN
                  description=f"{served} translation with a Transformer built from its parts.")
    @app.exception_handler(RequestValidationError)
    async def invalid_request(request, exc: RequestValidationError):
        # FastAPI's default echoes the offending input, which fails to encode when it is NaN or
        # huge; the field and the reason are what a client needs.
        detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
                  for e in exc.errors()]
        return JSONResponse({"detail": detail}, status_code=422)

    static = resources.files("minitrans") / "static"
    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> str:
        return (static / "index.html").read_text(encoding="utf-8")

    @app.get("/health")
    def health():
        workers = state.get("workers")
        if workers is None:
            return JSONResponse({"status": "starting"}, status_code=503)
        return {"status": "ok", "pending_sentences": sum(w.pending for w in workers.values())}

    @app.get("/v1/model")
    def model() -> dict[str, Any]:
        """The default direction's model."""
        return infos[directions[0]]

    @app.get("/v1/models")
    def all_models() -> dict[str, Any]:
        """Every served model, one per direction, the default first."""
        return {"models": list(infos.values())}

    async def run_job(texts: list[str], key: tuple, request, pair: tuple[str, str]) -> tuple[list[Translation], int]:
        """Texts through the batching worker of direction ``pair``: ``(translations,
        batched_with)``, or the HTTPException of a full queue (503), a timeout (504) or a
        client gone (499)."""
        worker: BatchingWorker = state["workers"][pair]
        try:
            job = worker.submit(texts, key, asyncio.get_running_loop())
        except QueueFull:
            raise HTTPException(503, f"the server is busy ({worker.pending} sentences queued; max_queue "
                                     f"{settings.max_queue}); retry shortly.", headers={"Retry-After": "1"}) from None
        outcome = await _answer(job, request, settings.timeout_s)
        if outcome is None:  # the client went away: nobody reads this
            raise HTTPException(499, "client closed the request")
        return outcome

    async def decode(texts: list[str], beam: int, nbest: int, request, pair: tuple[str, str]) -> list[Translation]:
        """:func:`run_job` for the routes of other APIs (LibreTranslate's), in their error shape."""
        from minitrans.libretranslate import LibreTranslateError

        try:
            return (await run_job(texts, (beam, settings.alpha, nbest, False, True), request, pair))[0]
        except HTTPException as err:
            raise LibreTranslateError(err.status_code, str(err.detail), err.headers) from None

    from minitrans import libretranslate

    libretranslate.add_routes(app, directions, settings.max_chars, settings.max_sentences, settings.beam, decode,
                              settings.key_problem)
    if settings.cors_origins:  # opt-in: the server binds loopback by default
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["*"])

    @app.post("/v1/translate", response_model=TranslateResponse, response_model_exclude_unset=True,
              responses=ERROR_RESPONSES)
    async def translate(body: TranslateRequest, request: Request):
        started = time.perf_counter()
        problem = settings.key_problem(request.headers.get("x-api-key"))
        if problem is not None:  # --api-keys: the key travels in a header (the body's keys are the schema's)
            raise HTTPException(401 if problem[0] == 400 else 403, f"{problem[1]} (send it as the X-API-Key header)")
        single = isinstance(body.q, str)
        sentences = [body.q] if single else list(body.q)
        if len(sentences) > settings.max_sentences:
            raise HTTPException(413, f"{len(sentences)} sentences in one request; the limit is "
                                     f"{settings.max_sentences} (max_sentences). Split the request.")
        if len(sentences) > settings.max_queue:
            raise HTTPException(413, f"{len(sentences)} sentences in one request, more than the server ever queues "
                                     f"({settings.max_queue}, max_queue). Split the request.")
        too_long = next((i for i, s in enumerate(sentences) if len(s) > settings.max_chars), None)
        if too_long is not None:
            raise HTTPException(413, f"sentence {too_long} has {len(sentences[too_long])} characters; the limit "
                                     f"is {settings.max_chars} (max_chars). Split it into sentences.")
        pair = body.direction
        translator = models[pair]
        if body.attention and infos[pair]["engine"] != "native":
            raise HTTPException(422, f"attention weights come from the native engine; this server runs "
                                     f"{infos[pair]['engine']}. Ask without attention.")
        if body.attention:
            values = attention_values(translator, [s for text in sentences
                                                   for s in segment.split(text.strip(), pair[0]).sentences]
                                      if body.split else sentences)
            if values > settings.max_attention_values:
                raise HTTPException(413, f"attention weights for these sentences could reach {values:,} numbers; the "
                                         f"limit is {settings.max_attention_values:,} (max_attention_values). Ask "
                                         "for attention on fewer or shorter sentences, or without attention.")
        key = (body.beam, body.alpha, body.nbest, body.attention, body.split)
        results, batched_with = await run_job(sentences, key, request, pair)
        return {"translations": [_translation_json(t, body.attention) for t in results], "batched_with": batched_with,
                "latency_ms": round(1000 * (time.perf_counter() - started), 1)}

    return app


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


async def _answer(job: _Job, request, timeout_s: float):
    """The job's ``(translations, batched_with)``; None if the client disconnected first.
    Either way, and on a timeout (504), a job nobody waits for is cancelled."""
    from fastapi import HTTPException

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
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
    from minitrans.search import length_limits

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
          bf16: bool = False, settings: ServerSettings | None = None, engine: str | None = None, int8: bool = False,
          workers: int = 0, precision: str = "auto", shortlist: bool = False) -> None:
    """Load the checkpoints (or exported folders; one per direction) and serve them with
    uvicorn until SIGINT/SIGTERM. ``precision`` (``bf16``/``int8``: its older switches) and
    ``shortlist`` as for :meth:`Translator.load`."""
    import uvicorn

    paths = [checkpoints] if isinstance(checkpoints, str) else list(checkpoints)
    options = {"precision": precision, "bf16": bf16, "int8": int8, "shortlist": shortlist, "workers": workers}
    translators = [Translator.load(path, engine, device=device, **options) for path in paths]
    settings = settings or ServerSettings()
    app = create_app(translators, settings)
    for path, t in zip(paths, translators):
        log.info("serving %s (%s→%s) on http://%s:%d", path, *t.languages, host, port)
    # The grace period outlasts timeout_s: every request in flight at SIGTERM gets its answer.
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=settings.grace_s)
