"""The errors of the ratekeeper client.

Every error the server answers is an ``application/problem+json`` document whose
``type`` is ``urn:ratekeeper:problem:<kind>``; each status has its own class, and all of
them derive from :class:`RatekeeperError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import Decision

__all__ = [
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Invalid",
    "NotFound",
    "RateLimited",
    "RatekeeperError",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "UnexpectedResponse",
]


class RatekeeperError(Exception):
    """Base class of every error this library raises.

    Attributes:
        status: the HTTP status (``None`` for a transport failure).
        type: the problem type URI, such as ``urn:ratekeeper:problem:not-found``.
        title: the problem's short title.
        detail: what went wrong, for people.
        errors: the invalid fields, as the server lists them (``[{"field", "message"}]``).
    """

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        type: str = "about:blank",
        title: str = "",
        errors: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.errors: list[dict[str, Any]] = list(errors or [])

    @property
    def field(self) -> str | None:
        """The first invalid field the server named, if any."""
        for error in self.errors:
            field = error.get("field")
            if isinstance(field, str):
                return field
        return None

    def __str__(self) -> str:
        parts = []
        if self.status is not None:
            parts.append(str(self.status))
        if self.title:
            parts.append(self.title)
        text = " ".join(parts)
        return f"{text}: {self.detail}" if text else self.detail

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, type={self.type!r}, "
            f"detail={self.detail!r})"
        )


class BadRequest(RatekeeperError):
    """400: the request body was not one the API takes."""


class Unauthorized(RatekeeperError):
    """401: no API key, or an unknown, revoked or expired one."""


class Forbidden(RatekeeperError):
    """403: the key's application is not allowed to use this resource."""


class NotFound(RatekeeperError):
    """404: no such policy, or (on release) no such lease held (``lease-not-held``)."""


class Conflict(RatekeeperError):
    """409: for example a release on a policy that hands out no leases."""


class Invalid(RatekeeperError):
    """422: a field has a value the policy does not accept (see :attr:`field`)."""


class Unavailable(RatekeeperError):
    """503: the server cannot reach its store and the policy fails closed."""


class UnexpectedResponse(RatekeeperError):
    """Any other answer: a status or a body this client does not know."""


class TransportError(RatekeeperError):
    """The server could not be reached or did not answer in time.

    Only refund and release raise it: acquire, check and acquire_all answer a transport
    failure with a degraded :class:`~ratekeeper.Decision` instead.
    """


class RateLimited(RatekeeperError):
    """A lease (or another call that must be granted) was denied.

    ``decision`` is the denial, with ``retry_after_ms``.
    """

    def __init__(self, decision: Decision) -> None:
        degraded = " (degraded: the server could not be reached)" if decision.degraded else ""
        super().__init__(
            f"denied, retry after {decision.retry_after_ms} ms{degraded}",
            status=429,
            type="urn:ratekeeper:problem:rate-limited",
            title="Too Many Requests",
        )
        self.decision = decision


_BY_STATUS: dict[int, type[RatekeeperError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: Invalid,
    503: Unavailable,
}


def error_class(status: int) -> type[RatekeeperError]:
    """The class of the error a problem answer with this status raises."""
    return _BY_STATUS.get(status, UnexpectedResponse)
