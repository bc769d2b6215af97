"""Fake servers: an httpx mock transport that counts, and a socket that never answers."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

import ratekeeper


class Recorder:
    """An httpx handler answering from a function, keeping every request."""

    def __init__(self, answer: Callable[[httpx.Request, int], httpx.Response]) -> None:
        self.answer = answer
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answer(request, len(self.requests))

    def bodies(self) -> list[Any]:
        return [json.loads(r.content) for r in self.requests]

    def client(self, **kwargs: Any) -> ratekeeper.Client:
        http = httpx.Client(transport=httpx.MockTransport(self))
        return ratekeeper.Client("http://rk.test", "sekret-key", http_client=http, **kwargs)

    def async_client(self, **kwargs: Any) -> ratekeeper.AsyncClient:
        http = httpx.AsyncClient(transport=httpx.MockTransport(self))
        return ratekeeper.AsyncClient("http://rk.test", "sekret-key", http_client=http, **kwargs)


def decision_response(status: int, **body: Any) -> httpx.Response:
    headers = {}
    if status == 429:
        seconds = max(1, -(-int(body.get("retry_after_ms", 0)) // 1000))
        headers["Retry-After"] = str(seconds)
        headers["RateLimit"] = f'"r";r=0;t={seconds}'
        headers["RateLimit-Policy"] = '"r";q=2'
    return httpx.Response(status, json=body, headers=headers)


def problem(status: int, kind: str, detail: str = "detail", **extra: Any) -> httpx.Response:
    body = {
        "type": f"urn:ratekeeper:problem:{kind}",
        "title": kind,
        "status": status,
        "detail": detail,
        **extra,
    }
    return httpx.Response(
        status, content=json.dumps(body), headers={"Content-Type": "application/problem+json"}
    )


@contextmanager
def silent_server() -> Iterator[str]:
    """A server that accepts connections and reads, but never answers. Yields its URL."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


def refused_url() -> str:
    """The URL of a port nothing listens on (connections to it are refused)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"
