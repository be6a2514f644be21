"""``minitrans serve``: the HTTP API, LibreTranslate's routes and the page, over one
:class:`~minitrans.translate.Translator` per direction.

* :mod:`~minitrans.serve.settings` — every limit and option of a server, checked once.
* :mod:`~minitrans.serve.limits` — what one request may hold, counted the same way on every route.
* :mod:`~minitrans.serve.schema` — the ``/v1`` request and response models (the OpenAPI contract).
* :mod:`~minitrans.serve.guard` — body size, keys and slow clients, in front of every route.
* :mod:`~minitrans.serve.worker` — the batching worker: queue, deadlines, cancellation, shutdown.
* :mod:`~minitrans.serve.libretranslate` — LibreTranslate's routes, parameters and error shape.
* :mod:`~minitrans.serve.app` — the FastAPI application and ``serve()``.

A new endpoint is one route in ``app.py`` (or a module of its own registered there); the guard
covers it without its author doing anything. It imports inference (``translate``, the engines,
decoding settings, formats), never training or data. The face is empty on purpose.
"""
