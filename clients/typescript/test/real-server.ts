// Starts a real ratekeeper server for the tests that need one: the binary named by
// RK_RATEKEEPER_BIN (or RK_CLIENTS_BIN), else the repository's target/debug/ratekeeper; Redis from
// RK_TEST_REDIS_URL (default redis://127.0.0.1:6379), keys under a random prefix; SQLite in
// a temporary directory. Without a binary or a reachable Redis, `startRealServer` answers
// a reason to skip.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export interface RealServer {
  url: string;
  /** Prefix of every app and policy this server was given. */
  prefix: string;
  /** The API key of app `<prefix>-app`. */
  apiKey: string;
  /** The API key of app `<prefix>-other`, which no policy allows. */
  otherKey: string;
  stop(): Promise<void>;
}

export type PolicySpec = Record<string, unknown> & { name: string };

/** The repository's root (the directory holding clients/typescript). */
export function repoRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, "package.json")) || path.basename(dir) !== "typescript") {
    const up = path.dirname(dir);
    if (up === dir) throw new Error("clients/typescript not found");
    dir = up;
  }
  return path.resolve(dir, "..", "..");
}

function binary(): string | undefined {
  const fromEnv = process.env.RK_RATEKEEPER_BIN ?? process.env.RK_CLIENTS_BIN;
  if (fromEnv) return fromEnv;
  const built = path.join(repoRoot(), "target", "debug", "ratekeeper");
  return existsSync(built) ? built : undefined;
}

function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/**
 * A fresh server with apps `<prefix>-app` and `<prefix>-other` and the given policies
 * (each named `<prefix>.<name>`, owned and allowed to `<prefix>-app`), or a reason why not.
 */
export async function startRealServer(policies: PolicySpec[]): Promise<RealServer | string> {
  const bin = binary();
  if (bin === undefined) return "no ratekeeper binary (set RK_RATEKEEPER_BIN)";
  const redisUrl = process.env.RK_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
  const redis = new URL(redisUrl);
  if (!(await reachable(redis.hostname, Number(redis.port || 6379)))) {
    return `no Redis at ${redisUrl}`;
  }
  const dir = mkdtempSync(path.join(tmpdir(), "rk-ts-"));
  const prefix = `rkts${randomBytes(4).toString("hex")}`;
  const env = {
    ...process.env,
    RATEKEEPER_LISTEN: "127.0.0.1:0",
    RATEKEEPER_DATABASE_URL: `sqlite://${dir}/rk.db?mode=rwc`,
    RATEKEEPER_REDIS_URL: redisUrl,
    // Under the repository's test run (RK_TEST_RUN), a prefix its cleanup sweeps.
    RATEKEEPER_REDIS_PREFIX: process.env.RK_TEST_RUN
      ? `rktest-${process.env.RK_TEST_RUN}-ts-${prefix}`
      : `rkclient-ts-${prefix}`,
    RATEKEEPER_LOG_JSON: "false",
    NO_COLOR: "1",
  };
  const child = spawn(bin, ["serve"], { env, stdio: ["ignore", "pipe", "pipe"] });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const address = await listeningAddress(child);
    const url = `http://${address}`;
    const token = await new Promise<string>((resolve, reject) => {
      execFile(bin, ["token", "create", "admin"], { env, timeout: 30_000 }, (err, stdout) => {
        if (err) reject(new Error(`ratekeeper token create admin: ${err.message}`));
        else resolve(stdout.trim().split("\n").pop() ?? "");
      });
    });
    const admin = async (urlPath: string, body: unknown): Promise<Record<string, unknown>> => {
      const res = await fetch(url + urlPath, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`POST ${urlPath}: ${res.status} ${text}`);
      return JSON.parse(text) as Record<string, unknown>;
    };
    const app = `${prefix}-app`;
    const other = `${prefix}-other`;
    await admin("/api/v1/apps", { slug: app, name: app, description: "client tests" });
    await admin("/api/v1/apps", { slug: other, name: other, description: "client tests" });
    const apiKey = String((await admin(`/api/v1/apps/${app}/keys`, { label: "tests" })).key);
    const otherKey = String((await admin(`/api/v1/apps/${other}/keys`, { label: "tests" })).key);
    for (const policy of policies) {
      await admin("/api/v1/policies", {
        owner_app: app,
        allowed_apps: [app],
        ...policy,
        name: `${prefix}.${policy.name}`,
      });
    }
    return { url, prefix, apiKey, otherKey, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

function listeningAddress(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let log = "";
    const timer = setTimeout(() => {
      reject(new Error(`ratekeeper did not start within 30 s:\n${log}`));
    }, 30_000);
    const onData = (chunk: Buffer) => {
      log += chunk.toString("utf8");
      // eslint-disable-next-line no-control-regex
      const plain = log.replace(/\x1b\[[0-9;]*m/g, "");
      const m = /ratekeeper listening.*?address=(\S+)/.exec(plain);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`ratekeeper exited (${code}):\n${log}`));
    });
  });
}
