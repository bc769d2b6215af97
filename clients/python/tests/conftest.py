from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from rkserver import Server, find_binary, redis_reachable

_names = itertools.count()


@dataclass
class Live:
    """A running server and an application (its key) to call it as."""

    server: Server
    app: str
    key: str

    @property
    def url(self) -> str:
        return self.server.url

    def policy(self, **fields: Any) -> str:
        """Create a policy owned by the app (a unique name) and return its name."""
        name = f"{self.app}.p{next(_names)}"
        self.server.policy({"name": name, "owner_app": self.app, **fields})
        return name


@pytest.fixture(scope="session")
def live() -> Iterator[Live]:
    """A real server: skipped when there is no binary or no Redis, unless required."""
    binary = find_binary()
    missing = None
    if binary is None:
        missing = "no ratekeeper binary (set RK_CLIENTS_BIN)"
    elif not redis_reachable():
        missing = "no Redis reachable"
    if missing:
        if os.environ.get("RK_REQUIRE_SERVER"):
            pytest.fail(missing)
        pytest.skip(missing)
    assert binary is not None
    server = Server(binary)
    try:
        server.start()
        app = "pytests"
        key = server.app_key(app)
        yield Live(server, app, key)
    finally:
        server.stop()
