"""A Starlette application behind the ASGI middleware, limited per client address.

    pip install ratekeeper starlette uvicorn
    RATEKEEPER_API_KEY=... uvicorn examples.asgi_app:app

Needs a per-key policy named "api.requests".
"""

import os
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from ratekeeper import AsyncClient
from ratekeeper.asgi import RateLimitMiddleware


async def hello(request: Request) -> PlainTextResponse:
    return PlainTextResponse("hello\n")


def client_ip(scope: Any) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def resource(scope: Any) -> str | None:
    return None if scope["path"] == "/healthz" else "api.requests"  # health checks go free


app = RateLimitMiddleware(
    Starlette(routes=[Route("/", hello), Route("/healthz", hello)]),
    client=AsyncClient(
        os.environ.get("RATEKEEPER_URL", "http://127.0.0.1:8080"),
        os.environ["RATEKEEPER_API_KEY"],
    ),
    resource=resource,
    key=client_ip,
)
