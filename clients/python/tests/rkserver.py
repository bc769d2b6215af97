"""Start a real ratekeeper server for the tests, and set it up through its admin API.

The binary is ``$RK_CLIENTS_BIN``, else ``ratekeeper`` on ``PATH``, else the
repository's ``target/release`` or ``target/debug`` build. It needs Redis
(``$RK_TEST_REDIS_URL``, default ``redis://127.0.0.1:6379``); the tests use a key
prefix of their own and a fresh SQLite database.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx

REPO_ROOT = Path(__file__).resolve().parents[3]
ADMIN_PASSWORD = "pw-long-enough-123"


def find_binary() -> str | None:
    explicit = os.environ.get("RK_CLIENTS_BIN")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    on_path = shutil.which("ratekeeper")
    if on_path:
        return on_path
    for profile in ("release", "debug"):
        candidate = REPO_ROOT / "target" / profile / "ratekeeper"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def redis_url() -> str:
    return os.environ.get("RK_TEST_REDIS_URL", "redis://127.0.0.1:6379")


def redis_reachable() -> bool:
    url = urlparse(redis_url().split(",")[0])
    try:
        with socket.create_connection((url.hostname or "127.0.0.1", url.port or 6379), 1):
            return True
    except OSError:
        return False


class Server:
    """One ratekeeper process with an admin token, and the calls that make apps and policies."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="rk-py-tests-")
        # Under the repository's test run (RK_TEST_RUN), a prefix its cleanup sweeps.
        run = os.environ.get("RK_TEST_RUN")
        owner = f"rktest-{run}-" if run else "rkclient-"
        self.prefix = f"{owner}py-{uuid.uuid4().hex[:10]}"
        # The server refuses RATEKEEPER_* variables it does not know: pass only ours.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RATEKEEPER_")}
        self.env.update(
            RATEKEEPER_REDIS_URL=redis_url(),
            RATEKEEPER_LISTEN="127.0.0.1:0",
            RATEKEEPER_DATABASE_URL=f"sqlite://{self.dir}/rk.db?mode=rwc",
            RATEKEEPER_REDIS_PREFIX=self.prefix,
            RATEKEEPER_WORKERS="1",
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.token = ""
        self.admin: httpx.Client | None = None

    def start(self) -> None:
        self._cli(["user", "create", "admin", "--admin"], stdin=f"{ADMIN_PASSWORD}\n")
        log_path = Path(self.dir) / "serve.log"
        log = open(log_path, "wb")  # noqa: SIM115 - kept open for the process
        self.proc = subprocess.Popen(
            [self.binary, "serve"], env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = log_path.read_text(errors="replace")
            found = re.search(r"ratekeeper listening address=(\S+)", text)
            if found:
                self.url = f"http://{found.group(1)}"
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"ratekeeper exited: {text[-2000:]}")
            time.sleep(0.1)
        else:
            raise RuntimeError("ratekeeper did not start within 60 s")
        out = self._cli(["token", "create", "admin"])
        self.token = [ln.strip() for ln in out.splitlines() if ln.strip()][-1]
        self.admin = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=10,
        )

    def stop(self) -> None:
        if self.admin is not None:
            self.admin.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def _cli(self, args: list[str], stdin: str | None = None) -> str:
        done = subprocess.run(
            [self.binary, *args],
            env=self.env,
            input=stdin.encode() if stdin else None,
            capture_output=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"ratekeeper {' '.join(args)}: {done.stderr.decode()[-2000:]}")
        return done.stdout.decode()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        assert self.admin is not None
        response = self.admin.post(path, json=body)
        if response.status_code >= 300:
            raise RuntimeError(f"POST {path}: {response.status_code} {response.text}")
        data: dict[str, Any] = response.json()
        return data

    def app_key(self, slug: str) -> str:
        """Make application ``slug`` and return a new API key of it."""
        self._post("/api/v1/apps", {"slug": slug, "name": slug, "description": ""})
        key: str = self._post(f"/api/v1/apps/{slug}/keys", {"label": "tests"})["key"]
        return key

    def policy(self, policy: dict[str, Any]) -> None:
        self._post("/api/v1/policies", policy)
