"""Acquire a permit of orders.create and print the decision.

RATEKEEPER_API_KEY=... python examples/quickstart.py
"""

import os

from ratekeeper import Client

url = os.environ.get("RATEKEEPER_URL", "http://127.0.0.1:8080")
api_key = os.environ["RATEKEEPER_API_KEY"]

with Client(url, api_key) as client:
    decision = client.acquire("orders.create")
    print(
        f"allowed={decision.allowed} remaining={decision.remaining} "
        f"limit={decision.limit} retry_after_ms={decision.retry_after_ms}"
    )
