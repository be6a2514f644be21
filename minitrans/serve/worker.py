"""The server's decoding worker: one thread per model, gathering concurrent requests into batches.

Decoding is CPU-bound and a model is not thread-safe, so one worker thread owns each model.
Requests wait on the event loop (which never runs the model) while the worker gathers the
jobs that arrive within ``batch_wait_ms`` and share their decoding settings (a
:class:`DecodeKey`) into one batch — **dynamic batching** — bounded by ``batch_sentences``.
When a gathered batch fails, its jobs are decoded again one by one, so only the job at fault
fails; a cancelled job (its request timed out, or its client went away) is dropped from the
queue, and its decoding stops at the next decoding batch. The queue counts sentences
(``max_queue``): a job weighs the sentences its request was counted as
(:mod:`minitrans.serve.limits`).

Inference code: it imports neither FastAPI nor Lightning.
"""

import asyncio
import collections
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from minitrans.engines.registry import Cancelled
from minitrans.serve.settings import ServerSettings
from minitrans.translate import Translator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DecodeKey:
    """The decoding settings of a job: jobs are gathered into one batch only when these agree."""

    beam: int
    alpha: float
    nbest: int = 1
    attention: bool = False
    split: bool = True


class QueueFull(Exception):
    """The server holds ``max_queue`` sentences already."""


@dataclass
class _Job:
    sentences: list[str]
    key: DecodeKey
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    weight: int = 0  # the sentences it holds in the queue
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

    def submit(self, sentences: list[str], key: DecodeKey, loop: asyncio.AbstractEventLoop,
               weight: int | None = None) -> _Job:
        """Queue a job of ``sentences`` (texts, split by the Translator when ``key.split``) that
        weighs ``weight`` sentences in the queue (default: one per text); its future resolves
        (on ``loop``) to ``(translations, batched_with)``. Set the job's ``cancelled`` event
        when its answer is no longer wanted."""
        weight = len(sentences) if weight is None else weight
        with self._lock:
            if self._pending + weight > self.settings.max_queue:
                raise QueueFull
            self._pending += weight
        job = _Job(sentences, key, loop, loop.create_future(), weight)
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
        jobs, n = [first], first.weight
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
            if job.key == first.key and n + job.weight <= self.settings.batch_sentences:
                jobs.append(job)
                n += job.weight
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
        key = jobs[0].key
        sentences = [s for job in jobs for s in job.sentences]
        try:
            results = self.translator.translate_detailed(
                sentences, beam_size=key.beam, alpha=key.alpha, nbest=key.nbest, attention=key.attention,
                split=key.split,
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
                self._pending -= job.weight
            if outcome is not None:
                job.loop.call_soon_threadsafe(_resolve, job.future, outcome)


def _resolve(future: asyncio.Future, outcome: Any) -> None:
    if future.done():  # the request timed out meanwhile
        return
    if isinstance(outcome, Exception):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
