"""A fast OpenAI-compatible embeddings server for benchmarks, in a process of its own.

    python -m bench.fast_embedder [--dimension 384] [--frozen]

Prints its base URL (`http://127.0.0.1:<port>/v1`) as the first line of standard output, then
answers `POST /v1/embeddings` until it is terminated: one unit vector per input, decided by the
text alone (`vector_for`), as base64 little-endian float32 when `encoding_format` is `base64`
(what Cari asks for) and as JSON numbers otherwise. It stands for an embedding service that
answers at once, so that a benchmark measures everything but the model. With `--frozen` it
stands for a hung one: it accepts every connection, reads the request and never answers.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import numpy.typing as npt

DIMENSION = 384
MODEL = "bench-fast-embedder"


def vector_for(text: str, dimension: int = DIMENSION) -> npt.NDArray[np.float32]:
    """The unit vector answered for `text`: Gaussian, seeded by a hash of the text."""
    seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass")).digest()[:8])
    vector = np.random.default_rng(seed).standard_normal(dimension)
    return (vector / np.linalg.norm(vector)).astype("<f4")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    dimension = DIMENSION
    frozen = False
    never = threading.Event()  # never set: what a frozen server's answers wait for


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the SDK reuses its connections
    server: _Server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.server.frozen:
            self.server.never.wait()
        texts = body["input"]
        dimension = int(body.get("dimensions") or self.server.dimension)
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(texts):
            vector = vector_for(text, dimension)
            embedding: Any = (
                base64.b64encode(vector.tobytes()).decode() if as_base64 else vector.tolist()
            )
            data.append({"object": "embedding", "index": i, "embedding": embedding})
        answer = json.dumps(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", MODEL),
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: a line per request would cost more than the answer."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dimension", type=int, default=DIMENSION)
    parser.add_argument("--frozen", action="store_true", help="accept requests, never answer")
    args = parser.parse_args()
    server = _Server(("127.0.0.1", 0), _Handler)
    server.dimension = args.dimension
    server.frozen = args.frozen
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
