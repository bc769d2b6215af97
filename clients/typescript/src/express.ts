import type { Client } from "./client.js";
import type { Decision } from "./decision.js";

/** The part of a response the middleware uses (Express', Connect's or Node's own). */
export interface MiddlewareResponse {
  statusCode: number;
  setHeader(name: string, value: string): unknown;
  end(body?: string): unknown;
}

/** `(req, res, next)`, as Express and Connect call it. */
export type Middleware<Req> = (
  req: Req,
  res: MiddlewareResponse,
  next: (err?: unknown) => void,
) => void;

/** How {@link rateLimit} limits each request. */
export interface RateLimitOptions<Req> {
  client: Client;
  /** The policy to acquire: a name, or a function of the request. */
  resource: string | ((req: Req) => string);
  /** The caller's key for a `per_key` policy (a user, a tenant, an address). */
  key?: (req: Req) => string | undefined;
  /** Permits per request: a number or a function of the request (default 1). */
  permits?: number | ((req: Req) => number);
  /** Overrides the client's fail-open setting when the server cannot be reached. */
  failOpen?: boolean;
  /** Overrides the client's timeout. */
  timeoutMs?: number;
  /**
   * Answers a denied request. The default sends 429 with `Retry-After`, the `RateLimit`
   * headers and an `application/problem+json` body (503 when the denial is degraded: the
   * server could not be reached and the call fails closed).
   */
  onDenied?: (req: Req, res: MiddlewareResponse, decision: Decision) => void;
}

/**
 * An Express (or Connect) middleware that acquires a permit for each request: granted
 * requests go on with the `RateLimit` headers set on their response; denied ones are
 * answered 429 with `Retry-After` and the `RateLimit` headers. Errors of the server (an
 * unknown policy, a bad API key) go to `next(err)`.
 */
export function rateLimit<Req = unknown>(options: RateLimitOptions<Req>): Middleware<Req> {
  const { client } = options;
  return (req, res, next) => {
    let resource: string;
    let key: string | undefined;
    let permits: number;
    try {
      resource = typeof options.resource === "function" ? options.resource(req) : options.resource;
      key = options.key?.(req);
      permits =
        typeof options.permits === "function" ? options.permits(req) : (options.permits ?? 1);
    } catch (err) {
      next(err);
      return;
    }
    client
      .acquire(resource, {
        permits,
        ...(key === undefined ? {} : { key }),
        ...(options.failOpen === undefined ? {} : { failOpen: options.failOpen }),
        ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      })
      .then(
        (decision) => {
          setRateLimitHeaders(res, decision);
          if (decision.allowed) {
            next();
          } else if (options.onDenied) {
            options.onDenied(req, res, decision);
          } else {
            deny(res, resource, decision);
          }
        },
        (err: unknown) => next(err),
      );
  };
}

/** Sets a decision's `RateLimit`, `RateLimit-Policy` (and on a denial `Retry-After`) headers. */
export function setRateLimitHeaders(res: MiddlewareResponse, decision: Decision): void {
  for (const [name, value] of Object.entries(decision.headers)) {
    if (value === undefined) continue;
    if (name === "Retry-After" && decision.allowed) continue;
    res.setHeader(name, value);
  }
  if (!decision.allowed && decision.headers["Retry-After"] === undefined) {
    res.setHeader("Retry-After", String(retryAfterSeconds(decision)));
  }
}

function retryAfterSeconds(decision: Decision): number {
  return Math.max(1, Math.ceil((decision.retryAfterMs ?? 1000) / 1000));
}

function deny(res: MiddlewareResponse, resource: string, decision: Decision): void {
  // A fail-closed answer while ratekeeper cannot be reached is no rate limit: 503.
  res.statusCode = decision.degraded ? 503 : 429;
  res.setHeader("Content-Type", "application/problem+json");
  const seconds = retryAfterSeconds(decision);
  res.end(
    JSON.stringify({
      type: "urn:ratekeeper:problem:rate-limited",
      title: decision.degraded ? "Service Unavailable" : "Too Many Requests",
      status: decision.degraded ? 503 : 429,
      detail: decision.degraded
        ? `the rate limiter of ${resource} cannot be reached; try again in ${seconds} s`
        : `rate limit of ${resource} reached; try again in ${seconds} s`,
    }),
  );
}
