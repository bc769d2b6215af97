"""Hold a concurrency permit while working, with fail-open for outages.

Needs a concurrency policy, e.g.
    {"name": "reports.export", "owner_app": "shop", "algorithm": "concurrency",
     "max_permits": 2, "lease_ttl_ms": 60000}

    RATEKEEPER_API_KEY=... python examples/lease.py
"""

import os
import time

from ratekeeper import Client, RateLimited

url = os.environ.get("RATEKEEPER_URL", "http://127.0.0.1:8080")

with Client(url, os.environ["RATEKEEPER_API_KEY"], fail_open=True) as client:
    try:
        with client.lease("reports.export", wait=5) as lease:
            print(f"exporting with lease {lease.lease_id} (degraded={lease.degraded})")
            time.sleep(1)
    except RateLimited as denied:
        print(f"too many exports running: retry in {denied.decision.retry_after_ms} ms")
