"""The HTTP API's contract: what ``POST /v1/translate`` accepts and answers, as pydantic models.

FastAPI validates requests against these models and publishes them in ``/openapi.json``, so
the schema is the contract a client (or a fuzzer: ``tests/contracts/test_api_fuzz.py`` runs schemathesis
against a live server) can rely on:

* unknown keys are refused (``extra="forbid"``), and types are strict (``"alpha": true`` or
  ``"beam": "2"`` are 422, not silently converted);
* text must be valid Unicode (a lone surrogate such as ``"\\ud800"`` is valid JSON but no
  text: 422 naming the item, before it can reach a decoding batch shared with others);
* the bounds on texts are in the schema: at most ``max_sentences`` texts (``maxItems``: a text
  counts as one sentence at least), each of at most ``max_sentences × max_chars`` characters
  (``maxLength``), and "n-best at most beam" as an ``anyOf`` over the beam sizes; the limits
  named in sentences are counted after splitting (:mod:`minitrans.serve.limits`), which no
  JSON Schema can state, and answer 413 naming what was counted;
* every answer is declared: 200 with its schema, and 400/413/422/503/504 with theirs.
"""

from __future__ import annotations

from typing import Any, Literal

from minitrans.text.cleaning import check_unicode
from minitrans.decoding.settings import nbest_fits
from minitrans.serve.settings import MAX_ALPHA, MAX_BEAM, ServerSettings


def _whole_number(value: Any) -> Any:
    """JSON Schema's ``integer``: a whole number, ``2`` or ``2.0``; never ``true`` or ``"2"``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("must be a whole number")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("must be a whole number")
        return int(value)
    return value


def request_model(settings: ServerSettings, directions: tuple[tuple[str, str], ...] | list = (("en", "fr"),)):
    """The request body of ``POST /v1/translate`` for a server with ``settings`` that serves
    ``directions`` (``(source, target)`` pairs; the first is the default)."""
    from typing import Annotated

    from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictStr, field_validator
    from pydantic import model_validator

    WholeNumber = Annotated[int, BeforeValidator(_whole_number)]

    def q_schema(schema: dict[str, Any]) -> None:
        for option in schema.get("anyOf", []):
            if option.get("type") == "string":
                option["maxLength"] = settings.max_request_chars
            elif option.get("type") == "array":
                option["maxItems"] = min(settings.max_sentences, settings.max_queue)
                option["items"]["maxLength"] = settings.max_request_chars

    def body_schema(schema: dict[str, Any]) -> None:
        # n-best at most beam, in JSON Schema's terms: one branch per beam size; and a source
        # and target that some served direction has (an absent one matches any).
        schema["allOf"] = [{"anyOf": [
            {"properties": {"beam": {"const": beam}, "nbest": {"maximum": beam}}, "required": ["beam"]}
            for beam in range(1, MAX_BEAM + 1)
        ] + [{"not": {"required": ["beam"]}, "properties": {"nbest": {"maximum": settings.beam}}}]},
            {"anyOf": [{"properties": {"source": {"enum": [s, None]}, "target": {"enum": [t, None]}}}
                       for s, t in directions]}]

    Source = Literal[tuple(sorted({s for s, _ in directions}))]  # type: ignore[valid-type]
    Target = Literal[tuple(sorted({t for _, t in directions}))]  # type: ignore[valid-type]
    served = ", ".join(f"{s}→{t}" for s, t in directions)

    class TranslateRequest(BaseModel):
        """A request: one text or a list of texts, and decoding settings. ``nbest`` must not
        exceed ``beam`` (the server's default beam when ``beam`` is not given)."""

        model_config = ConfigDict(extra="forbid", json_schema_extra=body_schema)

        q: StrictStr | list[StrictStr] = Field(
            description=f"a text, or a list of texts (one result each, in order), each translated sentence by "
                        f"sentence with its spacing and line breaks kept; at most {settings.max_sentences} "
                        f"sentences in all, counted after splitting (a text counts as one at least), of at most "
                        f"{settings.max_chars} characters each (else 413, naming what was counted)",
            json_schema_extra=q_schema)
        beam: WholeNumber = Field(settings.beam, ge=1, le=MAX_BEAM, description="beam size (1 = greedy)")
        alpha: float = Field(settings.alpha, ge=0.0, le=MAX_ALPHA, allow_inf_nan=False, strict=True,
                             description="length penalty exponent")
        nbest: WholeNumber = Field(1, ge=1, le=MAX_BEAM, description="alternatives per sentence (at most beam)")
        attention: StrictBool = Field(False, description="return pieces and cross-attention weights (413 beyond "
                                                         "the server's max_attention_values)")
        split: StrictBool = Field(True, description="split each text into sentences (false: translate each "
                                                    "text as one sentence)")
        source: Source | None = Field(None, description=f"the source language (default: the first served "
                                                         f"direction's); served: {served}")
        target: Target | None = Field(None, description="the target language (default: that of the source's "
                                                         "direction)")

        @field_validator("q")
        @classmethod
        def _valid_unicode(cls, q):
            if isinstance(q, str):
                check_unicode(q, "q")
            else:
                for i, text in enumerate(q):
                    check_unicode(text, f"q[{i}]")
            return q

        @model_validator(mode="after")
        def _nbest_within_beam(self):
            if not nbest_fits(self.nbest, self.beam):
                raise ValueError(f"nbest ({self.nbest}) must not exceed beam ({self.beam})")
            return self

        @model_validator(mode="after")
        def _served_direction(self):
            if self.direction is None:
                raise ValueError(f"no served direction translates {self.source or 'any source'} to "
                                 f"{self.target or 'any target'}; this server translates {served}")
            return self

        @property
        def direction(self) -> tuple[str, str] | None:
            """The served ``(source, target)`` this request asks for (the first that matches)."""
            return next(((s, t) for s, t in directions if self.source in (None, s) and self.target in (None, t)),
                        None)

    return TranslateRequest


def response_models():
    """The 200 answer of ``POST /v1/translate``."""
    from pydantic import BaseModel, Field

    class Alternative(BaseModel):
        translation: str
        score: float | None = Field(description="length-normalised log-probability (null if not finite)")

    class Attention(BaseModel):
        src_pieces: list[str]
        tgt_pieces: list[str]
        layers: list[list[list[list[float]]]] = Field(description="(layers, heads, target, source) weights")
        mean: list[list[list[float]]] = Field(description="(layers, target, source): the mean over heads")

    class SentenceOut(BaseModel):
        source: str
        translation: str
        score: float | None
        nbest: list[Alternative]
        truncated: bool = Field(description="the sentence was longer than the model's positions and was cut")
        confidence: float | None = Field(description="the model's geometric-mean probability per output token")
        low_confidence: bool | None = Field(description="below the threshold calibrated on validation data "
                                                        "(null: the model was not calibrated)")
        attention: Attention | None = Field(None, description="only when the request asked for it")

    class TranslationOut(BaseModel):
        source: str
        translation: str
        score: float | None = Field(description="the mean of its sentences' scores")
        nbest: list[Alternative] = Field(description="the k-th joins the sentences' k-th alternatives")
        truncated: bool = Field(description="a sentence was longer than the model's positions and was cut")
        confidence: float | None = Field(description="its weakest sentence's confidence (null: empty input)")
        low_confidence: bool | None = Field(description="a sentence is below the calibrated threshold (null: "
                                                        "not calibrated)")
        attention: Attention | None = Field(None, description="when asked for and the text is one sentence "
                                                              "(else per sentence)")
        sentences: list[SentenceOut] = Field([], description="each sentence's own result (none with split false)")

    class TranslateResponse(BaseModel):
        translations: list[TranslationOut] = Field(description="one per input text, in input order")
        batched_with: int = Field(description="sentences decoded in the same batch (other requests' included)")
        latency_ms: float

    return TranslateResponse


def _error(description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {
                "type": "object", "required": ["detail"],
                "properties": {"detail": {"type": "string"}}}}}}


#: The error answers of ``POST /v1/translate`` (422 is FastAPI's own, declared by it).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _error("the body could not be parsed (not JSON, or not of the declared content type)"),
    401: _error("no X-API-Key header, on a server started with --api-keys"),
    403: _error("a wrong X-API-Key, on a server started with --api-keys"),
    408: _error("the request body did not arrive within the server's read timeout"),
    409: _error("attention weights asked of a checkpoint rewritten on disk since the server started"),
    413: _error("over a limit: max_sentences, max_chars, max_queue or max_attention_values, or a body over the "
               "size the server reads (named in detail)"),
    503: _error("the queue is full (max_queue); retry after the Retry-After header's seconds"),
    504: _error("no answer within the server's timeout_s"),
}
