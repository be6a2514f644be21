"""schemathesis against a live ``minitrans serve`` on loopback: requests generated from the
server's own ``/openapi.json`` (valid ones and, for the body, invalid ones), every built-in
check on — no 5xx, only declared status codes and content types, answers that match their
declared schema, schema-valid data accepted, schema-invalid data rejected. Bounded: a fixed
number of examples per operation, no shrinking past a deadline, loopback only."""

from __future__ import annotations

import subprocess

import pytest

from conftest import start_server

schemathesis = pytest.importorskip("schemathesis", reason="the dev extra is not installed")
pytest.importorskip("fastapi", reason="the [serve] extra is not installed")
from hypothesis import HealthCheck, Phase, settings  # noqa: E402


@pytest.fixture(scope="module")
def server_url(trained_checkpoint):
    """A server with small limits, so that generated requests reach them (413) and stay quick."""
    proc, url = start_server(trained_checkpoint, "--beam", "2", "--max-sentences", "4", "--max-chars", "120",
                             "--max-attention-values", "100000000", "--timeout", "30")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    output = proc.stdout.read()
    assert "Traceback" not in output, output[-3000:]  # nothing the fuzzer sent raised inside the server


#: A schema-violating request must be refused: schemathesis's list, plus 413, which is how the
#: server answers a request over a limit the schema states (maxItems, maxLength).
REJECTED = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]
#: A schema-valid request is accepted (schemathesis's list), or 413: the limits named in sentences
#: count them after splitting (minitrans.serve.limits), which no JSON Schema can state; the
#: schema states the bounds on texts. The 413 must still match its declared schema.
ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "413", "429", "5xx"]


@pytest.fixture(scope="module")
def api_schema(server_url):
    from schemathesis.config import SchemathesisConfig

    config = SchemathesisConfig.from_dict({"checks": {"negative_data_rejection": {"expected-statuses": REJECTED},
                                                      "positive_data_acceptance": {"expected-statuses": ACCEPTED}}})
    return schemathesis.openapi.from_url(f"{server_url}/openapi.json", config=config)


def _operations(api_schema) -> dict[str, object]:
    return {f"{op.method.upper()} {op.path}": op for op in (r.ok() for r in api_schema.get_all_operations())}


def test_every_route_is_fuzzed(api_schema):
    assert {"POST /v1/translate", "GET /v1/model", "GET /health"} <= set(_operations(api_schema))


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_the_api_keeps_its_own_contract(api_schema, mode):
    """Every operation, schema-valid (positive) and schema-invalid (negative) requests, every check."""
    from hypothesis import given

    from schemathesis.generation.modes import GenerationMode

    for label, operation in _operations(api_schema).items():
        if mode == "negative" and not operation.body:  # nothing to break in a GET without parameters
            continue

        @given(case=operation.as_strategy(generation_mode=GenerationMode(mode)))
        @settings(max_examples=40, deadline=None, phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck), database=None)
        def check(case):
            case.call_and_validate(timeout=60)

        check()
