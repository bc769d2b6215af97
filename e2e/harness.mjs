// Test harness for the browser tests: starts the real ratekeeper binary on a free
// loopback port with a private SQLite database and a private Redis key prefix, seeds it
// through the CLI and the admin JSON API, launches Debian's headless Chromium, and tears
// everything down again.
//
// Environment (scripts/e2e.sh sets the first; the rest have defaults):
//   RK_E2E_BIN        the server binary            (default <repo>/target/debug/ratekeeper)
//   RK_E2E_CHROMIUM   the browser                  (default /usr/bin/chromium)
//   RK_E2E_REDIS_URL  Redis for the server         (default $RK_TEST_REDIS_URL, else the server's default)
//   RK_E2E_SCREENSHOTS where screenshots go        (default e2e/screenshots)
//   RK_E2E_KEEP=1     keep the temp dir (database, server log) after the run

import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '..');

export const BIN =
  process.env.RK_E2E_BIN ||
  path.join(process.env.CARGO_TARGET_DIR || path.join(REPO, 'target'), 'debug', 'ratekeeper');
export const CHROMIUM = process.env.RK_E2E_CHROMIUM || '/usr/bin/chromium';
export const SCREENSHOTS = process.env.RK_E2E_SCREENSHOTS || path.join(HERE, 'screenshots');

/** Users the harness creates (passwords are at least 8 characters, as the server wants). */
export const USERS = {
  root: { username: 'root', password: 'root-e2e-password', admin: true },
  olivia: { username: 'olivia', password: 'olivia-e2e-password' },
  victor: { username: 'victor', password: 'victor-e2e-password' },
  // A member of no application.
  nadia: { username: 'nadia', password: 'nadia-e2e-password' },
};

/** The app the harness registers; its name has characters that must be HTML-escaped. */
export const APP = { slug: 'shop', name: 'Shop & <Co>', description: 'web shop' };

const LISTEN_TIMEOUT_MS = 60_000;
const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 15_000;

// ------------------------------------------------------------------ small helpers

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*[A-Za-z]/g;

/**
 * The bound address in one server log line, or null. src/startup.rs logs
 * `tracing::info!(address = %listener.local_addr()?, "ratekeeper listening")`, which the
 * text formatter writes as `... ratekeeper listening address=127.0.0.1:PORT` (with ANSI
 * colours around the field name) and the JSON one (RATEKEEPER_LOG_JSON) as
 * `{"fields":{"message":"ratekeeper listening","address":"127.0.0.1:PORT"},...}`.
 */
export function listeningAddress(line) {
  const plain = line.replace(ANSI, '');
  if (plain.trimStart().startsWith('{')) {
    try {
      const fields = JSON.parse(plain).fields || {};
      if (fields.message === 'ratekeeper listening' && fields.address) return String(fields.address);
    } catch {
      // not JSON after all: fall through to the text form
    }
  }
  const m = /ratekeeper listening\b.*?\baddress=(\S+)/.exec(plain);
  return m ? m[1] : null;
}

/** Polls `check` (async, truthy = done) every `intervalMs` until it holds or time runs out. */
export async function pollUntil(what, check, { timeoutMs = 10_000, intervalMs = 100 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (e) {
      last = e;
    }
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last.message}` : ''}`);
    }
    await delay(intervalMs);
  }
}

/** The server's environment: ours minus any RATEKEEPER_* (an unknown one stops the start). */
function serverEnv(extra) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('RATEKEEPER_')) env[k] = v;
  }
  const redis = process.env.RK_E2E_REDIS_URL || process.env.RK_TEST_REDIS_URL;
  if (redis) env.RATEKEEPER_REDIS_URL = redis;
  env.NO_COLOR = '1';
  return { ...env, ...extra };
}

/** Runs the CLI to completion; resolves with stdout, rejects with stderr on failure. */
function runCli(env, args, input) {
  return new Promise((resolve, reject) => {
    const child = spawn(BIN, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0) resolve(out);
      else reject(new Error(`ratekeeper ${args.join(' ')} exited ${code ?? signal}:\n${err.replace(ANSI, '')}`));
    });
    child.stdin.end(input ?? '');
  });
}

// ------------------------------------------------------------------ the server

export class Server {
  constructor() {
    this.dir = mkdtempSync(path.join(tmpdir(), 'rk-e2e-'));
    this.prefix = `rke2e-${randomBytes(6).toString('hex')}`;
    this.env = serverEnv({
      RATEKEEPER_LISTEN: '127.0.0.1:0',
      RATEKEEPER_DATABASE_URL: `sqlite://${path.join(this.dir, 'rk.db')}`,
      RATEKEEPER_REDIS_PREFIX: this.prefix,
      RATEKEEPER_SYNC_INTERVAL_MS: '500',
      // The tests' webhook receivers listen on loopback.
      RATEKEEPER_WEBHOOK_ALLOW_PRIVATE: 'true',
    });
    this.logFile = path.join(this.dir, 'server.log');
    this.log = '';
    this.child = null;
    this.base = null;
    this.token = null; // root's personal access token
    this.apiKey = null; // an API key of the app `shop`
  }

  /** Users (CLI), the server, then the app, its members and a key (admin JSON API). */
  async start() {
    if (!existsSync(BIN)) {
      throw new Error(`no server binary at ${BIN}: run scripts/e2e.sh, or cargo build --bin ratekeeper`);
    }
    for (const u of Object.values(USERS)) {
      const args = ['user', 'create', u.username];
      if (u.admin) args.push('--admin');
      await runCli(this.env, args, `${u.password}\n`);
    }
    const out = await runCli(this.env, ['token', 'create', USERS.root.username]);
    // The token is printed alone on its line.
    this.token = out.split('\n').map((l) => l.trim()).filter(Boolean).pop();
    if (!this.token) throw new Error(`token create printed no token: ${JSON.stringify(out)}`);

    await this.#serve();

    await this.api('POST', '/api/v1/apps', APP, 201);
    await this.api('PUT', `/api/v1/apps/${APP.slug}/members/olivia`, { role: 'owner' }, 200);
    await this.api('PUT', `/api/v1/apps/${APP.slug}/members/victor`, { role: 'viewer' }, 200);
    const key = await this.api('POST', `/api/v1/apps/${APP.slug}/keys`, { label: 'e2e' }, 201);
    if (!key || typeof key.key !== 'string') throw new Error(`key create answered ${JSON.stringify(key)}`);
    this.apiKey = key.key;
    return this;
  }

  async #serve() {
    const logStream = createWriteStream(this.logFile);
    const child = spawn(BIN, ['serve'], { env: this.env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    this.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    // If the test process dies without its teardown, do not leave the server behind.
    this.killOnExit = () => child.exitCode === null && child.kill('SIGKILL');
    process.on('exit', this.killOnExit);

    const address = new Promise((resolve, reject) => {
      let pending = '';
      const onData = (d) => {
        const text = d.toString();
        this.log += text;
        logStream.write(text);
        pending += text;
        const lines = pending.split('\n');
        pending = lines.pop();
        for (const line of lines) {
          const addr = listeningAddress(line);
          if (addr) resolve(addr);
        }
      };
      child.stderr.on('data', onData);
      child.stdout.on('data', onData);
      child.on('error', reject);
      this.exited.then(({ code, signal }) =>
        reject(new Error(`ratekeeper serve exited (${code ?? signal}) before listening:\n${this.logTail()}`)),
      );
    });
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no "ratekeeper listening" log line in ${LISTEN_TIMEOUT_MS} ms:\n${this.logTail()}`)),
        LISTEN_TIMEOUT_MS,
      );
    });
    let addr;
    try {
      addr = await Promise.race([address, timeout]);
    } finally {
      clearTimeout(timer);
    }
    this.base = `http://${addr}`;
    let last = 'no answer';
    try {
      await pollUntil(
        'GET /readyz to answer 200',
        async () => {
          if (child.exitCode !== null) throw new Error('the server exited');
          const r = await fetch(`${this.base}/readyz`);
          last = `${r.status} ${(await r.text()).slice(0, 300)}`;
          return r.status === 200;
        },
        { timeoutMs: READY_TIMEOUT_MS },
      );
    } catch (e) {
      throw new Error(`${e.message}; last answer: ${last}\n--- server log ---\n${this.logTail()}`);
    }
  }

  /** The last lines of the server's log, for failure messages. */
  logTail(lines = 40) {
    return this.log.replace(ANSI, '').split('\n').slice(-lines).join('\n');
  }

  url(p) {
    return new URL(p, this.base).toString();
  }

  /** One admin JSON API call as root; checks the status when `expect` is given. */
  async api(method, p, body, expect) {
    const r = await fetch(this.url(p), {
      method,
      headers: {
        authorization: `Bearer ${this.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    if (expect !== undefined && r.status !== expect) {
      throw new Error(`${method} ${p}: expected ${expect}, got ${r.status}: ${text}`);
    }
    const json = text && (r.headers.get('content-type') || '').includes('json') ? JSON.parse(text) : text;
    return expect === undefined ? { status: r.status, body: json } : json;
  }

  /** POST /v1/acquire with the app's API key (and `key`, for a per_key policy): {status, body}. */
  async acquire(resource, permits = 1, key = undefined) {
    const r = await fetch(this.url('/v1/acquire'), {
      method: 'POST',
      headers: { authorization: `Bearer ${this.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ resource, permits, key }),
    });
    const text = await r.text();
    let body = text;
    try {
      body = JSON.parse(text);
    } catch {
      // problem bodies are JSON too; keep the text if not
    }
    return { status: r.status, body };
  }

  /**
   * Another instance of the same deployment (this one's database and Redis prefix), as a
   * second server behind a load balancer, reaching Redis at `redisUrl`; its `stop` leaves
   * the shared Redis keys to this one.
   */
  async startInstance(redisUrl) {
    const other = new Server();
    other.env = { ...this.env, RATEKEEPER_REDIS_URL: redisUrl };
    other.prefix = this.prefix;
    other.token = this.token;
    other.apiKey = this.apiKey;
    other.sharesRedisKeys = true;
    await other.#serve();
    return other;
  }

  /** The Redis this server reaches: its URL's host, port and path (the database). */
  redisAddress() {
    const url = new URL(this.env.RATEKEEPER_REDIS_URL || 'redis://127.0.0.1:6379');
    return { host: url.hostname, port: Number(url.port || 6379), path: url.pathname, cluster: url.href.includes(',') };
  }

  /** SIGTERM, wait for the exit (SIGKILL after a while), remove the temp dir and Redis keys. */
  async stop() {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      let timer;
      const result = await Promise.race([
        this.exited,
        new Promise((resolve) => (timer = setTimeout(() => resolve(null), STOP_TIMEOUT_MS))),
      ]);
      clearTimeout(timer);
      if (result === null) {
        child.kill('SIGKILL');
        await this.exited;
        throw new Error(`ratekeeper did not exit within ${STOP_TIMEOUT_MS} ms of SIGTERM:\n${this.logTail()}`);
      }
      this.exitStatus = result;
    }
    if (this.killOnExit) process.off('exit', this.killOnExit);
    if (!this.sharesRedisKeys) this.#dropRedisKeys();
    if (process.env.RK_E2E_KEEP === '1') {
      console.log(`# kept ${this.dir} (database, server.log)`);
    } else {
      rmSync(this.dir, { recursive: true, force: true });
    }
    return this.exitStatus;
  }

  /** Best effort: delete this run's Redis keys with redis-cli, when it is there. */
  #dropRedisKeys() {
    const url = this.env.RATEKEEPER_REDIS_URL || 'redis://127.0.0.1:6379';
    if (url.includes(',')) return; // a cluster: keys are on several nodes; leave them
    const scan = spawnSync('redis-cli', ['-u', url, '--scan', '--pattern', `${this.prefix}*`], {
      encoding: 'utf8',
      timeout: 10_000,
    });
    if (scan.status !== 0 || !scan.stdout) return;
    const keys = scan.stdout.split('\n').filter(Boolean);
    for (let i = 0; i < keys.length; i += 500) {
      spawnSync('redis-cli', ['-u', url, 'unlink', ...keys.slice(i, i + 500)], { timeout: 10_000 });
    }
  }
}

// ------------------------------------------------------------------ the browser

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Debian's Chromium, headless. Never `playwright install`. */
export function launchBrowser() {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`no browser at ${CHROMIUM}: apt-get install -y chromium (scripts/e2e.sh does)`);
  }
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
}

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

/**
 * Full-page screenshots of the page as it is, at desktop and at phone width, into
 * e2e/screenshots/<name>-<width>.png; the viewport is restored afterwards.
 */
export async function screenshots(page, name) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const before = page.viewportSize();
  for (const size of [DESKTOP, PHONE]) {
    await page.setViewportSize(size);
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-${size.width}.png`), fullPage: true });
  }
  if (before) await page.setViewportSize(before);
}
