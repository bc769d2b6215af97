// Local servers for the tests: a scripted HTTP server, one that never answers, one that
// resets every connection, and an address where nothing listens.
import http from "node:http";
import net from "node:net";

export interface Recorded {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

export interface Scripted {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface FakeServer {
  url: string;
  requests: Recorded[];
  close(): Promise<void>;
}

/** An HTTP server answering each request with `answer(request, index)`. */
export async function fakeServer(
  answer: (req: Recorded, index: number) => Scripted | Promise<Scripted>,
): Promise<FakeServer> {
  const requests: Recorded[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // keep the text
      }
      const recorded: Recorded = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body,
      };
      requests.push(recorded);
      void Promise.resolve(answer(recorded, requests.length - 1)).then((s) => {
        const payload =
          s.body === undefined ? "" : typeof s.body === "string" ? s.body : JSON.stringify(s.body);
        const type =
          s.status >= 400 && s.status !== 429 ? "application/problem+json" : "application/json";
        res.writeHead(s.status, { "content-type": type, ...s.headers });
        res.end(payload);
      });
    });
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A TCP server that accepts connections and never answers (nor closes them). */
export async function silentServer(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
    socket.on("close", () => sockets.delete(socket));
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A TCP server that accepts each connection and resets it at once. */
export async function resettingServer(): Promise<{ url: string; close(): Promise<void> }> {
  const server = net.createServer((socket) => {
    socket.on("error", () => undefined);
    socket.resetAndDestroy();
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The URL of a port on which nothing listens (it was free a moment ago). */
export async function refusedUrl(): Promise<string> {
  const server = net.createServer();
  const port = await listen(server);
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/** A fetch that counts its calls, then does what the global fetch does. */
export function countingFetch(): { fetch: typeof fetch; calls: () => number } {
  let calls = 0;
  return {
    fetch: (input, init) => {
      calls++;
      return fetch(input, init);
    },
    calls: () => calls,
  };
}

function listen(server: net.Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      if (address === null || typeof address === "string") {
        reject(new Error("no port"));
        return;
      }
      resolve(address.port);
    });
  });
}

/** A granted single-acquire reply. */
export function granted(fields: Record<string, unknown> = {}): Scripted {
  return {
    status: 200,
    body: {
      allowed: true,
      remaining: 1,
      limit: 2,
      retry_after_ms: 0,
      reset_after_ms: 5000,
      policy_version: 1,
      ...fields,
    },
    headers: { "ratelimit-policy": '"r";q=2', ratelimit: '"r";r=1;t=5' },
  };
}

/** A denied single-acquire reply. */
export function denied(retryAfterMs: number, fields: Record<string, unknown> = {}): Scripted {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return {
    status: 429,
    body: {
      allowed: false,
      remaining: 0,
      limit: 2,
      retry_after_ms: retryAfterMs,
      reset_after_ms: retryAfterMs + 5000,
      policy_version: 1,
      ...fields,
    },
    headers: {
      "ratelimit-policy": '"r";q=2',
      ratelimit: `"r";r=0;t=${seconds}`,
      "retry-after": String(seconds),
    },
  };
}
