"""``minitrans serve``: a translation HTTP API and a web page over one :class:`Translator`.

Decoding is CPU-bound and the model is not thread-safe, so one worker thread owns it.
Requests wait on the event loop (which never runs the model) while the worker gathers the
jobs that arrive within a few milliseconds and share decoding settings into one batch —
**dynamic batching** — bounded by a sentence budget. Input normalisation, tokenisation and
detokenisation are the Translator's, exactly as on the command line.

Limits answer with clear errors: too many sentences or characters (413, naming the limit),
invalid parameters (422, naming the field, FastAPI's own validation), a full queue (503 with
``Retry-After``), a request that waited too long (504). Every accepted request gets exactly
one result per input sentence, in order.

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

from minitrans import __version__
from minitrans.search import DEFAULT_ALPHA, DEFAULT_BEAM
from minitrans.translate import Translation, Translator

log = logging.getLogger(__name__)


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
        timeout_s: A request not answered by then gets 504.
        beam: Default beam size of a request.
        alpha: Default length penalty of a request.
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

    def submit(self, sentences: list[str], key: tuple, loop: asyncio.AbstractEventLoop) -> asyncio.Future:
        """Queue a job; its future resolves (on ``loop``) to ``(translations, batched_with)``."""
        with self._lock:
            if self._pending + len(sentences) > self.settings.max_queue:
                raise QueueFull
            self._pending += len(sentences)
        future = loop.create_future()
        self._jobs.put(_Job(sentences, key, loop, future))
        return future

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the queued jobs, then end the thread."""
        self._jobs.put(None)
        self._thread.join(timeout)

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
            beam, alpha, nbest, attention = first.key
            sentences = [s for job in jobs for s in job.sentences]
            try:
                results = self.translator.translate_detailed(sentences, beam_size=beam, alpha=alpha, nbest=nbest,
                                                             attention=attention)
                error = None
            except Exception as err:  # reported to every waiting request, the worker lives on
                log.exception("decoding failed")
                results, error = [], err
            start = 0
            for job in jobs:
                part = results[start:start + len(job.sentences)]
                start += len(job.sentences)
                with self._lock:
                    self._pending -= len(job.sentences)
                outcome = (part, len(sentences)) if error is None else error
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


def _translation_json(t: Translation, attention: bool) -> dict[str, Any]:
    out = {"source": t.source, "translation": t.text, "score": _finite(t.score),
           "nbest": [{"translation": text, "score": _finite(score)} for text, score in t.nbest],
           "truncated": t.truncated}
    if attention and t.attention is not None:
        out["attention"] = _attention_json(t)
    elif attention:  # an empty input line: nothing was decoded
        out["attention"] = {"src_pieces": [], "tgt_pieces": [], "layers": [], "mean": []}
    return out


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def model_info(translator: Translator, meta: dict) -> dict[str, Any]:
    """What ``GET /v1/model`` reports."""
    data = meta.get("data", {})
    return {"minitrans_version": __version__, "checkpoint_version": meta.get("version"),
            "engine": translator.engine.name, "model_config": translator.config.to_dict(),
            "parameters": translator.engine.parameter_count(),
            "vocab_size": translator.tokenizer.vocab_size,
            "training_data": {k: data.get(k) for k in ("dataset", "corpora", "vocab_size") if k in data},
            "validation": meta.get("validation"), "averaged_from": meta.get("averaged_from"),
            "decoding": {"max_len_a": translator.max_len_a, "max_len_b": translator.max_len_b,
                         "bf16": translator.bf16, "workers": translator.engine.workers}}


def create_app(translator: Translator, settings: ServerSettings | None = None):
    """The FastAPI application: the API, the page and its static files."""
    from fastapi import FastAPI, HTTPException
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import HTMLResponse, JSONResponse
    from fastapi.staticfiles import StaticFiles
    from pydantic import BaseModel, Field, model_validator

    settings = settings or ServerSettings()
    info = model_info(translator, translator.meta)
    state: dict[str, Any] = {}

    class TranslateRequest(BaseModel):
        """A request: one text or a list of texts, and decoding settings."""

        q: str | list[str] = Field(description="a sentence, or a list of sentences (one result each, in order)")
        beam: int = Field(settings.beam, ge=1, le=16, description="beam size (1 = greedy)")
        alpha: float = Field(settings.alpha, ge=0.0, le=10.0, allow_inf_nan=False, description="length penalty")
        nbest: int = Field(1, ge=1, le=16, description="alternatives per sentence (at most beam)")
        attention: bool = Field(False, description="return pieces and cross-attention weights")

        @model_validator(mode="after")
        def _nbest_within_beam(self):
            if self.nbest > self.beam:
                raise ValueError(f"nbest ({self.nbest}) must not exceed beam ({self.beam})")
            return self

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app):
        state["worker"] = BatchingWorker(translator, settings)
        try:
            yield
        finally:  # graceful shutdown: queued and decoding requests finish first
            await asyncio.get_running_loop().run_in_executor(None, state["worker"].stop)

    app = FastAPI(title="minitrans", version=__version__, lifespan=lifespan,
                  docs_url=None, redoc_url=None,  # their pages load assets from a CDN
                  description="English→French translation with a Transformer built from its parts.")
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
        worker = state.get("worker")
        if worker is None:
            return JSONResponse({"status": "starting"}, status_code=503)
        return {"status": "ok", "pending_sentences": worker.pending}

    @app.get("/v1/model")
    def model() -> dict[str, Any]:
        return info

    @app.post("/v1/translate")
    async def translate(request: TranslateRequest) -> dict[str, Any]:
        started = time.perf_counter()
        single = isinstance(request.q, str)
        sentences = [request.q] if single else list(request.q)
        if len(sentences) > settings.max_sentences:
            raise HTTPException(413, f"{len(sentences)} sentences in one request; the limit is "
                                     f"{settings.max_sentences} (max_sentences). Split the request.")
        too_long = next((i for i, s in enumerate(sentences) if len(s) > settings.max_chars), None)
        if too_long is not None:
            raise HTTPException(413, f"sentence {too_long} has {len(sentences[too_long])} characters; the limit "
                                     f"is {settings.max_chars} (max_chars). Split it into sentences.")
        if request.attention and info["engine"] != "native":
            raise HTTPException(422, f"attention weights come from the native engine; this server runs "
                                     f"{info['engine']}. Ask without attention.")
        key = (request.beam, request.alpha, request.nbest, request.attention)
        worker: BatchingWorker = state["worker"]
        try:
            future = worker.submit(sentences, key, asyncio.get_running_loop())
        except QueueFull:
            raise HTTPException(503, f"the server is busy ({worker.pending} sentences queued; max_queue "
                                     f"{settings.max_queue}); retry shortly.", headers={"Retry-After": "1"})
        try:
            results, batched_with = await asyncio.wait_for(asyncio.shield(future), settings.timeout_s)
        except asyncio.TimeoutError:
            raise HTTPException(504, f"no answer within {settings.timeout_s:g} s (timeout_s); send fewer or "
                                     "shorter sentences.") from None
        body = [_translation_json(t, request.attention) for t in results]
        return {"translations": body, "batched_with": batched_with,
                "latency_ms": round(1000 * (time.perf_counter() - started), 1)}

    return app


def serve(checkpoint: str, host: str = "127.0.0.1", port: int = 8000, device: str = "cpu", bf16: bool = False,
          settings: ServerSettings | None = None, engine: str | None = None, int8: bool = False,
          workers: int = 0) -> None:
    """Load the checkpoint (or exported folder) and serve it with uvicorn until SIGINT/SIGTERM."""
    import uvicorn

    translator = Translator.load(checkpoint, engine, device=device, bf16=bf16, workers=workers,
                                 **({"int8": True} if int8 else {}))
    app = create_app(translator, settings)
    log.info("serving %s on http://%s:%d", checkpoint, host, port)
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=30)
