"""A FastAPI application limited per user with the RateLimit dependency.

    pip install 'ratekeeper[fastapi]' uvicorn
    RATEKEEPER_API_KEY=... uvicorn examples.fastapi_app:app

Needs a per-key policy named "search" and a global one named "orders.create".
"""

import os

from fastapi import Depends, FastAPI, Request

from ratekeeper import AsyncClient, Decision
from ratekeeper.fastapi import RateLimit

limiter = AsyncClient(
    os.environ.get("RATEKEEPER_URL", "http://127.0.0.1:8080"),
    os.environ["RATEKEEPER_API_KEY"],
    timeout=0.25,
    fail_open=True,  # an outage of the limiter does not take the API down
)


def user_of(request: Request) -> str:
    return request.headers.get("x-user-id") or (request.client.host if request.client else "-")


per_user = RateLimit(limiter, "search", key=user_of)
app = FastAPI()


@app.get("/search")
async def search(q: str, decision: Decision = Depends(per_user)) -> dict[str, object]:
    return {"q": q, "remaining": decision.remaining}


@app.post("/orders", dependencies=[Depends(RateLimit(limiter, "orders.create"))])
async def create_order() -> dict[str, str]:
    return {"status": "created"}
