// The middleware inside a real Express app: against a scripted server (always), and against
// a real ratekeeper server when one can be started (see real-server.ts).
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { after, before, describe, test } from "node:test";

import express from "express";
import { Client } from "ratekeeper-client";
import { rateLimit } from "ratekeeper-client/express";

import { denied, fakeServer, granted, silentServer } from "./helpers.js";
import { type RealServer, startRealServer } from "./real-server.js";

async function serve(app: express.Express): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function app(client: Client, resource = "web"): express.Express {
  const a = express();
  a.use(
    rateLimit<express.Request>({ client, resource, key: (req) => req.get("x-user") ?? undefined }),
  );
  a.get("/", (_req, res) => {
    res.send("hello");
  });
  a.use((err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(500).send(`error: ${err.name}`);
  });
  return a;
}

test("granted: the route runs with the RateLimit headers; denied: 429 with Retry-After", async () => {
  const rk = await fakeServer((_, i) => (i === 0 ? granted() : denied(7_000)));
  const web = await serve(app(new Client({ url: rk.url, apiKey: "k" })));
  try {
    const ok = await fetch(web.url, { headers: { "x-user": "u1" } });
    assert.equal(ok.status, 200);
    assert.equal(await ok.text(), "hello");
    assert.equal(ok.headers.get("ratelimit"), '"r";r=1;t=5');
    assert.equal(ok.headers.get("ratelimit-policy"), '"r";q=2');
    assert.equal(ok.headers.get("retry-after"), null);
    assert.deepEqual(rk.requests[0]?.body, { resource: "web", permits: 1, key: "u1" });

    const no = await fetch(web.url, { headers: { "x-user": "u1" } });
    assert.equal(no.status, 429);
    assert.equal(no.headers.get("retry-after"), "7");
    assert.equal(no.headers.get("ratelimit"), '"r";r=0;t=7');
    assert.equal(no.headers.get("content-type"), "application/problem+json");
    const body = (await no.json()) as { status: number };
    assert.equal(body.status, 429);

    const cached = await fetch(web.url, { headers: { "x-user": "u1" } });
    assert.equal(cached.status, 429, "the denial cache answers");
    assert.ok(Number(cached.headers.get("retry-after")) >= 1);
    assert.equal(rk.requests.length, 2);
  } finally {
    await web.close();
    await rk.close();
  }
});

test("server errors go to next(err); an unreachable server fails closed with 503", async () => {
  const rk = await fakeServer(() => ({
    status: 404,
    body: {
      type: "urn:ratekeeper:problem:not-found",
      title: "Not found",
      status: 404,
      detail: "no",
    },
  }));
  const silent = await silentServer();
  const web = await serve(app(new Client({ url: rk.url, apiKey: "k" })));
  const web2 = await serve(app(new Client({ url: silent.url, apiKey: "k", timeoutMs: 200 })));
  try {
    const res = await fetch(web.url);
    assert.equal(res.status, 500);
    assert.equal(await res.text(), "error: NotFound");
    const down = await fetch(web2.url);
    assert.equal(down.status, 503);
    assert.equal(down.headers.get("retry-after"), "1");
  } finally {
    await web.close();
    await web2.close();
    await rk.close();
    await silent.close();
  }
});

describe("against a real ratekeeper server", () => {
  let real: RealServer | string = "not started";
  before(async () => {
    real = await startRealServer([
      { name: "web", algorithm: "token_bucket", rate: 0.001, max_permits: 2 },
      {
        name: "web-keyed",
        scope: "per_key",
        algorithm: "token_bucket",
        rate: 0.001,
        max_permits: 1,
      },
    ]);
  });
  after(async () => {
    if (typeof real !== "string") await real.stop();
  });

  test("two grants with headers, then 429 with Retry-After and RateLimit", async (t) => {
    if (typeof real === "string") return t.skip(real);
    const client = new Client({ url: real.url, apiKey: real.apiKey });
    const web = await serve(app(client, `${real.prefix}.web`));
    try {
      for (const remaining of [1, 0]) {
        const res = await fetch(web.url);
        assert.equal(res.status, 200);
        assert.match(res.headers.get("ratelimit") ?? "", new RegExp(`;r=${remaining};`));
        assert.match(res.headers.get("ratelimit-policy") ?? "", /;q=2/);
      }
      const res = await fetch(web.url);
      assert.equal(res.status, 429);
      assert.ok(Number(res.headers.get("retry-after")) >= 1);
      assert.match(res.headers.get("ratelimit") ?? "", /;r=0;/);
      assert.match(res.headers.get("ratelimit-policy") ?? "", /;q=2/);
    } finally {
      await web.close();
    }
  });

  test("per-key limits follow the key function", async (t) => {
    if (typeof real === "string") return t.skip(real);
    const client = new Client({ url: real.url, apiKey: real.apiKey });
    const web = await serve(app(client, `${real.prefix}.web-keyed`));
    try {
      const a1 = await fetch(web.url, { headers: { "x-user": "alice" } });
      const a2 = await fetch(web.url, { headers: { "x-user": "alice" } });
      const b1 = await fetch(web.url, { headers: { "x-user": "bob" } });
      assert.deepEqual([a1.status, a2.status, b1.status], [200, 429, 200]);
    } finally {
      await web.close();
    }
  });
});
