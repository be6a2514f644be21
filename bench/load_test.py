"""A bounded load test of a running `minitrans serve` (loopback only): N concurrent clients each
send M requests of K sentences, then it reports requests/s, sentences/s, latency percentiles and
errors, and checks every response against its request (one translation per sentence, in order,
each echoing its source).

    minitrans serve -m CKPT --port 8000 &                 # then, in another shell:
    python bench/load_test.py --url http://127.0.0.1:8000 --clients 8 --requests 20 --sentences 4

Run it against a server started with and without --no-batching to see what batching buys.
It stops by itself after clients × requests requests (or --max-seconds).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

DEFAULT_SENTENCES = Path(__file__).resolve().parents[1] / "scripts" / "showcase.en"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=20, help="requests per client")
    parser.add_argument("--sentences", type=int, default=4, help="sentences per request")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--input", default=str(DEFAULT_SENTENCES), help="sentences to draw from, one per line")
    parser.add_argument("--max-seconds", type=float, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    host = urllib.parse.urlparse(args.url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        parser.error(f"load tests target loopback only, not {host}")
    pool = [line for line in Path(args.input).read_text(encoding="utf-8").split("\n") if line.strip()]
    latencies, errors, mismatches, sentences_done = [], [], [], [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + args.max_seconds

    def client(index: int) -> None:
        rng = random.Random(args.seed * 1000 + index)
        for _ in range(args.requests):
            if time.perf_counter() > deadline:
                return
            batch = [rng.choice(pool) for _ in range(args.sentences)]
            body = json.dumps({"q": batch, "beam": args.beam}).encode()
            request = urllib.request.Request(f"{args.url}/v1/translate", data=body,
                                             headers={"Content-Type": "application/json"})
            started = time.perf_counter()
            try:
                reply = json.load(urllib.request.urlopen(request, timeout=120))
            except (urllib.error.URLError, OSError, ValueError) as err:
                with lock:
                    errors.append(str(err))
                continue
            elapsed = time.perf_counter() - started
            ok = [t["source"] for t in reply["translations"]] == batch and all(
                isinstance(t["translation"], str) for t in reply["translations"])
            with lock:
                latencies.append(elapsed)
                sentences_done[0] += len(batch)
                if not ok:
                    mismatches.append(batch)

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    lat = sorted(latencies) or [float("nan")]

    def pct(p: float) -> float:
        return 1000 * lat[min(len(lat) - 1, int(p / 100 * len(lat)))]

    report = {"clients": args.clients, "requests": len(latencies) + len(errors), "sentences": sentences_done[0],
              "seconds": round(wall, 2), "requests_per_s": round(len(latencies) / wall, 2),
              "sentences_per_s": round(sentences_done[0] / wall, 1),
              "latency_ms": {"p50": round(pct(50), 1), "p95": round(pct(95), 1), "p99": round(pct(99), 1),
                             "mean": round(1000 * statistics.fmean(lat), 1) if latencies else None},
              "errors": len(errors), "lost_or_reordered": len(mismatches)}
    print(json.dumps(report, indent=2))
    if errors or mismatches:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
