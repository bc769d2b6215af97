/**
 * The rate-limit headers of a reply, raw, by their canonical names: `RateLimit`,
 * `RateLimit-Policy` and `Retry-After`. A header the reply did not carry is absent.
 */
export type RateLimitHeaders = Partial<
  Record<"RateLimit" | "RateLimit-Policy" | "Retry-After", string>
>;

/** The answer to an acquire (or check, or refund): granted or not, and the numbers. */
export interface Decision {
  /** Whether the permits were granted. */
  allowed: boolean;
  /** Permits left after this decision; `null` when unknown (degraded). */
  remaining: number | null;
  /** The policy's `max_permits` for this caller; `null` when unknown. */
  limit: number | null;
  /** When a denial's permits will be there, in ms (0 on a grant); `null` when unknown. */
  retryAfterMs: number | null;
  /** When the bucket will be full again, in ms; `null` when unknown. */
  resetAfterMs: number | null;
  /**
   * `true` when the decision was not the limiter's: the server could not be reached in time
   * (then `allowed` is the call's fail-open setting), or the server's Redis was down and
   * the policy fails open.
   */
  degraded: boolean;
  /** `true` when answered from the local denial cache, without a request. */
  cached: boolean;
  /** The version of the policy that decided; `null` when unknown. */
  policyVersion: number | null;
  /** `false` when the policy is disabled: granted without counting. */
  enforced: boolean;
  /** `true` when the policy is in shadow mode and would have denied (it is granted). */
  shadowDenied: boolean;
  /** The lease of a granted `concurrency` permit, to give back with `release`. */
  leaseId: string | null;
  /** The reply's rate-limit headers, raw. */
  headers: RateLimitHeaders;
}

/** The answer to `acquireAll`: all granted, or none taken. */
export interface AcquireAllResult {
  allowed: boolean;
  /** One decision per item, in order. */
  results: Decision[];
  /** The headers of the most restrictive item. */
  headers: RateLimitHeaders;
}

/** The answer to `release`. */
export interface ReleaseResult {
  released: boolean;
  /** Permits given back. */
  permits: number;
  /** Permits free after the release. */
  remaining: number;
}

const HEADER_NAMES = ["RateLimit", "RateLimit-Policy", "Retry-After"] as const;

/** The rate-limit headers of a fetch `Headers`. */
export function pickHeaders(headers: Headers): RateLimitHeaders {
  const out: RateLimitHeaders = {};
  for (const name of HEADER_NAMES) {
    const value = headers.get(name);
    if (value !== null) out[name] = value;
  }
  return out;
}

function num(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** A decision from one acquire reply body (an object; the fields the server left out are null). */
export function decisionFromBody(body: unknown, headers: RateLimitHeaders): Decision {
  const v = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  return {
    allowed: v.allowed === true,
    remaining: num(v.remaining),
    limit: num(v.limit),
    retryAfterMs: num(v.retry_after_ms),
    resetAfterMs: num(v.reset_after_ms),
    degraded: v.degraded === true,
    cached: false,
    policyVersion: num(v.policy_version),
    enforced: v.enforced !== false,
    shadowDenied: v.shadow_denied === true,
    leaseId: typeof v.lease_id === "string" ? v.lease_id : null,
    headers,
  };
}

/** The decision of a call that did not reach the server, or got no answer in time. */
export function degradedDecision(allowed: boolean): Decision {
  return {
    allowed,
    remaining: null,
    limit: null,
    retryAfterMs: null,
    resetAfterMs: null,
    degraded: true,
    cached: false,
    policyVersion: null,
    enforced: true,
    shadowDenied: false,
    leaseId: null,
    headers: {},
  };
}
