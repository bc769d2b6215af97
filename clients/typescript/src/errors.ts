import type { Decision } from "./decision.js";

/** One invalid field of a request, as the server names it. */
export interface FieldError {
  field: string;
  message: string;
}

/** What a problem carries (RFC 9457 `application/problem+json`). */
export interface ProblemDetails {
  status?: number;
  type?: string;
  title?: string;
  detail?: string;
  /** The first invalid field, when the server names one. */
  field?: string;
  errors?: FieldError[];
}

/**
 * The base of every error this library throws. A rate-limit denial is not an error: it is a
 * {@link Decision} with `allowed: false` (except for {@link Client.lease}, which throws
 * {@link RateLimited}).
 */
export class RatekeeperError extends Error {
  /** The HTTP status, or 0 when the server gave none (transport failures). */
  readonly status: number;
  /** The problem type URI, `urn:ratekeeper:problem:<kind>`, or "" when there is none. */
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  /** The first invalid field, when the server named one. */
  readonly field: string | undefined;
  /** Every invalid field the server named (empty when none). */
  readonly errors: FieldError[];

  constructor(message: string, problem: ProblemDetails = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.status = problem.status ?? 0;
    this.type = problem.type ?? "";
    this.title = problem.title ?? "";
    this.detail = problem.detail ?? "";
    this.errors = problem.errors ?? [];
    this.field = problem.field ?? this.errors[0]?.field;
  }

  /** The kind of problem: the last part of `type` (`validation`, `lease-not-held`...). */
  get kind(): string {
    const prefix = "urn:ratekeeper:problem:";
    return this.type.startsWith(prefix) ? this.type.slice(prefix.length) : this.type;
  }
}

/** 400: the request body did not fit the API (a bug in the caller or this library). */
export class BadRequest extends RatekeeperError {}
/** 401: no API key, or an unknown, revoked or expired one. */
export class Unauthorized extends RatekeeperError {}
/** 403: the key's application is not among the policy's `allowed_apps`. */
export class Forbidden extends RatekeeperError {}
/** 404: no such policy, or (release) no such lease held (`kind` is `lease-not-held`). */
export class NotFound extends RatekeeperError {}
/** 409: the policy hands out no leases (`kind` is `not-a-lease-policy`). */
export class Conflict extends RatekeeperError {}
/** 422: invalid input; `errors` names each field (`permits`, `key`, `all[1].permits`...). */
export class Invalid extends RatekeeperError {}
/** 503: the server cannot reach its Redis and the policy fails closed. */
export class Unavailable extends RatekeeperError {}
/** Any other status, or a reply that is not what the API promises. */
export class UnexpectedResponse extends RatekeeperError {}

/**
 * The server could not be reached, did not answer in time, or broke the connection. Only
 * `refund` and `release` throw it: acquires answer a degraded {@link Decision} instead.
 */
export class TransportError extends RatekeeperError {
  /** `true` when the call ran out of time (rather than failing to connect). */
  readonly timedOut: boolean;

  constructor(message: string, options: { cause?: unknown; timedOut: boolean }) {
    super(message, {}, { cause: options.cause });
    this.timedOut = options.timedOut;
  }
}

/** Thrown by {@link Client.lease} when the permit is not granted; carries the denial. */
export class RateLimited extends RatekeeperError {
  readonly decision: Decision;

  constructor(resource: string, decision: Decision) {
    const after = decision.retryAfterMs === null ? "" : `; retry after ${decision.retryAfterMs} ms`;
    super(`rate limited: ${resource}${after}`, {
      status: 429,
      title: "Too Many Requests",
      detail: `no permit of ${JSON.stringify(resource)} is free now`,
    });
    this.decision = decision;
  }
}

const byStatus: Record<number, new (message: string, problem: ProblemDetails) => RatekeeperError> =
  {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: Invalid,
    503: Unavailable,
  };

/** The error of a reply that is not a decision: the class by status, the fields from the body. */
export function errorFromResponse(status: number, body: string): RatekeeperError {
  const problem = parseProblem(body);
  problem.status = status;
  const Class = byStatus[status] ?? UnexpectedResponse;
  const what = problem.title ?? `HTTP ${status}`;
  const message = problem.detail ? `${status} ${what}: ${problem.detail}` : `${status} ${what}`;
  return new Class(message, problem);
}

function parseProblem(body: string): ProblemDetails {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return {};
  }
  if (typeof value !== "object" || value === null) return {};
  const v = value as Record<string, unknown>;
  const problem: ProblemDetails = {};
  if (typeof v.type === "string") problem.type = v.type;
  if (typeof v.title === "string") problem.title = v.title;
  if (typeof v.detail === "string") problem.detail = v.detail;
  if (typeof v.field === "string") problem.field = v.field;
  if (Array.isArray(v.errors)) {
    problem.errors = v.errors.flatMap((e: unknown) => {
      if (typeof e !== "object" || e === null) return [];
      const fe = e as Record<string, unknown>;
      return typeof fe.field === "string"
        ? [{ field: fe.field, message: typeof fe.message === "string" ? fe.message : "" }]
        : [];
    });
  }
  return problem;
}
