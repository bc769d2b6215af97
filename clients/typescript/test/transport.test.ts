// Timeouts, refused connections and the wait bound. No assertion on how long a call took,
// except generous bounds where a call must NOT have slept.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, TransportError } from "ratekeeper-client";

import {
  countingFetch,
  denied,
  fakeServer,
  granted,
  refusedUrl,
  resettingServer,
  silentServer,
} from "./helpers.js";

const apiKey = "k";

test(
  "a server that never answers: acquires return degraded decisions",
  { timeout: 30_000 },
  async () => {
    const server = await silentServer();
    try {
      const closed = new Client({ url: server.url, apiKey, timeoutMs: 200 });
      const d = await closed.acquire("r");
      assert.equal(d.degraded, true);
      assert.equal(d.allowed, false, "fails closed by default");
      assert.equal(d.cached, false);
      assert.equal(d.remaining, null);
      assert.deepEqual(d.headers, {});
      assert.equal(
        (await closed.acquire("r", { failOpen: true })).allowed,
        true,
        "per-call fail open",
      );
      assert.equal((await closed.check("r")).degraded, true);

      const open = new Client({ url: server.url, apiKey, timeoutMs: 5_000, failOpen: true });
      const o = await open.acquire("r", { timeoutMs: 200 });
      assert.equal(o.degraded, true);
      assert.equal(o.allowed, true, "the client's fail-open default");
      assert.equal((await open.acquire("r", { failOpen: false, timeoutMs: 200 })).allowed, false);

      const all = await closed.acquireAll([{ resource: "a" }, { resource: "b", key: "u" }]);
      assert.equal(all.allowed, false);
      assert.equal(all.results.length, 2);
      assert.ok(all.results.every((r) => r.degraded && !r.allowed));

      const refund = await closed.refund("r", 1).catch((e: unknown) => e);
      assert.ok(refund instanceof TransportError);
      assert.equal(refund.timedOut, true);
      await assert.rejects(closed.release("r", "ab".repeat(16)), TransportError);

      // A degraded denial is not remembered.
      const again = await closed.acquire("r");
      assert.equal(again.cached, false);
    } finally {
      await server.close();
    }
  },
);

test("a timed-out request is not retried", { timeout: 30_000 }, async () => {
  const server = await silentServer();
  try {
    const counted = countingFetch();
    const client = new Client({ url: server.url, apiKey, timeoutMs: 200, fetch: counted.fetch });
    assert.equal((await client.acquire("r")).degraded, true);
    assert.equal(counted.calls(), 1);
  } finally {
    await server.close();
  }
});

test("a refused connection is retried twice, then degraded", { timeout: 30_000 }, async () => {
  const counted = countingFetch();
  const client = new Client({
    url: await refusedUrl(),
    apiKey,
    timeoutMs: 10_000,
    fetch: counted.fetch,
  });
  const d = await client.acquire("r");
  assert.equal(d.degraded, true);
  assert.equal(d.allowed, false);
  assert.equal(counted.calls(), 3, "one try and two retries");
  const err = await client.refund("r", 1).catch((e: unknown) => e);
  assert.ok(err instanceof TransportError);
  assert.equal(err.timedOut, false);
  assert.match(err.message, /ECONNREFUSED/);
});

test("retries stop at the call's timeout", { timeout: 30_000 }, async () => {
  const counted = countingFetch();
  // 50 ms * 2^0 * at least 0.5 = 25 ms: the first backoff already exceeds a 1 ms budget.
  const client = new Client({
    url: await refusedUrl(),
    apiKey,
    timeoutMs: 1,
    fetch: counted.fetch,
  });
  assert.equal((await client.acquire("r")).degraded, true);
  assert.equal(counted.calls(), 1);
});

test(
  "a connection reset (the request may have arrived) is not retried",
  { timeout: 30_000 },
  async () => {
    const server = await resettingServer();
    try {
      const counted = countingFetch();
      const client = new Client({
        url: server.url,
        apiKey,
        timeoutMs: 5_000,
        fetch: counted.fetch,
      });
      const d = await client.acquire("r", { failOpen: true });
      assert.equal(d.degraded, true);
      assert.equal(d.allowed, true);
      assert.equal(counted.calls(), 1);
    } finally {
      await server.close();
    }
  },
);

test("wait: sleeps the retry time and asks again", { timeout: 30_000 }, async () => {
  const server = await fakeServer((_, i) => (i === 0 ? denied(100) : granted()));
  try {
    const client = new Client({ url: server.url, apiKey });
    const d = await client.acquire("r", { waitMs: 10_000 });
    assert.equal(d.allowed, true);
    assert.equal(server.requests.length, 2);
  } finally {
    await server.close();
  }
});

test(
  "wait: a denial whose retry time is past the bound returns at once",
  { timeout: 30_000 },
  async () => {
    const server = await fakeServer(() => denied(20_000));
    try {
      const client = new Client({ url: server.url, apiKey });
      const start = Date.now();
      const d = await client.acquire("r", { waitMs: 5_000 });
      assert.equal(d.allowed, false);
      assert.equal(d.retryAfterMs, 20_000);
      assert.equal(server.requests.length, 1);
      assert.ok(Date.now() - start < 4_000, "did not sleep");
      // The cached denial is past the bound too: answered at once, with no request.
      const c = await client.acquire("r", { waitMs: 5_000 });
      assert.equal(c.cached, true);
      assert.equal(server.requests.length, 1);
    } finally {
      await server.close();
    }
  },
);

test(
  "wait: a cached denial is waited out, then the server is asked",
  { timeout: 30_000 },
  async () => {
    let grant = false;
    const server = await fakeServer(() => (grant ? granted() : denied(150)));
    try {
      const client = new Client({ url: server.url, apiKey });
      assert.equal((await client.acquire("r")).allowed, false);
      grant = true;
      const d = await client.acquire("r", { waitMs: 10_000 });
      assert.equal(d.allowed, true);
      assert.equal(d.cached, false);
      assert.equal(server.requests.length, 2, "one request after the wait, none spinning");
    } finally {
      await server.close();
    }
  },
);

test(
  "wait: keeps waiting while denials fit in the bound, never spinning",
  { timeout: 30_000 },
  async () => {
    const server = await fakeServer((_, i) => (i < 3 ? denied(50) : granted()));
    try {
      const client = new Client({ url: server.url, apiKey });
      const d = await client.acquire("r", { waitMs: 10_000 });
      assert.equal(d.allowed, true);
      assert.equal(server.requests.length, 4);
    } finally {
      await server.close();
    }
  },
);

test("wait does not apply to degraded decisions", { timeout: 30_000 }, async () => {
  const server = await silentServer();
  try {
    const client = new Client({ url: server.url, apiKey, timeoutMs: 200 });
    const d = await client.acquire("r", { waitMs: 60_000 });
    assert.equal(d.degraded, true);
    assert.equal(d.allowed, false);
  } finally {
    await server.close();
  }
});
