"""The Python client of ratekeeper, a multi-tenant rate-limit server.

>>> from ratekeeper import Client
>>> client = Client("http://127.0.0.1:8080", api_key="...")
>>> decision = client.acquire("orders.create")
>>> decision.allowed
"""

from ._cache import DenialCache
from ._version import __version__
from .aio import AsyncClient
from .client import Client
from .errors import (
    BadRequest,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    RatekeeperError,
    RateLimited,
    TransportError,
    Unauthorized,
    Unavailable,
    UnexpectedResponse,
)
from .models import AllDecision, Decision, Release

__all__ = [
    "AllDecision",
    "AsyncClient",
    "BadRequest",
    "Client",
    "Conflict",
    "Decision",
    "DenialCache",
    "Forbidden",
    "Invalid",
    "NotFound",
    "RateLimited",
    "RatekeeperError",
    "Release",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "UnexpectedResponse",
    "__version__",
]
