import assert from "node:assert/strict";
import { test } from "node:test";

import { type Decision, DenialCache } from "ratekeeper-client";

function decision(fields: Partial<Decision>): Decision {
  return {
    allowed: false,
    remaining: 0,
    limit: 5,
    retryAfterMs: 1000,
    resetAfterMs: 5000,
    degraded: false,
    cached: false,
    policyVersion: 3,
    enforced: true,
    shadowDenied: false,
    leaseId: null,
    headers: {
      RateLimit: '"r";r=0;t=1',
      "RateLimit-Policy": '"r";q=5',
      "Retry-After": "1",
    },
    ...fields,
  };
}

function clock(start = 1000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

test("a denial answers later calls of as many permits or more, until its retry time", () => {
  const c = clock();
  const cache = new DenialCache(10, c.now);
  cache.record("r", "k", 2, decision({ retryAfterMs: 3000 }));
  const hit = cache.lookup("r", "k", 2);
  assert.ok(hit);
  assert.equal(hit.allowed, false);
  assert.equal(hit.cached, true);
  assert.equal(hit.remaining, 0);
  assert.equal(hit.limit, 5);
  assert.equal(hit.retryAfterMs, 3000);
  assert.ok(cache.lookup("r", "k", 5), "more permits are denied too");
  assert.equal(cache.lookup("r", "k", 1), undefined, "fewer permits may be granted: ask");
  assert.equal(cache.lookup("r", "other", 2), undefined, "another key is another bucket");
  assert.equal(cache.lookup("r", undefined, 2), undefined, "no key is another bucket");
  c.advance(1200);
  assert.equal(cache.lookup("r", "k", 2)?.retryAfterMs, 1800, "the time left, not the original");
  c.advance(1800);
  assert.equal(cache.lookup("r", "k", 2), undefined, "expired at its retry time");
  assert.equal(cache.size, 0, "an expired entry is dropped when met");
});

test("a cached denial's headers say the time left", () => {
  const c = clock();
  const cache = new DenialCache(10, c.now);
  cache.record("r", undefined, 1, decision({ retryAfterMs: 4500 }));
  c.advance(1000);
  const hit = cache.lookup("r", undefined, 1);
  assert.equal(hit?.headers["Retry-After"], "4");
  assert.equal(hit?.headers.RateLimit, '"r";r=0;t=4');
  assert.equal(hit?.headers["RateLimit-Policy"], '"r";q=5');
});

test("a grant, a forget (refund, release) and clear drop the denial", () => {
  const cache = new DenialCache(10, clock().now);
  cache.record("r", "k", 1, decision({}));
  cache.record("r", "k", 1, decision({ allowed: true, retryAfterMs: 0, remaining: 3 }));
  assert.equal(cache.lookup("r", "k", 1), undefined);
  cache.record("r", "k", 1, decision({}));
  cache.forget("r", "k");
  assert.equal(cache.lookup("r", "k", 1), undefined);
  cache.record("r", "k", 1, decision({}));
  cache.clear();
  assert.equal(cache.size, 0);
});

test("degraded denials, cached answers and denials without a retry time are not remembered", () => {
  const cache = new DenialCache(10, clock().now);
  cache.record("r", "a", 1, decision({ degraded: true, retryAfterMs: null }));
  cache.record("r", "b", 1, decision({ retryAfterMs: 0 }));
  cache.record("r", "c", 1, decision({ retryAfterMs: null }));
  cache.record("r", "d", 1, decision({ cached: true }));
  assert.equal(cache.size, 0);
});

test("a check's denial (0 permits) answers checks and acquires", () => {
  const cache = new DenialCache(10, clock().now);
  cache.record("r", undefined, 0, decision({}));
  assert.ok(cache.lookup("r", undefined, 0));
  assert.ok(cache.lookup("r", undefined, 3));
});

test("bounded: expired entries go first, then the oldest", () => {
  const c = clock();
  const cache = new DenialCache(3, c.now);
  cache.record("a", undefined, 1, decision({ retryAfterMs: 100 }));
  cache.record("b", undefined, 1, decision({ retryAfterMs: 10_000 }));
  cache.record("c", undefined, 1, decision({ retryAfterMs: 10_000 }));
  c.advance(200); // a has expired
  cache.record("d", undefined, 1, decision({ retryAfterMs: 10_000 }));
  assert.equal(cache.size, 3);
  assert.ok(cache.lookup("b", undefined, 1), "b kept: a, expired, went instead");
  cache.record("e", undefined, 1, decision({ retryAfterMs: 10_000 }));
  assert.equal(cache.size, 3);
  assert.equal(cache.lookup("b", undefined, 1), undefined, "b, the oldest, went");
  for (const r of ["c", "d", "e"]) assert.ok(cache.lookup(r, undefined, 1), r);
  // Renewing an entry makes it the newest.
  cache.record("c", undefined, 1, decision({ retryAfterMs: 10_000 }));
  cache.record("f", undefined, 1, decision({ retryAfterMs: 10_000 }));
  assert.equal(cache.lookup("d", undefined, 1), undefined, "d was the oldest after c's renewal");
  assert.ok(cache.lookup("c", undefined, 1));
});

test("size 0 turns the cache off", () => {
  const cache = new DenialCache(0, clock().now);
  cache.record("r", undefined, 1, decision({}));
  assert.equal(cache.lookup("r", undefined, 1), undefined);
  assert.equal(cache.size, 0);
});
