import {
  type AcquireAllResult,
  type Decision,
  type ReleaseResult,
  decisionFromBody,
  degradedDecision,
  pickHeaders,
} from "./decision.js";
import { type Clock, DenialCache, monotonicClock } from "./denial-cache.js";
import {
  RateLimited,
  type RatekeeperError,
  TransportError,
  UnexpectedResponse,
  errorFromResponse,
} from "./errors.js";
import { VERSION } from "./version.js";

/** How a {@link Client} is set up. */
export interface ClientOptions {
  /** The server's base URL, such as `http://127.0.0.1:8080`. */
  url: string;
  /** The application's API key (sent as a bearer token; never shown by `toString`). */
  apiKey: string;
  /** How long one call may take, retries included, in ms (default 1000). */
  timeoutMs?: number;
  /**
   * What an acquire answers when the server cannot be reached in time: `true` grants
   * (degraded), `false` denies (degraded). Default `false`; each call may override it.
   */
  failOpen?: boolean;
  /** How many denials the local denial cache holds (default 10,000; 0 turns it off). */
  denialCacheSize?: number;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
}

/** Options of one acquire (and of `check`, `lease`). */
export interface AcquireOptions {
  /** Permits to take (default 1; 0 only checks). */
  permits?: number;
  /** The caller's key, for a `per_key` policy (a user, a tenant...). */
  key?: string;
  /** Overrides the client's `failOpen` for this call. */
  failOpen?: boolean;
  /** Overrides the client's `timeoutMs` for each request of this call. */
  timeoutMs?: number;
  /**
   * Wait up to this many ms for the permits: on a denial whose `retryAfterMs` fits in what
   * is left of it, sleep that long and ask again; otherwise answer the denial at once.
   * Default 0 (never wait).
   */
  waitMs?: number;
}

/** One item of {@link Client.acquireAll}. */
export interface AcquireItem {
  resource: string;
  key?: string;
  /** Default 1; 0 only checks. */
  permits?: number;
}

/** Options of `acquireAll`. */
export interface CallOptions {
  failOpen?: boolean;
  timeoutMs?: number;
}

/** Options of `refund` and `release`. */
export interface KeyOptions {
  key?: string;
  timeoutMs?: number;
}

/** A granted lease: give it back with `release()`, or let `await using` do it. */
export interface Lease {
  readonly resource: string;
  readonly decision: Decision;
  /** Gives the permits back (once; later calls do nothing). */
  release(): Promise<void>;
}

const MAX_RETRIES = 2;
const RETRY_BASE_MS = 50;
const DEFAULT_TIMEOUT_MS = 1000;

/** The asyncDispose symbol where the runtime has one (Node 20.4+, recent edge runtimes). */
const asyncDispose: symbol | undefined = (Symbol as { asyncDispose?: symbol }).asyncDispose;

interface Reply {
  status: number;
  text: string;
  headers: Headers;
}

/**
 * A client of ratekeeper's acquire API. One client per API key; share it: it keeps a
 * local cache of denials, and every call is independent.
 */
export class Client {
  readonly url: string;
  readonly timeoutMs: number;
  readonly failOpen: boolean;
  readonly denialCache: DenialCache;
  readonly #apiKey: string;
  readonly #fetch: typeof fetch;
  readonly #clock: Clock;

  constructor(options: ClientOptions) {
    if (typeof options?.url !== "string" || options.url === "") {
      throw new TypeError("ratekeeper Client: `url` is required");
    }
    if (typeof options.apiKey !== "string" || options.apiKey === "") {
      throw new TypeError("ratekeeper Client: `apiKey` is required");
    }
    this.url = options.url.replace(/\/+$/, "");
    this.#apiKey = options.apiKey;
    this.timeoutMs = positive(options.timeoutMs, DEFAULT_TIMEOUT_MS);
    this.failOpen = options.failOpen ?? false;
    this.#clock = monotonicClock;
    this.denialCache = new DenialCache(options.denialCacheSize ?? 10_000, this.#clock);
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") {
      throw new TypeError("ratekeeper Client: no global fetch; pass `fetch` in the options");
    }
    this.#fetch = f;
  }

  /**
   * Asks for permits of `resource`. Granted and denied are both decisions; a transport
   * failure is a degraded decision (`allowed` is the fail-open setting). Throws a
   * {@link RatekeeperError} subclass when the server refuses the request (unknown policy,
   * bad key, invalid permits...).
   */
  async acquire(resource: string, options: AcquireOptions = {}): Promise<Decision> {
    const permits = options.permits ?? 1;
    const waitMs = options.waitMs ?? 0;
    const start = this.#clock();
    for (;;) {
      const decision = await this.#acquireOnce(resource, permits, options);
      if (decision.allowed || decision.degraded || waitMs <= 0) return decision;
      const retry = decision.retryAfterMs;
      const left = start + waitMs - this.#clock();
      if (retry === null || retry > left || left < 1) return decision;
      // Never zero, never a spin: at least retryAfterMs plus a little jitter, within the bound.
      const jitter = 1 + Math.random() * Math.min(25, Math.max(1, retry / 10));
      await sleep(Math.min(Math.max(retry, 1) + jitter, left));
    }
  }

  /** Whether one permit would be granted now, taking nothing (an acquire of 0 permits). */
  check(resource: string, options: Omit<AcquireOptions, "permits"> = {}): Promise<Decision> {
    return this.acquire(resource, { ...options, permits: 0 });
  }

  /**
   * Asks for several permits at once, all or nothing: `allowed` when every item is granted,
   * else nothing is taken. Always asks the server; the denials it answers are remembered.
   */
  async acquireAll(items: AcquireItem[], options: CallOptions = {}): Promise<AcquireAllResult> {
    const failOpen = options.failOpen ?? this.failOpen;
    const all = items.map((item) => {
      const body: Record<string, unknown> = {
        resource: item.resource,
        permits: item.permits ?? 1,
      };
      if (item.key !== undefined) body.key = item.key;
      return body;
    });
    let reply: Reply;
    try {
      reply = await this.#send("/v1/acquire", { all }, options.timeoutMs);
    } catch (err) {
      if (err instanceof TransportError) {
        return {
          allowed: failOpen,
          results: items.map(() => degradedDecision(failOpen)),
          headers: {},
        };
      }
      throw err;
    }
    if (reply.status !== 200 && reply.status !== 429) {
      throw errorFromResponse(reply.status, reply.text);
    }
    const body = parseJson(reply);
    const results = (body as { results?: unknown }).results;
    if (typeof body.allowed !== "boolean" || !Array.isArray(results)) {
      throw unexpected(reply, "not an acquire-all reply");
    }
    const decisions = results.map((r: unknown) => decisionFromBody(r, {}));
    decisions.forEach((d, i) => {
      const item = items[i];
      if (item !== undefined) {
        this.denialCache.record(item.resource, item.key, item.permits ?? 1, d);
      }
    });
    return { allowed: body.allowed, results: decisions, headers: pickHeaders(reply.headers) };
  }

  /**
   * Gives back permits a grant took but the work did not use. Throws
   * {@link TransportError} when the server cannot be reached.
   */
  async refund(resource: string, permits: number, options: KeyOptions = {}): Promise<Decision> {
    const body: Record<string, unknown> = { resource, permits };
    if (options.key !== undefined) body.key = options.key;
    const reply = await this.#send("/v1/refund", body, options.timeoutMs);
    if (reply.status !== 200) throw errorFromResponse(reply.status, reply.text);
    this.denialCache.forget(resource, options.key);
    return decisionFromBody(parseJson(reply), pickHeaders(reply.headers));
  }

  /**
   * Gives a `concurrency` lease back. Throws {@link NotFound} (`kind` `lease-not-held`) when
   * the lease is not held, {@link TransportError} when the server cannot be reached.
   */
  async release(
    resource: string,
    leaseId: string,
    options: KeyOptions = {},
  ): Promise<ReleaseResult> {
    const body: Record<string, unknown> = { resource, lease_id: leaseId };
    if (options.key !== undefined) body.key = options.key;
    const reply = await this.#send("/v1/release", body, options.timeoutMs);
    if (reply.status !== 200) throw errorFromResponse(reply.status, reply.text);
    this.denialCache.forget(resource, options.key);
    const v = parseJson(reply);
    if (typeof v.permits !== "number" || typeof v.remaining !== "number") {
      throw unexpected(reply, "not a release reply");
    }
    return { released: v.released === true, permits: v.permits, remaining: v.remaining };
  }

  /**
   * Acquires a permit (of a `concurrency` policy, typically) and returns a {@link Lease} to
   * give it back. Throws {@link RateLimited} when it is not granted. With `await using`
   * (where the runtime has `Symbol.asyncDispose`) the lease is released at the end of the
   * block.
   */
  async acquireLease(resource: string, options: AcquireOptions = {}): Promise<Lease> {
    const decision = await this.acquire(resource, options);
    if (!decision.allowed) throw new RateLimited(resource, decision);
    let released = false;
    const release = async (): Promise<void> => {
      if (released) return;
      released = true;
      if (decision.leaseId === null) return; // degraded, or a policy without leases
      await this.release(resource, decision.leaseId, {
        key: options.key,
        timeoutMs: options.timeoutMs,
      });
    };
    const lease: Lease = { resource, decision, release };
    if (asyncDispose !== undefined) {
      Object.defineProperty(lease, asyncDispose, { value: release });
    }
    return lease;
  }

  /**
   * Acquires a permit, runs `fn`, and releases the lease when `fn` settles, whatever its
   * outcome. Throws {@link RateLimited} (without running `fn`) when it is not granted. A
   * failure to release (the lease then expires after the policy's `lease_ttl_ms`) is thrown
   * only when `fn` succeeded and the server answered; transport failures there are ignored.
   */
  lease<T>(resource: string, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  lease<T>(
    resource: string,
    options: AcquireOptions,
    fn: (lease: Lease) => Promise<T> | T,
  ): Promise<T>;
  async lease<T>(
    resource: string,
    optionsOrFn: AcquireOptions | ((lease: Lease) => Promise<T> | T),
    maybeFn?: (lease: Lease) => Promise<T> | T,
  ): Promise<T> {
    const options = typeof optionsOrFn === "function" ? {} : optionsOrFn;
    const fn = typeof optionsOrFn === "function" ? optionsOrFn : maybeFn;
    if (fn === undefined) throw new TypeError("lease: a function to run is required");
    const lease = await this.acquireLease(resource, options);
    let result: T;
    try {
      result = await fn(lease);
    } catch (err) {
      await lease.release().catch(() => undefined);
      throw err;
    }
    try {
      await lease.release();
    } catch (err) {
      if (!(err instanceof TransportError)) throw err;
    }
    return result;
  }

  toString(): string {
    return `ratekeeper Client(${this.url})`;
  }

  toJSON(): Record<string, unknown> {
    return { url: this.url, timeoutMs: this.timeoutMs, failOpen: this.failOpen };
  }

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }

  async #acquireOnce(
    resource: string,
    permits: number,
    options: AcquireOptions,
  ): Promise<Decision> {
    const cached = this.denialCache.lookup(resource, options.key, permits);
    if (cached !== undefined) return cached;
    const body: Record<string, unknown> = { resource, permits };
    if (options.key !== undefined) body.key = options.key;
    let reply: Reply;
    try {
      reply = await this.#send("/v1/acquire", body, options.timeoutMs);
    } catch (err) {
      if (err instanceof TransportError) return degradedDecision(options.failOpen ?? this.failOpen);
      throw err;
    }
    if (reply.status !== 200 && reply.status !== 429) {
      throw errorFromResponse(reply.status, reply.text);
    }
    const parsed = parseJson(reply);
    if (typeof parsed.allowed !== "boolean") throw unexpected(reply, "not an acquire reply");
    const decision = decisionFromBody(parsed, pickHeaders(reply.headers));
    this.denialCache.record(resource, options.key, permits, decision);
    return decision;
  }

  /** POSTs `body`; throws TransportError when no complete reply came within the timeout. */
  async #send(path: string, body: unknown, timeoutMs: number | undefined): Promise<Reply> {
    const budget = positive(timeoutMs, this.timeoutMs);
    const deadline = this.#clock() + budget;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), budget);
    const init: RequestInit = {
      method: "POST",
      headers: {
        authorization: `Bearer ${this.#apiKey}`,
        "content-type": "application/json",
        accept: "application/json, application/problem+json",
        "user-agent": `ratekeeper-typescript/${VERSION}`,
      },
      body: JSON.stringify(body),
      signal: controller.signal,
    };
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          const response = await this.#fetch(this.url + path, init);
          const text = await response.text();
          return { status: response.status, text, headers: response.headers };
        } catch (err) {
          if (controller.signal.aborted) {
            throw new TransportError(`no answer from ${this.url} within ${budget} ms`, {
              cause: err,
              timedOut: true,
            });
          }
          if (attempt < MAX_RETRIES && isConnectionRefused(err)) {
            // The request surely did not reach the server: try again, within the budget.
            const delay = RETRY_BASE_MS * 2 ** attempt * (0.5 + Math.random());
            if (this.#clock() + delay < deadline) {
              await sleep(delay);
              if (!controller.signal.aborted) continue;
            }
          }
          throw new TransportError(`cannot reach ${this.url}: ${describe(err)}`, {
            cause: err,
            timedOut: controller.signal.aborted,
          });
        }
      }
    } finally {
      clearTimeout(timer);
    }
  }
}

function positive(value: number | undefined, fallback: number): number {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : fallback;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function parseJson(reply: Reply): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(reply.text);
  } catch {
    throw unexpected(reply, "the body is not JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw unexpected(reply, "the body is not a JSON object");
  }
  return value as Record<string, unknown>;
}

function unexpected(reply: Reply, why: string): RatekeeperError {
  return new UnexpectedResponse(`unexpected reply (HTTP ${reply.status}): ${why}`, {
    status: reply.status,
    detail: why,
  });
}

/**
 * Whether a fetch failure is a refused connection (Node's fetch: a TypeError whose cause has
 * code ECONNREFUSED, or an AggregateError of such when a name has several addresses).
 */
export function isConnectionRefused(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e !== null && typeof e === "object" && depth < 5; depth++) {
    const o = e as { code?: unknown; errors?: unknown; cause?: unknown };
    if (o.code === "ECONNREFUSED") return true;
    if (Array.isArray(o.errors) && o.errors.length > 0) {
      return o.errors.every((x: unknown) => isConnectionRefused(x));
    }
    e = o.cause;
  }
  return false;
}

function describe(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 4; depth++) {
    if (e instanceof Error) {
      const code = (e as { code?: unknown }).code;
      parts.push(typeof code === "string" ? `${e.message} (${code})` : e.message);
      e = e.cause;
    } else {
      parts.push(typeof e === "string" ? e : "unknown error");
      break;
    }
  }
  return parts.filter((p) => p !== "").join(": ") || "fetch failed";
}
