import type { Decision, RateLimitHeaders } from "./decision.js";

interface Entry {
  /** The fewest permits known to be denied until `until`. */
  permits: number;
  /** Clock reading (ms) when the denied permits will be there. */
  until: number;
  limit: number | null;
  policyVersion: number | null;
  headers: RateLimitHeaders;
}

/** A monotonic clock in milliseconds. */
export type Clock = () => number;

export const monotonicClock: Clock = () =>
  typeof globalThis.performance?.now === "function" ? globalThis.performance.now() : Date.now();

/**
 * Remembers denials, so that asking again for the same resource and key before the
 * denial's retry time is answered without a request.
 *
 * After a denial (not degraded, `retryAfterMs > 0`) of `permits` permits of (resource,
 * key), a call for (resource, key) with at least `permits` permits before the retry time is
 * answered locally: `allowed: false`, `cached: true`, `remaining: 0`, the time still to wait
 * as `retryAfterMs`. A grant, a refund or a release on (resource, key) forgets the denial.
 * At most `maxSize` denials are kept: the expired ones are dropped first, then the oldest.
 */
export class DenialCache {
  readonly maxSize: number;
  private readonly entries = new Map<string, Entry>();
  private readonly clock: Clock;

  constructor(maxSize = 10_000, clock: Clock = monotonicClock) {
    this.maxSize = Math.max(0, Math.floor(maxSize));
    this.clock = clock;
  }

  /** How many denials are held (expired ones included until they are dropped). */
  get size(): number {
    return this.entries.size;
  }

  /** The local answer for this call, or `undefined` when it must go to the server. */
  lookup(resource: string, key: string | undefined, permits: number): Decision | undefined {
    if (this.maxSize === 0) return undefined;
    const id = cacheKey(resource, key);
    const entry = this.entries.get(id);
    if (entry === undefined) return undefined;
    const left = entry.until - this.clock();
    if (left <= 0) {
      this.entries.delete(id);
      return undefined;
    }
    if (permits < entry.permits) return undefined;
    const retryAfterMs = Math.ceil(left);
    return {
      allowed: false,
      remaining: 0,
      limit: entry.limit,
      retryAfterMs,
      resetAfterMs: null,
      degraded: false,
      cached: true,
      policyVersion: entry.policyVersion,
      enforced: true,
      shadowDenied: false,
      leaseId: null,
      headers: cachedHeaders(entry.headers, retryAfterMs),
    };
  }

  /** Learns from a decision of the server: remembers a denial, forgets on a grant. */
  record(resource: string, key: string | undefined, permits: number, decision: Decision): void {
    if (this.maxSize === 0 || decision.degraded || decision.cached) return;
    const id = cacheKey(resource, key);
    if (decision.allowed) {
      this.entries.delete(id);
      return;
    }
    const retry = decision.retryAfterMs;
    if (retry === null || retry <= 0) return;
    const now = this.clock();
    const entry: Entry = {
      permits,
      until: now + retry,
      limit: decision.limit,
      policyVersion: decision.policyVersion,
      headers: decision.headers,
    };
    const old = this.entries.get(id);
    if (old !== undefined) {
      this.entries.delete(id);
      // A smaller denial is the stronger statement, while it lasts.
      if (old.until > now && old.permits < permits && old.until >= entry.until)
        entry.permits = old.permits;
    } else if (this.entries.size >= this.maxSize) {
      this.evict(now);
    }
    this.entries.set(id, entry);
  }

  /** Forgets the denial of (resource, key), after a refund or a release. */
  forget(resource: string, key: string | undefined): void {
    this.entries.delete(cacheKey(resource, key));
  }

  /** Forgets every denial. */
  clear(): void {
    this.entries.clear();
  }

  private evict(now: number): void {
    for (const [id, entry] of this.entries) {
      if (entry.until <= now) this.entries.delete(id);
    }
    // Maps iterate in insertion order, and an entry is re-inserted when renewed: oldest first.
    for (const id of this.entries.keys()) {
      if (this.entries.size < this.maxSize) break;
      this.entries.delete(id);
    }
  }
}

function cacheKey(resource: string, key: string | undefined): string {
  return key === undefined ? `${resource}\n` : `${resource}\n${key}`;
}

/** The headers of a remembered denial, with the times brought up to now. */
function cachedHeaders(original: RateLimitHeaders, retryAfterMs: number): RateLimitHeaders {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  const out: RateLimitHeaders = { ...original, "Retry-After": String(seconds) };
  if (original.RateLimit !== undefined) {
    out.RateLimit = original.RateLimit.replace(/;t=\d+/, `;t=${seconds}`);
  }
  return out;
}
