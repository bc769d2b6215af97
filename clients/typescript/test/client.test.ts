import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { inspect } from "node:util";

import {
  BadRequest,
  Client,
  Conflict,
  Forbidden,
  Invalid,
  NotFound,
  RateLimited,
  RatekeeperError,
  Unauthorized,
  Unavailable,
  UnexpectedResponse,
  VERSION,
} from "ratekeeper-client";

import { type FakeServer, type Scripted, denied, fakeServer, granted } from "./helpers.js";

const API_KEY = "rk_secret_key_value";

test("acquire sends the request and reads a grant", async () => {
  const server = await fakeServer(() => granted({ lease_id: "ab".repeat(16) }));
  try {
    const client = new Client({ url: server.url + "/", apiKey: API_KEY });
    const d = await client.acquire("orders.create", { permits: 2, key: "user:1" });
    assert.deepEqual(d, {
      allowed: true,
      remaining: 1,
      limit: 2,
      retryAfterMs: 0,
      resetAfterMs: 5000,
      degraded: false,
      cached: false,
      policyVersion: 1,
      enforced: true,
      shadowDenied: false,
      leaseId: "ab".repeat(16),
      headers: { RateLimit: '"r";r=1;t=5', "RateLimit-Policy": '"r";q=2' },
    });
    const [req] = server.requests;
    assert.ok(req);
    assert.equal(req.method, "POST");
    assert.equal(req.url, "/v1/acquire");
    assert.equal(req.headers.authorization, `Bearer ${API_KEY}`);
    assert.equal(req.headers["user-agent"], `ratekeeper-typescript/${VERSION}`);
    assert.deepEqual(req.body, { resource: "orders.create", permits: 2, key: "user:1" });
  } finally {
    await server.close();
  }
});

test("the server's optional fields: disabled, shadow-denied, degraded", async () => {
  const replies: Scripted[] = [
    { status: 200, body: { allowed: true, enforced: false, remaining: 5, limit: 5 } },
    { status: 200, body: { allowed: true, shadow_denied: true, remaining: 0, limit: 5 } },
    { status: 200, body: { allowed: true, degraded: true, limit: 5 } },
  ];
  const server = await fakeServer((_, i) => replies[i] ?? granted());
  try {
    const client = new Client({ url: server.url, apiKey: API_KEY });
    assert.equal((await client.acquire("r")).enforced, false);
    assert.equal((await client.acquire("r")).shadowDenied, true);
    const degraded = await client.acquire("r");
    assert.equal(degraded.degraded, true);
    assert.equal(degraded.remaining, null);
    assert.equal(degraded.retryAfterMs, null);
    assert.equal(degraded.policyVersion, null);
  } finally {
    await server.close();
  }
});

test("a denial is a decision, and is answered from the denial cache until its retry time", async () => {
  let grant = false;
  const server = await fakeServer(() => (grant ? granted() : denied(60_000)));
  try {
    const client = new Client({ url: server.url, apiKey: API_KEY });
    const first = await client.acquire("r", { key: "u", permits: 2 });
    assert.equal(first.allowed, false);
    assert.equal(first.cached, false);
    assert.equal(first.retryAfterMs, 60_000);
    assert.equal(first.headers["Retry-After"], "60");
    const again = await client.acquire("r", { key: "u", permits: 3 });
    assert.equal(again.allowed, false);
    assert.equal(again.cached, true);
    assert.equal(again.remaining, 0);
    assert.equal(again.limit, 2);
    assert.ok(
      again.retryAfterMs !== null && again.retryAfterMs > 0 && again.retryAfterMs <= 60_000,
    );
    assert.equal(server.requests.length, 1, "answered without a request");
    await client.acquire("r", { key: "u", permits: 1 });
    assert.equal(server.requests.length, 2, "fewer permits go to the server");
    await client.acquire("r", { key: "v", permits: 2 });
    assert.equal(server.requests.length, 3, "another key goes to the server");
    grant = true;
    await client.check("r", { key: "u" });
    assert.equal(server.requests.length, 4, "a check (0 permits) goes to the server");
    const ok = await client.acquire("r", { key: "u", permits: 2 });
    assert.equal(ok.allowed, true, "the check's grant dropped the denial");
    assert.equal(server.requests.length, 5);
  } finally {
    await server.close();
  }
});

test("refund and release drop the denial of their resource and key", async () => {
  const server = await fakeServer((req) => {
    if (req.url === "/v1/refund") return granted({ remaining: 2 });
    if (req.url === "/v1/release")
      return { status: 200, body: { released: true, permits: 1, remaining: 2 } };
    return denied(60_000);
  });
  try {
    const client = new Client({ url: server.url, apiKey: API_KEY });
    await client.acquire("r", { key: "u" });
    const refunded = await client.refund("r", 1, { key: "u" });
    assert.equal(refunded.remaining, 2);
    assert.deepEqual(server.requests[1]?.body, { resource: "r", permits: 1, key: "u" });
    await client.acquire("r", { key: "u" });
    assert.equal(server.requests.length, 3, "asked the server again after the refund");
    const released = await client.release("r", "ab".repeat(16), { key: "u" });
    assert.deepEqual(released, { released: true, permits: 1, remaining: 2 });
    assert.deepEqual(server.requests[3]?.body, {
      resource: "r",
      lease_id: "ab".repeat(16),
      key: "u",
    });
    await client.acquire("r", { key: "u" });
    assert.equal(server.requests.length, 5, "asked the server again after the release");
  } finally {
    await server.close();
  }
});

test("denialCacheSize 0 sends every call", async () => {
  const server = await fakeServer(() => denied(60_000));
  try {
    const client = new Client({ url: server.url, apiKey: API_KEY, denialCacheSize: 0 });
    await client.acquire("r");
    const again = await client.acquire("r");
    assert.equal(again.cached, false);
    assert.equal(server.requests.length, 2);
  } finally {
    await server.close();
  }
});

test("acquireAll always asks, and remembers the denials of its items", async () => {
  const server = await fakeServer((req) => {
    if ((req.body as { all?: unknown }).all !== undefined) {
      return {
        status: 429,
        body: {
          allowed: false,
          results: [
            { allowed: true, remaining: 3, limit: 5, retry_after_ms: 0, reset_after_ms: 1 },
            { allowed: false, remaining: 0, limit: 2, retry_after_ms: 30_000, reset_after_ms: 1 },
          ],
        },
        headers: { "retry-after": "30", ratelimit: '"b";r=0;t=30' },
      };
    }
    return granted();
  });
  try {
    const client = new Client({ url: server.url, apiKey: API_KEY });
    const items = [{ resource: "a" }, { resource: "b", key: "u", permits: 2 }];
    const all = await client.acquireAll(items);
    assert.equal(all.allowed, false);
    assert.equal(all.results.length, 2);
    assert.equal(all.results[0]?.allowed, true);
    assert.equal(all.results[1]?.retryAfterMs, 30_000);
    assert.equal(all.headers["Retry-After"], "30");
    assert.deepEqual(server.requests[0]?.body, {
      all: [
        { resource: "a", permits: 1 },
        { resource: "b", permits: 2, key: "u" },
      ],
    });
    await client.acquireAll(items);
    assert.equal(server.requests.length, 2, "acquireAll is never answered locally");
    const b = await client.acquire("b", { key: "u", permits: 2 });
    assert.equal(b.cached, true, "its item's denial was remembered");
  } finally {
    await server.close();
  }
});

test("problems become one error class each, with their fields", async () => {
  const cases: [number, string, new (...args: never[]) => RatekeeperError][] = [
    [400, "malformed", BadRequest],
    [401, "unauthorized", Unauthorized],
    [403, "forbidden", Forbidden],
    [404, "not-found", NotFound],
    [404, "lease-not-held", NotFound],
    [409, "not-a-lease-policy", Conflict],
    [422, "validation", Invalid],
    [503, "unavailable", Unavailable],
    [500, "internal", UnexpectedResponse],
    [418, "teapot", UnexpectedResponse],
  ];
  let i = 0;
  const server = await fakeServer(() => {
    const [status, kind] = cases[i++] ?? [500, "x"];
    return {
      status,
      body: {
        type: `urn:ratekeeper:problem:${kind}`,
        title: `Title ${kind}`,
        status,
        detail: `detail of ${kind}`,
        ...(kind === "validation"
          ? { field: "permits", errors: [{ field: "permits", message: "must be at most 2" }] }
          : {}),
      },
    };
  });
  try {
    const client = new Client({ url: server.url, apiKey: API_KEY });
    for (const [status, kind, Class] of cases) {
      const err = await client.acquire("r").then(
        () => assert.fail(`no error for ${status}`),
        (e: unknown) => e,
      );
      assert.ok(err instanceof Class, `${status} ${kind}: ${String(err)}`);
      assert.ok(err instanceof RatekeeperError);
      assert.ok(err instanceof Error);
      assert.equal(err.name, Class.name);
      assert.equal(err.status, status);
      assert.equal(err.type, `urn:ratekeeper:problem:${kind}`);
      assert.equal(err.kind, kind);
      assert.equal(err.title, `Title ${kind}`);
      assert.equal(err.detail, `detail of ${kind}`);
      assert.match(err.message, new RegExp(`detail of ${kind}`));
      if (kind === "validation") {
        assert.equal(err.field, "permits");
        assert.deepEqual(err.errors, [{ field: "permits", message: "must be at most 2" }]);
      } else {
        assert.deepEqual(err.errors, []);
      }
    }
  } finally {
    await server.close();
  }
});

test("a reply that is not JSON is an UnexpectedResponse, and so is an error without a body", async () => {
  const replies: Scripted[] = [
    { status: 200, body: "<html>proxy</html>" },
    { status: 502, body: "Bad Gateway" },
  ];
  const server = await fakeServer((_, i) => replies[i] ?? granted());
  try {
    const client = new Client({ url: server.url, apiKey: API_KEY });
    await assert.rejects(client.acquire("r"), UnexpectedResponse);
    await assert.rejects(
      client.acquire("r"),
      (e: unknown) => e instanceof UnexpectedResponse && e.status === 502,
    );
  } finally {
    await server.close();
  }
});

test("the API key never shows in toString, JSON or inspect", () => {
  const client = new Client({ url: "http://127.0.0.1:1", apiKey: API_KEY });
  assert.ok(!String(client).includes(API_KEY));
  assert.ok(!JSON.stringify(client).includes(API_KEY));
  assert.ok(!inspect(client, { showHidden: true, depth: 5 }).includes(API_KEY));
  assert.ok(!inspect({ client }).includes(API_KEY));
});

test("url and apiKey are required", () => {
  assert.throws(() => new Client({ url: "", apiKey: API_KEY }), TypeError);
  assert.throws(() => new Client({ url: "http://x", apiKey: "" }), TypeError);
});

let leaseServer: FakeServer;
let leaseGrant = true;
before(async () => {
  leaseServer = await fakeServer((req) => {
    if (req.url === "/v1/release")
      return { status: 200, body: { released: true, permits: 1, remaining: 1 } };
    return leaseGrant ? granted({ lease_id: "cd".repeat(16) }) : denied(60_000);
  });
});
after(() => leaseServer.close());

test("lease runs the function and then releases, also when it throws", async () => {
  const client = new Client({ url: leaseServer.url, apiKey: API_KEY });
  const start = leaseServer.requests.length;
  const value = await client.lease("exports", { key: "t" }, (lease) => {
    assert.equal(lease.decision.leaseId, "cd".repeat(16));
    assert.equal(leaseServer.requests.length, start + 1, "not released yet");
    return 42;
  });
  assert.equal(value, 42);
  assert.deepEqual(leaseServer.requests[start + 1]?.body, {
    resource: "exports",
    lease_id: "cd".repeat(16),
    key: "t",
  });
  await assert.rejects(
    client.lease("exports", () => Promise.reject(new Error("boom"))),
    /boom/,
  );
  assert.equal(leaseServer.requests.at(-1)?.url, "/v1/release", "released after the throw");
});

test("lease throws RateLimited without running the function when denied", async () => {
  leaseGrant = false;
  try {
    const client = new Client({ url: leaseServer.url, apiKey: API_KEY });
    let ran = false;
    const err = await client
      .lease("exports", () => {
        ran = true;
      })
      .catch((e: unknown) => e);
    assert.ok(err instanceof RateLimited);
    assert.ok(err instanceof RatekeeperError);
    assert.equal(err.status, 429);
    assert.equal(err.decision.allowed, false);
    assert.equal(err.decision.retryAfterMs, 60_000);
    assert.equal(ran, false);
  } finally {
    leaseGrant = true;
  }
});

test("acquireLease releases once, and with Symbol.asyncDispose where the runtime has it", async () => {
  const client = new Client({ url: leaseServer.url, apiKey: API_KEY });
  const lease = await client.acquireLease("exports");
  const before = leaseServer.requests.length;
  await lease.release();
  await lease.release();
  assert.equal(leaseServer.requests.length, before + 1, "released once");
  const dispose = (Symbol as { asyncDispose?: symbol }).asyncDispose;
  if (dispose !== undefined) {
    const other = await client.acquireLease("exports");
    const fn = (other as unknown as Record<symbol, () => Promise<void>>)[dispose];
    assert.equal(typeof fn, "function");
    await fn?.call(other);
    assert.equal(leaseServer.requests.at(-1)?.url, "/v1/release");
  }
});
