"""The async client: several acquires at once, then a wait for a permit.

RATEKEEPER_API_KEY=... python examples/async_quickstart.py
"""

import asyncio
import os

from ratekeeper import AsyncClient


async def main() -> None:
    url = os.environ.get("RATEKEEPER_URL", "http://127.0.0.1:8080")
    async with AsyncClient(url, os.environ["RATEKEEPER_API_KEY"]) as client:
        decisions = await asyncio.gather(*(client.acquire("orders.create") for _ in range(3)))
        for decision in decisions:
            print(f"allowed={decision.allowed} cached={decision.cached}")
        waited = await client.acquire("orders.create", wait=10)
        print(f"after waiting up to 10 s: allowed={waited.allowed}")


asyncio.run(main())
