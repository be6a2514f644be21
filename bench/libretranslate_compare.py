"""The real LibreTranslate and `minitrans serve`, sent the same requests (issue #27). Loopback only.

    python bench/libretranslate_compare.py --lt-url http://127.0.0.1:5000 --mt-url http://127.0.0.1:8000

Start the two servers first, on the same model: LibreTranslate (in its own virtual environment:
its pins clash with minitrans's) serving the Argos packages exported from the checkpoints, with
``ARGOS_BEAM_SIZE=1 ARGOS_COMPUTE_TYPE=float32``, and ``minitrans serve -m EN_FR -m FR_EN --beam 1``
with the same character limit. ``docs/serving.md`` gives the commands. The script sends each request of
a fixed matrix (JSON, form, multipart and query-string requests; lists; ``auto``;
``alternatives``; ``format=html``; every error case; ``/languages``, ``/detect``,
``/frontend/settings``) to both, and prints for each the status codes, whether the answers have
the same keys and types, and whether the translations are equal. It sends about 25 requests.
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid

SENTENCE = "Two dogs are playing in the snow."
HTML = "<p>A man is <b>riding</b> a bike.</p><code>x = 1</code>"
FRENCH = "Deux chiens jouent dans la neige."


def _multipart(fields: dict[str, str]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = b"".join(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n".encode()
                    for k, v in fields.items()) + f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


#: (name, method, path, how the parameters travel, parameters or a raw body)
MATRIX = [
    ("json single", "POST", "/translate", "json", {"q": SENTENCE, "source": "en", "target": "fr"}),
    ("json list", "POST", "/translate", "json", {"q": [SENTENCE, "A woman reads a book."], "source": "en",
                                                 "target": "fr"}),
    ("form urlencoded", "POST", "/translate", "form", {"q": SENTENCE, "source": "en", "target": "fr"}),
    ("multipart", "POST", "/translate", "multipart", {"q": SENTENCE, "source": "en", "target": "fr"}),
    ("query string", "POST", "/translate", "query", {"q": SENTENCE, "source": "en", "target": "fr"}),
    ("source auto", "POST", "/translate", "json", {"q": SENTENCE, "source": "auto", "target": "fr"}),
    ("json fr→en (a second direction)", "POST", "/translate", "json", {"q": FRENCH, "source": "fr", "target": "en"}),
    ("source auto, French", "POST", "/translate", "json", {"q": FRENCH, "source": "auto", "target": "en"}),
    ("paragraph of two sentences", "POST", "/translate", "json", {"q": SENTENCE + " A woman reads a book.",
                                                                  "source": "en", "target": "fr"}),
    ("alternatives 2", "POST", "/translate", "json", {"q": SENTENCE, "source": "en", "target": "fr",
                                                      "alternatives": 2}),
    ("format html", "POST", "/translate", "json", {"q": HTML, "source": "en", "target": "fr", "format": "html"}),
    ("api_key given", "POST", "/translate", "json", {"q": SENTENCE, "source": "en", "target": "fr",
                                                     "api_key": "anything"}),
    ("lower-case source", "POST", "/translate", "json", {"q": "two dogs are playing in the snow",
                                                         "source": "en", "target": "fr"}),
    ("error: missing q", "POST", "/translate", "json", {"source": "en", "target": "fr"}),
    ("error: empty q", "POST", "/translate", "json", {"q": "", "source": "en", "target": "fr"}),
    ("error: unknown source", "POST", "/translate", "json", {"q": SENTENCE, "source": "de", "target": "fr"}),
    ("error: unknown target", "POST", "/translate", "json", {"q": SENTENCE, "source": "en", "target": "es"}),
    ("error: over the character limit", "POST", "/translate", "json", {"q": "a" * 5001, "source": "en",
                                                                       "target": "fr"}),
    ("error: invalid JSON", "POST", "/translate", "raw", b"{not json"),
    ("error: missing source", "POST", "/translate", "json", {"q": SENTENCE, "target": "fr"}),
    ("languages", "GET", "/languages", "query", {}),
    ("detect", "POST", "/detect", "json", {"q": SENTENCE}),
    ("detect form", "POST", "/detect", "form", {"q": "Le chat mange le pain."}),
    ("error: detect without q", "POST", "/detect", "json", {}),
    ("frontend settings", "GET", "/frontend/settings", "query", {}),
]


def send(base: str, method: str, path: str, how: str, params) -> tuple[int, object]:
    url, data, headers = base + path, None, {}
    if how == "json":
        data, headers = json.dumps(params).encode(), {"Content-Type": "application/json"}
    elif how == "raw":
        data, headers = params, {"Content-Type": "application/json"}
    elif how == "form":
        data, headers = urllib.parse.urlencode(params).encode(), {"Content-Type": "application/x-www-form-urlencoded"}
    elif how == "multipart":
        data, kind = _multipart(params)
        headers = {"Content-Type": kind}
    elif params:
        url += "?" + urllib.parse.urlencode(params)
    if method == "POST" and data is None:
        data = b""
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        body = err.read()
        try:
            return err.code, json.loads(body)
        except ValueError:
            return err.code, body[:200].decode("utf-8", "replace")


def shape(value) -> object:
    """The keys and types of an answer, without its values."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lt-url", default="http://127.0.0.1:5000")
    parser.add_argument("--mt-url", default="http://127.0.0.1:8000")
    args = parser.parse_args()
    for base in (args.lt_url, args.mt_url):
        if urllib.parse.urlparse(base).hostname not in ("127.0.0.1", "localhost", "::1"):
            raise SystemExit("loopback only: both servers must run on this machine")
    rows, counts = [], {"status": 0, "shape": 0, "text": 0, "texts": 0}
    for name, method, path, how, params in MATRIX:
        (lt_status, lt), (mt_status, mt) = (send(b, method, path, how, params) for b in (args.lt_url, args.mt_url))
        same_status, same_shape = lt_status == mt_status, shape(lt) == shape(mt)
        texts = isinstance(lt, dict) and "translatedText" in lt and isinstance(mt, dict) and "translatedText" in mt
        same_text = texts and lt["translatedText"] == mt["translatedText"]
        counts["status"] += same_status
        counts["shape"] += same_shape
        counts["texts"] += texts
        counts["text"] += bool(same_text)
        rows.append((name, lt_status, mt_status, same_shape, same_text if texts else None, lt, mt))
    print(f"{'request':<34} {'LT':>4} {'mt':>4}  same keys/types  same translation")
    for name, lt_status, mt_status, same_shape, same_text, lt, mt in rows:
        text = "-" if same_text is None else ("yes" if same_text else "NO")
        print(f"{name:<34} {lt_status:>4} {mt_status:>4}  {'yes' if same_shape else 'NO':<15}  {text}")
        if not same_shape or same_text is False:
            print(f"    LibreTranslate: {json.dumps(lt, ensure_ascii=False)[:300]}")
            print(f"    minitrans:      {json.dumps(mt, ensure_ascii=False)[:300]}")
    n = len(rows)
    print(f"\nsame status {counts['status']}/{n}; same keys and types {counts['shape']}/{n}; "
          f"same translation {counts['text']}/{counts['texts']}")


if __name__ == "__main__":
    main()
