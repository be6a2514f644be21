"""Decoding workers: threads that decode different batches at once, each with its own
intra-op thread count.

Why: a beam-search step is a few dozen small operators. Spread over two OpenMP threads each
operator pays a fork/join, so native decoding gained little from a second core (docs/speed.md,
"Where the second core goes: decoding workers"). Two workers of one thread each pay no fork/join and keep both cores busy on separate batches; PyTorch releases
the GIL inside operators, so the Python of one worker's step overlaps the other's kernels.
CTranslate2 calls the same idea ``inter_threads``.

PyTorch's thread count is mostly per thread: ``torch.set_num_threads`` sets the calling
thread's OpenMP and MKL thread counts, and also a process-wide default that a thread reads
the first time it runs a parallel operator. A worker therefore first runs that initialisation
(``torch.get_num_threads``), then sets its own count; once every worker has, the thread that
made the pool sets its own count again, which puts the process-wide default back. Other
threads (the caller, a server's decoding thread) keep their thread counts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

T = TypeVar("T")
R = TypeVar("R")


def default_workers(device: torch.device | str, threads: int | None = None) -> int:
    """Workers for a device: on CPU two when there are at least two intra-op threads (faster
    than one worker of two threads on 2 cores, for both engines: docs/speed.md), else one. A GPU runs one worker
    (its kernels are queued on one stream anyway). Only 2 cores were measured; more workers are
    the user's choice (``--workers``)."""
    if torch.device(device).type != "cpu":
        return 1
    return min(2, threads or torch.get_num_threads())


class WorkerPool:
    """``workers`` threads, each with ``threads`` intra-op threads; :meth:`map` runs a function
    over items on them and yields the results in order.

    Args:
        workers: Threads that decode at once (at least 2: with one, the engine decodes in the caller).
        threads: Intra-op threads of each worker.
    """

    def __init__(self, workers: int, threads: int) -> None:
        if workers < 2 or threads < 1:
            raise ValueError(f"a pool needs at least 2 workers of at least 1 thread, got {workers} x {threads}")
        self.workers, self.threads = workers, threads
        process_default = torch.get_num_threads()
        ready = threading.Barrier(workers + 1, timeout=60)  # a worker that fails to start breaks it, never hangs

        def start_worker() -> None:
            torch.get_num_threads()  # this thread's first-use initialisation (reads the process default)
            torch.set_num_threads(threads)  # ... then its own count, which later calls keep
            ready.wait()

        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="minitrans-decode", initializer=start_worker)
        for _ in range(workers):  # a worker busy in its initialiser makes the next submit start another
            self._pool.submit(int)
        ready.wait()  # every worker has its count; put the process default back for other threads
        torch.set_num_threads(process_default)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """``fn(item)`` for each item on the workers, results in the order of ``items``. An
        exception in ``fn`` is raised here, and the items not started yet are cancelled."""
        return self._pool.map(fn, items)

    def close(self) -> None:
        """Stop the workers once the running items finish."""
        self._pool.shutdown(wait=True, cancel_futures=True)
